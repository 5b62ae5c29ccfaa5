//! vLLM V1 pages: one API server, one engine core (`engine="0"`), single-process collector
//! (so `_created` families and `process_start_time_seconds` are present). 0.10.2 exports the
//! deprecated KV-usage and prefix-cache names next to the preferred ones; both 0.10.2 and 0.11
//! export ITL under both histogram names (ENGINE-METRICS.md §2).

use super::{Labels, Page, PageContext};
use crate::engine::{EngineFlavor, EngineState};

pub(super) fn render(page: &mut Page, state: &EngineState, context: &PageContext) {
    let legacy = state.flavor == EngineFlavor::Vllm010;
    let labels = &Labels::new(&[("model_name", context.model_name), ("engine", "0")]);
    let created = state.started_at.as_millisecond() as f64 / 1000.0;
    let c = &state.counters;

    page.gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        &Labels::default(),
        created,
    );
    page.gauge(
        "vllm:num_requests_running",
        "Requests in the running batch.",
        labels,
        state.running_gauge(),
    );
    page.gauge(
        "vllm:num_requests_waiting",
        "Requests waiting to be scheduled.",
        labels,
        state.waiting_gauge(),
    );
    page.gauge(
        "vllm:kv_cache_usage_perc",
        "Fraction of the KV cache in use (1 means full).",
        labels,
        state.kv_usage,
    );
    if legacy {
        page.gauge(
            "vllm:gpu_cache_usage_perc",
            "Fraction of the GPU KV cache in use. DEPRECATED: read vllm:kv_cache_usage_perc.",
            labels,
            state.kv_usage,
        );
    }

    let mut total = String::new();
    let mut counter = |name: &str, help: &str, value: f64| {
        total.clear();
        total.push_str(name);
        total.push_str("_total");
        page.counter(&total, help, labels, value);
        page.created(name, labels, created);
    };
    counter(
        "vllm:prompt_tokens",
        "Prompt tokens processed, cached ones included.",
        c.prompt_tokens,
    );
    counter(
        "vllm:generation_tokens",
        "Output tokens generated.",
        c.generation_tokens,
    );
    counter(
        "vllm:prefix_cache_queries",
        "Prompt tokens looked up in the prefix cache.",
        c.prompt_tokens,
    );
    counter(
        "vllm:prefix_cache_hits",
        "Prompt tokens found in the prefix cache.",
        c.prefix_hit_tokens,
    );
    if legacy {
        counter(
            "vllm:gpu_prefix_cache_queries",
            "Prompt tokens looked up in the GPU prefix cache. DEPRECATED: read vllm:prefix_cache_queries.",
            c.prompt_tokens,
        );
        counter(
            "vllm:gpu_prefix_cache_hits",
            "Prompt tokens found in the GPU prefix cache. DEPRECATED: read vllm:prefix_cache_hits.",
            c.prefix_hit_tokens,
        );
    }

    let mut histogram = |name: &str, help: &str, h| {
        page.histogram(name, help, labels, h, false);
        page.created(name, labels, created);
    };
    histogram(
        "vllm:time_to_first_token_seconds",
        "Seconds from arrival to the first output token.",
        &state.ttft,
    );
    histogram(
        "vllm:inter_token_latency_seconds",
        "Seconds between output steps.",
        &state.itl,
    );
    histogram(
        "vllm:time_per_output_token_seconds",
        "Seconds between output steps. DEPRECATED: read vllm:inter_token_latency_seconds.",
        &state.itl,
    );
    if !legacy {
        histogram(
            "vllm:request_time_per_output_token_seconds",
            "Mean seconds per output token of each finished request.",
            &state.request_tpot,
        );
    }
}
