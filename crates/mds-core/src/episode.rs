//! The exhaustion episode: opened by a rollback, the regrowth backoff after it (D29) and the
//! donor/receiver transaction (spec, *Resource rebalancing*; D27).

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::status::{PendingCohort, RebalanceReason, RebalanceStatus};
use mds_api::target::Retirement;
use mds_planner::Policy;

use crate::guards::abort_cooldown_active;
use crate::history;
use crate::pass::Pass;
use crate::protocol;
use crate::rebalance::{self, Step};
use crate::view::View;
use crate::write::commit_vector;
use crate::{GrowthBackoff, Memory, Target, Write};

/// GPUStack's budget for a whole retirement (TARGET.md section 5): the bound of the donor's
/// wait counts from it while the retirement's own deadline is not in sight.
const RETIREMENT_BUDGET_SECONDS: i64 = 300;

pub(crate) fn in_transaction(rb: &RebalanceStatus) -> bool {
    rb.reason == Some(RebalanceReason::DonorRelease)
}

/// The scaler spec changed since the episode began: it ends the episode (a transaction in
/// flight with it).
fn spec_edited(pass: &Pass, rb: &RebalanceStatus) -> bool {
    rb.exhaustion_episode_generation
        .is_some_and(|g| pass.input.scaler.generation > g)
}

/// A rollback opens an exhaustion episode for `receiver` and holds the rolled-back pool's
/// regrowth. Within one episode a Priority donation is attempted once (D27); our own commits
/// do not end the episode, an external change (`external`, seen before the rollback) does.
pub(crate) fn open(
    pass: &mut Pass,
    view: &View,
    cohort: &PendingCohort,
    receiver: Option<String>,
    external: bool,
    memory: &mut Memory,
) {
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
        reason: Some(RebalanceReason::ResourceExhausted),
        ..RebalanceStatus::default()
    });
    let grown = protocol::changes(&cohort.baseline_vector, &cohort.target_vector);
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    memory.growth_backoff = Some(GrowthBackoff {
        until: pass.now() + SignedDuration::from_secs(timeout),
        roles: protocol::same_pool(view.md, grown.keys().map(String::as_str)),
    });
}

/// Ends a rebalance transaction without its receiver's replica: the exhaustion episode goes
/// on, its donation spent (D27).
pub(crate) fn cancel_transaction(r: &mut RebalanceStatus) {
    r.donor_role = None;
    r.donor_target_replicas = None;
    r.receiver_target_replicas = None;
    r.started_at = None;
    r.reason = Some(RebalanceReason::DonationAttempted);
}

/// The roles whose growth waits after a rollback (D29): the rolled-back cohort's roles and the
/// roles on the same instanceType, for `pendingTimeoutSeconds`, or until a scaler spec edit or
/// an external change of the target starts a new episode (spec, *Resource rebalancing*). While
/// a donor releases its replica, that pool waits for the transaction. The receiver's leg is
/// the transaction's own write, never held here.
pub(crate) fn backoff_roles(pass: &Pass, view: &View, memory: &mut Memory) -> BTreeSet<String> {
    let Some(episode) = pass.status.rebalance.as_ref() else {
        memory.growth_backoff = None;
        return BTreeSet::new();
    };
    let input = pass.input;
    let in_transaction = in_transaction(episode);
    if !in_transaction && (view.spec_changed_since_status || view.external_change(&pass.status)) {
        memory.growth_backoff = None;
        return BTreeSet::new();
    }
    let receiver = episode.receiver_role.clone().unwrap_or_default();
    let pool = || protocol::same_pool(view.md, [receiver.as_str()]);
    if in_transaction {
        return pool();
    }
    // After a restart the timer is gone: start it again from our last commit (never later
    // than now), so it ends at most one timeout late.
    let backoff = memory.growth_backoff.get_or_insert_with(|| {
        let since = pass
            .status
            .last_commit
            .as_ref()
            .and_then(|c| c.timestamp.as_ref())
            .map_or(input.now, |t| t.0.min(input.now));
        GrowthBackoff {
            until: since + SignedDuration::from_secs(input.scaler.spec.pending_timeout_seconds()),
            roles: pool(),
        }
    });
    if input.now < backoff.until {
        backoff.roles.clone()
    } else {
        BTreeSet::new()
    }
}

/// The donor and the count it released down to (its released ordinal), while a transaction
/// waits.
fn donor_of(rb: &RebalanceStatus) -> Option<(&str, i32)> {
    if !in_transaction(rb) {
        return None;
    }
    rb.donor_role.as_deref().zip(rb.donor_target_replicas)
}

/// The retirement reported on the target, when it is one of the donor's released ordinals.
fn donor_retirement<'a>(rb: &RebalanceStatus, target: &'a Target) -> Option<&'a Retirement> {
    let (donor, kept) = donor_of(rb)?;
    target
        .deployment
        .status
        .as_ref()?
        .retirement
        .as_ref()
        .filter(|r| r.role_name == donor && r.replica_ordinal >= kept)
}

/// What the donor step waits for, in words, or `None` once the donor's replica is gone: its
/// own retirement to finish, then its instance's Workload (or, without the Workload API, its
/// Pods) to disappear (spec, *Resource rebalancing*). Another ordinal's retirement record, an
/// `Aborted` one that persists included, is not the donor's and does not hold the receiver.
pub(crate) fn donor_wait(rb: &RebalanceStatus, target: &Target) -> Option<String> {
    let (donor, kept) = donor_of(rb)?;
    if let Some(r) = donor_retirement(rb, target).filter(|r| !r.is_aborted()) {
        return Some(format!(
            "the retirement of {donor}/{} ({}) to finish",
            r.replica_ordinal, r.state
        ));
    }
    // The release removed one replica: the ordinal `donorTargetReplicas`.
    protocol::instance_remains(target, donor, kept).then(|| {
        let what = if target.workloads.is_none() {
            "Pods"
        } else {
            "Workload"
        };
        format!("{donor}/{kept}'s {what} to disappear")
    })
}

/// When the donor step gives up: the later of the retirement budget after the release and the
/// donor retirement's own deadline, plus `pendingTimeoutSeconds` (the time the cluster is given
/// to act on our writes). A transaction without `startedAt` (a status written by hand) counts
/// from our last commit; without either it has no bound and gives up at once.
pub(crate) fn give_up_at(rb: &RebalanceStatus, target: &Target, pass: &Pass) -> Option<Timestamp> {
    let started = rb
        .started_at
        .as_ref()
        .or(pass
            .status
            .last_commit
            .as_ref()
            .and_then(|c| c.timestamp.as_ref()))
        .map(|t| t.0)?;
    let budget = started.checked_add(SignedDuration::from_secs(RETIREMENT_BUDGET_SECONDS));
    let deadline = donor_retirement(rb, target).and_then(|r| r.deadline.as_ref().map(|d| d.0));
    let timeout = SignedDuration::from_secs(pass.input.scaler.spec.pending_timeout_seconds());
    budget
        .ok()?
        .max(deadline.unwrap_or(started))
        .checked_add(timeout)
        .ok()
}

/// Ends a rebalance transaction that can no longer complete, before anything plans on it: a
/// scaler spec edit ends it with its episode; a donor back above its released count (our
/// restore, an adoption, a user's edit) or an aborted donor retirement cancels it, its
/// donation spent; a donor still there at [`give_up_at`] gives up with `RebalanceBlocked`,
/// and nothing holds for it any more (the pool's growth, the receiver's leg).
pub(crate) fn settle_transaction(pass: &mut Pass, view: &View) {
    let Some(rb) = pass.status.rebalance.clone().filter(in_transaction) else {
        return;
    };
    let receiver = rb.receiver_role.clone().unwrap_or_default();
    if spec_edited(pass, &rb) {
        pass.status.rebalance = None;
        let message = format!(
            "the scaler spec changed while a donor released a replica for {receiver}: the transaction and its exhaustion episode end"
        );
        pass.event(false, "RebalanceCancelled", "Rebalance", message);
        return;
    }
    let Some((donor, kept)) = donor_of(&rb) else {
        return; // no donor recorded: the step acquires or finds the receiver done
    };
    let count = view.current.get(donor).copied();
    let aborted = donor_retirement(&rb, view.target).is_some_and(|r| r.is_aborted());
    if count.is_none_or(|n| n > kept) || aborted {
        let why = if aborted {
            format!("the retirement of {donor}'s released replica was aborted")
        } else {
            format!("{donor} is no longer at {kept} replicas (restored, adopted or edited)")
        };
        let message =
            format!("{why}: {receiver} does not acquire a replica; the donation is spent");
        if let Some(r) = pass.status.rebalance.as_mut() {
            cancel_transaction(r);
        }
        pass.event(false, "RebalanceCancelled", "Rebalance", message);
        return;
    }
    let Some(waiting) = donor_wait(&rb, view.target) else {
        return; // the donor is gone: the receiver acquires
    };
    let until = give_up_at(&rb, view.target, pass);
    if until.is_some_and(|until| pass.now() < until) {
        return;
    }
    if let Some(r) = pass.status.rebalance.as_mut() {
        // The donor and the start stay, to say which transaction was given up.
        r.receiver_target_replicas = None;
        r.reason = Some(RebalanceReason::Blocked);
    }
    let message = format!(
        "gave up waiting for {waiting}: {receiver} does not acquire {donor}'s released replica; growth plans as usual, and a new exhaustion or a scaler spec edit may donate again"
    );
    pass.event(true, "RebalanceBlocked", "Rebalance", message);
}

/// The donor/receiver transaction's step this pass, as `rebalance::step` decides it, or
/// `None` without an episode or a plan. A spec edit or an external change of the target ends
/// the episode first (D22): our own commits do not. A transaction in flight finishes first (a
/// spec edit ended it already).
fn decide_step(pass: &mut Pass, view: &View, policy: &Policy) -> Option<(RebalanceStatus, Step)> {
    let rb = pass.status.rebalance.clone()?;
    let ends = spec_edited(pass, &rb) || view.external_change(&pass.status);
    if ends && !in_transaction(&rb) {
        pass.status.rebalance = None;
        return None;
    }
    let facts = rebalance::TargetFacts {
        current: &view.current,
        instance_types: &view.instance_types,
        growth_blocked: view.unadmitted_anywhere,
        retirement_active: view.retirement.is_some(),
        cooldown_active: abort_cooldown_active(&pass.status, pass.now()),
        donor_remains: donor_wait(&rb, view.target).is_some(),
    };
    let spec = pass.input.scaler.spec.rebalance.clone().unwrap_or_default();
    let plan = pass.plan.as_ref()?;
    let policy_kind = spec.policy.unwrap_or_default();
    let step = rebalance::step(&rb, policy, policy_kind, &spec.priority, plan, &facts);
    Some((rb, step))
}

/// Runs the donor/receiver transaction's step. Returns its write, when it makes one: then no
/// planned commit competes.
pub(crate) fn rebalance_step(
    pass: &mut Pass,
    view: &View,
    policy: &Policy,
    term: i64,
    memory: &mut Memory,
) -> Option<Write> {
    let (rb, step) = decide_step(pass, view, policy)?;
    let receiver = rb.receiver_role.clone().unwrap_or_default();
    match step {
        // Waiting on a retirement or a cooldown holds scale-down only (D29): the planner's
        // guards do that, and other roles' planned commits go ahead.
        Step::Idle | Step::Waiting => None,
        Step::Over => {
            // Our own regrowth in flight does not end the episode: its cohort decides.
            if pass.status.pending_cohort.is_none() {
                pass.status.rebalance = None;
            }
            None
        }
        Step::Done => {
            set_reason(pass, RebalanceReason::ReceiverAcquire);
            None
        }
        Step::Refused { reason, message } => {
            if rb.reason.as_ref() != Some(&reason) {
                pass.event(true, refusal_event(&reason), "Rebalance", message);
            }
            set_reason(pass, reason);
            None
        }
        Step::Release { donor, vector } => {
            let write = commit_vector(
                pass,
                view,
                term,
                memory,
                &vector,
                Some(history::DONOR_RELEASE),
            );
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.donor_role = Some(donor.clone());
                r.donor_target_replicas = Some(vector[&donor]);
                r.receiver_target_replicas =
                    Some(view.current.get(&receiver).copied().unwrap_or(0) + 1);
                r.started_at = Some(Time(pass.input.now));
                r.donation_attempted = true;
                r.reason = Some(RebalanceReason::DonorRelease);
            }
            let decision = write.decision_id.as_deref().unwrap_or_default();
            let message =
                format!("{donor} releases one replica for {receiver} (decision {decision})");
            pass.event(false, "DonorRelease", "Rebalance", message);
            Some(write)
        }
        Step::Acquire { vector } => {
            let write = commit_vector(
                pass,
                view,
                term,
                memory,
                &vector,
                Some(history::RECEIVER_ACQUIRE),
            );
            set_reason(pass, RebalanceReason::ReceiverAcquire);
            let decision = write.decision_id.as_deref().unwrap_or_default();
            let message = format!("{receiver} acquires the released replica (decision {decision})");
            pass.event(false, "ReceiverAcquire", "Rebalance", message);
            Some(write)
        }
    }
}

fn set_reason(pass: &mut Pass, reason: RebalanceReason) {
    if let Some(r) = pass.status.rebalance.as_mut() {
        r.reason = Some(reason);
    }
}

/// A refused donation's event takes the reason it records.
fn refusal_event(reason: &RebalanceReason) -> &'static str {
    match reason {
        RebalanceReason::NotApplicable => "RebalanceNotApplicable",
        _ => "RebalanceBlocked",
    }
}
