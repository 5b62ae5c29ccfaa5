//! The scaler's path (`read_text`: only the families the adapter reads are parsed, no notes)
//! gives the same sample as the inspection path (`read` of the fully parsed page) on every
//! fixture, on the benchmark pages and on generated pages full of edge cases.

use mds_signals::engine::{EngineKind, EngineSample, read, read_text};
use mds_signals::exposition::parse;
use proptest::prelude::*;

#[path = "../../benches/support/pages.rs"]
#[allow(dead_code)]
mod pages;

const ENGINES: [EngineKind; 2] = [EngineKind::Vllm, EngineKind::Sglang];

/// Samples compared through `Debug`, which shows NaN, infinities and -0.0 as they are
/// (`PartialEq` never finds a NaN equal to itself).
fn shown(sample: &EngineSample) -> String {
    format!("{sample:#?}")
}

fn assert_same(engine: EngineKind, page: &str, what: &str) {
    let fast = read_text(engine, page);
    assert!(
        fast.series.is_empty(),
        "{what}: the scaler's path keeps no notes"
    );
    let mut reference = read(engine, &parse(page));
    reference.series.clear();
    assert_eq!(shown(&fast), shown(&reference), "{what} read as {engine:?}");
}

#[test]
fn every_fixture_reads_the_same_on_both_paths() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "txt") {
            let page = std::fs::read_to_string(&path).expect("fixture");
            for engine in ENGINES {
                assert_same(engine, &page, &path.display().to_string());
            }
            count += 1;
        }
    }
    assert!(count >= 16, "only {count} fixtures found");
}

#[test]
fn the_benchmark_pages_read_the_same_on_both_paths() {
    for (name, page) in [
        ("vLLM 0.10 page", pages::vllm_page(3)),
        ("fixture page", pages::fixture_page(40_000)),
        ("SGLang 0.5 page", pages::sglang_page()),
    ] {
        for engine in ENGINES {
            assert_same(engine, &page, name);
        }
    }
}

#[test]
fn a_legacy_series_is_read_in_full_only_without_its_preferred_one() {
    // 0.8-style page: no inter_token_latency, so time_per_output_token is the ITL.
    let legacy_only = "vllm:time_per_output_token_seconds_bucket{le=\"0.1\"} 3\n\
                       vllm:time_per_output_token_seconds_bucket{le=\"+Inf\"} 4\n\
                       vllm:time_per_output_token_seconds_count 4\n";
    let sample = read_text(EngineKind::Vllm, legacy_only);
    assert_eq!(sample.histograms.len(), 1);
    assert_eq!(
        sample.histograms.values().next().unwrap().buckets,
        vec![(0.1, 3.0), (f64::INFINITY, 4.0)]
    );
    assert_same(EngineKind::Vllm, legacy_only, "legacy only");
    let both = format!("{legacy_only}vllm:inter_token_latency_seconds_count 9\n");
    assert_same(EngineKind::Vllm, &both, "legacy and preferred");
}

/// Series names: what the adapters read, their legacy and noted names, marks, names that
/// extend or cut a read name, and families nobody reads.
const NAMES: &[&str] = &[
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:external_prefix_cache_hits_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:inter_token_latency_seconds_count",
    "vllm:time_per_output_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_sum",
    "vllm:time_per_output_token_seconds_count",
    "vllm:prompt_tokens_created",
    "process_start_time_seconds",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
    "sglang:token_usage",
    "sglang:prompt_tokens_total",
    "sglang:prefill_effective_tokens_total",
    "sglang:cached_tokens_total",
    "sglang:time_to_first_token_seconds_bucket",
    "sglang:inter_token_latency_seconds_bucket",
    "sglang:time_per_output_token_seconds_bucket",
    "sglang:time_per_output_token_seconds_count",
    "vllm:num_requests_running_extra",
    "vllm:num_requests_runnin",
    "vllm:e2e_request_latency_seconds_bucket",
    "python_gc_objects_collected_total",
];

const LABELS: &[&str] = &[
    "engine",
    "model_name",
    "dp_rank",
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "pid",
    "priority",
    "le",
    "mode",
    "cache_source",
];

const LABEL_VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "",
    "x,y=z",
    "input",
    "device_hit",
    "0.1",
    "1",
    "1.0",
    "+Inf",
    "NaN",
    "-Inf",
    "abc",
];

const VALUES: &[&str] = &[
    "1",
    "0.5",
    "0",
    "-0.0",
    "NaN",
    "-3",
    "+Inf",
    "85",
    "1e3",
    "0.62",
    "1.7641e+09",
];

/// One line of a generated page.
fn line() -> impl Strategy<Value = String> {
    let labels = proptest::collection::vec(
        (
            proptest::sample::select(LABELS),
            proptest::sample::select(LABEL_VALUES),
        ),
        0..4,
    );
    let sample = (
        proptest::sample::select(NAMES),
        labels,
        proptest::sample::select(VALUES),
        0..12u8,
    )
        .prop_map(|(name, labels, value, form)| {
            let mut seen = Vec::new();
            let labels: Vec<String> = labels
                .into_iter()
                .filter(|(n, _)| {
                    form == 1 || {
                        let fresh = !seen.contains(n);
                        seen.push(*n);
                        fresh
                    }
                })
                .map(|(n, v)| format!("{n}=\"{v}\""))
                .collect();
            let body = format!("{name}{{{}}}", labels.join(","));
            match form {
                // 1 keeps duplicate label names: the parser refuses such lines.
                2 => format!("{body} {value} 1700000000000"),
                3 => format!("  {body}\t{value}\r"),
                4 => format!("{body} abc"),
                5 => format!("{name}+7"),
                6 => format!("{name}{{le=\"1\" {value}"),
                7 => format!("{name} {value}"),
                _ => format!("{body} {value}"),
            }
        });
    prop_oneof![
        8 => sample,
        1 => proptest::sample::select(NAMES).prop_map(|n| format!(
            "# HELP {} Cache hits, in blocks.",
            n.trim_end_matches("_total")
        )),
        1 => Just(String::new()),
        1 => Just("{a=\"1\"} 2".to_string()),
    ]
}

fn page() -> impl Strategy<Value = String> {
    // Lines repeat in runs, as children of one family do on real pages.
    proptest::collection::vec((line(), 1..4usize), 0..40).prop_flat_map(|runs| {
        let lines: Vec<String> = runs
            .into_iter()
            .flat_map(|(line, times)| std::iter::repeat_n(line, times))
            .collect();
        (Just(lines), any::<bool>(), any::<bool>()).prop_map(|(lines, eof, newline)| {
            let mut page = lines.join("\n");
            if eof {
                page.push_str("\n# EOF\nvllm:num_requests_running 99");
            }
            if newline {
                page.push('\n');
            }
            page
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn generated_pages_read_the_same_on_both_paths(page in page()) {
        for engine in ENGINES {
            let fast = read_text(engine, &page);
            let mut reference = read(engine, &parse(&page));
            reference.series.clear();
            prop_assert_eq!(shown(&fast), shown(&reference), "{:?}\n{}", engine, page);
        }
    }
}
