//! Writes of replica counts and the records they leave in status: `lastCommit`, and for a
//! commit the pending cohort and scale-up times of grown roles and the scale-down record of a
//! shrunk one. Each returns the write; the pass keeps one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::annotations::DecisionPayload;
use mds_api::status::{DecisionKind, LastCommit, PendingCohort, ReplicaVector};
use mds_planner::state::Growth;

use crate::history;
use crate::pass::Pass;
use crate::patch;
use crate::protocol;
use crate::view::View;
use crate::{Memory, Write, WriteKind};

/// Commits the plan's vector when it differs from the target's, unless the same vector was
/// refused before.
pub(crate) fn commit_plan(
    pass: &mut Pass,
    view: &View,
    term: i64,
    memory: &mut Memory,
) -> Option<Write> {
    let plan = pass.plan.as_ref().filter(|p| p.conflict.is_none())?;
    let mut vector = view.current.clone();
    for r in &plan.roles {
        vector.insert(r.name.clone(), r.constrained);
    }
    let changes = protocol::changes(&view.current, &vector);
    if changes.is_empty() {
        return None;
    }
    // TARGET.md: a refusal is Blocked, not a retry loop. Released by a change of the spec or
    // the target (the shell stops passing the refusal) or by a plan for another vector.
    if let Some(refused) = pass.input.refused.filter(|r| r.vector == vector) {
        pass.refused = Some(refused.message.clone());
        return None;
    }
    let write = commit_vector(pass, view, term, memory, &vector, None);
    let reason = pass
        .status
        .decisions
        .last()
        .map(|d| d.reason.clone())
        .unwrap_or_default();
    let summary: Vec<String> = changes
        .iter()
        .map(|(r, (a, b))| format!("{r} {a}->{b}"))
        .collect();
    let decision = write.decision_id.as_deref().unwrap_or_default();
    let message = format!(
        "decision {decision}: {} (reason {reason})",
        summary.join(", ")
    );
    pass.event(false, "Scaled", WriteKind::Commit.action(), message);
    Some(write)
}

/// Commits `vector` and records what it starts: a pending cohort and the scale-up time of
/// every grown role, the scale-down record of a shrunk role. `reason` names a donation step;
/// a planned commit takes its roles' reasons.
pub(crate) fn commit_vector(
    pass: &mut Pass,
    view: &View,
    term: i64,
    memory: &mut Memory,
    vector: &ReplicaVector,
    reason: Option<&'static str>,
) -> Write {
    let now = pass.now();
    let current = &view.current;
    let changes = protocol::changes(current, vector);
    let write = record_commit(pass, view, term, vector, WriteKind::Commit, reason);
    let grown: Vec<&String> = changes
        .iter()
        .filter(|(_, (a, b))| b > a)
        .map(|(r, _)| r)
        .collect();
    if !grown.is_empty() {
        pass.status.pending_cohort = Some(PendingCohort {
            decision_id: write.decision_id.clone().unwrap_or_default(),
            term,
            baseline_vector: current.clone(),
            target_vector: vector.clone(),
            started_at: Some(Time(now)),
        });
        if let Some(planner) = memory.planner.as_mut() {
            for role in &grown {
                let (from, to) = changes[*role];
                let memory = planner.roles.entry((*role).clone()).or_default();
                memory.last_scale_up = Some(now);
                memory.last_growth = Some(Growth { at: now, from, to });
                memory.growth_ready_at = None;
                memory.guard.record_growth();
            }
        }
    }
    if let Some(planner) = memory.planner.as_mut() {
        // D33: each shrink of ours is watched for a reversal by the latency guard.
        for (role, (from, to)) in changes.iter().filter(|(_, (a, b))| b < a) {
            let memory = planner.roles.entry(role.clone()).or_default();
            memory
                .shrink
                .record_shrink(now, *from, *to, memory.stable_demand);
        }
    }
    if let Some(record) = protocol::scale_down_record(current, vector) {
        pass.status.last_scale_down = Some(record);
    }
    write
}

/// Writes `vector` with a new decision and records `lastCommit` and the decision history
/// (`reason` as [`history::record_write`] takes it).
pub(crate) fn record_commit(
    pass: &mut Pass,
    view: &View,
    term: i64,
    vector: &ReplicaVector,
    kind: WriteKind,
    reason: Option<&'static str>,
) -> Write {
    let decision = protocol::decision_id(pass.input.scaler.name, term, pass.now());
    let history_kind = match kind {
        WriteKind::Rollback => DecisionKind::Rollback,
        WriteKind::Restore => DecisionKind::Restore,
        _ => DecisionKind::Commit,
    };
    history::record_write(
        pass,
        history_kind,
        &decision,
        (&view.current, vector),
        reason,
    );
    let payload = DecisionPayload {
        decision_id: decision.clone(),
        term,
        vector: vector.clone(),
    }
    .to_annotation();
    let spec_changes = !protocol::changes(&view.current, vector).is_empty();
    let generation = view.md.metadata.generation.unwrap_or(0);
    pass.status.last_commit = Some(LastCommit {
        decision_id: decision.clone(),
        term,
        vector: vector.clone(),
        baseline_vector: view.current.clone(),
        timestamp: Some(Time(pass.now())),
        // A spec change bumps the generation; the annotation alone does not.
        target_generation: Some(if spec_changes {
            generation + 1
        } else {
            generation
        }),
    });
    Write {
        kind,
        ops: patch::commit(&view.shape, &view.binding_text, vector, &payload),
        vector: Some(vector.clone()),
        decision_id: Some(decision),
        term,
    }
}
