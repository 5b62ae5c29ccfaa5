//! The worker's executor rules on the in-memory cluster: the finalizer comes first, a target write
//! that does not land leaves no status and no memory behind, the status is written only when
//! the core asks, and a deleted scaler releases its binding before its finalizer goes.

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use kube::core::Status;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::target::ModelDeployment;
use mds_core::{Event, PatchOp, WriteKind};
use mds_operator::kube_cluster::write_error;
use mds_operator::{Cluster, FINALIZER, MetricsSource, ScalerKey, ScrapeError, Worker, WriteError};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{Kind, MemoryCluster, WriteKind as Write, ready};
use serde_json::{Value, json};

/// Engine pages by URL, and how many were read.
#[derive(Default)]
struct Pages {
    pages: Mutex<BTreeMap<String, String>>,
    fetches: Mutex<usize>,
}

impl MetricsSource for Pages {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        *self.fetches.lock().unwrap() += 1;
        let pages = self.pages.lock().unwrap();
        pages.get(url).cloned().ok_or(ScrapeError::Status(404))
    }
}

/// The cluster and the engines one worker reaches.
struct Fake {
    cluster: MemoryCluster,
    engines: Pages,
}

impl Fake {
    fn scaler(&self) -> Option<Value> {
        self.cluster.get(Kind::Scaler, "ns", "llm")
    }

    fn target(&self) -> Value {
        self.cluster.get(Kind::Target, "ns", "llm").unwrap()
    }

    /// Every target write gets this answer from the API server, classified as the production
    /// port classifies it (`None`: they land again).
    fn answer_patches(&self, answer: Option<Status>) {
        let error = answer.map(|a| write_error(kube::Error::Api(Box::new(a))));
        self.cluster.fail_every(Write::PatchTarget, error);
    }

    /// A spec edit as the worker sees it: the scaler's generation moves.
    fn bump_scaler_generation(&self) {
        self.cluster.edit(|objects| {
            objects.edit(Kind::Scaler, "ns", "llm", |s| {
                let g = s["metadata"]["generation"].as_i64().unwrap();
                s["metadata"]["generation"] = json!(g + 1);
            })
        });
    }

    fn status_writes(&self) -> usize {
        self.cluster.attempts(Write::Status)
    }

    fn events(&self) -> Vec<Event> {
        self.cluster.events().into_iter().map(|(_, e)| e).collect()
    }

    fn set_pages(&self, running: u64) {
        *self.engines.pages.lock().unwrap() = [
            ("http://127.0.0.10:8000/metrics".to_string(), page(running)),
            ("http://127.0.0.11:8000/metrics".to_string(), page(running)),
        ]
        .into();
    }
}

fn page(running: u64) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} 1000\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} 500\n"
    )
}

fn pod(ordinal: i32) -> Value {
    let ip = format!("127.0.0.{}", 10 + ordinal);
    let pod = mk_pod("llm", "server", ordinal as u32).namespace("ns");
    pod.uid(&format!("pod-{ordinal}")).serving(&ip).build()
}

fn world() -> Fake {
    let cluster = MemoryCluster::new();
    let target = mk_target("llm").stored("ns", "md-1", "1");
    let target = target.role(mk_role("server").replicas(2)).build();
    cluster.apply(Kind::Target, target).unwrap();
    let scaler = mk_scaler("llm").stored("ns", "scaler-1", "1");
    let scaler = scaler.role_bounds("server", 1, 8).queue_depth("10").build();
    cluster.apply(Kind::Scaler, scaler).unwrap();
    for ordinal in 0..2 {
        cluster.apply(Kind::Pod, pod(ordinal)).unwrap();
    }
    let f = Fake {
        cluster,
        engines: Pages::default(),
    };
    f.set_pages(30);
    f
}

fn key() -> ScalerKey {
    ScalerKey {
        namespace: "ns".into(),
        name: "llm".into(),
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

fn replicas(f: &Fake) -> i64 {
    f.target()["spec"]["roles"][0]["replicas"].as_i64().unwrap()
}

/// API server answers, as kube-apiserver 1.36 words them (apimachinery's `errors.go`, the
/// patch handler, the admission webhook plugin and the authorizer).
fn answer(code: u16, reason: &str, message: &str, details: Value) -> Status {
    serde_json::from_value(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code
    }))
    .unwrap()
}

/// A JSON Patch that does not apply (a failed `test`): the generic 422, no details.
fn patch_not_applied() -> Status {
    answer(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        json!({}),
    )
}

/// Our fence's denial.
fn fence_denial() -> Status {
    answer(
        403,
        "Forbidden",
        "admission webhook \"fence.modeldeployments.worker.gpustack.ai\" denied the request: binding fence (bind): a new binding must take a term above every term seen on the target",
        json!({}),
    )
}

/// A CEL rule of the target's CRD refuses the counts.
fn validation_refusal() -> Status {
    answer(
        422,
        "Invalid",
        "ModelDeployment.worker.gpustack.ai \"llm\" is invalid: spec.roles[0].replicas: Invalid value: 6: the generated names would collide",
        json!({"name": "llm", "group": "worker.gpustack.ai", "kind": "ModelDeployment",
            "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 6: the generated names would collide", "field": "spec.roles[0].replicas"}]}),
    )
}

fn unavailable() -> Status {
    answer(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
        json!({}),
    )
}

/// RBAC that has not reached this API server yet.
fn rbac_forbidden() -> Status {
    answer(
        403,
        "Forbidden",
        "modeldeployments.worker.gpustack.ai \"llm\" is forbidden: User \"system:serviceaccount:mds-system:mds\" cannot patch resource \"modeldeployments\" in API group \"worker.gpustack.ai\" in the namespace \"ns\"",
        json!({"name": "llm", "group": "worker.gpustack.ai", "kind": "modeldeployments"}),
    )
}

fn condition(f: &Fake, kind: &str) -> Value {
    f.scaler().unwrap()["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

fn message(condition: &Value) -> String {
    condition["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn warnings(f: &Fake) -> Vec<Event> {
    f.events().into_iter().filter(|e| e.warning).collect()
}

/// Deletes the scaler; its finalizer holds it (the deletion timestamp is set and the
/// generation moves).
fn delete(f: &Fake) {
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    f.cluster.delete(Kind::Scaler, "ns", "llm", now).unwrap();
}

fn attempts(f: &Fake) -> usize {
    f.cluster.attempts(Write::PatchTarget)
}

#[tokio::test]
async fn a_pass_adds_the_finalizer_binds_then_commits() {
    let f = world();
    let mut worker = Worker::new(key());
    let report = worker.pass(&f.cluster, &f.engines, at(0)).await;
    assert_eq!(report.write.as_ref().map(|w| w.0), Some(WriteKind::Bind));
    assert_eq!(
        f.scaler().unwrap()["metadata"]["finalizers"],
        json!([FINALIZER])
    );
    assert!(f.target()["metadata"]["annotations"][BINDING_ANNOTATION].is_string());
    assert_eq!(
        f.status_writes(),
        1,
        "the status went in with the finalizer's version"
    );
    assert!(f.events().iter().all(|e| !e.action.is_empty()));
    // 60 requests over 2 ready against 10 per replica: 6 replicas, 4 at most per pass.
    let report = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert_eq!(
        report.write.as_ref().map(|w| w.0),
        Some(WriteKind::Commit),
        "{:?} {:?}",
        report.problem,
        report.plan
    );
    assert_eq!(replicas(&f), 6);
    assert_eq!(report.scrapes.len(), 2);
    assert!(report.scrapes.iter().all(|s| s.error.is_none()));
}

#[tokio::test]
async fn a_write_that_does_not_land_leaves_no_status_and_is_replanned() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    let writes_before = f.status_writes();
    let conflict = WriteError::Conflict("test failed".into());
    f.cluster.fail_next(Write::PatchTarget, conflict);
    let report = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(matches!(
        report.write,
        Some((WriteKind::Commit, Err(WriteError::Conflict(_))))
    ));
    assert_eq!(replicas(&f), 2);
    assert_eq!(
        f.status_writes(),
        writes_before,
        "no status for a decision that did not land"
    );
    assert!(f.events().iter().all(|e| e.reason != "Scaled"));
    // The next pass plans again from what is there and lands.
    let report = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(matches!(report.write, Some((WriteKind::Commit, Ok(())))));
    assert_eq!(replicas(&f), 6);
}

#[tokio::test]
async fn a_steady_scaler_writes_nothing() {
    let f = world();
    f.set_pages(10);
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await;
    worker.pass(&f.cluster, &f.engines, at(15)).await;
    let before = f.status_writes();
    for i in 2..10 {
        let report = worker.pass(&f.cluster, &f.engines, at(15 * i)).await;
        assert!(report.write.is_none());
        assert!(report.status.is_none(), "pass {i} wrote status");
    }
    assert_eq!(f.status_writes(), before);
}

#[tokio::test]
async fn a_deleted_scaler_releases_its_binding_then_lets_go() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // finalizer + bind
    delete(&f);
    let report = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(matches!(report.write, Some((WriteKind::Release, Ok(())))));
    assert!(
        f.scaler().is_none(),
        "the finalizer is gone and the scaler with it"
    );
    let annotations = &f.target()["metadata"]["annotations"];
    assert!(
        annotations
            .get(BINDING_ANNOTATION)
            .is_none_or(Value::is_null)
    );
    let report = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(report.gone);
}

#[tokio::test]
async fn pods_that_do_not_answer_are_scrape_errors_not_zero_load() {
    let f = world();
    f.engines.pages.lock().unwrap().clear();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await;
    let report = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        report.write.is_none(),
        "no readings: hold, never shrink to one"
    );
    assert_eq!(
        report.scrapes.iter().filter(|s| s.error.is_some()).count(),
        2
    );
    let md: ModelDeployment = serde_json::from_value(f.target()).unwrap();
    assert_eq!(md.spec.roles[0].replicas(), 2);
}

#[tokio::test]
async fn a_pass_on_a_stale_scaler_cache_uses_what_it_wrote() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // finalizer + bind
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await; // commit 2 -> 6
    assert!(matches!(r.write, Some((WriteKind::Commit, Ok(())))));
    let events_before = f.events().len();
    // Our commit's watch event brings a pass forward before the cache saw the status write,
    // the pass's last write: the scaler as it was before the commit, the target after it.
    f.cluster.set_lag(1);
    let r = worker.pass(&f.cluster, &f.engines, at(16)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    assert!(
        f.events()[events_before..]
            .iter()
            .all(|e| e.reason != "Recovered"),
        "a spurious lost-commit warning"
    );
}

#[tokio::test]
async fn a_scaler_recreated_under_the_same_name_starts_fresh() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await;
    worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert_eq!(replicas(&f), 6);
    let history = f.scaler().unwrap()["status"]["roles"][0]["stabilizationHistory"].clone();
    assert!(history.is_array());
    f.cluster.edit(|objects| {
        let recreated = json!({"name": "llm", "namespace": "ns", "uid": "scaler-2"});
        objects.edit(Kind::Scaler, "ns", "llm", |s| {
            s["metadata"] = recreated;
            s.as_object_mut().unwrap().remove("status");
        });
        // The old binding is gone with the old scaler (its finalizer released it).
        objects.edit(Kind::Target, "ns", "llm", |t| {
            t["metadata"]["annotations"] = json!({});
        });
    });
    let r = worker.pass(&f.cluster, &f.engines, at(20)).await;
    assert_eq!(r.write.as_ref().map(|w| w.0), Some(WriteKind::Bind));
    let status = f.scaler().unwrap()["status"].clone();
    assert_eq!(
        status["roles"][0]["stabilizationHistory"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "no history of the old scaler: {status}"
    );
}

#[tokio::test]
async fn a_refused_commit_is_held_and_blocked_until_something_changes() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    let refusal = WriteError::Refused("the names would collide (HTTP 403)".into());
    f.cluster.fail_every(Write::PatchTarget, Some(refusal));
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(matches!(
        r.write,
        Some((WriteKind::Commit, Err(WriteError::Refused(_))))
    ));
    // The same vector is not sent again; Blocked says why.
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(r.write.is_none(), "retried: {:?}", r.write);
    let blocked = condition(&f, "Blocked");
    assert_eq!(blocked["status"], "True");
    assert!(
        blocked["message"]
            .as_str()
            .unwrap()
            .contains("names would collide"),
        "{blocked}"
    );
    // A spec edit releases the hold.
    f.cluster.fail_every(Write::PatchTarget, None);
    f.bump_scaler_generation();
    let r = worker.pass(&f.cluster, &f.engines, at(45)).await;
    assert!(matches!(r.write, Some((WriteKind::Commit, Ok(())))));
}

#[tokio::test]
async fn a_pass_within_the_interval_does_not_scrape_again() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await;
    let fetched = *f.engines.fetches.lock().unwrap();
    assert_eq!(fetched, 2);
    let r = worker.pass(&f.cluster, &f.engines, at(3)).await;
    assert!(r.scrapes.is_empty());
    assert_eq!(
        *f.engines.fetches.lock().unwrap(),
        2,
        "scraped again within the interval"
    );
    worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert_eq!(*f.engines.fetches.lock().unwrap(), 4);
}

#[tokio::test]
async fn a_bind_the_fence_refuses_is_reported_on_bound_and_active_and_backs_off() {
    let f = world();
    f.answer_patches(Some(fence_denial()));
    let mut worker = Worker::new(key());
    let r = worker.pass(&f.cluster, &f.engines, at(0)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Bind, Err(WriteError::Refused(_))))
        ),
        "{:?}",
        r.write
    );
    for kind in ["Bound", "Active"] {
        let c = condition(&f, kind);
        assert_eq!(c["status"], "False", "{kind}: {c}");
        assert!(message(&c).contains("denied the request"), "{kind}: {c}");
    }
    let refused: Vec<Event> = warnings(&f);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].reason, "WriteRefused");
    assert_eq!(refused[0].action, "Bind");
    assert!(refused[0].message.contains("denied the request"));
    // Twenty more passes over five minutes: retried with a growing delay, not every pass,
    // and never given up.
    for i in 1..=20 {
        worker.pass(&f.cluster, &f.engines, at(15 * i)).await;
    }
    let tried = attempts(&f);
    assert!(
        (4..=6).contains(&tried),
        "{tried} bind attempts in 21 passes"
    );
    // A spec edit releases the backoff at once.
    f.answer_patches(None);
    f.bump_scaler_generation();
    let r = worker.pass(&f.cluster, &f.engines, at(305)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Bind, Ok(())))),
        "{:?}",
        r.write
    );
    assert_eq!(condition(&f, "Bound")["status"], "True");
}

#[tokio::test]
async fn a_commit_a_validation_rule_refuses_is_blocked_and_not_read_as_a_conflict() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    f.answer_patches(Some(validation_refusal()));
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Refused(_))))
        ),
        "{:?}",
        r.write
    );
    let blocked = condition(&f, "Blocked");
    assert_eq!(blocked["status"], "True", "{blocked}");
    assert!(
        message(&blocked).contains("the generated names would collide"),
        "{blocked}"
    );
    let refused = warnings(&f);
    assert!(
        refused
            .iter()
            .any(|e| e.reason == "WriteRefused" && e.action == "Commit"),
        "{refused:?}"
    );
    // Not a conflict: the next pass does not send the same counts again.
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    assert_eq!(attempts(&f), 2, "the bind and one commit");
    assert!(message(&condition(&f, "Blocked")).contains("names would collide"));
}

#[tokio::test]
async fn a_failed_test_op_is_a_conflict_and_the_next_pass_replans() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    let writes = f.status_writes();
    // A user sets 3 just before our commit of 2 -> 6 lands (a write the fence does not see).
    f.cluster.before_next_write(Write::PatchTarget, |objects| {
        objects.edit(Kind::Target, "ns", "llm", |t| {
            t["spec"]["roles"][0]["replicas"] = json!(3);
            let g = t["metadata"]["generation"].as_i64().unwrap();
            t["metadata"]["generation"] = json!(g + 1);
        });
    });
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Conflict(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(f.status_writes(), writes, "nothing to report");
    assert!(warnings(&f).is_empty());
    assert_eq!(replicas(&f), 3, "the user's count stands");
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Commit, Ok(())))),
        "{:?}",
        r.write
    );
    assert_eq!(
        r.plan.unwrap().roles[0].current,
        3,
        "planned from the user's count"
    );
}

#[tokio::test]
async fn an_unavailable_api_server_is_retried_with_backoff_reported_after_an_interval_and_released()
{
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    let writes = f.status_writes();
    f.answer_patches(Some(unavailable()));
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Unavailable(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(
        f.status_writes(),
        writes,
        "not reported within the first interval"
    );
    assert!(warnings(&f).is_empty());
    // One interval later it still fails: now it is reported.
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(matches!(
        r.write,
        Some((WriteKind::Commit, Err(WriteError::Unavailable(_))))
    ));
    let blocked = condition(&f, "Blocked");
    assert_eq!(blocked["status"], "True", "{blocked}");
    assert!(
        message(&blocked).contains("currently unable to handle the request"),
        "{blocked}"
    );
    let failing = warnings(&f);
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].reason, "WriteFailing");
    assert_eq!(failing[0].action, "Commit");
    // Backed off: the pass after the second failure does not try.
    let r = worker.pass(&f.cluster, &f.engines, at(45)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    assert_eq!(attempts(&f), 3);
    // The API server is back: the next attempt lands and the report goes.
    f.answer_patches(None);
    let r = worker.pass(&f.cluster, &f.engines, at(60)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Commit, Ok(())))),
        "{:?}",
        r.write
    );
    assert_eq!(replicas(&f), 6);
    let blocked = condition(&f, "Blocked");
    assert!(!message(&blocked).contains("unable"), "{blocked}");
}

#[tokio::test]
async fn a_forbidden_write_that_rbac_may_still_allow_is_retried_not_held() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // bind
    f.answer_patches(Some(rbac_forbidden()));
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Unavailable(_))))
        ),
        "{:?}",
        r.write
    );
    // The role binding arrives: the same counts are sent again and land.
    f.answer_patches(None);
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Commit, Ok(())))),
        "{:?}",
        r.write
    );
    assert_eq!(replicas(&f), 6);
}

#[tokio::test]
async fn a_scaler_deleted_while_its_release_is_refused_says_why() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // finalizer + bind
    delete(&f);
    f.answer_patches(Some(fence_denial()));
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Release, Err(WriteError::Refused(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(
        f.scaler().unwrap()["metadata"]["finalizers"],
        json!([FINALIZER]),
        "the finalizer waits for the release"
    );
    for kind in ["Bound", "Active"] {
        let c = condition(&f, kind);
        assert!(message(&c).contains("being deleted"), "{kind}: {c}");
        assert!(message(&c).contains("denied the request"), "{kind}: {c}");
    }
    assert!(
        warnings(&f)
            .iter()
            .any(|e| e.reason == "WriteRefused" && e.action == "Release")
    );
    // The fence lets it through: the binding goes, and the scaler with it.
    f.answer_patches(None);
    let r = worker.pass(&f.cluster, &f.engines, at(30)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Release, Ok(())))),
        "{:?}",
        r.write
    );
    assert!(f.scaler().is_none());
}

#[tokio::test]
async fn a_deleted_scaler_goes_in_one_pass_though_deletion_moved_its_generation() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f.cluster, &f.engines, at(0)).await; // finalizer + bind
    delete(&f);
    let r = worker.pass(&f.cluster, &f.engines, at(15)).await;
    assert!(matches!(r.write, Some((WriteKind::Release, Ok(())))));
    assert!(
        matches!(r.status, Some(Ok(()))),
        "the new generation is reported: {:?}",
        r.status
    );
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(
        f.scaler().is_none(),
        "the finalizer went with the status write's resource version"
    );
}

#[test]
fn a_patch_that_does_not_apply_is_answered_as_the_production_port_classifies_it() {
    let f = world();
    let stale = [PatchOp::Test {
        path: "/spec/roles/0/replicas".into(),
        value: json!(5),
    }];
    let err = ready(f.cluster.patch_target("ns", "llm", &stale)).unwrap_err();
    let production = write_error(kube::Error::Api(Box::new(patch_not_applied())));
    assert_eq!(err, production);
}
