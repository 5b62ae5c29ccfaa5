//! Synthetic engine pages for the parser benchmark (and the fast-path tests): the families,
//! labels, bucket layouts and sample order real servers print; values are invented.

use std::fmt::Write as _;

/// The `vllm-0.10.2-dp2` fixture repeated with distinct `engine` labels to about `target`
/// bytes. Nearly every series on it is one the adapter reads, so it shows the cost of the
/// reading itself; real pages carry many more families (see [`vllm_page`]).
pub fn fixture_page(target: usize) -> String {
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vllm-0.10.2-dp2-a.txt"
    ))
    .expect("fixture");
    let mut page = String::new();
    let mut copy = 0;
    while page.len() < target {
        // Each copy stands for two more engines: distinct engine labels, same layout.
        let renamed = template
            .replace("engine=\"0\"", &format!("engine=\"{}\"", copy * 2))
            .replace("engine=\"1\"", &format!("engine=\"{}\"", copy * 2 + 1));
        page.push_str(&renamed);
        copy += 1;
    }
    page
}

const TTFT: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const REQUEST_SECONDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// 1-2-5 steps up to a 32k context.
const TOKENS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0,
];
const ITERATION_TOKENS: &[f64] = &[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];
const SGLANG_TTFT: &[f64] = &[
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
];
const SGLANG_ITL: &[f64] = &[
    0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2,
    0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0,
];

/// Writes one family: HELP, TYPE and one sample per child (`labels` without braces).
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    children: &[String],
    value: impl Fn(usize) -> f64,
) {
    let _ = writeln!(out, "# HELP {name} {name} (synthetic help text).");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (i, labels) in children.iter().enumerate() {
        let _ = writeln!(out, "{name}{{{labels}}} {:?}", value(i));
    }
}

/// Writes a histogram family with full cumulative buckets per child; multiprocess output
/// prints `_sum` first.
fn histogram(out: &mut String, name: &str, bounds: &[f64], children: &[String], sum_first: bool) {
    let _ = writeln!(out, "# HELP {name} {name} (synthetic help text).");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (i, labels) in children.iter().enumerate() {
        let total = 1000.0 * (i + 3) as f64;
        let sum = format!("{name}_sum{{{labels}}} {:?}", total * 0.37);
        if sum_first {
            let _ = writeln!(out, "{sum}");
        }
        for (b, bound) in bounds.iter().enumerate() {
            let count = (total * (b + 1) as f64 / (bounds.len() + 1) as f64).round();
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound:?}\"}} {count:?}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total:?}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {total:?}");
        if !sum_first {
            let _ = writeln!(out, "{sum}");
        }
    }
}

/// The `_created` gauges a single-process server prints for a counter or histogram.
fn created(out: &mut String, base: &str, children: &[String]) {
    family(out, &format!("{base}_created"), "gauge", children, |i| {
        1.7641e9 + i as f64
    });
}

/// A vLLM 0.10.2 (V1) API server with `engines` data-parallel engines: every family its
/// Prometheus logger registers (scheduler and cache gauges, token, preemption, success and
/// prefix-cache counters with their deprecated twins, the count and latency histograms, the
/// cache config info), `_created` gauges and the Python process collectors.
pub fn vllm_page(engines: usize) -> String {
    let m = "model_name=\"acme/chat-8b\"";
    let per_engine: Vec<String> = (0..engines)
        .map(|e| format!("{m},engine=\"{e}\""))
        .collect();
    let mut out = String::new();
    process_collectors(&mut out);
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting"] {
        family(&mut out, name, "gauge", &per_engine, |e| (e % 7) as f64);
    }
    for name in ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"] {
        family(&mut out, name, "gauge", &per_engine, |e| {
            0.4 + 0.05 * (e % 5) as f64
        });
    }
    let counters = [
        "vllm:gpu_prefix_cache_queries",
        "vllm:gpu_prefix_cache_hits",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:num_preemptions",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
    ];
    for base in counters {
        family(
            &mut out,
            &format!("{base}_total"),
            "counter",
            &per_engine,
            |e| 4.18e6 + 1000.0 * e as f64,
        );
        created(&mut out, base, &per_engine);
    }
    let reasons: Vec<String> = per_engine
        .iter()
        .flat_map(|l| ["stop", "length", "abort"].map(|r| format!("{l},finished_reason=\"{r}\"")))
        .collect();
    family(
        &mut out,
        "vllm:request_success_total",
        "counter",
        &reasons,
        |i| i as f64,
    );
    created(&mut out, "vllm:request_success", &reasons);
    let histograms: [(&str, &[f64]); 14] = [
        ("vllm:request_prompt_tokens", TOKENS),
        ("vllm:request_generation_tokens", TOKENS),
        ("vllm:iteration_tokens_total", ITERATION_TOKENS),
        ("vllm:request_max_num_generation_tokens", TOKENS),
        ("vllm:request_params_n", &[1.0, 2.0, 5.0, 10.0, 20.0]),
        ("vllm:request_params_max_tokens", TOKENS),
        ("vllm:time_to_first_token_seconds", TTFT),
        ("vllm:time_per_output_token_seconds", ITL),
        ("vllm:inter_token_latency_seconds", ITL),
        ("vllm:e2e_request_latency_seconds", REQUEST_SECONDS),
        ("vllm:request_queue_time_seconds", REQUEST_SECONDS),
        ("vllm:request_inference_time_seconds", REQUEST_SECONDS),
        ("vllm:request_prefill_time_seconds", REQUEST_SECONDS),
        ("vllm:request_decode_time_seconds", REQUEST_SECONDS),
    ];
    for (name, bounds) in histograms {
        histogram(&mut out, name, bounds, &per_engine, false);
        created(&mut out, name, &per_engine);
    }
    let info: Vec<String> = (0..engines)
        .map(|e| {
            format!(
                "block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\",\
                 cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"{e}\",\
                 gpu_memory_utilization=\"0.9\",is_attention_free=\"False\",num_cpu_blocks=\"None\",\
                 num_gpu_blocks=\"27152\",num_gpu_blocks_override=\"None\",\
                 prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\",swap_space=\"4\",\
                 swap_space_bytes=\"4294967296\""
            )
        })
        .collect();
    family(&mut out, "vllm:cache_config_info", "gauge", &info, |_| 1.0);
    out
}

fn process_collectors(out: &mut String) {
    let generations: Vec<String> = (0..3).map(|g| format!("generation=\"{g}\"")).collect();
    for name in [
        "python_gc_objects_collected_total",
        "python_gc_objects_uncollectable_total",
        "python_gc_collections_total",
    ] {
        family(out, name, "counter", &generations, |g| 1000.0 * g as f64);
    }
    let info = [
        r#"implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11""#
            .to_string(),
    ];
    family(out, "python_info", "gauge", &info, |_| 1.0);
    for (name, kind) in [
        ("process_virtual_memory_bytes", "gauge"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
    ] {
        let _ = writeln!(out, "# HELP {name} {name} (synthetic help text).");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} 1.7641e+09");
    }
}

/// An SGLang 0.5.x server with `--tp 16 --dp 8 --enable-dp-attention` and
/// `--enable-metrics-for-all-schedulers`, multiprocess output (no `_created`): the scheduler
/// gauges and counters of all 16 schedulers and the tokenizer's counters and histograms for
/// streaming and non-streaming requests.
pub fn sglang_page() -> String {
    let m = "model_name=\"acme/moe-30b\"";
    let schedulers: Vec<String> = (0..16)
        .map(|tp| {
            format!(
                "dp_rank=\"{}\",engine_type=\"unified\",{m},moe_ep_rank=\"{tp}\",pp_rank=\"0\",tp_rank=\"{tp}\"",
                tp / 2
            )
        })
        .collect();
    let mut out = String::new();
    for name in [
        "sglang:num_running_reqs",
        "sglang:num_used_tokens",
        "sglang:token_usage",
        "sglang:gen_throughput",
        "sglang:num_queue_reqs",
        "sglang:num_grammar_queue_reqs",
        "sglang:num_running_reqs_offline_batch",
        "sglang:cache_hit_rate",
        "sglang:max_total_num_tokens",
        "sglang:spec_accept_length",
        "sglang:num_retracted_reqs",
        "sglang:utilization",
    ] {
        family(&mut out, name, "gauge", &schedulers, |s| {
            0.1 * (s / 2) as f64
        });
    }
    let modes: Vec<String> = schedulers
        .iter()
        .step_by(2)
        .flat_map(|l| {
            ["input", "device_hit", "host_hit", "storage_hit"]
                .map(|mode| format!("{l},mode=\"{mode}\""))
        })
        .collect();
    family(
        &mut out,
        "sglang:prefill_effective_tokens_total",
        "counter",
        &modes,
        |i| 1e6 + i as f64,
    );
    let streaming: Vec<String> = ["true", "false"]
        .iter()
        .map(|s| format!("is_streaming=\"{s}\",{m}"))
        .collect();
    for name in [
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:num_requests_total",
        "sglang:num_aborted_requests_total",
    ] {
        family(&mut out, name, "counter", &streaming, |i| 3.6e6 + i as f64);
    }
    let sources: Vec<String> = ["device", "host", "total"]
        .iter()
        .map(|s| format!("cache_source=\"{s}\",{m}"))
        .collect();
    family(
        &mut out,
        "sglang:cached_tokens_total",
        "counter",
        &sources,
        |i| 1e5 * i as f64,
    );
    histogram(
        &mut out,
        "sglang:time_to_first_token_seconds",
        SGLANG_TTFT,
        &streaming,
        true,
    );
    histogram(
        &mut out,
        "sglang:e2e_request_latency_seconds",
        REQUEST_SECONDS,
        &streaming,
        true,
    );
    let itl_children = [m.to_string()];
    histogram(
        &mut out,
        "sglang:inter_token_latency_seconds",
        SGLANG_ITL,
        &itl_children,
        true,
    );
    out
}
