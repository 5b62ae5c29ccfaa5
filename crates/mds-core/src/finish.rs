//! The end of a pass: `MetricsReady` and `Blocked` from the plan and the records, the other
//! conditions applied, planner memory persisted, and whether the status must be written (D23).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use mds_api::status::{ModelDeploymentScalerStatus, RebalanceReason, RoleStatus, SignalState};
use mds_api::target::WorkloadAdmission;
use mds_planner::{Guard, Limit, Plan, Reason};

use crate::conditions::{self, BLOCKED, METRICS_READY, Report};
use crate::episode;
use crate::guards::abort_cooldown_active;
use crate::pass::Pass;
use crate::{Memory, Outcome};

/// What holds the recommendations, in priority order: the first that applies is reported.
enum Blocked {
    /// The current vector breaks the policy (the plan's conflict): its reason and message.
    Conflict {
        reason: &'static str,
        message: String,
    },
    RatioConflict,
    /// An aborted retirement's cooldown runs, or the target refuses a role's scale-down
    /// (D35): what holds and what clears it.
    ScaleDownAborted(String),
    /// `RebalanceNotApplicable`: no role can donate.
    NoDonor,
    /// `RebalanceBlocked`: a donation breaks bounds or ratios, was attempted, or was given up.
    DonationRefused(String),
    ResourceExhausted(String),
    /// Refused counts are held.
    RefusedCommit(String),
    PacingBounded(String),
    Ready,
}

impl Blocked {
    fn of(pass: &Pass, plan: &Plan) -> Blocked {
        if let Some((reason, message)) = &plan.conflict {
            return Blocked::Conflict {
                reason: reason.as_str(),
                message: format!("{message}; adjust the policy to include the current vector"),
            };
        }
        let episode = episode_reason(pass);
        if plan.roles.iter().any(|r| r.reason == Reason::RatioConflict) {
            Blocked::RatioConflict
        } else if let Some(refused) = crate::refusals::blocked_message(pass) {
            Blocked::ScaleDownAborted(refused)
        } else if abort_cooldown_active(&pass.status, pass.now()) {
            Blocked::ScaleDownAborted(
                "a retirement was aborted and restored; scale-down waits for the cooldown".into(),
            )
        } else if episode == Some(&RebalanceReason::NotApplicable) {
            Blocked::NoDonor
        } else if episode == Some(&RebalanceReason::Blocked) {
            Blocked::DonationRefused(rebalance_blocked(pass))
        } else if episode.is_some() {
            Blocked::ResourceExhausted(exhausted_message(pass))
        } else if let Some(message) = &pass.refused {
            Blocked::RefusedCommit(crate::failed_write::held_commit(message))
        } else if plan.pacing_bounded() || pass.retirement_stuck.is_some() {
            Blocked::PacingBounded(pacing_message(pass, plan))
        } else {
            Blocked::Ready
        }
    }

    fn report(self) -> Report {
        let (reason, message) = match self {
            Blocked::Conflict { reason, message } => (reason, message),
            Blocked::RatioConflict => (
                "RatioConflict",
                "no feasible vector was found for a ratio component; it holds its counts".into(),
            ),
            Blocked::ScaleDownAborted(message) => ("ScaleDownAborted", message),
            Blocked::NoDonor => (
                "RebalanceNotApplicable",
                "the receiver still needs to grow but no role can donate (same instanceType, above its minimum, allowed by rebalance.policy)".into(),
            ),
            Blocked::DonationRefused(message) => ("RebalanceBlocked", message),
            Blocked::ResourceExhausted(message) => ("ResourceExhausted", message),
            Blocked::RefusedCommit(message) | Blocked::PacingBounded(message) => {
                ("PacingBounded", message)
            }
            Blocked::Ready => {
                let message = "no constraint holds the recommendations";
                return Report::new(BLOCKED, false, "Ready", message);
            }
        };
        Report::new(BLOCKED, true, reason, message)
    }
}

/// The exhaustion episode's reason, when there is one.
fn episode_reason<'a>(pass: &'a Pass) -> Option<&'a RebalanceReason> {
    pass.status
        .rebalance
        .as_ref()
        .and_then(|r| r.reason.as_ref())
}

/// `MetricsReady` when the plan has no conflict (a conflict reports its own).
fn metrics_ready(pass: &Pass, plan: &Plan) -> Report {
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
    if episode_reason(pass).is_some() {
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
    }
}

/// `PacingBounded`: the held roles and their limits, and what a retirement hold waits for.
fn pacing_message(pass: &Pass, plan: &Plan) -> String {
    let held: Vec<String> = plan
        .roles
        .iter()
        .filter(|r| r.reason == Reason::PacingBounded)
        .map(|r| {
            let limits: Vec<String> = r.limits.iter().map(|l| l.to_string()).collect();
            format!("{} ({})", r.name, limits.join("; "))
        })
        .collect();
    let guard = Limit::Guard(Guard::RetirementActive);
    let retirement_hold = plan.roles.iter().any(|r| r.limits.contains(&guard));
    // D36: a stuck retirement is reported whether or not a role wants to shrink now.
    let mut message = match (&pass.retirement_stuck, held.is_empty()) {
        (Some(stuck), true) => stuck.clone(),
        _ => format!("held by pacing or guards: {}", held.join(", ")),
    };
    if let Some(wait) = pass.scale_down_wait.as_deref().filter(|_| retirement_hold) {
        message.push_str(&format!("; scale-down waits for {wait}"));
    }
    let guard = Limit::Guard(Guard::UnadmittedOrdinals);
    if plan.roles.iter().any(|r| r.limits.contains(&guard))
        && let Some(wait) = admission_wait(pass)
    {
        message.push_str(&format!("; growth waits for {wait}"));
    }
    message
}

/// The ordinals whose admission the growth ceiling waits for (D18), in words with what
/// releases it, or `None` when none is reported (our own cohort not composed yet).
fn admission_wait(pass: &Pass) -> Option<String> {
    let target = pass.input.target.as_ref()?;
    let waiting: Vec<String> = target
        .admission
        .iter()
        .filter(|(_, a)| **a != WorkloadAdmission::Admitted)
        .map(|((role, ordinal), a)| match a {
            WorkloadAdmission::Parked => format!(
                "{role}/{ordinal} (parked: admitted only once its Workload is active again)"
            ),
            _ => format!("{role}/{ordinal}"),
        })
        .collect();
    (!waiting.is_empty()).then(|| {
        format!(
            "the admission of {}; Kueue admits a queued Workload when its instance type's quota has room",
            waiting.join(", ")
        )
    })
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

/// Conditions, memory and the status-write decision.
pub(crate) fn finish(mut pass: Pass, memory: &Memory) -> Outcome {
    let input = pass.input;
    if let Some(plan) = pass.plan.as_ref() {
        let blocked = Blocked::of(&pass, plan);
        let metrics = match &blocked {
            Blocked::Conflict { reason, message } => {
                Report::new(METRICS_READY, false, reason, message.clone())
            }
            _ => metrics_ready(&pass, plan),
        };
        pass.reports.push(metrics);
        pass.reports.push(blocked.report());
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
    if let Some(planner) = memory.planner.as_ref().filter(|_| pass.plan.is_some()) {
        crate::memory::persist(planner, &mut pass.status);
    }
    let written = pass.write.as_ref().and_then(|w| w.vector.as_ref());
    crate::history::summarize(&mut pass.status, written);
    let write_status = control_plane_moved(&pass.status, input.scaler.status);
    let wake_at = crate::wake::wake_at(&pass, memory);
    Outcome {
        write: pass.write,
        status: pass.status,
        write_status,
        events: pass.events,
        plan: pass.plan,
        policy: pass.policy,
        holds_refused_commit: pass.refused.is_some(),
        wake_at,
    }
}

/// Whether what makes a status write necessary (D23) moved: decisions, the binding,
/// conditions, and each role's counts and reason. Histories and filters ride along but do
/// not trigger a write. Counts, names and texts compare as they are; the records compare
/// as written (JSON), so a time compares as the API server stores it (to the second). Equal
/// records write the same JSON, so only records that differ are written out to compare.
fn control_plane_moved(
    new: &ModelDeploymentScalerStatus,
    old: &ModelDeploymentScalerStatus,
) -> bool {
    fn role(r: &RoleStatus) -> impl PartialEq + '_ {
        (
            &r.name,
            r.current_replicas,
            r.ready_replicas,
            r.raw_recommended_replicas,
            r.constrained_replicas,
            &r.reason,
        )
    }
    fn condition(c: &Condition) -> impl PartialEq + '_ {
        (
            &c.type_,
            &c.status,
            &c.reason,
            &c.message,
            c.observed_generation,
        )
    }
    fn records(s: &ModelDeploymentScalerStatus) -> impl PartialEq + '_ {
        (
            &s.binding,
            &s.last_commit,
            &s.pending_cohort,
            &s.rebalance,
            &s.last_scale_down,
            (&s.decisions, &s.summary),
        )
    }
    let written = |s: &ModelDeploymentScalerStatus| {
        serde_json::json!([
            s.binding,
            s.last_commit,
            s.pending_cohort,
            s.rebalance,
            s.last_scale_down,
            s.decisions,
            s.summary
        ])
    };
    new.observed_generation != old.observed_generation
        || !new.roles.iter().map(role).eq(old.roles.iter().map(role))
        || !new
            .conditions
            .iter()
            .map(condition)
            .eq(old.conditions.iter().map(condition))
        || (records(new) != records(old) && written(new) != written(old))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_api::status::LastCommit;

    fn status() -> ModelDeploymentScalerStatus {
        ModelDeploymentScalerStatus {
            observed_generation: Some(3),
            roles: vec![RoleStatus {
                name: "server".into(),
                current_replicas: Some(2),
                ready_replicas: Some(2),
                raw_recommended_replicas: Some(3),
                constrained_replicas: Some(3),
                reason: Some("Recommended".into()),
                ..RoleStatus::default()
            }],
            conditions: vec![Condition {
                type_: METRICS_READY.into(),
                status: "True".into(),
                reason: "Observed".into(),
                message: "every role observed".into(),
                observed_generation: Some(3),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::UNIX_EPOCH,
                ),
            }],
            ..ModelDeploymentScalerStatus::default()
        }
    }

    #[test]
    fn the_control_plane_moves_with_each_of_its_parts_and_nothing_else() {
        let old = status();
        assert!(!control_plane_moved(&status(), &old));
        type Edit = fn(&mut ModelDeploymentScalerStatus);
        let edits: [(&str, Edit); 9] = [
            ("generation", |s| s.observed_generation = Some(4)),
            ("current", |s| s.roles[0].current_replicas = Some(3)),
            ("ready", |s| s.roles[0].ready_replicas = Some(1)),
            ("raw", |s| s.roles[0].raw_recommended_replicas = Some(4)),
            ("constrained", |s| s.roles[0].constrained_replicas = None),
            ("reason", |s| s.roles[0].reason = Some("AtMax".into())),
            ("message", |s| s.conditions[0].message.push('!')),
            ("a role more", |s| s.roles.push(RoleStatus::default())),
            ("a commit", |s| {
                s.last_commit = Some(LastCommit {
                    decision_id: "d".into(),
                    ..LastCommit::default()
                })
            }),
        ];
        for (what, edit) in edits {
            let mut new = status();
            edit(&mut new);
            assert!(control_plane_moved(&new, &old), "{what} moves it");
        }
        // A record's time moves it only when it moves as written: to the second.
        let at = |second: i64, nanosecond: i32| {
            let time = jiff::Timestamp::new(1_800_000_000 + second, nanosecond).expect("a time");
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(time))
        };
        let committed_at = |time| {
            let mut s = status();
            s.last_commit = Some(LastCommit {
                decision_id: "d".into(),
                timestamp: time,
                ..LastCommit::default()
            });
            s
        };
        let old_commit = committed_at(at(0, 0));
        assert!(!control_plane_moved(
            &committed_at(at(0, 500_000_000)),
            &old_commit
        ));
        assert!(control_plane_moved(&committed_at(at(1, 0)), &old_commit));
        // Histories ride along.
        let mut new = status();
        new.roles[0].prompt_tokens_per_second = Some("12".into());
        new.conditions[0].last_transition_time =
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::MAX);
        assert!(!control_plane_moved(&new, &old));
    }
}
