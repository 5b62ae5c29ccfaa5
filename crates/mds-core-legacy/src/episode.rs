//! The exhaustion episode: the regrowth backoff after a rollback (D29) and the donor/receiver
//! transaction (spec, *Resource rebalancing*; D27).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::status::{RebalanceStatus, ScaleDownOutcome};
use mds_api::target::Retirement;
use mds_planner::Policy;

use crate::protocol;
use crate::rebalance;
use crate::reconcile::{Pass, commit_vector};
use crate::records::external_change;
use crate::{GrowthBackoff, Memory, Target};

/// The roles whose growth waits after a rollback (D29): the rolled-back cohort's roles and the
/// roles on the same instanceType, for `pendingTimeoutSeconds`, or until a scaler spec edit or
/// an external change of the target starts a new episode (spec, *Resource rebalancing*). While
/// a donor releases its replica, that pool waits for the transaction. The receiver's leg is
/// the transaction's own write, never held here.
pub(crate) fn backoff_roles(pass: &Pass, target: &Target, memory: &mut Memory) -> BTreeSet<String> {
    let Some(episode) = pass.status.rebalance.as_ref() else {
        memory.growth_backoff = None;
        return BTreeSet::new();
    };
    let input = pass.input;
    let spec_edited = input
        .scaler
        .status
        .observed_generation
        .is_some_and(|g| input.scaler.generation > g);
    let in_transaction = episode
        .reason
        .as_ref()
        .map(mds_api::status::RebalanceReason::as_str)
        == Some(rebalance::DONOR_RELEASE);
    if !in_transaction && (spec_edited || external_change(pass, target)) {
        memory.growth_backoff = None;
        return BTreeSet::new();
    }
    let receiver = episode.receiver_role.clone().unwrap_or_default();
    let pool = || protocol::same_pool(target.deployment, [receiver.as_str()]);
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

/// GPUStack's budget for a whole retirement (TARGET.md section 5): the bound of the donor's
/// wait counts from it while the retirement's own deadline is not in sight.
const RETIREMENT_BUDGET_SECONDS: i64 = 300;

pub(crate) fn in_transaction(rb: &RebalanceStatus) -> bool {
    rb.reason
        .as_ref()
        .map(mds_api::status::RebalanceReason::as_str)
        == Some(rebalance::DONOR_RELEASE)
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
pub(crate) fn give_up_at(
    rb: &RebalanceStatus,
    target: &Target,
    pass: &Pass,
) -> Option<jiff::Timestamp> {
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
pub(crate) fn settle_transaction(pass: &mut Pass, target: &Target) {
    let Some(rb) = pass.status.rebalance.clone().filter(in_transaction) else {
        return;
    };
    let receiver = rb.receiver_role.clone().unwrap_or_default();
    let spec_edited = rb
        .exhaustion_episode_generation
        .is_some_and(|g| pass.input.scaler.generation > g);
    if spec_edited {
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
    let count = protocol::current_vector(target.deployment)
        .get(donor)
        .copied();
    let aborted = donor_retirement(&rb, target).is_some_and(|r| r.is_aborted());
    if count.is_none_or(|n| n > kept) || aborted {
        let why = if aborted {
            format!("the retirement of {donor}'s released replica was aborted")
        } else {
            format!("{donor} is no longer at {kept} replicas (restored, adopted or edited)")
        };
        let message =
            format!("{why}: {receiver} does not acquire a replica; the donation is spent");
        if let Some(r) = pass.status.rebalance.as_mut() {
            crate::records::cancel_transaction(r);
        }
        pass.event(false, "RebalanceCancelled", "Rebalance", message);
        return;
    }
    let Some(waiting) = donor_wait(&rb, target) else {
        return; // the donor is gone: the receiver acquires
    };
    let until = give_up_at(&rb, target, pass);
    if until.is_some_and(|until| pass.now() < until) {
        return;
    }
    if let Some(r) = pass.status.rebalance.as_mut() {
        // The donor and the start stay, to say which transaction was given up.
        r.receiver_target_replicas = None;
        r.reason = Some(crate::wire_reason(rebalance::BLOCKED));
    }
    let message = format!(
        "gave up waiting for {waiting}: {receiver} does not acquire {donor}'s released replica; growth plans as usual, and a new exhaustion or a scaler spec edit may donate again"
    );
    pass.event(true, rebalance::BLOCKED, "Rebalance", message);
}

/// Runs the donor/receiver transaction. Returns true while a transaction owns this pass (a
/// write was made, or the donor's retirement is awaited), so no planned commit competes.
pub(crate) fn rebalance_step(
    pass: &mut Pass,
    target: &Target,
    policy: &Policy,
    binding: &str,
    term: i64,
    memory: &mut Memory,
) -> bool {
    let Some(rb) = pass.status.rebalance.clone() else {
        return false;
    };
    let input = pass.input;
    let md = target.deployment;
    // A spec edit or an external change of the target ends the episode (D22): our own commits
    // do not. A transaction in flight finishes first (a spec edit ended it already).
    let spec_edited = rb
        .exhaustion_episode_generation
        .is_some_and(|g| input.scaler.generation > g);
    let external = external_change(pass, target);
    if (spec_edited || external)
        && rb
            .reason
            .as_ref()
            .map(mds_api::status::RebalanceReason::as_str)
            != Some(rebalance::DONOR_RELEASE)
    {
        pass.status.rebalance = None;
        return false;
    }
    let current = protocol::current_vector(md);
    let instance_types: BTreeMap<String, String> = md
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.instance_type.clone().unwrap_or_default()))
        .collect();
    let cooldown_active = pass.status.last_scale_down.as_ref().is_some_and(|l| {
        l.outcome == ScaleDownOutcome::Aborted
            && l.cooldown_until.as_ref().is_some_and(|t| input.now < t.0)
    });
    let growth_blocked = target
        .admission
        .values()
        .any(|a| *a != mds_api::target::WorkloadAdmission::Admitted);
    let facts = rebalance::TargetFacts {
        current: &current,
        instance_types: &instance_types,
        growth_blocked,
        retirement_active: md.status.as_ref().is_some_and(|s| s.retirement.is_some()),
        cooldown_active,
        donor_remains: donor_wait(&rb, target).is_some(),
    };
    let spec = input.scaler.spec;
    let rebalance_spec = spec.rebalance.clone().unwrap_or_default();
    let Some(plan) = pass.plan.clone() else {
        return false;
    };
    let now = pass.now();
    match rebalance::step(
        &rb,
        policy,
        rebalance_spec.policy.unwrap_or_default(),
        &rebalance_spec.priority,
        &plan,
        &facts,
    ) {
        rebalance::Step::Idle => false,
        rebalance::Step::Over => {
            // Our own regrowth in flight does not end the episode: its cohort decides.
            if pass.status.pending_cohort.is_none() {
                pass.status.rebalance = None;
            }
            false
        }
        rebalance::Step::Done => {
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(crate::wire_reason(rebalance::RECEIVER_ACQUIRE));
            }
            false
        }
        // Waiting on a retirement or a cooldown holds scale-down only (D29): the planner's
        // guards do that, and other roles' planned commits go ahead.
        rebalance::Step::Waiting => false,
        rebalance::Step::Refused { reason, message } => {
            if rb
                .reason
                .as_ref()
                .map(mds_api::status::RebalanceReason::as_str)
                != Some(reason)
            {
                pass.event(true, reason, "Rebalance", message);
            }
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(crate::wire_reason(reason));
            }
            false
        }
        rebalance::Step::Release { donor, vector } => {
            let receiver = rb.receiver_role.clone().unwrap_or_default();
            let decision = commit_vector(pass, target, binding, term, memory, &vector);
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.donor_role = Some(donor.clone());
                r.donor_target_replicas = Some(vector[&donor]);
                r.receiver_target_replicas = Some(current.get(&receiver).copied().unwrap_or(0) + 1);
                r.started_at = Some(Time(now));
                r.donation_attempted = true;
                r.reason = Some(crate::wire_reason(rebalance::DONOR_RELEASE));
            }
            pass.event(
                false,
                "DonorRelease",
                "Rebalance",
                format!("{donor} releases one replica for {receiver} (decision {decision})"),
            );
            true
        }
        rebalance::Step::Acquire { vector } => {
            let decision = commit_vector(pass, target, binding, term, memory, &vector);
            let receiver = rb.receiver_role.clone().unwrap_or_default();
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(crate::wire_reason(rebalance::RECEIVER_ACQUIRE));
            }
            pass.event(
                false,
                "ReceiverAcquire",
                "Rebalance",
                format!("{receiver} acquires the released replica (decision {decision})"),
            );
            true
        }
    }
}
