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

use crate::faults::{AppliedFault, FaultSpec};
use crate::invariants::Violation;
use crate::oracle::{self, Band, RoleDemand};
use crate::peers::Peer;
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
    /// Faults on cue (module `faults`), for our scaler's runs.
    pub faults: Vec<FaultSpec>,
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
            faults: Vec::new(),
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

/// What the demand alone allows (module `oracle`): GPU-hours of static peak provisioning, of
/// Oracle A (no cold start) and of Oracle B (clairvoyant, paying for its cold starts), at the
/// per-replica capacities of the scaler's targets (module `targets`), honouring the bounds,
/// the ratio bands and the GPU quota.
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
    /// `None` when the scaler gives no role a per-replica target.
    pub bounds: Option<Bounds>,
    pub bins: Vec<Bin>,
    pub passes: Vec<PassRecord>,
    pub violations: Vec<Violation>,
    /// The faults applied, with their windows and how often they struck (absent without).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<AppliedFault>,
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

/// Who scales the target in a run.
pub enum Driver {
    /// The operator's worker with the scaler.
    Mds,
    /// A peer within the scaler's bounds; the target starts at `initial` counts where given
    /// (static peak starts at its peak).
    Peer {
        peer: Box<dyn Peer>,
        initial: BTreeMap<String, i32>,
    },
}

/// Runs `scaler` on `target` with `trace` offered (described as `load` in the report);
/// `progress` hears the share of virtual time done, now and then.
pub fn run(
    scaler: ModelDeploymentScaler,
    target: ModelDeployment,
    trace: Arc<Trace>,
    load: &str,
    options: &RunOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, SimError> {
    run_with(scaler, target, trace, load, options, Driver::Mds, progress)
}

/// [`run`] with `driver` scaling the target.
pub fn run_with(
    scaler: ModelDeploymentScaler,
    mut target: ModelDeployment,
    trace: Arc<Trace>,
    load: &str,
    options: &RunOptions,
    driver: Driver,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, SimError> {
    let end_seconds = run_seconds(&trace, options);
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
    crate::faults::check_windows(&options.faults, end_seconds).map_err(SimError::Input)?;
    let cold_start = options.cold_start().as_secs_f64();
    if !(0.0..=MAX_COLD_START_SECONDS).contains(&cold_start) {
        return Err(SimError::Input(format!(
            "a cold start of {cold_start} s; it must be between 0 and one day"
        )));
    }
    if let Driver::Peer { initial, .. } = &driver {
        for role in &mut target.spec.roles {
            if let Some(&n) = initial.get(&role.name) {
                role.replicas = Some(n);
            }
        }
    }
    let bounds = bounds(&scaler, &target, &trace, options, end_seconds);
    let inputs = Inputs {
        scaler: match &driver {
            Driver::Mds => scaler.metadata.name.clone().unwrap_or_default(),
            Driver::Peer { peer, .. } => peer.name(),
        },
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
    let scenario = scenario(scaler, target, trace, options)?;
    let end = start + SignedDuration::from_secs_f64(end_seconds.max(1.0));
    let mut sim = match driver {
        Driver::Mds => Simulation::new(scenario)?,
        Driver::Peer { peer, .. } => Simulation::with_peer(scenario, peer)?,
    };
    sim.inject_faults(&options.faults, options.seed)?;
    let mut passes = Vec::new();
    let chunk = SignedDuration::from_secs(60);
    let mut until = start;
    while until < end {
        until = (until + chunk).min(end);
        passes.extend(sim.run_until(until)?);
        progress(until.duration_since(start).as_secs_f64() / end_seconds.max(1.0));
    }
    let faults = sim.faults_applied(end);
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
        faults,
    })
}

/// The scenario [`run`] simulates: the world's settings from `options`, every role on the
/// profile's engine, `trace` served request by request (or as a fluid load), starting at
/// [`start`]. For tests that step a [`Simulation`] themselves and look at the cluster between
/// passes; [`run_seconds`] says how long `run` would go on.
pub fn scenario(
    scaler: ModelDeploymentScaler,
    mut target: ModelDeployment,
    trace: Arc<Trace>,
    options: &RunOptions,
) -> Result<Scenario, SimError> {
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
    let requests = (options.engine == EngineModel::Request).then(|| {
        (
            trace,
            RequestServing {
                router: options.router,
                kv_bytes_per_token: options.profile.kv_bytes_per_token,
                ..RequestServing::default()
            },
        )
    });
    Ok(Scenario {
        config: WorldConfig {
            seed: options.seed,
            ..WorldConfig::default()
        },
        start: start(),
        target,
        scaler,
        roles,
        quota: options.quota.clone(),
        requests,
        slo: options.slo,
    })
}

/// The oracles' GPU-hours over `duration` seconds, from the scaler's per-replica targets.
pub(crate) fn bounds(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    duration: f64,
) -> Option<Bounds> {
    let policy = policy_of(scaler, target).ok()?;
    let targets =
        crate::targets::derive(&policy, target, trace, &options.profile, options.slo).ok()?;
    let roles: Vec<RoleDemand> = role_demands(&policy, target, trace, &targets, options, duration)
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    let bands = bands(&policy);
    let budget = crate::peer_drive::gpu_budget(target, &options.quota);
    let joint = oracle::joint(
        &roles,
        &bands,
        budget,
        BIN,
        options.cold_start().as_secs_f64(),
    );
    Some(Bounds {
        static_peak_gpu_hours: joint.static_peak.iter().map(|b| b.gpu_hours).sum(),
        oracle_a_gpu_hours: joint.oracle_a.iter().map(|b| b.gpu_hours).sum(),
        oracle_b_gpu_hours: joint.oracle_b.iter().map(|b| b.gpu_hours).sum(),
    })
}

/// Simulated seconds of a run on `trace`.
pub fn run_seconds(trace: &Trace, options: &RunOptions) -> f64 {
    trace.duration_seconds() + options.tail.as_secs_f64()
}

/// Bins of the oracles and static peak, seconds.
pub(crate) const BIN: f64 = 10.0;

/// Each policy role's demand in bins of [`BIN`] over `duration` seconds, at the targets'
/// per-replica capacity (no demand for a role without one).
pub(crate) fn role_demands(
    policy: &mds_planner::Policy,
    target: &ModelDeployment,
    trace: &Trace,
    targets: &crate::peers::Targets,
    options: &RunOptions,
    duration: f64,
) -> Vec<(String, RoleDemand)> {
    policy
        .roles
        .iter()
        .map(|role| {
            let size = target
                .spec
                .roles
                .iter()
                .find(|r| r.name == role.name)
                .map_or(1, |r| r.size().clamp(1, 64) as u32);
            let capacity = targets.tokens_per_second.get(&role.name).copied();
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

/// The scaler's policy over the target's roles.
pub fn policy_of(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
) -> Result<mds_planner::Policy, SimError> {
    let kinds = target
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.kind()))
        .collect();
    mds_planner::Policy::from_spec(&scaler.spec, &kinds).map_err(|e| SimError::Input(e.to_string()))
}
