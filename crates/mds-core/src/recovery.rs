//! Records that outlived what made them: kept across a release and resumed on rebinding, or
//! lost with a status write and rebuilt from the target's decision annotation (D22, D29).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::annotations::{DECISION_ANNOTATION, DecisionPayload};
use mds_api::status::{LastCommit, PendingCohort, RebalanceReason, ReplicaVector};

use crate::WriteKind;
use crate::conditions::{self, ACTIVE};
use crate::pass::Pass;
use crate::protocol;
use crate::view::View;

/// Rebinding after a release (Shadow, suspend) or by a fresh controller reading an older
/// status: the pending cohort and the scale-down record kept in status resume when the target
/// still shows our last vector (`lastCommit`, else the cohort's target), so the cohort still
/// times out and an abort is still restored; after an external change they are dropped (D29).
/// Checked on every bind, whatever the status's conditions say (the status may have been
/// written while we were committing, before the binding went); while bound, only while the
/// status does not report `Active` yet.
pub(crate) fn resume_kept_records(pass: &mut Pass, view: &View) {
    let was_committing =
        conditions::reason(&pass.input.scaler.status.conditions, ACTIVE) == Some("Active");
    let kept = pass.status.pending_cohort.is_some() || pass.status.last_scale_down.is_some();
    if (view.ours && was_committing) || !kept {
        return;
    }
    let last_vector = match (&pass.status.last_commit, &pass.status.pending_cohort) {
        (Some(c), _) => Some(&c.vector),
        (None, Some(cohort)) => Some(&cohort.target_vector),
        (None, None) => None,
    };
    let ours = last_vector.is_some_and(|v| {
        v.iter()
            .all(|(role, n)| view.current.get(role).is_none_or(|now| now == n))
    });
    if ours && !view.external_change(&pass.status) {
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

/// A commit of ours is on the target (its decision annotation, our term) but our status does
/// not know it: the status write after it was lost. Rebuild the records it should have left,
/// so a pending cohort still times out and a shrink is still tracked.
pub(crate) fn recover_lost_commit(pass: &mut Pass, view: &View, term: i64) {
    let Some(decision) = protocol::annotation(view.md, DECISION_ANNOTATION)
        .and_then(|d| DecisionPayload::parse(d).ok())
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
        target_generation: view.md.metadata.generation,
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
            && r.reason == Some(RebalanceReason::DonorRelease)
        {
            r.reason = Some(RebalanceReason::ReceiverAcquire);
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
