//! The tests of `windows`: answers into windows, gaps and resets, and the load's
//! description, notes and CSV.

use super::*;
use crate::commands::simulate_prometheus::catalog::{Engine, series};
use crate::commands::simulate_prometheus::tests::{matchers, range_of};

fn vllm_plan(hits: bool) -> Plan {
    Plan {
        engine: Engine::Vllm,
        requests: "vllm:request_success_total",
        prompt: Mean::Histogram {
            sum: "vllm:request_prompt_tokens_sum",
            count: "vllm:request_prompt_tokens_count",
        },
        output: Mean::PerRequest("vllm:generation_tokens_total"),
        hits: hits.then_some(Share::Ratio {
            hits: series("vllm:prefix_cache_hits_total"),
            of: series("vllm:prefix_cache_queries_total"),
        }),
    }
}

/// Answers where window i has `requests[i]` requests of 1000-token prompts and 200-token
/// outputs, a quarter of prompt tokens hit.
fn answers(requests: &[Option<f64>]) -> BTreeMap<Key, Vec<Option<f64>>> {
    let scaled = |f: f64| {
        requests
            .iter()
            .map(|r| r.map(|r| r * f))
            .collect::<Vec<_>>()
    };
    BTreeMap::from([
        (Key::Requests, scaled(1.0)),
        (Key::PromptSum, scaled(1000.0)),
        (Key::PromptCount, scaled(1.0)),
        (Key::OutputSum, scaled(200.0)),
        (Key::Hits, scaled(250.0)),
        (Key::HitsOf, scaled(1000.0)),
        (Key::Resets, vec![Some(0.0); requests.len()]),
    ])
}

#[test]
fn answers_become_windows_with_rates_lengths_and_shares() {
    let r = range_of(3);
    let mut a = answers(&[Some(240.0), Some(0.0), Some(480.0)]);
    a.insert(Key::Resets, vec![Some(0.0), Some(0.0), Some(1.0)]);
    let loaded = windows(&r, &vllm_plan(true), &a, false).unwrap();
    let rates: Vec<f64> = loaded.windows.iter().map(|w| w.rate).collect();
    assert_eq!(rates, [4.0, 0.0, 8.0]);
    // The idle window keeps the lengths of the one before.
    assert!(
        loaded
            .windows
            .iter()
            .all(|w| w.prompt == 1000.0 && w.output == 200.0)
    );
    assert_eq!(loaded.windows[0].hit_share, 0.25);
    assert_eq!(loaded.windows[1].hit_share, 0.0);
    assert_eq!(loaded.resets, vec![(r.window_start(2), 1.0)]);
    assert_eq!(loaded.requests, 720.0);
    let text = describe(
        "http://p:9090",
        &matchers("model_name=m"),
        &r,
        &vllm_plan(true),
        &loaded,
    );
    assert!(text.starts_with(r#"Prometheus http://p:9090 {model_name="m"}, 2025-01-01T00:00:00Z to 2025-01-01T00:03:00Z in 1 m windows (vLLM: requests vllm:request_success_total, prompts vllm:request_prompt_tokens_sum / vllm:request_prompt_tokens_count, outputs vllm:generation_tokens_total per request, prefix hits vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total); 3 windows, 0.00 to 8.00 req/s (720 requests), prompts ~1000 tokens, outputs ~200 tokens, 25.0 % prefix hits, 1 counter reset counted across by increase()"#), "{text}");
    let said = notes(&r, &vllm_plan(true), &loaded);
    assert!(
        said[0].contains("1 counter reset of vllm:request_success_total"),
        "{said:?}"
    );
    assert!(said[1].contains("reset in 1 of 3 windows"), "{said:?}");
    let csv = curve_csv(&r, &loaded);
    assert!(
        csv.contains("\n1735689600,4.000000,1000.0,200.0,0.2500\n"),
        "{csv}"
    );
    // Read back as a curve.
    let back = RateCurve::parse_csv(&csv, 1.0).unwrap();
    assert_eq!(back.duration_seconds, 180.0);
    let c = curve(&r, &loaded).unwrap();
    assert!((c.expected_requests(0.0, None) - 720.0).abs() < 1e-9);
    // Without hit series: a share of 0 and a note.
    let loaded = windows(&r, &vllm_plan(false), &a, false).unwrap();
    assert_eq!(loaded.windows[0].hit_share, 0.0);
    assert!(
        notes(&r, &vllm_plan(false), &loaded)
            .iter()
            .any(|n| n.contains("export no prefix-cache hits"))
    );
}

#[test]
fn gaps_are_refused_unless_filled_and_nothing_at_all_is_refused() {
    let r = range_of(6);
    let a = answers(&[None, Some(60.0), None, None, Some(120.0), Some(60.0)]);
    let err = windows(&r, &vllm_plan(true), &a, false).unwrap_err();
    assert!(err.starts_with("--from-prometheus: 3 of 6 windows have no samples of vllm:generation_tokens_total, vllm:request_prompt_tokens_count, vllm:request_prompt_tokens_sum, vllm:request_success_total (2 gaps: 2025-01-01T00:00:00Z to 2025-01-01T00:01:00Z (1 m), 2025-01-01T00:02:00Z to 2025-01-01T00:04:00Z (2 m))"), "{err}");
    assert!(err.contains("--fill-gaps"), "{err}");
    assert!(!err.contains("twice the scrape interval"), "{err}");
    let scattered = answers(&[None, Some(60.0), None, Some(60.0), None, Some(60.0)]);
    let err = windows(&r, &vllm_plan(true), &scattered, false).unwrap_err();
    assert!(
        err.contains("shorter than twice the scrape interval"),
        "{err}"
    );
    let loaded = windows(&r, &vllm_plan(true), &a, true).unwrap();
    let rates: Vec<f64> = loaded.windows.iter().map(|w| w.rate).collect();
    assert_eq!(rates, [1.0, 1.0, 1.0, 1.0, 2.0, 1.0]);
    assert_eq!(loaded.filled.len(), 2);
    let text = describe("u", &[], &r, &vllm_plan(true), &loaded);
    assert!(text.starts_with("Prometheus u without --match, "), "{text}");
    assert!(
        text.contains("3 windows without samples filled from the one before"),
        "{text}"
    );
    // Only a length series missing in a window is a gap too.
    let mut a = answers(&[Some(60.0), Some(60.0)]);
    a.insert(Key::PromptSum, vec![Some(1.0), None]);
    let err = windows(&range_of(2), &vllm_plan(true), &a, false).unwrap_err();
    assert!(
        err.contains("1 of 2 windows have no samples of vllm:request_prompt_tokens_sum (1 gap"),
        "{err}"
    );
    // No samples anywhere, even with --fill-gaps.
    let err = windows(
        &range_of(2),
        &vllm_plan(true),
        &answers(&[None, None]),
        true,
    )
    .unwrap_err();
    assert!(
        err.contains("no window from 2025-01-01T00:00:00Z to 2025-01-01T00:02:00Z has two samples"),
        "{err}"
    );
    // No request in the range.
    let err = windows(
        &range_of(2),
        &vllm_plan(true),
        &answers(&[Some(0.0), Some(0.0)]),
        false,
    )
    .unwrap_err();
    assert!(err.contains("no request from"), "{err}");
}

#[test]
fn sglang_lengths_are_counters_per_request_and_the_gauge_is_a_share() {
    let plan = Plan {
        engine: Engine::Sglang,
        requests: "sglang:num_requests_total",
        prompt: Mean::PerRequest("sglang:prompt_tokens_total"),
        output: Mean::PerRequest("sglang:generation_tokens_total"),
        hits: Some(Share::Gauge("sglang:cache_hit_rate")),
    };
    let a = BTreeMap::from([
        (Key::Requests, vec![Some(120.0)]),
        (Key::PromptSum, vec![Some(60_000.0)]),
        (Key::OutputSum, vec![Some(12_000.0)]),
        (Key::Hits, vec![Some(0.4)]),
    ]);
    let loaded = windows(&range_of(1), &plan, &a, false).unwrap();
    assert_eq!(
        loaded.windows[0],
        WindowLoad {
            rate: 2.0,
            prompt: 500.0,
            output: 100.0,
            hit_share: 0.4
        }
    );
    assert!(loaded.resets.is_empty(), "no resets answer, no resets");
}
