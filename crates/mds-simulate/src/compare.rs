//! `mds simulate --compare`: the scaler under test (or each of our three algorithms) and every
//! peer on the same world, trace, seed and actuator, one table. Runs are independent, so they
//! spread over the machine's cores; the table is in a fixed order whatever finishes first.

use std::collections::BTreeMap;
use std::sync::Arc;

use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use serde::Serialize;
use serde_json::json;

use crate::jobs::{self, Job};
use crate::peers::file::PeerFile;
use crate::roster::{self, PeerName};
use crate::run::{self, Bounds, RunOptions, RunReport};
use crate::slo::ItlReading;
use crate::targets;
use crate::{ScaledBy, SimError, peers::Targets};

/// One policy of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Contender {
    /// Our scaler, as given or with another algorithm, named for the table.
    Mds {
        name: String,
        scaler: Box<ModelDeploymentScaler>,
    },
    /// A peer, its one sizing knob at `factor` times its setting from the scaler's capacity
    /// (1: as configured; module `roster`).
    Peer { name: PeerName, factor: f64 },
    /// A team's own autoscaler from its file (`--peer`), its targets at `factor` times what
    /// the file says (1: as written).
    File { peer: Arc<PeerFile>, factor: f64 },
}

impl Contender {
    /// A peer as configured from the scaler's capacity.
    pub fn peer(name: PeerName) -> Contender {
        Contender::Peer { name, factor: 1.0 }
    }

    pub fn name(&self) -> String {
        match self {
            Contender::Mds { name, .. } => name.clone(),
            Contender::Peer { name, .. } => name.as_str().to_string(),
            Contender::File { peer, .. } => peer.name.clone(),
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub policy: String,
    /// SLO attainment as the SLO reads ITL, and by the other reading.
    pub attainment: Option<f64>,
    pub attainment_other: Option<f64>,
    pub window_attainment: Option<f64>,
    pub ttft_p95_seconds: Option<f64>,
    pub itl_p95_seconds: Option<f64>,
    pub gpu_hours: f64,
    pub vs_oracle_b: Option<f64>,
    pub vs_hpa: Option<f64>,
    pub scale_actions_per_hour: f64,
    pub flaps: u32,
    pub above_budget_seconds: f64,
    pub unadmitted_seconds: f64,
    /// Ready capacity over demand at the knee, minutes in deficit, mean seconds to cover a
    /// demand step, Σ|Δreplicas| (module `metrics`).
    pub over_provisioning: Option<f64>,
    pub deficit_minutes: Option<u32>,
    pub mean_reaction_seconds: Option<f64>,
    pub replica_changes: u32,
    /// Spec invariants broken (our scaler only: peers are not bound by our spec).
    pub violations: usize,
}

/// A comparison at one cold start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub cold_start_seconds: f64,
    pub targets: TargetsReport,
    pub bounds: Option<Bounds>,
    /// Token demand per minute of the trace, tokens/s, per role with a capacity (as the role's
    /// kind counts it).
    pub demand: BTreeMap<String, Vec<f64>>,
    pub rows: Vec<Row>,
    /// Every run in full, in the rows' order.
    pub runs: Vec<RunReport>,
}

/// The per-replica targets every policy was configured from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetsReport {
    pub queue_depth: BTreeMap<String, f64>,
    pub tokens_per_second: BTreeMap<String, f64>,
}

/// The scaler's targets for every policy.
pub fn targets_for(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
) -> Result<Targets, SimError> {
    let policy = run::policy_of(scaler, target)?;
    targets::derive(&policy, target, trace, &options.profile, options.slo).map_err(SimError::Input)
}

/// Our three algorithms from one set of targets: Proportional on QueueDepth, TokenThroughput
/// and Predictive on the same token capacities; everything else as the scaler has it.
pub fn algorithms(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    targets: &Targets,
) -> Result<Vec<Contender>, SimError> {
    let kind_of = |role: &str| {
        target
            .spec
            .roles
            .iter()
            .find(|r| r.name == role)
            .map(|r| r.kind())
    };
    let number = |v: f64| format!("{}", (v * 100.0).round() / 100.0);
    let mut token = serde_json::Map::new();
    for (role, c) in &targets.tokens_per_second {
        let field = match kind_of(role) {
            Some(mds_api::target::RoleKind::Prefill) => "prefill",
            Some(mds_api::target::RoleKind::Decode) => "decode",
            _ => "server",
        };
        token.insert(format!("{field}TargetTokensPerSecond"), json!(number(*c)));
    }
    // The scaler's own latency targets drive the guards of every row of our code; the
    // command line's SLO only grades (module `guards`).
    let guards = crate::guards::of(scaler, target)?;
    let ms = |s: f64| json!(number(s * 1000.0));
    token.insert("ttftTargetMilliseconds".into(), ms(guards.ttft_seconds));
    token.insert("itlTargetMilliseconds".into(), ms(guards.itl_seconds));
    let mut capacity = serde_json::Map::new();
    for (key, value) in &token {
        if let Some(kind) = key.strip_suffix("TargetTokensPerSecond") {
            capacity.insert(format!("{kind}TokenCapacityPerReplica"), value.clone());
        }
    }
    capacity.insert("tokenThroughput".into(), json!(token));
    let role_targets: Vec<_> = targets
        .queue_depth
        .iter()
        .map(|(name, q)| json!({"name": name, "target": number(*q)}))
        .collect();
    let variants = [
        (
            "mds-proportional",
            json!({"type": "Proportional", "proportional": {"metric": "QueueDepth", "roleTargets": role_targets}}),
        ),
        (
            "mds-tokenthroughput",
            json!({"type": "TokenThroughput", "tokenThroughput": token}),
        ),
        (
            "mds-predictive",
            json!({"type": "Predictive", "predictive": capacity}),
        ),
    ];
    variants
        .into_iter()
        .map(|(name, algorithm)| {
            let mut doc = serde_json::to_value(scaler)
                .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
            doc["spec"]["algorithm"] = algorithm;
            let variant: ModelDeploymentScaler = serde_json::from_value(doc)
                .map_err(|e| SimError::Input(format!("the {name} variant does not parse: {e}")))?;
            run::policy_of(&variant, target)
                .map_err(|e| SimError::Input(format!("the {name} variant is invalid: {e}")))?;
            Ok(Contender::Mds {
                name: name.to_string(),
                scaler: Box::new(variant),
            })
        })
        .collect()
}

/// `--quota auto`: each instance type of the target gets 80 % of the GPUs static peak would
/// hold, so that budget clamping, rollback and rebalancing are exercised. Sets the quota in
/// `options` and says what it set.
pub fn auto_quota(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &mut RunOptions,
) -> Result<String, SimError> {
    let targets = targets_for(scaler, target, trace, options)?;
    let counts = roster::static_counts(scaler, target, trace, options, &targets)?;
    let mut peak: BTreeMap<String, u32> = BTreeMap::new();
    for role in &target.spec.roles {
        let n = counts
            .get(&role.name)
            .copied()
            .unwrap_or(role.replicas())
            .max(0) as u32;
        let gpus = n * role.size().clamp(1, 64) as u32 * options.profile.gpus_per_pod;
        *peak
            .entry(role.instance_type.clone().unwrap_or_default())
            .or_default() += gpus;
    }
    let mut said = Vec::new();
    for (instance_type, gpus) in peak {
        let quota = ((f64::from(gpus) * 0.8).round() as u32).max(1);
        said.push(format!("{instance_type}={quota} (80 % of {gpus})"));
        options.quota.insert(instance_type, Some(quota));
    }
    Ok(said.join(", "))
}

/// What every contender of a comparison runs on.
pub struct Case<'a> {
    /// The scaler under test (its bounds bind every peer too).
    pub scaler: &'a ModelDeploymentScaler,
    pub target: &'a ModelDeployment,
    pub trace: Arc<Trace>,
    /// The trace's description for the report.
    pub load: &'a str,
    pub options: &'a RunOptions,
}

/// Runs every contender on the same case, `threads` at a time, without bounds; the reports
/// in the contenders' order, each named after its contender. `progress` hears the share of
/// runs finished.
pub fn run_all(
    case: &Case,
    contenders: &[Contender],
    threads: usize,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Vec<RunReport>, SimError> {
    let (scaler, target, options) = (case.scaler, case.target, case.options);
    let targets = targets_for(scaler, target, &case.trace, options)?;
    let jobs: Vec<Job<'_, Result<RunReport, SimError>>> = contenders
        .iter()
        .map(|contender| {
            let targets = &targets;
            Box::new(move || {
                let mut report = run_one(case, contender, targets)?;
                report.inputs.scaler = contender.name();
                Ok(report)
            }) as Job<'_, _>
        })
        .collect();
    jobs::run(threads, jobs, progress).into_iter().collect()
}

/// One contender's run.
pub(crate) fn run_one(
    case: &Case,
    contender: &Contender,
    targets: &Targets,
) -> Result<RunReport, SimError> {
    let (scaler, target, options) = (case.scaler, case.target, case.options);
    match contender {
        Contender::Mds { scaler, .. } => run::run_with(
            (**scaler).clone(),
            target.clone(),
            case.trace.clone(),
            case.load,
            options,
            ScaledBy::Mds,
            &mut |_| {},
        ),
        Contender::Peer { name, factor } => {
            let targets = targets.scaled(*factor);
            let statics = roster::static_counts(scaler, target, &case.trace, options, &targets)?;
            run::run_with(
                scaler.clone(),
                // Static peak starts at its peak.
                if *name == PeerName::StaticPeak {
                    with_counts(target, &statics)
                } else {
                    target.clone()
                },
                case.trace.clone(),
                case.load,
                options,
                ScaledBy::Peer(name.build(&targets, options, &statics, *factor)),
                &mut |_| {},
            )
        }
        Contender::File { peer, factor } => run::run_with(
            scaler.clone(),
            target.clone(),
            case.trace.clone(),
            case.load,
            options,
            ScaledBy::Peer(peer.build(*factor)),
            &mut |_| {},
        ),
    }
}

/// Runs every contender on the same case, `threads` at a time, and measures each against the
/// bounds of the scaler under test; `progress` hears the share of runs finished.
pub fn compare(
    case: &Case,
    contenders: &[Contender],
    threads: usize,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Comparison, SimError> {
    let (scaler, target, trace, options) = (case.scaler, case.target, &case.trace, case.options);
    let targets = targets_for(scaler, target, trace, options)?;
    let mut runs = run_all(case, contenders, threads, progress)?;
    // The bounds of the scaler under test: every row is measured against the same ones.
    let curves = run::curves(scaler, target, trace, options, threads);
    let bounds = run::bounds(
        scaler,
        target,
        trace,
        options,
        run::run_seconds(trace, options),
        &curves,
        options.goal,
    );
    for report in &mut runs {
        report.bounds.clone_from(&bounds);
        run::measure(report, scaler, target, trace, options);
    }
    let rows = rows(&runs, bounds.as_ref());
    let demand = demand_per_minute(target, trace, &targets, run::run_seconds(trace, options));
    Ok(Comparison {
        cold_start_seconds: runs.first().map_or(0.0, |r| r.inputs.cold_start_seconds),
        targets: TargetsReport {
            queue_depth: targets.queue_depth.clone(),
            tokens_per_second: targets.tokens_per_second.clone(),
        },
        bounds,
        demand,
        rows,
        runs,
    })
}

/// `target` with the given roles' counts.
fn with_counts(target: &ModelDeployment, counts: &BTreeMap<String, i32>) -> ModelDeployment {
    let mut target = target.clone();
    for role in &mut target.spec.roles {
        if let Some(&n) = counts.get(&role.name) {
            role.replicas = Some(n);
        }
    }
    target
}

/// Each role's token demand per minute, for roles with a per-replica capacity.
fn demand_per_minute(
    target: &ModelDeployment,
    trace: &Trace,
    targets: &Targets,
    duration: f64,
) -> BTreeMap<String, Vec<f64>> {
    target
        .spec
        .roles
        .iter()
        .filter(|r| targets.tokens_per_second.contains_key(&r.name))
        .map(|r| {
            let kind = r.kind();
            (
                r.name.clone(),
                crate::oracle::demand(trace, &kind, 60.0, duration),
            )
        })
        .collect()
}

/// One run presented as a comparison of one policy (for the report of a single run).
pub fn single(case: &Case, report: RunReport) -> Comparison {
    let (scaler, target, trace, options) = (case.scaler, case.target, &case.trace, case.options);
    let targets = targets_for(scaler, target, trace, options).unwrap_or(Targets {
        queue_depth: BTreeMap::new(),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: options.slo.ttft_seconds,
        itl_seconds: options.slo.itl_seconds,
    });
    let runs = vec![report];
    let bounds = runs[0].bounds.clone();
    Comparison {
        cold_start_seconds: runs[0].inputs.cold_start_seconds,
        targets: TargetsReport {
            queue_depth: targets.queue_depth.clone(),
            tokens_per_second: targets.tokens_per_second.clone(),
        },
        demand: demand_per_minute(target, trace, &targets, run::run_seconds(trace, options)),
        rows: rows(&runs, bounds.as_ref()),
        bounds,
        runs,
    }
}

pub(crate) fn rows(runs: &[RunReport], bounds: Option<&Bounds>) -> Vec<Row> {
    let hpa = runs
        .iter()
        .find(|r| r.inputs.scaler == PeerName::Hpa.as_str())
        .map(|r| r.summary.totals.gpu_hours);
    let ratio = |gpu: f64, base: Option<f64>| base.filter(|b| *b > 0.0).map(|b| gpu / b);
    runs.iter()
        .map(|r| {
            let s = &r.summary;
            let gpu = s.totals.gpu_hours;
            Row {
                policy: r.inputs.scaler.clone(),
                attainment: s.totals.attainment,
                attainment_other: match r.inputs.slo.itl_reading {
                    ItlReading::P95 => s.totals.attainment_mean_itl,
                    ItlReading::Mean => s.totals.attainment_p95_itl,
                },
                window_attainment: s.window_attainment,
                ttft_p95_seconds: s.totals.ttft.p95,
                itl_p95_seconds: match r.inputs.slo.itl_reading {
                    ItlReading::P95 => s.totals.itl.p95,
                    ItlReading::Mean => s.totals.tpot.p95,
                },
                gpu_hours: gpu,
                vs_oracle_b: ratio(gpu, bounds.and_then(|b| b.oracle_b_gpu_hours)),
                vs_hpa: ratio(gpu, hpa),
                scale_actions_per_hour: s.scale_actions_per_hour,
                flaps: s.totals.flaps,
                above_budget_seconds: s.totals.above_budget_seconds,
                unadmitted_seconds: s.totals.unadmitted_seconds,
                over_provisioning: r.metrics.as_ref().and_then(|m| m.over_provisioning),
                deficit_minutes: r.metrics.as_ref().and_then(|m| m.deficit_minutes),
                mean_reaction_seconds: r.metrics.as_ref().and_then(|m| m.mean_reaction()),
                replica_changes: r.metrics.as_ref().map_or(0, |m| m.replica_changes),
                violations: r.violations.len(),
            }
        })
        .collect()
}
