//! The worker's sampling bookkeeping on in-memory ports: after a suspension the first
//! sampling is a baseline only, so the traffic of the whole suspension is never one rate; a
//! new term starts without old baselines; a pass brought forward reuses the last sampling
//! without counting it again; an engine the scaler cannot read is named in `MetricsReady`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use mds_api::ModelDeploymentScaler;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::{Event, PatchOp, WriteKind};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::{
    Cluster, FINALIZER, MetricsSource, ScalerKey, ScrapeError, Snapshot, Worker, WriteError,
};
use serde_json::{Value, json};

#[derive(Default)]
struct World {
    scaler: Value,
    target: Value,
    pods: Vec<Value>,
    /// Generated tokens so far, per page URL.
    generated: BTreeMap<String, u64>,
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
        Some(Snapshot {
            scaler: Arc::new(serde_json::from_value(w.scaler.clone()).unwrap()),
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
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(ops).unwrap()).unwrap();
        let mut doc = w.target.clone();
        json_patch::patch(&mut doc, &patch).map_err(|e| WriteError::Conflict(e.to_string()))?;
        if doc["spec"] != w.target["spec"] {
            let g = doc["metadata"]["generation"].as_i64().unwrap_or(1);
            doc["metadata"]["generation"] = json!(g + 1);
        }
        bump(&mut doc);
        w.target = doc;
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
        Ok(serde_json::from_value(w.scaler.clone()).unwrap())
    }

    async fn set_finalizer(
        &self,
        _scaler: &ModelDeploymentScaler,
        _present: bool,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let mut w = self.0.lock().unwrap();
        w.scaler["metadata"]["finalizers"] = json!([FINALIZER]);
        bump(&mut w.scaler);
        Ok(serde_json::from_value(w.scaler.clone()).unwrap())
    }

    async fn emit(&self, _scaler: &ModelDeploymentScaler, _event: &Event) {}
}

impl MetricsSource for Fake {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let w = self.0.lock().unwrap();
        let generated = w.generated.get(url).ok_or(ScrapeError::Status(404))?;
        Ok(format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} 1\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
             # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} 0\n\
             # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {generated}\n"
        ))
    }
}

fn pod(ordinal: i32) -> Value {
    let ip = format!("127.0.0.{}", 10 + ordinal);
    let pod = mk_pod("llm", "server", ordinal as u32).namespace("ns");
    pod.uid(&format!("pod-{ordinal}")).serving(&ip).build()
}

const PAGES: [&str; 2] = [
    "http://127.0.0.10:8000/metrics",
    "http://127.0.0.11:8000/metrics",
];

/// Two serving Pods and a scaler with the given algorithm; the default scale-up window (0).
fn world(algorithm: Value, engine: &str) -> Fake {
    let scaler = mk_scaler("llm").stored("ns", "scaler-1", "1");
    let target = mk_target("llm").stored("ns", "md-1", "1").engine(engine);
    let w = World {
        scaler: scaler
            .role_bounds("server", 1, 8)
            .algorithm(algorithm)
            .build(),
        target: target.role(mk_role("server").replicas(2)).build(),
        pods: vec![pod(0), pod(1)],
        generated: PAGES.iter().map(|p| (p.to_string(), 0)).collect(),
    };
    Fake(Arc::new(Mutex::new(w)))
}

/// 100 tokens per second per replica.
fn token_throughput() -> Value {
    json!({"tokenThroughput": {"serverTargetTokensPerSecond": "100"}})
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

impl Fake {
    /// Every engine generates `tokens` more.
    fn generate(&self, tokens: u64) {
        for g in self.0.lock().unwrap().generated.values_mut() {
            *g += tokens;
        }
    }

    fn suspend(&self, suspend: bool) {
        let mut w = self.0.lock().unwrap();
        w.scaler["spec"]["suspend"] = json!(suspend);
        let g = w.scaler["metadata"]["generation"].as_i64().unwrap();
        w.scaler["metadata"]["generation"] = json!(g + 1);
    }

    fn replicas(&self) -> i64 {
        self.0.lock().unwrap().target["spec"]["roles"][0]["replicas"]
            .as_i64()
            .unwrap()
    }

    fn status(&self) -> Value {
        self.0.lock().unwrap().scaler["status"].clone()
    }

    fn condition(&self, kind: &str) -> Value {
        let status = self.status();
        status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind).cloned())
            .unwrap_or_else(|| panic!("no {kind} condition in {status}"))
    }
}

fn is_commit(report: &mds_worker::PassReport) -> bool {
    matches!(report.write, Some((WriteKind::Commit, _)))
}

#[tokio::test]
async fn resuming_after_ten_minutes_commits_no_growth_from_the_suspensions_traffic() {
    let f = world(token_throughput(), "vLLM");
    let mut worker = Worker::new(key());
    // 75 tokens per second per Pod: 150 over 100 per replica, two replicas are right.
    for t in [0, 15, 30] {
        let r = worker.pass(&f, &f, at(t)).await;
        assert!(!is_commit(&r), "at {t} s: {:?}", r.plan);
        f.generate(75 * 15);
    }
    f.suspend(true);
    let r = worker.pass(&f, &f, at(45)).await;
    assert!(matches!(r.write, Some((WriteKind::Release, Ok(())))));
    // Ten minutes suspended while a burst of 1,000 tokens per second per Pod ran, then back to
    // 75 tokens per second.
    f.generate(600 * 1_000);
    f.suspend(false);
    let r = worker.pass(&f, &f, at(645)).await;
    assert!(matches!(r.write, Some((WriteKind::Bind, Ok(())))));
    let role = &f.status()["roles"][0];
    assert_eq!(role["signalState"], "Missing", "{role}");
    assert!(role["generationTokensPerSecond"].is_null(), "{role}");
    for t in [660, 675, 690] {
        f.generate(75 * 15);
        let r = worker.pass(&f, &f, at(t)).await;
        assert!(!is_commit(&r), "at {t} s: {:?}", r.plan);
    }
    assert_eq!(f.replicas(), 2);
    assert_eq!(f.status()["roles"][0]["signalState"], "Fresh");
}

#[tokio::test]
async fn a_short_suspension_also_starts_new_windows() {
    let f = world(token_throughput(), "vLLM");
    let mut worker = Worker::new(key());
    for t in [0, 15, 30] {
        worker.pass(&f, &f, at(t)).await;
        f.generate(75 * 15);
    }
    f.suspend(true);
    worker.pass(&f, &f, at(35)).await;
    f.generate(20_000);
    f.suspend(false);
    // Less than two intervals since the last sampling, but it was taken before the suspension.
    let r = worker.pass(&f, &f, at(50)).await;
    assert_eq!(r.scrapes.len(), 2);
    assert!(matches!(r.write, Some((WriteKind::Bind, Ok(())))));
    assert_eq!(f.status()["roles"][0]["signalState"], "Missing");
}

#[tokio::test]
async fn a_new_term_starts_without_old_baselines() {
    let f = world(token_throughput(), "vLLM");
    let mut worker = Worker::new(key());
    for t in [0, 15] {
        worker.pass(&f, &f, at(t)).await;
        f.generate(75 * 15);
    }
    // Leadership moves away and back: the worker starts from status, and its samples too.
    worker.reset();
    f.generate(100_000);
    worker.pass(&f, &f, at(30)).await;
    assert_eq!(f.status()["roles"][0]["signalState"], "Missing");
}

#[tokio::test]
async fn passes_brought_forward_do_not_count_toward_min_points() {
    let algorithm = json!({"predictive": {
        "tokenThroughput": {"serverTargetTokensPerSecond": "100"},
        "serverTokenCapacityPerReplica": "100",
        "minPoints": 3
    }});
    let f = world(algorithm, "vLLM");
    let mut worker = Worker::new(key());
    worker.pass(&f, &f, at(0)).await; // binds; a baseline
    f.generate(75 * 15);
    worker.pass(&f, &f, at(15)).await; // the first point
    // Watch events bring two passes forward within the interval: the 15 s sampling again.
    for t in [16, 17] {
        let r = worker.pass(&f, &f, at(t)).await;
        assert!(r.scrapes.is_empty(), "scraped again at {t} s");
    }
    let reason = &f.status()["roles"][0]["reason"];
    assert_eq!(reason, "PredictorWarmingUp", "{}", f.status());
}

#[tokio::test]
async fn an_engine_the_scaler_cannot_read_is_named_in_metrics_ready() {
    let f = world(token_throughput(), "TGI");
    let mut worker = Worker::new(key());
    let r = worker.pass(&f, &f, at(0)).await;
    assert!(r.scrapes.is_empty());
    worker.pass(&f, &f, at(15)).await;
    let metrics = f.condition("MetricsReady");
    assert_eq!(metrics["status"], "False");
    assert_eq!(metrics["reason"], "WaitingForMetrics");
    let message = metrics["message"].as_str().unwrap();
    assert!(message.contains("\"TGI\""), "{message}");
}
