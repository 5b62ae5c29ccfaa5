//! `mds simulate --compare`: the scaler under test (or each of our three algorithms) and every
//! peer on the same world, trace, seed and actuator, one table. Runs are independent, so they
//! spread over the machine's cores; the table is in a fixed order whatever finishes first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use serde::Serialize;
use serde_json::json;

use crate::roster::{self, PeerName};
use crate::run::{self, Bounds, Driver, RunOptions, RunReport};
use crate::targets;
use crate::{SimError, peers::Targets};

/// One policy of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Contender {
    /// Our scaler, as given or with another algorithm, named for the table.
    Mds {
        name: String,
        scaler: Box<ModelDeploymentScaler>,
    },
    Peer(PeerName),
}

impl Contender {
    pub fn name(&self) -> String {
        match self {
            Contender::Mds { name, .. } => name.clone(),
            Contender::Peer(p) => p.as_str().to_string(),
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub policy: String,
    pub attainment: Option<f64>,
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
    let ms = |s: f64| json!(number(s * 1000.0));
    token.insert("ttftTargetMilliseconds".into(), ms(targets.ttft_seconds));
    token.insert("itlTargetMilliseconds".into(), ms(targets.itl_seconds));
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

/// Runs every contender on the same case, `threads` at a time; `progress` hears the share of
/// runs finished.
pub fn compare(
    case: &Case,
    contenders: &[Contender],
    threads: usize,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<Comparison, SimError> {
    let Case {
        scaler,
        target,
        trace,
        load,
        options,
    } = case;
    let (scaler, target, load, options) = (*scaler, *target, *load, *options);
    let targets = targets_for(scaler, target, trace, options)?;
    let statics = roster::static_counts(scaler, target, trace, options, &targets)?;
    let results: Mutex<Vec<Option<Result<RunReport, SimError>>>> =
        Mutex::new(contenders.iter().map(|_| None).collect());
    let next = Mutex::new(0_usize);
    let done = Mutex::new(0_usize);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, contenders.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let index = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(contender) = contenders.get(index) else {
                        break;
                    };
                    let result = match contender {
                        Contender::Mds { scaler, .. } => run::run(
                            (**scaler).clone(),
                            target.clone(),
                            trace.clone(),
                            load,
                            options,
                            &mut |_| {},
                        ),
                        Contender::Peer(name) => run::run_with(
                            scaler.clone(),
                            target.clone(),
                            trace.clone(),
                            load,
                            options,
                            Driver::Peer {
                                peer: name.build(&targets, options, &statics),
                                initial: if *name == PeerName::StaticPeak {
                                    statics.clone()
                                } else {
                                    BTreeMap::new()
                                },
                            },
                            &mut |_| {},
                        ),
                    };
                    results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(result);
                    let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                    *d += 1;
                    progress(*d as f64 / contenders.len().max(1) as f64);
                }
            });
        }
    });
    let mut runs = Vec::new();
    for (contender, result) in contenders
        .iter()
        .zip(results.into_inner().unwrap_or_default())
    {
        let mut report = result.ok_or_else(|| {
            SimError::Input(format!("the {} run did not finish", contender.name()))
        })??;
        report.inputs.scaler = contender.name();
        runs.push(report);
    }
    // The bounds of the scaler under test: every row is measured against the same ones (a
    // variant's own report carries the bounds of its own, rounded, targets).
    let bounds = run::bounds(
        scaler,
        target,
        trace,
        options,
        run::run_seconds(trace, options),
    );
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

fn rows(runs: &[RunReport], bounds: Option<&Bounds>) -> Vec<Row> {
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
                window_attainment: s.window_attainment,
                ttft_p95_seconds: s.totals.ttft.p95,
                itl_p95_seconds: s.totals.itl.p95,
                gpu_hours: gpu,
                vs_oracle_b: ratio(gpu, bounds.map(|b| b.oracle_b_gpu_hours)),
                vs_hpa: ratio(gpu, hpa),
                scale_actions_per_hour: s.scale_actions_per_hour,
                flaps: s.totals.flaps,
                above_budget_seconds: s.totals.above_budget_seconds,
                unadmitted_seconds: s.totals.unadmitted_seconds,
                violations: r.violations.len(),
            }
        })
        .collect()
}
