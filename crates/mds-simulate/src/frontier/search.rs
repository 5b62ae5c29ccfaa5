//! The frontier's search: the grid round on every policy's knob, then the rounds that halve
//! each bracket between a trial that reaches a tier and a cheaper one that does not.

use std::collections::BTreeMap;

use super::{Out, Policy, Search, Trial, cheapest, contender, key, round_factor, trial};
use crate::SimError;
use crate::capacity::Curve;
use crate::compare::{self, Case, Contender};
use crate::jobs::{self, Job};
use crate::peers::Targets;
use crate::run::{self, RunReport};

/// What the search's rounds leave: every distinct run by key, each policy's factors tried
/// with their run's key (in the order first tried), and the engine's curves.
pub(super) struct Searched {
    pub(super) done: BTreeMap<String, RunReport>,
    pub(super) tried: Vec<Vec<(f64, String)>>,
    pub(super) measured: Vec<Option<Curve>>,
}

/// The search's rounds: the grid on every policy's knob, then up to `search.refinements`
/// rounds of the brackets still worth halving (`refinements`), stopping early when none is.
/// Only the first round reports progress; a failed run fails the search, in the batch's order.
pub(super) fn search_rounds(
    case: &Case,
    policies: &[Policy],
    search: &Search,
    targets: &Targets,
    plan: &run::CurvePlan,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Searched, SimError> {
    let mut done: BTreeMap<String, RunReport> = BTreeMap::new();
    let mut tried: Vec<Vec<(f64, String)>> = vec![Vec::new(); policies.len()];
    // The tuned row is `--suggest`'s own search (`suggested_row`), not this grid's.
    let mut wanted: Vec<(usize, f64)> = (0..policies.len())
        .filter(|&i| policies[i] != Policy::Tuned)
        .flat_map(|i| search.grid.factors().into_iter().map(move |f| (i, f)))
        .collect();
    // A team's own file is also run as written, whatever the grid.
    for (i, p) in policies.iter().enumerate() {
        if matches!(p, Policy::File(_)) && !wanted.contains(&(i, 1.0)) {
            wanted.push((i, 1.0));
        }
    }
    let mut measured: Vec<Option<Curve>> = Vec::new();
    for round in 0..=search.refinements {
        let batch = round_batch(case, policies, targets, &wanted, &done, &mut tried)?;
        let jobs = round_jobs(case, targets, plan, &batch, round == 0);
        let silent = |_: f64| {};
        let report: &(dyn Fn(f64) + Sync) = if round == 0 { progress } else { &silent };
        let mut runs = Vec::new();
        for out in jobs::run(search.threads, jobs, report) {
            match out {
                Out::Curve(c) => measured.push(c),
                Out::Run(r) => runs.push(*r),
            }
        }
        for ((k, _), report) in batch.into_iter().zip(runs) {
            done.insert(k, report?);
        }
        if round == search.refinements {
            break;
        }
        wanted = refinements(&tried, &done, &search.tiers);
        if wanted.is_empty() {
            break;
        }
    }
    Ok(Searched {
        done,
        tried,
        measured,
    })
}

/// The contenders a round runs for the `wanted` (policy, factor) pairs: identical trials run
/// once (a key already done or already in the batch is not run again), and each policy
/// notes each factor once in `tried`, with its run's key.
fn round_batch(
    case: &Case,
    policies: &[Policy],
    targets: &Targets,
    wanted: &[(usize, f64)],
    done: &BTreeMap<String, RunReport>,
    tried: &mut [Vec<(f64, String)>],
) -> Result<Vec<(String, Contender)>, SimError> {
    let mut batch: Vec<(String, Contender)> = Vec::new();
    for &(i, factor) in wanted {
        let c = contender(case, &policies[i], targets, factor)?;
        let k = key(&c);
        if !done.contains_key(&k) && !batch.iter().any(|(b, _)| *b == k) {
            batch.push((k.clone(), c));
        }
        if !tried[i].iter().any(|(f, _)| *f == factor) {
            tried[i].push((factor, k));
        }
    }
    Ok(batch)
}

/// A round's jobs: with the first round, the engine's curves (which every tier's knee and
/// bounds read) first; then the batch's runs, in the batch's order.
fn round_jobs<'a>(
    case: &'a Case,
    targets: &'a Targets,
    plan: &'a run::CurvePlan,
    batch: &'a [(String, Contender)],
    first: bool,
) -> Vec<Job<'a, Out>> {
    let (target, trace, options) = (case.target, &case.trace, case.options);
    let mut jobs: Vec<Job<'_, Out>> = Vec::new();
    if first {
        for i in 0..plan.measure.len() {
            jobs.push(Box::new(move || {
                Out::Curve(plan.measure_one(i, target, trace, options))
            }));
        }
    }
    for (_, c) in batch {
        jobs.push(Box::new(move || {
            Out::Run(Box::new(compare::run_one(case, c, targets)))
        }));
    }
    jobs
}

/// The next factors to try: per policy and tier, the geometric middle of each step from a
/// trial that reaches the tier to the next larger factor tried that does not (more than 2 %
/// apart), when the one reaching is the cheapest so far or the one missing costs less than it.
fn refinements(
    tried: &[Vec<(f64, String)>],
    done: &BTreeMap<String, RunReport>,
    tiers: &[f64],
) -> Vec<(usize, f64)> {
    let mut out: Vec<(usize, f64)> = Vec::new();
    for (i, tried) in tried.iter().enumerate() {
        let mut trials: Vec<Trial> = tried
            .iter()
            .map(|(f, k)| trial(&done[k], *f, String::new()))
            .collect();
        trials.sort_by(|a, b| a.factor.total_cmp(&b.factor));
        for &tier in tiers {
            for mid in brackets(&trials, tier) {
                if !out.contains(&(i, mid)) {
                    out.push((i, mid));
                }
            }
        }
    }
    out
}

/// The middles to try for `tier` among `trials` sorted by factor: attainment need not fall
/// monotonically with the knob (a guard can hold a large setting where a middling one flaps),
/// so every step from a trial that reaches the tier to the next larger factor that does not
/// (more than 2 % apart) is a bracket, when the one reaching is the cheapest so far or the one
/// missing costs less than it (something cheaper than the best can lie between).
pub(super) fn brackets(trials: &[Trial], tier: f64) -> Vec<f64> {
    let Some(best) = cheapest(trials, tier) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pair in trials.windows(2) {
        let (reach, miss) = (&pair[0], &pair[1]);
        if !reach.reaches(tier)
            || miss.reaches(tier)
            || miss.factor / reach.factor < 1.02
            || !(std::ptr::eq(reach, best) || miss.gpu_hours < best.gpu_hours)
        {
            continue;
        }
        let mid = round_factor((reach.factor * miss.factor).sqrt());
        if mid > reach.factor && mid < miss.factor {
            out.push(mid);
        }
    }
    out
}
