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

use crate::capacity::Knee;
use crate::faults::{AppliedFault, FaultSpec};
use crate::invariants::Violation;
use crate::report::{Bin, Slo, Summary};
use crate::slo::{Grader, IdleReplica};
use crate::{PassRecord, ScaledBy, Scenario, SimError, Simulation};
use mds_api::target::RoleKind;
use mds_sim::profile::Profile;

mod bounds;

pub(crate) use bounds::{BIN, bands, role_demands};
pub use bounds::{CurvePlan, Measured, bounds, curve_plan, curves, measure, whole_curves};

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
    /// Why this profile: `--profile`, the target's model, or the default.
    pub profile_why: String,
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
    /// The SLO attainment the knee (and so the oracles) is sized for, 0..1.
    pub goal: f64,
    /// Threads for work that splits (the engine's curves); the output is the same whatever
    /// the number.
    pub jobs: usize,
    /// What the stand-in GPUStack does with a Prefill/Decode retirement.
    pub pd_retirements: PdRetirements,
}

/// What the stand-in GPUStack does with a Prefill/Decode retirement (`--pd-retirements`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PdRetirements {
    /// Aborts it outright, as the GPUStack revisions examined do.
    #[default]
    Abort,
    /// Completes it, as the spec describes.
    Complete,
}

impl PdRetirements {
    pub fn parse(text: &str) -> Option<PdRetirements> {
        match text {
            "abort" => Some(PdRetirements::Abort),
            "complete" => Some(PdRetirements::Complete),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PdRetirements::Abort => "abort",
            PdRetirements::Complete => "complete",
        }
    }
}

impl RunOptions {
    pub fn new(profile: Profile) -> RunOptions {
        RunOptions {
            engine: EngineModel::Request,
            profile,
            profile_why: "--profile".into(),
            cold_start: None,
            seed: 1,
            slo: Slo::default(),
            router: Router::default(),
            quota: BTreeMap::new(),
            tail: SignedDuration::from_secs(120),
            faults: Vec::new(),
            goal: 0.95,
            jobs: 1,
            pd_retirements: PdRetirements::Abort,
        }
    }

    pub fn cold_start(&self) -> SignedDuration {
        self.cold_start.unwrap_or(self.profile.cold_start)
    }
}

/// The hardware and engine a run's profile models, for the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hardware {
    pub gpu: String,
    pub gpus_per_replica: u32,
    pub engine: String,
    pub engine_version: String,
    pub precision: String,
    pub context_tokens: u64,
    /// Where the costs come from, and the measured tables they were fitted to, if any.
    pub source: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tables: String,
    /// The line the world header prints.
    pub summary: String,
}

impl Hardware {
    pub fn of(p: &mds_sim::profile::Profile) -> Hardware {
        Hardware {
            gpu: p.gpu.to_string(),
            gpus_per_replica: p.gpus_per_pod,
            engine: p.engine_name().to_string(),
            engine_version: p.engine_version.to_string(),
            precision: p.precision.label().to_string(),
            context_tokens: p.request.limits.max_model_len,
            source: p.source.to_string(),
            tables: p.tables.to_string(),
            summary: p.describe(),
        }
    }
}

/// What a run was made of, for the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inputs {
    pub scaler: String,
    pub target: String,
    pub load: String,
    pub profile: String,
    /// Why this profile was chosen.
    pub profile_why: String,
    /// What the profile models: GPU, engine and version, precision, context, source.
    pub hardware: Hardware,
    /// The trace's requests the profile refuses, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusals: Option<crate::slo::Refusals>,
    pub engine: EngineModel,
    pub router: String,
    pub seed: u64,
    pub cold_start_seconds: f64,
    pub cold_start_spread: f64,
    pub slo: Slo,
    pub duration_seconds: f64,
    pub version: String,
    /// `complete` when the stand-in GPUStack completes Prefill/Decode retirements
    /// (`--pd-retirements complete`); absent for the default, which aborts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pd_retirements: Option<&'static str>,
    /// GPUs per instance type under quota (`--quota`); empty: unlimited.
    pub quota: BTreeMap<String, u32>,
}

impl Inputs {
    /// The quota in words: `h100-pcie=3, a100=2` or `unlimited`.
    pub fn quota_text(&self) -> String {
        if self.quota.is_empty() {
            return "unlimited".to_string();
        }
        let said: Vec<String> = self.quota.iter().map(|(t, g)| format!("{t}={g}")).collect();
        said.join(", ")
    }
}

/// What the demand alone allows at an attainment goal (module `oracle`): GPU-hours of static
/// peak provisioning at each role's knee, of Oracle A (the cheapest replicas per bin that
/// reach the goal on the engine's curves, no cold start: nobody reaches it for less) and of
/// Oracle B (the same, clairvoyant, paying for its cold starts), honouring the bounds, the
/// ratio bands and the GPU quota.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bounds {
    /// The attainment the bounds reach, 0..1.
    pub goal: f64,
    /// Each role's knee at the goal (static peak's per-replica capacity).
    pub knees: BTreeMap<String, Knee>,
    pub static_peak_gpu_hours: f64,
    /// `None`: no replicas within the bounds, bands and quota reach the goal.
    pub oracle_a_gpu_hours: Option<f64>,
    pub oracle_b_gpu_hours: Option<f64>,
}

impl Bounds {
    /// The oracles' GPU-hours in words, or why there are none.
    pub fn oracles(&self) -> String {
        match (self.oracle_a_gpu_hours, self.oracle_b_gpu_hours) {
            (Some(a), Some(b)) => format!("Oracle A {a:.2} GPU-h, Oracle B {b:.2} GPU-h"),
            _ => format!(
                "no oracle, since no count within maxReplicas, the ratio bands and the quota serves {} % of requests within the SLO",
                self.goal * 100.0
            ),
        }
    }
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
    /// Provisioning, reaction, churn, band and forecast metrics (module `metrics`; `None`
    /// until [`measure`] runs with the bounds).
    pub metrics: Option<crate::metrics::Metrics>,
    /// The faults applied, with their windows and how often they struck (absent without).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<AppliedFault>,
    /// What decided the counts where the load did not: a bound, a guard, the quota or the
    /// router rule (module `decided`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decided: Vec<String>,
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
    target: ModelDeployment,
    trace: Arc<Trace>,
    load: &str,
    options: &RunOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<RunReport, SimError> {
    let curves = curves(&scaler, &target, &trace, options, options.jobs);
    let duration = run_seconds(&trace, options);
    let bounds = bounds(
        &scaler,
        &target,
        &trace,
        options,
        duration,
        &curves,
        options.goal,
    );
    let mut report = run_with(
        scaler.clone(),
        target.clone(),
        trace.clone(),
        load,
        options,
        ScaledBy::Mds,
        progress,
    )?;
    report.bounds = bounds;
    measure(&mut report, &scaler, &target, &trace, options);
    Ok(report)
}

/// [`run`] with `by` scaling the target, without the bounds (a comparison sizes them once
/// for every run).
pub fn run_with(
    scaler: ModelDeploymentScaler,
    target: ModelDeployment,
    trace: Arc<Trace>,
    load: &str,
    options: &RunOptions,
    by: ScaledBy,
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
    let inputs = Inputs {
        scaler: match &by {
            ScaledBy::Mds => scaler.metadata.name.clone().unwrap_or_default(),
            ScaledBy::Peer(peer) => peer.name(),
        },
        target: target.metadata.name.clone().unwrap_or_default(),
        load: load.to_string(),
        profile: options.profile.name.to_string(),
        profile_why: options.profile_why.clone(),
        hardware: Hardware::of(&options.profile),
        refusals: crate::slo::Refusals::of(&trace, &options.profile),
        engine: options.engine,
        router: if target.has_router() {
            options.router.as_str().to_string()
        } else {
            format!(
                "{} (the target has no spec.router: no retirement completes)",
                options.router.as_str()
            )
        },
        seed: options.seed,
        cold_start_seconds: options.cold_start().as_secs_f64(),
        cold_start_spread: options.profile.cold_start_spread,
        slo: options.slo,
        duration_seconds: 0.0,
        version: env!("CARGO_PKG_VERSION").to_string(),
        pd_retirements: (options.pd_retirements != PdRetirements::default())
            .then_some(options.pd_retirements.as_str()),
        quota: options
            .quota
            .iter()
            .filter_map(|(t, g)| Some((t.clone(), (*g)?)))
            .collect(),
    };
    let start = start();
    let role_bounds: BTreeMap<String, (i32, i32)> = scaler
        .spec
        .roles
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                (r.min_replicas.unwrap_or(1), r.max_replicas),
            )
        })
        .collect();
    let scenario = scenario(scaler, target, trace, options)?;
    let end = start + SignedDuration::from_secs_f64(end_seconds.max(1.0));
    let mut sim = Simulation::scaled_by(scenario, by)?;
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
        bounds: None,
        metrics: None,
        bins,
        decided: crate::decided::sentences(&passes, &role_bounds),
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
    let (prompts, fluid_load) = derived(&trace, options.engine)?;
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
                itl_objective_seconds: options.slo.itl_seconds,
                ..RequestServing::default()
            },
        )
    });
    Ok(Scenario {
        config: WorldConfig {
            seed: options.seed,
            abort_disaggregated_retirements: options.pd_retirements == PdRetirements::Abort,
            ..WorldConfig::default()
        },
        start: start(),
        target,
        scaler,
        roles,
        quota: options.quota.clone(),
        requests,
        slo: options.slo,
        prompts,
    })
}

/// What a run reads from its whole trace before it starts: the spread of its prompts and
/// arrivals, and (fluid) its load in the world's bins. A frontier runs a hundred settings on
/// one trace, and these passes over millions of requests were a sixth of a fluid day's
/// frontier, so each thread keeps the last trace's (the same `Arc`, held weakly so a freed
/// trace's address is never mistaken for a new one).
fn derived(
    trace: &Arc<Trace>,
    engine: EngineModel,
) -> Result<(crate::slo::PromptSpread, LoadProfile), SimError> {
    type Memo = (
        std::sync::Weak<Trace>,
        EngineModel,
        crate::slo::PromptSpread,
        LoadProfile,
    );
    thread_local! {
        static LAST: std::cell::RefCell<Option<Memo>> = const { std::cell::RefCell::new(None) };
    }
    let hit = LAST.with_borrow(|last| {
        last.as_ref()
            .filter(|(t, e, _, _)| *e == engine && std::ptr::eq(t.as_ptr(), Arc::as_ptr(trace)))
            .map(|(_, _, prompts, load)| (prompts.clone(), load.clone()))
    });
    if let Some(found) = hit {
        return Ok(found);
    }
    let prompts = crate::slo::PromptSpread::of(trace);
    let load = match engine {
        EngineModel::Fluid => trace
            .to_profile(crate::slo::LOAD_BIN_SECONDS)
            .map_err(|e| SimError::Input(format!("the load: {e}")))?,
        EngineModel::Request => LoadProfile::idle(),
    };
    LAST.with_borrow_mut(|last| {
        *last = Some((Arc::downgrade(trace), engine, prompts.clone(), load.clone()));
    });
    Ok((prompts, load))
}

/// The grader of `trace` under `options`: each request's TTFT objective and whether any
/// scale meets its SLO, on the profile's engine.
pub fn grader(target: &ModelDeployment, trace: &Trace, options: &RunOptions) -> Grader {
    let kinds: Vec<RoleKind> = target.spec.roles.iter().map(|r| r.kind()).collect();
    let disaggregated = kinds.contains(&RoleKind::Prefill) && kinds.contains(&RoleKind::Decode);
    let serving = RequestServing::default();
    let idle = IdleReplica {
        profile: options.profile.request,
        handoff_seconds_per_token: disaggregated
            .then(|| options.profile.kv_bytes_per_token / serving.link_bytes_per_second),
    };
    Grader::new(options.slo, Some(trace), Some(&idle))
}

/// Simulated seconds of a run on `trace`.
pub fn run_seconds(trace: &Trace, options: &RunOptions) -> f64 {
    trace.duration_seconds() + options.tail.as_secs_f64()
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
