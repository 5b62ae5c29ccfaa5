//! Donor/receiver rebalancing after an exhausted scale-up (spec, *Resource rebalancing*).
//!
//! After a rollback the receiver (the role whose ordinal was not admitted) may still need to
//! grow. The policy picks a donor; the two-step transaction removes one donor replica, waits
//! until its retirement finished and its Workload is gone, then adds one receiver replica. Both
//! intermediate vectors must satisfy bounds and ratios. `Priority` donates once per exhaustion
//! episode; `Opposing` may take another donation at every new exhaustion from a donor that
//! still wants to shrink (D27). A scaler spec edit or an external target change starts a new
//! episode.

use mds_api::ratio_feasibility::Band;
use mds_api::spec::RebalancePolicy;
use mds_api::status::{RebalanceReason, RebalanceStatus, ReplicaVector};
use mds_planner::{Guard, Plan, Policy};

/// What the rebalance step wants this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do.
    Idle,
    /// Remove one donor replica: commit this vector.
    Release {
        donor: String,
        vector: ReplicaVector,
    },
    /// The donor is gone: add one receiver replica.
    Acquire { vector: ReplicaVector },
    /// Waiting for the donor's retirement to finish (or for a guard on scale-down).
    Waiting,
    /// The receiver no longer needs to grow: the episode is over.
    Over,
    /// The receiver already has the replica: the transaction is complete.
    Done,
    /// No donation: the reason (`NotApplicable` or `Blocked`) and a message for the
    /// condition.
    Refused {
        reason: RebalanceReason,
        message: String,
    },
}

/// Facts about the target the step needs.
pub struct TargetFacts<'a> {
    pub current: &'a ReplicaVector,
    /// Role name → instance type.
    pub instance_types: &'a std::collections::BTreeMap<String, String>,
    /// A retirement is active anywhere on the target (a donor's release waits for it).
    pub retirement_active: bool,
    /// An abort cooldown holds scale-down across the target.
    pub cooldown_active: bool,
    /// An ordinal is not admitted anywhere in the target (D18): growth waits.
    pub growth_blocked: bool,
    /// The donor's released replica is not gone yet: its retirement runs, or its Workload
    /// (without the Workload API, a Pod) remains.
    pub donor_remains: bool,
}

fn satisfies(policy: &Policy, vector: &ReplicaVector) -> bool {
    let count = |i: usize| vector.get(&policy.roles[i].name).copied().unwrap_or(0);
    policy
        .roles
        .iter()
        .enumerate()
        .all(|(i, r)| (r.min..=r.max).contains(&count(i)))
        && policy.ratios.iter().all(|r| {
            Band {
                numerator: r.numerator,
                denominator: r.denominator,
                min: r.min,
                max: r.max,
            }
            .satisfied(count(r.numerator) as i64, count(r.denominator) as i64)
        })
}

/// Donor candidates in the order the policy tries them.
fn candidates(
    policy_kind: RebalancePolicy,
    priority: &[String],
    receiver: &str,
    plan: &Plan,
) -> Result<Vec<String>, String> {
    match policy_kind {
        RebalancePolicy::Disabled => {
            Err("rebalance.policy is Disabled: no donation is attempted".into())
        }
        RebalancePolicy::Opposing => Ok(plan
            .roles
            .iter()
            .filter(|r| r.name != receiver && r.raw < r.current)
            .map(|r| r.name.clone())
            .collect()),
        RebalancePolicy::Priority => {
            let Some(at) = priority.iter().position(|p| p == receiver) else {
                return Err(format!(
                    "receiver {receiver:?} is not listed in rebalance.priority, so it does not receive"
                ));
            };
            Ok(priority[at + 1..].to_vec())
        }
    }
}

/// Decides this pass's rebalance step from the episode state in `status`.
pub fn step(
    rebalance: &RebalanceStatus,
    policy: &Policy,
    policy_kind: RebalancePolicy,
    priority: &[String],
    plan: &Plan,
    facts: &TargetFacts,
) -> Step {
    let Some(receiver) = rebalance.receiver_role.clone() else {
        return Step::Idle;
    };
    let reason = rebalance.reason.as_ref();
    if reason == Some(&RebalanceReason::DonorRelease) {
        return acquire_step(rebalance, receiver, facts);
    }
    // An exhausted episode, or one whose last attempt was refused: look again every pass
    // (donors' recommendations and counts change).
    if !matches!(
        reason,
        Some(
            RebalanceReason::ResourceExhausted
                | RebalanceReason::DonationAttempted
                | RebalanceReason::NotApplicable
                | RebalanceReason::Blocked
        )
    ) {
        return Step::Idle;
    }
    // Only while the receiver still needs to grow.
    let Some(wants) = plan.roles.iter().find(|r| r.name == receiver) else {
        return Step::Over;
    };
    if wants.raw <= wants.current {
        return Step::Over;
    }
    // A cancelled transaction, or one given up (blocked with its donor named), spent this
    // exhaustion's donation: another needs another exhaustion (D27), which a new rollback
    // opens.
    let given_up = reason == Some(&RebalanceReason::Blocked) && rebalance.donor_role.is_some();
    if reason == Some(&RebalanceReason::DonationAttempted) || given_up {
        return Step::Idle;
    }
    // Releasing a donor replica is a scale-down: its guards apply.
    if facts.retirement_active || facts.cooldown_active {
        return Step::Waiting;
    }
    // D27: the once-per-episode rule is Priority's alone.
    if rebalance.donation_attempted && policy_kind == RebalancePolicy::Priority {
        return Step::Refused {
            reason: RebalanceReason::Blocked,
            message: "a Priority donation was already attempted in this exhaustion episode; edit the scaler spec or the target to start a new one".into(),
        };
    }
    let order = match candidates(policy_kind, priority, &receiver, plan) {
        Ok(order) => order,
        Err(message) => {
            return Step::Refused {
                reason: RebalanceReason::NotApplicable,
                message,
            };
        }
    };
    choose_donor(policy, policy_kind, plan, facts, &receiver, order)
}

/// A transaction in progress: the donor released; wait for its replica to be gone, then
/// acquire.
fn acquire_step(rebalance: &RebalanceStatus, receiver: String, facts: &TargetFacts) -> Step {
    if facts.donor_remains {
        return Step::Waiting;
    }
    let mut vector = facts.current.clone();
    let target = rebalance.receiver_target_replicas.unwrap_or(0);
    if vector.get(&receiver).is_some_and(|n| *n < target) {
        if facts.growth_blocked {
            return Step::Waiting;
        }
        vector.insert(receiver, target);
        return Step::Acquire { vector };
    }
    Step::Done
}

/// The first donor in `order` that may release a replica with bounds and ratios kept on both
/// legs; else why none may.
fn choose_donor(
    policy: &Policy,
    policy_kind: RebalancePolicy,
    plan: &Plan,
    facts: &TargetFacts,
    receiver: &str,
    order: Vec<String>,
) -> Step {
    let receiver_type = facts.instance_types.get(receiver).filter(|t| !t.is_empty());
    let mut blocked = None;
    let mut guarded = false;
    for donor in order {
        let same_pool =
            receiver_type.is_some() && facts.instance_types.get(&donor) == receiver_type;
        let Some(role) = policy.roles.iter().find(|r| r.name == donor) else {
            continue;
        };
        let Some(&count) = facts.current.get(&donor) else {
            continue;
        };
        if !same_pool || count <= role.min {
            continue;
        }
        // Releasing a replica is the donor's scale-down: its guards apply (a target without a
        // router, incomplete coverage, a decode grace...). Priority may take from a donor its
        // algorithm holds; nothing else overrides a guard.
        let holds = plan
            .roles
            .iter()
            .find(|r| r.name == donor)
            .is_some_and(|r| {
                r.shrink_guards.iter().any(|g| {
                    !(policy_kind == RebalancePolicy::Priority && *g == Guard::AlgorithmHold)
                })
            });
        if holds {
            guarded = true;
            continue;
        }
        let mut release = facts.current.clone();
        release.insert(donor.clone(), count - 1);
        let mut acquire = release.clone();
        *acquire.entry(receiver.to_string()).or_insert(0) += 1;
        if satisfies(policy, &release) && satisfies(policy, &acquire) {
            return Step::Release {
                donor,
                vector: release,
            };
        }
        blocked.get_or_insert(donor);
    }
    match blocked {
        None if guarded => Step::Waiting,
        Some(donor) => Step::Refused {
            reason: RebalanceReason::Blocked,
            message: format!(
                "moving a replica from {donor:?} to {receiver:?} would break bounds or ratios in between"
            ),
        },
        None => Step::Refused {
            reason: RebalanceReason::NotApplicable,
            message: match policy_kind {
                RebalancePolicy::Opposing => format!(
                    "no role can donate to {receiver:?}: under Opposing a donor must recommend shrinking, share its instanceType and be above its minReplicas"
                ),
                _ => format!(
                    "no role can donate to {receiver:?}: a donor needs the same instanceType and more than its minReplicas"
                ),
            },
        },
    }
}
