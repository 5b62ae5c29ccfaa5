//! The in-memory cluster keeps objects as the API server does: resource versions and
//! generations, guarded patches and status writes, finalizers, the fence on target writes,
//! faults on cue, and the hooks tests drive it with.

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::{BindingPayload, DecisionPayload};
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::PatchOp;
use mds_core::patch::{self, TargetShape};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{Fault, Kind, MemoryCluster, WriteKind, ready as now};
use mds_worker::{Cluster, FINALIZER, ScalerKey, WriteError};
use serde_json::json;

fn key() -> ScalerKey {
    ScalerKey {
        namespace: "ns".into(),
        name: "llm".into(),
    }
}

fn binding() -> String {
    BindingPayload {
        scaler_name: "llm".into(),
        scaler_uid: "scaler-1".into(),
        term: 1,
    }
    .to_annotation()
}

fn cluster() -> MemoryCluster {
    let c = MemoryCluster::new();
    let target = mk_target("llm")
        .namespace("ns")
        .uid("md-1")
        .role(mk_role("server").replicas(2));
    c.apply(Kind::Target, target.build()).unwrap();
    let scaler = mk_scaler("llm").stored("ns", "scaler-1", "1");
    c.apply(
        Kind::Scaler,
        scaler.role_bounds("server", 1, 8).queue_depth("10").build(),
    )
    .unwrap();
    c
}

fn target(c: &MemoryCluster) -> ModelDeployment {
    serde_json::from_value(c.get(Kind::Target, "ns", "llm").unwrap()).unwrap()
}

fn scaler(c: &MemoryCluster) -> ModelDeploymentScaler {
    serde_json::from_value(c.get(Kind::Scaler, "ns", "llm").unwrap()).unwrap()
}

fn shape(c: &MemoryCluster) -> TargetShape {
    let t = c.get(Kind::Target, "ns", "llm").unwrap();
    TargetShape {
        roles: vec![(
            "server".into(),
            t["spec"]["roles"][0]["replicas"].as_i64().unwrap() as i32,
        )],
        has_annotations: t["metadata"]["annotations"].is_object(),
        has_decision: false,
        resource_version: t["metadata"]["resourceVersion"].as_str().map(String::from),
    }
}

fn bound(c: &MemoryCluster) {
    now(c.patch_target("ns", "llm", &patch::bind(&shape(c), &binding()))).unwrap();
}

fn test_replicas(n: i64) -> PatchOp {
    PatchOp::Test {
        path: "/spec/roles/0/replicas".into(),
        value: json!(n),
    }
}

fn replace_replicas(n: i64) -> PatchOp {
    PatchOp::Replace {
        path: "/spec/roles/0/replicas".into(),
        value: json!(n),
    }
}

fn meta(c: &MemoryCluster, kind: Kind) -> (String, i64) {
    let d = c.get(kind, "ns", "llm").unwrap();
    let m = &d["metadata"];
    (
        m["resourceVersion"].as_str().unwrap().to_string(),
        m["generation"].as_i64().unwrap(),
    )
}

#[test]
fn resource_version_moves_on_every_write_and_generation_only_on_spec_changes() {
    let c = cluster();
    let (rv0, g0) = meta(&c, Kind::Target);
    assert_eq!(g0, 1);
    bound(&c); // annotations only
    let (rv1, g1) = meta(&c, Kind::Target);
    assert_ne!(rv0, rv1);
    assert_eq!(g1, 1, "an annotation is not spec");
    let s = scaler(&c);
    let written = now(c.write_status(&s, &ModelDeploymentScalerStatus::default())).unwrap();
    assert_ne!(
        written.metadata.resource_version,
        s.metadata.resource_version
    );
    assert_eq!(
        written.metadata.generation,
        Some(1),
        "a status write keeps the generation"
    );
    let mut changed = c.get(Kind::Scaler, "ns", "llm").unwrap();
    changed["spec"]["mode"] = json!("Shadow");
    let stored = c.apply(Kind::Scaler, changed).unwrap();
    assert_eq!(stored["metadata"]["generation"], json!(2));
    assert_eq!(c.resource_version(), 5);
}

#[test]
fn a_failed_test_op_is_a_conflict_and_changes_nothing() {
    let c = cluster();
    let before = c.get(Kind::Target, "ns", "llm").unwrap();
    let ops = [test_replicas(5), replace_replicas(6)];
    let err = now(c.patch_target("ns", "llm", &ops)).unwrap_err();
    assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
    let bad = [PatchOp::Remove {
        path: "/spec/nothing".into(),
    }];
    let err = now(c.patch_target("ns", "llm", &bad)).unwrap_err();
    assert!(
        matches!(err, WriteError::Conflict(_)),
        "an unapplicable patch: {err:?}"
    );
    assert_eq!(c.get(Kind::Target, "ns", "llm").unwrap(), before);
}

#[test]
fn a_status_write_from_a_stale_read_is_a_conflict() {
    let c = cluster();
    let stale = scaler(&c);
    now(c.write_status(&stale, &ModelDeploymentScalerStatus::default())).unwrap();
    let err = now(c.write_status(&stale, &ModelDeploymentScalerStatus::default())).unwrap_err();
    assert!(
        matches!(err, WriteError::Conflict(ref m) if m.contains("409")),
        "{err:?}"
    );
    let err = now(c.set_finalizer(&stale, true)).unwrap_err();
    assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
}

#[test]
fn a_delete_held_by_a_finalizer_marks_the_object_until_the_finalizer_goes() {
    let c = cluster();
    let s = now(c.set_finalizer(&scaler(&c), true)).unwrap();
    assert_eq!(s.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    let (_, g) = meta(&c, Kind::Scaler);
    c.delete(
        Kind::Scaler,
        "ns",
        "llm",
        Timestamp::from_second(1_800_000_000).unwrap(),
    )
    .unwrap();
    let held = scaler(&c);
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.metadata.generation,
        Some(g + 1),
        "a held delete bumps the generation"
    );
    assert!(now(c.snapshot(&key())).is_some());
    now(c.set_finalizer(&held, false)).unwrap();
    assert!(c.get(Kind::Scaler, "ns", "llm").is_none());
    assert!(now(c.snapshot(&key())).is_none());
    let err = c
        .delete(Kind::Target, "ns", "gone", Timestamp::UNIX_EPOCH)
        .unwrap_err();
    assert!(matches!(err, WriteError::NotFound(_)));
}

#[test]
fn the_fence_refuses_a_hand_count_change_and_accepts_a_commit() {
    let c = cluster();
    bound(&c);
    let by_hand = [replace_replicas(7)];
    let err = c.patch("ns", "llm", &by_hand).unwrap_err();
    assert!(
        matches!(err, WriteError::Refused(ref m) if m.contains("denied the request")),
        "{err:?}"
    );
    let vector = [("server".to_string(), 3)].into();
    let decision = DecisionPayload {
        decision_id: "d1".into(),
        term: 1,
        vector,
    }
    .to_annotation();
    let ops = patch::commit(
        &shape(&c),
        &binding(),
        &[("server".to_string(), 3)].into(),
        &decision,
    );
    let written = now(c.patch_target("ns", "llm", &ops)).unwrap();
    assert_eq!(written.spec.roles[0].replicas, Some(3));
    assert_eq!(target(&c).metadata.generation, Some(2));
}

#[test]
fn a_scaler_that_fails_validation_is_refused_naming_the_field() {
    let c = cluster();
    let mut doc = c.get(Kind::Scaler, "ns", "llm").unwrap();
    doc["spec"]["targetRef"]["name"] = json!("");
    let err = c.apply(Kind::Scaler, doc).unwrap_err();
    assert!(
        matches!(err, WriteError::Refused(ref m) if m.contains("targetRef")),
        "{err:?}"
    );
    let err = c
        .apply(Kind::Pod, json!({"metadata": {"namespace": "ns"}}))
        .unwrap_err();
    assert!(matches!(err, WriteError::Refused(ref m) if m.contains("metadata.name")));
}

#[test]
fn each_scripted_fault_answers_one_write_and_applies_nothing() {
    let c = cluster();
    let cases = [
        (Fault::Conflict, "conflict"),
        (Fault::Unavailable, "unavailable"),
        (Fault::Forbidden, "refused"),
        (Fault::Invalid, "refused"),
        (Fault::Timeout, "unavailable"),
    ];
    for (fault, kind) in cases {
        for write in [
            WriteKind::PatchTarget,
            WriteKind::Status,
            WriteKind::Finalizer,
        ] {
            c.script(write, fault);
            let rv = c.resource_version();
            let s = scaler(&c);
            let err = match write {
                WriteKind::PatchTarget => now(c.patch_target("ns", "llm", &[])).map(|_| ()),
                WriteKind::Status => {
                    now(c.write_status(&s, &ModelDeploymentScalerStatus::default())).map(|_| ())
                }
                WriteKind::Finalizer => now(c.set_finalizer(&s, true)).map(|_| ()),
            }
            .unwrap_err();
            assert_eq!(err.kind(), kind, "{fault:?} on {write:?}");
            assert_eq!(c.resource_version(), rv, "{fault:?} on {write:?} wrote");
        }
    }
    // The script is spent: the next write lands.
    now(c.write_status(&scaler(&c), &ModelDeploymentScalerStatus::default())).unwrap();
}

fn outcomes(seed: u64) -> Vec<String> {
    let c = cluster();
    c.seed_faults(seed, 300);
    (0..40)
        .map(
            |_| match now(c.write_status(&scaler(&c), &ModelDeploymentScalerStatus::default())) {
                Ok(_) => "ok".to_string(),
                Err(e) => e.kind().to_string(),
            },
        )
        .collect()
}

#[test]
fn seeded_faults_repeat_exactly_for_a_seed() {
    let a = outcomes(7);
    assert_eq!(a, outcomes(7));
    let faults = a.iter().filter(|o| *o != "ok").count();
    assert!(
        (4..=24).contains(&faults),
        "about 30% of 40 writes fail: {a:?}"
    );
    assert_ne!(a, outcomes(8));
}

#[test]
fn a_lagging_watch_cache_serves_the_state_of_writes_ago() {
    let c = cluster();
    let pod = mk_pod("llm", "server", 0)
        .namespace("ns")
        .uid("pod-0")
        .build();
    c.apply(Kind::Pod, pod).unwrap();
    c.set_lag(1);
    let s = scaler(&c);
    now(c.write_status(&s, &ModelDeploymentScalerStatus::default())).unwrap();
    let snap = now(c.snapshot(&key())).unwrap();
    assert_eq!(
        snap.scaler.metadata.resource_version, s.metadata.resource_version,
        "one write behind"
    );
    assert_eq!(snap.pods.len(), 1);
    assert!(
        snap.workloads.is_none(),
        "Workloads are not served by default"
    );
    c.set_lag(0);
    bound(&c);
    let snap = now(c.snapshot(&key())).unwrap();
    assert_eq!(
        snap.scaler.metadata.resource_version,
        scaler(&c).metadata.resource_version
    );
}

fn replicas(c: &MemoryCluster) -> i64 {
    target_doc(c)["spec"]["roles"][0]["replicas"]
        .as_i64()
        .unwrap()
}

fn target_doc(c: &MemoryCluster) -> serde_json::Value {
    c.get(Kind::Target, "ns", "llm").unwrap()
}

#[test]
fn an_error_set_for_the_next_or_every_write_is_answered_as_it_is_and_counted() {
    let c = cluster();
    let refusal = WriteError::Refused("the names would collide (HTTP 422)".into());
    c.fail_next(WriteKind::PatchTarget, WriteError::Conflict("first".into()));
    c.fail_every(WriteKind::PatchTarget, Some(refusal.clone()));
    let rv = c.resource_version();
    let first = now(c.patch_target("ns", "llm", &[])).unwrap_err();
    assert_eq!(first, WriteError::Conflict("first".into()));
    for _ in 0..2 {
        assert_eq!(now(c.patch_target("ns", "llm", &[])).unwrap_err(), refusal);
    }
    assert_eq!(c.resource_version(), rv, "nothing was applied");
    c.fail_every(WriteKind::PatchTarget, None);
    now(c.patch_target("ns", "llm", &[])).unwrap();
    assert_eq!(c.attempts(WriteKind::PatchTarget), 4);
    assert_eq!(c.attempts(WriteKind::Status), 0, "counted per kind");
}

#[test]
fn an_edit_before_the_next_write_lands_first_and_waits_out_a_faulted_write() {
    let c = cluster();
    let ops = [test_replicas(2), replace_replicas(6)];
    c.before_next_write(WriteKind::PatchTarget, |objects| {
        objects.edit(Kind::Target, "ns", "llm", |t| {
            t["spec"]["roles"][0]["replicas"] = json!(3);
        });
    });
    c.script(WriteKind::PatchTarget, Fault::Unavailable);
    now(c.patch_target("ns", "llm", &ops)).unwrap_err();
    assert_eq!(replicas(&c), 2, "a faulted write leaves the edit waiting");
    let err = now(c.patch_target("ns", "llm", &ops)).unwrap_err();
    assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
    assert_eq!(replicas(&c), 3, "the edit landed, the stale patch did not");
    now(c.patch_target("ns", "llm", &ops[1..])).unwrap();
    assert_eq!(replicas(&c), 6, "the edit was spent");
}

#[test]
fn an_edit_is_stored_as_it_is_but_for_the_resource_version() {
    let c = cluster();
    let rv = c.resource_version();
    let stored = c
        .edit(|objects| {
            objects.edit(Kind::Target, "ns", "llm", |t| {
                t["metadata"]["generation"] = json!(5);
                t["metadata"]["annotations"] = json!({"by": "hand"});
            })
        })
        .unwrap();
    assert_eq!(stored["metadata"]["generation"], json!(5));
    assert_eq!(stored, target_doc(&c));
    assert_eq!(c.resource_version(), rv + 1);
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        json!((rv + 1).to_string())
    );
    let missing = c.edit(|objects| objects.edit(Kind::Pod, "ns", "none", |_| ()));
    assert!(missing.is_none());
    let pod = mk_pod("llm", "server", 0).namespace("ns").build();
    let put = c.edit(|objects| objects.put(Kind::Pod, pod));
    assert_eq!(put["metadata"]["generation"], json!(1));
    assert!(c.edit(|objects| objects.get(Kind::Pod, "ns", "llm-server-0").is_some()));
}

#[test]
fn without_the_fence_a_hand_count_change_on_a_bound_target_lands() {
    let c = cluster();
    bound(&c);
    let by_hand = [replace_replicas(7)];
    assert!(c.patch("ns", "llm", &by_hand).is_err());
    c.set_fence(false);
    c.patch("ns", "llm", &by_hand).unwrap();
    now(c.patch_target("ns", "llm", &by_hand)).unwrap();
    assert_eq!(replicas(&c), 7);
    c.set_fence(true);
    assert!(
        c.patch("ns", "llm", &by_hand[..0]).is_ok(),
        "no change passes"
    );
    assert!(c.patch("ns", "llm", &[replace_replicas(8)]).is_err());
}

#[test]
fn a_lost_watch_shows_the_same_snapshot_until_it_is_back() {
    let c = cluster();
    c.lose_watch();
    let seen = scaler(&c).metadata.resource_version;
    now(c.write_status(&scaler(&c), &ModelDeploymentScalerStatus::default())).unwrap();
    bound(&c);
    let snap = now(c.snapshot(&key())).unwrap();
    assert_eq!(snap.scaler.metadata.resource_version, seen);
    let annotations = snap.target.unwrap().metadata.annotations.clone();
    assert!(
        annotations.is_none(),
        "the bind is not seen: {annotations:?}"
    );
    c.watch_again();
    let snap = now(c.snapshot(&key())).unwrap();
    assert_eq!(
        snap.scaler.metadata.resource_version,
        scaler(&c).metadata.resource_version
    );
}
