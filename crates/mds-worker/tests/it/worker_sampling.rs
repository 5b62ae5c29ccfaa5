//! The worker's sampling bookkeeping on the in-memory cluster: after a suspension the first
//! sampling is a baseline only, so the traffic of the whole suspension is never one rate; a
//! new term starts without old baselines; a pass brought forward reuses the last sampling
//! without counting it again; an engine the scaler cannot read is named in `MetricsReady`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use mds_core::WriteKind;
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{Kind, MemoryCluster};
use mds_worker::{MetricsSource, ScalerKey, ScrapeError, Worker};
use serde_json::{Value, json};

/// Engines by page URL, with the tokens each has generated so far.
#[derive(Default)]
struct Engines {
    generated: Mutex<BTreeMap<String, u64>>,
}

impl MetricsSource for Engines {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let generated = self.generated.lock().unwrap();
        let generated = generated.get(url).ok_or(ScrapeError::Status(404))?;
        Ok(format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} 1\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
             # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} 0\n\
             # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {generated}\n"
        ))
    }
}

/// The cluster and the engines one worker reaches.
struct Fake {
    cluster: MemoryCluster,
    engines: Engines,
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
    let cluster = MemoryCluster::new();
    let target = mk_target("llm").stored("ns", "md-1", "1").engine(engine);
    let target = target.role(mk_role("server").replicas(2)).build();
    cluster.apply(Kind::Target, target).unwrap();
    let scaler = mk_scaler("llm").stored("ns", "scaler-1", "1");
    let scaler = scaler.role_bounds("server", 1, 8).algorithm(algorithm);
    cluster.apply(Kind::Scaler, scaler.build()).unwrap();
    for ordinal in 0..2 {
        cluster.apply(Kind::Pod, pod(ordinal)).unwrap();
    }
    let generated = PAGES.iter().map(|p| (p.to_string(), 0)).collect();
    Fake {
        cluster,
        engines: Engines {
            generated: Mutex::new(generated),
        },
    }
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
        for g in self.engines.generated.lock().unwrap().values_mut() {
            *g += tokens;
        }
    }

    /// The user suspends or resumes the scaler.
    fn suspend(&self, suspend: bool) {
        let mut scaler = self.cluster.get(Kind::Scaler, "ns", "llm").unwrap();
        scaler["spec"]["suspend"] = json!(suspend);
        self.cluster.apply(Kind::Scaler, scaler).unwrap();
    }

    fn replicas(&self) -> i64 {
        let target = self.cluster.get(Kind::Target, "ns", "llm").unwrap();
        target["spec"]["roles"][0]["replicas"].as_i64().unwrap()
    }

    fn status(&self) -> Value {
        self.cluster.get(Kind::Scaler, "ns", "llm").unwrap()["status"].clone()
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
        let r = worker.pass(&f.cluster, &f.engines, at(t)).await;
        assert!(!is_commit(&r), "at {t} s: {:?}", r.plan);
        f.generate(75 * 15);
    }
    f.suspend(true);
    let r = worker.pass(&f.cluster, &f.engines, at(45)).await;
    assert!(matches!(r.write, Some((WriteKind::Release, Ok(())))));
    // Ten minutes suspended while a burst of 1,000 tokens per second per Pod ran, then back to
    // 75 tokens per second.
    f.generate(600 * 1_000);
    f.suspend(false);
    let r = worker.pass(&f.cluster, &f.engines, at(645)).await;
    assert!(matches!(r.write, Some((WriteKind::Bind, Ok(())))));
    let role = &f.status()["roles"][0];
    assert_eq!(role["signalState"], "Missing", "{role}");
    assert!(role["generationTokensPerSecond"].is_null(), "{role}");
    for t in [660, 675, 690] {
        f.generate(75 * 15);
        let r = worker.pass(&f.cluster, &f.engines, at(t)).await;
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
        worker.pass(&f.cluster, &f.engines, at(t)).await;
        f.generate(75 * 15);
    }
    f.suspend(true);
    worker.pass(&f.cluster, &f.engines, at(35)).await;
    f.generate(20_000);
    f.suspend(false);
    // Less than two intervals since the last sampling, but it was taken before the suspension.
    let r = worker.pass(&f.cluster, &f.engines, at(50)).await;
    assert_eq!(r.scrapes.len(), 2);
    assert!(matches!(r.write, Some((WriteKind::Bind, Ok(())))));
    assert_eq!(f.status()["roles"][0]["signalState"], "Missing");
}

#[tokio::test]
async fn a_new_term_starts_without_old_baselines() {
    let f = world(token_throughput(), "vLLM");
    let mut worker = Worker::new(key());
    for t in [0, 15] {
        worker.pass(&f.cluster, &f.engines, at(t)).await;
        f.generate(75 * 15);
    }
    // Leadership moves away and back: the worker starts from status, and its samples too.
    worker.reset();
    f.generate(100_000);
    worker.pass(&f.cluster, &f.engines, at(30)).await;
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
    worker.pass(&f.cluster, &f.engines, at(0)).await; // binds; a baseline
    f.generate(75 * 15);
    worker.pass(&f.cluster, &f.engines, at(15)).await; // the first point
    // Watch events bring two passes forward within the interval: the 15 s sampling again.
    for t in [16, 17] {
        let r = worker.pass(&f.cluster, &f.engines, at(t)).await;
        assert!(r.scrapes.is_empty(), "scraped again at {t} s");
    }
    let reason = &f.status()["roles"][0]["reason"];
    assert_eq!(reason, "PredictorWarmingUp", "{}", f.status());
}

#[tokio::test]
async fn an_engine_the_scaler_cannot_read_is_named_in_metrics_ready() {
    let f = world(token_throughput(), "TGI");
    let mut worker = Worker::new(key());
    let r = worker.pass(&f.cluster, &f.engines, at(0)).await;
    assert!(r.scrapes.is_empty());
    worker.pass(&f.cluster, &f.engines, at(15)).await;
    let metrics = f.condition("MetricsReady");
    assert_eq!(metrics["status"], "False");
    assert_eq!(metrics["reason"], "WaitingForMetrics");
    let message = metrics["message"].as_str().unwrap();
    assert!(message.contains("\"TGI\""), "{message}");
}
