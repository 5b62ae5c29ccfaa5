//! One ModelDeployment as the stand-in operator keeps it: the object, its instances per role,
//! and the pass that applies the spec (scale-up adds ordinals; scale-down retires the highest
//! undeclared ordinal, one retirement at a time).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use mds_api::target::{ModelDeployment, TargetRole};

use super::config::{RoleSettings, WorldConfig};
use super::instance::{Instance, Member, Phase, Shape, load_balance_of, pod_group_name, pod_name};
use super::retirement::{self, RetirementState};
use super::{Ctx, DeploymentKey, later};
use crate::engine::EngineFlavor;
use crate::load::{Arrivals, LoadProfile};

/// A load profile and the instant its time axis starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AssignedLoad {
    pub profile: LoadProfile,
    pub origin: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct RoleInstances {
    pub instances: BTreeMap<u32, Instance>,
    /// Offered while no instance of the role was routed.
    pub unserved: Arrivals,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Deployment {
    pub key: DeploymentKey,
    pub object: ModelDeployment,
    pub roles: BTreeMap<String, RoleInstances>,
    pub settings: BTreeMap<String, RoleSettings>,
    pub loads: BTreeMap<String, AssignedLoad>,
    pub retirement: Option<RetirementState>,
    pub consumed_tokens: BTreeSet<String>,
    pub last_consumed_token: Option<String>,
    /// Its engines have served the offered load up to here: the last step, or later when a
    /// page was read between steps.
    pub served_until: Timestamp,
    /// Offered requests, for the request-level engines (`None`: the fluid loads serve).
    pub requests: Option<super::requests::RequestLoad>,
    /// Requests an engine held when it stopped (restart, deletion), not yet reported.
    pub lost_requests: Vec<u64>,
}

/// A role's settings: its own, else the world's default (a free function, so a step may hold
/// the deployment's other fields mutably while reading them).
pub(crate) fn role_settings(
    settings: &BTreeMap<String, RoleSettings>,
    role: &str,
    config: &WorldConfig,
) -> RoleSettings {
    settings.get(role).copied().unwrap_or(config.default_role)
}

/// Replicas of a role as the stand-in reads them: the schema's 1..=1024, with anything below
/// clamped to 0 (the API server would refuse it; the world must not fail on it).
pub(crate) fn desired_of(role: &TargetRole) -> u32 {
    role.replicas().clamp(0, 1024) as u32
}

impl Deployment {
    pub fn new(key: DeploymentKey, object: ModelDeployment, now: Timestamp) -> Deployment {
        Deployment {
            key,
            object,
            roles: BTreeMap::new(),
            settings: BTreeMap::new(),
            loads: BTreeMap::new(),
            retirement: None,
            consumed_tokens: BTreeSet::new(),
            last_consumed_token: None,
            served_until: now,
            requests: None,
            lost_requests: Vec::new(),
        }
    }

    pub fn generation(&self) -> i64 {
        self.object.metadata.generation.unwrap_or(1)
    }

    pub fn uid(&self) -> &str {
        self.object.metadata.uid.as_deref().unwrap_or_default()
    }

    pub fn router_present(&self) -> bool {
        self.object
            .spec
            .router
            .as_ref()
            .is_some_and(|r| !r.name.is_empty())
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.object
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    pub fn spec_role(&self, role: &str) -> Option<&TargetRole> {
        self.object.spec.roles.iter().find(|r| r.name == role)
    }

    /// Declared instances of a role; 0 for a role no longer in the spec.
    pub fn desired(&self, role: &str) -> u32 {
        self.spec_role(role).map_or(0, desired_of)
    }

    pub fn settings(&self, role: &str, config: &WorldConfig) -> RoleSettings {
        role_settings(&self.settings, role, config)
    }

    pub fn instance(&self, role: &str, ordinal: u32) -> Option<&Instance> {
        self.roles.get(role)?.instances.get(&ordinal)
    }

    pub fn instance_mut(&mut self, role: &str, ordinal: u32) -> Option<&mut Instance> {
        self.roles.get_mut(role)?.instances.get_mut(&ordinal)
    }

    pub fn instances(&self) -> impl Iterator<Item = (&str, &Instance)> {
        self.roles
            .iter()
            .flat_map(|(role, r)| r.instances.values().map(move |i| (role.as_str(), i)))
    }

    /// Whether the instance is withdrawn by a retirement still in progress.
    pub fn is_departing(&self, role: &str, ordinal: u32) -> bool {
        self.retirement
            .as_ref()
            .is_some_and(|r| r.targets(role, ordinal) && !r.is_aborted())
    }

    /// One operator pass over the spec: retry, adoption, scale-up, then at most one removal.
    pub fn reconcile_spec(&mut self, ctx: &mut Ctx) {
        retirement::apply_retry(self, ctx);
        self.adopt_declared_retirement(ctx);
        for role in self.object.spec.roles.clone() {
            for ordinal in 0..desired_of(&role) {
                let exists = self
                    .roles
                    .get(&role.name)
                    .is_some_and(|r| r.instances.contains_key(&ordinal));
                if !exists {
                    self.create_instance(&role, ordinal, ctx);
                }
            }
        }
        if self.retirement.is_none()
            && let Some((role, ordinal)) = self.next_removal()
        {
            retirement::start(self, &role, ordinal, ctx);
        }
    }

    /// A retirement whose ordinal is declared again: before deletion it is cancelled when the
    /// instance is whole (the same member UIDs, no restart) or gone; an aborted reservation over
    /// changed or restarted members persists. From `Deleting` on it runs to the end and the
    /// ordinal is created anew after.
    fn adopt_declared_retirement(&mut self, ctx: &mut Ctx) {
        let Some(state) = &self.retirement else {
            return;
        };
        if !state.step.before_deletion() || state.ordinal >= self.desired(&state.role) {
            return;
        }
        let adoptable = match self.instance(&state.role, state.ordinal) {
            None => true,
            Some(i) => {
                !state.is_aborted() || (i.member_uids() == state.member_uids && !i.restarted())
            }
        };
        if !adoptable {
            return;
        }
        let (role, ordinal) = (state.role.clone(), state.ordinal);
        if let Some(instance) = self.instance_mut(&role, ordinal) {
            instance.withdrawn = false;
        }
        self.retirement = None;
        ctx.event(
            &self.key,
            format!(
                "retirement of {role} ordinal {ordinal} cancelled: the ordinal is declared again"
            ),
        );
    }

    /// The highest undeclared ordinal of the first role (spec order, then roles no longer
    /// declared) that has one.
    fn next_removal(&self) -> Option<(String, u32)> {
        let declared = self.object.spec.roles.iter().map(|r| r.name.as_str());
        let undeclared = self
            .roles
            .keys()
            .map(String::as_str)
            .filter(|name| self.spec_role(name).is_none());
        declared.chain(undeclared).find_map(|role| {
            let desired = self.desired(role);
            let highest = self
                .roles
                .get(role)?
                .instances
                .values()
                .filter(|i| i.ordinal >= desired && !i.is_terminating())
                .map(|i| i.ordinal)
                .max()?;
            Some((role.to_string(), highest))
        })
    }

    /// Whether a lifecycle pass at `now` (retirement, spec, timers, Kueue, status) could
    /// change anything. `false` only in a settled state: no retirement, every declared
    /// ordinal present and no undeclared one, every load on a declared role, every instance
    /// serving or starting under an admitted Workload with its timer still ahead (or
    /// composing or terminating with its timer ahead). Anything else (a Workload waiting for
    /// Kueue, a retirement's phases, which watch the engines) is due every step. Changes
    /// from outside (a new spec, a fault) are the world's to notice.
    pub fn lifecycle_due(&self, now: Timestamp) -> bool {
        if self.retirement.is_some() || self.next_removal().is_some() {
            return true;
        }
        let declared = |role: &str| self.spec_role(role).is_some();
        if self.loads.keys().any(|role| !declared(role))
            || self
                .roles
                .iter()
                .any(|(role, r)| r.instances.is_empty() && !declared(role))
        {
            return true;
        }
        let missing = self.object.spec.roles.iter().any(|role| {
            (0..desired_of(role)).any(|ordinal| self.instance(&role.name, ordinal).is_none())
        });
        if missing {
            return true;
        }
        self.instances().any(|(_, i)| {
            let admitted = i
                .workload
                .as_ref()
                .is_some_and(|w| w.active && !w.evicted && w.admitted_at.is_some());
            match i.phase {
                Phase::Composing { workload_at } => now >= workload_at,
                Phase::Gated => true,
                Phase::Starting { ready_at } => now >= ready_at || !admitted,
                Phase::Ready => !admitted || i.withdrawn,
                Phase::Terminating { gone_at } => now >= gone_at,
            }
        })
    }

    fn create_instance(&mut self, role: &TargetRole, ordinal: u32, ctx: &mut Ctx) {
        let now = ctx.now;
        let settings = self.settings(&role.name, ctx.config);
        let size = role.size().clamp(1, 64) as u32;
        let shape = Shape {
            kind: role.kind(),
            size,
            instance_type: role.instance_type.clone().unwrap_or_default(),
            port: role
                .ports
                .first()
                .and_then(|p| u16::try_from(p.port).ok())
                .filter(|p| *p > 0)
                .unwrap_or(8000),
            gpus: size.saturating_mul(settings.gpus_per_pod),
            flavor: EngineFlavor::of(self.object.spec.engine.as_ref()),
            managed: !role.has_command(),
            load_balance: load_balance_of(role),
        };
        let md = self.object.metadata.name.clone().unwrap_or_default();
        let members = (0..size)
            .map(|index| new_member(&md, &role.name, size, ordinal, index, ctx))
            .collect();
        let instance = Instance {
            ordinal,
            group_name: pod_group_name(&self.key.namespace, &md, &role.name, ordinal),
            shape,
            created_at: now,
            phase: Phase::Composing {
                workload_at: later(now, ctx.config.workload_delay),
            },
            members,
            workload: None,
            engine: None,
            requests: None,
            withdrawn: false,
        };
        self.roles
            .entry(role.name.clone())
            .or_default()
            .instances
            .insert(ordinal, instance);
        ctx.event(
            &self.key,
            format!("{} ordinal {ordinal} created", role.name),
        );
    }
}

/// A new member Pod (also a replacement after a deletion or eviction).
pub(crate) fn new_member(
    md: &str,
    role: &str,
    size: u32,
    ordinal: u32,
    index: u32,
    ctx: &mut Ctx,
) -> Member {
    let serial = ctx.ids.next_serial();
    Member {
        index,
        name: pod_name(md, role, size, ordinal, index, serial),
        uid: super::Ids::uid(serial),
        ip_slot: ctx.ids.next_slot(),
        restart_count: 0,
        created_at: ctx.now,
    }
}

/// Lifecycle timers of one deployment's instances: Workloads appear, engines become ready,
/// terminated Pods go.
pub(crate) fn run_timers(dep: &mut Deployment, ctx: &mut Ctx) {
    let now = ctx.now;
    let key = dep.key.clone();
    // With requests offered, engines start request-level, their clocks on the requests' axis.
    let request_clock = dep.requests.as_ref().map(|r| r.seconds_at(now));
    let request_profiles: BTreeMap<String, crate::engine::request::RequestProfile> = dep
        .roles
        .keys()
        .map(|role| (role.clone(), dep.settings(role, ctx.config).request_profile))
        .collect();
    for (role, instances) in dep.roles.iter_mut() {
        instances.instances.retain(|ordinal, instance| {
            match instance.phase {
                Phase::Composing { workload_at } if now >= workload_at => {
                    let serial = ctx.ids.next_serial();
                    instance.workload = Some(super::instance::WorkloadState {
                        uid: super::Ids::uid(serial),
                        created_at: now,
                        sequence: ctx.ids.next_sequence(),
                        active: true,
                        quota_reserved_at: None,
                        admitted_at: None,
                        evicted: false,
                        waiting_since: now,
                    });
                    instance.phase = Phase::Gated;
                }
                Phase::Starting { ready_at } if now >= ready_at => {
                    instance.phase = Phase::Ready;
                    let profile = request_profiles.get(role.as_str());
                    instance.start_engine(now, profile.zip(request_clock));
                    ctx.event(&key, format!("{role} ordinal {ordinal} ready"));
                }
                Phase::Terminating { gone_at } if now >= gone_at => {
                    ctx.event(&key, format!("{role} ordinal {ordinal} gone"));
                    return false;
                }
                _ => {}
            }
            true
        });
    }
    let declared: BTreeSet<String> = dep
        .object
        .spec
        .roles
        .iter()
        .map(|r| r.name.clone())
        .collect();
    dep.roles
        .retain(|name, r| !r.instances.is_empty() || declared.contains(name));
}
