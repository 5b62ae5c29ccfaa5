//! The simulator's driver (ARCHITECTURE: the simulator is a second shell). One thread, no
//! sockets, no timers: the `mds-sim` world is mirrored into a `MemoryCluster` the way the lab's
//! stand-in mirrors it into a real API server (the same `mds_sim::objects` conversion), and
//! the operator's own `Worker` passes on each scaler, reading the engine pages the world
//! renders through the production parser. Time jumps from one pass to the next: the earlier
//! of the scaler's sampling interval and the core's `wake_at`. The same inputs give the same
//! run, byte for byte.

mod mirror;
pub mod replay;
mod source;

use std::collections::BTreeMap;

use futures::executor::block_on;
use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::values;
use mds_api::target::ModelDeployment;
use mds_sim::{DeploymentKey, LoadProfile, RoleSettings, World, WorldConfig, WorldError};
use mds_worker::memory_cluster::{Kind, MemoryCluster};
use mds_worker::schedule::{Fingerprint, Next, Schedule};
use mds_worker::{ScalerKey, Worker, WriteError};
use serde::Serialize;

use mirror::Mirror;
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
}

/// A run in progress.
pub struct Simulation {
    world: World,
    cluster: MemoryCluster,
    mirror: Mirror,
    key: ScalerKey,
    deployment: DeploymentKey,
    worker: Worker,
    start: Timestamp,
    next_pass: Timestamp,
    schedule: Schedule,
}

impl Simulation {
    pub fn new(scenario: Scenario) -> Result<Simulation, SimError> {
        let Scenario {
            config,
            start,
            target,
            scaler,
            roles,
            quota,
        } = scenario;
        let mut world = World::new(config, start)?;
        for (instance_type, gpus) in quota {
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
        let deployment = world.apply_deployment(stored)?;
        for (role, (settings, load)) in roles {
            world.set_role_settings(&deployment, &role, settings)?;
            world.set_load(&deployment, &role, load)?;
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
        Ok(Simulation {
            world,
            cluster,
            mirror: Mirror::default(),
            worker: Worker::new(key.clone()),
            key,
            deployment,
            start,
            next_pass: start,
            schedule: Schedule::new(start),
        })
    }

    /// Runs passes until `end` (exclusive) and returns them.
    pub fn run_until(&mut self, end: Timestamp) -> Result<Vec<PassRecord>, SimError> {
        let mut records = Vec::new();
        while self.next_pass < end {
            let now = self.next_pass;
            self.world.advance_to(now)?;
            self.mirror
                .sync(&self.world, &self.deployment, &self.cluster, now);
            let pages = Pages::of(&self.world, &self.deployment);
            let ready = self.mirror.ready(&self.world, &self.deployment);
            let report = block_on(self.worker.pass(&self.cluster, &pages, now));
            self.mirror
                .adopt_target(&mut self.world, &self.cluster, &self.deployment)?;
            // The operator's own schedule decides when the next pass is due: the interval,
            // brought forward to the core's `wake_at` but not within its floor. A change seen
            // between passes does not bring one forward here (every fingerprint is the same).
            let interval = self.interval();
            self.schedule.ran(now, false, Fingerprint::default());
            self.schedule.wake(report.wake_at);
            self.next_pass = match self.schedule.next(now, interval, &Fingerprint::default()) {
                Next::Sleep(due) => due,
                Next::Run { .. } => now + interval,
            };
            records.push(PassRecord {
                t: now.duration_since(self.start).as_secs_f64(),
                replicas: self.mirror.counts(&self.cluster, &self.deployment),
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
            });
        }
        Ok(records)
    }

    /// The scaler's sampling interval as it stands in the cluster (the spec's default when
    /// unset).
    fn interval(&self) -> std::time::Duration {
        let seconds = self
            .cluster
            .get(Kind::Scaler, &self.key.namespace, &self.key.name)
            .and_then(|doc| serde_json::from_value::<ModelDeploymentScaler>(doc).ok())
            .map_or(values::INTERVAL_SECONDS as i64, |s| {
                s.spec.interval_seconds()
            });
        std::time::Duration::from_secs(seconds.max(1) as u64)
    }
}
