//! Per-Pod sample store and counter windows (D8, ENGINE-METRICS.md §5, §6).
//!
//! A Pod's rates need two valid samples of the same process. A restart, a decreasing counter
//! or bucket, a NaN or infinite counter, a changed `_created` mark or a vanished series drops
//! the Pod's baseline: the next sample starts a new window and yields no rate. So does a
//! baseline older than two sampling intervals: the first reading after a long gap is a
//! baseline only (spec: a first observation alone cannot establish rates).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;

use crate::engine::{Counter, EngineKind, EngineSample, Histogram, Latency};

/// Which formula produced the cache-missed prompt demand (§5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PromptPath {
    /// vLLM: prompt − prefix-cache hits.
    PromptMinusPrefixHits,
    /// SGLang path 1: `prefill_effective_tokens_total{mode="input"}`.
    EffectiveInput,
    /// SGLang path 2: prompt − effective hit modes.
    PromptMinusEffectiveHits,
    /// SGLang path 3: prompt − cached tokens.
    PromptMinusCached,
    /// No cache accounting: all prompt tokens.
    PromptOnly,
}

/// The change of one histogram child over a window.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct HistogramDelta {
    /// `(le, count)` cumulative deltas, ascending; `+Inf` last when present.
    pub buckets: Vec<(f64, f64)>,
    pub sum: Option<f64>,
    pub count: Option<f64>,
}

/// What one Pod contributes over a valid window.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodWindow {
    pub elapsed_seconds: f64,
    /// Cache-missed prompt tokens in the window, clamped at zero; `None` without prompt counters.
    pub prompt_tokens: Option<f64>,
    pub prompt_path: Option<PromptPath>,
    pub generation_tokens: Option<f64>,
    pub ttft: Vec<HistogramDelta>,
    pub itl: Vec<HistogramDelta>,
}

/// One Pod's reading in a pass.
#[derive(Clone, Debug, PartialEq)]
pub struct PodReading {
    pub pod_uid: String,
    pub scraped_at: Timestamp,
    /// Shared with the Pod's baseline in the store: a page's sample is never copied.
    pub sample: Arc<EngineSample>,
    /// Present once two valid samples of the same process exist.
    pub window: Option<PodWindow>,
    /// Without a baseline (a Pod read for the first time, or again after it stopped
    /// answering): the counters' whole history, counted from the zero every counter of a new
    /// process starts at. `elapsed_seconds` is 0: how long that history is, only the Pod's
    /// Ready time can say (D9 amended, a joining Pod).
    pub history: Option<PodWindow>,
    /// When the Pod last became Ready, if the shell knows (the Pod's Ready condition).
    pub ready_since: Option<Timestamp>,
    /// Why the previous baseline was dropped, when it was.
    pub reset: Option<&'static str>,
}

#[derive(Clone, Debug)]
struct Baseline {
    sample: Arc<EngineSample>,
    at: Timestamp,
    restart_count: Option<u32>,
}

/// The previous valid sample of every Pod, keyed by Pod UID.
#[derive(Clone, Debug, Default)]
pub struct SampleStore {
    pods: BTreeMap<String, Baseline>,
    /// The sampling interval, once the shell set it.
    interval_seconds: Option<u32>,
    /// The newest valid reading of each role, by role name.
    roles: BTreeMap<String, Timestamp>,
}

impl SampleStore {
    /// Records a Pod's sample and returns its reading. `restart_count` is the `main`
    /// container's restart count when known.
    pub fn record(
        &mut self,
        engine: EngineKind,
        pod_uid: &str,
        restart_count: Option<u32>,
        sample: EngineSample,
        at: Timestamp,
    ) -> PodReading {
        let previous = self.pods.remove(pod_uid);
        if !carries_signal(&sample) {
            // D8: a rate needs two valid samples. A page with no signal (an error page served
            // with status 200, a body of garbage) drops the baseline and is none itself: the
            // next valid page, whose counters hold the process's whole history, would
            // otherwise count that history as one interval's work.
            return PodReading {
                pod_uid: pod_uid.to_string(),
                scraped_at: at,
                sample: Arc::new(sample),
                window: None,
                history: None,
                ready_since: None,
                reset: previous.map(|_| "the page carried no signal the adapter reads"),
            };
        }
        let history = previous
            .is_none()
            .then(|| counted_between(engine, &from_zero(&sample), &sample, 0.0).ok())
            .flatten();
        let (window, reset) = match &previous {
            None => (None, None),
            Some(prev) if self.expired(prev, at) => (
                None,
                Some("the baseline is older than two sampling intervals"),
            ),
            Some(prev) => match window_between(engine, prev, &sample, at, restart_count) {
                Ok(window) => (Some(window), None),
                Err(reason) => (None, Some(reason)),
            },
        };
        let sample = Arc::new(sample);
        self.pods.insert(
            pod_uid.to_string(),
            Baseline {
                sample: Arc::clone(&sample),
                at,
                restart_count,
            },
        );
        PodReading {
            pod_uid: pod_uid.to_string(),
            scraped_at: at,
            sample,
            window,
            history,
            ready_since: None,
            reset,
        }
    }

    /// Drops a Pod's baseline (it failed to answer or its body could not be used).
    pub fn forget(&mut self, pod_uid: &str) {
        self.pods.remove(pod_uid);
    }

    /// Keeps only the given Pods (the others are gone).
    pub fn retain(&mut self, live: &[&str]) {
        self.pods.retain(|uid, _| live.contains(&uid.as_str()));
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Sets the sampling interval the baselines are judged by: a baseline older than two
    /// intervals starts a new window. Without an interval (`mds inspect-metrics`, which
    /// compares two pages the user chose) any gap makes a window.
    pub fn set_sampling_interval(&mut self, seconds: u32) {
        self.interval_seconds = Some(seconds);
    }

    /// Notes that `role` gave a valid reading at `at` (D10: `Stale` once the newest one is
    /// older than three intervals).
    pub fn note_valid_reading(&mut self, role: &str, at: Timestamp) {
        let newest = self.roles.entry(role.to_string()).or_insert(at);
        *newest = (*newest).max(at);
    }

    /// When `role` last gave a valid reading, if it ever did since this store began.
    pub fn newest_valid_reading(&self, role: &str) -> Option<Timestamp> {
        self.roles.get(role).copied()
    }

    /// Keeps only the given roles' reading times (the others left the target).
    pub fn retain_roles(&mut self, roles: &[&str]) {
        self.roles.retain(|role, _| roles.contains(&role.as_str()));
    }

    /// Whether the baseline is too old to make a window with a sample taken at `at`: after
    /// a gap of more than two sampling intervals (a suspension, a stalled worker, a Pod that
    /// was not scraped for a while) the counter deltas are the traffic of the whole gap, not
    /// a rate of now.
    fn expired(&self, baseline: &Baseline, at: Timestamp) -> bool {
        self.interval_seconds.is_some_and(|interval| {
            at.duration_since(baseline.at).as_secs_f64() > 2.0 * f64::from(interval)
        })
    }
}

impl PodReading {
    /// The page carried at least one signal the adapter reads (a body with none, such as an
    /// error page served with status 200, is no valid reading).
    pub fn is_valid(&self) -> bool {
        carries_signal(&self.sample)
    }
}

/// The sample holds at least one signal the adapter reads.
fn carries_signal(s: &EngineSample) -> bool {
    s.running.is_some()
        || s.waiting.is_some()
        || s.decode_transfer.is_some()
        || !s.kv_usage.is_empty()
        || !s.counters.is_empty()
        || !s.histograms.is_empty()
}

fn window_between(
    engine: EngineKind,
    prev: &Baseline,
    cur: &EngineSample,
    at: Timestamp,
    restart_count: Option<u32>,
) -> Result<PodWindow, &'static str> {
    if let (Some(before), Some(now)) = (prev.restart_count, restart_count)
        && now > before
    {
        return Err("the container restarted");
    }
    for (key, value) in &prev.sample.process_marks {
        if cur.process_marks.get(key).is_some_and(|v| v != value) {
            return Err("a _created or process start time changed: a new process");
        }
    }
    let elapsed = at.duration_since(prev.at).as_secs_f64();
    if elapsed <= 0.0 || !elapsed.is_finite() {
        return Err("the samples are not in time order");
    }
    counted_between(engine, &prev.sample, cur, elapsed)
}

/// What the counters and histograms counted between two samples of one process.
fn counted_between(
    engine: EngineKind,
    prev: &EngineSample,
    cur: &EngineSample,
    elapsed_seconds: f64,
) -> Result<PodWindow, &'static str> {
    let deltas = counter_deltas(prev, cur)?;
    let sum = |counter: Counter| deltas.get(&counter).copied();
    let (prompt_tokens, prompt_path) = prompt_demand(engine, &sum, prev, cur);
    Ok(PodWindow {
        elapsed_seconds,
        prompt_tokens,
        prompt_path,
        generation_tokens: sum(Counter::Generation),
        ttft: histogram_deltas(prev, cur, Latency::Ttft)?,
        itl: histogram_deltas(prev, cur, Latency::Itl)?,
    })
}

/// The sample as its process began: the same counter and histogram children, all at zero.
fn from_zero(sample: &EngineSample) -> EngineSample {
    EngineSample {
        counters: sample.counters.keys().map(|k| (k.clone(), 0.0)).collect(),
        histograms: sample
            .histograms
            .iter()
            .map(|(k, h)| {
                let zero = Histogram {
                    buckets: h.buckets.iter().map(|&(le, _)| (le, 0.0)).collect(),
                    sum: h.sum.map(|_| 0.0),
                    count: h.count.map(|_| 0.0),
                };
                (k.clone(), zero)
            })
            .collect(),
        ..EngineSample::default()
    }
}

/// The summed deltas of each counter's children (a counter with no child is absent). A
/// decrease, NaN or infinity is a reset; so is a child that vanished. Children are created
/// lazily, on first use (ENGINE-METRICS.md §1, §5.3), so a child that first appears in the
/// same process starts from zero: its whole value fell in the window.
fn counter_deltas(
    prev: &EngineSample,
    cur: &EngineSample,
) -> Result<BTreeMap<Counter, f64>, &'static str> {
    let mut deltas = BTreeMap::new();
    for (key, &now) in &cur.counters {
        if !now.is_finite() {
            return Err("a counter reads NaN or infinity");
        }
        let before = match prev.counters.get(key) {
            Some(&before) => before,
            None => 0.0,
        };
        if !before.is_finite() {
            return Err("a counter read NaN or infinity in the previous sample");
        }
        if now < before {
            return Err("a counter decreased");
        }
        *deltas.entry(key.0).or_insert(0.0) += now - before;
    }
    if prev
        .counters
        .keys()
        .any(|key| !cur.counters.contains_key(key))
    {
        return Err("a counter used in the previous sample vanished");
    }
    Ok(deltas)
}

/// Whether every child of `counter` in either sample is present in both.
fn present_in_both(prev: &EngineSample, cur: &EngineSample, counter: Counter) -> bool {
    fn keys(s: &EngineSample, counter: Counter) -> impl Iterator<Item = &(Counter, String)> {
        s.counters.keys().filter(move |(c, _)| *c == counter)
    }
    keys(prev, counter).next().is_some() && keys(prev, counter).eq(keys(cur, counter))
}

fn prompt_demand(
    engine: EngineKind,
    sum: &dyn Fn(Counter) -> Option<f64>,
    prev: &EngineSample,
    cur: &EngineSample,
) -> (Option<f64>, Option<PromptPath>) {
    let prompt = sum(Counter::Prompt);
    let minus = |hits: Option<f64>| prompt.map(|p| (p - hits.unwrap_or(0.0)).max(0.0));
    match engine {
        EngineKind::Vllm => match sum(Counter::PrefixHits) {
            Some(hits) if prompt.is_some() => {
                (minus(Some(hits)), Some(PromptPath::PromptMinusPrefixHits))
            }
            _ => (prompt, prompt.map(|_| PromptPath::PromptOnly)),
        },
        EngineKind::Sglang => {
            if present_in_both(prev, cur, Counter::EffectiveInput) {
                (
                    sum(Counter::EffectiveInput).map(|v| v.max(0.0)),
                    Some(PromptPath::EffectiveInput),
                )
            } else if prompt.is_some() && present_in_both(prev, cur, Counter::EffectiveHit) {
                (
                    minus(sum(Counter::EffectiveHit)),
                    Some(PromptPath::PromptMinusEffectiveHits),
                )
            } else if prompt.is_some() && sum(Counter::Cached).is_some() {
                (
                    minus(sum(Counter::Cached)),
                    Some(PromptPath::PromptMinusCached),
                )
            } else {
                (prompt, prompt.map(|_| PromptPath::PromptOnly))
            }
        }
    }
}

fn histogram_deltas(
    prev: &EngineSample,
    cur: &EngineSample,
    latency: Latency,
) -> Result<Vec<HistogramDelta>, &'static str> {
    let mut out = Vec::new();
    for ((kind, key), now) in &cur.histograms {
        if *kind != latency {
            continue;
        }
        // A child created since the baseline (same process) saw all its observations in
        // the window.
        let empty = Histogram::default();
        let before = prev
            .histograms
            .get(&(latency, key.clone()))
            .unwrap_or(&empty);
        out.push(histogram_delta(before, now)?);
    }
    let vanished = prev
        .histograms
        .keys()
        .any(|key| key.0 == latency && !cur.histograms.contains_key(key));
    if vanished {
        return Err("a histogram used in the previous sample vanished");
    }
    Ok(out)
}

fn histogram_delta(before: &Histogram, now: &Histogram) -> Result<HistogramDelta, &'static str> {
    let new_child = before.buckets.is_empty() && before.count.is_none() && before.sum.is_none();
    // Mostly the baseline has the same bounds, each once: bucket i is then its bucket i, and
    // none vanished (each bound searched for in the other list is the general case).
    let same_bounds = before.buckets.len() == now.buckets.len()
        && now.buckets.windows(2).all(|w| w[0].0 < w[1].0)
        && before
            .buckets
            .iter()
            .zip(&now.buckets)
            .all(|(b, n)| b.0 == n.0);
    let mut buckets = Vec::with_capacity(now.buckets.len());
    for (i, &(le, count)) in now.buckets.iter().enumerate() {
        let earlier = if same_bounds {
            Some(before.buckets[i].1)
        } else {
            before
                .buckets
                .iter()
                .find(|(l, _)| *l == le)
                .map(|&(_, c)| c)
        }
        .or(new_child.then_some(0.0));
        if let Some(earlier) = earlier {
            if !count.is_finite() || !earlier.is_finite() {
                return Err("a histogram bucket reads NaN or infinity");
            }
            if count < earlier {
                return Err("a histogram bucket decreased");
            }
            buckets.push((le, count - earlier));
        }
    }
    if !same_bounds
        && before
            .buckets
            .iter()
            .any(|(le, _)| !now.buckets.iter().any(|(l, _)| l == le))
    {
        return Err("a histogram bucket used in the previous sample vanished");
    }
    let diff = |a: Option<f64>, b: Option<f64>| -> Result<Option<f64>, &'static str> {
        let a = a.or(new_child.then_some(0.0));
        match (a, b) {
            (Some(a), Some(b)) if !a.is_finite() || !b.is_finite() => {
                Err("a histogram count or sum reads NaN or infinity")
            }
            (Some(a), Some(b)) if b < a => Err("a histogram count or sum decreased"),
            (Some(a), Some(b)) => Ok(Some(b - a)),
            _ => Ok(None),
        }
    };
    Ok(HistogramDelta {
        buckets,
        sum: diff(before.sum, now.sum)?,
        count: diff(before.count, now.count)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each bucket found by searching the baseline for its bound: the rule the index fast
    /// path must keep.
    fn searched(before: &Histogram, now: &Histogram) -> Result<Vec<(f64, f64)>, &'static str> {
        let new_child = before.buckets.is_empty() && before.count.is_none() && before.sum.is_none();
        let mut buckets = Vec::new();
        for &(le, count) in &now.buckets {
            let found = before.buckets.iter().find(|(l, _)| *l == le);
            if let Some(earlier) = found.map(|&(_, c)| c).or(new_child.then_some(0.0)) {
                if !count.is_finite() || !earlier.is_finite() {
                    return Err("a histogram bucket reads NaN or infinity");
                }
                if count < earlier {
                    return Err("a histogram bucket decreased");
                }
                buckets.push((le, count - earlier));
            }
        }
        let vanished =
            (before.buckets.iter()).any(|(le, _)| !now.buckets.iter().any(|(l, _)| l == le));
        if vanished {
            return Err("a histogram bucket used in the previous sample vanished");
        }
        Ok(buckets)
    }

    fn buckets() -> impl Strategy<Value = Vec<(f64, f64)>> {
        let bound = prop::sample::select(vec![-0.0, 0.0, 0.1, 0.5, 1.0, f64::INFINITY]);
        let count = prop::sample::select(vec![0.0, 1.0, 2.0, 5.0, f64::NAN]);
        prop::collection::vec((bound, count), 0..6).prop_map(|mut b| {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            b
        })
    }

    proptest! {
        #[test]
        fn bucket_deltas_are_those_a_search_by_bound_finds(before in buckets(), now in buckets(), same: bool) {
            let now = if same { before.iter().map(|&(le, c)| (le, c + 1.0)).collect() } else { now };
            let before = Histogram { buckets: before, sum: Some(1.0), count: Some(1.0) };
            let now = Histogram { buckets: now, sum: Some(2.0), count: Some(2.0) };
            let ours = histogram_delta(&before, &now).map(|d| d.buckets);
            let oracle = searched(&before, &now);
            let bits = |r: Result<Vec<(f64, f64)>, &'static str>| {
                r.map(|b| b.iter().map(|(l, c)| (l.to_bits(), c.to_bits())).collect::<Vec<_>>())
            };
            prop_assert_eq!(bits(ours), bits(oracle));
        }
    }
}
