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

    fn children(&self, name: &str, collapse: PidCollapse) -> Vec<Child<'_>> {
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

impl EngineSample {
    fn note(&mut self, name: &str, used: bool, note: impl Into<String>) {
        self.series.push(SeriesUse {
            name: name.to_string(),
            used,
            note: note.into(),
        });
    }

    fn lack(&mut self, reading: Option<&'static str>, why: impl Into<String>) {
        if let Some(reading) = reading {
            self.missing.insert(reading, why.into());
        }
    }

    /// Sums a gauge family after the rank rule; notes its use, and why values were left out.
    /// `reading` names what is missing without it (none for optional gauges).
    fn gauge_sum(
        &mut self,
        f: &Families,
        name: &str,
        what: &str,
        reading: Option<&'static str>,
    ) -> Option<f64> {
        let kids = f.children(name, PidCollapse::Max);
        if kids.is_empty() {
            self.lack(reading, format!("{name} is not on the page"));
            return None;
        }
        // A request count is finite and never negative; anything else is garbage.
        let (values, garbage): (Vec<f64>, Vec<f64>) = kids
            .iter()
            .map(|c| c.value)
            .partition(|v| v.is_finite() && *v >= 0.0);
        if values.is_empty() {
            let why = format!(
                "every value of {name} is negative or not a number ({} scheduler(s)); a request count never is",
                garbage.len()
            );
            self.note(name, false, why.clone());
            self.lack(reading, why);
            return None;
        }
        let left_out = match garbage.len() {
            0 => String::new(),
            n => format!("; {n} negative or not-a-number value(s) left out"),
        };
        self.note(
            name,
            true,
            format!("{what}: {} scheduler(s){left_out}", values.len()),
        );
        Some(values.iter().sum())
    }

    fn kv_fractions(&mut self, f: &Families, name: &str) -> bool {
        let kids = f.children(name, PidCollapse::Mean);
        if kids.is_empty() {
            self.lack(
                Some(reading::KV_USAGE),
                format!("{name} is not on the page"),
            );
            return false;
        }
        // A usage fraction lies in [0, 1]; NaN, infinities and percentages are no reading.
        let (kept, outside): (Vec<f64>, Vec<f64>) = kids
            .iter()
            .map(|c| c.value)
            .partition(|v| (0.0..=1.0).contains(v));
        self.kv_usage = kept;
        if self.kv_usage.is_empty() {
            let why = format!(
                "every value of {name} lies outside 0 to 1 ({} scheduler(s)); a usage fraction never does (a percentage?)",
                outside.len()
            );
            self.note(name, false, why.clone());
            self.lack(Some(reading::KV_USAGE), why);
            return true;
        }
        let left_out = match outside.len() {
            0 => String::new(),
            n => format!("; {n} value(s) outside 0 to 1 left out"),
        };
        self.note(
            name,
            true,
            format!("KV usage: {} scheduler(s){left_out}", self.kv_usage.len()),
        );
        true
    }

    /// Adds every child of a counter family and notes the family when it has any; `reading`
    /// names what is missing without it.
    fn counter(
        &mut self,
        f: &Families,
        name: &str,
        counter: Counter,
        note: &str,
        reading: Option<&'static str>,
    ) -> bool {
        let added = self.add_counter(f, name, counter, |_| true);
        if added == 0 {
            self.lack(reading, format!("{name} is not on the page"));
            return false;
        }
        let broken = self
            .counters
            .iter()
            .filter(|((c, _), v)| *c == counter && (!v.is_finite() || **v < 0.0))
            .count();
        let note = match broken {
            0 => note.to_string(),
            n => format!(
                "{note}; {n} value(s) negative or not a number: a window over them has no rate"
            ),
        };
        self.note(name, true, note);
        true
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
            self.lack(
                Some(latency.reading()),
                format!("{base} is not on the page"),
            );
            return false;
        }
        let mut bad_bounds = 0;
        for child in &buckets {
            // A boundary is finite or +Inf; `NaN` or `-Inf` drops just that bucket line.
            let Some(le) = child
                .label("le")
                .and_then(|le| le.parse::<f64>().ok())
                .filter(|le| le.is_finite() || *le == f64::INFINITY)
            else {
                bad_bounds += 1;
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
        let note = match bad_bounds {
            0 => format!("{latency:?} histogram"),
            n => format!(
                "{latency:?} histogram; {n} bucket line(s) whose le is not a number or -Inf left out"
            ),
        };
        self.note(base, true, note);
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
    sample.running = sample.gauge_sum(
        f,
        "vllm:num_requests_running",
        "running",
        Some(reading::RUNNING),
    );
    sample.waiting = sample.gauge_sum(
        f,
        "vllm:num_requests_waiting",
        "waiting",
        Some(reading::WAITING),
    );
    if f.has("vllm:num_requests_waiting_by_reason") {
        sample.note(
            "vllm:num_requests_waiting_by_reason",
            false,
            "parts of num_requests_waiting; never added to it",
        );
    }

    let kv_names = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"];
    match preferred(f, sample, &kv_names, false) {
        Some(name) => {
            sample.kv_fractions(f, name);
        }
        None => sample.lack(
            Some(reading::KV_USAGE),
            "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc is on the page",
        ),
    }

    sample.counter(
        f,
        "vllm:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens (cached included)",
        Some(reading::PROMPT),
    );
    sample.counter(
        f,
        "vllm:generation_tokens_total",
        Counter::Generation,
        "generation tokens",
        Some(reading::GENERATION),
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
                None,
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
                    None,
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
    let itl_names = [
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    ];
    match preferred(f, sample, &itl_names, true) {
        Some(base) => {
            sample.add_histogram(f, base, Latency::Itl);
        }
        None => sample.lack(
            Some(reading::ITL),
            format!(
                "neither {} nor {} is on the page",
                itl_names[0], itl_names[1]
            ),
        ),
    }
}

fn read_sglang(f: &Families, sample: &mut EngineSample) {
    sample.running = sample.gauge_sum(
        f,
        "sglang:num_running_reqs",
        "running",
        Some(reading::RUNNING),
    );
    sample.waiting = sample.gauge_sum(
        f,
        "sglang:num_queue_reqs",
        "waiting",
        Some(reading::WAITING),
    );
    sample.decode_transfer = sample.gauge_sum(
        f,
        "sglang:num_decode_transfer_queue_reqs",
        "decode transfer queue (added to waiting on Decode roles)",
        None,
    );
    sample.kv_fractions(f, "sglang:token_usage");

    sample.counter(
        f,
        "sglang:prompt_tokens_total",
        Counter::Prompt,
        "prompt tokens of finished requests (cached included)",
        Some(reading::PROMPT),
    );
    sample.counter(
        f,
        "sglang:generation_tokens_total",
        Counter::Generation,
        "generation tokens of finished requests",
        Some(reading::GENERATION),
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
        None,
    );

    sample.add_histogram(f, "sglang:time_to_first_token_seconds", Latency::Ttft);
    let itl_names = [
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ];
    match preferred(f, sample, &itl_names, true) {
        Some(base) => {
            sample.add_histogram(f, base, Latency::Itl);
        }
        None => sample.lack(
            Some(reading::ITL),
            format!(
                "neither {} nor {} is on the page",
                itl_names[0], itl_names[1]
            ),
        ),
    }
}
