//! A slow engine delays only its own scaler: scrapes are bounded by the metrics source, the
//! pass permit covers planning and writes only; and a pass parses each page as it arrives
//! rather than holding every page until the slowest has answered. Paused Tokio time makes the
//! delays exact.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use mds_api::target::ModelDeployment;
use mds_signals::SampleStore;
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{Kind, MemoryCluster, WriteKind};
use mds_worker::sampler::sample;
use mds_worker::{FINALIZER, MetricsSource, ScalerKey, ScrapeError, Worker};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::time::Instant;

fn page(running: u64) -> String {
    format!(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} 1000\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} 500\n"
    )
}

/// Engines whose pages take a set time to arrive; every page read is recorded with the moment
/// it was parsed.
#[derive(Default)]
struct Engines {
    delays: BTreeMap<String, Duration>,
    parsed: Mutex<Vec<(String, Instant)>>,
    whole_pages: Mutex<usize>,
}

impl MetricsSource for Engines {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        *self.whole_pages.lock().unwrap() += 1;
        let delay = self.delays.get(url).copied().unwrap_or_default();
        tokio::time::sleep(delay).await;
        Ok(page(3))
    }

    async fn fetch_with<T, F>(&self, url: &str, parse: F) -> Result<T, ScrapeError>
    where
        T: Send,
        F: FnOnce(&str) -> T + Send,
    {
        let delay = self.delays.get(url).copied().unwrap_or_default();
        tokio::time::sleep(delay).await;
        let parsed = parse(&page(3));
        self.parsed
            .lock()
            .unwrap()
            .push((url.to_string(), Instant::now()));
        Ok(parsed)
    }
}

fn url(ip: &str) -> String {
    format!("http://{ip}:8000/metrics")
}

fn pod(target: &str, ordinal: u32, ip: &str) -> Value {
    let pod = mk_pod(target, "server", ordinal).namespace("ns");
    pod.uid(&format!("{target}-pod-{ordinal}"))
        .serving(ip)
        .build()
}

fn target(name: &str, replicas: u32) -> Value {
    let target = mk_target(name).stored("ns", &format!("md-{name}"), "1");
    target.role(mk_role("server").replicas(replicas)).build()
}

/// Adds a scaler in Shadow mode (it plans and writes status, never the target), its target and
/// one Pod.
fn add(cluster: &MemoryCluster, name: &str, ip: &str) {
    cluster.apply(Kind::Target, target(name, 1)).unwrap();
    let scaler = mk_scaler(name).stored("ns", &format!("scaler-{name}"), "1");
    let scaler = scaler
        .finalizer(FINALIZER)
        .mode("Shadow")
        .role_bounds("server", 1, 8);
    let scaler = scaler.queue_depth("10").build();
    cluster.apply(Kind::Scaler, scaler).unwrap();
    cluster.apply(Kind::Pod, pod(name, 0, ip)).unwrap();
}

fn status_writes(cluster: &MemoryCluster) -> usize {
    cluster.attempts(WriteKind::Status)
}

fn key(name: &str) -> ScalerKey {
    ScalerKey {
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

#[tokio::test(start_paused = true)]
async fn a_slow_engine_holds_no_pass_permit_another_scaler_waits_for() {
    let cluster = MemoryCluster::new();
    add(&cluster, "slow", "127.0.0.10");
    add(&cluster, "fast", "127.0.0.20");
    let engines = Engines {
        delays: [(url("127.0.0.10"), Duration::from_secs(5))].into(),
        ..Engines::default()
    };
    // One pass plans at a time.
    let passes = Semaphore::new(1);
    let (mut slow, mut fast) = (Worker::new(key("slow")), Worker::new(key("fast")));
    let began = Instant::now();
    let slow_pass = async {
        slow.pass_bounded(&cluster, &engines, at(0), Some(passes.acquire()))
            .await;
        began.elapsed()
    };
    let fast_pass = async {
        // The slow scaler's pass starts first and is waiting for its engine.
        tokio::task::yield_now().await;
        fast.pass_bounded(&cluster, &engines, at(0), Some(passes.acquire()))
            .await;
        began.elapsed()
    };
    let (slow_took, fast_took) = tokio::join!(slow_pass, fast_pass);
    assert_eq!(
        fast_took,
        Duration::ZERO,
        "the fast scaler waited for the slow engine"
    );
    assert_eq!(slow_took, Duration::from_secs(5));
    assert_eq!(status_writes(&cluster), 2, "both passes ran");
}

#[tokio::test(start_paused = true)]
async fn a_pass_samples_without_a_permit_and_plans_only_with_one() {
    let cluster = MemoryCluster::new();
    add(&cluster, "a", "127.0.0.10");
    let engines = Engines::default();
    let passes = Semaphore::new(1);
    let held = passes.acquire().await.unwrap();
    let mut worker = Worker::new(key("a"));
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        worker.pass_bounded(&cluster, &engines, at(0), Some(passes.acquire())),
    )
    .await;
    assert!(waited.is_err(), "the pass planned without a permit");
    assert_eq!(
        engines.parsed.lock().unwrap().len(),
        1,
        "it sampled meanwhile"
    );
    assert_eq!(status_writes(&cluster), 0);
    drop(held);
    worker
        .pass_bounded(&cluster, &engines, at(15), Some(passes.acquire()))
        .await;
    assert_eq!(status_writes(&cluster), 1);
}

#[tokio::test(start_paused = true)]
async fn each_page_is_parsed_as_it_arrives() {
    let ips = ["127.0.0.10", "127.0.0.11", "127.0.0.12"];
    let pods: Vec<Arc<Pod>> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| Arc::new(serde_json::from_value(pod("llm", i as u32, ip)).unwrap()))
        .collect();
    let md: ModelDeployment = serde_json::from_value(target("llm", 3)).unwrap();
    let engines = Engines {
        delays: [(url(ips[2]), Duration::from_secs(5))].into(),
        ..Engines::default()
    };
    let began = Instant::now();
    let sampling = sample(&engines, &mut SampleStore::default(), &md, &pods, 15, at(0)).await;
    assert_eq!(
        *engines.whole_pages.lock().unwrap(),
        0,
        "no page was kept whole"
    );
    let parsed: BTreeMap<String, Duration> = engines
        .parsed
        .lock()
        .unwrap()
        .iter()
        .map(|(url, when)| (url.clone(), when.duration_since(began)))
        .collect();
    assert_eq!(
        parsed,
        [
            (url(ips[0]), Duration::ZERO),
            (url(ips[1]), Duration::ZERO),
            (url(ips[2]), Duration::from_secs(5)),
        ]
        .into(),
        "a page waits for no other"
    );
    assert_eq!(sampling.scrapes.len(), 3);
    assert!(sampling.scrapes.iter().all(|s| s.error.is_none()));
    assert_eq!(
        sampling.observations["server"].running_requests,
        Some(9.0),
        "three pages of 3 running requests"
    );
}
