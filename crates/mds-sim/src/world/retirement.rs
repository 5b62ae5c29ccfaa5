//! The stand-in operator's removal of one ordinal (TARGET.md section 5): at most one per
//! deployment, one step per operator pass, phase budgets, and the abort cases.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::target::{Retirement, RoleKind};

use super::deployment::Deployment;
use super::{Ctx, later};

/// The last step a retirement passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RetirementStep {
    Admitted,
    Disqualified,
    Withdrawing,
    Draining,
    Deleting,
    Settling,
    Aborted,
}

impl RetirementStep {
    pub fn as_str(self) -> &'static str {
        match self {
            RetirementStep::Admitted => "Admitted",
            RetirementStep::Disqualified => "Disqualified",
            RetirementStep::Withdrawing => "Withdrawing",
            RetirementStep::Draining => "Draining",
            RetirementStep::Deleting => "Deleting",
            RetirementStep::Settling => "Settling",
            RetirementStep::Aborted => "Aborted",
        }
    }

    /// Before `Deleting` (or aborted) a retirement can still be cancelled or lose its target;
    /// from `Deleting` on nothing aborts.
    pub fn before_deletion(self) -> bool {
        !matches!(self, RetirementStep::Deleting | RetirementStep::Settling)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RetirementState {
    pub role: String,
    pub ordinal: u32,
    pub observed_generation: i64,
    pub member_uids: Vec<String>,
    pub workload_uid: Option<String>,
    pub step: RetirementStep,
    pub reason: String,
    pub started_at: Timestamp,
    pub deadline: Timestamp,
    pub phase_started_at: Timestamp,
    /// Consecutive idle reads of every answering member while draining.
    pub idle_reads: u32,
}

impl RetirementState {
    pub fn is_aborted(&self) -> bool {
        self.step == RetirementStep::Aborted
    }

    pub fn targets(&self, role: &str, ordinal: u32) -> bool {
        self.role == role && self.ordinal == ordinal
    }

    /// `status.retirement` as the operator writes it.
    pub fn view(&self, last_consumed_retry_token: Option<&str>) -> Retirement {
        Retirement {
            role_name: self.role.clone(),
            replica_ordinal: self.ordinal as i32,
            observed_generation: Some(self.observed_generation),
            target_workload_uid: self.workload_uid.clone(),
            state: self.step.as_str().to_string(),
            target_member_uids: self.member_uids.clone(),
            reason: Some(self.reason.clone()),
            started_at: Some(Time(self.started_at)),
            deadline: Some(Time(self.deadline)),
            phase_started_at: Some(Time(self.phase_started_at)),
            last_consumed_retry_token: last_consumed_retry_token.map(String::from),
        }
    }
}

/// Starts removing `role`'s `ordinal`: withdraws it from routing, or aborts at once where the
/// operator refuses (P/D instances, restarted members, multi-member instances on old revisions).
pub(crate) fn start(dep: &mut Deployment, role: &str, ordinal: u32, ctx: &mut Ctx) {
    let now = ctx.now;
    let generation = dep.generation();
    let instance = dep.instance_mut(role, ordinal);
    let (member_uids, workload_uid, refusal) = match instance {
        Some(i) => {
            let disaggregated = matches!(i.shape.kind, RoleKind::Prefill | RoleKind::Decode);
            let refusal = if disaggregated && ctx.config.abort_disaggregated_retirements {
                Some("a disaggregated replica has no verifiable decoder-side release")
            } else if i.restarted() {
                Some("a target member's container has restarted")
            } else if i.shape.size > 1 && ctx.config.abort_multi_member_retirements {
                Some("non-serving members never read idle")
            } else {
                i.withdrawn = true;
                None
            };
            (
                i.member_uids(),
                i.workload.as_ref().map(|w| w.uid.clone()),
                refusal,
            )
        }
        None => (Vec::new(), None, None),
    };
    let mut state = RetirementState {
        role: role.to_string(),
        ordinal,
        observed_generation: generation,
        member_uids,
        workload_uid,
        step: RetirementStep::Admitted,
        reason: "removal admitted; withdrawing endpoints".into(),
        started_at: now,
        deadline: later(now, ctx.config.budgets.overall),
        phase_started_at: now,
        idle_reads: 0,
    };
    ctx.event(
        &dep.key,
        format!("retirement of {role} ordinal {ordinal} admitted"),
    );
    if let Some(reason) = refusal {
        abort_state(dep, &mut state, reason, ctx);
    }
    dep.retirement = Some(state);
}

/// Advances the deployment's retirement by at most one step.
pub(crate) fn advance(dep: &mut Deployment, ctx: &mut Ctx) {
    let Some(mut state) = dep.retirement.take() else {
        return;
    };
    let now = ctx.now;
    let budgets = ctx.config.budgets;
    let expires = |budget| later(state.phase_started_at, budget).min(state.deadline);
    let restarted = dep
        .instance(&state.role, state.ordinal)
        .is_some_and(|i| i.restarted());
    match state.step {
        RetirementStep::Aborted => {}
        RetirementStep::Admitted | RetirementStep::Draining if restarted => {
            abort_state(
                dep,
                &mut state,
                "a target member's container has restarted",
                ctx,
            );
        }
        RetirementStep::Admitted => {
            // The endpoint labels went with the withdrawal; a router must confirm.
            let confirmed = dep.router_present()
                && now >= later(state.started_at, ctx.config.router_confirm_delay);
            if confirmed {
                set_step(
                    dep,
                    &mut state,
                    RetirementStep::Disqualified,
                    "routers confirm no dispatch",
                    ctx,
                );
            } else if now >= expires(budgets.withdrawal) {
                let reason = if dep.router_present() {
                    "withdrawal was not confirmed before the phase expired"
                } else {
                    "no router can confirm the withdrawal; the phase expired"
                };
                abort_state(dep, &mut state, reason, ctx);
            }
        }
        RetirementStep::Disqualified => {
            set_step(
                dep,
                &mut state,
                RetirementStep::Withdrawing,
                "endpoints withdrawn",
                ctx,
            );
        }
        RetirementStep::Withdrawing => {
            state.phase_started_at = now;
            state.idle_reads = 0;
            set_step(
                dep,
                &mut state,
                RetirementStep::Draining,
                "draining in-flight requests",
                ctx,
            );
        }
        RetirementStep::Draining => {
            // Members that answer are read; a member without an engine serves nothing.
            let idle = dep
                .instance(&state.role, state.ordinal)
                .is_none_or(|i| i.engine.as_ref().is_none_or(|e| e.is_idle()));
            state.idle_reads = if idle { state.idle_reads + 1 } else { 0 };
            if state.idle_reads >= 2 {
                delete_target(dep, &state, ctx);
                set_step(
                    dep,
                    &mut state,
                    RetirementStep::Deleting,
                    "members and Workload deleted",
                    ctx,
                );
            } else if now >= expires(budgets.drain) {
                abort_state(
                    dep,
                    &mut state,
                    "a target member was still busy at the deadline",
                    ctx,
                );
            }
        }
        RetirementStep::Deleting => {
            if dep.instance(&state.role, state.ordinal).is_none() {
                state.phase_started_at = now;
                set_step(
                    dep,
                    &mut state,
                    RetirementStep::Settling,
                    "Pods gone; quota released",
                    ctx,
                );
            }
        }
        RetirementStep::Settling => {
            if now >= later(state.phase_started_at, ctx.config.settle_delay) {
                ctx.event(
                    &dep.key,
                    format!(
                        "retirement of {} ordinal {} completed",
                        state.role, state.ordinal
                    ),
                );
                return;
            }
            if now >= later(state.phase_started_at, budgets.settle) {
                state.reason = "settling outlasted its budget".into();
            }
        }
    }
    dep.retirement = Some(state);
}

fn set_step(
    dep: &Deployment,
    state: &mut RetirementState,
    step: RetirementStep,
    reason: &str,
    ctx: &mut Ctx,
) {
    state.step = step;
    state.reason = reason.to_string();
    ctx.event(
        &dep.key,
        format!(
            "retirement of {} ordinal {}: {}",
            state.role,
            state.ordinal,
            step.as_str()
        ),
    );
}

fn delete_target(dep: &mut Deployment, state: &RetirementState, ctx: &mut Ctx) {
    let gone_at = later(ctx.now, ctx.config.pod_termination);
    if let Some(instance) = dep.instance_mut(&state.role, state.ordinal) {
        instance.phase = super::instance::Phase::Terminating { gone_at };
        let lost = instance.stop_engine();
        dep.lost_requests.extend(lost);
    }
}

/// Aborts: the reservation persists, the instance keeps its Pods, Workload and quota and is
/// routed again.
fn abort_state(dep: &mut Deployment, state: &mut RetirementState, reason: &str, ctx: &mut Ctx) {
    if let Some(instance) = dep.instance_mut(&state.role, state.ordinal) {
        instance.withdrawn = false;
    }
    state.step = RetirementStep::Aborted;
    state.reason = reason.to_string();
    ctx.event(
        &dep.key,
        format!(
            "retirement of {} ordinal {} aborted: {reason}",
            state.role, state.ordinal
        ),
    );
}

/// The stand-in aborts the running retirement from outside its own checks (a failed exec
/// read of a member, a container replaced mid-read, identity drift: TARGET.md section 5),
/// when one runs before `Deleting` and has not aborted yet. Returns its role and ordinal.
pub(crate) fn abort_running(
    dep: &mut Deployment,
    reason: &str,
    ctx: &mut Ctx,
) -> Option<(String, u32)> {
    let mut state = dep.retirement.take()?;
    let aborted = (!state.is_aborted() && state.step.before_deletion()).then(|| {
        abort_state(dep, &mut state, reason, ctx);
        (state.role.clone(), state.ordinal)
    });
    dep.retirement = Some(state);
    aborted
}

/// The target instance was killed from outside (eviction, deleted Pod): a retirement before
/// `Deleting` aborts and releases its hold, removing the instance. When the ordinal is declared
/// again (a held reservation the spec restored) or higher ordinals exist (removing it would
/// leave a gap), the hold is simply released and the instance stays, to be replaced like any
/// other. Returns whether the instance was removed.
pub(crate) fn target_killed(dep: &mut Deployment, role: &str, ordinal: u32, ctx: &mut Ctx) -> bool {
    let Some(mut state) = dep.retirement.take() else {
        return false;
    };
    if !(state.targets(role, ordinal) && state.step.before_deletion()) {
        dep.retirement = Some(state);
        return false;
    }
    let highest = dep
        .roles
        .get(role)
        .and_then(|r| r.instances.keys().max().copied());
    if ordinal < dep.desired(role) || highest != Some(ordinal) {
        ctx.event(
            &dep.key,
            format!(
                "retirement of {role} ordinal {ordinal} released: its declared target was killed"
            ),
        );
        return false;
    }
    if let Some(instances) = dep.roles.get_mut(role) {
        instances.instances.remove(&ordinal);
    }
    if state.step != RetirementStep::Aborted {
        abort_state(
            dep,
            &mut state,
            "a target member was killed from outside",
            ctx,
        );
    } else {
        state.reason = "the held instance was killed from outside; hold released".into();
    }
    dep.retirement = Some(state);
    true
}

/// The retry annotation `<role>:<ordinal>:<token>`, honoured only while the retirement is
/// aborted, for its role and ordinal, with a token never consumed before.
pub(crate) fn apply_retry(dep: &mut Deployment, ctx: &mut Ctx) {
    let Some(state) = dep.retirement.as_ref().filter(|s| s.is_aborted()) else {
        return;
    };
    let Some(text) = dep.annotation(mds_api::target::annotation_keys::RETIREMENT_RETRY) else {
        return;
    };
    let parts: Vec<&str> = text.split(':').collect();
    let [role, ordinal, token] = parts[..] else {
        return;
    };
    let matches = role == state.role
        && ordinal.parse::<u32>().ok() == Some(state.ordinal)
        && !token.is_empty()
        && !dep.consumed_tokens.contains(token);
    if !matches {
        return;
    }
    let (role, ordinal, token) = (state.role.clone(), state.ordinal, token.to_string());
    dep.consumed_tokens.insert(token.clone());
    dep.last_consumed_token = Some(token);
    ctx.event(
        &dep.key,
        format!("retirement of {role} ordinal {ordinal} retried"),
    );
    dep.retirement = None;
    start(dep, &role, ordinal, ctx);
}
