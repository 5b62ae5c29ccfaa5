//! The in-memory cluster keeps objects as the API server does: resource versions and
//! generations, guarded patches and status writes, finalizers, the fence on target writes,
//! and faults on cue.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::{BindingPayload, DecisionPayload};
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::PatchOp;
use mds_core::patch::{self, TargetShape};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{Fault, Kind, MemoryCluster, WriteKind};
use mds_worker::{Cluster, FINALIZER, ScalerKey, WriteError};
use serde_json::json;

/// The cluster's futures are ready at once.
fn now<T>(f: impl Future<Output = T>) -> T {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a MemoryCluster future was not ready"),
    }
}

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
    let ops = [
        PatchOp::Test {
            path: "/spec/roles/0/replicas".into(),
            value: json!(5),
        },
        PatchOp::Replace {
            path: "/spec/roles/0/replicas".into(),
            value: json!(6),
        },
    ];
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
    let by_hand = [PatchOp::Replace {
        path: "/spec/roles/0/replicas".into(),
        value: json!(7),
    }];
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
