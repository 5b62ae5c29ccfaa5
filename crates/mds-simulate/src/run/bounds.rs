//! The bounds a run is held against: each role's attainment curves and knee (module
//! `capacity`), static peak at the knees, Oracles A and B (module `oracle`), and the metrics
//! a run's passes are measured by against them.

use std::collections::BTreeMap;

use mds_api::ModelDeploymentScaler;
use mds_api::target::{ModelDeployment, RoleKind};
use mds_sim::load::Trace;

use super::{Bounds, RunOptions, RunReport, grader, policy_of};
use crate::capacity::{COUNTS, Curve, Curves, Knee};
use crate::mix::MixGroups;
use crate::oracle::{self, Band, Goal, RoleDemand};
use crate::slo::Grader;

/// The curves a run's roles need: per role kind that serves requests, each count of
/// replicas in [`COUNTS`] up to the largest maximum of the roles of that kind, on the whole
/// load's mix and, when its mix shifts (module `mix`), on each group's.
pub struct CurvePlan {
    /// Roles by kind.
    roles: BTreeMap<String, (RoleKind, Vec<String>)>,
    /// The load's mix groups.
    pub mix: MixGroups,
    /// (a mix group, or `None` for the whole load; kind; replicas) to measure.
    pub measure: Vec<(Option<usize>, RoleKind, u32)>,
}

/// Each role's curves on the whole load's mix (for the knees) and on each mix group's (for
/// the oracles; empty when the load has one mix).
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub whole: BTreeMap<String, Curves>,
    pub groups: Vec<BTreeMap<String, Curves>>,
    pub mix: MixGroups,
}

/// What [`curves`] measures for the scaler's roles on `trace` over `duration` seconds.
pub fn curve_plan(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    duration: f64,
) -> CurvePlan {
    let mut roles: BTreeMap<String, (RoleKind, Vec<String>)> = BTreeMap::new();
    let mut most: BTreeMap<String, i32> = BTreeMap::new();
    if let Ok(policy) = policy_of(scaler, target) {
        for role in &policy.roles {
            let kind = role.kind.as_str().to_string();
            roles
                .entry(kind.clone())
                .or_insert_with(|| (role.kind.clone(), Vec::new()))
                .1
                .push(role.name.clone());
            let m = most.entry(kind).or_insert(1);
            *m = (*m).max(role.max);
        }
    }
    let per_kind: Vec<(RoleKind, u32)> = roles
        .iter()
        .flat_map(|(name, (kind, _))| {
            let most = most.get(name).copied().unwrap_or(1).max(1) as u32;
            let mut counts: Vec<u32> = COUNTS.iter().copied().filter(|&n| n <= most).collect();
            // The largest count beyond the list's is measured too, so no count reads a
            // curve of fewer replicas than it holds.
            if counts.last().is_some_and(|&n| n < most) && most <= 2 * COUNTS[COUNTS.len() - 1] {
                counts.push(most);
            }
            counts.into_iter().map(move |n| (kind.clone(), n))
        })
        .collect();
    let mix = MixGroups::of(trace, duration);
    let groups: Vec<Option<usize>> = if mix.is_single() {
        vec![None]
    } else {
        std::iter::once(None)
            .chain((0..mix.members.len()).map(Some))
            .collect()
    };
    let measure = groups
        .iter()
        .flat_map(|g| per_kind.iter().map(move |(k, n)| (*g, k.clone(), *n)))
        .collect();
    CurvePlan {
        roles,
        mix,
        measure,
    }
}

impl CurvePlan {
    /// One measurement of the plan.
    pub fn measure_one(
        &self,
        index: usize,
        target: &ModelDeployment,
        trace: &Trace,
        options: &RunOptions,
    ) -> Option<Curve> {
        let (group, kind, replicas) = self.measure.get(index)?;
        let subset = group.map(|g| self.mix.members[g].as_slice());
        let grader = grader(target, trace, options);
        match options.engine {
            super::EngineModel::Request => crate::capacity::curve(
                trace,
                subset,
                kind,
                &options.profile.request,
                &grader,
                *replicas,
                options.seed,
            ),
            super::EngineModel::Fluid => crate::capacity::fluid::curve(
                trace,
                subset,
                kind,
                &options.profile.fluid,
                &grader,
                *replicas,
                options.seed,
            ),
        }
    }

    /// Each role's curves from the plan's measurements, in its order.
    pub fn assemble(&self, measured: Vec<Option<Curve>>) -> Measured {
        // (group, kind) -> curves by count.
        let mut by: BTreeMap<(Option<usize>, String), Vec<Curve>> = BTreeMap::new();
        for ((group, kind, _), curve) in self.measure.iter().zip(measured) {
            if let Some(c) = curve {
                by.entry((*group, kind.as_str().to_string()))
                    .or_default()
                    .push(c);
            }
        }
        let of_group = |group: Option<usize>| -> BTreeMap<String, Curves> {
            self.roles
                .iter()
                .filter_map(|(kind, (_, names))| {
                    let curves = Curves {
                        by_count: by.get(&(group, kind.clone()))?.clone(),
                    };
                    Some(names.iter().map(move |n| (n.clone(), curves.clone())))
                })
                .flatten()
                .collect()
        };
        let groups = if self.mix.is_single() {
            Vec::new()
        } else {
            (0..self.mix.members.len())
                .map(|g| of_group(Some(g)))
                .collect()
        };
        Measured {
            whole: of_group(None),
            groups,
            mix: self.mix.clone(),
        }
    }
}

impl CurvePlan {
    /// The plan without the mix groups' curves: the whole load's only (for the knees).
    pub fn whole_only(mut self) -> CurvePlan {
        self.measure.retain(|(group, _, _)| group.is_none());
        self.mix = MixGroups::single(&self.mix);
        self
    }
}

/// Each role's attainment curves on `trace` (module `capacity`), for the roles the scaler
/// bounds whose kind serves requests, measured `threads` at a time; on each mix group's
/// requests too unless `whole_only`.
pub fn curves(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    threads: usize,
) -> Measured {
    measure_plan(
        curve_plan(scaler, target, trace, super::run_seconds(trace, options)),
        target,
        trace,
        options,
        threads,
    )
}

/// Each role's curves on the whole load's mix only (for the knees).
pub fn whole_curves(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    threads: usize,
) -> BTreeMap<String, Curves> {
    let plan = curve_plan(scaler, target, trace, super::run_seconds(trace, options));
    measure_plan(plan.whole_only(), target, trace, options, threads).whole
}

fn measure_plan(
    plan: CurvePlan,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    threads: usize,
) -> Measured {
    let jobs: Vec<crate::jobs::Job<'_, Option<Curve>>> = (0..plan.measure.len())
        .map(|i| {
            let plan = &plan;
            Box::new(move || plan.measure_one(i, target, trace, options)) as crate::jobs::Job<'_, _>
        })
        .collect();
    let measured = crate::jobs::run(threads, jobs, &|_| {});
    plan.assemble(measured)
}

/// Requests per bin of `bin` seconds that some scale serves within the SLO, over `duration`.
fn attainable_per_bin(grader: &Grader, trace: &Trace, duration: f64, bin: f64) -> Vec<f64> {
    let bins = (duration / bin).ceil().max(1.0) as usize;
    let mut out = vec![0.0; bins];
    for (id, r) in trace.requests.iter().enumerate() {
        if !grader.unattainable(id as u64) {
            out[((r.at_seconds / bin) as usize).min(bins - 1)] += 1.0;
        }
    }
    out
}

/// The bounds at attainment `goal` over `duration` seconds: static peak at each role's knee,
/// Oracle A and B the cheapest replicas per bin that reach the goal on the roles' curves.
pub fn bounds(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    duration: f64,
    measured: &Measured,
    goal: f64,
) -> Option<Bounds> {
    let policy = policy_of(scaler, target).ok()?;
    let curves = &measured.whole;
    if curves.is_empty() {
        return None;
    }
    let knees: BTreeMap<String, Knee> = curves
        .iter()
        .filter_map(|(role, c)| Some((role.clone(), c.one()?.knee(goal)?)))
        .collect();
    // Static peak at the knee; a role no load serves at the goal needs its maximum.
    let capacities = curves
        .keys()
        .map(|role| {
            let knee = knees.get(role).map_or(0.0, |k| k.tokens_per_second);
            (role.clone(), knee)
        })
        .collect();
    let demands = role_demands(&policy, target, trace, &capacities, options, duration, BIN);
    let roles: Vec<RoleDemand> = demands.iter().map(|(_, d)| d.clone()).collect();
    let bands = bands(&policy);
    let budget = crate::peer_drive::gpu_budget(target, &options.quota);
    let cold = options.cold_start().as_secs_f64();
    let joint = oracle::joint(&roles, &bands, budget, BIN, cold);
    // The oracles read demand over longer bins: queueing absorbs a burst shorter than one,
    // which a steady load per bin cannot show.
    let demands = role_demands(
        &policy,
        target,
        trace,
        &capacities,
        options,
        duration,
        ORACLE_BIN,
    );
    let roles: Vec<RoleDemand> = demands.iter().map(|(_, d)| d.clone()).collect();
    // Each bin on the curves of its own mix (module `mix`), or of the whole load's.
    let role_curves = if measured.groups.is_empty() {
        oracle::BinCurves::one(of_roles(&demands, curves))
    } else {
        let bins = roles.first().map_or(0, |r| r.tokens_per_second.len());
        oracle::BinCurves {
            groups: measured
                .groups
                .iter()
                .map(|set| of_roles(&demands, set))
                .collect(),
            bin_group: (0..bins)
                .map(|b| measured.mix.group_at((b as f64 + 0.5) * ORACLE_BIN))
                .collect(),
        }
    };
    let grader = grader(target, trace, options);
    let attainable = attainable_per_bin(&grader, trace, duration, ORACLE_BIN);
    let oracles = oracle::oracles(
        &roles,
        &role_curves,
        &bands,
        budget,
        ORACLE_BIN,
        cold,
        Goal {
            tier: goal,
            attainable: &attainable,
            total: trace.requests.len() as f64,
            duration,
        },
    );
    // The last bin runs past the end of the run: its overhang is not paid.
    let hours = |bounds: &[oracle::Bound], bin: f64| {
        bounds
            .iter()
            .zip(&roles)
            .map(|(b, role)| {
                let overhang = (b.replicas.len() as f64 * bin - duration).max(0.0);
                let last = b.replicas.last().copied().unwrap_or(0).max(0);
                b.gpu_hours - f64::from(last as u32 * role.gpus_per_replica) * overhang / 3600.0
            })
            .sum::<f64>()
    };
    Some(Bounds {
        goal,
        knees,
        static_peak_gpu_hours: hours(&joint.static_peak, BIN),
        oracle_a_gpu_hours: oracles.as_ref().map(|(a, _)| hours(a, ORACLE_BIN)),
        oracle_b_gpu_hours: oracles.as_ref().map(|(_, b)| hours(b, ORACLE_BIN)),
    })
}

/// The curves of each role of `demands`, in its order, from `set`.
fn of_roles<'c>(
    demands: &[(String, RoleDemand)],
    set: &'c BTreeMap<String, Curves>,
) -> Vec<Option<&'c Curves>> {
    demands.iter().map(|(role, _)| set.get(role)).collect()
}

/// Fills in `report`'s metrics, each role's capacity its knee in `report.bounds`.
pub fn measure(
    report: &mut RunReport,
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
) {
    let Ok(policy) = policy_of(scaler, target) else {
        return;
    };
    let duration = report.inputs.duration_seconds.max(1.0);
    let knees: BTreeMap<String, f64> = report
        .bounds
        .as_ref()
        .map(|b| {
            b.knees
                .iter()
                .map(|(r, k)| (r.clone(), k.tokens_per_second))
                .collect()
        })
        .unwrap_or_default();
    let demands = role_demands(&policy, target, trace, &knees, options, duration, BIN);
    let order: Vec<String> = policy.roles.iter().map(|r| r.name.clone()).collect();
    let bands = bands(&policy);
    let input = crate::metrics::Input {
        bin: BIN,
        duration,
        roles: demands
            .iter()
            .filter_map(|(role, d)| {
                Some(crate::metrics::RoleInput {
                    role,
                    demand: &d.tokens_per_second,
                    knee: *knees.get(role)?,
                })
            })
            .collect(),
        order: &order,
        bands: &bands,
    };
    report.metrics = Some(crate::metrics::of(
        &input,
        &report.summary.timeline,
        &report.passes,
    ));
}

/// Bins of static peak (whose busiest minute is six of them), seconds.
pub(crate) const BIN: f64 = 10.0;

/// Bins of the oracles' demand, seconds.
pub(crate) const ORACLE_BIN: f64 = 60.0;

/// Each policy role's demand in bins of `bin` seconds over `duration` seconds, at the given
/// per-replica capacities in tokens/s (no demand for a role without one).
pub(crate) fn role_demands(
    policy: &mds_planner::Policy,
    target: &ModelDeployment,
    trace: &Trace,
    capacities: &BTreeMap<String, f64>,
    options: &RunOptions,
    duration: f64,
    bin: f64,
) -> Vec<(String, RoleDemand)> {
    policy
        .roles
        .iter()
        .map(|role| {
            let on_target = target.spec.roles.iter().find(|r| r.name == role.name);
            let size = on_target.map_or(1, |r| r.size().clamp(1, 64) as u32);
            // A count the target starts outside the bounds stays there (BoundsConflict holds
            // our plan until a person moves one or the other), so a bound must allow it.
            let initial = on_target.map_or(role.min, |r| r.replicas().max(1));
            let capacity = capacities.get(&role.name).copied();
            let demand = RoleDemand {
                tokens_per_second: match capacity {
                    Some(_) => oracle::demand(trace, &role.kind, bin, duration),
                    None => vec![0.0; (duration / bin).ceil().max(1.0) as usize],
                },
                capacity: capacity.unwrap_or(1.0),
                min: role.min.min(initial),
                max: role.max.max(initial),
                gpus_per_replica: size * options.profile.gpus_per_pod,
            };
            (role.name.clone(), demand)
        })
        .collect()
}

/// The policy's ratio bands, as the oracles take them.
pub(crate) fn bands(policy: &mds_planner::Policy) -> Vec<Band> {
    policy
        .ratios
        .iter()
        .map(|r| Band {
            numerator: r.numerator,
            denominator: r.denominator,
            min: r.min.map(|d| d.to_f64()),
            max: r.max.map(|d| d.to_f64()),
        })
        .collect()
}
