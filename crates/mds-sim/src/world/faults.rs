//! Scripted interventions from outside the stand-in: evictions, container restarts, deleted
//! Pods, parking and unparking, and the UIDs a mirror's API server assigned. Each acts at the
//! world's current time and refreshes the deployment's status.

use super::deployment::{Deployment, desired_of, new_member};
use super::instance::Phase;
use super::{Ctx, DeploymentKey, World, WorldError, later, retirement, status};

impl World {
    /// Runs `f` on one instance's deployment with a pass context, then rebuilds the status.
    fn intervene<T>(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
        f: impl FnOnce(&mut Deployment, &mut Ctx) -> Result<T, WorldError>,
    ) -> Result<T, WorldError> {
        self.touch();
        let now = self.now;
        let dep = self
            .deployments
            .get_mut(key)
            .ok_or_else(|| WorldError::NoDeployment(key.clone()))?;
        if dep.instance(role, ordinal).is_none() {
            return Err(WorldError::NoInstance {
                deployment: key.clone(),
                role: role.to_string(),
                ordinal,
            });
        }
        let mut ctx = Ctx {
            config: &self.config,
            ids: &mut self.ids,
            events: &mut self.events,
            now,
        };
        let out = f(dep, &mut ctx)?;
        status::rebuild(dep, now);
        Ok(out)
    }

    /// Kueue evicts the instance's Workload (preemption): quota and admission are lost, the
    /// Pods are replaced by gated ones and the Workload queues again in its old place. A
    /// retirement of this instance that has not reached `Deleting` aborts and releases it.
    pub fn evict(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
    ) -> Result<(), WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let instance = dep.instance(role, ordinal).expect("checked");
            if instance.is_terminating()
                || !instance.workload.as_ref().is_some_and(|w| w.holds_quota())
            {
                return Err(WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} holds no quota to evict"
                )));
            }
            if retirement::target_killed(dep, role, ordinal, ctx) {
                return Ok(());
            }
            replace_members(dep, role, ordinal, ctx);
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            if let Some(w) = instance.workload.as_mut() {
                w.release(ctx.now);
                w.evicted = true;
            }
            instance.phase = Phase::Gated;
            ctx.event(&dep.key, format!("{role} ordinal {ordinal} evicted"));
            Ok(())
        })
    }

    /// The `main` container of one member restarts: `restartCount` grows, the engine process
    /// starts over (counters from zero) and the instance is not ready for a cold start. A
    /// retirement of this instance aborts at its next check.
    pub fn restart_member(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
        member: u32,
    ) -> Result<(), WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let cold_start = dep
                .settings(role, ctx.config)
                .draw_cold_start(&mut ctx.ids.rng);
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            if !matches!(instance.phase, Phase::Starting { .. } | Phase::Ready) {
                return Err(WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} runs no containers"
                )));
            }
            let m = instance.members.get_mut(member as usize).ok_or_else(|| {
                WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} has no member {member}"
                ))
            })?;
            m.restart_count = m.restart_count.saturating_add(1);
            let lost = instance.stop_engine();
            instance.phase = Phase::Starting {
                ready_at: later(ctx.now, cold_start),
            };
            dep.lost_requests.extend(lost);
            ctx.event(
                &dep.key,
                format!("{role} ordinal {ordinal} member {member} restarted"),
            );
            Ok(())
        })
    }

    /// A member Pod is deleted from outside (node loss, manual delete). The stand-in recreates
    /// it (new name at `size: 1`, new UID) and the instance cold-starts again, keeping its
    /// quota. A retirement of this instance that has not reached `Deleting` aborts and
    /// releases it instead.
    pub fn delete_pod(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
        member: u32,
    ) -> Result<(), WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let instance = dep.instance(role, ordinal).expect("checked");
            let size = instance.shape.size;
            if instance.is_terminating() || member >= size {
                return Err(WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} has no live member {member}"
                )));
            }
            if retirement::target_killed(dep, role, ordinal, ctx) {
                return Ok(());
            }
            let cold_start = dep
                .settings(role, ctx.config)
                .draw_cold_start(&mut ctx.ids.rng);
            let md = dep.key.name.clone();
            let fresh = new_member(&md, role, size, ordinal, member, ctx);
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            instance.members[member as usize] = fresh;
            if matches!(instance.phase, Phase::Starting { .. } | Phase::Ready) {
                let lost = instance.stop_engine();
                instance.phase = Phase::Starting {
                    ready_at: later(ctx.now, cold_start),
                };
                dep.lost_requests.extend(lost);
            }
            ctx.event(
                &dep.key,
                format!("{role} ordinal {ordinal} member {member} replaced"),
            );
            Ok(())
        })
    }

    /// Deactivates the instance's Workload (`spec.active: false`), as the joint check does when
    /// a set fails to assemble: quota is released and running Pods are replaced by gated ones.
    pub fn park(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
    ) -> Result<(), WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let instance = dep.instance(role, ordinal).expect("checked");
            let active = instance.workload.as_ref().is_some_and(|w| w.active);
            if instance.is_terminating() || !active {
                return Err(WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} has no active Workload to park"
                )));
            }
            let running = matches!(instance.phase, Phase::Starting { .. } | Phase::Ready);
            if running && retirement::target_killed(dep, role, ordinal, ctx) {
                return Ok(());
            }
            if running {
                replace_members(dep, role, ordinal, ctx);
            }
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            if let Some(w) = instance.workload.as_mut() {
                w.release(ctx.now);
                w.active = false;
            }
            instance.phase = Phase::Gated;
            ctx.event(&dep.key, format!("{role} ordinal {ordinal} parked"));
            Ok(())
        })
    }

    /// Reactivates a parked Workload; it queues again.
    pub fn activate(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
    ) -> Result<(), WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            let Some(w) = instance.workload.as_mut().filter(|w| !w.active) else {
                return Err(WorldError::NotApplicable(format!(
                    "{role} ordinal {ordinal} has no parked Workload"
                )));
            };
            w.active = true;
            w.waiting_since = ctx.now;
            ctx.event(&dep.key, format!("{role} ordinal {ordinal} activated"));
            Ok(())
        })
    }

    /// An engine outside the world (a real process) answers its health check: a starting
    /// instance turns Ready now, whatever its cold start said. Returns whether it turned Ready
    /// (false when it is not starting, or its Workload lost admission meanwhile).
    pub fn engine_ready(
        &mut self,
        key: &DeploymentKey,
        role: &str,
        ordinal: u32,
    ) -> Result<bool, WorldError> {
        self.intervene(key, role, ordinal, |dep, ctx| {
            let clock = dep.requests.as_ref().map(|r| r.seconds_at(ctx.now));
            let profile = dep.settings(role, ctx.config).request_profile;
            let instance = dep.instance_mut(role, ordinal).expect("checked");
            let admitted = instance
                .workload
                .as_ref()
                .is_some_and(|w| w.active && !w.evicted && w.admitted_at.is_some());
            if !matches!(instance.phase, Phase::Starting { .. }) || !admitted {
                return Ok(false);
            }
            instance.phase = Phase::Ready;
            instance.start_engine(ctx.now, clock.map(|c| (&profile, c)));
            ctx.event(&dep.key, format!("{role} ordinal {ordinal} ready"));
            Ok(true)
        })
    }

    /// The stand-in aborts the deployment's running retirement for `reason`, if one runs
    /// before `Deleting` and has not aborted yet: the reservation persists as `Aborted`, the
    /// instance keeps its Pods, Workload and quota and is routed again. Returns the aborted
    /// retirement's role and ordinal.
    pub fn abort_retirement(
        &mut self,
        key: &DeploymentKey,
        reason: &str,
    ) -> Result<Option<(String, u32)>, WorldError> {
        self.touch();
        let now = self.now;
        let dep = self
            .deployments
            .get_mut(key)
            .ok_or_else(|| WorldError::NoDeployment(key.clone()))?;
        let mut ctx = Ctx {
            config: &self.config,
            ids: &mut self.ids,
            events: &mut self.events,
            now,
        };
        let aborted = retirement::abort_running(dep, reason, &mut ctx);
        if aborted.is_some() {
            status::rebuild(dep, now);
        }
        Ok(aborted)
    }

    /// Adopts the UID an API server gave a Pod (so retirements and Workload owner references
    /// name it).
    pub fn set_pod_uid(
        &mut self,
        namespace: &str,
        pod_name: &str,
        uid: &str,
    ) -> Result<(), WorldError> {
        self.touch();
        for dep in self
            .deployments
            .values_mut()
            .filter(|d| d.key.namespace == namespace)
        {
            for instances in dep.roles.values_mut() {
                for i in instances.instances.values_mut() {
                    if let Some(m) = i.members.iter_mut().find(|m| m.name == pod_name) {
                        m.uid = uid.to_string();
                        return Ok(());
                    }
                }
            }
        }
        Err(WorldError::NoObject {
            namespace: namespace.to_string(),
            name: pod_name.to_string(),
        })
    }

    /// Adopts the UID an API server gave a Workload.
    pub fn set_workload_uid(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), WorldError> {
        self.touch();
        for dep in self
            .deployments
            .values_mut()
            .filter(|d| d.key.namespace == namespace)
        {
            for instances in dep.roles.values_mut() {
                for i in instances.instances.values_mut() {
                    if i.group_name == name
                        && let Some(w) = i.workload.as_mut()
                    {
                        w.uid = uid.to_string();
                        return Ok(());
                    }
                }
            }
        }
        Err(WorldError::NoObject {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// Structural invariants, as messages (empty when all hold): each role's ordinals are
    /// `0..n` without gaps, and `ready` exceeds `desired` only while an undeclared instance
    /// that no retirement has withdrawn is still there (an aborted one, or one waiting its
    /// turn).
    pub fn check_invariants(&self) -> Vec<String> {
        let mut broken = Vec::new();
        for dep in self.deployments.values() {
            for (role, instances) in &dep.roles {
                let ordinals: Vec<u32> = instances.instances.keys().copied().collect();
                if ordinals.iter().enumerate().any(|(i, o)| *o != i as u32) {
                    broken.push(format!(
                        "{}: {role} ordinals are not contiguous: {ordinals:?}",
                        dep.key
                    ));
                }
            }
            let Some(status) = &dep.object.status else {
                continue;
            };
            for r in &status.roles {
                let ready = r.ready.unwrap_or(0);
                let desired_count = dep.spec_role(&r.name).map_or(0, desired_of);
                let desired = desired_count as i32;
                let extra = dep.roles.get(&r.name).is_some_and(|ri| {
                    ri.instances.values().any(|i| {
                        i.ordinal >= desired_count
                            && i.is_ready()
                            && !dep.is_departing(&r.name, i.ordinal)
                    })
                });
                if ready > desired && !extra {
                    broken.push(format!(
                        "{}: {} ready {ready} exceeds desired {desired} with no undeclared instance",
                        dep.key, r.name
                    ));
                }
            }
        }
        broken
    }
}

/// Replaces every member Pod of an instance (new names at `size: 1`, new UIDs, no restarts)
/// and stops its engine.
fn replace_members(dep: &mut Deployment, role: &str, ordinal: u32, ctx: &mut Ctx) {
    let md = dep.key.name.clone();
    let Some(instance) = dep.instance_mut(role, ordinal) else {
        return;
    };
    let size = instance.shape.size;
    instance.members = (0..size)
        .map(|index| new_member(&md, role, size, ordinal, index, ctx))
        .collect();
    let lost = instance.stop_engine();
    instance.withdrawn = false;
    dep.lost_requests.extend(lost);
}
