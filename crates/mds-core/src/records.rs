//! Records of decisions in flight, settled before planning: the pending cohort and its
//! rollback (D4, D18), the scale-down record and an aborted retirement's restore (D5). Each
//! returns the protocol write it makes, if any.

use jiff::SignedDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::status::{PendingCohort, ReplicaVector, ScaleDownOutcome};
use mds_planner::Reason;

use crate::episode;
use crate::pass::Pass;
use crate::protocol::{self, CohortState, RetirementState};
use crate::refusals;
use crate::view::View;
use crate::write::record_commit;
use crate::{Memory, Write, WriteKind};

/// An aborted retirement of our last scale-down, else the pending cohort: the write either
/// makes, if any.
pub(crate) fn settle(
    pass: &mut Pass,
    view: &View,
    term: i64,
    memory: &mut Memory,
) -> Option<Write> {
    restore(pass, view, term).or_else(|| track_cohort(pass, view, term, memory))
}

/// An aborted retirement restores the pre-scale-down vector and starts the cooldown (D5).
fn restore(pass: &mut Pass, view: &View, term: i64) -> Option<Write> {
    let last = pass
        .status
        .last_scale_down
        .clone()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)?;
    if protocol::retirement_state(&last, view.target) != RetirementState::Aborted {
        return None;
    }
    let now = pass.now();
    let current = &view.current;
    // The roles the scale-down lowered go back (one commit may lower several, D16); roles that
    // moved since (growth commits after the shrink) keep their counts.
    let shrunk = protocol::shrunk_roles(&last, view.md);
    let mut restore = current.clone();
    for (role, removed) in &shrunk {
        restore.insert(role.clone(), removed.end);
    }
    let cooldown = pass.input.scaler.spec.cooldown_after_abort_seconds();
    let write = record_commit(
        pass,
        view,
        term,
        &restore,
        WriteKind::Restore,
        Some(Reason::ScaleDownAborted.as_str()),
    );
    // A role whose removed ordinals already retired comes back as new replicas: track them
    // like any growth, so they time out and roll back if they are not admitted.
    let recreated: Vec<&String> = shrunk
        .iter()
        .filter(|(role, removed)| {
            !view
                .target
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
                decision_id: write.decision_id.clone().unwrap_or_default(),
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
    if let Some(r) = pass.status.rebalance.as_mut()
        && r.donor_role.as_deref() == Some(last.role.as_str())
    {
        episode::cancel_transaction(r);
    }
    let restored: Vec<String> = shrunk
        .iter()
        .map(|(role, removed)| format!("{role} to {}", removed.end))
        .collect();
    // The retirement that aborted, which need not be of the record's first role (a joint
    // shrink, a rollback).
    let aborted = view
        .retirement
        .map(|r| format!("{}/{}", r.role_name, r.replica_ordinal))
        .unwrap_or_else(|| last.role.clone());
    let aborted_role = view.retirement.map_or(last.role.as_str(), |r| &r.role_name);
    let target_reason = view.retirement.and_then(|r| r.reason.as_deref());
    let refused = refusals::record_abort(pass, view, aborted_role, target_reason)
        .map_or(String::new(), |words| format!("; {words}"));
    pass.event(
        true,
        "ScaleDownAborted",
        WriteKind::Restore.action(),
        format!(
            "the retirement of {aborted} was aborted; restored {}; scale-down waits {cooldown} s{refused}",
            restored.join(", ")
        ),
    );
    Some(write)
}

/// Tracks the pending cohort; rolls back the whole baseline when admission is exhausted.
fn track_cohort(pass: &mut Pass, view: &View, term: i64, memory: &mut Memory) -> Option<Write> {
    let cohort = pass.status.pending_cohort.clone()?;
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    match protocol::cohort_state(&cohort, view.target, timeout, pass.now()) {
        CohortState::Admitted => {
            pass.status.pending_cohort = None;
            // Growth was admitted: the exhaustion episode (and any transaction) is over.
            if pass
                .status
                .rebalance
                .as_ref()
                .is_some_and(|r| !episode::in_transaction(r))
            {
                pass.status.rebalance = None;
            }
            None
        }
        // The planner's guard holds growth while our cohort is pending (`guards`).
        CohortState::Waiting => None,
        CohortState::Exhausted { unadmitted, parked } => {
            rollback(pass, view, term, memory, &cohort, &unadmitted, parked)
        }
    }
}

/// Restores the baseline of the roles an exhausted cohort grew and opens the exhaustion
/// episode.
fn rollback(
    pass: &mut Pass,
    view: &View,
    term: i64,
    memory: &mut Memory,
    cohort: &PendingCohort,
    unadmitted: &[(String, i32)],
    parked: bool,
) -> Option<Write> {
    // Seen before this rollback's own commit record replaces lastCommit (D22).
    let external = view.external_change(&pass.status);
    let current = &view.current;
    // The roles the cohort grew go back to its baseline; roles that moved otherwise since (a
    // shrink while the cohort waited) keep their counts.
    let mut baseline = current.clone();
    for (role, (from, _)) in protocol::changes(&cohort.baseline_vector, &cohort.target_vector) {
        if let Some(now) = baseline.get_mut(&role) {
            *now = (*now).min(from);
        }
    }
    if baseline == *current {
        // Nothing left to restore (the target is already at the baseline, e.g. a pass that
        // read a status older than our own rollback): the cohort is over.
        pass.status.pending_cohort = None;
        return None;
    }
    let write = record_commit(
        pass,
        view,
        term,
        &baseline,
        WriteKind::Rollback,
        Some(Reason::ResourceExhausted.as_str()),
    );
    pass.status.pending_cohort = None;
    record_rollback_shrink(pass, view, current, &baseline);
    let receiver = unadmitted.first().map(|(role, _)| role.clone());
    episode::open(pass, view, cohort, receiver, external, memory);
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
    Some(write)
}

/// The rollback lowers counts, so GPUStack retires the ordinals it removes as it would a
/// shrink's, one at a time, and can abort them: every Prefill/Decode retirement is refused
/// outright (TARGET.md section 5). The spec restores the pre-scale-down vector when "a removed
/// ordinal's retirement ends as `Aborted`" and D5 when it is Aborted "for the role we shrank":
/// neither excepts a rollback. So the rollback records its shrink in `lastScaleDown` like any
/// other, and an abort of its removal is restored (raising the count lets GPUStack adopt the
/// held replica, so the target's counts match what runs again), recorded `Aborted`, and starts
/// the cooldown. Without the record the `Aborted` reservation stayed for ever: no restore
/// cleared it, the retirement guard held scale-down on it, and the unadmitted ordinal it kept
/// held growth (D18).
///
/// An earlier shrink still retiring (growth may commit while a retirement runs, D29) stays in
/// the record: its roles keep their pre-scale-down counts and the rollback's roles take the
/// larger of theirs and their count before the rollback, so an abort of either restores both
/// (GPUStack starts no removal while an abort persists, so neither's ordinals are gone). A
/// cooldown still running goes on: the spec gives it `cooldownAfterAbortSeconds` whole.
fn record_rollback_shrink(
    pass: &mut Pass,
    view: &View,
    before: &ReplicaVector,
    after: &ReplicaVector,
) {
    let Some(mut record) = protocol::scale_down_record(before, after) else {
        return;
    };
    let now = pass.now();
    if let Some(last) = pass.status.last_scale_down.as_ref() {
        let retiring = last.outcome == ScaleDownOutcome::Committed
            && protocol::retirement_state(last, view.target) != RetirementState::Succeeded;
        if retiring {
            let mut merged = last.clone();
            for (role, (from, _)) in protocol::changes(before, after) {
                let pre = merged.pre_scale_down_vector.entry(role).or_insert(from);
                *pre = (*pre).max(from);
            }
            record = merged;
        }
        if last.cooldown_until.as_ref().is_some_and(|t| now < t.0) {
            record.aborted_at = last.aborted_at.clone();
            record.cooldown_until = last.cooldown_until.clone();
        }
    }
    pass.status.last_scale_down = Some(record);
}
