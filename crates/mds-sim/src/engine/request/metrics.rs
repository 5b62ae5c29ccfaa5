//! What the request-level engine records: counters and histograms as vLLM exposes them, and
//! one record per finished request.

use crate::engine::histogram::{HistogramAcc, layouts};

/// vLLM's `request_latency_buckets`, for end-to-end and queueing time (ENGINE-METRICS.md lists
/// only the TTFT and ITL layouts, which `histogram::layouts` holds).
pub const VLLM_REQUEST_LATENCY: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// Counters since the engine started, in tokens where vLLM counts tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RequestCounters {
    /// Prompt tokens computed on first prefill (once per request, as `prompt_tokens_total`).
    pub prompt_tokens_computed: u64,
    /// Prompt tokens served from the prefix cache on first prefill.
    pub prompt_tokens_cached: u64,
    pub generation_tokens: u64,
    /// Prompt tokens looked up in the prefix cache, at every admission (recomputes included).
    pub prefix_cache_queries: u64,
    /// Of those, tokens found (`prefix_cache_hits_total`).
    pub prefix_cache_hits: u64,
    pub preemptions: u64,
    /// Requests finished normally (`request_success_total`).
    pub successes: u64,
    /// Requests refused at submission (empty prompt, or longer than `max_model_len`).
    pub rejected: u64,
    pub steps: u64,
}

/// Latency histograms with exact observations, in vLLM's default buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestHistograms {
    pub ttft: HistogramAcc,
    /// One observation per output token after the first (the gap since the previous one).
    pub itl: HistogramAcc,
    /// Per request at finish: mean time per output token after the first.
    pub request_tpot: HistogramAcc,
    pub e2e: HistogramAcc,
    pub queue_time: HistogramAcc,
}

impl Default for RequestHistograms {
    fn default() -> Self {
        RequestHistograms {
            ttft: HistogramAcc::new(layouts::VLLM_TTFT),
            itl: HistogramAcc::new(layouts::VLLM_ITL),
            request_tpot: HistogramAcc::new(layouts::VLLM_ITL),
            e2e: HistogramAcc::new(VLLM_REQUEST_LATENCY),
            queue_time: HistogramAcc::new(VLLM_REQUEST_LATENCY),
        }
    }
}

/// Adds `n` observations of exactly `seconds`.
pub fn observe_exact(histogram: &mut HistogramAcc, n: u64, seconds: f64) {
    histogram.observe(n as f64, seconds, seconds);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every output token generated (or, with no output asked for, the prompt computed).
    Finished,
    /// Refused at submission: an empty prompt, or prompt plus output over `max_model_len`.
    Rejected,
}

/// One request's life, in seconds on the engine's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinishedRequest {
    pub id: u64,
    pub outcome: Outcome,
    pub arrival: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens found in the prefix cache at first admission.
    pub cached_tokens: u64,
    /// From arrival to the start of the first step that scheduled it.
    pub queue_seconds: f64,
    /// From arrival to the end of the step that sampled the first token (`None` without output).
    pub ttft_seconds: Option<f64>,
    /// Mean gap between output tokens after the first (`None` with fewer than two).
    pub tpot_seconds: Option<f64>,
    /// Gaps between its output tokens, and how many of them were over the engine's ITL
    /// objective (its own p95 gap is within the objective when at most 5 % are, nearest
    /// rank).
    pub gaps: u64,
    pub slow_gaps: u64,
    pub finish: f64,
    pub preemptions: u32,
}
