//! The end of a pass: conditions, the reasons of a protocol write, and whether the status
//! must be written (D23).

use std::collections::BTreeMap;

use mds_api::status::{ModelDeploymentScalerStatus, ScaleDownOutcome, SignalState};
use mds_planner::{Guard, Limit, Reason};

use crate::conditions::{self, BLOCKED, METRICS_READY, Report};
use crate::episode;
use crate::protocol;
use crate::rebalance;
use crate::reconcile::Pass;
use crate::{Memory, Outcome, Target, WriteKind};

/// A rollback or restore is this pass's write: report its counts, not the plan's.
pub(crate) fn report_protocol_write(pass: &mut Pass, target: &Target) {
    let Some(write) = pass
        .write
        .as_ref()
        .filter(|w| matches!(w.kind, WriteKind::Rollback | WriteKind::Restore))
    else {
        return;
    };
    let reason = if write.kind == WriteKind::Rollback {
        Reason::ResourceExhausted
    } else {
        Reason::ScaleDownAborted
    };
    // Only the roles whose count the write changes take its reason.
    let changed = write.vector.as_ref().map_or_else(BTreeMap::new, |vector| {
        protocol::changes(&protocol::current_vector(target.deployment), vector)
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

/// Conditions, memory and the status-write decision.
pub(crate) fn finish(mut pass: Pass, memory: &Memory) -> Outcome {
    let input = pass.input;
    let planned = pass.plan.is_some();
    if planned {
        metrics_and_blocked(&mut pass);
    }
    let generation = pass
        .status
        .observed_generation
        .unwrap_or(input.scaler.generation);
    pass.status.conditions = conditions::apply(
        &input.scaler.status.conditions,
        &pass.reports,
        generation,
        input.now,
    );
    if let Some(planner) = memory.planner.as_ref().filter(|_| planned) {
        crate::memory::persist(planner, &mut pass.status);
    }
    let write_status = control_plane(&pass.status) != control_plane(input.scaler.status);
    let wake_at = crate::wake::wake_at(&pass, memory);
    Outcome {
        write: pass.write,
        status: pass.status,
        write_status,
        events: pass.events,
        plan: pass.plan,
        wake_at,
    }
}

fn metrics_and_blocked(pass: &mut Pass) {
    let plan = pass.plan.as_ref().expect("planned");
    let episode = pass
        .status
        .rebalance
        .as_ref()
        .and_then(|r| r.reason.as_ref().map(|r| r.as_str().to_string()));
    let exhausted = episode.is_some();
    let aborted_cooldown = pass.status.last_scale_down.as_ref().is_some_and(|l| {
        l.outcome == ScaleDownOutcome::Aborted
            && l.cooldown_until
                .as_ref()
                .is_some_and(|t| pass.input.now < t.0)
    });
    // Roles without current readings or complete coverage, and roles their algorithm holds
    // for want of a reading it can use (an unknown kind under a token algorithm, D31).
    let waiting: Vec<&str> = plan
        .roles
        .iter()
        .filter(|r| {
            let observation = pass.input.observations.get(&r.name);
            let observed = observation.is_some_and(|o| {
                matches!(o.signal_state, SignalState::Fresh | SignalState::Idle)
                    && o.coverage_complete
            });
            !observed || r.algorithm_reason == Reason::WaitingForMetrics
        })
        .map(|r| r.name.as_str())
        .collect();
    let (metrics, blocked) = match &plan.conflict {
        Some((reason, message)) => {
            let reason = reason.as_str();
            let message = format!("{message}; adjust the policy to include the current vector");
            (
                Report::new(METRICS_READY, false, reason, message.clone()),
                Report::new(BLOCKED, true, reason, message),
            )
        }
        None => {
            let metrics = if exhausted {
                Report::new(
                    METRICS_READY,
                    false,
                    "ResourceExhausted",
                    "added replicas were not admitted; check quota and admission before growth resumes",
                )
            } else if let Some(problem) = pass.input.sampling_problem {
                // D2: the shell could not read the target at all (an unknown engine).
                Report::new(
                    METRICS_READY,
                    false,
                    "WaitingForMetrics",
                    format!("{problem}; roles {waiting:?} have no readings; scale-down waits"),
                )
            } else if waiting.is_empty() {
                Report::new(
                    METRICS_READY,
                    true,
                    "Observed",
                    "all required role signals are available",
                )
            } else {
                Report::new(
                    METRICS_READY,
                    false,
                    "WaitingForMetrics",
                    format!(
                        "roles {waiting:?} lack current readings or complete coverage; scale-down waits"
                    ),
                )
            };
            let ratio_conflict = plan.roles.iter().any(|r| r.reason == Reason::RatioConflict);
            let blocked = if ratio_conflict {
                Report::new(
                    BLOCKED,
                    true,
                    "RatioConflict",
                    "no feasible vector was found for a ratio component; it holds its counts",
                )
            } else if aborted_cooldown {
                Report::new(
                    BLOCKED,
                    true,
                    "ScaleDownAborted",
                    "a retirement was aborted and restored; scale-down waits for the cooldown",
                )
            } else if episode.as_deref() == Some(rebalance::NOT_APPLICABLE) {
                Report::new(
                    BLOCKED,
                    true,
                    "RebalanceNotApplicable",
                    "the receiver still needs to grow but no role can donate (same instanceType, above its minimum, allowed by rebalance.policy)",
                )
            } else if episode.as_deref() == Some(rebalance::BLOCKED) {
                Report::new(BLOCKED, true, "RebalanceBlocked", rebalance_blocked(pass))
            } else if exhausted {
                Report::new(BLOCKED, true, "ResourceExhausted", exhausted_message(pass))
            } else if let Some(message) = &pass.refused {
                Report::new(
                    BLOCKED,
                    true,
                    "PacingBounded",
                    crate::failed_write::held_commit(message),
                )
            } else if plan.pacing_bounded() {
                let held: Vec<String> = plan
                    .roles
                    .iter()
                    .filter(|r| r.reason == Reason::PacingBounded)
                    .map(|r| {
                        let limits: Vec<String> = r.limits.iter().map(|l| l.to_string()).collect();
                        format!("{} ({})", r.name, limits.join("; "))
                    })
                    .collect();
                let mut message = format!("held by pacing or guards: {}", held.join(", "));
                if let Some(wait) = retirement_hold(pass, plan) {
                    message.push_str(&format!("; scale-down waits for {wait}"));
                }
                Report::new(BLOCKED, true, "PacingBounded", message)
            } else {
                Report::new(
                    BLOCKED,
                    false,
                    "Ready",
                    "no constraint holds the recommendations",
                )
            };
            (metrics, blocked)
        }
    };
    pass.reports.push(metrics);
    pass.reports.push(blocked);
}

/// `RebalanceBlocked`: a donation given up while its donor's replica did not go, or one that
/// breaks bounds or ratios in between or was already attempted (D27).
fn rebalance_blocked(pass: &Pass) -> String {
    match pass
        .status
        .rebalance
        .as_ref()
        .and_then(|r| r.donor_role.as_deref())
    {
        Some(donor) => format!(
            "{donor} released a replica that did not retire and disappear in time, so the receiver did not acquire it; growth plans as usual, and a new exhaustion or a scaler spec edit may donate again"
        ),
        None => "a donation would break bounds or ratios in between, or was already attempted in this episode; edit the scaler spec to start a new one".into(),
    }
}

/// `ResourceExhausted`, and while a donor releases a replica, what the receiver waits for and
/// until when at the latest.
fn exhausted_message(pass: &Pass) -> String {
    let message = "a scale-up was rolled back after its replicas were not admitted";
    let (Some(rb), Some(target)) = (pass.status.rebalance.as_ref(), pass.input.target.as_ref())
    else {
        return message.into();
    };
    let Some(waiting) = episode::donor_wait(rb, target) else {
        return message.into();
    };
    let receiver = rb.receiver_role.as_deref().unwrap_or_default();
    let until = episode::give_up_at(rb, target, pass)
        .map(|t| format!(" (it gives up at {t})"))
        .unwrap_or_default();
    format!("{message}; {receiver} waits for {waiting}{until}")
}

/// What a retirement hold of a held role waits for.
fn retirement_hold<'a>(pass: &'a Pass, plan: &mds_planner::Plan) -> Option<&'a str> {
    let guard = Limit::Guard(Guard::RetirementActive);
    plan.roles
        .iter()
        .any(|r| r.limits.contains(&guard))
        .then_some(pass.scale_down_wait.as_deref())
        .flatten()
}

/// What makes a status write necessary (D23): decisions, the binding, conditions, and each
/// role's counts and reason. Histories and filters ride along but do not trigger a write.
fn control_plane(status: &ModelDeploymentScalerStatus) -> serde_json::Value {
    let roles: Vec<serde_json::Value> = status
        .roles
        .iter()
        .map(|r| {
            serde_json::json!([
                r.name,
                r.current_replicas,
                r.ready_replicas,
                r.raw_recommended_replicas,
                r.constrained_replicas,
                r.reason
            ])
        })
        .collect();
    let conditions: Vec<serde_json::Value> = status
        .conditions
        .iter()
        .map(|c| {
            serde_json::json!([
                c.type_,
                c.status,
                c.reason,
                c.message,
                c.observed_generation
            ])
        })
        .collect();
    serde_json::json!({
        "generation": status.observed_generation,
        "binding": status.binding,
        "lastCommit": status.last_commit,
        "pendingCohort": status.pending_cohort,
        "rebalance": status.rebalance,
        "lastScaleDown": status.last_scale_down,
        "roles": roles,
        "conditions": conditions,
    })
}
