//! The exhaustion episode: the regrowth backoff after a rollback (D29) and the donor/receiver
//! transaction (spec, *Resource rebalancing*; D27).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::status::ScaleDownOutcome;
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
    let in_transaction = episode.reason.as_deref() == Some(rebalance::DONOR_RELEASE);
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
    // do not. A transaction in flight finishes first.
    let spec_edited = rb
        .exhaustion_episode_generation
        .is_some_and(|g| input.scaler.generation > g);
    let external = external_change(pass, target);
    if (spec_edited || external) && rb.reason.as_deref() != Some(rebalance::DONOR_RELEASE) {
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
    let donor_pods_remain = match (&rb.donor_role, rb.donor_target_replicas) {
        (Some(donor), Some(kept)) => target
            .ordinals_with_pods
            .iter()
            .any(|(r, o)| r == donor && *o >= kept),
        _ => false,
    };
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
        donor_pods_remain,
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
                r.reason = Some(rebalance::RECEIVER_ACQUIRE.to_string());
            }
            false
        }
        // Waiting on a retirement or a cooldown holds scale-down only (D29): the planner's
        // guards do that, and other roles' planned commits go ahead.
        rebalance::Step::Waiting => false,
        rebalance::Step::Refused { reason, message } => {
            if rb.reason.as_deref() != Some(reason) {
                pass.event(true, reason, "Rebalance", message);
            }
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(reason.to_string());
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
                r.reason = Some(rebalance::DONOR_RELEASE.to_string());
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
                r.reason = Some(rebalance::RECEIVER_ACQUIRE.to_string());
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
