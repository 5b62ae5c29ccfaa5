//! Planning: the policy from the spec, planner memory restored, the planner run under the
//! guards, and the role statuses filled from its result.

use std::collections::{BTreeMap, BTreeSet};

use mds_api::status::RoleStatus;
use mds_api::target::RoleKind;
use mds_planner::{Guards, PlanInput, PlannerState, Policy, Reason, RoleInput};

use crate::conditions::BLOCKED;
use crate::guards::{growth_in_flight, readings_predate_growth};
use crate::pass::Pass;
use crate::protocol;
use crate::view::View;
use crate::{Input, Memory, Write, WriteKind};
use mds_planner::algorithms::guard_latency_milliseconds;

/// Builds the policy, restores memory, plans, and fills the role statuses. `None` when the
/// spec cannot be planned on this target (`Blocked` says why).
pub(crate) fn plan(
    pass: &mut Pass,
    view: &View,
    memory: &mut Memory,
    mut guards: Guards,
    backoff: &BTreeSet<String>,
) -> Option<Policy> {
    let input = pass.input;
    let kinds: BTreeMap<String, RoleKind> = view
        .md
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.kind()))
        .collect();
    let policy = match Policy::from_spec(input.scaler.spec, &kinds) {
        Ok(p) => p,
        Err(e) => {
            let message = format!("the spec cannot be planned: {e}");
            pass.report(BLOCKED, true, "BoundsConflict", message);
            return None;
        }
    };
    let current = &view.current;
    guards.unbounded_target_roles = current
        .keys()
        .filter(|r| policy.role_index(r).is_none())
        .cloned()
        .collect();
    let missing: Vec<&str> = policy
        .roles
        .iter()
        .filter(|r| !current.contains_key(&r.name))
        .map(|r| r.name.as_str())
        .collect();
    if !missing.is_empty() {
        let message = format!("roles {missing:?} do not exist on the target");
        pass.report(BLOCKED, true, "BoundsConflict", message);
        return None;
    }
    let planner = memory
        .planner
        .get_or_insert_with(|| crate::memory::restore(input.scaler.status));
    // D32: a change of the spec releases stalled latency guards.
    planner.plan_under(input.scaler.generation);
    let spec = input.scaler.spec;
    let waits = (spec.pending_timeout_seconds(), spec.interval_seconds());
    let roles: Vec<RoleInput> = policy
        .roles
        .iter()
        .map(|r| RoleInput {
            current: current[&r.name],
            observation: input.observations.get(&r.name).cloned(),
            growth_in_flight: growth_in_flight(
                planner.roles.get_mut(&r.name),
                view.target,
                &r.name,
                waits,
                input.now,
            ),
            readings_predate_growth: readings_predate_growth(
                planner.roles.get(&r.name),
                input
                    .observations
                    .get(&r.name)
                    .and_then(|o| guard_latency_milliseconds(&r.kind, o)),
                input.now,
            ),
            growth_backoff: backoff.contains(&r.name),
        })
        .collect();
    let stalled_before = stalled_guards(planner);
    let reversals_before = reversals(planner);
    let plan = mds_planner::plan(
        &PlanInput {
            policy: &policy,
            roles: &roles,
            guards: &guards,
            now: input.now,
            observed_at: input.observed_at,
        },
        planner,
    );
    report_stalled_guards(pass, &stalled_before, planner);
    report_reversals(pass, &reversals_before, planner);
    pass.status.roles = role_statuses(input, view, &plan);
    pass.plan = Some(plan);
    pass.policy = Some(policy.clone());
    Some(policy)
}

/// Each planned role's status: its observation, counts and reason.
fn role_statuses(input: &Input, view: &View, plan: &mds_planner::Plan) -> Vec<RoleStatus> {
    let ready: BTreeMap<String, i32> = view
        .md
        .status
        .as_ref()
        .map(|s| {
            s.roles
                .iter()
                .filter_map(|r| Some((r.name.clone(), r.ready?)))
                .collect()
        })
        .unwrap_or_default();
    plan.roles
        .iter()
        .map(|r| {
            let mut status = RoleStatus {
                name: r.name.clone(),
                ..RoleStatus::default()
            };
            if let Some(o) = input.observations.get(&r.name) {
                o.write_status(&mut status);
            }
            status.ready_replicas = status.ready_replicas.or(ready.get(&r.name).copied());
            status.current_replicas = Some(r.current);
            status.raw_recommended_replicas = Some(r.raw);
            status.constrained_replicas = Some(r.constrained);
            status.reason = Some(r.reason.as_str().to_string());
            status
        })
        .collect()
}

/// Roles whose latency guard has stopped adding replicas (D32).
fn stalled_guards(planner: &PlannerState) -> BTreeSet<String> {
    planner
        .roles
        .iter()
        .filter(|(_, m)| m.guard.stalled_at.is_some())
        .map(|(name, _)| name.clone())
        .collect()
}

/// Each role's reversal in force (D33).
fn reversals(planner: &PlannerState) -> BTreeMap<String, mds_planner::reversal::Reversal> {
    planner
        .roles
        .iter()
        .filter_map(|(name, m)| Some((name.clone(), m.shrink.reversal?)))
        .collect()
}

/// A shrink the latency guard reversed this pass says so once (D33): the hold that follows
/// and what releases it.
fn report_reversals(
    pass: &mut Pass,
    before: &BTreeMap<String, mds_planner::reversal::Reversal>,
    planner: &PlannerState,
) {
    for (role, reversal) in reversals(planner) {
        if before.get(&role) == Some(&reversal) {
            continue;
        }
        pass.event(
            false,
            "LatencyGuardHold",
            "Plan",
            format!(
                "role {role}: the latency guard reversed our shrink from {} to {}: {}; the role is not planned below {} until demand falls to {:.0} tokens/s, the scaler spec changes, or {}",
                reversal.from,
                reversal.to,
                reversal.describe(),
                reversal.from,
                reversal.release_demand(),
                reversal.until.strftime("%Y-%m-%dT%H:%M:%SZ"),
            ),
        );
    }
}

/// A latency guard that stopped adding replicas this pass says so once (D32).
fn report_stalled_guards(pass: &mut Pass, before: &BTreeSet<String>, planner: &PlannerState) {
    for (role, memory) in &planner.roles {
        let Some(breach) = memory.guard.stalled_at.filter(|_| !before.contains(role)) else {
            continue;
        };
        let tried = memory
            .guard
            .describe_tried()
            .map_or(String::new(), |t| format!(": {t}"));
        pass.event(
            true,
            "LatencyGuardStalled",
            "Plan",
            format!(
                "role {role}: two replicas the latency guard added did not lower latency ({breach:.2}x its target); the target is below what this engine reaches at any count{tried}. It adds no more and only holds scale-down until latency falls below 1.2x its target, rises more than 25 % above {breach:.2}x, or the scaler spec changes"
            ),
        );
    }
}

/// A rollback or restore is this pass's write: the roles whose count it changes report its
/// counts and reason, not the plan's.
pub(crate) fn report_protocol_write(pass: &mut Pass, view: &View, write: Option<&Write>) {
    let Some(write) = write.filter(|w| matches!(w.kind, WriteKind::Rollback | WriteKind::Restore))
    else {
        return;
    };
    let reason = if write.kind == WriteKind::Rollback {
        Reason::ResourceExhausted
    } else {
        Reason::ScaleDownAborted
    };
    let changed = write.vector.as_ref().map_or_else(BTreeMap::new, |vector| {
        protocol::changes(&view.current, vector)
    });
    for role in &mut pass.status.roles {
        if let Some(&(_, n)) = changed.get(&role.name) {
            role.constrained_replicas = Some(n);
            role.reason = Some(reason.as_str().to_string());
        }
    }
    if let Some(plan) = pass.plan.as_mut() {
        for role in &mut plan.roles {
            if let Some(&(_, n)) = changed.get(&role.name) {
                role.constrained = n;
                role.reason = reason;
            }
        }
    }
}
