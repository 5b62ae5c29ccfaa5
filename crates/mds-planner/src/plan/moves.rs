//! One role's move this pass under the Pacing and guards rules: the highest count it may
//! grow to and the lowest it may shrink to, each with the limits and guards that set it.

use jiff::{SignedDuration, Timestamp};
use mds_api::target::RoleKind;

use super::{Guard, Limit, PlanInput};
use crate::algorithms::Recommendation;
use crate::policy::RolePolicy;
use crate::state::PlannerState;

/// The counts a role may take this pass in each direction.
pub(super) struct Moves {
    /// Highest count when its component grows.
    pub(super) up: i32,
    /// Lowest count when its component shrinks.
    pub(super) down: i32,
    pub(super) up_limits: Vec<Limit>,
    pub(super) down_limits: Vec<Limit>,
    pub(super) shrink_guards: Vec<Guard>,
}

pub(super) fn moves(
    input: &PlanInput,
    state: &PlannerState,
    i: usize,
    rec: &Recommendation,
) -> Moves {
    let current = input.roles[i].current;
    let (up, up_limits) = growth_box(input, state, i, rec);
    let shrink_guards = shrink_guards(input, state, i, rec);
    let (down, down_limits) = if shrink_guards.is_empty() {
        shrink_box(input, state, i, rec)
    } else {
        let limits = shrink_guards.iter().copied().map(Limit::Guard).collect();
        (current, limits)
    };
    Moves {
        up,
        down,
        up_limits,
        down_limits,
        shrink_guards,
    }
}

/// The highest count role `i` may grow to this pass, with the limits that set it (spec,
/// Pacing and guards): none while ordinals wait for admission or an exhausted write backs
/// off (each is then the limit); else the lowest of the growth step (D16), `maxReplicas` and
/// the scale-up window's lowest recommendation, never below the current count. Only the
/// limits a result stops at are reported.
fn growth_box(
    input: &PlanInput,
    state: &PlannerState,
    i: usize,
    rec: &Recommendation,
) -> (i32, Vec<Limit>) {
    let policy = input.policy;
    let role = &policy.roles[i];
    let current = input.roles[i].current;
    if input.guards.unadmitted_ordinals {
        return (current, vec![Limit::Guard(Guard::UnadmittedOrdinals)]);
    }
    if input.roles[i].growth_backoff {
        return (current, vec![Limit::Guard(Guard::ExhaustionBackoff)]);
    }
    let step = policy.growth_step(current);
    let mut caps: Vec<(i32, Limit)> = vec![
        (
            current.saturating_add(step),
            Limit::Step { max_change: step },
        ),
        (role.max, bound_limit(role)),
    ];
    let window = policy.scale_up_window_seconds;
    if window > 0 && rec.raw > current {
        let (cap, lowest) = window_edge(state, &role.name, input.now, window, current, Up);
        caps.push((
            cap,
            Limit::ScaleUpWindow {
                window_seconds: window,
                lowest,
            },
        ));
    }
    tightest(caps, current, Up)
}

/// What holds role `i` from shrinking this pass (spec, Pacing and guards): no ready replica
/// or incomplete coverage, the algorithm's hold, a retirement under way, a commit not yet
/// observed, no router, the cooldown after an abort, a refused scale-down, and a Decode
/// role's grace after it grew.
fn shrink_guards(
    input: &PlanInput,
    state: &PlannerState,
    i: usize,
    rec: &Recommendation,
) -> Vec<Guard> {
    let policy = input.policy;
    let role = &policy.roles[i];
    let now = input.now;
    let mut guards = Vec::new();
    match input.roles[i].observation.as_ref() {
        Some(o) if o.ready_replicas == 0 => guards.push(Guard::NoReadyReplicas),
        Some(o) if !o.coverage_complete => guards.push(Guard::IncompleteCoverage),
        None => guards.push(Guard::IncompleteCoverage),
        _ => {}
    }
    if rec.holds_scale_down {
        guards.push(Guard::AlgorithmHold);
    }
    if input.guards.retirement_active {
        guards.push(Guard::RetirementActive);
    }
    if input.guards.commit_unobserved {
        guards.push(Guard::CommitNotObserved);
    }
    if input.guards.router_missing {
        guards.push(Guard::NoRouter);
    }
    if input
        .guards
        .abort_cooldown_until
        .is_some_and(|until| now < until)
    {
        guards.push(Guard::AbortCooldown);
    }
    if input.guards.scale_down_refused.contains(&role.name) {
        guards.push(Guard::ScaleDownRefused);
    }
    let last_scale_up = state.roles.get(&role.name).and_then(|s| s.last_scale_up);
    if role.kind == RoleKind::Decode
        && last_scale_up
            .is_some_and(|t| now < t + SignedDuration::from_secs(policy.decode_grace_seconds))
    {
        guards.push(Guard::DecodePostScaleUpGrace);
    }
    guards
}

/// The lowest count role `i` may shrink to this pass when no guard holds it, with the limits
/// that set it (spec, Pacing and guards): the highest of the shrink step, `minReplicas` and
/// the scale-down window's highest recommendation, never above the current count. The mirror
/// of [`growth_box`]; only the limits a result stops at are reported.
fn shrink_box(
    input: &PlanInput,
    state: &PlannerState,
    i: usize,
    rec: &Recommendation,
) -> (i32, Vec<Limit>) {
    let policy = input.policy;
    let role = &policy.roles[i];
    let current = input.roles[i].current;
    let step = policy.shrink_step(current);
    let mut floors: Vec<(i32, Limit)> = vec![
        (current - step, Limit::Step { max_change: step }),
        (role.min, bound_limit(role)),
    ];
    let window = policy.scale_down_window_seconds;
    if rec.raw < current {
        let (floor, highest) = window_edge(state, &role.name, input.now, window, current, Down);
        floors.push((
            floor,
            Limit::ScaleDownWindow {
                window_seconds: window,
                highest,
            },
        ));
    }
    tightest(floors, current, Down)
}

/// A role's `minReplicas`..`maxReplicas` as a limit.
fn bound_limit(role: &RolePolicy) -> Limit {
    Limit::Bound {
        min: role.min,
        max: role.max,
    }
}

/// Which way a box reaches from the current count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}
use Direction::{Down, Up};

/// The tightest of `edges` from `current` in `direction` (the lowest cap going up, the highest
/// floor going down), never past `current` the other way, with the limits that set it.
fn tightest(edges: Vec<(i32, Limit)>, current: i32, direction: Direction) -> (i32, Vec<Limit>) {
    let values = edges.iter().map(|(e, _)| *e);
    let edge = match direction {
        Up => values.min().unwrap_or(current).max(current),
        Down => values.max().unwrap_or(current).min(current),
    };
    let limits = edges
        .into_iter()
        .filter(|(e, _)| match direction {
            Up => *e <= edge,
            Down => *e >= edge,
        })
        .map(|(_, l)| l)
        .collect();
    (edge, limits)
}

/// A stabilization window's edge for a role at `current` (D15): going up, the lowest
/// recommendation within `window` seconds before `now`; going down, the highest; never past
/// `current` the other way, and `current` itself while the memory does not span the window.
/// Returns the edge and the recommendation to report (only when the memory spans it).
fn window_edge(
    state: &PlannerState,
    role: &str,
    now: Timestamp,
    window: i64,
    current: i32,
    direction: Direction,
) -> (i32, Option<i32>) {
    let (range, spans) = state
        .roles
        .get(role)
        .map(|s| s.recommendation_range(now, window))
        .unwrap_or_default();
    let value = range.map(|(lowest, highest)| if direction == Up { lowest } else { highest });
    let edge = match (spans, direction) {
        (false, _) => current,
        (true, Up) => value.unwrap_or(current).max(current),
        (true, Down) => value.unwrap_or(current).min(current),
    };
    (edge, value.filter(|_| spans))
}
