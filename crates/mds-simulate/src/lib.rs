//! The simulator's driver (ARCHITECTURE: the simulator is a second shell). One thread, no
//! sockets, no timers: the `mds-sim` world is mirrored into a `MemoryCluster` the way the lab's
//! stand-in mirrors it into a real API server (the same `mds_sim::objects` conversion), and
//! the operator's own `Worker` passes on each scaler, reading the engine pages the world
//! renders through the production parser. Time jumps from one pass to the next: the earlier
//! of the scaler's sampling interval and the core's `wake_at`. The same inputs give the same
//! run, byte for byte.

pub mod compare;
pub mod faults;
pub mod html;
pub mod invariants;
pub mod knee;
mod mirror;
pub mod oracle;
mod peer_drive;
pub mod peers;
pub use mds_sim::profile;
pub mod replay;
pub mod report;
pub mod roster;
pub mod run;
mod source;
pub mod suggest;
pub mod targets;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::executor::block_on;
use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::values;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_sim::{
    DeploymentKey, InstanceState, LoadProfile, RequestServing, RoleSettings, WorkKind, World,
    WorldConfig, WorldError,
};
use mds_worker::memory_cluster::{Kind, MemoryCluster};
use mds_worker::schedule::{Fingerprint, Next, Schedule};
use mds_worker::{ScalerKey, Worker, WriteError};
use serde::Serialize;

use invariants::{PassFacts, Violation};
use mirror::Mirror;
use peer_drive::{PeerDriver, gpu_budget, role_shapes};
use peers::Peer;
use report::{Bin, Recorder, Slo, Summary};
use source::Pages;

/// Why a simulation cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the world refused it: {0}")]
    World(#[from] WorldError),
    #[error("the cluster refused {what}: {error}")]
    Cluster { what: String, error: WriteError },
    #[error("{0}")]
    Input(String),
}

/// One scaler pass as the run records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassRecord {
    /// Seconds since the start.
    pub t: f64,
    /// The target's counts after the pass.
    pub replicas: BTreeMap<String, i32>,
    /// Ready replicas per role as the world reports them before the pass.
    pub ready: BTreeMap<String, i32>,
    /// The target write the pass made (`commit`, `bind`, ...) and whether it landed.
    pub write: Option<(String, bool)>,
    /// Each planned role's raw recommendation and reason.
    pub plan: BTreeMap<String, (i32, String)>,
}

/// What a run is made of: the world's settings, one target and the scaler that owns it, each
/// role's engine and load.
pub struct Scenario {
    pub config: WorldConfig,
    pub start: Timestamp,
    pub target: ModelDeployment,
    pub scaler: ModelDeploymentScaler,
    pub roles: BTreeMap<String, (RoleSettings, LoadProfile)>,
    /// GPU quota per instance type (`None`: unlimited).
    pub quota: BTreeMap<String, Option<u32>>,
    /// Requests offered to the target, served request by request (`None`: each role's fluid
    /// load in `roles` serves).
    pub requests: Option<(Arc<Trace>, RequestServing)>,
    /// What a request is measured against.
    pub slo: Slo,
}

/// Who writes the target's counts.
enum Controller {
    /// The operator's own worker, on the operator's own schedule.
    Mds {
        worker: Box<Worker>,
        schedule: Schedule,
    },
    /// A peer autoscaler (module `peers`).
    Peer(PeerDriver),
}

/// A run in progress.
pub struct Simulation {
    world: World,
    cluster: MemoryCluster,
    mirror: Mirror,
    key: ScalerKey,
    deployment: DeploymentKey,
    controller: Controller,
    start: Timestamp,
    next_pass: Timestamp,
    recorder: Recorder,
    violations: Vec<Violation>,
    /// Fluid load offered while nothing was routed, as last seen, per role.
    unrouted_seen: BTreeMap<String, f64>,
    /// Requests are served request by request (else by the fluid engines).
    request_level: bool,
    /// Roles whose engines complete requests (not prefill or encode), for the fluid count.
    completing_roles: Vec<String>,
    /// Faults on cue (module `faults`).
    faults: faults::Injector,
}

impl Simulation {
    /// The operator's worker scales the target.
    pub fn new(scenario: Scenario) -> Result<Simulation, SimError> {
        Simulation::build(scenario, None)
    }

    /// `peer` scales the target instead, within the scaler's bounds (the rest of the scaler
    /// is not used).
    pub fn with_peer(scenario: Scenario, peer: Box<dyn Peer>) -> Result<Simulation, SimError> {
        Simulation::build(scenario, Some(peer))
    }

    fn build(scenario: Scenario, peer: Option<Box<dyn Peer>>) -> Result<Simulation, SimError> {
        let Scenario {
            config,
            start,
            target,
            scaler,
            roles,
            quota,
            requests,
            slo,
        } = scenario;
        let cold_start = roles
            .values()
            .map(|(settings, _)| settings.cold_start)
            .max()
            .unwrap_or(config.default_role.cold_start);
        // The target's initial replicas are warm when the run starts: the world runs a
        // cold start (at its longest draw) and a margin before the first pass and request.
        let warmup = roles
            .values()
            .map(|(settings, _)| {
                SignedDuration::from_secs_f64(
                    settings.cold_start.as_secs_f64() * (1.0 + settings.cold_start_spread),
                )
            })
            .max()
            .unwrap_or(config.default_role.cold_start)
            + SignedDuration::from_secs(30);
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
        let target_doc = serde_json::to_value(&target)
            .map_err(|e| SimError::Input(format!("the target does not serialise: {e}")))?;
        let stored =
            cluster
                .apply(Kind::Target, target_doc)
                .map_err(|error| SimError::Cluster {
                    what: "the target".into(),
                    error,
                })?;
        let stored: ModelDeployment = serde_json::from_value(stored)
            .map_err(|e| SimError::Input(format!("the stored target does not parse: {e}")))?;
        let completing_roles = stored
            .spec
            .roles
            .iter()
            .filter(|r| WorkKind::of(&r.kind()) != WorkKind::Prefill)
            .map(|r| r.name.clone())
            .collect();
        let budget = gpu_budget(&stored, &quota);
        let shapes = role_shapes(&scaler, &stored, &roles);
        let deployment = world.apply_deployment(stored)?;
        for (role, (settings, _)) in &roles {
            world.set_role_settings(&deployment, role, *settings)?;
        }
        world.advance_to(start)?;
        for (role, (_, load)) in roles {
            world.set_load(&deployment, &role, load)?;
        }
        let request_level = requests.is_some();
        if let Some((trace, serving)) = requests {
            world.set_requests(&deployment, trace, serving)?;
        }
        let mut scaler_doc = serde_json::to_value(&scaler)
            .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
        scaler_doc["metadata"]["namespace"] = serde_json::json!(namespace);
        let stored =
            cluster
                .apply(Kind::Scaler, scaler_doc)
                .map_err(|error| SimError::Cluster {
                    what: "the scaler".into(),
                    error,
                })?;
        let name = stored["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = ScalerKey { namespace, name };
        let controller = match peer {
            None => Controller::Mds {
                worker: Box::new(Worker::new(key.clone())),
                schedule: Schedule::new(start),
            },
            Some(peer) => Controller::Peer(PeerDriver::new(peer, shapes, budget, start)),
        };
        Ok(Simulation {
            world,
            cluster,
            mirror: Mirror::default(),
            controller,
            key,
            deployment,
            start,
            next_pass: start,
            recorder: Recorder::new(slo, 60.0, cold_start.as_secs_f64(), budget),
            violations: Vec::new(),
            unrouted_seen: BTreeMap::new(),
            request_level,
            completing_roles,
            faults: faults::Injector::default(),
        })
    }

    /// Seconds since the start.
    fn seconds(&self, t: Timestamp) -> f64 {
        t.duration_since(self.start).as_secs_f64()
    }

    /// Steps the world tick by tick to `to`, recording each span.
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
        let unadmitted = instances.iter().any(|i| unadmitted(i.state));
        let replicas = self.world_counts();
        let ready = self.mirror.ready(&self.world, &self.deployment);
        self.recorder
            .span(t0, t1, gpus, unadmitted, &replicas, &ready);
        for served in self.world.take_served(&self.deployment) {
            // Request times are on the requests' axis, which starts with the run.
            self.recorder.served(&served);
        }
        if self.request_level {
            return;
        }
        let dt = t1 - t0;
        // A request completes at a Server or Decode engine; prefill engines are not counted.
        for i in instances.iter().filter(|i| i.routed) {
            let Some(engine) = i.engine.as_ref().filter(|e| e.kind != WorkKind::Prefill) else {
                continue;
            };
            let last = engine.last;
            self.recorder.fluid_served(
                t0,
                last.served_requests_per_second * dt,
                last.ttft_mean_seconds,
                Some(last.itl_mean_seconds),
            );
        }
        for role in &self.completing_roles {
            let total = self.world.unserved(&self.deployment, role).requests;
            let seen = self
                .unrouted_seen
                .insert(role.clone(), total)
                .unwrap_or(0.0);
            self.recorder.fluid_unrouted(t0, total - seen);
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
    fn scaler(&self) -> Option<ModelDeploymentScaler> {
        self.cluster
            .get(Kind::Scaler, &self.key.namespace, &self.key.name)
            .and_then(|doc| serde_json::from_value(doc).ok())
    }

    fn target_generation(&self) -> Option<i64> {
        self.cluster
            .get(
                Kind::Target,
                &self.deployment.namespace,
                &self.deployment.name,
            )
            .and_then(|doc| doc["metadata"]["generation"].as_i64())
    }

    /// The scaler as the cluster holds it now, status included (for tests between passes).
    pub fn scaler_now(&self) -> Option<ModelDeploymentScaler> {
        self.scaler()
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
        while self.next_pass < end {
            let now = self.next_pass;
            if let Some(first) = self.fault_restart(now) {
                self.next_pass = first;
                continue;
            }
            self.advance_world(now)?;
            let record = match self.controller {
                Controller::Mds { .. } => Some(self.pass(now)?),
                Controller::Peer(_) => self.peer_pass(now)?,
            };
            records.extend(record);
        }
        self.advance_world(end)?;
        Ok(records)
    }

    /// One pass of the worker at `now`, checked against the spec's invariants.
    fn pass(&mut self, now: Timestamp) -> Result<PassRecord, SimError> {
        self.mirror
            .sync(&self.world, &self.deployment, &self.cluster, now);
        let t = self.seconds(now);
        self.fault_before_pass(t);
        let pages =
            faults::FaultyPages::new(Pages::of(&self.world, &self.deployment), &self.faults, t);
        let ready = self.mirror.ready(&self.world, &self.deployment);
        let before = self.mirror.counts(&self.cluster, &self.deployment);
        let scaler = self.scaler();
        let generation = self.target_generation();
        let instances = self.world.instances(&self.deployment);
        let waiting = instances.iter().any(|i| unadmitted(i.state));
        let mut held: BTreeMap<String, i32> = BTreeMap::new();
        for i in instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminating)
        {
            *held.entry(i.role.clone()).or_default() += 1;
        }
        let Controller::Mds { worker, .. } = &mut self.controller else {
            return Err(SimError::Input(
                "an operator pass without the operator".into(),
            ));
        };
        let report = block_on(worker.pass(&self.cluster, &pages, now));
        self.fault_after_pass(t, &report);
        self.mirror
            .adopt_target(&mut self.world, &self.cluster, &self.deployment)?;
        let after = self.mirror.counts(&self.cluster, &self.deployment);
        if let Some(scaler) = &scaler {
            let wrote = report
                .write
                .as_ref()
                .is_some_and(|(_, result)| result.is_ok());
            self.violations.extend(invariants::check(&PassFacts {
                now,
                t,
                scaler,
                before: &before,
                after: &after,
                target_changed: self.target_generation() != generation,
                wrote_target: wrote,
                unadmitted: waiting,
                held: &held,
                rollback: report
                    .write
                    .as_ref()
                    .is_some_and(|(kind, _)| *kind == mds_core::WriteKind::Rollback),
            }));
        }
        self.recorder.pass(t, &before, &after);
        // The operator's own schedule decides when the next pass is due: the interval,
        // brought forward to the core's `wake_at` but not within its floor. A change seen
        // between passes does not bring one forward here (every fingerprint is the same).
        // The scaler's interval as the pass read it (a pass writes status, not spec).
        let interval = std::time::Duration::from_secs(
            scaler
                .as_ref()
                .map_or(values::INTERVAL_SECONDS as i64, |s| {
                    s.spec.interval_seconds()
                })
                .max(1) as u64,
        );
        self.next_pass = match &mut self.controller {
            Controller::Mds { schedule, .. } => {
                schedule.ran(now, false, Fingerprint::default());
                schedule.wake(report.wake_at);
                match schedule.next(now, interval, &Fingerprint::default()) {
                    Next::Sleep(due) => due,
                    Next::Run { .. } => now + interval,
                }
            }
            Controller::Peer(_) => now + interval,
        };
        Ok(PassRecord {
            t,
            replicas: after,
            ready,
            write: report
                .write
                .as_ref()
                .map(|(kind, result)| (kind.as_str().to_string(), result.is_ok())),
            plan: report
                .plan
                .iter()
                .flat_map(|p| &p.roles)
                .map(|r| (r.name.clone(), (r.raw, r.reason.as_str().to_string())))
                .collect(),
        })
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
