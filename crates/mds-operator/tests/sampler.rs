//! A page counts as read when it arrived, not when its pass began: a slow read must not bend
//! the counter rates. Paused Tokio time makes the delays exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use mds_api::target::ModelDeployment;
use mds_operator::sampler::sample;
use mds_operator::{MetricsSource, ScrapeError};
use mds_signals::SampleStore;
use serde_json::json;

/// One engine whose page shows `generated` tokens and arrives `delay` after it is asked for.
#[derive(Default)]
struct SlowEngine {
    state: Mutex<(u64, Duration)>,
}

impl SlowEngine {
    fn set(&self, generated: u64, delay: Duration) {
        *self.state.lock().unwrap() = (generated, delay);
    }
}

impl MetricsSource for SlowEngine {
    async fn fetch(&self, _url: &str) -> Result<String, ScrapeError> {
        let (generated, delay) = *self.state.lock().unwrap();
        tokio::time::sleep(delay).await;
        Ok(format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} 1\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
             # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} 0\n\
             # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {generated}\n"
        ))
    }
}

fn target() -> ModelDeployment {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
        "metadata": {"name": "llm", "namespace": "ns", "uid": "md-1"},
        "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"},
            "roles": [{"name": "server", "replicas": 1, "instanceType": "h100"}]}
    }))
    .unwrap()
}

fn pod() -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": "llm-server-0", "namespace": "ns", "uid": "pod-0",
                "labels": {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "llm",
                    "app.kubernetes.io/component": "server", "modeldeployment.gpustack.ai/pod-ordinal": "0"},
                "annotations": {"prometheus.io/port": "8000"}},
            "status": {"podIP": "127.0.0.10", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap(),
    )
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

#[tokio::test(start_paused = true)]
async fn a_counter_rate_is_taken_over_the_times_the_pages_arrived() {
    let engine = SlowEngine::default();
    let (md, pods) = (target(), vec![pod()]);
    let mut store = SampleStore::default();
    // Pass at 0 s: the page arrives at once. Pass at 15 s: it takes 5 s to arrive, and the
    // engine generated 2,000 tokens by then. 2,000 over 20 s, not over the passes' 15 s.
    engine.set(10_000, Duration::ZERO);
    sample(&engine, &mut store, &md, &pods, 15, at(0)).await;
    engine.set(12_000, Duration::from_secs(5));
    let sampling = sample(&engine, &mut store, &md, &pods, 15, at(15)).await;
    let observed = &sampling.observations["server"];
    assert_eq!(observed.generation_tokens_per_second, Some(100.0));
    assert_eq!(sampling.scrapes[0].seconds, 5.0, "the read's own duration");
}

#[tokio::test(start_paused = true)]
async fn pages_arriving_at_once_give_the_rate_over_the_passes_times() {
    let engine = SlowEngine::default();
    let (md, pods) = (target(), vec![pod()]);
    let mut store = SampleStore::default();
    engine.set(10_000, Duration::ZERO);
    sample(&engine, &mut store, &md, &pods, 15, at(0)).await;
    engine.set(11_500, Duration::ZERO);
    let sampling = sample(&engine, &mut store, &md, &pods, 15, at(15)).await;
    assert_eq!(
        sampling.observations["server"].generation_tokens_per_second,
        Some(100.0)
    );
}
