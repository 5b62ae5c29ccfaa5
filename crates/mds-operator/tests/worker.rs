//! The worker's executor rules on in-memory ports: the finalizer comes first, a target write
//! that does not land leaves no status and no memory behind, the status is written only when
//! the core asks, and a deleted scaler releases its binding before its finalizer goes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kube::core::Status;
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::{Event, PatchOp, WriteKind};
use mds_operator::kube_cluster::write_error;
use mds_operator::{
    Cluster, FINALIZER, MetricsSource, ScalerKey, ScrapeError, Snapshot, Worker, WriteError,
};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use serde_json::{Value, json};

#[derive(Default)]
struct World {
    scaler: Value,
    target: Value,
    pods: Vec<Value>,
    /// Pages by URL.
    pages: BTreeMap<String, String>,
    /// The next target write fails with this.
    fail_next_patch: Option<WriteError>,
    /// Every target write fails with this.
    refuse_patches: Option<WriteError>,
    /// Every target write gets this answer from the API server, classified as the production
    /// port classifies it.
    patch_answer: Option<Status>,
    /// A user sets the first role's count to this just before our next target write.
    edit_before_patch: Option<i64>,
    /// Target writes tried, landed or not.
    patch_attempts: usize,
    /// The watch cache still shows this scaler (it has not seen our last writes).
    stale_scaler: Option<Value>,
    fetches: usize,
    patches: Vec<Vec<PatchOp>>,
    status_writes: usize,
    events: Vec<Event>,
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<World>>);

fn bump(object: &mut Value) {
    let rv: u64 = object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("1")
        .parse()
        .unwrap();
    object["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
}

impl Cluster for Fake {
    async fn snapshot(&self, _key: &ScalerKey) -> Option<Snapshot> {
        let w = self.0.lock().unwrap();
        if w.scaler.is_null() {
            return None;
        }
        Some(Snapshot {
            scaler: Arc::new(
                serde_json::from_value(w.stale_scaler.clone().unwrap_or(w.scaler.clone())).unwrap(),
            ),
            target: Some(Arc::new(serde_json::from_value(w.target.clone()).unwrap())),
            pods: w
                .pods
                .iter()
                .map(|p| Arc::new(serde_json::from_value::<Pod>(p.clone()).unwrap()))
                .collect(),
            workloads: None,
        })
    }

    async fn patch_target(
        &self,
        _ns: &str,
        _name: &str,
        ops: &[PatchOp],
    ) -> Result<ModelDeployment, WriteError> {
        let mut w = self.0.lock().unwrap();
        w.patch_attempts += 1;
        if let Some(e) = w.fail_next_patch.take().or(w.refuse_patches.clone()) {
            return Err(e);
        }
        if let Some(answer) = w.patch_answer.clone() {
            return Err(write_error(kube::Error::Api(Box::new(answer))));
        }
        if let Some(n) = w.edit_before_patch.take() {
            w.target["spec"]["roles"][0]["replicas"] = json!(n);
            let g = w.target["metadata"]["generation"].as_i64().unwrap_or(1);
            w.target["metadata"]["generation"] = json!(g + 1);
            bump(&mut w.target);
        }
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(ops).unwrap()).unwrap();
        let mut doc = w.target.clone();
        // The API server answers a patch that does not apply (a failed `test`) like this.
        if json_patch::patch(&mut doc, &patch).is_err() {
            return Err(write_error(kube::Error::Api(Box::new(patch_not_applied()))));
        }
        if doc["spec"] != w.target["spec"] {
            let g = doc["metadata"]["generation"].as_i64().unwrap_or(1);
            doc["metadata"]["generation"] = json!(g + 1);
        }
        bump(&mut doc);
        w.target = doc;
        w.patches.push(ops.to_vec());
        Ok(serde_json::from_value(w.target.clone()).unwrap())
    }

    async fn write_status(
        &self,
        scaler: &ModelDeploymentScaler,
        status: &ModelDeploymentScalerStatus,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let mut w = self.0.lock().unwrap();
        if w.scaler["metadata"]["resourceVersion"].as_str()
            != scaler.metadata.resource_version.as_deref()
        {
            return Err(WriteError::Conflict("stale resource version".into()));
        }
        w.scaler["status"] = serde_json::to_value(status).unwrap();
        bump(&mut w.scaler);
        w.status_writes += 1;
        Ok(serde_json::from_value(w.scaler.clone()).unwrap())
    }

    async fn set_finalizer(
        &self,
        scaler: &ModelDeploymentScaler,
        present: bool,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let mut w = self.0.lock().unwrap();
        if w.scaler["metadata"]["resourceVersion"].as_str()
            != scaler.metadata.resource_version.as_deref()
        {
            return Err(WriteError::Conflict("stale resource version".into()));
        }
        let finalizers = if present {
            json!([FINALIZER])
        } else {
            json!([])
        };
        w.scaler["metadata"]["finalizers"] = finalizers;
        bump(&mut w.scaler);
        if !present && w.scaler["metadata"]["deletionTimestamp"].is_string() {
            w.scaler = Value::Null; // the API server deletes it now
            return Ok(scaler.clone());
        }
        Ok(serde_json::from_value(w.scaler.clone()).unwrap())
    }

    async fn emit(&self, _scaler: &ModelDeploymentScaler, event: &Event) {
        self.0.lock().unwrap().events.push(event.clone());
    }
}

impl MetricsSource for Fake {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let mut w = self.0.lock().unwrap();
        w.fetches += 1;
        w.pages.get(url).cloned().ok_or(ScrapeError::Status(404))
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
    let scaler = mk_scaler("llm").stored("ns", "scaler-1", "1");
    let target = mk_target("llm").stored("ns", "md-1", "1");
    let w = World {
        scaler: scaler.role_bounds("server", 1, 8).queue_depth("10").build(),
        target: target.role(mk_role("server").replicas(2)).build(),
        pods: vec![pod(0), pod(1)],
        pages: [
            ("http://127.0.0.10:8000/metrics".to_string(), page(30)),
            ("http://127.0.0.11:8000/metrics".to_string(), page(30)),
        ]
        .into(),
        ..World::default()
    };
    Fake(Arc::new(Mutex::new(w)))
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
    f.0.lock().unwrap().target["spec"]["roles"][0]["replicas"]
        .as_i64()
        .unwrap()
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
    let w = f.0.lock().unwrap();
    w.scaler["status"]["conditions"]
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
    f.0.lock()
        .unwrap()
        .events
        .iter()
        .filter(|e| e.warning)
        .cloned()
        .collect()
}

/// Deletes the scaler as the API server does when a finalizer holds it: the deletion
/// timestamp is set and the generation moves (with the resource version).
fn delete(f: &Fake) {
    let mut w = f.0.lock().unwrap();
    w.scaler["metadata"]["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
    let g = w.scaler["metadata"]["generation"].as_i64().unwrap_or(1);
    w.scaler["metadata"]["generation"] = json!(g + 1);
    bump(&mut w.scaler);
}

fn attempts(f: &Fake) -> usize {
    f.0.lock().unwrap().patch_attempts
}

#[tokio::test]
async fn a_pass_adds_the_finalizer_binds_then_commits() {
    let f = world();
    let mut worker = Worker::new(key());
    let report = worker.pass(&f, &f, at(0)).await;
    assert_eq!(report.write.as_ref().map(|w| w.0), Some(WriteKind::Bind));
    {
        let w = f.0.lock().unwrap();
        assert_eq!(w.scaler["metadata"]["finalizers"], json!([FINALIZER]));
        assert!(w.target["metadata"]["annotations"][BINDING_ANNOTATION].is_string());
        assert_eq!(
            w.status_writes, 1,
            "the status went in with the finalizer's version"
        );
        assert!(w.events.iter().all(|e| !e.action.is_empty()));
    }
    // 60 requests over 2 ready against 10 per replica: 6 replicas, 4 at most per pass.
    let report = worker.pass(&f, &f, at(15)).await;
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
    worker.pass(&f, &f, at(0)).await; // bind
    let writes_before = f.0.lock().unwrap().status_writes;
    f.0.lock().unwrap().fail_next_patch = Some(WriteError::Conflict("test failed".into()));
    let report = worker.pass(&f, &f, at(15)).await;
    assert!(matches!(
        report.write,
        Some((WriteKind::Commit, Err(WriteError::Conflict(_))))
    ));
    assert_eq!(replicas(&f), 2);
    {
        let w = f.0.lock().unwrap();
        assert_eq!(
            w.status_writes, writes_before,
            "no status for a decision that did not land"
        );
        assert!(w.events.iter().all(|e| e.reason != "Scaled"));
    }
    // The next pass plans again from what is there and lands.
    let report = worker.pass(&f, &f, at(30)).await;
    assert!(matches!(report.write, Some((WriteKind::Commit, Ok(())))));
    assert_eq!(replicas(&f), 6);
}

#[tokio::test]
async fn a_steady_scaler_writes_nothing() {
    let f = world();
    {
        let mut w = f.0.lock().unwrap();
        w.pages = [
            ("http://127.0.0.10:8000/metrics".to_string(), page(10)),
            ("http://127.0.0.11:8000/metrics".to_string(), page(10)),
        ]
        .into();
    }
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await;
    worker.pass(&f, &f, at(15)).await;
    let before = f.0.lock().unwrap().status_writes;
    for i in 2..10 {
        let report = worker.pass(&f, &f, at(15 * i)).await;
        assert!(report.write.is_none());
        assert!(report.status.is_none(), "pass {i} wrote status");
    }
    assert_eq!(f.0.lock().unwrap().status_writes, before);
}

#[tokio::test]
async fn a_deleted_scaler_releases_its_binding_then_lets_go() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await; // finalizer + bind
    f.0.lock().unwrap().scaler["metadata"]["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
    let report = worker.pass(&f, &f, at(15)).await;
    assert!(matches!(report.write, Some((WriteKind::Release, Ok(())))));
    {
        let w = f.0.lock().unwrap();
        assert!(
            w.scaler.is_null(),
            "the finalizer is gone and the scaler with it"
        );
        let annotations = &w.target["metadata"]["annotations"];
        assert!(
            annotations
                .get(BINDING_ANNOTATION)
                .is_none_or(Value::is_null)
        );
    }
    let report = worker.pass(&f, &f, at(30)).await;
    assert!(report.gone);
}

#[tokio::test]
async fn pods_that_do_not_answer_are_scrape_errors_not_zero_load() {
    let f = world();
    f.0.lock().unwrap().pages.clear();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await;
    let report = worker.pass(&f, &f, at(15)).await;
    assert!(
        report.write.is_none(),
        "no readings: hold, never shrink to one"
    );
    assert_eq!(
        report.scrapes.iter().filter(|s| s.error.is_some()).count(),
        2
    );
    let md: ModelDeployment = serde_json::from_value(f.0.lock().unwrap().target.clone()).unwrap();
    assert_eq!(md.spec.roles[0].replicas(), 2);
}

#[tokio::test]
async fn a_pass_on_a_stale_scaler_cache_uses_what_it_wrote() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await; // finalizer + bind
    let before_commit = f.0.lock().unwrap().scaler.clone();
    let r = worker.pass(&f, &f, at(15)).await; // commit 2 -> 6
    assert!(matches!(r.write, Some((WriteKind::Commit, Ok(())))));
    let events_before = f.0.lock().unwrap().events.len();
    // Our commit's watch event brings a pass forward before the cache saw the status write.
    f.0.lock().unwrap().stale_scaler = Some(before_commit);
    let r = worker.pass(&f, &f, at(16)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    let w = f.0.lock().unwrap();
    assert!(
        w.events[events_before..]
            .iter()
            .all(|e| e.reason != "Recovered"),
        "a spurious lost-commit warning"
    );
}

#[tokio::test]
async fn a_scaler_recreated_under_the_same_name_starts_fresh() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await;
    worker.pass(&f, &f, at(15)).await;
    assert_eq!(replicas(&f), 6);
    let history =
        |f: &Fake| f.0.lock().unwrap().scaler["status"]["roles"][0]["stabilizationHistory"].clone();
    assert!(history(&f).is_array());
    {
        let mut w = f.0.lock().unwrap();
        let rv = w.scaler["metadata"]["resourceVersion"].clone();
        w.scaler["metadata"] = json!({"name": "llm", "namespace": "ns", "uid": "scaler-2", "generation": 1, "resourceVersion": rv});
        w.scaler.as_object_mut().unwrap().remove("status");
        // The old binding is gone with the old scaler (its finalizer released it).
        w.target["metadata"]["annotations"] = json!({});
    }
    let r = worker.pass(&f, &f, at(20)).await;
    assert_eq!(r.write.as_ref().map(|w| w.0), Some(WriteKind::Bind));
    let status = f.0.lock().unwrap().scaler["status"].clone();
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
    worker.pass(&f, &f, at(0)).await; // bind
    f.0.lock().unwrap().refuse_patches = Some(WriteError::Refused(
        "the names would collide (HTTP 403)".into(),
    ));
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(matches!(
        r.write,
        Some((WriteKind::Commit, Err(WriteError::Refused(_))))
    ));
    // The same vector is not sent again; Blocked says why.
    let r = worker.pass(&f, &f, at(30)).await;
    assert!(r.write.is_none(), "retried: {:?}", r.write);
    let blocked = {
        let w = f.0.lock().unwrap();
        w.scaler["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Blocked")
            .cloned()
            .unwrap()
    };
    assert_eq!(blocked["status"], "True");
    assert!(
        blocked["message"]
            .as_str()
            .unwrap()
            .contains("names would collide"),
        "{blocked}"
    );
    // A spec edit releases the hold.
    {
        let mut w = f.0.lock().unwrap();
        w.refuse_patches = None;
        w.scaler["metadata"]["generation"] = json!(2);
    }
    let r = worker.pass(&f, &f, at(45)).await;
    assert!(matches!(r.write, Some((WriteKind::Commit, Ok(())))));
}

#[tokio::test]
async fn a_pass_within_the_interval_does_not_scrape_again() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await;
    let fetched = f.0.lock().unwrap().fetches;
    assert_eq!(fetched, 2);
    let r = worker.pass(&f, &f, at(3)).await;
    assert!(r.scrapes.is_empty());
    assert_eq!(
        f.0.lock().unwrap().fetches,
        2,
        "scraped again within the interval"
    );
    worker.pass(&f, &f, at(15)).await;
    assert_eq!(f.0.lock().unwrap().fetches, 4);
}

#[tokio::test]
async fn a_bind_the_fence_refuses_is_reported_on_bound_and_active_and_backs_off() {
    let f = world();
    f.0.lock().unwrap().patch_answer = Some(fence_denial());
    let mut worker = Worker::new(key());
    let r = worker.pass(&f, &f, at(0)).await;
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
        worker.pass(&f, &f, at(15 * i)).await;
    }
    let tried = attempts(&f);
    assert!(
        (4..=6).contains(&tried),
        "{tried} bind attempts in 21 passes"
    );
    // A spec edit releases the backoff at once.
    {
        let mut w = f.0.lock().unwrap();
        w.patch_answer = None;
        w.scaler["metadata"]["generation"] = json!(2);
    }
    let r = worker.pass(&f, &f, at(305)).await;
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
    worker.pass(&f, &f, at(0)).await; // bind
    f.0.lock().unwrap().patch_answer = Some(validation_refusal());
    let r = worker.pass(&f, &f, at(15)).await;
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
    let r = worker.pass(&f, &f, at(30)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    assert_eq!(attempts(&f), 2, "the bind and one commit");
    assert!(message(&condition(&f, "Blocked")).contains("names would collide"));
}

#[tokio::test]
async fn a_failed_test_op_is_a_conflict_and_the_next_pass_replans() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await; // bind
    let writes = f.0.lock().unwrap().status_writes;
    // A user sets 3 just before our commit of 2 -> 6 lands.
    f.0.lock().unwrap().edit_before_patch = Some(3);
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Conflict(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(
        f.0.lock().unwrap().status_writes,
        writes,
        "nothing to report"
    );
    assert!(warnings(&f).is_empty());
    assert_eq!(replicas(&f), 3, "the user's count stands");
    let r = worker.pass(&f, &f, at(30)).await;
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
    worker.pass(&f, &f, at(0)).await; // bind
    let writes = f.0.lock().unwrap().status_writes;
    f.0.lock().unwrap().patch_answer = Some(unavailable());
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Unavailable(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(
        f.0.lock().unwrap().status_writes,
        writes,
        "not reported within the first interval"
    );
    assert!(warnings(&f).is_empty());
    // One interval later it still fails: now it is reported.
    let r = worker.pass(&f, &f, at(30)).await;
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
    let r = worker.pass(&f, &f, at(45)).await;
    assert!(r.write.is_none(), "{:?}", r.write);
    assert_eq!(attempts(&f), 3);
    // The API server is back: the next attempt lands and the report goes.
    f.0.lock().unwrap().patch_answer = None;
    let r = worker.pass(&f, &f, at(60)).await;
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
    worker.pass(&f, &f, at(0)).await; // bind
    f.0.lock().unwrap().patch_answer = Some(rbac_forbidden());
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Commit, Err(WriteError::Unavailable(_))))
        ),
        "{:?}",
        r.write
    );
    // The role binding arrives: the same counts are sent again and land.
    f.0.lock().unwrap().patch_answer = None;
    let r = worker.pass(&f, &f, at(30)).await;
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
    worker.pass(&f, &f, at(0)).await; // finalizer + bind
    delete(&f);
    f.0.lock().unwrap().patch_answer = Some(fence_denial());
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(
        matches!(
            r.write,
            Some((WriteKind::Release, Err(WriteError::Refused(_))))
        ),
        "{:?}",
        r.write
    );
    assert_eq!(
        f.0.lock().unwrap().scaler["metadata"]["finalizers"],
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
    f.0.lock().unwrap().patch_answer = None;
    let r = worker.pass(&f, &f, at(30)).await;
    assert!(
        matches!(r.write, Some((WriteKind::Release, Ok(())))),
        "{:?}",
        r.write
    );
    assert!(f.0.lock().unwrap().scaler.is_null());
}

#[tokio::test]
async fn a_deleted_scaler_goes_in_one_pass_though_deletion_moved_its_generation() {
    let f = world();
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await; // finalizer + bind
    delete(&f);
    let r = worker.pass(&f, &f, at(15)).await;
    assert!(matches!(r.write, Some((WriteKind::Release, Ok(())))));
    assert!(
        matches!(r.status, Some(Ok(()))),
        "the new generation is reported: {:?}",
        r.status
    );
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(
        f.0.lock().unwrap().scaler.is_null(),
        "the finalizer went with the status write's resource version"
    );
}
