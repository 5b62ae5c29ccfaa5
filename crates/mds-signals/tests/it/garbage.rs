//! Garbage and edge-case pages: a value that is not a usable reading is a missing signal or a
//! dropped window, never a number the planner acts on (second signals review).

use jiff::{SignedDuration, Timestamp};
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

fn sample(page: &str) -> EngineSample {
    read(VLLM, &parse(page))
}

fn observe(readings: &[PodReading], ready: u32, now: Timestamp) -> RoleObservation {
    observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: ready,
        readings,
        interval_seconds: 15,
        now,
    })
}

/// Two scrapes of one Pod 15 s apart; the second reading.
fn two_scrapes(first: &str, second: &str) -> PodReading {
    let mut store = SampleStore::default();
    store.record(VLLM, "p", None, sample(first), at(0));
    store.record(VLLM, "p", None, sample(second), at(15))
}

fn counters(generation: &str) -> String {
    format!(
        "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n\
         vllm:prompt_tokens_total 100\nvllm:generation_tokens_total {generation}\n"
    )
}

#[test]
fn an_infinite_counter_drops_the_window() {
    let r = two_scrapes(&counters("10"), &counters("1e400"));
    assert!(r.window.is_none());
    assert_eq!(r.reset, Some("a counter reads NaN or infinity"));
    let r = two_scrapes(&counters("+Inf"), &counters("+Inf"));
    assert!(r.window.is_none(), "inf - inf is no rate");
    let o = observe(std::slice::from_ref(&r), 1, at(15));
    assert_eq!(o.generation_tokens_per_second, None);
    assert!(!o.coverage_complete);
}

#[test]
fn infinite_negative_or_out_of_range_gauges_are_missing() {
    let page = "vllm:num_requests_running -5\nvllm:num_requests_waiting +Inf\n\
                vllm:kv_cache_usage_perc{engine=\"0\"} +Inf\nvllm:kv_cache_usage_perc{engine=\"1\"} 37\n";
    let s = sample(page);
    assert_eq!(s.running, None);
    assert_eq!(s.waiting, None);
    assert!(s.kv_usage.is_empty(), "{:?}", s.kv_usage);
    let ok = sample("vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n");
    assert_eq!(ok.kv_usage, vec![0.5]);
}

fn ttft(bucket_inf: &str, count: &str) -> String {
    format!(
        "vllm:generation_tokens_total 0\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} 1\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {bucket_inf}\n\
         vllm:time_to_first_token_seconds_count {count}\n\
         vllm:time_to_first_token_seconds_sum 1\n"
    )
}

#[test]
fn an_infinite_histogram_bucket_or_count_drops_the_window() {
    let r = two_scrapes(&ttft("1", "1"), &ttft("+Inf", "2"));
    assert_eq!(r.reset, Some("a histogram bucket reads NaN or infinity"));
    let r = two_scrapes(&ttft("1", "1"), &ttft("2", "+Inf"));
    assert_eq!(
        r.reset,
        Some("a histogram count or sum reads NaN or infinity")
    );
}

#[test]
fn a_windowed_pod_without_a_counter_counts_as_zero_not_as_the_mean() {
    // Pod A generated 1500 tokens in 15 s; pod B (new) has prompt counters but has not
    // created its generation counter yet: the role generated 100 tok/s, not 200.
    let a = |g: u32| format!("vllm:prompt_tokens_total 0\nvllm:generation_tokens_total {g}\n");
    let b0 = "vllm:prompt_tokens_total 0\n";
    let mut store = SampleStore::default();
    store.record(VLLM, "a", None, sample(&a(0)), at(0));
    store.record(VLLM, "b", None, sample(b0), at(0));
    let readings = vec![
        store.record(VLLM, "a", None, sample(&a(1500)), at(15)),
        store.record(VLLM, "b", None, sample(b0), at(15)),
    ];
    let o = observe(&readings, 2, at(15));
    assert!(o.coverage_complete);
    assert_eq!(o.generation_tokens_per_second, Some(100.0));
    // B's counter appears with 300 tokens made in the next window: they count.
    let b1 = "vllm:prompt_tokens_total 0\nvllm:generation_tokens_total 300\n";
    let readings = vec![
        store.record(VLLM, "a", None, sample(&a(3000)), at(30)),
        store.record(VLLM, "b", None, sample(b1), at(30)),
    ];
    let o = observe(&readings, 2, at(30));
    assert_eq!(o.generation_tokens_per_second, Some(120.0));
}

#[test]
fn a_histogram_child_created_in_the_window_counts_all_its_observations() {
    let first = "vllm:generation_tokens_total 0\n";
    let second = "vllm:generation_tokens_total 10\n\
                  vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 1\n\
                  vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 100\n\
                  vllm:time_to_first_token_seconds_count 100\n\
                  vllm:time_to_first_token_seconds_sum 990\n";
    let r = two_scrapes(first, second);
    let o = observe(std::slice::from_ref(&r), 1, at(15));
    assert_eq!(o.ttft_milliseconds, Some(9900.0));
}

#[test]
fn nan_or_negative_infinite_boundaries_drop_only_that_bucket() {
    let page = |n: u32| {
        format!(
            "vllm:generation_tokens_total {n}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"NaN\"}} {n}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"-Inf\"}} 0\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"0.5\"}} {n}\n\
             vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {n}\n\
             vllm:time_to_first_token_seconds_count {n}\n\
             vllm:time_to_first_token_seconds_sum 1\n"
        )
    };
    let r = two_scrapes(&page(0), &page(100));
    assert_eq!(r.reset, None);
    let o = observe(std::slice::from_ref(&r), 1, at(15));
    assert_eq!(o.ttft_milliseconds, Some(500.0));
}

#[test]
fn a_restart_mark_is_matched_whatever_the_label_order() {
    let page = |labels: &str, created: u32, generated: u32| {
        format!(
            "vllm:generation_tokens_created{{{labels}}} {created}\n\
             vllm:generation_tokens_total{{engine=\"0\",model_name=\"m\"}} {generated}\n"
        )
    };
    let mut store = SampleStore::default();
    store.record(
        VLLM,
        "p",
        None,
        sample(&page("engine=\"0\",model_name=\"m\"", 100, 10)),
        at(0),
    );
    let r = store.record(
        VLLM,
        "p",
        None,
        sample(&page("model_name=\"m\",engine=\"0\"", 200, 20)),
        at(15),
    );
    assert_eq!(
        r.reset,
        Some("a _created or process start time changed: a new process")
    );
}
