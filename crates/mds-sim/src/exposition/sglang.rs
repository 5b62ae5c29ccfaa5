//! SGLang 0.5.18-style pages: multiprocess collector (no `_created`, `_sum` printed first),
//! scheduler gauges and effective-prefill counters with rank labels (`tp_rank`, `pp_rank`,
//! `moe_ep_rank`; one scheduler, so all 0) and `engine_type` from the role kind, tokenizer-side
//! token counters and latency histograms with `is_streaming`. The ITL histogram and the cached
//! tokens child appear only once they have something to count, as the engine creates them
//! lazily (ENGINE-METRICS.md §3).

use super::{Labels, Page, PageContext};
use crate::engine::{EngineState, WorkKind};

pub(super) fn render(page: &mut Page, state: &EngineState, context: &PageContext) {
    let engine_type = match state.kind {
        WorkKind::Server => "unified",
        WorkKind::Prefill => "prefill",
        WorkKind::Decode => "decode",
    };
    let scheduler = &Labels::new(&[
        ("model_name", context.model_name),
        ("engine_type", engine_type),
        ("tp_rank", "0"),
        ("pp_rank", "0"),
        ("moe_ep_rank", "0"),
    ]);
    let c = &state.counters;

    page.gauge(
        "sglang:num_running_reqs",
        "Requests in the running batch.",
        scheduler,
        state.running_gauge(),
    );
    page.gauge(
        "sglang:num_queue_reqs",
        "Requests in the scheduler's waiting queue.",
        scheduler,
        state.waiting_gauge(),
    );
    page.gauge(
        "sglang:token_usage",
        "Fraction of the KV token pool in use.",
        scheduler,
        state.kv_usage,
    );
    // Disaggregation queues: requests pass through them too quickly for the fluid model to
    // hold any (the backlog is in num_queue_reqs); the scheduler registers them in every mode.
    for name in [
        "sglang:num_prefill_bootstrap_queue_reqs",
        "sglang:num_prefill_inflight_queue_reqs",
        "sglang:num_decode_prealloc_queue_reqs",
        "sglang:num_decode_transfer_queue_reqs",
    ] {
        page.gauge(name, "Requests in a disaggregation queue.", scheduler, 0.0);
    }

    let effective = "sglang:prefill_effective_tokens_total";
    page.family(
        effective,
        "Prompt tokens by how they were served.",
        "counter",
    );
    let missed = (c.prompt_tokens - c.prefix_hit_tokens).max(0.0);
    for (mode, value) in [
        ("input", missed),
        ("device_hit", c.prefix_hit_tokens),
        ("host_hit", 0.0),
        ("storage_hit", 0.0),
    ] {
        page.sample(
            effective,
            &scheduler.with("mode", mode),
            super::floor(value),
        );
    }

    let tokenizer = &Labels::new(&[("model_name", context.model_name), ("is_streaming", "true")]);
    page.counter(
        "sglang:prompt_tokens_total",
        "Prompt tokens of finished requests, cached ones included.",
        tokenizer,
        c.prompt_tokens,
    );
    page.counter(
        "sglang:generation_tokens_total",
        "Output tokens of finished requests.",
        tokenizer,
        c.generation_tokens,
    );
    if c.prefix_hit_tokens >= 1.0 {
        page.counter(
            "sglang:cached_tokens_total",
            "Cached prompt tokens of finished requests.",
            &Labels::new(&[
                ("model_name", context.model_name),
                ("cache_source", "device"),
            ]),
            c.prefix_hit_tokens,
        );
    }
    page.histogram(
        "sglang:time_to_first_token_seconds",
        "Seconds to the first token.",
        tokenizer,
        &state.ttft,
        true,
    );
    if state.itl.count >= 1.0 {
        page.histogram(
            "sglang:inter_token_latency_seconds",
            "Seconds per output token.",
            &Labels::new(&[("model_name", context.model_name)]),
            &state.itl,
            true,
        );
    }
}
