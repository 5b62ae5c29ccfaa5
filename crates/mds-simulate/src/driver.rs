//! The one loop every run goes through (ARCHITECTURE: the simulator is a second shell). One
//! thread, no sockets, no timers: the `mds-sim` world steps to the next pass that is due,
//! recording each tick and letting the run's faults strike; then whoever scales the target
//! (module `scaling`: the operator's own worker, or a peer) passes, and the world takes the
//! spec it wrote. For the operator, the world is first mirrored into a `MemoryCluster` the way
//! the lab's stand-in mirrors it into a real API server (the same `mds_sim::objects`
//! conversion), and its passes are checked against the spec's invariants. The same inputs give
//! the same run, byte for byte.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::target::{ModelDeployment, RoleKind};
use mds_sim::{
    DeploymentKey, InstanceState, LoadProfile, RequestProfile, RequestServing, RoleSettings, Trace,
    WorkKind, World, WorldConfig,
};
use mds_worker::ScalerKey;
use mds_worker::memory_cluster::{Kind, MemoryCluster};

use crate::invariants::{self, PassFacts, Violation};
use crate::mirror::{self, Mirror};
use crate::peer_drive::{PeerDriver, gpu_budget, role_shapes};
use crate::peers::Peer;
use crate::report::{Bin, Recorder, Summary};
use crate::scaling::{Ctx, Operator, Passed, Scaling};
use crate::slo::{Grader, IdleReplica, Slo};
use crate::{PassRecord, Scenario, SimError, faults};

/// Who writes the target's counts.
pub enum ScaledBy {
    /// The operator's own worker with the scenario's scaler, on the operator's schedule.
    Mds,
    /// A peer autoscaler (module `peers`), within the scaler's bounds (the rest of the scaler
    /// is not used).
    Peer(Box<dyn Peer>),
}

/// A run in progress.
pub struct Simulation {
    pub(crate) world: World,
    pub(crate) cluster: MemoryCluster,
    pub(crate) mirror: Mirror,
    pub(crate) key: ScalerKey,
    pub(crate) deployment: DeploymentKey,
    pub(crate) scaling: Box<dyn Scaling>,
    pub(crate) start: Timestamp,
    pub(crate) recorder: Recorder,
    pub(crate) violations: Vec<Violation>,
    /// Fluid load offered while nothing was routed, as last seen, per role.
    pub(crate) unrouted_seen: BTreeMap<String, f64>,
    /// Requests are served request by request (else by the fluid engines).
    pub(crate) request_level: bool,
    /// Roles whose engines complete requests (not prefill or encode), for the fluid count.
    pub(crate) completing_roles: Vec<String>,
    /// Faults on cue (module `faults`).
    pub(crate) faults: faults::Injector,
    /// What the recorder last read of the world's objects (they change only with the
    /// world's revision).
    settled: Option<SettledView>,
}

/// The world's objects as the recorder reads them each step.
struct SettledView {
    revision: u64,
    gpus: u32,
    unadmitted: bool,
    replicas: BTreeMap<String, i32>,
    ready: BTreeMap<String, i32>,
}

impl Simulation {
    /// The operator's worker scales the target.
    pub fn new(scenario: Scenario) -> Result<Simulation, SimError> {
        Simulation::scaled_by(scenario, ScaledBy::Mds)
    }

    /// `peer` scales the target instead, within the scaler's bounds.
    pub fn with_peer(scenario: Scenario, peer: Box<dyn Peer>) -> Result<Simulation, SimError> {
        Simulation::scaled_by(scenario, ScaledBy::Peer(peer))
    }

    /// `by` scales the target.
    pub fn scaled_by(scenario: Scenario, by: ScaledBy) -> Result<Simulation, SimError> {
        let Scenario {
            config,
            start,
            target,
            scaler,
            roles,
            quota,
            requests,
            slo,
            prompts,
        } = scenario;
        let cold_start = longest_cold_start(&roles, &config);
        let warmup = warmup(&roles, &config);
        let default_profile = config.default_role.request_profile;
        let mut world = World::new(config, start - warmup)?;
        for (instance_type, gpus) in quota.clone() {
            world.set_quota(&instance_type, gpus);
        }
        let namespace = target
            .metadata
            .namespace
            .clone()
            .ok_or_else(|| SimError::Input("the target has no metadata.namespace".into()))?;
        let cluster = MemoryCluster::new();
        cluster.serve_workloads(true);
        let stored = store_target(&cluster, &target)?;
        let completing_roles = completing_roles(&stored);
        let budget = gpu_budget(&stored, &quota);
        let entry_profile = entry_profile(&stored, &roles, default_profile);
        let shapes = role_shapes(&scaler, &stored, &roles);
        let deployment = stage_world(&mut world, stored, roles, start)?;
        let request_level = requests.is_some();
        let mut grader = grader(&target, slo, requests.as_ref(), entry_profile);
        grader.prompts = prompts;
        if let Some((trace, serving)) = requests {
            world.set_requests(&deployment, trace, serving)?;
        }
        let name = store_scaler(&cluster, &scaler, &namespace)?;
        let key = ScalerKey { namespace, name };
        let scaling: Box<dyn Scaling> = match by {
            ScaledBy::Mds => Box::new(Operator::new(key.clone(), start)),
            ScaledBy::Peer(peer) => Box::new(PeerDriver::new(peer, shapes, budget, start)),
        };
        Ok(Simulation {
            world,
            cluster,
            mirror: Mirror::default(),
            scaling,
            key,
            deployment,
            start,
            recorder: Recorder::new(grader, 60.0, cold_start.as_secs_f64(), budget),
            violations: Vec::new(),
            unrouted_seen: BTreeMap::new(),
            request_level,
            completing_roles,
            faults: faults::Injector::default(),
            settled: None,
        })
    }

    /// Seconds since the start.
    pub(crate) fn seconds(&self, t: Timestamp) -> f64 {
        t.duration_since(self.start).as_secs_f64()
    }

    /// Steps the world tick by tick to `to`, letting the faults strike and recording each
    /// span.
    fn advance_world(&mut self, to: Timestamp) -> Result<(), SimError> {
        let tick = self.world.config().tick;
        while self.world.now() < to {
            let from = self.world.now();
            let next = from.checked_add(tick).unwrap_or(to).min(to);
            self.world.step(next)?;
            self.fault_tick()?;
            self.observe(from, next);
        }
        Ok(())
    }

    /// What the world did from `from` to `to`: GPUs held, growth waiting for admission,
    /// requests ended (or, with the fluid engine, served and unrouted).
    fn observe(&mut self, from: Timestamp, to: Timestamp) {
        let (t0, t1) = (self.seconds(from), self.seconds(to));
        let revision = self.world.revision();
        let settled = match self.settled.take() {
            Some(s) if s.revision == revision => s,
            _ => self.settled_view(),
        };
        self.recorder.span(
            t0,
            t1,
            settled.gpus,
            settled.unadmitted,
            &settled.replicas,
            &settled.ready,
        );
        self.settled = Some(settled);
        for served in self.world.take_served(&self.deployment) {
            // Request times are on the requests' axis, which starts with the run.
            self.recorder.served(&served);
        }
        if self.request_level {
            self.recorder.gaps(self.world.take_gaps(&self.deployment));
            return;
        }
        let dt = t1 - t0;
        // A request completes at a Server or Decode engine; prefill engines are not counted.
        let engines = self.world.routed_engines(&self.deployment);
        for engine in engines.filter(|e| e.kind != WorkKind::Prefill) {
            let last = engine.last;
            self.recorder
                .fluid_served(t0, last.served_requests_per_second * dt, &last);
        }
        for role in &self.completing_roles {
            let total = self.world.unserved(&self.deployment, role).requests;
            // In place: a tick would otherwise copy the role's name.
            let seen = match self.unrouted_seen.get_mut(role) {
                Some(seen) => std::mem::replace(seen, total),
                None => {
                    self.unrouted_seen.insert(role.clone(), total);
                    0.0
                }
            };
            self.recorder.fluid_unrouted(t0, total - seen);
        }
    }

    /// What the recorder reads of the world's objects, as of the world's current revision.
    fn settled_view(&self) -> SettledView {
        let instances = self.world.instances(&self.deployment);
        let gpus = instances
            .iter()
            .filter(|i| {
                matches!(
                    i.state,
                    InstanceState::Starting | InstanceState::Ready | InstanceState::Terminating
                )
            })
            .map(|i| i.gpus)
            .sum();
        SettledView {
            revision: self.world.revision(),
            gpus,
            unadmitted: instances.iter().any(|i| unadmitted(i.state)),
            replicas: self.world_counts(),
            ready: self.mirror.ready(&self.world, &self.deployment),
        }
    }

    /// The target's counts as the world holds them.
    fn world_counts(&self) -> BTreeMap<String, i32> {
        self.world
            .deployment(&self.deployment)
            .map(mirror::role_counts)
            .unwrap_or_default()
    }

    /// The scaler as the cluster holds it.
    pub(crate) fn scaler(&self) -> Option<Arc<ModelDeploymentScaler>> {
        self.cluster.scaler(&self.key.namespace, &self.key.name)
    }

    fn target_generation(&self) -> Option<i64> {
        self.cluster
            .read(
                Kind::Target,
                &self.deployment.namespace,
                &self.deployment.name,
                |doc| doc["metadata"]["generation"].as_i64(),
            )
            .flatten()
    }

    /// The scaler as the cluster holds it now, status included (for tests between passes).
    pub fn scaler_now(&self) -> Option<ModelDeploymentScaler> {
        self.scaler().map(|s| s.as_ref().clone())
    }

    /// The target as the cluster holds it now: the spec the scaler wrote and the status the
    /// world last reported (for tests between passes).
    pub fn target_now(&self) -> Option<ModelDeployment> {
        self.cluster
            .get(
                Kind::Target,
                &self.deployment.namespace,
                &self.deployment.name,
            )
            .and_then(|doc| serde_json::from_value(doc).ok())
    }

    /// The world's instances of the target (pending ones included).
    pub fn instances_now(&self) -> Vec<mds_sim::InstanceView> {
        self.world.instances(&self.deployment)
    }

    /// Sets an instance type's GPU quota from now on (`None`: unlimited), as an administrator
    /// raising or lowering a ClusterQueue's quota would.
    pub fn set_quota(&mut self, instance_type: &str, gpus: Option<u32>) {
        self.world.set_quota(instance_type, gpus);
    }

    /// Rules broken so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Ends the run at `end`: the summary and the per-minute bins.
    pub fn finish(self, end: Timestamp) -> (Summary, Vec<Bin>, Vec<Violation>) {
        let end_t = self.seconds(end);
        let unfinished = self.world.unfinished_arrivals(&self.deployment);
        let (summary, bins) = self.recorder.finish(end_t, &unfinished);
        (summary, bins, self.violations)
    }

    /// Runs passes until `end` (exclusive) and returns them; the world runs to `end`.
    pub fn run_until(&mut self, end: Timestamp) -> Result<Vec<PassRecord>, SimError> {
        let mut records = Vec::new();
        while self.scaling.next_due() < end {
            let now = self.scaling.next_due();
            if self.fault_restart(now) {
                continue;
            }
            self.advance_world(now)?;
            records.extend(self.pass(now)?);
        }
        self.advance_world(end)?;
        Ok(records)
    }

    /// What is due at `now`, whoever scales: the world mirrored for a scaler that reads the
    /// cluster, faults armed around the pass, the spec it wrote taken by the world, the
    /// pass recorded and, for a scaler our spec binds, checked against the invariants.
    fn pass(&mut self, now: Timestamp) -> Result<Option<PassRecord>, SimError> {
        let t = self.seconds(now);
        if self.scaling.reads_cluster() {
            self.mirror
                .sync(&self.world, &self.deployment, &self.cluster, now);
        }
        let before = self.mirror.counts(&self.cluster, &self.deployment);
        let ready = self.mirror.ready(&self.world, &self.deployment);
        let checked = self.scaling.bound_by_spec();
        let facts_before = checked.then(|| {
            let instances = self.world.instances(&self.deployment);
            let mut held: BTreeMap<String, i32> = BTreeMap::new();
            for i in instances
                .iter()
                .filter(|i| i.state != InstanceState::Terminating)
            {
                *held.entry(i.role.clone()).or_default() += 1;
            }
            let waiting = instances.iter().any(|i| unadmitted(i.state));
            (self.scaler(), self.target_generation(), waiting, held)
        });
        self.fault_before_pass(t);
        let ctx = Ctx {
            world: &self.world,
            cluster: &self.cluster,
            deployment: &self.deployment,
            faults: &self.faults,
            start: self.start,
        };
        let Some(passed) = self.scaling.pass(&ctx, now)? else {
            return Ok(None);
        };
        self.fault_after_pass(t, passed.rollback);
        self.mirror
            .adopt_target(&mut self.world, &self.cluster, &self.deployment)?;
        let after = self.mirror.counts(&self.cluster, &self.deployment);
        if let Some((Some(scaler), generation, waiting, held)) = &facts_before {
            let Passed {
                write, rollback, ..
            } = &passed;
            self.violations.extend(invariants::check(&PassFacts {
                now,
                t,
                scaler,
                before: &before,
                after: &after,
                target_changed: self.target_generation() != *generation,
                wrote_target: write.as_ref().is_some_and(|(_, landed)| *landed),
                unadmitted: *waiting,
                held,
                rollback: *rollback,
            }));
        }
        self.recorder.pass(t, &before, &after);
        Ok(Some(PassRecord {
            t,
            replicas: after,
            ready,
            write: passed.write,
            plan: passed.plan,
            decided: passed.decided,
            forecasts: passed.forecasts,
        }))
    }
}

/// An instance waiting for admission (no Workload yet, queued, parked, or reserved and not
/// yet admitted).
fn unadmitted(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Composing
            | InstanceState::Queued
            | InstanceState::Parked
            | InstanceState::QuotaReserved
    )
}

/// The roles' settings and loads, by role, as a scenario gives them.
type Roles = BTreeMap<String, (RoleSettings, LoadProfile)>;

/// The longest of the roles' cold starts (none: the world's default role's).
fn longest_cold_start(roles: &Roles, config: &WorldConfig) -> SignedDuration {
    roles
        .values()
        .map(|(settings, _)| settings.cold_start)
        .max()
        .unwrap_or(config.default_role.cold_start)
}

/// How long the world runs before the start: the target's initial replicas are warm when the
/// run starts, so the world runs a cold start (at its longest draw) and a margin before the
/// first pass and request.
fn warmup(roles: &Roles, config: &WorldConfig) -> SignedDuration {
    roles
        .values()
        .map(|(settings, _)| {
            SignedDuration::from_secs_f64(
                settings.cold_start.as_secs_f64() * (1.0 + settings.cold_start_spread),
            )
        })
        .max()
        .unwrap_or(config.default_role.cold_start)
        + SignedDuration::from_secs(30)
}

/// Applies the target to the cluster and returns it as the cluster stored it.
fn store_target(
    cluster: &MemoryCluster,
    target: &ModelDeployment,
) -> Result<ModelDeployment, SimError> {
    let target_doc = serde_json::to_value(target)
        .map_err(|e| SimError::Input(format!("the target does not serialise: {e}")))?;
    let stored = cluster
        .apply(Kind::Target, target_doc)
        .map_err(|error| SimError::Cluster {
            what: "the target".into(),
            error,
        })?;
    serde_json::from_value(stored)
        .map_err(|e| SimError::Input(format!("the stored target does not parse: {e}")))
}

/// Roles whose engines complete requests: all but prefill ones.
fn completing_roles(target: &ModelDeployment) -> Vec<String> {
    target
        .spec
        .roles
        .iter()
        .filter(|r| WorkKind::of(&r.kind()) != WorkKind::Prefill)
        .map(|r| r.name.clone())
        .collect()
}

/// The profile of the engine a request enters first: the first role's (every role runs one
/// profile), else `default`.
fn entry_profile(
    target: &ModelDeployment,
    roles: &Roles,
    default: RequestProfile,
) -> RequestProfile {
    target
        .spec
        .roles
        .first()
        .and_then(|r| roles.get(&r.name))
        .map_or(default, |(s, _)| s.request_profile)
}

/// Puts the target into the world: its deployment, each role's settings, the world run to
/// `start`, then each role's load.
fn stage_world(
    world: &mut World,
    target: ModelDeployment,
    roles: Roles,
    start: Timestamp,
) -> Result<DeploymentKey, SimError> {
    let deployment = world.apply_deployment(target)?;
    for (role, (settings, _)) in &roles {
        world.set_role_settings(&deployment, role, *settings)?;
    }
    world.advance_to(start)?;
    for (role, (_, load)) in roles {
        world.set_load(&deployment, &role, load)?;
    }
    Ok(deployment)
}

/// The run's grader: with requests, each one's TTFT objective on an idle replica of the entry
/// engine (plus the KV hand-off when prefill and decode are disaggregated).
fn grader(
    target: &ModelDeployment,
    slo: Slo,
    requests: Option<&(Arc<Trace>, RequestServing)>,
    entry_profile: RequestProfile,
) -> Grader {
    let disaggregated = [RoleKind::Prefill, RoleKind::Decode]
        .iter()
        .all(|kind| target.spec.roles.iter().any(|r| &r.kind() == kind));
    let idle = requests.map(|(_, serving)| IdleReplica {
        profile: entry_profile,
        handoff_seconds_per_token: disaggregated
            .then(|| serving.kv_bytes_per_token / serving.link_bytes_per_second),
    });
    Grader::new(
        slo,
        requests.map(|(trace, _)| trace.as_ref()),
        idle.as_ref(),
    )
}

/// Applies the scaler to the cluster in `namespace` and returns its name as stored.
fn store_scaler(
    cluster: &MemoryCluster,
    scaler: &ModelDeploymentScaler,
    namespace: &str,
) -> Result<String, SimError> {
    let mut scaler_doc = serde_json::to_value(scaler)
        .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
    scaler_doc["metadata"]["namespace"] = serde_json::json!(namespace);
    let stored = cluster
        .apply(Kind::Scaler, scaler_doc)
        .map_err(|error| SimError::Cluster {
            what: "the scaler".into(),
            error,
        })?;
    Ok(stored["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}
