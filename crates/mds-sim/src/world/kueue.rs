//! Kueue as the world needs it: one GPU quota per instance type (a ClusterQueue with one
//! flavor), Workloads admitted in creation order (StrictFIFO: the head that does not fit blocks
//! the queue behind it), admission checks after the reservation, parking of Workloads that
//! wait too long, and no preemption (lowering a quota never evicts; it only stops admissions).

use std::collections::{BTreeMap, BTreeSet};

use super::deployment::Deployment;
use super::instance::Phase;
use super::{Ctx, DeploymentKey, later};

/// GPUs held per instance type: every Workload with quota, including instances whose Pods are
/// still terminating (the accelerator ledger is released when they are gone).
pub(crate) fn usage(deployments: &BTreeMap<DeploymentKey, Deployment>) -> BTreeMap<String, u32> {
    let mut used: BTreeMap<String, u32> = BTreeMap::new();
    for dep in deployments.values() {
        for (_, instance) in dep.instances() {
            if instance.workload.as_ref().is_some_and(|w| w.holds_quota()) {
                let held = used
                    .entry(instance.shape.instance_type.clone())
                    .or_default();
                *held = held.saturating_add(instance.shape.gpus);
            }
        }
    }
    used
}

/// One Kueue pass: park long waiters, reserve quota in order, finish admission checks.
pub(crate) fn run(
    deployments: &mut BTreeMap<DeploymentKey, Deployment>,
    quotas: &BTreeMap<String, u32>,
    ctx: &mut Ctx,
) {
    park_long_waiters(deployments, ctx);
    reserve_in_order(deployments, quotas, ctx);
    finish_admission(deployments, ctx);
}

fn park_long_waiters(deployments: &mut BTreeMap<DeploymentKey, Deployment>, ctx: &mut Ctx) {
    let Some(after) = ctx.config.park_after else {
        return;
    };
    let now = ctx.now;
    for dep in deployments.values_mut() {
        let key = dep.key.clone();
        for (role, instances) in dep.roles.iter_mut() {
            for instance in instances.instances.values_mut() {
                let Some(w) = instance.workload.as_mut() else {
                    continue;
                };
                let waiting = instance.phase == Phase::Gated && w.active && !w.holds_quota();
                if waiting && now >= later(w.waiting_since, after) {
                    w.active = false;
                    ctx.event(&key, format!("{role} ordinal {} parked", instance.ordinal));
                }
            }
        }
    }
}

/// Reserved Workloads whose admission checks are done are admitted; their Pods are ungated and
/// start loading.
fn finish_admission(deployments: &mut BTreeMap<DeploymentKey, Deployment>, ctx: &mut Ctx) {
    let now = ctx.now;
    for dep in deployments.values_mut() {
        let key = dep.key.clone();
        let cold_starts: BTreeMap<String, super::config::RoleSettings> = dep
            .roles
            .keys()
            .map(|role| (role.clone(), dep.settings(role, ctx.config)))
            .collect();
        for (role, instances) in dep.roles.iter_mut() {
            for instance in instances.instances.values_mut() {
                let Some(w) = instance.workload.as_mut() else {
                    continue;
                };
                let checked = w
                    .quota_reserved_at
                    .is_some_and(|at| now >= later(at, ctx.config.admission_check_delay));
                if instance.phase == Phase::Gated && checked {
                    w.admitted_at = Some(now);
                    instance.phase = Phase::Starting {
                        ready_at: later(now, cold_starts[role].draw_cold_start(&mut ctx.ids.rng)),
                    };
                    ctx.event(
                        &key,
                        format!("{role} ordinal {} admitted", instance.ordinal),
                    );
                }
            }
        }
    }
}

fn reserve_in_order(
    deployments: &mut BTreeMap<DeploymentKey, Deployment>,
    quotas: &BTreeMap<String, u32>,
    ctx: &mut Ctx,
) {
    let mut used = usage(deployments);
    let mut waiting: Vec<(u64, DeploymentKey, String, u32)> = Vec::new();
    for (key, dep) in deployments.iter() {
        for (role, instance) in dep.instances() {
            let Some(w) = &instance.workload else {
                continue;
            };
            if instance.phase == Phase::Gated && w.active && !w.holds_quota() {
                waiting.push((w.sequence, key.clone(), role.to_string(), instance.ordinal));
            }
        }
    }
    waiting.sort();
    let mut blocked: BTreeSet<String> = BTreeSet::new();
    for (_, key, role, ordinal) in waiting {
        let Some(dep) = deployments.get_mut(&key) else {
            continue;
        };
        let Some(instance) = dep.instance_mut(&role, ordinal) else {
            continue;
        };
        let instance_type = instance.shape.instance_type.clone();
        if blocked.contains(&instance_type) {
            continue;
        }
        let held = used.get(&instance_type).copied().unwrap_or(0);
        let fits = quotas
            .get(&instance_type)
            .is_none_or(|quota| held.saturating_add(instance.shape.gpus) <= *quota);
        if !fits {
            blocked.insert(instance_type);
            continue;
        }
        let held = used.entry(instance_type).or_default();
        *held = held.saturating_add(instance.shape.gpus);
        if let Some(w) = instance.workload.as_mut() {
            w.quota_reserved_at = Some(ctx.now);
            w.evicted = false;
        }
        ctx.event(&key, format!("{role} ordinal {ordinal} holds quota"));
    }
}
