//! The protocol's guards on planning, from the records as they stand after settling (spec,
//! *Pacing and guards*; D5, D13, D18, D29, D32).

use jiff::{SignedDuration, Timestamp};
use mds_api::status::{ModelDeploymentScalerStatus, ScaleDownOutcome};
use mds_planner::Guards;
use mds_planner::state::RoleState;

use crate::pass::Pass;
use crate::protocol::{self, RetirementState};
use crate::view::View;
use crate::{Memory, RetirementGap, Target};

/// The guards for planning. The owner's own pending cohort holds growth; D18: so does any
/// ordinal not admitted anywhere in the target (ours or not).
pub(crate) fn guards(pass: &mut Pass, view: &View, memory: &mut Memory, owner: bool) -> Guards {
    let mut guards = Guards {
        abort_cooldown_until: pass
            .status
            .last_scale_down
            .as_ref()
            .and_then(|l| l.cooldown_until.as_ref().map(|t| t.0)),
        ..Guards::default()
    };
    pass.scale_down_wait = scale_down_wait(pass, view, memory);
    guards.retirement_active = pass.scale_down_wait.is_some();
    guards.commit_unobserved = !commit_observed(pass, view);
    guards.router_missing = view.router_missing;
    guards.scale_down_refused = crate::refusals::refused_roles(pass);
    let own_cohort_pending = owner && pass.status.pending_cohort.is_some();
    guards.unadmitted_ordinals = own_cohort_pending || view.unadmitted_anywhere;
    guards
}

/// An aborted retirement's cooldown still holds scale-down. The record is `Aborted`, or a
/// rollback's shrink recorded while that cooldown ran, which carries it on (`records.rs`).
pub(crate) fn abort_cooldown_active(status: &ModelDeploymentScalerStatus, now: Timestamp) -> bool {
    status
        .last_scale_down
        .as_ref()
        .and_then(|l| l.cooldown_until.as_ref())
        .is_some_and(|t| now < t.0)
}

/// Our last commit is visible in the target's status: every reported `desired` count equals
/// it, or the retirement reports our generation (TARGET.md section 3). Until then another
/// shrink could race the first retirement, so scale-down waits. An external change of the
/// target supersedes our last commit, so the guard applies only while the generation is ours
/// (D29).
fn commit_observed(pass: &Pass, view: &View) -> bool {
    let Some(commit) = pass.status.last_commit.as_ref() else {
        return true;
    };
    if view.external_change(&pass.status) {
        return true;
    }
    let Some(status) = view.md.status.as_ref() else {
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

/// What holds scale-down for retirements, in words, or `None`: a retirement reported on the
/// target (the spec's guard, in any state; GPUStack clears it when the retirement is done, and
/// an `Aborted` one when its replica is adopted or retried), else a removed instance of our
/// last scale-down that is still there without a record (D5 amended: its Workload, or without
/// the Workload API its Pods; GPUStack retires one ordinal at a time). The latter holds
/// `pendingTimeoutSeconds` from the first pass that sees it at most, so a Pod stuck
/// Terminating on a lost node does not hold scale-down for ever.
fn scale_down_wait(pass: &mut Pass, view: &View, memory: &mut Memory) -> Option<String> {
    if let Some(r) = view.retirement {
        memory.retirement_gap = None;
        let release = if r.is_aborted() {
            memory.retirement_phase = None;
            "which stays until its replica is adopted (its count raised again) or retried"
        } else {
            pass.retirement_stuck = stuck_retirement(pass, view, r, memory);
            if let Some(stuck) = &pass.retirement_stuck {
                return Some(stuck.clone());
            }
            "which GPUStack clears when it is done"
        };
        return Some(format!(
            "the retirement of {}/{} ({}), {release}",
            r.role_name, r.replica_ordinal, r.state
        ));
    }
    memory.retirement_phase = None;
    let state = pass
        .status
        .last_scale_down
        .as_ref()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)
        .map(|l| protocol::retirement_state(l, view.target));
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

/// GPUStack's budget for a retirement phase in `state` (TARGET.md section 5): withdrawal 30 s,
/// drain 240 s, settle 30 s; `Deleting` has none of its own (nothing aborts from there), so
/// the whole operation's 300 s stands for it and for any state we do not know.
fn phase_budget_seconds(state: &str) -> i64 {
    match state {
        "Admitted" | "Disqualified" | "Settling" => 30,
        "Withdrawing" => 0,
        "Draining" => 240,
        _ => 300,
    }
}

/// D36: the reported retirement has stood in one phase for `pendingTimeoutSeconds` past the
/// phase's budget (a Pod that never goes: a finalizer, a lost node). Scale-down keeps waiting
/// for it, as the spec's guard says; this names the ordinal, the phase and the Pods to look
/// at, and emits `RetirementStuck` once. The phase is timed from its `phaseStartedAt` (capped
/// by the retirement's `deadline`), else from the first pass that saw it.
fn stuck_retirement(
    pass: &mut Pass,
    view: &View,
    r: &mds_api::target::Retirement,
    memory: &mut Memory,
) -> Option<String> {
    let now = pass.now();
    let same = |p: &crate::RetirementPhase| {
        p.role == r.role_name && p.ordinal == r.replica_ordinal && p.state == r.state
    };
    let mut phase = memory
        .retirement_phase
        .take()
        .filter(|p| same(p) && p.since <= now)
        .unwrap_or_else(|| crate::RetirementPhase {
            role: r.role_name.clone(),
            ordinal: r.replica_ordinal,
            state: r.state.clone(),
            since: r
                .phase_started_at
                .as_ref()
                .map(|t| t.0)
                .filter(|t| *t <= now)
                .unwrap_or(now),
            warned: false,
        });
    let budget_end = phase.since + SignedDuration::from_secs(phase_budget_seconds(&r.state));
    let phase_end = r
        .deadline
        .as_ref()
        .map(|d| d.0)
        .filter(|d| *d >= phase.since)
        .map_or(budget_end, |d| d.min(budget_end));
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    let stuck = now >= phase_end + SignedDuration::from_secs(timeout);
    let words = stuck.then(|| {
        let pods = view
            .target
            .pod_names
            .get(&(r.role_name.clone(), r.replica_ordinal))
            .filter(|names| !names.is_empty())
            .map_or("its Workload (no Pod of it is left)".to_string(), |names| {
                format!("Pod {}", names.join(", "))
            });
        format!(
            "the retirement of {}/{} has stood in {} since {} ({} s past its phase budget): look at \
             {pods} (a finalizer or a lost node can keep it); scale-down waits while it stands",
            r.role_name,
            r.replica_ordinal,
            r.state,
            phase.since,
            (now - phase_end).get_seconds()
        )
    });
    if let Some(words) = &words
        && !phase.warned
    {
        phase.warned = true;
        pass.event(true, "RetirementStuck", "Plan", words.clone());
    }
    memory.retirement_phase = Some(phase);
    words
}

/// D32: whether the latency read now predates our last growth of the role: its replicas have
/// all been ready for less than the p95 the guard reads (`latency_ms`; TTFT for Prefill, ITL
/// for Decode, the larger for Server). A reading of L describes requests that arrived L before
/// it, so its slow requests queued before the replicas were there (D32's "the requests
/// finishing now queued before the last replicas arrived"), and it cannot say whether that
/// growth lowered the breach: the guard does not judge the growth on it. Judged one interval
/// after ready, a start-up backlog's 80 to 160 s TTFT made two growths look futile and
/// stalled the guard for the hour at 6 replicas and 15x (29 % attained, where the maximum
/// of 24 attains 56 %; docs/PERFORMANCE.md). This defers a judgement and never holds a
/// replica: growth goes on as D13 and D32 allow.
pub(crate) fn readings_predate_growth(
    memory: Option<&RoleState>,
    latency_ms: Option<f64>,
    now: Timestamp,
) -> bool {
    let Some(memory) = memory.filter(|m| m.last_growth.is_some()) else {
        return false;
    };
    let Some(ready_at) = memory.growth_ready_at else {
        // Still starting: in flight (D13), so not judged anyway.
        return false;
    };
    latency_ms
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .is_some_and(|ms| now.duration_since(ready_at).as_secs_f64() * 1000.0 < ms)
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
