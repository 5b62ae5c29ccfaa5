//! Rates after a gap and expired readings (D8, D10): a baseline older than two sampling
//! intervals is no baseline, so the first reading after a suspension or a long silence
//! establishes no rate and no latency; a role whose newest valid reading is older than three
//! intervals is `Stale`.

use jiff::{SignedDuration, Timestamp};
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_signals::engine::{EngineKind, read};
use mds_signals::exposition::parse;
use mds_signals::observation::{RoleInputs, observe_role};
use mds_signals::samples::{PodReading, SampleStore};
use mds_signals::{EngineSample, RoleObservation};

const VLLM: EngineKind = EngineKind::Vllm;

fn at(seconds: i64) -> Timestamp {
    "2026-11-30T10:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(seconds)
}

/// A page whose counters and TTFT histogram have grown with `t` seconds of traffic at
/// 100 generated tokens and one request per second.
fn page(t: i64) -> EngineSample {
    let text = format!(
        "vllm:num_requests_running 3\nvllm:num_requests_waiting 0\n\
         vllm:prompt_tokens_total 0\nvllm:generation_tokens_total {}\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} {t}\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {t}\n\
         vllm:time_to_first_token_seconds_count {t}\n\
         vllm:time_to_first_token_seconds_sum {}\n",
        100 * t,
        t as f64 * 0.05,
    );
    read(VLLM, &parse(&text))
}

fn observe(reading: &PodReading, now: Timestamp) -> RoleObservation {
    observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 1,
        readings: std::slice::from_ref(reading),
        interval_seconds: 15,
        now,
    })
}

#[test]
fn a_baseline_older_than_two_intervals_starts_a_new_window() {
    let mut store = SampleStore::default();
    store.set_sampling_interval(15);
    store.record(VLLM, "p", None, page(0), at(0));
    let r = store.record(VLLM, "p", None, page(15), at(15));
    assert_eq!(r.window.as_ref().map(|w| w.elapsed_seconds), Some(15.0));
    // One missed pass: a gap of exactly two intervals still makes a window.
    let r = store.record(VLLM, "p", None, page(45), at(45));
    assert_eq!(r.window.as_ref().map(|w| w.elapsed_seconds), Some(30.0));
    // Ten minutes of silence (a suspension, a stalled worker): the traffic of the whole gap is
    // not one rate. The reading is a baseline only, for the counters and the histograms.
    let r = store.record(VLLM, "p", None, page(645), at(645));
    assert!(r.window.is_none(), "{:?}", r.window);
    assert_eq!(
        r.reset,
        Some("the baseline is older than two sampling intervals")
    );
    let o = observe(&r, at(645));
    assert_eq!(o.signal_state, SignalState::Missing);
    assert_eq!(o.generation_tokens_per_second, None);
    assert_eq!(o.ttft_milliseconds, None);
    assert!(!o.coverage_complete);
    assert_eq!(o.running_requests, Some(3.0), "gauges are read as they are");
    // The next reading establishes the window again, over its own 15 s.
    let r = store.record(VLLM, "p", None, page(660), at(660));
    let o = observe(&r, at(660));
    assert_eq!(o.signal_state, SignalState::Fresh);
    assert_eq!(o.generation_tokens_per_second, Some(100.0));
    assert_eq!(o.ttft_milliseconds, Some(100.0));
}

#[test]
fn the_gap_follows_the_interval() {
    let mut store = SampleStore::default();
    store.set_sampling_interval(60);
    store.record(VLLM, "p", None, page(0), at(0));
    let r = store.record(VLLM, "p", None, page(120), at(120));
    assert!(r.window.is_some(), "two 60 s intervals");
    store.set_sampling_interval(15);
    let r = store.record(VLLM, "p", None, page(160), at(160));
    assert!(r.window.is_none(), "40 s is more than two 15 s intervals");
}

fn missing() -> RoleObservation {
    observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 1,
        readings: &[],
        interval_seconds: 15,
        now: at(0),
    })
}

#[test]
fn a_role_whose_newest_valid_reading_expired_is_stale() {
    // No reading this pass: Missing while the newest valid reading is within three intervals,
    // Stale once it is older.
    let mut o = missing();
    assert_eq!(o.signal_state, SignalState::Missing);
    o.expire(Some(at(0)), 15, at(45));
    assert_eq!(o.signal_state, SignalState::Missing);
    o.expire(Some(at(0)), 15, at(46));
    assert_eq!(o.signal_state, SignalState::Stale);
    // Never read at all: Missing, not Stale.
    let mut o = missing();
    o.expire(None, 15, at(600));
    assert_eq!(o.signal_state, SignalState::Missing);
    // A role read this pass keeps its state whatever came before.
    let mut store = SampleStore::default();
    store.record(VLLM, "p", None, page(0), at(0));
    let r = store.record(VLLM, "p", None, page(15), at(15));
    let mut o = observe(&r, at(15));
    o.expire(Some(at(15)), 15, at(15));
    assert_eq!(o.signal_state, SignalState::Fresh);
}

#[test]
fn a_page_without_any_signal_is_no_valid_reading() {
    let mut store = SampleStore::default();
    let garbage = read(VLLM, &parse("this is not an engine page\n"));
    let r = store.record(VLLM, "p", None, garbage, at(0));
    assert!(!r.is_valid());
    let r = store.record(VLLM, "p", None, page(15), at(15));
    assert!(r.is_valid());
}

#[test]
fn a_page_without_any_signal_between_two_valid_ones_is_no_baseline() {
    // D8: a rate needs two valid samples of the same process. An error page served with
    // status 200 (a proxy's 502) is none: the page after it, whose counters hold the whole
    // process's history (600 s of it here), must not count that history as 15 s of work.
    let mut store = SampleStore::default();
    store.set_sampling_interval(15);
    store.record(VLLM, "p", None, page(600), at(600));
    let garbage = read(
        VLLM,
        &parse("<html><title>502 Bad Gateway</title></html>\n"),
    );
    let r = store.record(VLLM, "p", None, garbage, at(615));
    assert!(!r.is_valid());
    assert!(r.window.is_none());
    let r = store.record(VLLM, "p", None, page(630), at(630));
    assert!(
        r.window.is_none(),
        "a window from an error page's baseline: {:?}",
        r.window
    );
    let r = store.record(VLLM, "p", None, page(645), at(645));
    let w = r.window.expect("two valid samples again");
    assert_eq!(w.generation_tokens, Some(1500.0));
}
