//! What a run reports: per one-minute bin and for the whole run, requests and their SLO
//! attainment, TTFT and ITL percentiles, GPU-hours, replicas, scale actions, flaps and the
//! time growth waited for admission.
//!
//! - A request attains the SLO when it finished with TTFT ≤ the TTFT SLO and a mean ITL ≤ the
//!   ITL SLO (a request with one output token has no ITL to miss). Requests refused, unrouted,
//!   lost or unfinished at the end miss it.
//! - ITL percentiles are over requests' mean inter-token latency.
//! - GPU-hours count every admitted instance's GPUs while it starts, serves, drains and
//!   terminates.
//! - A flap is a role's count reversing direction within max(2 × cold start, 5 min) of its last
//!   change.
//! - The fluid engine has no requests: each step's served amount counts as requests with that
//!   step's mean TTFT and ITL.

use std::collections::BTreeMap;

use mds_sim::{ServedOutcome, ServedRequest};
use serde::Serialize;

/// The latency objectives a request is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Slo {
    pub ttft_seconds: f64,
    pub itl_seconds: f64,
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            ttft_seconds: 0.5,
            itl_seconds: 0.05,
        }
    }
}

/// p50, p95 and p99 in seconds (`None` without samples).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Default)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

/// One bin of the run (or the whole run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    /// Seconds since the start.
    pub start: f64,
    pub seconds: f64,
    /// Requests that arrived in the bin (fractional with the fluid engine).
    pub requests: f64,
    pub attained: f64,
    /// attained / requests (`None` without requests).
    pub attainment: Option<f64>,
    pub ttft: Percentiles,
    pub itl: Percentiles,
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
}

#[derive(Clone, Debug, Default)]
struct Acc {
    requests: f64,
    attained: f64,
    ttft: Vec<(f64, f64)>,
    itl: Vec<(f64, f64)>,
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
    slo: Slo,
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
}

impl Recorder {
    pub fn new(
        slo: Slo,
        bin_seconds: f64,
        cold_start_seconds: f64,
        budget: Option<u32>,
    ) -> Recorder {
        Recorder {
            slo,
            bin_seconds,
            budget,
            flap_window: (2.0 * cold_start_seconds).max(300.0),
            bins: Vec::new(),
            last_change: BTreeMap::new(),
            replica_seconds: BTreeMap::new(),
            replicas: BTreeMap::new(),
            finished: 0.0,
            unrouted: 0.0,
            lost: 0.0,
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
            bin.replicas.clone_from(replicas);
            bin.ready.clone_from(ready);
            t = end;
        }
        for (role, &n) in replicas {
            let entry = self
                .replica_seconds
                .entry(role.clone())
                .or_insert((n, n, 0.0));
            entry.0 = entry.0.min(n);
            entry.1 = entry.1.max(n);
            entry.2 += f64::from(n) * (t1 - t0);
        }
    }

    /// A request's end.
    pub fn served(&mut self, r: &ServedRequest) {
        let slo = self.slo;
        match r.outcome {
            ServedOutcome::Finished => self.finished += 1.0,
            ServedOutcome::Unrouted => self.unrouted += 1.0,
            ServedOutcome::Lost => self.lost += 1.0,
            ServedOutcome::Rejected => {}
        }
        let bin = self.bin(r.arrival);
        bin.requests += 1.0;
        match r.outcome {
            ServedOutcome::Finished => {
                let ttft_ok = r.ttft_seconds.is_none_or(|t| t <= slo.ttft_seconds);
                let itl_ok = r.itl_seconds.is_none_or(|t| t <= slo.itl_seconds);
                if ttft_ok && itl_ok {
                    bin.attained += 1.0;
                }
                if let Some(t) = r.ttft_seconds {
                    bin.ttft.push((t, 1.0));
                }
                if let Some(t) = r.itl_seconds {
                    bin.itl.push((t, 1.0));
                }
            }
            ServedOutcome::Rejected => bin.rejected += 1.0,
            ServedOutcome::Unrouted | ServedOutcome::Lost => bin.never_served += 1.0,
        }
    }

    /// Fluid-engine service: `requests` served at `t` with mean latencies (`itl` `None` for a
    /// prefill-only engine).
    pub fn fluid_served(&mut self, t: f64, requests: f64, ttft: f64, itl: Option<f64>) {
        if requests <= 0.0 {
            return;
        }
        let slo = self.slo;
        self.finished += requests;
        let bin = self.bin(t);
        bin.requests += requests;
        if ttft <= slo.ttft_seconds && itl.is_none_or(|i| i <= slo.itl_seconds) {
            bin.attained += requests;
        }
        bin.ttft.push((ttft, requests));
        if let Some(i) = itl {
            bin.itl.push((i, requests));
        }
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
        let bins: Vec<Bin> = self
            .bins
            .iter()
            .enumerate()
            .map(|(i, acc)| close(acc, i as f64 * width, width.min(end - i as f64 * width)))
            .collect();
        let mut all = Acc::default();
        for acc in &self.bins {
            all.requests += acc.requests;
            all.attained += acc.attained;
            all.ttft.extend_from_slice(&acc.ttft);
            all.itl.extend_from_slice(&acc.itl);
            all.gpu_seconds += acc.gpu_seconds;
            all.unadmitted_seconds += acc.unadmitted_seconds;
            all.above_budget_seconds += acc.above_budget_seconds;
            all.never_served += acc.never_served;
            all.rejected += acc.rejected;
            all.scale_actions += acc.scale_actions;
            all.flaps += acc.flaps;
        }
        if let Some(last) = self.bins.last() {
            all.replicas.clone_from(&last.replicas);
            all.ready.clone_from(&last.ready);
        }
        let totals = close(&all, 0.0, end);
        let hours = end / 3600.0;
        let slo = self.slo;
        let busy: Vec<&Acc> = self.bins.iter().filter(|b| b.requests > 0.0).collect();
        let met = busy.iter().filter(|b| window_met(b, slo)).count();
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
            totals,
        };
        (summary, bins)
    }
}

/// A bin's p95 TTFT and p95 ITL meet the SLO: at most 5 % of its requests are slower than
/// it, refused or never served.
fn window_met(acc: &Acc, slo: Slo) -> bool {
    let missed = acc.never_served + acc.rejected;
    let slow = |samples: &[(f64, f64)], limit: f64| -> f64 {
        samples
            .iter()
            .filter(|(v, _)| *v > limit)
            .map(|(_, w)| w)
            .sum()
    };
    let allowed = 0.05 * acc.requests + 1e-9;
    missed + slow(&acc.ttft, slo.ttft_seconds) <= allowed
        && missed + slow(&acc.itl, slo.itl_seconds) <= allowed
}

fn close(acc: &Acc, start: f64, seconds: f64) -> Bin {
    Bin {
        start,
        seconds,
        requests: acc.requests,
        attained: acc.attained,
        attainment: (acc.requests > 0.0).then(|| acc.attained / acc.requests),
        ttft: percentiles(&acc.ttft),
        itl: percentiles(&acc.itl),
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
    let mut sorted: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(v, w)| v.is_finite() && *w > 0.0)
        .collect();
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
    fn a_reversal_inside_the_window_is_a_flap() {
        let mut r = Recorder::new(Slo::default(), 60.0, 60.0, None);
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
        let mut r = Recorder::new(Slo::default(), 60.0, 60.0, None);
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
        let mut r = Recorder::new(Slo::default(), 60.0, 60.0, Some(4));
        let v = BTreeMap::from([("server".to_string(), 4)]);
        r.span(0.0, 10.0, 4, false, &v, &v);
        r.span(10.0, 25.0, 5, false, &v, &v);
        let (summary, _) = r.finish(25.0, &[]);
        assert_eq!(summary.totals.above_budget_seconds, 15.0);
        let mut unlimited = Recorder::new(Slo::default(), 60.0, 60.0, None);
        unlimited.span(0.0, 10.0, 50, false, &v, &v);
        assert_eq!(
            unlimited.finish(10.0, &[]).0.totals.above_budget_seconds,
            0.0
        );
    }
}
