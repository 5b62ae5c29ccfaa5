//! Engine adapters: one parsed page of a vLLM or SGLang Pod → an [`EngineSample`] with the
//! series the scaler uses, after the rank rule (ENGINE-METRICS.md §2, §3, §4).

use std::collections::BTreeMap;

pub use mds_api::target::EngineKind;

use crate::exposition::{Page, parse_families};

mod filter;
mod reader;

use filter::FamilyList;
pub use filter::reads_series;
pub use reader::Families;
use reader::Reader;

/// Counters the prompt and generation demand are computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// All prompt tokens, cached included.
    Prompt,
    /// Output tokens.
    Generation,
    /// vLLM prompt tokens served from the prefix cache.
    PrefixHits,
    /// SGLang `prefill_effective_tokens_total{mode="input"}`: tokens actually prefilled.
    EffectiveInput,
    /// SGLang `prefill_effective_tokens_total{mode=~"device_hit|host_hit|storage_hit"}`.
    EffectiveHit,
    /// SGLang `cached_tokens_total`, any `cache_source`.
    Cached,
}

/// Latency histograms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Latency {
    Ttft,
    Itl,
}

impl Latency {
    /// The [`EngineSample::missing`] key of this histogram.
    pub fn reading(self) -> &'static str {
        match self {
            Latency::Ttft => reading::TTFT,
            Latency::Itl => reading::ITL,
        }
    }
}

/// One cumulative histogram child.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Histogram {
    /// `(le, cumulative count)`, ascending by `le`; `+Inf` last when present.
    pub buckets: Vec<(f64, f64)>,
    pub sum: Option<f64>,
    pub count: Option<f64>,
}

/// How a series on the page was treated, for `mds inspect-metrics`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeriesUse {
    pub name: String,
    pub used: bool,
    pub note: String,
}

/// What the scaler reads from one scrape of one Pod.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EngineSample {
    /// Σ running requests over schedulers; `None` when the family is absent.
    pub running: Option<f64>,
    /// Σ waiting requests.
    pub waiting: Option<f64>,
    /// SGLang decode servers: Σ requests whose KV is still arriving.
    pub decode_transfer: Option<f64>,
    /// KV usage fraction per de-duplicated scheduler (values outside [0, 1] left out).
    pub kv_usage: Vec<f64>,
    /// Counter children by (counter, identity key).
    pub counters: BTreeMap<(Counter, String), f64>,
    /// Histogram children by (latency, identity key without `le`).
    pub histograms: BTreeMap<(Latency, String), Histogram>,
    /// `_created` and `process_start_time_seconds` values: a change means a new process.
    pub process_marks: BTreeMap<String, f64>,
    /// Which series were used and which ignored, and why.
    pub series: Vec<SeriesUse>,
    /// Readings the page does not give (see [`reading`]), and why, for `mds inspect-metrics`.
    pub missing: BTreeMap<&'static str, String>,
}

/// The names of the readings a page may lack, as [`EngineSample::missing`] keys them.
pub mod reading {
    pub const RUNNING: &str = "running requests";
    pub const WAITING: &str = "waiting requests";
    pub const KV_USAGE: &str = "KV cache usage";
    pub const PROMPT: &str = "prompt tokens";
    pub const GENERATION: &str = "generation tokens";
    pub const TTFT: &str = "TTFT histogram";
    pub const ITL: &str = "ITL histogram";
}

/// Reads one parsed page of the given engine, noting in [`EngineSample::series`] how every
/// series it looks at was treated (what `mds inspect-metrics` shows).
pub fn read(engine: EngineKind, page: &Page<'_>) -> EngineSample {
    read_families(engine, page, true)
}

/// The scaler's path: parses only the families the adapter reads ([`reads_series`]), and of
/// a series it only notes, or a legacy one whose preferred series is on the page, only the
/// first valid line; records no series notes. The sample equals [`read`] of the fully parsed
/// page, with [`EngineSample::series`] left empty.
pub fn read_text(engine: EngineKind, text: &str) -> EngineSample {
    let list = FamilyList::of(engine);
    let mut page = parse_families(text, &|name| list.interest(name));
    let preferred_present = list.preferred_present(&page);
    page.parse_set_aside(&|name| list.take(name, &preferred_present));
    read_families(engine, &page, false)
}

fn read_families(engine: EngineKind, page: &Page<'_>, notes: bool) -> EngineSample {
    let mut r = Reader::new(Families::listed(page, engine), notes);
    match engine {
        EngineKind::Vllm => read_vllm(&mut r),
        EngineKind::Sglang => read_sglang(&mut r),
    }
    r.process_marks();
    r.sample.series.sort();
    r.sample
}

/// The first of `names` on the page (histogram bases when `histogram`); the others present
/// are noted as shadowed legacy names.
fn preferred<'n>(r: &mut Reader, names: &[&'n str], histogram: bool) -> Option<&'n str> {
    let present = |r: &Reader, name: &str| {
        if histogram {
            r.families.has_histogram(name)
        } else {
            r.families.has(name)
        }
    };
    let chosen = names.iter().copied().find(|name| present(r, name))?;
    for name in names.iter().copied().filter(|n| *n != chosen) {
        if present(r, name) {
            r.note(name, false, || {
                format!("legacy name; {chosen} is preferred and never summed with it")
            });
        }
    }
    Some(chosen)
}

/// Notes a series the adapter never adds, when it is on the page.
fn ignored(r: &mut Reader, name: &str, why: &str) {
    if r.families.has(name) {
        r.note(name, false, || why.to_string());
    }
}

fn read_vllm(r: &mut Reader) {
    r.sample.running = r.gauge_sum(
        "vllm:num_requests_running",
        "running",
        Some(reading::RUNNING),
    );
    r.sample.waiting = r.gauge_sum(
        "vllm:num_requests_waiting",
        "waiting",
        Some(reading::WAITING),
    );
    ignored(
        r,
        "vllm:num_requests_waiting_by_reason",
        "parts of num_requests_waiting; never added to it",
    );

    let kv_names = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"];
    match preferred(r, &kv_names, false) {
        Some(name) => {
            r.kv_fractions(name);
        }
        None => r.lack(Some(reading::KV_USAGE), || {
            "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc is on the page".into()
        }),
    }

    r.counter(
        "vllm:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens (cached included)",
        Some(reading::PROMPT),
    );
    r.counter(
        "vllm:generation_tokens_total",
        Counter::Generation,
        "generation tokens",
        Some(reading::GENERATION),
    );
    let hit_names = [
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
    ];
    match preferred(r, &hit_names, false) {
        Some(name) if name == hit_names[0] => {
            r.counter(
                name,
                Counter::PrefixHits,
                "prefix-cache hit tokens, subtracted from prompt tokens",
                None,
            );
        }
        Some(legacy) => {
            // 0.8.x counts blocks, not tokens: subtracting them would be wrong (§5.3).
            let in_blocks = r
                .families
                .page
                .help(legacy)
                .is_some_and(|h| h.to_ascii_lowercase().contains("block"));
            if in_blocks {
                r.note(legacy, false, || {
                    "counts blocks (HELP says so), not tokens; prompt demand uses prompt tokens alone".into()
                });
            } else {
                r.counter(
                    legacy,
                    Counter::PrefixHits,
                    "legacy prefix-cache hit tokens, subtracted from prompt tokens",
                    None,
                );
            }
        }
        None => {}
    }
    ignored(
        r,
        "vllm:prefix_cache_queries_total",
        "hit-rate denominator; queries never cap hits",
    );
    ignored(
        r,
        "vllm:external_prefix_cache_hits_total",
        "connector-supplied tokens; not subtracted from prompt demand",
    );

    r.add_histogram("vllm:time_to_first_token_seconds", Latency::Ttft);
    itl(
        r,
        [
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
        ],
    );
}

/// The ITL histogram under its preferred name, else the legacy one.
fn itl(r: &mut Reader, names: [&str; 2]) {
    match preferred(r, &names, true) {
        Some(base) => {
            r.add_histogram(base, Latency::Itl);
        }
        None => r.lack(Some(reading::ITL), || {
            format!("neither {} nor {} is on the page", names[0], names[1])
        }),
    }
}

fn read_sglang(r: &mut Reader) {
    r.sample.running = r.gauge_sum("sglang:num_running_reqs", "running", Some(reading::RUNNING));
    r.sample.waiting = r.gauge_sum("sglang:num_queue_reqs", "waiting", Some(reading::WAITING));
    r.sample.decode_transfer = r.gauge_sum(
        "sglang:num_decode_transfer_queue_reqs",
        "decode transfer queue (added to waiting on Decode roles)",
        None,
    );
    r.kv_fractions("sglang:token_usage");

    r.counter(
        "sglang:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens of finished requests (cached included)",
        Some(reading::PROMPT),
    );
    r.counter(
        "sglang:generation_tokens_total",
        Counter::Generation,
        "generation tokens of finished requests",
        Some(reading::GENERATION),
    );
    let effective = "sglang:prefill_effective_tokens_total";
    let inputs = r.add_counter(effective, Counter::EffectiveInput, |c| {
        c.label("mode") == Some("input")
    });
    let hits = r.add_counter(effective, Counter::EffectiveHit, |c| {
        matches!(
            c.label("mode"),
            Some("device_hit" | "host_hit" | "storage_hit")
        )
    });
    if inputs + hits > 0 {
        r.note(effective, true, || {
            "tokens actually prefilled (mode=input), and per-tier hits".into()
        });
    }
    r.counter(
        "sglang:cached_tokens_total",
        Counter::Cached,
        "cached prompt tokens, used when effective tokens are absent",
        None,
    );

    r.add_histogram("sglang:time_to_first_token_seconds", Latency::Ttft);
    itl(
        r,
        [
            "sglang:inter_token_latency_seconds",
            "sglang:time_per_output_token_seconds",
        ],
    );
}
