//! One `mds simulate` run: a scaler and its target, a request stream, an engine profile and
//! the world's settings in; the summary, the per-minute bins, every pass and every broken
//! rule out.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_sim::{LoadProfile, RequestServing, RoleSettings, Router, WorldConfig};
use serde::Serialize;

use crate::invariants::Violation;
use crate::oracle::{self, RoleDemand};
use crate::report::{Bin, Slo, Summary};
use crate::{PassRecord, Scenario, SimError, Simulation};
use mds_sim::profile::Profile;

/// Which engine model serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineModel {
    /// Request by request, as vLLM's scheduler runs them.
    Request,
    /// Fluid queues per instance, for long traces.
    Fluid,
}

impl EngineModel {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineModel::Request => "request",
            EngineModel::Fluid => "fluid",
        }
    }
}

/// How a run is set up besides the scaler, the target and the requests.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub engine: EngineModel,
    pub profile: Profile,
    /// Overrides the profile's mean cold start.
    pub cold_start: Option<SignedDuration>,
    pub seed: u64,
    pub slo: Slo,
    pub router: Router,
    /// GPU quota per instance type (`None`: unlimited).
    pub quota: BTreeMap<String, Option<u32>>,
    /// How long the run goes on after the last arrival, for requests in flight to finish.
    pub tail: SignedDuration,
}

impl RunOptions {
    pub fn new(profile: Profile) -> RunOptions {
        RunOptions {
            engine: EngineModel::Request,
            profile,
            cold_start: None,
            seed: 1,
            slo: Slo::default(),
            router: Router::default(),
            quota: BTreeMap::new(),
            tail: SignedDuration::from_secs(120),
        }
    }

    fn cold_start(&self) -> SignedDuration {
        self.cold_start.unwrap_or(self.profile.cold_start)
    }
}

/// What a run was made of, for the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inputs {
    pub scaler: String,
    pub target: String,
    pub load: String,
    pub profile: String,
    pub engine: EngineModel,
    pub router: String,
    pub seed: u64,
    pub cold_start_seconds: f64,
    pub cold_start_spread: f64,
    pub slo: Slo,
    pub duration_seconds: f64,
    pub version: String,
}

/// What the demand alone allows, for the token algorithms (module `oracle`): GPU-hours of
/// static peak provisioning, of Oracle A (no cold start) and of Oracle B (clairvoyant, paying
/// for its cold starts), per-replica capacities from the scaler's targets, bounds honoured,
/// ratio bands and quota not applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bounds {
    pub static_peak_gpu_hours: f64,
    pub oracle_a_gpu_hours: f64,
    pub oracle_b_gpu_hours: f64,
}

/// Everything a run reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    pub inputs: Inputs,
    pub summary: Summary,
    /// `None` for a Proportional scaler (its target is not a token capacity).
    pub bounds: Option<Bounds>,
    pub bins: Vec<Bin>,
    pub passes: Vec<PassRecord>,
    pub violations: Vec<Violation>,
}

/// The longest run, in simulated seconds (a week): longer ones are refused, not run for
/// hours.
pub const MAX_RUN_SECONDS: f64 = 7.0 * 86_400.0;

/// The longest cold start a run takes (a day).
pub const MAX_COLD_START_SECONDS: f64 = 86_400.0;

/// Every run starts at this instant (the output is the same whatever the day).
pub fn start() -> Timestamp {
    Timestamp::from_second(1_767_225_600).expect("a valid instant")
}

/// Runs `scaler` on `target` with `trace` offered (described as `load` in the report);
/// `progress` hears the share of virtual time done, now and then.
pub fn run(
    scaler: ModelDeploymentScaler,
    mut target: ModelDeployment,
    trace: Arc<Trace>,
    load: &str,
    options: &RunOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, SimError> {
    let end_seconds = trace.duration_seconds() + options.tail.as_secs_f64();
    if end_seconds.is_nan() || end_seconds > MAX_RUN_SECONDS {
        let days = end_seconds / 86_400.0;
        let length = if days < 1e6 {
            format!("{days:.1} days")
        } else {
            "over a million days".to_string()
        };
        return Err(SimError::Input(format!(
            "the load lasts {length}; a run simulates at most 7 days (cut it with --from and --until)"
        )));
    }
    let cold_start = options.cold_start().as_secs_f64();
    if !(0.0..=MAX_COLD_START_SECONDS).contains(&cold_start) {
        return Err(SimError::Input(format!(
            "a cold start of {cold_start} s; it must be between 0 and one day"
        )));
    }
    if target.metadata.namespace.is_none() {
        target.metadata.namespace = Some("default".into());
    }
    let settings = RoleSettings {
        cold_start: options.cold_start(),
        cold_start_spread: options.profile.cold_start_spread,
        engine: options.profile.fluid,
        request_profile: options.profile.request,
        gpus_per_pod: options.profile.gpus_per_pod,
    };
    let fluid_load = match options.engine {
        EngineModel::Fluid => trace
            .to_profile(10.0)
            .map_err(|e| SimError::Input(format!("the load: {e}")))?,
        EngineModel::Request => LoadProfile::idle(),
    };
    let roles = target
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), (settings, fluid_load.clone())))
        .collect();
    let bounds = bounds(&scaler, &target, &trace, options, end_seconds);
    let requests = (options.engine == EngineModel::Request).then(|| {
        (
            trace.clone(),
            RequestServing {
                router: options.router,
                kv_bytes_per_token: options.profile.kv_bytes_per_token,
                ..RequestServing::default()
            },
        )
    });
    let inputs = Inputs {
        scaler: scaler.metadata.name.clone().unwrap_or_default(),
        target: target.metadata.name.clone().unwrap_or_default(),
        load: load.to_string(),
        profile: options.profile.name.to_string(),
        engine: options.engine,
        router: options.router.as_str().to_string(),
        seed: options.seed,
        cold_start_seconds: options.cold_start().as_secs_f64(),
        cold_start_spread: options.profile.cold_start_spread,
        slo: options.slo,
        duration_seconds: 0.0,
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let start = start();
    let scenario = Scenario {
        config: WorldConfig {
            seed: options.seed,
            ..WorldConfig::default()
        },
        start,
        target,
        scaler,
        roles,
        quota: options.quota.clone(),
        requests,
        slo: options.slo,
    };
    let end = start + SignedDuration::from_secs_f64(end_seconds.max(1.0));
    let mut sim = Simulation::new(scenario)?;
    let mut passes = Vec::new();
    let chunk = SignedDuration::from_secs(60);
    let mut until = start;
    while until < end {
        until = (until + chunk).min(end);
        passes.extend(sim.run_until(until)?);
        progress(until.duration_since(start).as_secs_f64() / end_seconds.max(1.0));
    }
    let (summary, bins, violations) = sim.finish(end);
    Ok(RunReport {
        inputs: Inputs {
            duration_seconds: end.duration_since(start).as_secs_f64(),
            ..inputs
        },
        summary,
        bounds,
        bins,
        passes,
        violations,
    })
}

/// The oracles' GPU-hours over `duration` seconds, from the scaler's token capacities.
fn bounds(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    duration: f64,
) -> Option<Bounds> {
    use mds_planner::policy::AlgorithmPolicy;
    let kinds = target
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.kind()))
        .collect();
    let policy = mds_planner::Policy::from_spec(&scaler.spec, &kinds).ok()?;
    let capacities = match &policy.algorithm {
        AlgorithmPolicy::TokenThroughput(t) => t.capacities,
        AlgorithmPolicy::Predictive(p) => p.capacities,
        AlgorithmPolicy::Proportional { .. } => return None,
    };
    const BIN: f64 = 10.0;
    let cold = options.cold_start().as_secs_f64();
    let mut out = Bounds {
        static_peak_gpu_hours: 0.0,
        oracle_a_gpu_hours: 0.0,
        oracle_b_gpu_hours: 0.0,
    };
    for role in &policy.roles {
        let size = target
            .spec
            .roles
            .iter()
            .find(|r| r.name == role.name)
            .map_or(1, |r| r.size().clamp(1, 64) as u32);
        let capacity = capacities.for_kind(&role.kind);
        let demand = RoleDemand {
            tokens_per_second: match capacity {
                Some(_) => oracle::demand(trace, &role.kind, BIN, duration),
                None => vec![0.0; (duration / BIN).ceil().max(1.0) as usize],
            },
            capacity: capacity.unwrap_or(1.0),
            min: role.min,
            max: role.max,
            gpus_per_replica: size * options.profile.gpus_per_pod,
        };
        out.static_peak_gpu_hours += oracle::static_peak(&demand, BIN, 6).gpu_hours;
        out.oracle_a_gpu_hours += oracle::oracle_a(&demand, BIN).gpu_hours;
        out.oracle_b_gpu_hours += oracle::oracle_b(&demand, BIN, cold).gpu_hours;
    }
    Some(out)
}
