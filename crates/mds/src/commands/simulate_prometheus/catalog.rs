//! The series: the engines, and the series each may export for each quantity.

use std::collections::BTreeSet;

/// The engine whose series a deployment's Pods export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Engine {
    Vllm,
    Sglang,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
        }
    }

    pub(super) fn of(series: &str) -> Option<Engine> {
        if series.starts_with("vllm:") {
            Some(Engine::Vllm)
        } else if series.starts_with("sglang:") {
            Some(Engine::Sglang)
        } else {
            None
        }
    }

    pub(super) fn catalog(self) -> &'static Catalog {
        match self {
            Engine::Vllm => &VLLM,
            Engine::Sglang => &SGLANG,
        }
    }
}

/// A counter and the matchers a query adds to it (`mode=~"..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Series {
    pub name: &'static str,
    pub extra: &'static str,
}

pub(super) const fn series(name: &'static str) -> Series {
    Series { name, extra: "" }
}

/// How a window's mean length is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mean {
    /// A per-request histogram's `_sum` over its `_count`.
    Histogram {
        sum: &'static str,
        count: &'static str,
    },
    /// A token counter over the window's requests.
    PerRequest(&'static str),
}

impl Mean {
    pub(super) fn names(self) -> Vec<&'static str> {
        match self {
            Mean::Histogram { sum, count } => vec![sum, count],
            Mean::PerRequest(counter) => vec![counter],
        }
    }

    pub(super) fn text(self) -> String {
        match self {
            Mean::Histogram { sum, count } => format!("{sum} / {count}"),
            Mean::PerRequest(counter) => format!("{counter} per request"),
        }
    }
}

/// How a window's prefix-hit share is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Share {
    /// Hit tokens over the tokens they are a share of, both counters.
    Ratio { hits: Series, of: Series },
    /// A gauge of the hit rate, averaged over the window.
    Gauge(&'static str),
}

impl Share {
    pub(super) fn names(self) -> Vec<&'static str> {
        match self {
            Share::Ratio { hits, of } => vec![hits.name, of.name],
            Share::Gauge(name) => vec![name],
        }
    }

    pub(super) fn text(self) -> String {
        let one = |s: Series| {
            if s.extra.is_empty() {
                s.name.to_string()
            } else {
                format!("{}{{{}}}", s.name, s.extra)
            }
        };
        match self {
            Share::Ratio { hits, of } => format!("{} / {}", one(hits), one(of)),
            Share::Gauge(name) => format!("avg_over_time({name})"),
        }
    }
}

/// The series an engine may export for each quantity, preferred first.
pub(super) struct Catalog {
    pub(super) requests: &'static [&'static str],
    pub(super) prompt: &'static [Mean],
    pub(super) output: &'static [Mean],
    pub(super) hits: &'static [Share],
}

/// vLLM (ENGINE-METRICS §2): finished requests by `request_success_total` (every
/// `finished_reason`), lengths from the per-request histograms, else the token counters per
/// request; prefix hits over queries (tokens, or blocks for both on 0.8.x: the share holds).
const VLLM: Catalog = Catalog {
    requests: &[
        "vllm:request_success_total",
        "vllm:request_prompt_tokens_count",
        "vllm:e2e_request_latency_seconds_count",
    ],
    prompt: &[
        Mean::Histogram {
            sum: "vllm:request_prompt_tokens_sum",
            count: "vllm:request_prompt_tokens_count",
        },
        Mean::PerRequest("vllm:prompt_tokens_total"),
    ],
    output: &[
        Mean::Histogram {
            sum: "vllm:request_generation_tokens_sum",
            count: "vllm:request_generation_tokens_count",
        },
        Mean::PerRequest("vllm:generation_tokens_total"),
    ],
    hits: &[
        Share::Ratio {
            hits: series("vllm:prefix_cache_hits_total"),
            of: series("vllm:prefix_cache_queries_total"),
        },
        Share::Ratio {
            hits: series("vllm:gpu_prefix_cache_hits_total"),
            of: series("vllm:gpu_prefix_cache_queries_total"),
        },
    ],
};

/// SGLang (ENGINE-METRICS §3): requests and token counters of the tokenizer side, counted as
/// requests finish; prefix hits from the scheduler's effective prefill tokens by mode, else
/// cached over prompt tokens, else the scheduler's hit-rate gauge. Ratios hold whatever the
/// rank copies.
const SGLANG: Catalog = Catalog {
    requests: &[
        "sglang:num_requests_total",
        "sglang:e2e_request_latency_seconds_count",
    ],
    prompt: &[Mean::PerRequest("sglang:prompt_tokens_total")],
    output: &[Mean::PerRequest("sglang:generation_tokens_total")],
    hits: &[
        Share::Ratio {
            hits: Series {
                name: "sglang:prefill_effective_tokens_total",
                extra: "mode=~\"device_hit|host_hit|storage_hit\"",
            },
            of: series("sglang:prefill_effective_tokens_total"),
        },
        Share::Ratio {
            hits: series("sglang:cached_tokens_total"),
            of: series("sglang:prompt_tokens_total"),
        },
        Share::Gauge("sglang:cache_hit_rate"),
    ],
};

/// Every series name looked for, both engines, sorted.
pub(super) fn looked_for() -> Vec<&'static str> {
    let mut names = BTreeSet::new();
    for catalog in [&VLLM, &SGLANG] {
        names.extend(catalog.requests.iter().copied());
        for mean in catalog.prompt.iter().chain(catalog.output) {
            names.extend(mean.names());
        }
        for share in catalog.hits {
            names.extend(share.names());
        }
    }
    names.into_iter().collect()
}
