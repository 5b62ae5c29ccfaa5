//! Fixture pages in the formats of vLLM V0 and V1 (0.8 to 0.33) and SGLang 0.4 and 0.5, read
//! through the whole signal path: parser, adapter, rank rule, windows and role observation.

use jiff::Timestamp;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_signals::RoleObservation;
use mds_signals::engine::{EngineKind, read};
use mds_signals::exposition::parse;
use mds_signals::observation::{RoleInputs, observe_role};
use mds_signals::samples::{PodReading, PromptPath, SampleStore};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn t0() -> Timestamp {
    "2026-11-30T10:00:00Z".parse().unwrap()
}

/// Scrapes each Pod twice, 15 s apart, and observes the role after the second pass.
fn observe(engine: EngineKind, kind: RoleKind, pods: &[(&str, String, String)]) -> RoleObservation {
    let mut store = SampleStore::default();
    let mut readings: Vec<PodReading> = Vec::new();
    for (uid, first, _) in pods {
        store.record(engine, uid, Some(0), read(engine, &parse(first)), t0());
    }
    let later = t0() + jiff::SignedDuration::from_secs(15);
    for (uid, _, second) in pods {
        readings.push(store.record(engine, uid, Some(0), read(engine, &parse(second)), later));
    }
    observe_role(&RoleInputs {
        kind: &kind,
        ready_replicas: pods.len() as u32,
        readings: &readings,
        interval_seconds: 15,
        now: later,
    })
}

fn pair(name: &str) -> (String, String) {
    (fixture(&format!("{name}-a")), fixture(&format!("{name}-b")))
}

fn one_pod(engine: EngineKind, kind: RoleKind, name: &str) -> RoleObservation {
    let (a, b) = pair(name);
    observe(engine, kind, &[("pod-1", a, b)])
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("value present");
    assert!((actual - expected).abs() < 1e-6, "{actual} != {expected}");
}

#[test]
fn vllm_0_10_two_dp_engines_with_duplicate_legacy_families() {
    let o = one_pod(EngineKind::Vllm, RoleKind::Server, "vllm-0.10.2-dp2");
    assert_eq!(o.signal_state, SignalState::Fresh);
    assert!(o.coverage_complete);
    close(o.running_requests, 25.0);
    close(o.waiting_requests, 5.0);
    close(o.kv_cache_usage, 0.55); // gpu_cache_usage_perc copy ignored
    // (90,000 + 80,000 prompt - 60,000 - 20,000 hits) / 15 s; the legacy hit counter is not
    // subtracted a second time.
    close(o.prompt_tokens_per_second, 6000.0);
    close(o.generation_tokens_per_second, 1800.0);
    close(o.ttft_milliseconds, 10_000.0);
    close(o.itl_milliseconds, 200.0); // inter_token_latency, not also time_per_output_token
    assert_eq!(o.prompt_paths, vec![PromptPath::PromptMinusPrefixHits]);
}

#[test]
fn vllm_0_8_legacy_hits_in_blocks_are_not_subtracted() {
    let o = one_pod(EngineKind::Vllm, RoleKind::Server, "vllm-0.8.5");
    close(o.prompt_tokens_per_second, 6000.0); // 90,000 / 15, blocks ignored
    assert_eq!(o.prompt_paths, vec![PromptPath::PromptOnly]);
    close(o.kv_cache_usage, 0.62);
    close(o.itl_milliseconds, 200.0); // time_per_output_token_seconds
    close(o.ttft_milliseconds, 10_000.0);
}

#[test]
fn vllm_v0_without_engine_labels_or_hit_counter() {
    let o = one_pod(EngineKind::Vllm, RoleKind::Server, "vllm-0.8.2-v0");
    close(o.running_requests, 14.0);
    close(o.prompt_tokens_per_second, 6000.0);
    assert_eq!(o.prompt_paths, vec![PromptPath::PromptOnly]);
}

#[test]
fn vllm_0_12_ignores_external_connector_hits() {
    let o = one_pod(EngineKind::Vllm, RoleKind::Server, "vllm-0.12.0");
    close(o.prompt_tokens_per_second, 2000.0); // (90,000 - 60,000) / 15
    close(o.kv_cache_usage, 0.62);
}

#[test]
fn vllm_0_33_external_lb_rank_one_counts_and_waiting_by_reason_is_not_added() {
    let o = one_pod(EngineKind::Vllm, RoleKind::Server, "vllm-0.33.0-rank1");
    close(o.running_requests, 11.0);
    close(o.waiting_requests, 3.0);
    close(o.prompt_tokens_per_second, 4000.0); // (80,000 - 20,000) / 15
}

#[test]
fn sglang_0_5_dp_attention_keeps_the_lowest_rank_of_each_group() {
    let o = one_pod(EngineKind::Sglang, RoleKind::Server, "sglang-0.5.18-dpattn");
    close(o.running_requests, 15.0);
    close(o.waiting_requests, 4.0);
    close(o.kv_cache_usage, 0.63);
    close(o.prompt_tokens_per_second, 5600.0); // mode="input": (45,000 + 39,000) / 15
    assert_eq!(o.prompt_paths, vec![PromptPath::EffectiveInput]);
    close(o.generation_tokens_per_second, 2000.0); // both is_streaming values
    close(o.ttft_milliseconds, 6000.0);
    close(o.itl_milliseconds, 80.0);
}

#[test]
fn sglang_decode_adds_the_transfer_queue_and_drops_priority_breakdowns() {
    let decode = one_pod(EngineKind::Sglang, RoleKind::Decode, "sglang-0.5.14-decode");
    close(decode.running_requests, 8.0);
    close(decode.waiting_requests, 7.0); // 3 queued + 4 in KV transfer
    let server = one_pod(EngineKind::Sglang, RoleKind::Server, "sglang-0.5.14-decode");
    close(server.waiting_requests, 3.0);
    // No effective-token counter in 0.5.14: prompt minus cached (device +40,000, and a host
    // child that appears with 500 and starts from zero): (70,000 - 40,500) / 15.
    close(decode.prompt_tokens_per_second, 29_500.0 / 15.0);
    assert_eq!(decode.prompt_paths, vec![PromptPath::PromptMinusCached]);
}

#[test]
fn sglang_0_4_without_rank_labels() {
    let o = one_pod(EngineKind::Sglang, RoleKind::Server, "sglang-0.4.3");
    close(o.running_requests, 8.0);
    close(o.waiting_requests, 3.0);
    close(o.prompt_tokens_per_second, 2000.0); // (70,000 - 40,000) / 15
    close(o.generation_tokens_per_second, 1600.0);
    close(o.itl_milliseconds, 80.0); // time_per_output_token_seconds
}

#[test]
fn pods_with_different_bucket_layouts_merge_on_common_boundaries() {
    let (a1, b1) = pair("vllm-0.8.5"); // TTFT buckets stop at 10 s
    let (a2, b2) = pair("vllm-0.10.2-dp2"); // TTFT buckets go to 2560 s
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", a1, b1), ("pod-2", a2, b2)],
    );
    close(o.ttft_milliseconds, 10_000.0);
    close(o.running_requests, 39.0);
    close(o.prompt_tokens_per_second, 12_000.0);
}

#[test]
fn a_counter_reset_drops_the_window_until_a_new_baseline() {
    let (a, b) = pair("vllm-0.12.0");
    let mut store = SampleStore::default();
    let engine = EngineKind::Vllm;
    let at = |s: i64| t0() + jiff::SignedDuration::from_secs(s);
    store.record(engine, "pod-1", Some(0), read(engine, &parse(&b)), at(0));
    // The later page has smaller counters: the engine restarted.
    let reading = store.record(engine, "pod-1", Some(0), read(engine, &parse(&a)), at(15));
    assert!(reading.window.is_none());
    assert_eq!(reading.reset, Some("a counter decreased"));
    let reading = store.record(engine, "pod-1", Some(0), read(engine, &parse(&b)), at(30));
    assert!(
        reading.window.is_some(),
        "two successive valid samples again"
    );
    // A container restart also drops the baseline, even with growing counters.
    let reading = store.record(engine, "pod-1", Some(1), read(engine, &parse(&b)), at(45));
    assert_eq!(reading.reset, Some("the container restarted"));
    // So does a new process start time.
    let restarted = b.replace(
        "process_start_time_seconds 1.76410002e+09",
        "process_start_time_seconds 1.76420002e+09",
    );
    let reading = store.record(
        engine,
        "pod-1",
        Some(1),
        read(engine, &parse(&restarted)),
        at(60),
    );
    assert!(reading.reset.unwrap().contains("new process"));
}

#[test]
fn a_first_observation_alone_yields_no_rate() {
    let (a, _) = pair("vllm-0.12.0");
    let mut store = SampleStore::default();
    let reading = store.record(
        EngineKind::Vllm,
        "pod-1",
        None,
        read(EngineKind::Vllm, &parse(&a)),
        t0(),
    );
    let o = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 1,
        readings: &[reading],
        interval_seconds: 15,
        now: t0(),
    });
    assert_eq!(o.signal_state, SignalState::Missing);
    assert_eq!(o.prompt_tokens_per_second, None, "missing is never zero");
    close(o.running_requests, 14.0);
    assert!(!o.coverage_complete);
}

#[test]
fn missing_series_stay_missing() {
    // A page with only gauges: rates and latency are missing, not zero.
    let gauges =
        "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_waiting{engine=\"0\"} 0\n";
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", gauges.into(), gauges.into())],
    );
    assert_eq!(o.prompt_tokens_per_second, None);
    assert_eq!(o.generation_tokens_per_second, None);
    assert_eq!(o.ttft_milliseconds, None);
    assert_eq!(o.kv_cache_usage, None);
    assert_eq!(o.signal_state, SignalState::Missing);
}

#[test]
fn p95_in_the_infinite_bucket_falls_back_to_the_mean() {
    let page = |n: f64, sum: f64| {
        format!(
            "vllm:time_to_first_token_seconds_bucket{{le=\"0.1\"}} 1\nvllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {n}\nvllm:time_to_first_token_seconds_count {n}\nvllm:time_to_first_token_seconds_sum {sum}\nvllm:prompt_tokens_total 0\nvllm:num_requests_running 1\n"
        )
    };
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", page(1.0, 0.05), page(11.0, 30.05))],
    );
    close(o.ttft_milliseconds, 3000.0); // 30 s over 10 observations
}

#[test]
fn malformed_lines_are_skipped_and_the_rest_is_used() {
    let (a, b) = pair("vllm-0.12.0");
    let broken = |page: &str| {
        page.replacen(
            "vllm:num_requests_waiting{",
            "vllm:num_requests_waiting{{broken",
            1,
        ) + "garbage line here\nvllm:bad_value{a=\"1\"} twelve\n"
    };
    let broken_b = broken(&b);
    let parsed = parse(&broken_b);
    assert_eq!(parsed.skipped.len(), 3, "{:?}", parsed.skipped);
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", broken(&a), broken(&b))],
    );
    close(o.running_requests, 14.0);
    assert_eq!(
        o.waiting_requests, None,
        "the only waiting line was malformed"
    );
    close(o.prompt_tokens_per_second, 2000.0);
}

#[test]
fn partial_coverage_estimates_from_the_sampled_mean_and_is_incomplete() {
    let (a, b) = pair("vllm-0.12.0");
    let mut store = SampleStore::default();
    let engine = EngineKind::Vllm;
    let later = t0() + jiff::SignedDuration::from_secs(15);
    store.record(engine, "pod-1", None, read(engine, &parse(&a)), t0());
    let reading = store.record(engine, "pod-1", None, read(engine, &parse(&b)), later);
    let o = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 3,
        readings: &[reading],
        interval_seconds: 15,
        now: later,
    });
    assert!(!o.coverage_complete);
    assert_eq!(o.sampled_replicas, 1);
    close(o.running_requests, 42.0); // 14 per Pod x 3 ready
    close(o.prompt_tokens_per_second, 6000.0);
}

#[test]
fn readings_older_than_three_intervals_are_stale() {
    let (a, b) = pair("vllm-0.12.0");
    let mut store = SampleStore::default();
    let engine = EngineKind::Vllm;
    store.record(engine, "pod-1", None, read(engine, &parse(&a)), t0());
    let reading = store.record(
        engine,
        "pod-1",
        None,
        read(engine, &parse(&b)),
        t0() + jiff::SignedDuration::from_secs(15),
    );
    let o = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 1,
        readings: &[reading],
        interval_seconds: 15,
        now: t0() + jiff::SignedDuration::from_secs(15 + 46),
    });
    assert_eq!(o.signal_state, SignalState::Stale);
    assert_eq!(o.running_requests, None);
}

#[test]
fn an_idle_role_is_idle_not_missing() {
    let page = |t: f64| {
        format!(
            "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:prompt_tokens_total {t}\nvllm:generation_tokens_total {t}\n"
        )
    };
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", page(5.0), page(5.0))],
    );
    assert_eq!(o.signal_state, SignalState::Idle);
    close(o.prompt_tokens_per_second, 0.0);
}

#[test]
fn the_status_shows_rounded_numbers_and_leaves_missing_signals_out() {
    let o = one_pod(EngineKind::Sglang, RoleKind::Decode, "sglang-0.5.14-decode");
    let mut status = mds_api::status::RoleStatus {
        name: "decode".into(),
        ..Default::default()
    };
    o.write_status(&mut status);
    assert_eq!(status.ready_replicas, Some(1));
    assert_eq!(status.signal_state, Some(SignalState::Fresh));
    assert_eq!(status.prompt_tokens_per_second.unwrap().0, "1966.667");
    assert_eq!(status.generation_tokens_per_second.unwrap().0, "1600");
    assert_eq!(status.running_requests, Some(8));
    assert_eq!(status.waiting_requests, Some(7));
    assert_eq!(status.kv_cache_usage.unwrap().0, "0.71");
    assert!(status.ttft_milliseconds.is_some());

    let (a, _) = pair("vllm-0.12.0");
    let mut store = SampleStore::default();
    let reading = store.record(
        EngineKind::Vllm,
        "pod-1",
        None,
        read(EngineKind::Vllm, &parse(&a)),
        t0(),
    );
    let first = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 1,
        readings: &[reading],
        interval_seconds: 15,
        now: t0(),
    });
    let mut status = mds_api::status::RoleStatus::default();
    first.write_status(&mut status);
    assert_eq!(
        status.prompt_tokens_per_second, None,
        "a missing rate is absent, not \"0\""
    );
    assert_eq!(status.ttft_milliseconds, None);
    assert_eq!(status.signal_state, Some(SignalState::Missing));
}

#[test]
fn more_than_64_ready_pods_leave_coverage_incomplete() {
    let (a, b) = pair("vllm-0.12.0");
    let pods: Vec<(String, String, String)> = (0..64)
        .map(|i| (format!("pod-{i}"), a.clone(), b.clone()))
        .collect();
    let borrowed: Vec<(&str, String, String)> = pods
        .iter()
        .map(|(u, a, b)| (u.as_str(), a.clone(), b.clone()))
        .collect();
    let all = observe(EngineKind::Vllm, RoleKind::Server, &borrowed);
    assert!(all.coverage_complete, "64 ready, 64 sampled");
    // The same 64 readings while 70 Pods are ready: the sampler's cap leaves 6 unread.
    let mut store = SampleStore::default();
    let later = t0() + jiff::SignedDuration::from_secs(15);
    let engine = EngineKind::Vllm;
    let readings: Vec<PodReading> = pods
        .iter()
        .map(|(uid, a, b)| {
            store.record(engine, uid, None, read(engine, &parse(a)), t0());
            store.record(engine, uid, None, read(engine, &parse(b)), later)
        })
        .collect();
    let capped = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 70,
        readings: &readings,
        interval_seconds: 15,
        now: later,
    });
    assert!(!capped.coverage_complete);
    close(capped.running_requests, 14.0 * 70.0);
}

#[test]
fn a_nan_counter_drops_the_window_and_never_yields_an_infinite_rate() {
    let page = |v: &str| {
        format!(
            "vllm:num_requests_running 1\nvllm:prompt_tokens_total {v}\nvllm:generation_tokens_total 0\n"
        )
    };
    let mut store = SampleStore::default();
    let e = EngineKind::Vllm;
    let at = |s: i64| t0() + jiff::SignedDuration::from_secs(s);
    store.record(e, "p", None, read(e, &parse(&page("100"))), at(0));
    let r = store.record(e, "p", None, read(e, &parse(&page("NaN"))), at(15));
    assert!(r.window.is_none());
    let r = store.record(e, "p", None, read(e, &parse(&page("400"))), at(30));
    assert!(
        r.window.is_none(),
        "the NaN baseline gives no rate: {:?}",
        r.window
    );
    let r = store.record(e, "p", None, read(e, &parse(&page("700"))), at(45));
    assert_eq!(r.window.unwrap().prompt_tokens, Some(300.0));
}

#[test]
fn a_vanished_histogram_drops_the_window() {
    let (a, b) = pair("vllm-0.12.0");
    let without_ttft: String = b
        .lines()
        .filter(|l| !l.contains("time_to_first_token"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut store = SampleStore::default();
    let e = EngineKind::Vllm;
    store.record(e, "p", None, read(e, &parse(&a)), t0());
    let r = store.record(
        e,
        "p",
        None,
        read(e, &parse(&without_ttft)),
        t0() + jiff::SignedDuration::from_secs(15),
    );
    assert_eq!(
        r.reset,
        Some("a histogram used in the previous sample vanished")
    );
}

#[test]
fn a_window_without_rates_does_not_count_as_coverage() {
    let (a, b) = pair("vllm-0.12.0");
    let gauges_only = "vllm:num_requests_running 3\nvllm:num_requests_waiting 0\n".to_string();
    let o = observe(
        EngineKind::Vllm,
        RoleKind::Server,
        &[("pod-1", a, b), ("pod-2", gauges_only.clone(), gauges_only)],
    );
    assert!(!o.coverage_complete, "pod-2 has no rate window");
    close(o.prompt_tokens_per_second, 4000.0); // pod-1's 2000 scaled to 2 ready
}

/// D9 amended: a Pod that became Ready inside the window answers with its first sample and
/// no rate window. It is not filled in with its peers' mean: what its counters hold (all of
/// it served since it became Ready) is its part of the window, never more than that mean. A
/// Pod without a window for any other reason, or one that does not answer, is filled in.
#[test]
fn a_joining_pod_counts_what_it_served_and_a_silent_one_is_filled_in() {
    let (a, b) = pair("vllm-0.12.0");
    let engine = EngineKind::Vllm;
    let later = t0() + jiff::SignedDuration::from_secs(15);
    let page = |prompt: u32| {
        format!(
            "vllm:prompt_tokens_total{{model_name=\"m\"}} {prompt}\n\
             vllm:prefix_cache_hits_total{{model_name=\"m\"}} 0\n"
        )
    };
    let observe_with = |joiner_prompt: u32, ready_since: Option<Timestamp>, ready: u32| {
        let mut store = SampleStore::default();
        let mut readings = Vec::new();
        for pod in ["pod-1", "pod-2"] {
            store.record(engine, pod, None, read(engine, &parse(&a)), t0());
            readings.push(store.record(engine, pod, None, read(engine, &parse(&b)), later));
        }
        let mut joiner = store.record(
            engine,
            "pod-3",
            None,
            read(engine, &parse(&page(joiner_prompt))),
            later,
        );
        joiner.ready_since = ready_since;
        readings.push(joiner);
        observe_role(&RoleInputs {
            kind: &RoleKind::Server,
            ready_replicas: ready,
            readings: &readings,
            interval_seconds: 15,
            now: later,
        })
    };
    let inside = Some(t0() + jiff::SignedDuration::from_secs(5));
    // pod-1 and pod-2 served 2000 tokens/s each; pod-3 counted 9000 since it became Ready
    // 5 s into the window: 600 tokens/s of the window's load.
    let o = observe_with(9000, inside, 3);
    close(o.prompt_tokens_per_second, 4600.0);
    assert!(
        !o.coverage_complete,
        "shrinking still needs every Pod's window"
    );
    // Counted more than its peers' mean (Ready again without a new process): the mean.
    close(
        observe_with(60_000, inside, 3).prompt_tokens_per_second,
        6000.0,
    );
    // Ready since before the window, or Ready time unknown: it should have had a window,
    // so it is filled in with the mean as before.
    let before = Some(t0() - jiff::SignedDuration::from_secs(60));
    close(
        observe_with(9000, before, 3).prompt_tokens_per_second,
        6000.0,
    );
    close(observe_with(9000, None, 3).prompt_tokens_per_second, 6000.0);
    // A fourth ready Pod that did not answer is filled in with the windowed Pods' mean.
    close(
        observe_with(9000, inside, 4).prompt_tokens_per_second,
        6600.0,
    );
}

#[test]
fn prefix_hit_names_the_preferred_counter_and_explains_the_legacy_one() {
    let series = |page: &str| -> Vec<(String, bool, String)> {
        read(EngineKind::Vllm, &parse(page))
            .series
            .into_iter()
            .filter(|s| s.name.contains("prefix_cache_hits"))
            .map(|s| (s.name, s.used, s.note))
            .collect()
    };
    let both = "vllm:prefix_cache_hits_total 5\nvllm:gpu_prefix_cache_hits_total 5\n";
    assert_eq!(
        series(both),
        vec![
            (
                "vllm:gpu_prefix_cache_hits_total".to_string(),
                false,
                "legacy name; vllm:prefix_cache_hits_total is preferred and never summed with it"
                    .to_string()
            ),
            (
                "vllm:prefix_cache_hits_total".to_string(),
                true,
                "prefix-cache hit tokens, subtracted from prompt tokens".to_string()
            ),
        ]
    );
    let blocks = "# HELP vllm:gpu_prefix_cache_hits_total Prefix cache hits, in blocks.\n\
                  vllm:gpu_prefix_cache_hits_total 5\n";
    let s = read(EngineKind::Vllm, &parse(blocks));
    assert!(s.counters.is_empty(), "block counts are never subtracted");
    assert!(!series(blocks)[0].1);
    let tokens = "vllm:gpu_prefix_cache_hits_total 5\n";
    assert_eq!(read(EngineKind::Vllm, &parse(tokens)).counters.len(), 1);
    assert!(series(tokens)[0].1);
}

#[test]
fn every_missing_or_ignored_series_says_why() {
    use mds_signals::engine::reading;
    let page = "vllm:num_requests_running{engine=\"0\"} -3\n\
                vllm:num_requests_waiting{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"1\"} NaN\n\
                vllm:kv_cache_usage_perc{engine=\"0\"} 85\n\
                vllm:time_to_first_token_seconds_bucket{le=\"NaN\"} 1\n\
                vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n";
    let sample = read(EngineKind::Vllm, &parse(page));
    let note = |name: &str| {
        sample
            .series
            .iter()
            .find(|s| s.name == name)
            .map(|s| (s.used, s.note.clone()))
            .unwrap_or_else(|| panic!("{name} not noted: {:?}", sample.series))
    };
    let (used, why) = note("vllm:num_requests_running");
    assert!(!used);
    assert!(
        why.contains("every value of vllm:num_requests_running is negative or not a number"),
        "{why}"
    );
    assert_eq!(sample.missing[reading::RUNNING], why);
    let (used, why) = note("vllm:num_requests_waiting");
    assert!(used);
    assert!(
        why.contains("1 negative or not-a-number value(s) left out"),
        "{why}"
    );
    let (used, why) = note("vllm:kv_cache_usage_perc");
    assert!(!used);
    assert!(why.contains("outside 0 to 1"), "{why}");
    assert!(sample.missing[reading::KV_USAGE].contains("a percentage?"));
    let (_, why) = note("vllm:time_to_first_token_seconds");
    assert!(
        why.contains("1 bucket line(s) whose le is not a number"),
        "{why}"
    );
    for (missing, name) in [
        (reading::PROMPT, "vllm:prompt_tokens_total"),
        (reading::GENERATION, "vllm:generation_tokens_total"),
        (reading::ITL, "vllm:inter_token_latency_seconds"),
    ] {
        assert!(
            sample.missing[missing].contains(name),
            "{missing}: {:?}",
            sample.missing
        );
        assert!(sample.missing[missing].contains("on the page"));
    }
    assert!(!sample.missing.contains_key(reading::WAITING));
}
