//! `Outcome::wake_at`: the earliest moment after `now` at which the core could decide
//! otherwise without new input. Computed from what the pass leaves behind (the new status,
//! the memory), so an edge this pass created (a commit's cohort, a scale-up's grace) counts.
//! An edge that may not change anything still counts: waking early is harmless, late is not.

use jiff::{SignedDuration, Timestamp};

use crate::Memory;
use crate::episode::{give_up_at, in_transaction};
use crate::pass::Pass;

fn after(t: Timestamp, seconds: i64) -> Option<Timestamp> {
    t.checked_add(SignedDuration::from_secs(seconds)).ok()
}

/// The minimum of every edge ahead of `now`; `None` when nothing waits on the clock.
pub(crate) fn wake_at(pass: &Pass, memory: &Memory) -> Option<Timestamp> {
    let now = pass.now();
    let spec = pass.input.scaler.spec;
    let timeout = spec.pending_timeout_seconds();
    let status = &pass.status;
    let mut edges: Vec<Option<Timestamp>> = Vec::new();
    // A pending cohort is exhausted once more than `pendingTimeoutSeconds` whole seconds
    // have passed since it started.
    if let Some(started) = status
        .pending_cohort
        .as_ref()
        .and_then(|c| c.started_at.as_ref())
    {
        edges.push(after(started.0, timeout + 1));
    }
    // An aborted retirement's cooldown holds scale-down until it ends.
    edges.push(
        status
            .last_scale_down
            .as_ref()
            .and_then(|l| l.cooldown_until.as_ref())
            .map(|t| t.0),
    );
    // D29: regrowth after a rollback waits until the backoff ends.
    edges.push(memory.growth_backoff.as_ref().map(|b| b.until));
    // A removed instance without a retirement record holds scale-down one timeout at most.
    edges.push(
        memory
            .retirement_gap
            .as_ref()
            .and_then(|g| after(g.since, timeout)),
    );
    // A rebalance transaction gives up on its donor at its bound.
    if let (Some(rb), Some(target)) = (
        status.rebalance.as_ref().filter(|rb| in_transaction(rb)),
        pass.input.target.as_ref(),
    ) {
        edges.push(give_up_at(rb, target, pass));
    }
    if let Some(planner) = memory.planner.as_ref() {
        // D13, D32: growth is in flight until its timeout while its replicas start, and one
        // interval after they are all ready.
        for role in planner.roles.values() {
            edges.push(role.last_growth.and_then(|g| after(g.at, timeout)));
            edges.push(
                role.growth_ready_at
                    .and_then(|t| after(t, spec.interval_seconds())),
            );
        }
        // The planner's own edges: windows and the decode grace.
        if let Some(policy) = pass.policy.as_ref() {
            edges.push(mds_planner::wake_at(policy, planner, now));
        }
    }
    edges.into_iter().flatten().filter(|t| *t > now).min()
}
