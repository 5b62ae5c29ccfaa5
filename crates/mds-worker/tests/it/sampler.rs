//! A page counts as read when it arrived, not when its pass began: a slow read must not bend
//! the counter rates. The source's clock says when a page arrived; paused Tokio time under
//! it makes the delays exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use mds_api::target::ModelDeployment;
use mds_signals::SampleStore;
use mds_testdata::{mk_pod, mk_role, mk_target};
use mds_worker::sampler::sample;
use mds_worker::{MetricsSource, ScrapeError};

/// One engine whose page shows `generated` tokens and arrives `delay` after it is asked for.
/// Its clock is tokio's (paused here), from `at(0)` when it was made.
struct SlowEngine {
    state: Mutex<(u64, Duration)>,
    made: tokio::time::Instant,
}

impl Default for SlowEngine {
    fn default() -> SlowEngine {
        SlowEngine {
            state: Mutex::default(),
            made: tokio::time::Instant::now(),
        }
    }
}

impl SlowEngine {
    fn set(&self, generated: u64, delay: Duration) {
        *self.state.lock().unwrap() = (generated, delay);
    }
}

impl MetricsSource for SlowEngine {
    fn now(&self) -> Option<Timestamp> {
        let elapsed = SignedDuration::try_from(self.made.elapsed()).ok()?;
        Some(at(0) + elapsed)
    }

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
    mk_target("llm")
        .namespace("ns")
        .uid("md-1")
        .role(mk_role("server").replicas(1))
        .typed()
}

fn pod() -> Arc<Pod> {
    let pod = mk_pod("llm", "server", 0).namespace("ns").uid("pod-0");
    Arc::new(pod.serving("127.0.0.10").typed())
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

/// The same engine behind a source that keeps no clock.
struct Clockless(SlowEngine);

impl MetricsSource for Clockless {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        self.0.fetch(url).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_source_without_a_clock_has_its_pages_read_at_the_passes_times() {
    let engine = Clockless(SlowEngine::default());
    let (md, pods) = (target(), vec![pod()]);
    let mut store = SampleStore::default();
    // The page takes 5 s to arrive, but only the source's clock could say so: 2,000 tokens
    // over the passes' 15 s, and a read that took no time.
    engine.0.set(10_000, Duration::ZERO);
    sample(&engine, &mut store, &md, &pods, 15, at(0)).await;
    engine.0.set(12_000, Duration::from_secs(5));
    let sampling = sample(&engine, &mut store, &md, &pods, 15, at(15)).await;
    let rate = sampling.observations["server"].generation_tokens_per_second;
    assert_eq!(rate, Some(2_000.0 / 15.0));
    assert_eq!(sampling.scrapes[0].seconds, 0.0);
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

/// One engine whose page shows `generated` tokens, or fails while `None`.
#[derive(Default)]
struct FlakyEngine {
    generated: Mutex<Option<u64>>,
}

impl FlakyEngine {
    fn set(&self, generated: Option<u64>) {
        *self.generated.lock().unwrap() = generated;
    }
}

impl MetricsSource for FlakyEngine {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let generated = *self.generated.lock().unwrap();
        let generated = generated.ok_or_else(|| ScrapeError::Connect(url.to_string()))?;
        let engine = SlowEngine::default();
        engine.set(generated, Duration::ZERO);
        engine.fetch(url).await
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_sampling_after_a_long_gap_is_a_baseline_only() {
    use mds_api::status::SignalState;
    let engine = FlakyEngine::default();
    let (md, pods) = (target(), vec![pod()]);
    let mut store = SampleStore::default();
    engine.set(Some(0));
    sample(&engine, &mut store, &md, &pods, 15, at(0)).await;
    engine.set(Some(1_500));
    let s = sample(&engine, &mut store, &md, &pods, 15, at(15)).await;
    assert_eq!(
        s.observations["server"].generation_tokens_per_second,
        Some(100.0)
    );
    // Ten minutes without a sampling (the scaler was suspended) while a burst ran: its tokens
    // are not one rate of now.
    engine.set(Some(1_000_000));
    let s = sample(&engine, &mut store, &md, &pods, 15, at(615)).await;
    let o = &s.observations["server"];
    assert_eq!(o.signal_state, SignalState::Missing);
    assert_eq!(o.generation_tokens_per_second, None);
    engine.set(Some(1_001_500));
    let s = sample(&engine, &mut store, &md, &pods, 15, at(630)).await;
    let o = &s.observations["server"];
    assert_eq!(o.signal_state, SignalState::Fresh);
    assert_eq!(o.generation_tokens_per_second, Some(100.0));
}

/// One sampling at `t` seconds of an engine showing `generated` tokens (or failing).
async fn signal_state(
    engine: &FlakyEngine,
    store: &mut SampleStore,
    t: i64,
    generated: Option<u64>,
) -> mds_api::status::SignalState {
    engine.set(generated);
    let (md, pods) = (target(), vec![pod()]);
    let sampling = sample(engine, store, &md, &pods, 15, at(t)).await;
    sampling.observations["server"].signal_state
}

#[tokio::test(start_paused = true)]
async fn a_role_whose_pages_keep_failing_turns_stale() {
    use mds_api::status::SignalState;
    let engine = FlakyEngine::default();
    let mut store = SampleStore::default();
    let s = &mut store;
    let e = &engine;
    assert_eq!(signal_state(e, s, 0, Some(0)).await, SignalState::Missing);
    assert_eq!(
        signal_state(e, s, 15, Some(1_500)).await,
        SignalState::Fresh
    );
    // The newest valid reading (15 s) is at most three intervals old: Missing.
    for t in [30, 45, 60] {
        assert_eq!(
            signal_state(e, s, t, None).await,
            SignalState::Missing,
            "at {t} s"
        );
    }
    // Older than three intervals: the readings expired.
    assert_eq!(signal_state(e, s, 75, None).await, SignalState::Stale);
    assert_eq!(signal_state(e, s, 90, None).await, SignalState::Stale);
    // The next page answers: a baseline again (the failure dropped the old one), then rates.
    assert_eq!(
        signal_state(e, s, 105, Some(10_000)).await,
        SignalState::Missing
    );
    assert_eq!(
        signal_state(e, s, 120, Some(11_500)).await,
        SignalState::Fresh
    );
}
