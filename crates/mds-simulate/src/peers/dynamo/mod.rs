//! A Dynamo-like planner (BASELINES.md section 4): `ai-dynamo/dynamo`'s SLA planner with both
//! its throughput mode and its load mode on, and its GPU budget clamp, defaults pinned from
//! `components/src/dynamo/planner/config/defaults.py` at commit
//! `1ca601557ebf7cf963a3c0a1bcbae45fd2166944`. Re-implemented from the documented behaviour;
//! the submodules name the upstream file each follows.
//!
//! **Predictor.** Upstream's default predictor is ARIMA (`pmdarima.auto_arima`: a stepwise
//! search over ARIMA orders, each fitted by maximum likelihood, then updated incrementally,
//! refitted in `log1p` space when it collapses to `(0, d, 0)`). This baseline replaces it by
//! upstream's Kalman predictor, and the harness runs with Kalman: the order search and the
//! likelihood fit depend on pmdarima's and statsmodels' optimisers, starting points and
//! tolerances, which cannot be reproduced here without re-implementing those libraries, and
//! an approximation would be neither upstream's behaviour nor a named algorithm. `constant`
//! (the last value) is the other choice; `prophet` is not offered either.
//!
//! **Cadence.** [`Peer::decide`] runs every 5 s (the load adjustment interval); every decision
//! at which 180 s (the throughput adjustment interval) have passed since the last throughput
//! step, counting from the first decision, runs a throughput step first. Everything is read
//! from the views handed to `decide` (no separate sampling); the samples are one 15 s scrape
//! late (`through_prometheus`).
//!
//! **Throughput mode**, per 180 s, from the counter increases over the interval summed over the
//! role's replicas ([`series`]; the planner's first read is a baseline, a restarted or new
//! replica counts from 0):
//! - Observed: the request count and OSL (generated tokens per request) from the decode
//!   role(s), the ISL (prompt tokens per request, prefix hits included) from the prefill
//!   role(s), the mean TTFT from the prefill role(s)' histogram, the mean ITL from the decode
//!   role(s)'; a target without one side reads it from the other; a Server role reads all
//!   from itself.
//! - Corrections: `ttft_corr = observed TTFT ÷ expected TTFT`, the expected one being the
//!   profile's TTFT of one prompt of the observed mean ISL on an idle engine (the profiler's
//!   single-request TTFT: its chunks, one step each); `itl_corr = observed ITL ÷ expected
//!   ITL`, the expected one being one decode step of the observed batch (the mean over the
//!   interval's decisions of the mean `running` of the role's ready replicas, at least 1) at
//!   the observed mean context `ISL + OSL/2`. An interval without TTFT (ITL) observations
//!   keeps the previous correction (initially 1).
//! - The predictors take the count, the ISL and the OSL (a NaN, from an interval without
//!   requests, is a 0) and forecast the next interval's; a negative forecast counts as 0.
//! - Prefill replicas = `ceil(reqs × ISL / 180 × min(1, ttft_corr) / prefill_tput_per_gpu /
//!   gpus_per_prefill)`; decode replicas = `ceil(reqs × OSL / 180 / decode_tput_per_gpu(ITL /
//!   itl_corr, ISL + OSL/2) / gpus_per_decode)`, at least `min_endpoint` 1 ([`capacity`]).
//!   Every Prefill role gets the prefill count and every Decode role the decode count; a
//!   Server role gets the larger of the two, computed with its own GPUs (our reading: upstream's
//!   aggregated mode sizes one engine for both TTFT and ITL at once). Encode and unknown roles
//!   are left out. With the load mode on these counts are floors only.
//!
//! **Load mode**, per 5 s and role ([`load`]): every ready replica's mean TTFT and ITL over
//! the last decision interval (histogram increases; none when nothing was observed) feeds
//! one regression per role and latency, TTFT on running plus waiting, ITL on running (the
//! gauges of the same sample). A role is skipped while its ready count differs from its
//! desired count (a scaling in progress). Otherwise each latency votes over the role's ready
//! engines, estimated at their current load: Prefill roles by TTFT, Decode roles by ITL,
//! Server roles by both ([`load::combine`]). Up is +1, down −1; then the throughput floor (if
//! a throughput step has run), then `min_endpoint` 1: `max(vote result or N, floor, 1)`. The
//! floor applies whenever the role is not in progress, also when the vote has no data.
//!
//! **Budget** ([`budget`]), with the scenario's GPU quota as `max_gpus` (no `min_gpus`; `None`
//! disables it): one Prefill and one Decode role go through `proportional_clamp_pair` with
//! `min_endpoint` 1 each; a lone Server role is capped at `floor(max_gpus / g)`; any other
//! layout caps each role in turn at what the quota leaves after the other roles' counts.
//! Roles outside the pair count against the quota at their counts. An infeasible quota
//! (`(0, 0)`, or a cap of 0) then meets the role's `[min, max]` clamp, which raises it to
//! the role's minimum; the world will refuse to admit what does not fit. A role skipped as in
//! progress is written only when the budget changes its count.

pub mod budget;
pub mod capacity;
pub mod load;
pub mod predictor;
pub mod series;
mod throughput;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use mds_api::target::RoleKind;
use mds_sim::profile::Profile;

use self::budget::{Band, Pool, clamp_single, proportional_clamp_pair};
use self::capacity::Capacity;
use self::load::{Engine, Regression, Vote, combine, vote};
use self::predictor::Predictor;
use self::series::Series;
use self::throughput::{Forecast, Interval};
use super::{Lifecycle, Peer, RoleView, Targets, View};

/// The throughput mode's adjustment interval, seconds.
pub const THROUGHPUT_INTERVAL: f64 = 180.0;
/// The load mode's adjustment interval, seconds.
pub const LOAD_INTERVAL: f64 = 5.0;
/// The fewest replicas a role is given (`min_endpoint`).
pub const MIN_ENDPOINT: i32 = 1;

/// The latency objectives, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sla {
    pub ttft_seconds: f64,
    pub itl_seconds: f64,
}

impl Default for Sla {
    /// Upstream's defaults: TTFT 500 ms, ITL 50 ms.
    fn default() -> Self {
        Sla {
            ttft_seconds: 0.5,
            itl_seconds: 0.05,
        }
    }
}

impl Sla {
    pub fn from_targets(targets: &Targets) -> Sla {
        Sla {
            ttft_seconds: targets.ttft_seconds,
            itl_seconds: targets.itl_seconds,
        }
    }
}

/// The Dynamo-like planner (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct DynamoPlanner {
    capacity: Capacity,
    sla: Sla,
    predictor: Predictor,
    consolidation: bool,
    series: Series,
    intervals: BTreeMap<String, Interval>,
    ttft: BTreeMap<String, Regression>,
    itl: BTreeMap<String, Regression>,
    forecasts: BTreeMap<String, Forecast>,
    floors: BTreeMap<String, i32>,
    last_throughput: Option<f64>,
}

impl DynamoPlanner {
    /// A planner profiled from `capacity`; `consolidation` selects `dynamo-consolidation`.
    pub fn new(
        capacity: Capacity,
        sla: Sla,
        predictor: Predictor,
        consolidation: bool,
    ) -> DynamoPlanner {
        DynamoPlanner {
            capacity,
            sla,
            predictor,
            consolidation,
            series: Series::default(),
            intervals: BTreeMap::new(),
            ttft: BTreeMap::new(),
            itl: BTreeMap::new(),
            forecasts: BTreeMap::new(),
            floors: BTreeMap::new(),
            last_throughput: None,
        }
    }

    /// A planner profiled from the engine `profile`, with the SLA of `targets`.
    pub fn from_profile(
        profile: &Profile,
        targets: &Targets,
        predictor: Predictor,
        consolidation: bool,
    ) -> DynamoPlanner {
        DynamoPlanner::new(
            Capacity::from_profile(profile),
            Sla::from_targets(targets),
            predictor,
            consolidation,
        )
    }

    /// The throughput mode's last counts (floors of the load mode), per role.
    pub fn floors(&self) -> &BTreeMap<String, i32> {
        &self.floors
    }

    /// Reads the view's counters into the intervals and regressions.
    fn read(&mut self, view: &View) {
        for role in &view.roles {
            let mut interval = Interval::default();
            let mut running = Vec::new();
            for replica in &role.replicas {
                let Some(sample) = replica.sample.as_ref() else {
                    continue;
                };
                let increase = self.series.increase(&role.name, replica.ordinal, sample);
                interval.increase.add(&increase);
                if replica.state != Lifecycle::Ready {
                    continue;
                }
                running.push(sample.running);
                if let Some(ttft) = increase.mean_ttft() {
                    let regression = self.ttft.entry(role.name.clone()).or_default();
                    regression.observe(sample.queue_depth(), ttft);
                }
                if let Some(itl) = increase.mean_itl() {
                    let regression = self.itl.entry(role.name.clone()).or_default();
                    regression.observe(sample.running, itl);
                }
            }
            if !running.is_empty() {
                interval.running = running.iter().sum::<f64>() / running.len() as f64;
                interval.decisions = 1;
            }
            self.intervals
                .entry(role.name.clone())
                .or_default()
                .add(&interval);
        }
        self.series.retain(view);
    }

    /// The load mode's count for `role`, `None` while a scaling of it is in progress.
    fn load(&self, role: &RoleView) -> Option<i32> {
        let n = role.desired;
        if role.count(Lifecycle::Ready) != n {
            return None;
        }
        let samples: Vec<_> = role.ready_samples().collect();
        let engines = |load: fn(&super::Sample) -> f64| -> Vec<Engine> {
            samples
                .iter()
                .map(|s| Engine {
                    load: load(s),
                    kv_usage: s.kv_usage,
                })
                .collect()
        };
        let none = Regression::default();
        let ttft = || {
            let r = self.ttft.get(&role.name).unwrap_or(&none);
            let engines = engines(|s| s.queue_depth());
            vote(
                r,
                &engines,
                self.sla.ttft_seconds,
                n,
                self.consolidation,
                false,
            )
        };
        let itl = || {
            let r = self.itl.get(&role.name).unwrap_or(&none);
            let engines = engines(|s| s.running);
            vote(
                r,
                &engines,
                self.sla.itl_seconds,
                n,
                self.consolidation,
                true,
            )
        };
        let v = match role.kind {
            RoleKind::Prefill => ttft(),
            RoleKind::Decode => itl(),
            RoleKind::Server => combine(ttft(), itl()),
            _ => return None,
        };
        let proposed = match v {
            Vote::Up => n + 1,
            Vote::Down => n - 1,
            Vote::Hold | Vote::NoData => n,
        };
        let floor = self.floors.get(&role.name).copied().unwrap_or(0);
        Some(proposed.max(floor).max(MIN_ENDPOINT))
    }
}

/// Applies the GPU quota to `counts` (module documentation).
fn apply_budget(view: &View, counts: &mut BTreeMap<String, i32>) {
    let Some(quota) = view.gpu_budget else {
        return;
    };
    let quota = i64::from(quota);
    let gpus = |r: &RoleView| i64::from(r.gpus_per_replica);
    let used = |counts: &BTreeMap<String, i32>, skip: &[&str]| -> i64 {
        view.roles
            .iter()
            .filter(|r| !skip.contains(&r.name.as_str()))
            .map(|r| i64::from(counts[&r.name]) * gpus(r))
            .sum()
    };
    let of = |kind: RoleKind| -> Vec<&RoleView> {
        view.roles.iter().filter(|r| r.kind == kind).collect()
    };
    let (prefill, decode) = (of(RoleKind::Prefill), of(RoleKind::Decode));
    if let ([p], [d]) = (prefill.as_slice(), decode.as_slice()) {
        let rest = used(counts, &[&p.name, &d.name]);
        let pool = |r: &RoleView| Pool {
            count: i64::from(counts[&r.name]),
            gpus_per_replica: gpus(r),
            min_endpoint: i64::from(MIN_ENDPOINT),
        };
        let band = Band {
            min_gpus: None,
            max_gpus: Some((quota - rest).max(0)),
        };
        let (np, nd) = proportional_clamp_pair(pool(p), pool(d), band);
        counts.insert(p.name.clone(), np as i32);
        counts.insert(d.name.clone(), nd as i32);
        return;
    }
    for role in &view.roles {
        let rest = used(counts, &[&role.name]);
        let n = clamp_single(
            i64::from(counts[&role.name]),
            gpus(role),
            Some((quota - rest).max(0)),
        );
        counts.insert(role.name.clone(), n as i32);
    }
}

impl Peer for DynamoPlanner {
    fn name(&self) -> String {
        if self.consolidation {
            "dynamo-consolidation".into()
        } else {
            "dynamo".into()
        }
    }

    fn interval(&self) -> f64 {
        LOAD_INTERVAL
    }

    fn through_prometheus(&self) -> bool {
        true
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        self.read(view);
        let last = *self.last_throughput.get_or_insert(view.t);
        // A 1 ms slack for the 5 s grid's floating-point sums.
        if view.t - last >= THROUGHPUT_INTERVAL - 1e-3 {
            self.throughput(view);
            self.last_throughput = Some(view.t);
        }
        let mut decided = BTreeMap::new();
        let mut counts = BTreeMap::new();
        for role in &view.roles {
            let n = self.load(role);
            if let Some(n) = n {
                decided.insert(role.name.clone(), n);
            }
            counts.insert(role.name.clone(), n.unwrap_or(role.desired));
        }
        apply_budget(view, &mut counts);
        view.roles
            .iter()
            .filter(|r| decided.contains_key(&r.name) || counts[&r.name] != r.desired)
            .map(|r| (r.name.clone(), r.clamp(counts[&r.name])))
            .collect()
    }
}
