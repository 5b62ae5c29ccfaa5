//! Records of decisions in flight: the pending cohort and its rollback, the scale-down
//! record and an aborted retirement's restore, records kept across a release, a commit whose
//! status write was lost, and the facts about the target they rest on (D4, D5, D13, D22, D29).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::annotations::{DECISION_ANNOTATION, DecisionPayload};
use mds_api::status::{
    LastCommit, PendingCohort, RebalanceStatus, ReplicaVector, ScaleDownOutcome,
};
use mds_planner::Guards;
use mds_planner::state::RoleState;

use crate::conditions::{self, ACTIVE};
use crate::protocol::{self, CohortState, RetirementState};
use crate::rebalance::{self, RESOURCE_EXHAUSTED};
use crate::reconcile::{Pass, record_commit};
use crate::{GrowthBackoff, Memory, RetirementGap, Target, WriteKind};

/// Our last commit is visible in the target's status: every reported `desired` count equals
/// it, or the retirement reports our generation (TARGET.md section 3). Until then another
/// shrink could race the first retirement, so scale-down waits. An external change of the
/// target supersedes our last commit, so the guard applies only while the generation is ours
/// (D29).
pub(crate) fn commit_observed(pass: &Pass, target: &Target) -> bool {
    let Some(commit) = pass.status.last_commit.as_ref() else {
        return true;
    };
    if external_change(pass, target) {
        return true;
    }
    let Some(status) = target.deployment.status.as_ref() else {
        return true;
    };
    let retirement_caught_up = status
        .retirement
        .as_ref()
        .and_then(|r| r.observed_generation)
        .zip(commit.target_generation)
        .is_some_and(|(seen, ours)| seen >= ours);
    let desired_match =
        status
            .roles
            .iter()
            .all(|r| match (r.desired, commit.vector.get(&r.name)) {
                (Some(desired), Some(&ours)) => desired == ours,
                _ => true,
            });
    desired_match || retirement_caught_up
}

/// Without a router GPUStack never confirms a retirement (TARGET.md section 5): predicting the
/// abort holds scale-down instead of looping through shrink, abort, restore and cooldown.
pub(crate) fn retirement_cannot_complete(md: &mds_api::target::ModelDeployment) -> bool {
    md.spec.router.as_ref().is_none_or(|r| r.name.is_empty())
}

/// Rebinding after a release (Shadow, suspend) or by a fresh controller reading an older
/// status: the pending cohort and the scale-down record kept in status resume when the target
/// still shows our last vector (`lastCommit`, else the cohort's target), so the cohort still
/// times out and an abort is still restored; after an external change they are dropped (D29).
/// Checked on every bind, whatever the status's conditions say (the status may have been
/// written while we were committing, before the binding went); while bound, only while the
/// status does not report `Active` yet.
pub(crate) fn resume_kept_records(pass: &mut Pass, target: &Target, bound: bool) {
    let was_committing =
        conditions::reason(&pass.input.scaler.status.conditions, ACTIVE) == Some("Active");
    let kept = pass.status.pending_cohort.is_some() || pass.status.last_scale_down.is_some();
    if (bound && was_committing) || !kept {
        return;
    }
    let current = protocol::current_vector(target.deployment);
    let last_vector = match (&pass.status.last_commit, &pass.status.pending_cohort) {
        (Some(c), _) => Some(&c.vector),
        (None, Some(cohort)) => Some(&cohort.target_vector),
        (None, None) => None,
    };
    let ours = last_vector.is_some_and(|v| {
        v.iter()
            .all(|(role, n)| current.get(role).is_none_or(|now| now == n))
    });
    if ours && !external_change(pass, target) {
        return;
    }
    pass.status.pending_cohort = None;
    pass.status.last_scale_down = None;
    pass.event(
        false,
        "RecordsDropped",
        WriteKind::Bind.action(),
        "the target changed while the scaler was not bound; its pending scale-up and scale-down records no longer apply",
    );
}

/// What holds scale-down for retirements, in words, or `None`: a retirement reported on the
/// target (the spec's guard, in any state; GPUStack clears it when the retirement is done, and
/// an `Aborted` one when its replica is adopted or retried), else a removed instance of our
/// last scale-down that is still there without a record (D5 amended: its Workload, or without
/// the Workload API its Pods; GPUStack retires one ordinal at a time). The latter holds
/// `pendingTimeoutSeconds` from the first pass that sees it at most, so a Pod stuck
/// Terminating on a lost node does not hold scale-down for ever.
pub(crate) fn scale_down_wait(pass: &Pass, target: &Target, memory: &mut Memory) -> Option<String> {
    if let Some(r) = target
        .deployment
        .status
        .as_ref()
        .and_then(|s| s.retirement.as_ref())
    {
        memory.retirement_gap = None;
        let release = if r.is_aborted() {
            "which stays until its replica is adopted (its count raised again) or retried"
        } else {
            "which GPUStack clears when it is done"
        };
        return Some(format!(
            "the retirement of {}/{} ({}), {release}",
            r.role_name, r.replica_ordinal, r.state
        ));
    }
    let state = pass
        .status
        .last_scale_down
        .as_ref()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)
        .map(|l| protocol::retirement_state(l, target));
    let Some(RetirementState::Remaining {
        role,
        ordinal,
        pods_only,
    }) = state
    else {
        memory.retirement_gap = None;
        return None;
    };
    let now = pass.now();
    let gap = memory
        .retirement_gap
        .take()
        .filter(|g| g.role == role && g.ordinal == ordinal && g.since <= now)
        .unwrap_or(RetirementGap {
            role,
            ordinal,
            since: now,
        });
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    let until = gap.since + SignedDuration::from_secs(timeout);
    let what = if pods_only {
        "its Pods remain"
    } else {
        "its Workload remains"
    };
    let message = format!(
        "{}/{} to go: {what} and no retirement is reported; at most until {until}",
        gap.role, gap.ordinal
    );
    memory.retirement_gap = Some(gap);
    (now < until).then_some(message)
}

/// Ends a rebalance transaction without its receiver's replica: the exhaustion episode goes
/// on, its donation spent (D27).
pub(crate) fn cancel_transaction(r: &mut RebalanceStatus) {
    r.donor_role = None;
    r.donor_target_replicas = None;
    r.receiver_target_replicas = None;
    r.started_at = None;
    r.reason = Some(crate::wire_reason(rebalance::DONATION_ATTEMPTED));
}

/// D13, D32: our own growth of `role` is in flight while an ordinal our last growth commit
/// added to it is not ready and that commit is younger than `pendingTimeoutSeconds`, and then
/// until one full sampling interval of readings that include the added replicas is in: from
/// the first pass that sees them all ready, one `intervalSeconds`. The growth is kept in
/// planner memory, so another role's commit in between does not hide it; that first pass is
/// noted in the same memory. Released by the interval (bounded once they are ready) or the
/// timeout (while they are not).
pub(crate) fn growth_in_flight(
    memory: Option<&mut RoleState>,
    target: &Target,
    role: &str,
    (timeout_seconds, interval_seconds): (i64, i64),
    now: Timestamp,
) -> bool {
    let Some(memory) = memory else {
        return false;
    };
    let Some(growth) = memory.last_growth else {
        return false;
    };
    let current = target
        .deployment
        .spec
        .roles
        .iter()
        .find(|r| r.name == role)
        .map_or(0, |r| r.replicas());
    let starting = (growth.from.max(0)..growth.to.min(current))
        .any(|o| !target.ready_ordinals.contains(&(role.to_string(), o)));
    if starting {
        memory.growth_ready_at = None;
        return growth
            .at
            .checked_add(SignedDuration::from_secs(timeout_seconds))
            .is_ok_and(|end| now < end);
    }
    let ready_at = *memory.growth_ready_at.get_or_insert(now);
    ready_at
        .checked_add(SignedDuration::from_secs(interval_seconds))
        .is_ok_and(|end| now < end)
}

/// A commit of ours is on the target (its decision annotation, our term) but our status does
/// not know it: the status write after it was lost. Rebuild the records it should have left,
/// so a pending cohort still times out and a shrink is still tracked.
pub(crate) fn recover_lost_commit(pass: &mut Pass, target: &Target, term: i64) {
    let md = target.deployment;
    let Some(decision) =
        protocol::annotation(md, DECISION_ANNOTATION).and_then(|d| DecisionPayload::parse(d).ok())
    else {
        return;
    };
    if decision.term != term
        || pass
            .status
            .last_commit
            .as_ref()
            .is_some_and(|c| c.decision_id == decision.decision_id)
    {
        return;
    }
    // The counts before it: the previous commit's vector, else the counts the last written
    // status saw on the target.
    let baseline: ReplicaVector = match pass.status.last_commit.as_ref() {
        Some(previous) => previous.vector.clone(),
        None => pass
            .status
            .roles
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.current_replicas?)))
            .collect(),
    };
    if baseline.is_empty() {
        return; // nothing to compare with: the commit's effects are unknown
    }
    // A decision ID is text on the target: a time from it is never later than now.
    let at = protocol::decision_time(&decision.decision_id)
        .filter(|t| *t <= pass.input.now)
        .unwrap_or(pass.input.now);
    let changes = protocol::changes(&baseline, &decision.vector);
    pass.status.last_commit = Some(LastCommit {
        decision_id: decision.decision_id.clone(),
        term,
        vector: decision.vector.clone(),
        baseline_vector: baseline.clone(),
        timestamp: Some(Time(at)),
        target_generation: md.metadata.generation,
    });
    if changes.values().any(|(a, b)| b > a) {
        pass.status.pending_cohort = Some(PendingCohort {
            decision_id: decision.decision_id.clone(),
            term,
            baseline_vector: baseline.clone(),
            target_vector: decision.vector.clone(),
            started_at: Some(Time(at)),
        });
        if let Some(r) = pass.status.rebalance.as_mut()
            && r.reason
                .as_ref()
                .map(mds_api::status::RebalanceReason::as_str)
                == Some(rebalance::DONOR_RELEASE)
        {
            r.reason = Some(crate::wire_reason(rebalance::RECEIVER_ACQUIRE));
        }
    } else if let Some(record) = protocol::scale_down_record(&baseline, &decision.vector) {
        pass.status.last_scale_down = Some(record);
    }
    pass.event(
        true,
        "Recovered",
        "Recover",
        format!(
            "decision {} was on the target but not in status; its records were rebuilt",
            decision.decision_id
        ),
    );
}

/// The target's generation moved past what our last write expects: someone else changed it
/// (D22).
pub(crate) fn external_change(pass: &Pass, target: &Target) -> bool {
    target
        .deployment
        .metadata
        .generation
        .zip(
            pass.status
                .last_commit
                .as_ref()
                .and_then(|c| c.target_generation),
        )
        .is_some_and(|(now, ours)| now > ours)
}

/// An aborted retirement restores the pre-scale-down vector and starts the cooldown (D5).
pub(crate) fn scale_down_outcome(pass: &mut Pass, target: &Target, binding: &str, term: i64) {
    let Some(last) = pass
        .status
        .last_scale_down
        .clone()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)
    else {
        return;
    };
    if protocol::retirement_state(&last, target) != RetirementState::Aborted {
        return;
    }
    let now = pass.now();
    let current = protocol::current_vector(target.deployment);
    // The roles the scale-down lowered go back (one commit may lower several, D16); roles that
    // moved since (growth commits after the shrink) keep their counts.
    let shrunk = protocol::shrunk_roles(&last, target.deployment);
    let mut restore = current.clone();
    for (role, removed) in &shrunk {
        restore.insert(role.clone(), removed.end);
    }
    let cooldown = pass.input.scaler.spec.cooldown_after_abort_seconds();
    let decision = record_commit(pass, target, binding, term, &restore, WriteKind::Restore);
    // A role whose removed ordinals already retired comes back as new replicas: track them
    // like any growth, so they time out and roll back if they are not admitted.
    let recreated: Vec<&String> = shrunk
        .iter()
        .filter(|(role, removed)| {
            !target
                .ordinals_with_pods
                .iter()
                .any(|(r, o)| r == role && removed.contains(o))
        })
        .map(|(role, _)| role)
        .collect();
    if !recreated.is_empty() {
        // Joined to a cohort already pending (its timer goes on), else a cohort of its own.
        let cohort = pass
            .status
            .pending_cohort
            .get_or_insert_with(|| PendingCohort {
                decision_id: decision,
                term,
                baseline_vector: current.clone(),
                target_vector: current.clone(),
                started_at: Some(Time(now)),
            });
        for role in recreated {
            cohort.baseline_vector.insert(role.clone(), current[role]);
            cohort.target_vector.insert(role.clone(), restore[role]);
        }
    }
    let l = pass.status.last_scale_down.as_mut().expect("present");
    l.outcome = ScaleDownOutcome::Aborted;
    l.aborted_at = Some(Time(now));
    l.cooldown_until = Some(Time(now + SignedDuration::from_secs(cooldown)));
    // An aborted donor retirement cancels its rebalance transaction.
    if pass
        .status
        .rebalance
        .as_ref()
        .and_then(|r| r.donor_role.as_deref())
        == Some(last.role.as_str())
        && let Some(r) = pass.status.rebalance.as_mut()
    {
        cancel_transaction(r);
    }
    let restored: Vec<String> = shrunk
        .iter()
        .map(|(role, removed)| format!("{role} to {}", removed.end))
        .collect();
    pass.event(
        true,
        "ScaleDownAborted",
        WriteKind::Restore.action(),
        format!(
            "a retirement of {} was aborted; restored {}; scale-down waits {cooldown} s",
            last.role,
            restored.join(", ")
        ),
    );
}

/// Tracks the pending cohort; rolls back the whole baseline when admission is exhausted.
pub(crate) fn cohort(
    pass: &mut Pass,
    target: &Target,
    binding: &str,
    term: i64,
    guards: &mut Guards,
    memory: &mut Memory,
) {
    let Some(cohort) = pass.status.pending_cohort.clone() else {
        return;
    };
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    match protocol::cohort_state(&cohort, target, timeout, pass.now()) {
        CohortState::Admitted => {
            pass.status.pending_cohort = None;
            // Growth was admitted: the exhaustion episode (and any transaction) is over.
            if pass.status.rebalance.as_ref().is_some_and(|r| {
                r.reason
                    .as_ref()
                    .map(mds_api::status::RebalanceReason::as_str)
                    != Some(rebalance::DONOR_RELEASE)
            }) {
                pass.status.rebalance = None;
            }
        }
        CohortState::Waiting => guards.unadmitted_ordinals = true,
        CohortState::Exhausted { unadmitted, parked } => {
            // Seen before this rollback's own commit record replaces lastCommit (D22).
            let external = external_change(pass, target);
            let current = protocol::current_vector(target.deployment);
            // The roles the cohort grew go back to its baseline; roles that moved otherwise
            // since (a shrink while the cohort waited) keep their counts.
            let mut baseline = current.clone();
            for (role, (from, _)) in
                protocol::changes(&cohort.baseline_vector, &cohort.target_vector)
            {
                if let Some(now) = baseline.get_mut(&role) {
                    *now = (*now).min(from);
                }
            }
            if baseline == current {
                // Nothing left to restore (the target is already at the baseline, e.g. a pass
                // that read a status older than our own rollback): the cohort is over.
                pass.status.pending_cohort = None;
                return;
            }
            record_commit(pass, target, binding, term, &baseline, WriteKind::Rollback);
            pass.status.pending_cohort = None;
            // A rollback that lowers a role a scale-down also lowered after this growth is not
            // that scale-down: its record must not restore the rolled-back count after an
            // abort. A scale-down made before the growth counted without it, and keeps its
            // count.
            if let Some(last) = pass.status.last_scale_down.as_mut() {
                for (role, (from, to)) in protocol::changes(&current, &baseline) {
                    let grown_to = cohort.target_vector.get(&role).copied().unwrap_or(i32::MAX);
                    if let Some(pre) = last.pre_scale_down_vector.get_mut(&role)
                        && *pre >= grown_to
                    {
                        *pre -= from - to;
                    }
                }
            }
            let receiver = unadmitted.first().map(|(role, _)| role.clone());
            // Within one episode a Priority donation is attempted once (D27); our own commits
            // do not end the episode.
            let generation = pass.input.scaler.generation;
            let attempted = !external
                && pass.status.rebalance.as_ref().is_some_and(|r| {
                    r.exhaustion_episode_generation == Some(generation) && r.donation_attempted
                });
            // The transaction has not started: startedAt waits for the donor's release.
            pass.status.rebalance = Some(RebalanceStatus {
                receiver_role: receiver,
                exhaustion_episode_generation: Some(generation),
                donation_attempted: attempted,
                reason: Some(crate::wire_reason(RESOURCE_EXHAUSTED)),
                ..RebalanceStatus::default()
            });
            let grown = protocol::changes(&cohort.baseline_vector, &cohort.target_vector);
            memory.growth_backoff = Some(GrowthBackoff {
                until: pass.now()
                    + SignedDuration::from_secs(pass.input.scaler.spec.pending_timeout_seconds()),
                roles: protocol::same_pool(target.deployment, grown.keys().map(String::as_str)),
            });
            let why = if parked {
                "a Workload was parked"
            } else {
                "admission timed out"
            };
            let list: Vec<String> = unadmitted.iter().map(|(r, o)| format!("{r}/{o}")).collect();
            pass.event(
                true,
                "ResourceExhausted",
                WriteKind::Rollback.action(),
                format!(
                    "{why} for {}; restored the baseline of decision {}",
                    list.join(", "),
                    cohort.decision_id
                ),
            );
        }
    }
}
