//! The world: GPUStack `ModelDeployment`s, their instances, Kueue quota and the engines, as
//! one pure state machine stepped by explicit time. No I/O, no clock, no randomness: the same
//! calls give the same world, byte for byte.
//!
//! Each [`World::step`] is one pass of the stand-in operator and of Kueue at `now`: engines
//! serve the load offered since the previous step, the deployment's retirement advances by at
//! most one state, the spec is applied (new ordinals, at most one removal), Workloads appear,
//! Kueue reserves quota in order and admits, engines finish loading, and every status is
//! rebuilt. [`World::advance_to`] steps every [`WorldConfig::tick`] up to a time.
//!
//! The lifecycle part of a step runs only when something is due (next-event): a timer ends, a
//! Workload waits for Kueue, a retirement is under way, or something outside changed the world
//! since the last pass. In a settled deployment every part of the pass would leave the world
//! as it is, so a step only serves load; [`World::revision`] says when objects may have changed.

mod config;
mod deployment;
mod faults;
mod instance;
mod kueue;
mod pages;
mod requests;
mod retirement;
mod serving;
mod status;
mod views;

use std::collections::BTreeMap;
use std::fmt;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::target::{ModelDeployment, Workload};
use thiserror::Error;

pub use config::{RetirementBudgets, RoleSettings, WorldConfig};
pub use instance::loopback_ip;
pub use pages::PageSource;
pub use requests::{RequestServing, Router, ServedOutcome, ServedRequest};
pub use retirement::RetirementStep;
pub use views::{
    InstanceState, InstanceView, MODEL_DEPLOYMENT_API_VERSION, POD_GROUP_TOTAL_COUNT, PodPhase,
    PodView,
};

use crate::engine::EngineState;
use crate::load::{Arrivals, LoadProfile};
use deployment::{AssignedLoad, Deployment};

/// A ModelDeployment's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeploymentKey {
    pub namespace: String,
    pub name: String,
}

impl DeploymentKey {
    pub fn new(namespace: &str, name: &str) -> DeploymentKey {
        DeploymentKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for DeploymentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Something that happened, for logs and reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldEvent {
    pub at: Timestamp,
    pub deployment: DeploymentKey,
    pub message: String,
}

/// Quota of one instance type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaUsage {
    /// `None`: unlimited.
    pub quota: Option<u32>,
    /// GPUs held by Workloads with quota (terminating Pods included).
    pub reserved: u32,
}

#[derive(Clone, Debug, PartialEq, Error)]
pub enum WorldError {
    #[error("invalid world configuration: {0}")]
    Config(String),
    #[error("time went backwards: the world is at {now}, asked to step to {to}")]
    TimeWentBackwards { now: Timestamp, to: Timestamp },
    #[error("ModelDeployment {field}: {message}")]
    InvalidDeployment { field: String, message: String },
    #[error("no ModelDeployment {0}")]
    NoDeployment(DeploymentKey),
    #[error("ModelDeployment {deployment} has no instance {ordinal} of role {role:?}")]
    NoInstance {
        deployment: DeploymentKey,
        role: String,
        ordinal: u32,
    },
    #[error("no Pod or Workload {namespace}/{name}")]
    NoObject { namespace: String, name: String },
    #[error("role {role:?} settings: {message}")]
    InvalidSettings { role: String, message: String },
    #[error("{0}")]
    NotApplicable(String),
}

/// `t + d`, saturating instead of overflowing.
pub(crate) fn later(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Deterministic identities: UIDs, address slots and queue order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Ids {
    serial: u64,
    slot: u32,
    sequence: u64,
    /// Draws of the world (cold starts), seeded by the config.
    pub rng: crate::rng::Rng,
}

impl Ids {
    pub fn next_serial(&mut self) -> u64 {
        self.serial = self.serial.saturating_add(1);
        self.serial
    }

    pub fn next_slot(&mut self) -> u32 {
        let slot = self.slot;
        self.slot = self.slot.saturating_add(1);
        slot
    }

    pub fn next_sequence(&mut self) -> u64 {
        self.sequence = self.sequence.saturating_add(1);
        self.sequence
    }

    /// A UID-shaped string for a serial.
    pub fn uid(serial: u64) -> String {
        format!("00000000-0000-4000-8000-{serial:012x}")
    }
}

/// What a pass needs besides the deployments.
pub(crate) struct Ctx<'a> {
    pub config: &'a WorldConfig,
    pub ids: &'a mut Ids,
    pub events: &'a mut Vec<WorldEvent>,
    pub now: Timestamp,
}

impl Ctx<'_> {
    pub fn event(&mut self, deployment: &DeploymentKey, message: String) {
        self.events.push(WorldEvent {
            at: self.now,
            deployment: deployment.clone(),
            message,
        });
    }
}

/// The GPUStack stand-in, Kueue and the engines.
#[derive(Clone, Debug)]
pub struct World {
    config: WorldConfig,
    now: Timestamp,
    quotas: BTreeMap<String, u32>,
    deployments: BTreeMap<DeploymentKey, Deployment>,
    ids: Ids,
    events: Vec<WorldEvent>,
    /// Something outside the stand-in changed the world since the last lifecycle pass (a
    /// spec, a quota, a setting, a fault): the next step runs the whole pass.
    touched: bool,
    /// Counts lifecycle passes and changes from outside: Pods, Workloads, instances and
    /// statuses are the same while it stays the same.
    revision: u64,
}

impl World {
    pub fn new(config: WorldConfig, start: Timestamp) -> Result<World, WorldError> {
        config.validate().map_err(WorldError::Config)?;
        let first_slot = config.first_ip_slot;
        let rng = crate::rng::Rng::stream(config.seed, "world");
        Ok(World {
            config,
            now: start,
            quotas: BTreeMap::new(),
            deployments: BTreeMap::new(),
            ids: Ids {
                slot: first_slot,
                rng,
                ..Ids::default()
            },
            events: Vec::new(),
            touched: true,
            revision: 0,
        })
    }

    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// The time of the last step.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Changes whenever the world's objects may have changed (a lifecycle pass or a change
    /// from outside); between two equal readings only the engines moved, so a caller may keep
    /// what it derived from Pods, Workloads, instances and statuses.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// A change from outside the stand-in: the next step runs the whole lifecycle pass.
    fn touch(&mut self) {
        self.touched = true;
        self.revision = self.revision.wrapping_add(1);
    }

    /// Sets the GPU quota of an instance type (`None`: unlimited, the default). Lowering it
    /// below what is held evicts nothing; admissions wait until usage fits.
    pub fn set_quota(&mut self, instance_type: &str, gpus: Option<u32>) {
        self.touch();
        match gpus {
            Some(gpus) => self.quotas.insert(instance_type.to_string(), gpus),
            None => self.quotas.remove(instance_type),
        };
    }

    /// Quota and reservations of every instance type with either.
    pub fn quota_usage(&self) -> BTreeMap<String, QuotaUsage> {
        let used = kueue::usage(&self.deployments);
        let mut out: BTreeMap<String, QuotaUsage> = BTreeMap::new();
        for name in used.keys().chain(self.quotas.keys()) {
            out.insert(
                name.clone(),
                QuotaUsage {
                    quota: self.quotas.get(name).copied(),
                    reserved: used.get(name).copied().unwrap_or(0),
                },
            );
        }
        out
    }

    /// Creates or updates a ModelDeployment (spec, labels, annotations); the stand-in acts on
    /// it at the next step. The world owns `status`. `metadata.generation` follows the API
    /// server: the larger of the given one and the stored one plus one when the spec changed,
    /// so both a mirror (passing the server's generation) and a simulator (passing none) get
    /// the right value. A different `metadata.uid` replaces the deployment.
    pub fn apply_deployment(&mut self, md: ModelDeployment) -> Result<DeploymentKey, WorldError> {
        self.touch();
        let key = validate_deployment(&md)?;
        let mut md = md;
        md.status = None;
        let replaced = self.deployments.get(&key).is_some_and(|old| {
            md.metadata
                .uid
                .as_deref()
                .is_some_and(|uid| uid != old.uid())
        });
        if replaced {
            self.deployments.remove(&key);
        }
        match self.deployments.get_mut(&key) {
            Some(dep) => {
                let bump = i64::from(dep.object.spec != md.spec);
                let generation = md
                    .metadata
                    .generation
                    .unwrap_or(0)
                    .max(dep.generation().saturating_add(bump));
                md.metadata.generation = Some(generation);
                md.metadata.uid = Some(dep.uid().to_string());
                md.metadata.creation_timestamp = dep.object.metadata.creation_timestamp.clone();
                md.metadata.namespace = Some(key.namespace.clone());
                md.status = dep.object.status.take();
                dep.object = md;
            }
            None => {
                md.metadata.generation = Some(md.metadata.generation.unwrap_or(1).max(1));
                if md.metadata.uid.is_none() {
                    md.metadata.uid = Some(Ids::uid(self.ids.next_serial()));
                }
                md.metadata.creation_timestamp.get_or_insert(Time(self.now));
                md.metadata.namespace = Some(key.namespace.clone());
                // No status until the stand-in's first pass, as on a real cluster.
                self.deployments
                    .insert(key.clone(), Deployment::new(key.clone(), md, self.now));
            }
        }
        Ok(key)
    }

    /// Deletes a ModelDeployment with everything it owns (Pods, Workloads, quota) at once.
    pub fn remove_deployment(&mut self, key: &DeploymentKey) -> Result<(), WorldError> {
        self.touch();
        self.deployments
            .remove(key)
            .map(|_| ())
            .ok_or_else(|| WorldError::NoDeployment(key.clone()))
    }

    fn deployment_mut(&mut self, key: &DeploymentKey) -> Result<&mut Deployment, WorldError> {
        self.deployments
            .get_mut(key)
            .ok_or_else(|| WorldError::NoDeployment(key.clone()))
    }

    /// Cold start, engine capacity and GPUs per Pod of a role's future instances (and the
    /// engine capacity of its current ones).
    pub fn set_role_settings(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        settings: RoleSettings,
    ) -> Result<(), WorldError> {
        settings
            .validate()
            .map_err(|message| WorldError::InvalidSettings {
                role: role.to_string(),
                message,
            })?;
        self.touch();
        self.deployment_mut(key)?
            .settings
            .insert(role.to_string(), settings);
        Ok(())
    }

    /// Offers a load profile to a role; its time axis starts now.
    pub fn set_load(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        profile: LoadProfile,
    ) -> Result<(), WorldError> {
        let origin = self.now;
        self.touch();
        self.deployment_mut(key)?
            .loads
            .insert(role.to_string(), AssignedLoad { profile, origin });
        Ok(())
    }

    /// The load profile offered to a role and when its time axis began.
    pub fn load_of(&self, key: &DeploymentKey, role: &str) -> Option<(&LoadProfile, Timestamp)> {
        let load = self.deployments.get(key)?.loads.get(role)?;
        Some((&load.profile, load.origin))
    }

    /// Offers a stream of requests to a deployment, its time axis starting now: from the next
    /// step on, its engines run request-level and its fluid loads are ignored. Engines already
    /// running start over as request-level ones (their pages restart, with a new process start
    /// time). Each request's end is reported by [`World::take_served`].
    pub fn set_requests(
        &mut self,
        key: &DeploymentKey,
        trace: std::sync::Arc<crate::load::Trace>,
        serving: RequestServing,
    ) -> Result<(), WorldError> {
        serving.validate().map_err(WorldError::Config)?;
        self.touch();
        let now = self.now;
        let config = self.config.clone();
        let dep = self.deployment_mut(key)?;
        dep.served_until = dep.served_until.max(now);
        let profiles: BTreeMap<String, crate::engine::request::RequestProfile> = dep
            .roles
            .keys()
            .map(|role| (role.clone(), dep.settings(role, &config).request_profile))
            .collect();
        for (role, instances) in dep.roles.iter_mut() {
            for instance in instances.instances.values_mut() {
                if instance.engine.is_some() {
                    instance.start_engine(now, Some((&profiles[role], 0.0)));
                }
            }
        }
        dep.requests = Some(requests::RequestLoad::new(trace, now, serving));
        Ok(())
    }

    /// Requests of a deployment that ended (finished, refused, unrouted or lost) since the
    /// last call, in the order they ended within each step.
    pub fn take_served(&mut self, key: &DeploymentKey) -> Vec<ServedRequest> {
        self.deployments
            .get_mut(key)
            .and_then(|d| d.requests.as_mut())
            .map(|r| r.take_served())
            .unwrap_or_default()
    }

    /// The gaps between output tokens a deployment's engines observed since the last call, per
    /// minute of the requests' axis.
    pub fn take_gaps(&mut self, key: &DeploymentKey) -> crate::engine::gaps::GapLog {
        self.deployments
            .get_mut(key)
            .and_then(|d| d.requests.as_mut())
            .map(|r| r.take_gaps())
            .unwrap_or_default()
    }

    /// Arrival times (seconds on the requests' axis) of a deployment's requests offered and not
    /// yet ended, in id order.
    pub fn unfinished_arrivals(&self, key: &DeploymentKey) -> Vec<f64> {
        self.deployments
            .get(key)
            .and_then(|d| d.requests.as_ref())
            .map(|r| r.unfinished_arrivals())
            .unwrap_or_default()
    }

    /// Requests of a deployment in flight (offered, not ended) and not yet offered.
    pub fn pending_requests(&self, key: &DeploymentKey) -> (usize, usize) {
        self.deployments
            .get(key)
            .and_then(|d| d.requests.as_ref())
            .map_or((0, 0), |r| r.pending())
    }

    /// One pass at `now` (see the module documentation).
    pub fn step(&mut self, now: Timestamp) -> Result<(), WorldError> {
        if now < self.now {
            return Err(WorldError::TimeWentBackwards {
                now: self.now,
                to: now,
            });
        }
        for dep in self.deployments.values_mut() {
            serving::serve(dep, now, &self.config);
        }
        let due = self.touched || self.deployments.values().any(|d| d.lifecycle_due(now));
        if due {
            self.lifecycle(now);
        }
        self.now = now;
        Ok(())
    }

    /// A step that runs the lifecycle pass even when nothing is due: what every step did
    /// before steps skipped settled passes. For tests that hold the two equal.
    #[doc(hidden)]
    pub fn step_every_part(&mut self, now: Timestamp) -> Result<(), WorldError> {
        self.touched = true;
        self.step(now)
    }

    /// The stand-in's and Kueue's pass at `now`, after the engines served.
    fn lifecycle(&mut self, now: Timestamp) {
        let mut ctx = Ctx {
            config: &self.config,
            ids: &mut self.ids,
            events: &mut self.events,
            now,
        };
        for dep in self.deployments.values_mut() {
            retirement::advance(dep, &mut ctx);
            dep.reconcile_spec(&mut ctx);
            deployment::run_timers(dep, &mut ctx);
        }
        kueue::run(&mut self.deployments, &self.quotas, &mut ctx);
        for dep in self.deployments.values_mut() {
            deployment::run_timers(dep, &mut ctx);
            status::rebuild(dep, now);
        }
        self.touched = false;
        self.revision = self.revision.wrapping_add(1);
    }

    /// Steps every tick from the current time to `now`, ending exactly at `now`.
    pub fn advance_to(&mut self, now: Timestamp) -> Result<(), WorldError> {
        if now < self.now {
            return Err(WorldError::TimeWentBackwards {
                now: self.now,
                to: now,
            });
        }
        loop {
            let next = later(self.now, self.config.tick);
            if next >= now {
                return self.step(now);
            }
            self.step(next)?;
        }
    }

    /// The ModelDeployment with the status the stand-in last wrote.
    pub fn deployment(&self, key: &DeploymentKey) -> Option<&ModelDeployment> {
        self.deployments.get(key).map(|d| &d.object)
    }

    pub fn deployment_keys(&self) -> Vec<DeploymentKey> {
        self.deployments.keys().cloned().collect()
    }

    /// The deployment's Pods, by role, ordinal and member.
    pub fn pods(&self, key: &DeploymentKey) -> Vec<PodView> {
        self.members(key)
            .map(|(dep, role, i, m)| views::pod_view(dep, role, i, m, &self.config))
            .collect()
    }

    /// The deployment's Pods that answer `/metrics` (see [`PodView::serves_metrics`]), as a
    /// scraper finds them, without building the Pods: (address, Pod name, role, ordinal).
    pub fn metrics_endpoints(&self, key: &DeploymentKey) -> Vec<(String, String, String, u32)> {
        self.members(key)
            .filter(|(_, _, i, m)| views::serves_metrics(i, m))
            .map(|(_, role, i, m)| {
                let ip = instance::loopback_ip(m.ip_slot);
                (ip, m.name.clone(), role.to_string(), i.ordinal)
            })
            .collect()
    }

    /// Every member of every instance of the deployment (none when it does not exist), with
    /// its deployment, role and instance, by role, ordinal and member.
    fn members<'w>(
        &'w self,
        key: &DeploymentKey,
    ) -> impl Iterator<
        Item = (
            &'w Deployment,
            &'w str,
            &'w instance::Instance,
            &'w instance::Member,
        ),
    > {
        self.deployments.get(key).into_iter().flat_map(|dep| {
            dep.instances()
                .flat_map(move |(role, i)| i.members.iter().map(move |m| (dep, role, i, m)))
        })
    }

    /// Every Pod of the world.
    pub fn all_pods(&self) -> Vec<PodView> {
        self.deployments.keys().flat_map(|k| self.pods(k)).collect()
    }

    /// The deployment's existing Workloads.
    pub fn workloads(&self, key: &DeploymentKey) -> Vec<Workload> {
        let Some(dep) = self.deployments.get(key) else {
            return Vec::new();
        };
        dep.instances()
            .filter_map(|(role, i)| views::workload_view(dep, role, i))
            .collect()
    }

    pub fn instances(&self, key: &DeploymentKey) -> Vec<InstanceView> {
        let Some(dep) = self.deployments.get(key) else {
            return Vec::new();
        };
        dep.instances()
            .map(|(role, i)| views::instance_view(dep, role, i))
            .collect()
    }

    /// The engines of a deployment's routed instances (ready, not withdrawn), in the order of
    /// [`World::instances`]: what serves between lifecycle passes, without building views.
    pub fn routed_engines(&self, key: &DeploymentKey) -> impl Iterator<Item = &EngineState> {
        self.deployments
            .get(key)
            .into_iter()
            .flat_map(|d| d.instances())
            .filter(|(_, i)| i.is_routed())
            .filter_map(|(_, i)| i.engine.as_ref())
    }

    /// Load a role was offered while none of its instances was routed.
    pub fn unserved(&self, key: &DeploymentKey, role: &str) -> Arrivals {
        self.deployments
            .get(key)
            .and_then(|d| d.roles.get(role))
            .map(|r| r.unserved)
            .unwrap_or_default()
    }

    /// Events since the last call.
    pub fn take_events(&mut self) -> Vec<WorldEvent> {
        std::mem::take(&mut self.events)
    }
}

fn validate_deployment(md: &ModelDeployment) -> Result<DeploymentKey, WorldError> {
    let invalid = |field: &str, message: &str| WorldError::InvalidDeployment {
        field: field.to_string(),
        message: message.to_string(),
    };
    let name = md
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("metadata.name", "is required"))?;
    let namespace = md.metadata.namespace.as_deref().unwrap_or("default");
    for (i, role) in md.spec.roles.iter().enumerate() {
        if role.name.is_empty() {
            return Err(invalid(&format!("spec.roles[{i}].name"), "is required"));
        }
        if md.spec.roles[..i].iter().any(|r| r.name == role.name) {
            return Err(invalid(
                &format!("spec.roles[{i}].name"),
                &format!(
                    "{:?} is declared twice; role names are list-map keys",
                    role.name
                ),
            ));
        }
    }
    Ok(DeploymentKey::new(namespace, name))
}
