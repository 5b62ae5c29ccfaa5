//! What a run reports: per one-minute bin and for the whole run, requests and their SLO
//! attainment, TTFT and ITL percentiles, GPU-hours, replicas, scale actions, flaps and the
//! time growth waited for admission.
//!
//! - A request attains the SLO when it finished within its TTFT objective and its inter-token
//!   latency, read as the SLO says (its own p95 gap, or its mean), is within the ITL objective
//!   (module `slo`; a request with one output token has no ITL to miss). Both readings are
//!   kept. Requests refused, unrouted, lost or unfinished at the end miss it.
//! - ITL percentiles are over every gap between output tokens as the engines' histograms
//!   record them (the fluid engine has no gaps: its step means stand in); TPOT percentiles
//!   over requests' mean gaps.
//! - GPU-hours count every admitted instance's GPUs while it starts, serves, drains and
//!   terminates.
//! - A flap is a role's count reversing direction within max(2 × cold start, 5 min) of its last
//!   change.
//! - The fluid engine has no requests: each step's served amount counts as requests, graded
//!   as shares from the step's TTFT spread and its share of prompt-carrying steps
//!   (`slo::fluid`); its percentiles are over step means.

use std::collections::BTreeMap;

use mds_sim::engine::StepSummary;
use mds_sim::{ServedOutcome, ServedRequest};
use serde::Serialize;

use crate::slo::{FluidShares, Grader};
pub use crate::slo::{ItlReading, Slo};
use mds_sim::engine::gaps::GapLog;

/// p50, p95 and p99 in seconds (`None` without samples).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Default)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

impl Percentiles {
    pub fn is_empty(&self) -> bool {
        self.p50.is_none()
    }
}

/// One bin of the run (or the whole run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    /// Seconds since the start.
    pub start: f64,
    pub seconds: f64,
    /// Requests that arrived in the bin (fractional with the fluid engine).
    pub requests: f64,
    /// Requests that attained the SLO, as its ITL reading says.
    pub attained: f64,
    /// attained / requests (`None` without requests).
    pub attainment: Option<f64>,
    /// The share attaining with ITL read as each request's own p95 gap, and as its mean.
    pub attainment_p95_itl: Option<f64>,
    pub attainment_mean_itl: Option<f64>,
    /// Requests no scale serves within the SLO (module `slo`).
    pub unattainable: f64,
    pub ttft: Percentiles,
    /// Each finished request's TTFT over its own objective (1 = at it), where objectives
    /// differ by request (an allowance, prompt classes, `--slo-scale`; request engine).
    #[serde(skip_serializing_if = "Percentiles::is_empty")]
    pub ttft_of_objective: Percentiles,
    /// Over every gap between output tokens.
    pub itl: Percentiles,
    /// Over requests' mean gaps.
    pub tpot: Percentiles,
    pub gpu_hours: f64,
    /// Target counts and ready replicas at the bin's end.
    pub replicas: BTreeMap<String, i32>,
    pub ready: BTreeMap<String, i32>,
    pub scale_actions: u32,
    pub flaps: u32,
    /// Seconds an instance of the target waited for admission.
    pub unadmitted_seconds: f64,
    /// Seconds the target held more GPUs than the quota allows (transients included).
    pub above_budget_seconds: f64,
    /// Requests never served: unrouted, lost, or unfinished at the end of the run.
    pub never_served: f64,
    pub rejected: f64,
}

/// Time-weighted replicas of one role.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReplicaStats {
    pub min: i32,
    pub max: i32,
    pub mean: f64,
}

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub totals: Bin,
    pub scale_actions_per_hour: f64,
    /// Share of one-minute bins with requests whose p95 TTFT and p95 ITL meet the SLO, a
    /// request refused or never served counting as infinitely slow.
    pub window_attainment: Option<f64>,
    pub replica_stats: BTreeMap<String, ReplicaStats>,
    pub finished: f64,
    pub unrouted: f64,
    pub lost: f64,
    pub unfinished_at_end: f64,
    /// Means as serving benchmarks report them.
    pub means: Means,
    /// The written and ready counts as they changed, for the metrics (module `metrics`).
    #[serde(skip)]
    pub timeline: crate::metrics::Timeline,
}

/// Means over the finished requests, as serving benchmarks report them (`None`: no request
/// finished, or the fluid engine, which serves flows rather than requests, for throughput).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Means {
    pub ttft_seconds: Option<f64>,
    /// Each request's mean gap between output tokens, averaged over requests.
    pub tpot_seconds: Option<f64>,
    /// Output tokens over the time from the first arrival to the last completion.
    pub output_tokens_per_second: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Acc {
    requests: f64,
    attained_p95: f64,
    attained_mean: f64,
    unattainable: f64,
    /// Finished requests over their TTFT objective, and over the ITL objective by their mean.
    ttft_slow: f64,
    tpot_slow: f64,
    ttft: Vec<(f64, f64)>,
    ttft_of_objective: Vec<(f64, f64)>,
    tpot: Vec<(f64, f64)>,
    gpu_seconds: f64,
    unadmitted_seconds: f64,
    above_budget_seconds: f64,
    never_served: f64,
    rejected: f64,
    scale_actions: u32,
    flaps: u32,
    replicas: BTreeMap<String, i32>,
    ready: BTreeMap<String, i32>,
}

/// Collects a run as it goes.
pub struct Recorder {
    grader: Grader,
    /// Every gap between output tokens, per minute.
    gaps: GapLog,
    bin_seconds: f64,
    flap_window: f64,
    /// GPUs the quota allows the target (`None`: unlimited).
    budget: Option<u32>,
    bins: Vec<Acc>,
    last_change: BTreeMap<String, (f64, bool)>,
    replica_seconds: BTreeMap<String, (i32, i32, f64)>,
    replicas: BTreeMap<String, i32>,
    finished: f64,
    unrouted: f64,
    lost: f64,
    /// Output tokens of finished requests, the first arrival and the last completion.
    output_tokens: f64,
    first_arrival: f64,
    last_finish: f64,
    timeline: crate::metrics::Timeline,
    /// The last step graded and its shares: a role's replicas share each bin's load evenly,
    /// so in a fluid run they step alike and are graded alike, one after another.
    last_graded: Option<(StepSummary, FluidShares)>,
}

impl Recorder {
    pub fn new(
        grader: Grader,
        bin_seconds: f64,
        cold_start_seconds: f64,
        budget: Option<u32>,
    ) -> Recorder {
        Recorder {
            grader,
            gaps: GapLog::default(),
            bin_seconds,
            budget,
            flap_window: (2.0 * cold_start_seconds).max(300.0),
            bins: Vec::new(),
            last_change: BTreeMap::new(),
            replica_seconds: BTreeMap::new(),
            replicas: BTreeMap::new(),
            finished: 0.0,
            output_tokens: 0.0,
            first_arrival: f64::INFINITY,
            last_finish: f64::NEG_INFINITY,
            unrouted: 0.0,
            lost: 0.0,
            timeline: crate::metrics::Timeline::default(),
            last_graded: None,
        }
    }

    fn bin(&mut self, t: f64) -> &mut Acc {
        let index = (t.max(0.0) / self.bin_seconds) as usize;
        if self.bins.len() <= index {
            let last = self.bins.last().cloned().unwrap_or_default();
            self.bins.resize_with(index + 1, || Acc {
                replicas: last.replicas.clone(),
                ready: last.ready.clone(),
                ..Acc::default()
            });
        }
        &mut self.bins[index]
    }

    /// The world from `t0` to `t1`: admitted GPUs, whether growth waited for admission, the
    /// target's counts and ready replicas.
    pub fn span(
        &mut self,
        t0: f64,
        t1: f64,
        gpus: u32,
        unadmitted: bool,
        replicas: &BTreeMap<String, i32>,
        ready: &BTreeMap<String, i32>,
    ) {
        let above_budget = self.budget.is_some_and(|b| gpus > b);
        self.timeline.record(t0, replicas, ready);
        let mut t = t0;
        while t < t1 {
            let edge = ((t / self.bin_seconds).floor() + 1.0) * self.bin_seconds;
            let end = edge.min(t1);
            let dt = end - t;
            let bin = self.bin(t);
            bin.gpu_seconds += f64::from(gpus) * dt;
            if unadmitted {
                bin.unadmitted_seconds += dt;
            }
            if above_budget {
                bin.above_budget_seconds += dt;
            }
            // Called every simulated second: copy the counts only when they changed.
            if bin.replicas != *replicas {
                bin.replicas.clone_from(replicas);
            }
            if bin.ready != *ready {
                bin.ready.clone_from(ready);
            }
            t = end;
        }
        for (role, &n) in replicas {
            let entry = match self.replica_seconds.get_mut(role) {
                Some(entry) => entry,
                None => self
                    .replica_seconds
                    .entry(role.clone())
                    .or_insert((n, n, 0.0)),
            };
            entry.0 = entry.0.min(n);
            entry.1 = entry.1.max(n);
            entry.2 += f64::from(n) * (t1 - t0);
        }
    }

    /// A request's end.
    pub fn served(&mut self, r: &ServedRequest) {
        self.first_arrival = self.first_arrival.min(r.arrival);
        match r.outcome {
            ServedOutcome::Finished => {
                self.finished += 1.0;
                self.output_tokens += r.output_tokens as f64;
                self.last_finish = self.last_finish.max(r.end);
            }
            ServedOutcome::Unrouted => self.unrouted += 1.0,
            ServedOutcome::Lost => self.lost += 1.0,
            ServedOutcome::Rejected => {}
        }
        let objective = self.grader.ttft_objective(r.id);
        let unattainable = self.grader.unattainable(r.id);
        let itl = self.grader.slo.itl_seconds;
        let varies = self.grader.slo.objective_varies();
        // The engine counted the gaps over this same objective (the scenario gives it).
        let bin = self.bin(r.arrival);
        bin.requests += 1.0;
        if unattainable {
            bin.unattainable += 1.0;
        }
        match r.outcome {
            ServedOutcome::Finished => {
                let ttft_ok = r.ttft_seconds.is_none_or(|t| t <= objective);
                let mean_ok = r.itl_seconds.is_none_or(|t| t <= itl);
                let p95_ok = p95_within(r.gaps, r.slow_gaps);
                bin.attained_p95 += f64::from(u8::from(ttft_ok && p95_ok));
                bin.attained_mean += f64::from(u8::from(ttft_ok && mean_ok));
                bin.ttft_slow += f64::from(u8::from(!ttft_ok));
                bin.tpot_slow += f64::from(u8::from(!mean_ok));
                if let Some(t) = r.ttft_seconds {
                    bin.ttft.push((t, 1.0));
                    if varies {
                        bin.ttft_of_objective.push((t / objective, 1.0));
                    }
                }
                if let Some(t) = r.itl_seconds {
                    bin.tpot.push((t, 1.0));
                }
            }
            ServedOutcome::Rejected => bin.rejected += 1.0,
            ServedOutcome::Unrouted | ServedOutcome::Lost => bin.never_served += 1.0,
        }
    }

    /// Gaps between output tokens the engines observed.
    pub fn gaps(&mut self, gaps: GapLog) {
        self.gaps.merge(gaps);
    }

    /// Fluid-engine service: `requests` served at `t` by a step like `step` of an engine that
    /// produces their output, graded as shares (module `slo::fluid`).
    pub fn fluid_served(&mut self, t: f64, requests: f64, step: &StepSummary) {
        if requests <= 0.0 {
            return;
        }
        let shares = match self.last_graded {
            Some((last, shares)) if last == *step => shares,
            _ => {
                let shares = self.grader.slo.fluid_shares(step, &self.grader.prompts);
                self.last_graded = Some((*step, shares));
                shares
            }
        };
        self.finished += requests;
        let bin = self.bin(t);
        bin.requests += requests;
        bin.attained_p95 += requests * shares.attained(ItlReading::P95);
        bin.attained_mean += requests * shares.attained(ItlReading::Mean);
        bin.ttft_slow += requests * (1.0 - shares.ttft);
        bin.tpot_slow += requests * (1.0 - shares.itl_mean);
        bin.ttft.push((step.ttft_mean_seconds, requests));
        bin.tpot.push((step.itl_mean_seconds, requests));
    }

    /// Fluid-engine load offered while nothing was routed.
    pub fn fluid_unrouted(&mut self, t: f64, requests: f64) {
        if requests > 0.0 {
            self.unrouted += requests;
            let bin = self.bin(t);
            bin.requests += requests;
            bin.never_served += requests;
        }
    }

    /// A pass changed the target's counts from `before` to `after` at `t`.
    pub fn pass(&mut self, t: f64, before: &BTreeMap<String, i32>, after: &BTreeMap<String, i32>) {
        let mut changed = false;
        let mut flaps = 0;
        for (role, &n) in after {
            let Some(&old) = before.get(role) else {
                continue;
            };
            if old == n {
                continue;
            }
            changed = true;
            let up = n > old;
            if let Some(&(at, was_up)) = self.last_change.get(role)
                && was_up != up
                && t - at <= self.flap_window
            {
                flaps += 1;
            }
            self.last_change.insert(role.clone(), (t, up));
        }
        self.replicas.clone_from(after);
        let bin = self.bin(t);
        if changed {
            bin.scale_actions += 1;
        }
        bin.flaps += flaps;
    }

    /// Ends the run at `end` seconds with `unfinished` requests still in flight (arrived at the
    /// given times).
    pub fn finish(mut self, end: f64, unfinished: &[f64]) -> (Summary, Vec<Bin>) {
        for &arrival in unfinished {
            let bin = self.bin(arrival);
            bin.requests += 1.0;
            bin.never_served += 1.0;
        }
        let width = self.bin_seconds;
        let reading = self.grader.slo.itl_reading;
        let bins: Vec<Bin> = self
            .bins
            .iter()
            .enumerate()
            .map(|(i, acc)| {
                let start = i as f64 * width;
                let minutes = self.minutes(start, width);
                close(
                    acc,
                    start,
                    width.min(end - start),
                    self.gaps_of(Some(minutes)),
                    reading,
                )
            })
            .collect();
        let mut all = Acc::default();
        for acc in &self.bins {
            all.requests += acc.requests;
            all.attained_p95 += acc.attained_p95;
            all.attained_mean += acc.attained_mean;
            all.ttft.extend_from_slice(&acc.ttft);
            all.tpot.extend_from_slice(&acc.tpot);
            all.gpu_seconds += acc.gpu_seconds;
            all.unadmitted_seconds += acc.unadmitted_seconds;
            all.above_budget_seconds += acc.above_budget_seconds;
            all.never_served += acc.never_served;
            all.rejected += acc.rejected;
            all.scale_actions += acc.scale_actions;
            all.flaps += acc.flaps;
        }
        all.unattainable = self.grader.unattainable_count() as f64;
        if let Some(last) = self.bins.last() {
            all.replicas.clone_from(&last.replicas);
            all.ready.clone_from(&last.ready);
        }
        let means = Means {
            ttft_seconds: weighted_mean(&all.ttft),
            tpot_seconds: weighted_mean(&all.tpot),
            output_tokens_per_second: (self.output_tokens > 0.0
                && self.last_finish > self.first_arrival)
                .then(|| self.output_tokens / (self.last_finish - self.first_arrival)),
        };
        let totals = close(&all, 0.0, end, self.gaps_of(None), reading);
        let hours = end / 3600.0;
        let busy: Vec<(usize, &Acc)> = self
            .bins
            .iter()
            .enumerate()
            .filter(|(_, b)| b.requests > 0.0)
            .collect();
        let met = busy
            .iter()
            .filter(|(i, b)| self.window_met(b, *i as f64 * width))
            .count();
        let summary = Summary {
            window_attainment: (!busy.is_empty()).then(|| met as f64 / busy.len() as f64),
            scale_actions_per_hour: if hours > 0.0 {
                f64::from(totals.scale_actions) / hours
            } else {
                0.0
            },
            replica_stats: self
                .replica_seconds
                .iter()
                .map(|(role, &(min, max, seconds))| {
                    let mean = if end > 0.0 { seconds / end } else { 0.0 };
                    (role.clone(), ReplicaStats { min, max, mean })
                })
                .collect(),
            finished: self.finished,
            unrouted: self.unrouted,
            lost: self.lost,
            unfinished_at_end: unfinished.len() as f64,
            means,
            totals,
            timeline: std::mem::take(&mut self.timeline),
        };
        (summary, bins)
    }

    /// The minutes of the gap log a bin of `width` seconds from `start` covers.
    fn minutes(&self, start: f64, width: f64) -> std::ops::Range<u32> {
        (start / 60.0) as u32..((start + width) / 60.0).ceil().max(1.0) as u32
    }

    /// The gaps' percentiles in `minutes` (all of them for `None`); `None` without gaps.
    fn gaps_of(&self, minutes: Option<std::ops::Range<u32>>) -> Option<Percentiles> {
        let at = |q| self.gaps.quantile(minutes.clone(), q);
        at(0.5).map(|p50| Percentiles {
            p50: Some(p50),
            p95: at(0.95),
            p99: at(0.99),
        })
    }

    /// A bin's p95 TTFT and p95 ITL meet the SLO: at most 5 % of its requests are slower than
    /// their TTFT objective, refused or never served, and at most 5 % of its gaps between
    /// output tokens are over the ITL objective (read as the SLO says: every gap as the
    /// histogram records it, or, for the mean reading and the fluid engine, the requests'
    /// mean gaps).
    fn window_met(&self, acc: &Acc, start: f64) -> bool {
        let slo = self.grader.slo;
        let missed = acc.never_served + acc.rejected;
        let allowed = 0.05 * acc.requests + 1e-9;
        if missed + acc.ttft_slow > allowed {
            return false;
        }
        let minutes = self.minutes(start, self.bin_seconds);
        let (gaps, over) = minutes.fold((0, 0), |(g, o), m| {
            let (mg, mo) = self.gaps.over(m);
            (g + mg, o + mo)
        });
        if slo.itl_reading == ItlReading::P95 && gaps > 0 {
            return over as f64 <= 0.05 * gaps as f64 + 1e-9 && missed <= allowed;
        }
        missed + acc.tpot_slow <= allowed
    }
}

/// A request's own p95 gap (nearest rank) is within the objective: of its `gaps`, at most
/// `gaps - ceil(0.95 gaps)` are over it. A request without gaps has none to miss.
pub fn p95_within(gaps: u64, slow: u64) -> bool {
    slow <= gaps - (95 * gaps).div_ceil(100)
}

fn close(
    acc: &Acc,
    start: f64,
    seconds: f64,
    gaps: Option<Percentiles>,
    reading: ItlReading,
) -> Bin {
    let share = |n: f64| (acc.requests > 0.0).then(|| n / acc.requests);
    let attained = match reading {
        ItlReading::P95 => acc.attained_p95,
        ItlReading::Mean => acc.attained_mean,
    };
    let tpot = percentiles(&acc.tpot);
    Bin {
        start,
        seconds,
        requests: acc.requests,
        attained,
        attainment: share(attained),
        attainment_p95_itl: share(acc.attained_p95),
        attainment_mean_itl: share(acc.attained_mean),
        unattainable: acc.unattainable,
        ttft: percentiles(&acc.ttft),
        ttft_of_objective: percentiles(&acc.ttft_of_objective),
        itl: gaps.unwrap_or(tpot),
        tpot,
        gpu_hours: acc.gpu_seconds / 3600.0,
        replicas: acc.replicas.clone(),
        ready: acc.ready.clone(),
        scale_actions: acc.scale_actions,
        flaps: acc.flaps,
        unadmitted_seconds: acc.unadmitted_seconds,
        above_budget_seconds: acc.above_budget_seconds,
        never_served: acc.never_served,
        rejected: acc.rejected,
    }
}

/// Weighted nearest-rank percentiles.
fn percentiles(samples: &[(f64, f64)]) -> Percentiles {
    // Nearly every sample is kept: one allocation instead of a filter's doublings.
    let mut sorted: Vec<(f64, f64)> = Vec::with_capacity(samples.len());
    sorted.extend(
        samples
            .iter()
            .copied()
            .filter(|(v, w)| v.is_finite() && *w > 0.0),
    );
    if sorted.is_empty() {
        return Percentiles::default();
    }
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = sorted.iter().map(|s| s.1).sum();
    let at = |p: f64| {
        let rank = p * total;
        let mut seen = 0.0;
        for (v, w) in &sorted {
            seen += w;
            if seen >= rank - 1e-9 {
                return Some(*v);
            }
        }
        sorted.last().map(|s| s.0)
    };
    Percentiles {
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
    }
}

/// The mean of (value, weight) pairs (`None` without weight).
fn weighted_mean(values: &[(f64, f64)]) -> Option<f64> {
    let (sum, weight) = values
        .iter()
        .fold((0.0, 0.0), |(s, w), &(v, n)| (s + v * n, w + n));
    (weight > 0.0).then(|| sum / weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<(f64, f64)> = (1..=100).map(|i| (f64::from(i), 1.0)).collect();
        let p = percentiles(&samples);
        assert_eq!((p.p50, p.p95, p.p99), (Some(50.0), Some(95.0), Some(99.0)));
        assert_eq!(percentiles(&[]).p95, None);
        // Weighted: 90 % of the weight at 1 s.
        let p = percentiles(&[(1.0, 9.0), (5.0, 1.0)]);
        assert_eq!((p.p50, p.p95), (Some(1.0), Some(5.0)));
    }

    #[test]
    fn a_requests_p95_gap_is_within_with_one_stall_in_twenty_and_not_with_two() {
        // Nearest rank, by brute force over every length and count of stalls.
        for gaps in 0..200_u64 {
            for slow in 0..=gaps {
                let mut sorted: Vec<f64> = (0..gaps)
                    .map(|i| if i < gaps - slow { 0.01 } else { 1.0 })
                    .collect();
                sorted.sort_by(f64::total_cmp);
                let p95 = (gaps > 0).then(|| sorted[(95 * gaps as usize).div_ceil(100) - 1]);
                assert_eq!(
                    p95_within(gaps, slow),
                    p95.is_none_or(|p| p <= 0.05),
                    "{slow} of {gaps}"
                );
            }
        }
        assert!(p95_within(20, 1));
        assert!(!p95_within(20, 2));
    }

    #[test]
    fn a_reversal_inside_the_window_is_a_flap() {
        let mut r = Recorder::new(Grader::new(Slo::default(), None, None), 60.0, 60.0, None);
        let v = |n: i32| BTreeMap::from([("server".to_string(), n)]);
        r.pass(10.0, &v(1), &v(3));
        r.pass(200.0, &v(3), &v(2));
        r.pass(900.0, &v(2), &v(4));
        let (summary, _) = r.finish(1000.0, &[]);
        assert_eq!(summary.totals.scale_actions, 3);
        assert_eq!(
            summary.totals.flaps, 1,
            "200 s after growing is a flap, 700 s is not"
        );
    }

    #[test]
    fn gpu_hours_split_over_bins() {
        let mut r = Recorder::new(Grader::new(Slo::default(), None, None), 60.0, 60.0, None);
        let v = BTreeMap::from([("server".to_string(), 2)]);
        r.span(30.0, 90.0, 2, true, &v, &v);
        let (summary, bins) = r.finish(120.0, &[]);
        assert_eq!(bins.len(), 2);
        assert!((bins[0].gpu_hours - 60.0 / 3600.0).abs() < 1e-12);
        assert!((summary.totals.gpu_hours - 120.0 / 3600.0).abs() < 1e-12);
        assert_eq!(summary.totals.unadmitted_seconds, 60.0);
    }

    #[test]
    fn seconds_above_the_budget_count_only_gpus_beyond_it() {
        let mut r = Recorder::new(Grader::new(Slo::default(), None, None), 60.0, 60.0, Some(4));
        let v = BTreeMap::from([("server".to_string(), 4)]);
        r.span(0.0, 10.0, 4, false, &v, &v);
        r.span(10.0, 25.0, 5, false, &v, &v);
        let (summary, _) = r.finish(25.0, &[]);
        assert_eq!(summary.totals.above_budget_seconds, 15.0);
        let mut unlimited =
            Recorder::new(Grader::new(Slo::default(), None, None), 60.0, 60.0, None);
        unlimited.span(0.0, 10.0, 50, false, &v, &v);
        assert_eq!(
            unlimited.finish(10.0, &[]).0.totals.above_budget_seconds,
            0.0
        );
    }
}
