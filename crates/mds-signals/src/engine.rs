//! Engine adapters: one parsed page of a vLLM or SGLang Pod → an [`EngineSample`] with the
//! series the scaler uses, after the rank rule (ENGINE-METRICS.md §2, §3, §4).

use std::collections::BTreeMap;

pub use mds_api::target::EngineKind;

use std::collections::HashMap;

use crate::exposition::{Page, Sample};
use crate::rank::{Child, PidCollapse, children_of};

/// A page with its samples indexed by series name, so each family is found once.
pub struct Families<'a, 'p> {
    pub page: &'a Page<'p>,
    index: HashMap<&'p str, Vec<u32>>,
}

impl<'a, 'p> Families<'a, 'p> {
    pub fn new(page: &'a Page<'p>) -> Self {
        let mut index: HashMap<&'p str, Vec<u32>> = HashMap::new();
        for (i, sample) in page.samples.iter().enumerate() {
            index.entry(sample.name).or_default().push(i as u32);
        }
        Families { page, index }
    }

    /// Whether any sample of this series is on the page.
    pub fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Whether any part of this histogram is on the page.
    pub fn has_histogram(&self, base: &str) -> bool {
        ["_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| self.has(&format!("{base}{suffix}")))
    }

    fn samples(&self, name: &str) -> impl Iterator<Item = &'a Sample<'p>> + use<'a, 'p, '_> {
        let page = self.page;
        self.index
            .get(name)
            .into_iter()
            .flatten()
            .map(move |&i| &page.samples[i as usize])
    }

    fn children(&self, name: &str, collapse: PidCollapse) -> Vec<Child> {
        children_of(self.page, self.samples(name), collapse)
    }
}

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
}

impl EngineSample {
    fn note(&mut self, name: &str, used: bool, note: impl Into<String>) {
        self.series.push(SeriesUse {
            name: name.to_string(),
            used,
            note: note.into(),
        });
    }

    /// Sums a gauge family after the rank rule; notes its use.
    fn gauge_sum(&mut self, f: &Families, name: &str, what: &str) -> Option<f64> {
        let kids = f.children(name, PidCollapse::Max);
        let values: Vec<f64> = kids
            .iter()
            .map(|c| c.value)
            // A request count is finite and never negative; anything else is garbage.
            .filter(|v| v.is_finite() && *v >= 0.0)
            .collect();
        if values.is_empty() {
            return None;
        }
        self.note(name, true, format!("{what}: {} scheduler(s)", values.len()));
        Some(values.iter().sum())
    }

    fn kv_fractions(&mut self, f: &Families, name: &str) -> bool {
        let kids = f.children(name, PidCollapse::Mean);
        if kids.is_empty() {
            return false;
        }
        self.kv_usage = kids
            .iter()
            .map(|c| c.value)
            // A usage fraction lies in [0, 1]; NaN, infinities and percentages are no reading.
            .filter(|v| (0.0..=1.0).contains(v))
            .collect();
        self.note(name, true, format!("KV usage: {} scheduler(s)", kids.len()));
        true
    }

    /// Adds every child of a counter family and notes the family when it has any.
    fn counter(&mut self, f: &Families, name: &str, counter: Counter, note: &str) -> bool {
        let added = self.add_counter(f, name, counter, |_| true) > 0;
        if added {
            self.note(name, true, note);
        }
        added
    }

    fn add_counter(
        &mut self,
        f: &Families,
        name: &str,
        counter: Counter,
        filter: impl Fn(&Child) -> bool,
    ) -> usize {
        let mut added = 0;
        for child in f
            .children(name, PidCollapse::Max)
            .into_iter()
            .filter(|c| filter(c))
        {
            self.counters
                .insert((counter, child.key_without("")), child.value);
            added += 1;
        }
        added
    }

    fn add_histogram(&mut self, f: &Families, base: &str, latency: Latency) -> bool {
        let buckets = f.children(&format!("{base}_bucket"), PidCollapse::Max);
        let sums = f.children(&format!("{base}_sum"), PidCollapse::Max);
        let counts = f.children(&format!("{base}_count"), PidCollapse::Max);
        if buckets.is_empty() && sums.is_empty() && counts.is_empty() {
            return false;
        }
        for child in &buckets {
            // A boundary is finite or +Inf; `NaN` or `-Inf` drops just that bucket line.
            let Some(le) = child
                .label("le")
                .and_then(|le| le.parse::<f64>().ok())
                .filter(|le| le.is_finite() || *le == f64::INFINITY)
            else {
                continue;
            };
            let entry = self
                .histograms
                .entry((latency, child.key_without("le")))
                .or_default();
            entry.buckets.push((le, child.value));
        }
        for child in &sums {
            self.histograms
                .entry((latency, child.key_without("")))
                .or_default()
                .sum = Some(child.value);
        }
        for child in &counts {
            self.histograms
                .entry((latency, child.key_without("")))
                .or_default()
                .count = Some(child.value);
        }
        for histogram in self.histograms.values_mut() {
            histogram.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        self.note(base, true, format!("{latency:?} histogram"));
        true
    }

    /// Records every `_created` gauge and `process_start_time_seconds`.
    fn process_marks(&mut self, page: &Page<'_>) {
        for sample in &page.samples {
            if sample.name.ends_with("_created") || sample.name == "process_start_time_seconds" {
                // Label order on the page is not significant: key by sorted labels.
                let mut labels: Vec<(&str, &str)> = page
                    .labels(sample)
                    .iter()
                    .map(|l| (l.name, l.value.as_ref()))
                    .collect();
                labels.sort_unstable();
                let mut key = sample.name.to_string();
                crate::rank::push_label_key(&mut key, labels.into_iter());
                self.process_marks.insert(key, sample.value);
            }
        }
    }
}

/// Reads one page of the given engine.
pub fn read(engine: EngineKind, page: &Page<'_>) -> EngineSample {
    let mut sample = EngineSample::default();
    let families = Families::new(page);
    match engine {
        EngineKind::Vllm => read_vllm(&families, &mut sample),
        EngineKind::Sglang => read_sglang(&families, &mut sample),
    }
    sample.process_marks(page);
    sample.series.sort();
    sample
}

/// The note on a legacy series whose preferred name is also on the page.
fn shadowed_note(preferred: &str) -> String {
    format!("legacy name; {preferred} is preferred and never summed with it")
}

/// The first of `names` on the page (histogram bases when `histogram`); the others present
/// are noted as shadowed legacy names.
fn preferred<'n>(
    f: &Families,
    sample: &mut EngineSample,
    names: &[&'n str],
    histogram: bool,
) -> Option<&'n str> {
    let present = |name: &str| {
        if histogram {
            f.has_histogram(name)
        } else {
            f.has(name)
        }
    };
    let chosen = names.iter().copied().find(|name| present(name))?;
    for name in names.iter().copied().filter(|n| *n != chosen && present(n)) {
        sample.note(name, false, shadowed_note(chosen));
    }
    Some(chosen)
}

fn read_vllm(f: &Families, sample: &mut EngineSample) {
    sample.running = sample.gauge_sum(f, "vllm:num_requests_running", "running");
    sample.waiting = sample.gauge_sum(f, "vllm:num_requests_waiting", "waiting");
    if f.has("vllm:num_requests_waiting_by_reason") {
        sample.note(
            "vllm:num_requests_waiting_by_reason",
            false,
            "parts of num_requests_waiting; never added to it",
        );
    }

    let kv_names = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"];
    if let Some(name) = preferred(f, sample, &kv_names, false) {
        sample.kv_fractions(f, name);
    }

    sample.counter(
        f,
        "vllm:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens (cached included)",
    );
    sample.counter(
        f,
        "vllm:generation_tokens_total",
        Counter::Generation,
        "generation tokens",
    );
    let hit_names = [
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
    ];
    match preferred(f, sample, &hit_names, false) {
        Some(name) if name == hit_names[0] => {
            sample.counter(
                f,
                name,
                Counter::PrefixHits,
                "prefix-cache hit tokens, subtracted from prompt tokens",
            );
        }
        Some(legacy) => {
            // 0.8.x counts blocks, not tokens: subtracting them would be wrong (§5.3).
            let in_blocks = f
                .page
                .help(legacy)
                .is_some_and(|h| h.to_ascii_lowercase().contains("block"));
            if in_blocks {
                sample.note(
                    legacy,
                    false,
                    "counts blocks (HELP says so), not tokens; prompt demand uses prompt tokens alone",
                );
            } else {
                sample.counter(
                    f,
                    legacy,
                    Counter::PrefixHits,
                    "legacy prefix-cache hit tokens, subtracted from prompt tokens",
                );
            }
        }
        None => {}
    }
    let not_subtracted = [
        (
            "vllm:prefix_cache_queries_total",
            "hit-rate denominator; queries never cap hits",
        ),
        (
            "vllm:external_prefix_cache_hits_total",
            "connector-supplied tokens; not subtracted from prompt demand",
        ),
    ];
    for (ignored, why) in not_subtracted {
        if f.has(ignored) {
            sample.note(ignored, false, why);
        }
    }

    sample.add_histogram(f, "vllm:time_to_first_token_seconds", Latency::Ttft);
    if let Some(base) = preferred(
        f,
        sample,
        &[
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
        ],
        true,
    ) {
        sample.add_histogram(f, base, Latency::Itl);
    }
}

fn read_sglang(f: &Families, sample: &mut EngineSample) {
    sample.running = sample.gauge_sum(f, "sglang:num_running_reqs", "running");
    sample.waiting = sample.gauge_sum(f, "sglang:num_queue_reqs", "waiting");
    sample.decode_transfer = sample.gauge_sum(
        f,
        "sglang:num_decode_transfer_queue_reqs",
        "decode transfer queue (added to waiting on Decode roles)",
    );
    sample.kv_fractions(f, "sglang:token_usage");

    sample.counter(
        f,
        "sglang:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens of finished requests (cached included)",
    );
    sample.counter(
        f,
        "sglang:generation_tokens_total",
        Counter::Generation,
        "generation tokens of finished requests",
    );
    let effective = "sglang:prefill_effective_tokens_total";
    let inputs = sample.add_counter(f, effective, Counter::EffectiveInput, |c| {
        c.label("mode") == Some("input")
    });
    let hits = sample.add_counter(f, effective, Counter::EffectiveHit, |c| {
        matches!(
            c.label("mode"),
            Some("device_hit" | "host_hit" | "storage_hit")
        )
    });
    if inputs + hits > 0 {
        sample.note(
            effective,
            true,
            "tokens actually prefilled (mode=input), and per-tier hits",
        );
    }
    sample.counter(
        f,
        "sglang:cached_tokens_total",
        Counter::Cached,
        "cached prompt tokens, used when effective tokens are absent",
    );

    sample.add_histogram(f, "sglang:time_to_first_token_seconds", Latency::Ttft);
    if let Some(base) = preferred(
        f,
        sample,
        &[
            "sglang:inter_token_latency_seconds",
            "sglang:time_per_output_token_seconds",
        ],
        true,
    ) {
        sample.add_histogram(f, base, Latency::Itl);
    }
}
