//! `mds simulate --frontier`: every policy at its best. A cost is only comparable at equal
//! attainment, so each policy's one sizing knob (the one its users tune: our per-replica
//! capacity, a request target, a KV-usage target or threshold, the SLA targets; `roster::Knob`)
//! is swept on the same world, and per attainment tier the cheapest GPU-hours that reaches it
//! is reported, with the knob value that did, against Oracle B sized from the engine's knee at
//! that tier.
//!
//! The search: a geometric grid of factors on each policy's knob (1 is the setting the
//! scaler's capacity gives it), then, per tier, each gap between a trial that reaches the tier
//! and the next trial in the cheaper direction that does not is halved (geometrically) a few
//! times, when something cheaper than the best so far can lie in it (attainment need not fall
//! monotonically with the knob). Every trial is a whole run with the production code; trials
//! are independent, run on every job, and identical trials (the same scaler spec, or the same
//! peer and factor) run once. The result is the same for a seed whatever the job count.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::capacity::{Curve, Curves, Knee};
use crate::compare::{self, Case, Contender};
use crate::peers::Targets;
use crate::peers::file::PeerFile;
use crate::roster::{self, Knob, PeerName};
use crate::run::{self, Bounds, RunReport};
use crate::{SimError, suggest, tune};

mod search;

use search::{Searched, search_rounds};

/// Default attainment tiers, percent.
pub const DEFAULT_TIERS: [f64; 3] = [90.0, 95.0, 99.0];

/// The policies a frontier runs when none are named: our three algorithms, the tuned scaler
/// and one of each peer (the quirk variants run when named).
pub const DEFAULT_PEERS: [PeerName; 8] = [
    PeerName::Hpa,
    PeerName::KnativeKpa,
    PeerName::AibrixKpa,
    PeerName::AibrixApa,
    PeerName::AibrixKpaQueue,
    PeerName::Dynamo,
    PeerName::Wva,
    PeerName::StaticPeak,
];

/// The factors tried on every knob first: geometric from `min` to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Grid {
    pub min: f64,
    pub max: f64,
    pub points: usize,
}

impl Default for Grid {
    fn default() -> Self {
        Grid {
            min: 0.25,
            max: 8.0,
            points: 6,
        }
    }
}

impl Grid {
    /// `MIN..MAX` or `MIN..MAX:POINTS`, factors on each policy's knob.
    pub fn parse(text: &str) -> Result<Grid, String> {
        let (range, points) = match text.split_once(':') {
            Some((range, points)) => (
                range,
                points
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| format!("{points:?} is not a whole number of points"))?,
            ),
            None => (text, Grid::default().points),
        };
        let Some((min, max)) = range.split_once("..") else {
            return Err("a grid is MIN..MAX or MIN..MAX:POINTS, factors on each policy's knob, as in 0.25..8:11".into());
        };
        let factor = |v: &str| -> Result<f64, String> {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or_else(|| format!("{v:?} is not a positive factor"))
        };
        let grid = Grid {
            min: factor(min)?,
            max: factor(max)?,
            points,
        };
        grid.check()?;
        Ok(grid)
    }

    /// A grid brackets a tier only with two factors or more, the smaller first.
    pub fn check(&self) -> Result<(), String> {
        if self.points < 2 || self.points > 64 || self.min >= self.max {
            return Err("a grid that brackets a tier needs MIN < MAX and 2 to 64 points".into());
        }
        Ok(())
    }

    pub fn factors(&self) -> Vec<f64> {
        let n = self.points.max(2);
        (0..n)
            .map(|i| {
                let f = self.min * (self.max / self.min).powf(i as f64 / (n - 1) as f64);
                round_factor(f)
            })
            .collect()
    }
}

/// Factors to four significant digits, so that they print and key exactly.
fn round_factor(f: f64) -> f64 {
    let digits = 3 - f.log10().floor() as i32;
    let scale = 10f64.powi(digits);
    (f * scale).round() / scale
}

/// One policy of the frontier.
#[derive(Clone, Debug, PartialEq)]
pub enum Policy {
    /// One of our algorithms configured from the scaler's capacity (`mds-tokenthroughput`...).
    Ours(String),
    /// The scaler as given, tuned by `--suggest`: a labelled row of its own.
    Tuned,
    Peer(PeerName),
    /// A team's own autoscaler from its file (`--peer`), swept over its targets; factor 1 is
    /// the file as written and is always tried.
    File(Arc<PeerFile>),
}

impl Policy {
    pub fn name(&self) -> String {
        match self {
            Policy::Ours(name) => name.clone(),
            Policy::Tuned => "mds --suggest".into(),
            Policy::Peer(p) => p.as_str().into(),
            Policy::File(f) => f.name.clone(),
        }
    }

    pub fn knob(&self) -> Knob {
        match self {
            Policy::Ours(name) if name == "mds-proportional" => Knob::RequestTarget,
            Policy::Ours(_) | Policy::Tuned => Knob::Capacity,
            Policy::Peer(p) => p.knob(),
            Policy::File(_) => Knob::FileTargets,
        }
    }

    pub fn ours(&self) -> bool {
        !matches!(self, Policy::Peer(_) | Policy::File(_))
    }
}

/// One setting tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trial {
    /// The factor on the policy's knob.
    pub factor: f64,
    /// The knob's value at it, in words (`server 5600 tokens/s`, `KV target 0.62`).
    pub knob: String,
    pub attainment: Option<f64>,
    /// By the other ITL reading.
    pub attainment_other: Option<f64>,
    pub window_attainment: Option<f64>,
    pub gpu_hours: f64,
    pub scale_actions_per_hour: f64,
    pub flaps: u32,
    pub violations: usize,
    /// Provisioning, reaction, churn and forecast metrics at the run's goal (module
    /// `metrics`).
    pub metrics: Option<crate::metrics::Metrics>,
    /// What decided the counts rather than the knob, when something did in over half the
    /// passes (a bound held throughout, a guard, the quota; module `decided`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

impl Trial {
    fn reaches(&self, tier: f64) -> bool {
        self.violations == 0 && self.attainment.is_some_and(|a| a + 1e-12 >= tier)
    }
}

/// The cheapest trial reaching a tier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub trial: Trial,
    /// GPU-hours over the tier's Oracle B.
    pub vs_oracle_b: Option<f64>,
    /// The cheapest trial is at the grid's cheap end: the true cheapest may lie beyond it.
    pub at_grid_edge: bool,
}

/// One policy's frontier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyFrontier {
    pub policy: String,
    pub ours: bool,
    pub knob: Knob,
    /// Every trial, by factor.
    pub trials: Vec<Trial>,
    /// Per tier (in the frontier's order): the cheapest trial that reaches it.
    pub tiers: Vec<Option<Point>>,
    /// The trial with the best attainment (ties: the cheapest).
    pub best: Option<Trial>,
}

/// A tier's bound.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierBounds {
    /// The tier, 0..1.
    pub tier: f64,
    pub knees: BTreeMap<String, Knee>,
    pub bounds: Option<Bounds>,
}

impl TierBounds {
    /// Each role's knee at the tier in words (`server 5404 tokens/s, ...`); `None` without one.
    pub fn knee_words(&self) -> Option<String> {
        (!self.knees.is_empty()).then(|| {
            self.knees
                .iter()
                .map(|(role, k)| format!("{role} {:.0} tokens/s", k.tokens_per_second))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }
}

/// The whole frontier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Frontier {
    /// What every run shared (the world, the SLO, the seed), from the first run.
    pub inputs: run::Inputs,
    pub cold_start_seconds: f64,
    pub grid: Grid,
    pub tiers: Vec<TierBounds>,
    /// Requests no scale serves within the SLO, and their share of the trace.
    pub unattainable: f64,
    pub unattainable_share: f64,
    /// Each role's attainment against its load per replica, measured on one pinned replica.
    pub curves: BTreeMap<String, Curves>,
    /// The load's mixes the oracles size windows by (module `mix`): one entry per group.
    pub mix_groups: Vec<MixGroup>,
    /// Each role's maxReplicas, which bounds every policy.
    pub max_replicas: BTreeMap<String, i32>,
    /// The per-replica targets the factors multiply.
    pub targets: compare::TargetsReport,
    pub policies: Vec<PolicyFrontier>,
    /// Runs made (identical trials run once).
    pub runs: usize,
}

/// One mix group of the load, as the JSON and the page show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixGroup {
    /// Requests in it.
    pub requests: usize,
    /// Its ten-minute windows' starts, seconds.
    pub windows: Vec<f64>,
    pub mean_prompt_tokens: f64,
    pub mean_output_tokens: f64,
}

/// The groups of `mix` as the frontier reports them.
pub fn mix_groups(mix: &crate::mix::MixGroups) -> Vec<MixGroup> {
    (0..mix.members.len())
        .map(|g| MixGroup {
            requests: mix.members[g].len(),
            windows: mix
                .window_group
                .iter()
                .enumerate()
                .filter(|(_, wg)| **wg == g)
                .map(|(w, _)| w as f64 * crate::mix::WINDOW_SECONDS)
                .collect(),
            mean_prompt_tokens: mix.means[g].0,
            mean_output_tokens: mix.means[g].1,
        })
        .collect()
}

/// How the search goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// Tiers, 0..1, ascending.
    pub tiers: Vec<f64>,
    pub grid: Grid,
    /// Halvings of each tier's bracket.
    pub refinements: usize,
    pub threads: usize,
}

/// What identifies a run: identical keys give identical runs.
fn key(contender: &Contender) -> String {
    match contender {
        Contender::Mds { scaler, .. } => serde_json::to_string(&scaler.spec).unwrap_or_default(),
        Contender::Peer { name, factor } => format!("{}@{factor}", name.as_str()),
        Contender::File { peer, factor } => format!("file {}@{factor}", peer.name),
    }
}

/// The knob's value at `factor`, in words.
fn knob_text(policy: &Policy, targets: &Targets, factor: f64) -> String {
    let each = |m: &BTreeMap<String, f64>, unit: &str, digits: usize| -> String {
        m.iter()
            .map(|(role, v)| format!("{role} {:.*} {unit}", digits, v * factor))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Policy::File(file) = policy {
        return file.knob_text(factor);
    }
    match policy.knob() {
        Knob::FileTargets => String::new(),
        Knob::Capacity => each(&targets.tokens_per_second, "tokens/s", 0),
        Knob::RequestTarget => each(&targets.queue_depth, "requests", 1),
        Knob::KvTarget => format!("KV target {:.2}", roster::kv_target(factor)),
        Knob::KvThreshold => format!("KV threshold {:.2}", roster::kv_threshold(factor)),
        Knob::SlaTargets => format!(
            "SLA {:.0} ms / {:.0} ms",
            targets.ttft_seconds * factor * 1000.0,
            targets.itl_seconds * factor * 1000.0
        ),
    }
}

/// The policy at `factor` as a contender of a comparison.
fn contender(
    case: &Case,
    policy: &Policy,
    targets: &Targets,
    factor: f64,
) -> Result<Contender, SimError> {
    match policy {
        Policy::Ours(name) => {
            compare::algorithms(case.scaler, case.target, &targets.scaled(factor))?
                .into_iter()
                .find(|c| c.name() == *name)
                .ok_or_else(|| SimError::Input(format!("no algorithm {name}")))
        }
        Policy::Tuned => {
            let (scaler, _) = suggest::scaled(case.scaler, factor)?;
            Ok(Contender::Mds {
                name: policy.name(),
                scaler: Box::new(scaler),
            })
        }
        Policy::Peer(name) => Ok(Contender::Peer {
            name: *name,
            factor,
        }),
        Policy::File(peer) => Ok(Contender::File {
            peer: peer.clone(),
            factor,
        }),
    }
}

/// Whether `policy` has a knob to sweep for this scaler.
pub fn check_policy(case: &Case, policy: &Policy) -> Result<(), String> {
    if *policy == Policy::Tuned && !suggest::has_target(case.scaler) {
        return Err("the scaler's algorithm gives no per-replica target to sweep (a token capacity or a Proportional request target)".into());
    }
    Ok(())
}

/// The key of the tuned row's tuned trial among the runs.
const TUNED_KEY: &str = "tuned";

/// The tuned row: `--suggest`'s answer at the run's goal, by the same search (module
/// `suggest`), so that the fragment `--suggest` pastes reproduces the row. Its factor trials at
/// or below the knee become the row's trials; the tuned setting, when tuning kept a change, one
/// more at the chosen factor. `None` when the row is not asked for or nothing was tuned.
fn suggested_row(
    case: &Case,
    policies: &[Policy],
    knees: suggest::Ceiling,
    threads: usize,
    tried: &mut [Vec<(f64, String)>],
    done: &mut BTreeMap<String, RunReport>,
) -> Result<Option<tune::Tuned>, SimError> {
    let Some(i) = policies.iter().position(|p| *p == Policy::Tuned) else {
        return Ok(None);
    };
    let mut found = suggest::search(case, case.options.goal, knees, threads)?;
    // Settings above the knee are never suggested, so they are not the row's either.
    for trial in found.trials.iter_mut().filter(|t| !t.above_knee) {
        if let Some(report) = trial.report.take() {
            let key = format!("suggest@{}", trial.factor);
            done.insert(key.clone(), *report);
            tried[i].push((trial.factor, key));
        }
    }
    let (Some(chosen), Some(mut tuned)) = (found.chosen, found.tuned) else {
        return Ok(None);
    };
    let Some(report) = tuned.report.take() else {
        return Ok(None);
    };
    done.insert(TUNED_KEY.to_string(), report);
    tried[i].push((chosen.factor, TUNED_KEY.to_string()));
    Ok(Some(tuned))
}

/// What one job of the search yields.
enum Out {
    Curve(Option<Curve>),
    Run(Box<Result<RunReport, SimError>>),
}

/// The frontier of `policies` on `case` (module documentation); `progress` hears the share
/// of the first round's runs done.
pub fn frontier(
    case: &Case,
    policies: &[Policy],
    search: &Search,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Frontier, SimError> {
    search.grid.check().map_err(SimError::Input)?;
    for p in policies {
        check_policy(case, p).map_err(|e| SimError::Input(format!("{}: {e}", p.name())))?;
    }
    let (scaler, target, trace, options) = (case.scaler, case.target, &case.trace, case.options);
    let targets = compare::targets_for(scaler, target, trace, options)?;
    let duration = run::run_seconds(trace, options);
    let plan = run::curve_plan(scaler, target, trace, duration);
    let Searched {
        mut done,
        mut tried,
        measured,
    } = search_rounds(case, policies, search, &targets, &plan, progress)?;
    let curves = plan.assemble(measured);
    let knees = suggest::ceiling_of(&curves.whole, target, options.goal);
    let tuned = suggested_row(case, policies, knees, search.threads, &mut tried, &mut done)?;
    measure_at_goal(case, duration, &curves, &mut done);
    let tiers = tier_bounds(case, search, duration, &curves);
    let top = search.grid.factors().last().copied().unwrap_or(1.0);
    let policies = policies
        .iter()
        .zip(&tried)
        .map(|(policy, tried)| {
            let trials = policy_trials(policy, tried, &targets, tuned.as_ref(), &done);
            let points = tier_points(&trials, &tiers, top);
            let best = best_trial(&trials);
            PolicyFrontier {
                policy: policy.name(),
                ours: policy.ours(),
                knob: policy.knob(),
                trials,
                tiers: points,
                best,
            }
        })
        .collect();
    let grader = run::grader(target, trace, options);
    let offered = trace.requests.len().max(1) as f64;
    let inputs = done
        .values()
        .next()
        .map(|r| r.inputs.clone())
        .ok_or_else(|| SimError::Input("the frontier ran nothing".into()))?;
    Ok(Frontier {
        inputs,
        cold_start_seconds: options.cold_start().as_secs_f64(),
        grid: search.grid,
        tiers,
        unattainable: grader.unattainable_count() as f64,
        unattainable_share: grader.unattainable_count() as f64 / offered,
        mix_groups: mix_groups(&curves.mix),
        curves: curves.whole,
        max_replicas: scaler
            .spec
            .roles
            .iter()
            .map(|r| (r.name.clone(), r.max_replicas))
            .collect(),
        targets: compare::TargetsReport {
            queue_depth: targets.queue_depth.clone(),
            tokens_per_second: targets.tokens_per_second.clone(),
        },
        policies,
        runs: done.len(),
    })
}

/// Every trial measured against the knees at the run's goal: each report gets the goal's
/// bounds, then its metrics.
fn measure_at_goal(
    case: &Case,
    duration: f64,
    curves: &run::Measured,
    done: &mut BTreeMap<String, RunReport>,
) {
    let (scaler, target, trace, options) = (case.scaler, case.target, &case.trace, case.options);
    let at_goal = run::bounds(
        scaler,
        target,
        trace,
        options,
        duration,
        curves,
        options.goal,
    );
    for report in done.values_mut() {
        report.bounds.clone_from(&at_goal);
        run::measure(report, scaler, target, trace, options);
    }
}

/// Each tier's bounds and knees, in the search's order (no bounds: no knees).
fn tier_bounds(
    case: &Case,
    search: &Search,
    duration: f64,
    curves: &run::Measured,
) -> Vec<TierBounds> {
    let (scaler, target, trace, options) = (case.scaler, case.target, &case.trace, case.options);
    search
        .tiers
        .iter()
        .map(|&tier| {
            let bounds = run::bounds(scaler, target, trace, options, duration, curves, tier);
            TierBounds {
                tier,
                knees: bounds.as_ref().map(|b| b.knees.clone()).unwrap_or_default(),
                bounds,
            }
        })
        .collect()
}

/// A policy's trials by factor, each with its knob in words; the tuned trial's knob also
/// names the tuned changes.
fn policy_trials(
    policy: &Policy,
    tried: &[(f64, String)],
    targets: &Targets,
    tuned: Option<&tune::Tuned>,
    done: &BTreeMap<String, RunReport>,
) -> Vec<Trial> {
    let mut trials: Vec<Trial> = tried
        .iter()
        .map(|(factor, k)| {
            let mut knob = knob_text(policy, targets, *factor);
            if k == TUNED_KEY
                && let Some(t) = tuned
            {
                knob = format!("{knob}, tuned: {}", t.changes());
            }
            trial(&done[k], *factor, knob)
        })
        .collect();
    trials.sort_by(|a, b| a.factor.total_cmp(&b.factor));
    trials
}

/// Per tier, the cheapest of `trials` that reaches it (`cheapest`), against the tier's
/// Oracle B (when positive), flagged when it lies at the grid's cheap end (`top`).
fn tier_points(trials: &[Trial], tiers: &[TierBounds], top: f64) -> Vec<Option<Point>> {
    tiers
        .iter()
        .map(|t| {
            cheapest(trials, t.tier).map(|c| Point {
                vs_oracle_b: t
                    .bounds
                    .as_ref()
                    .and_then(|b| b.oracle_b_gpu_hours)
                    .filter(|b| *b > 0.0)
                    .map(|b| c.gpu_hours / b),
                at_grid_edge: c.factor >= top,
                trial: c.clone(),
            })
        })
        .collect()
}

/// The trial without violations with the best attainment (ties: the cheapest; among equals,
/// the last).
fn best_trial(trials: &[Trial]) -> Option<Trial> {
    trials
        .iter()
        .filter(|t| t.violations == 0)
        .max_by(|a, b| {
            a.attainment
                .unwrap_or(0.0)
                .total_cmp(&b.attainment.unwrap_or(0.0))
                .then(b.gpu_hours.total_cmp(&a.gpu_hours))
        })
        .cloned()
}

/// A run as a trial of the frontier.
fn trial(report: &RunReport, factor: f64, knob: String) -> Trial {
    let row = &compare::rows(std::slice::from_ref(report), None)[0];
    Trial {
        factor,
        knob,
        attainment: row.attainment,
        attainment_other: row.attainment_other,
        window_attainment: row.window_attainment,
        gpu_hours: row.gpu_hours,
        scale_actions_per_hour: row.scale_actions_per_hour,
        flaps: row.flaps,
        violations: row.violations,
        metrics: report.metrics.clone(),
        held: report
            .decided
            .iter()
            .find(|s| s.ends_with("throughout"))
            .cloned(),
    }
}

/// The trial with the fewest GPU-hours among those reaching `tier` (ties: the higher
/// attainment, then the larger factor).
fn cheapest(trials: &[Trial], tier: f64) -> Option<&Trial> {
    trials.iter().filter(|t| t.reaches(tier)).min_by(|a, b| {
        a.gpu_hours
            .total_cmp(&b.gpu_hours)
            .then(
                b.attainment
                    .unwrap_or(0.0)
                    .total_cmp(&a.attainment.unwrap_or(0.0)),
            )
            .then(b.factor.total_cmp(&a.factor))
    })
}

#[cfg(test)]
mod tests {
    use super::search::brackets;
    use super::*;

    #[test]
    fn a_grid_parses_and_one_that_cannot_bracket_a_tier_is_refused() {
        assert_eq!(
            Grid::parse("0.25..8:11"),
            Ok(Grid {
                min: 0.25,
                max: 8.0,
                points: 11
            })
        );
        assert_eq!(Grid::parse("0.5..2").unwrap().points, 6);
        for bad in [
            "8..0.25", "1..1", "0.5..2:1", "x..2", "0..2", "0.5", "0.5..2:x",
        ] {
            assert!(Grid::parse(bad).is_err(), "{bad}");
        }
        let f = Grid::default().factors();
        assert_eq!((f.len(), f[0], f[2], f[5]), (6, 0.25, 1.0, 8.0));
    }

    #[test]
    fn the_cheapest_trial_reaching_a_tier_and_the_bracket_to_halve() {
        let t = |factor: f64, attainment: f64, gpu_hours: f64| Trial {
            factor,
            knob: String::new(),
            attainment: Some(attainment),
            attainment_other: None,
            window_attainment: None,
            gpu_hours,
            scale_actions_per_hour: 0.0,
            flaps: 0,
            violations: 0,
            metrics: None,
            held: None,
        };
        let trials = vec![
            t(0.5, 1.0, 4.0),
            t(1.0, 0.97, 3.0),
            t(2.0, 0.93, 2.0),
            t(4.0, 0.6, 1.0),
        ];
        assert_eq!(cheapest(&trials, 0.95).unwrap().factor, 1.0);
        assert_eq!(cheapest(&trials, 0.90).unwrap().factor, 2.0);
        assert!(cheapest(&trials, 0.999).unwrap().factor == 0.5);
        assert!(cheapest(&trials, 1.01).is_none());
        assert_eq!(brackets(&trials, 0.95), [round_factor(2f64.sqrt())]);
        assert_eq!(brackets(&trials, 0.90), [round_factor(8f64.sqrt())]);
        // Not monotonic: the largest setting reaches the tier (held by a guard) and is the
        // cheapest so far, but the gap after the first reaching one may hold cheaper ones.
        let bumpy = vec![
            t(1.0, 0.97, 3.0),
            t(2.0, 0.93, 1.8),
            t(4.0, 0.95, 2.1),
            t(8.0, 0.95, 2.0),
        ];
        assert_eq!(cheapest(&bumpy, 0.95).unwrap().factor, 8.0);
        assert_eq!(brackets(&bumpy, 0.95), [round_factor(2f64.sqrt())]);
        // A miss that costs more than the best so far brackets nothing cheaper.
        let dear = vec![t(1.0, 0.97, 1.5), t(2.0, 0.93, 1.8), t(4.0, 0.95, 1.4)];
        assert!(brackets(&dear, 0.95).is_empty());
        let mut broken = t(3.0, 0.99, 1.5);
        broken.violations = 1;
        assert!(
            !broken.reaches(0.9),
            "a run that broke an invariant reaches nothing"
        );
    }
}
