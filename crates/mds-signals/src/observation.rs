//! The per-role observation the planner consumes and the status shows (spec *Engine signals*,
//! *Role observations*; D6, D9, D10; ENGINE-METRICS.md §5).

use jiff::Timestamp;
use mds_api::quantity::{Decimal, Quantity};
use mds_api::status::{RoleStatus, SignalState};
use mds_api::target::RoleKind;

use crate::samples::{HistogramDelta, PodReading, PodWindow, PromptPath};

/// The sampler reads at most this many ready Pods per role (spec *Limitations*).
pub const MAX_SAMPLED_PODS: usize = 64;

/// Everything the planner and the status know about one role after a pass. A missing signal
/// is `None`, never zero.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleObservation {
    /// Ready serving replicas (Pods that count toward capacity).
    pub ready_replicas: u32,
    /// Pods whose readings were used this pass.
    pub sampled_replicas: u32,
    /// Every ready Pod answered with an established rate window (D9); otherwise scale-down
    /// is held.
    pub coverage_complete: bool,
    pub signal_state: SignalState,
    /// Cache-missed prompt tokens per second across the role.
    pub prompt_tokens_per_second: Option<f64>,
    pub generation_tokens_per_second: Option<f64>,
    pub running_requests: Option<f64>,
    /// Waiting requests; for Decode roles including the KV transfer queue.
    pub waiting_requests: Option<f64>,
    /// Mean KV cache usage fraction over schedulers.
    pub kv_cache_usage: Option<f64>,
    /// p95 time to first token, milliseconds.
    pub ttft_milliseconds: Option<f64>,
    /// p95 inter-token latency, milliseconds.
    pub itl_milliseconds: Option<f64>,
    /// Histogram observations behind `ttft_milliseconds` this interval, across the sampled
    /// replicas (D32: a p95 from fewer than 20 never grows a role). `None` when unknown, which
    /// the planner treats as enough. In memory only; the status does not show it.
    pub ttft_observations: Option<f64>,
    /// Histogram observations behind `itl_milliseconds` this interval (one per output token
    /// after the first), across the sampled replicas; `None` when unknown.
    pub itl_observations: Option<f64>,
    /// Which prompt formulas the Pods used.
    pub prompt_paths: Vec<PromptPath>,
}

/// Inputs of one role's observation.
pub struct RoleInputs<'a> {
    pub kind: &'a RoleKind,
    /// Ready Pods of the role (serving replicas), whether sampled or not.
    pub ready_replicas: u32,
    /// This pass's readings of the Pods that answered.
    pub readings: &'a [PodReading],
    /// Sampling interval, for staleness (D10).
    pub interval_seconds: u32,
    pub now: Timestamp,
}

/// Scales a sum over `contributing` Pods to the ready count (D9): the mean per Pod times the
/// ready replicas.
fn estimate(sum: f64, contributing: usize, ready: u32) -> f64 {
    if contributing == 0 || contributing as u32 >= ready {
        sum
    } else {
        sum / contributing as f64 * ready as f64
    }
}

/// Sums `f` over readings where it is present and scales to the ready count by the Pods that
/// report it (gauges exist from a process's start, so a Pod without one is a Pod we cannot
/// read, not a zero).
fn role_total(
    readings: &[&PodReading],
    ready: u32,
    f: impl Fn(&PodReading) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = readings.iter().filter_map(|r| f(r)).collect();
    (!values.is_empty()).then(|| estimate(values.iter().sum(), values.len(), ready))
}

/// Sums a window rate over the Pods with windows, adds what joining Pods counted (D9
/// amended) and fills in every other ready Pod with the windowed Pods' mean (D9). Counter
/// children are created on first use, so a windowed Pod without the counter produced nothing
/// in the window and counts as zero; scaling by the reporters would double a
/// one-of-two-Pods rate while coverage reads complete.
fn role_rate(
    windows: &[&PodReading],
    joining: &[&PodReading],
    ready: u32,
    f: impl Fn(&PodWindow) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = windows
        .iter()
        .filter_map(|r| {
            let w = r.window.as_ref()?;
            f(w).map(|tokens| tokens / w.elapsed_seconds)
        })
        .collect();
    if values.is_empty() {
        return None;
    }
    let windowed: f64 = values.iter().sum();
    let mean = windowed / windows.len() as f64;
    let seconds = windows
        .iter()
        .filter_map(|r| r.window.as_ref())
        .map(|w| w.elapsed_seconds)
        .sum::<f64>()
        / windows.len() as f64;
    // A joining Pod served only since it became Ready inside the window, so what its
    // counters hold is its part of the window's load. Never more than the mean it would have
    // been filled in with (a Pod Ready again without a new process counted from before).
    let joined: f64 = joining
        .iter()
        .map(|r| {
            let counted = r.history.as_ref().and_then(&f).unwrap_or(0.0);
            (counted / seconds).min(mean)
        })
        .sum();
    let carried = windows.len() + joining.len();
    let unread = (ready as usize).saturating_sub(carried);
    Some(windowed + joined + mean * unread as f64)
}

/// D9 amended: a Pod read without a baseline whose Ready time falls inside the window the
/// other Pods' rates cover (the whole-second Ready time may read up to a second early). It
/// served nothing of that window before it was Ready.
fn is_joining(reading: &PodReading, window_start: Timestamp) -> bool {
    let early = window_start
        .checked_sub(jiff::SignedDuration::from_secs(1))
        .unwrap_or(window_start);
    reading.window.is_none()
        && reading.history.is_some()
        && reading.ready_since.is_some_and(|t| t >= early)
}

/// Readings taken before this have expired (D10: three sampling intervals).
fn expired_before(now: Timestamp, interval_seconds: u32) -> Timestamp {
    now.checked_sub(jiff::SignedDuration::from_secs(
        3 * i64::from(interval_seconds),
    ))
    .unwrap_or(Timestamp::MIN)
}

pub fn observe_role(inputs: &RoleInputs) -> RoleObservation {
    let stale_before = expired_before(inputs.now, inputs.interval_seconds);
    let fresh: Vec<&PodReading> = inputs
        .readings
        .iter()
        .filter(|r| r.scraped_at >= stale_before)
        .collect();
    let ready = inputs.ready_replicas;
    let decode = *inputs.kind == RoleKind::Decode;

    let running = role_total(&fresh, ready, |r| r.sample.running);
    let waiting = role_total(&fresh, ready, |r| {
        let transfer = if decode {
            r.sample.decode_transfer.unwrap_or(0.0)
        } else {
            0.0
        };
        r.sample.waiting.map(|w| w + transfer)
    });
    let fractions: Vec<f64> = fresh
        .iter()
        .flat_map(|r| r.sample.kv_usage.iter().copied())
        .collect();
    let kv =
        (!fractions.is_empty()).then(|| fractions.iter().sum::<f64>() / fractions.len() as f64);

    // A window counts only when it carries a rate (counters created since the baseline give
    // a window without one).
    let windows: Vec<&PodReading> = fresh
        .iter()
        .copied()
        .filter(|r| {
            r.window
                .as_ref()
                .is_some_and(|w| w.prompt_tokens.is_some() || w.generation_tokens.is_some())
        })
        .collect();
    // Where the window begins: the earliest baseline of the Pods that have one.
    let window_start = windows
        .iter()
        .filter_map(|r| {
            let w = r.window.as_ref()?;
            r.scraped_at
                .checked_sub(jiff::SignedDuration::try_from_secs_f64(w.elapsed_seconds).ok()?)
                .ok()
        })
        .min();
    let joining: Vec<&PodReading> = match window_start {
        Some(start) => fresh
            .iter()
            .copied()
            .filter(|r| is_joining(r, start))
            .collect(),
        None => Vec::new(),
    };
    let prompt = role_rate(&windows, &joining, ready, |w| w.prompt_tokens);
    let generation = role_rate(&windows, &joining, ready, |w| w.generation_tokens);
    let ttft = p95_with_observations(
        windows
            .iter()
            .flat_map(|r| r.window.as_ref().unwrap().ttft.iter()),
    );
    let itl = p95_with_observations(
        windows
            .iter()
            .flat_map(|r| r.window.as_ref().unwrap().itl.iter()),
    );
    let mut prompt_paths: Vec<PromptPath> = windows
        .iter()
        .filter_map(|r| r.window.as_ref().unwrap().prompt_path)
        .collect();
    prompt_paths.sort();
    prompt_paths.dedup();

    let sampled = fresh.len() as u32;
    let coverage_complete = ready > 0
        && (ready as usize) <= MAX_SAMPLED_PODS
        && sampled >= ready
        && windows.len() as u32 >= ready;
    let has_window = prompt.is_some() || generation.is_some();
    let signal_state = if fresh.is_empty() && !inputs.readings.is_empty() {
        SignalState::Stale
    } else if fresh.is_empty() || !has_window {
        SignalState::Missing
    } else if running == Some(0.0)
        && waiting == Some(0.0)
        && prompt.is_none_or(|v| v == 0.0)
        && generation.is_none_or(|v| v == 0.0)
    {
        SignalState::Idle
    } else {
        SignalState::Fresh
    };
    RoleObservation {
        ready_replicas: ready,
        sampled_replicas: sampled,
        coverage_complete,
        signal_state,
        prompt_tokens_per_second: prompt,
        generation_tokens_per_second: generation,
        running_requests: running,
        waiting_requests: waiting,
        kv_cache_usage: kv,
        ttft_milliseconds: ttft.map(|(s, _)| s * 1000.0),
        itl_milliseconds: itl.map(|(s, _)| s * 1000.0),
        ttft_observations: ttft.map(|(_, n)| n),
        itl_observations: itl.map(|(_, n)| n),
        prompt_paths,
    }
}

impl RoleObservation {
    /// D10: a role without a usable reading this pass whose newest valid reading is older
    /// than three sampling intervals is `Stale` (its readings expired), not just `Missing`.
    /// A role never read stays `Missing`. Released by the next valid reading.
    pub fn expire(
        &mut self,
        newest_valid: Option<Timestamp>,
        interval_seconds: u32,
        now: Timestamp,
    ) {
        let expired = newest_valid.is_some_and(|t| t < expired_before(now, interval_seconds));
        if self.signal_state == SignalState::Missing && expired {
            self.signal_state = SignalState::Stale;
        }
    }

    /// Writes exactly the numbers the status shows for this observation: rates and latencies
    /// to a thousandth, KV usage to four places, request counts to whole requests. Missing
    /// signals stay absent.
    pub fn write_status(&self, status: &mut RoleStatus) {
        let quantity = |v: Option<f64>, places| {
            v.and_then(|v| Decimal::from_f64_rounded(v, places))
                .map(Quantity::from)
        };
        let count = |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| v.round() as i64);
        status.ready_replicas = Some(self.ready_replicas as i32);
        status.signal_state = Some(self.signal_state);
        status.prompt_tokens_per_second = quantity(self.prompt_tokens_per_second, 3);
        status.generation_tokens_per_second = quantity(self.generation_tokens_per_second, 3);
        status.running_requests = count(self.running_requests);
        status.waiting_requests = count(self.waiting_requests);
        status.kv_cache_usage = quantity(self.kv_cache_usage, 4);
        status.ttft_milliseconds = quantity(self.ttft_milliseconds, 3);
        status.itl_milliseconds = quantity(self.itl_milliseconds, 3);
    }
}

/// Merges histogram deltas on the intersection of their finite boundaries (plus `+Inf`) and
/// returns the p95 in seconds: the smallest finite `le` whose count covers 95 % of the
/// observations, or the mean when no finite bucket does or there are no buckets. `None` when
/// the window saw no observation.
pub fn p95_seconds<'a>(deltas: impl Iterator<Item = &'a HistogramDelta>) -> Option<f64> {
    p95_with_observations(deltas).map(|(p95, _)| p95)
}

/// [`p95_seconds`] with the number of observations it was read from (D32): the children's
/// observations in the window, or the `_count` behind the mean when only the mean answers.
pub fn p95_with_observations<'a>(
    deltas: impl Iterator<Item = &'a HistogramDelta>,
) -> Option<(f64, f64)> {
    let deltas: Vec<&HistogramDelta> = deltas.collect();
    // Observations of a child: its +Inf bucket, else its _count.
    let observations = |d: &HistogramDelta| {
        d.buckets
            .iter()
            .find(|(le, _)| le.is_infinite())
            .map(|(_, c)| *c)
            .or(d.count)
    };
    // The mean over the children that report both _sum and _count.
    let (sum, count) = deltas
        .iter()
        .filter_map(|d| Some((d.sum?, d.count?)))
        .fold((0.0, 0.0), |(s, c), (ds, dc)| (s + ds, c + dc));
    // The mean answers with the observations behind it.
    let mean = (count > 0.0).then(|| (sum / count, count));
    let total: f64 = deltas.iter().filter_map(|d| observations(d)).sum();
    if total <= 0.0 {
        // No observation in the window: missing, not zero (unless only the mean knows).
        return mean;
    }
    // Children with observations and a known total; a child without +Inf and _count cannot
    // say what 95 % of it is, so the buckets are not used at all. A child with observations
    // but no finite buckets shares only +Inf with the others: the mean answers (§7).
    let with_buckets: Vec<(&HistogramDelta, f64)> = deltas
        .iter()
        .filter(|d| !d.buckets.is_empty() || d.count.is_some_and(|c| c > 0.0))
        .map(|d| observations(d).map(|n| (*d, n)))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    if with_buckets.is_empty() {
        return mean;
    }
    // Finite boundaries every child has.
    let mut common: Vec<f64> = with_buckets[0]
        .0
        .buckets
        .iter()
        .map(|(le, _)| *le)
        .filter(|le| le.is_finite())
        .collect();
    for (d, _) in &with_buckets[1..] {
        common.retain(|le| d.buckets.iter().any(|(l, _)| l == le));
    }
    let bucket_total: f64 = with_buckets.iter().map(|(_, n)| n).sum();
    for le in common {
        let covered: f64 = with_buckets
            .iter()
            .map(|(d, _)| {
                d.buckets
                    .iter()
                    .find(|(l, _)| *l == le)
                    .map(|(_, c)| *c)
                    .unwrap_or(0.0)
            })
            .sum();
        if covered >= 0.95 * bucket_total {
            return Some((le, bucket_total));
        }
    }
    mean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(buckets: &[(f64, f64)], sum: f64, count: f64) -> HistogramDelta {
        HistogramDelta {
            buckets: buckets.to_vec(),
            sum: Some(sum),
            count: Some(count),
        }
    }

    #[test]
    fn p95_is_the_covering_bucket_boundary() {
        let d = delta(
            &[
                (0.1, 50.0),
                (0.5, 94.0),
                (1.0, 96.0),
                (f64::INFINITY, 100.0),
            ],
            30.0,
            100.0,
        );
        assert_eq!(p95_seconds([&d].into_iter()), Some(1.0));
    }

    #[test]
    fn p95_in_the_infinite_bucket_or_without_buckets_is_the_mean() {
        let d = delta(&[(0.1, 10.0), (f64::INFINITY, 100.0)], 250.0, 100.0);
        assert_eq!(p95_seconds([&d].into_iter()), Some(2.5));
        let d = delta(&[], 30.0, 10.0);
        assert_eq!(p95_seconds([&d].into_iter()), Some(3.0));
    }

    #[test]
    fn the_p95_comes_with_the_observations_it_was_read_from() {
        // D32: two replicas' windows, 3 and 2 requests: a p95 from 5 observations.
        let a = delta(&[(0.1, 2.0), (0.75, 3.0), (f64::INFINITY, 3.0)], 0.9, 3.0);
        let b = delta(&[(0.1, 2.0), (0.75, 2.0), (f64::INFINITY, 2.0)], 0.1, 2.0);
        assert_eq!(
            p95_with_observations([&a, &b].into_iter()),
            Some((0.75, 5.0))
        );
        // Only the mean answers: the observations behind it.
        let d = delta(&[], 30.0, 10.0);
        assert_eq!(p95_with_observations([&d].into_iter()), Some((3.0, 10.0)));
        assert_eq!(p95_with_observations([].into_iter()), None);
    }

    #[test]
    fn a_lost_inf_bucket_uses_the_count_and_a_child_without_sum_keeps_the_mean() {
        // +Inf line lost: 100 observations by _count, only 20 at or below 1 s: the mean.
        let d = delta(&[(0.1, 10.0), (1.0, 20.0)], 500.0, 100.0);
        assert_eq!(p95_seconds([&d].into_iter()), Some(5.0));
        let no_sum = HistogramDelta {
            buckets: vec![],
            sum: None,
            count: Some(10.0),
        };
        let with_sum = delta(&[], 30.0, 10.0);
        assert_eq!(p95_seconds([&no_sum, &with_sum].into_iter()), Some(3.0));
    }

    #[test]
    fn a_child_without_buckets_leaves_only_inf_in_common_so_the_mean_answers() {
        // A: 10 observations at or below 0.1 s; B: 100 observations averaging 10 s, no buckets.
        let a = delta(&[(0.1, 10.0), (f64::INFINITY, 10.0)], 0.5, 10.0);
        let b = delta(&[], 1000.0, 100.0);
        assert_eq!(p95_seconds([&a, &b].into_iter()), Some(1000.5 / 110.0));
        // A child with buckets but no observations does not hide B.
        let empty = delta(&[(0.001, 0.0), (f64::INFINITY, 0.0)], 0.0, 0.0);
        let b = delta(&[], 500.0, 100.0);
        assert_eq!(p95_seconds([&empty, &b].into_iter()), Some(5.0));
    }

    #[test]
    fn no_observation_is_missing_not_zero() {
        let d = delta(&[(0.1, 0.0), (f64::INFINITY, 0.0)], 0.0, 0.0);
        assert_eq!(p95_seconds([&d].into_iter()), None);
        assert_eq!(p95_seconds([].into_iter()), None);
    }

    #[test]
    fn different_layouts_merge_on_common_boundaries() {
        // Pod A has 0.25 and 0.5; pod B has 0.2 and 0.5: only 0.5 is common.
        let a = delta(
            &[(0.25, 90.0), (0.5, 100.0), (f64::INFINITY, 100.0)],
            10.0,
            100.0,
        );
        let b = delta(
            &[
                (0.2, 10.0),
                (0.5, 98.0),
                (1.0, 100.0),
                (f64::INFINITY, 100.0),
            ],
            40.0,
            100.0,
        );
        // At 0.5: 198 of 200 = 99 % ≥ 95 %.
        assert_eq!(p95_seconds([&a, &b].into_iter()), Some(0.5));
        // Only +Inf in common → the mean of both: 50 / 200.
        let c = delta(&[(0.3, 100.0), (f64::INFINITY, 100.0)], 40.0, 100.0);
        let d = delta(&[(0.4, 100.0), (f64::INFINITY, 100.0)], 10.0, 100.0);
        assert_eq!(p95_seconds([&c, &d].into_iter()), Some(0.25));
    }
}
