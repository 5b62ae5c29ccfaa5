//! The decision history in status (`status.decisions`, at most [`DECISION_HISTORY`]) and the
//! summary `kubectl get mds` prints. A decision's reason is one of the closed set the role
//! statuses, the events and the operator's metrics use: the planner's [`Reason`] words, and
//! `DonorRelease` / `ReceiverAcquire` for a donation's two steps.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::quantity::{Decimal, Quantity};
use mds_api::status::{
    DECISION_HISTORY, DecisionKind, DecisionRecord, DecisionRole, ModelDeploymentScalerStatus,
    ReplicaVector, StatusSummary,
};
use mds_planner::{Plan, Reason};

use crate::pass::Pass;
use crate::protocol;

/// Why a donation step was written (spec *Rebalancing*).
pub(crate) const DONOR_RELEASE: &str = "DonorRelease";
pub(crate) const RECEIVER_ACQUIRE: &str = "ReceiverAcquire";

/// Records a write of `after` over `before` and returns its reason: `reason` when given (a
/// donation step, a rollback, a restore), else a planned commit's first changed role's.
pub(crate) fn record_write(
    pass: &mut Pass,
    kind: DecisionKind,
    decision_id: &str,
    (before, after): (&ReplicaVector, &ReplicaVector),
    reason: Option<&'static str>,
) -> &'static str {
    let roles = changed_roles(pass.plan.as_ref(), before, after);
    // A commit always changes a role the plan holds; a write with no change names its kind.
    let reason = reason
        .or_else(|| roles.first().map(|(_, r)| *r))
        .unwrap_or(Reason::WithinTolerance.as_str());
    let time = Time(pass.now());
    push(
        &mut pass.status,
        DecisionRecord {
            time,
            decision_id: Some(decision_id.to_string()),
            kind,
            reason: reason.to_string(),
            before: before.clone(),
            after: after.clone(),
            roles: roles.into_iter().map(|(role, _)| role).collect(),
        },
    );
    reason
}

/// A scaler that plans without committing (Shadow, or another scaler owns the target)
/// records each change of its recommended counts: against its previous recommendation, or
/// the target's counts before the first.
pub(crate) fn record_recommendation(pass: &mut Pass, current: &ReplicaVector) {
    let Some(plan) = pass.plan.as_ref().filter(|p| p.conflict.is_none()) else {
        return;
    };
    let previous = pass
        .status
        .decisions
        .iter()
        .rev()
        .find(|d| d.kind == DecisionKind::Recommendation)
        .map_or_else(|| current.clone(), |d| d.after.clone());
    let mut after = previous.clone();
    for role in &plan.roles {
        after.insert(role.name.clone(), role.constrained);
    }
    if after == previous {
        return;
    }
    let roles = changed_roles(Some(plan), &previous, &after);
    let Some(reason) = roles.first().map(|(_, r)| *r) else {
        return;
    };
    let record = DecisionRecord {
        time: Time(pass.now()),
        decision_id: None,
        kind: DecisionKind::Recommendation,
        reason: reason.to_string(),
        before: previous,
        after,
        roles: roles.into_iter().map(|(role, _)| role).collect(),
    };
    push(&mut pass.status, record);
}

/// The summary `kubectl get mds` prints, from this pass's role statuses and history: the
/// counts `written` this pass, else the target's. A pass without role statuses keeps the
/// summary's counts.
pub(crate) fn summarize(status: &mut ModelDeploymentScalerStatus, written: Option<&ReplicaVector>) {
    let counts = |read: &dyn Fn(&mds_api::status::RoleStatus) -> Option<i32>| {
        let known: Vec<(String, i32)> = status
            .roles
            .iter()
            .filter_map(|r| Some((r.name.clone(), read(r)?)))
            .collect();
        match known.as_slice() {
            [] => None,
            [(_, n)] if status.roles.len() == 1 => Some(n.to_string()),
            _ => Some(
                known
                    .iter()
                    .map(|(name, n)| format!("{name}={n}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        }
    };
    let previous = status.summary.take().unwrap_or_default();
    let summary = StatusSummary {
        desired: counts(&|r| {
            written
                .and_then(|w| w.get(&r.name).copied())
                .or(r.current_replicas)
        })
        .or(previous.desired),
        ready: counts(&|r| r.ready_replicas).or(previous.ready),
        last_reason: status.decisions.last().map(|d| d.reason.clone()),
    };
    status.summary = (summary != StatusSummary::default()).then_some(summary);
}

fn push(status: &mut ModelDeploymentScalerStatus, record: DecisionRecord) {
    status.decisions.push(record);
    let excess = status.decisions.len().saturating_sub(DECISION_HISTORY);
    status.decisions.drain(..excess);
}

/// Each role whose count differs, in name order, with its reason and what its algorithm
/// measured in this pass's plan (none for a role the plan did not reach).
fn changed_roles(
    plan: Option<&Plan>,
    before: &ReplicaVector,
    after: &ReplicaVector,
) -> Vec<(DecisionRole, &'static str)> {
    protocol::changes(before, after)
        .into_keys()
        .map(|name| {
            let planned = plan.and_then(|p| p.roles.iter().find(|r| r.name == name));
            let reason = planned
                .map_or(Reason::WithinTolerance, |r| r.reason)
                .as_str();
            let load = planned.and_then(|r| r.load);
            let role = DecisionRole {
                name,
                reason: reason.to_string(),
                metric: load.map(|l| l.metric.to_string()),
                demand: load.and_then(|l| quantity(l.demand)),
                capacity: load.and_then(|l| quantity(l.capacity)),
            };
            (role, reason)
        })
        .collect()
}

/// A measured figure to three decimals (milli precision reads well in status); none when it
/// is not a number.
fn quantity(value: f64) -> Option<Quantity> {
    Decimal::from_f64_rounded(value, 3).map(Quantity::from)
}
