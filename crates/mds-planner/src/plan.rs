//! One planning pass: algorithms, pacing and guards, the solver, one direction per commit.

use jiff::{SignedDuration, Timestamp};
use mds_api::ratio_feasibility::Band;
use mds_api::target::RoleKind;
use mds_signals::RoleObservation;

use crate::algorithms::{self, Recommendation, RoleView};
use crate::policy::{AlgorithmPolicy, Policy};
use crate::reason::Reason;
use crate::solver::{self, SolverBand, SolverRole};
use crate::state::PlannerState;

mod limits;
mod moves;

pub use limits::{Guard, Limit};
use moves::{Moves, moves};

/// One role's inputs, in the order of [`Policy::roles`].
#[derive(Clone, Debug, PartialEq)]
pub struct RoleInput {
    /// Desired count on the target now.
    pub current: i32,
    pub observation: Option<RoleObservation>,
    /// Ordinals our last growth commit added to this role are not ready yet and that commit
    /// is younger than `pendingTimeoutSeconds`: the latency guard and Predictive's extra
    /// replica hold instead of compounding (D13).
    pub growth_in_flight: bool,
    /// Our last growth's replicas have been ready for less than the p95 latency read now, so
    /// the reading's slow requests queued before them: the latency guard does not judge that
    /// growth on it (D32).
    pub readings_predate_growth: bool,
    /// A rolled-back cohort grew this role, or a role on its instanceType, recently: its
    /// regrowth waits (D29).
    pub growth_backoff: bool,
}

/// Facts about the target that guard scale-up and scale-down.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Guards {
    /// `status.retirement` exists on the target (any state).
    pub retirement_active: bool,
    /// Our last commit is not visible in the target's status yet, so a retirement it starts
    /// may not be reported yet.
    pub commit_unobserved: bool,
    /// The target has no router: GPUStack cannot complete a retirement without one.
    pub router_missing: bool,
    /// An aborted retirement's cooldown runs until then.
    pub abort_cooldown_until: Option<Timestamp>,
    /// An added ordinal is not admitted yet (D18): no role grows.
    pub unadmitted_ordinals: bool,
    /// Target roles without bounds in the scaler: planning stops with `BoundsConflict`.
    pub unbounded_target_roles: Vec<String>,
    /// Roles whose retirements the target keeps aborting: no scale-down of them (D35).
    pub scale_down_refused: Vec<String>,
}

/// Everything one pass needs.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    pub policy: &'a Policy,
    pub roles: &'a [RoleInput],
    pub guards: &'a Guards,
    pub now: Timestamp,
    /// When the roles' observations were sampled: `now`, or earlier when this pass reuses the
    /// last sampling (a pass brought forward by a watch event). Recorded once per sampling.
    pub observed_at: Timestamp,
}

/// The result for one role.
#[derive(Clone, Debug, PartialEq)]
pub struct RolePlan {
    pub name: String,
    pub current: i32,
    /// The algorithm's recommendation (`rawRecommendedReplicas`).
    pub raw: i32,
    /// After bounds, ratios, pacing and guards (`constrainedReplicas`).
    pub constrained: i32,
    /// The reason the status shows.
    pub reason: Reason,
    /// The algorithm's own reason, kept when a constraint replaces it.
    pub algorithm_reason: Reason,
    /// What the algorithm saw.
    pub note: String,
    /// Predictive's forecast this pass.
    pub forecast: Option<crate::algorithms::Forecast>,
    /// The load the algorithm sized this role on.
    pub load: Option<crate::algorithms::Load>,
    pub limits: Vec<Limit>,
    /// The guards that hold this role's scale-down this pass (whether or not it wanted to
    /// shrink): a donation, which is a scale-down, waits for them too.
    pub shrink_guards: Vec<Guard>,
}

/// The result of a pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub roles: Vec<RolePlan>,
    /// `BoundsConflict` or `RatioConflict` when planning stopped for the whole target.
    pub conflict: Option<(Reason, String)>,
    /// The planner's next edge after this pass ([`wake_at`] on the memory it left).
    pub wake_at: Option<Timestamp>,
}

impl Plan {
    /// The constrained vector, in policy role order.
    pub fn vector(&self) -> Vec<i32> {
        self.roles.iter().map(|r| r.constrained).collect()
    }

    /// A step limit or guard changed some role's result (`Blocked=PacingBounded`).
    pub fn pacing_bounded(&self) -> bool {
        self.roles.iter().any(|r| r.reason == Reason::PacingBounded)
    }
}

fn band(policy: &Policy, i: usize) -> Band {
    let r = &policy.ratios[i];
    Band {
        numerator: r.numerator,
        denominator: r.denominator,
        min: r.min,
        max: r.max,
    }
}

/// A conflict that stops planning: bounds first, then ratio bands (spec, *Bounds and ratios*).
fn conflict(input: &PlanInput) -> Option<(Reason, String)> {
    let policy = input.policy;
    if let Some(role) = input.guards.unbounded_target_roles.first() {
        return Some((
            Reason::BoundsConflict,
            format!("target role {role:?} has no bounds in spec.roles"),
        ));
    }
    for (r, role) in policy.roles.iter().zip(input.roles) {
        if r.min < 1 || r.max > 1024 || r.min > r.max {
            return Some((
                Reason::BoundsConflict,
                format!(
                    "role {:?} has inconsistent bounds [{}, {}]",
                    r.name, r.min, r.max
                ),
            ));
        }
        if role.current < r.min || role.current > r.max {
            return Some((
                Reason::BoundsConflict,
                format!(
                    "role {:?} has {} replicas, outside its bounds [{}, {}]",
                    r.name, role.current, r.min, r.max
                ),
            ));
        }
    }
    for i in 0..policy.ratios.len() {
        let b = band(policy, i);
        let (n, d) = (
            input.roles[b.numerator].current,
            input.roles[b.denominator].current,
        );
        if !b.satisfied(n as i64, d as i64) {
            return Some((
                Reason::RatioConflict,
                format!(
                    "the current {n}/{d} of {:?}/{:?} lies outside ratio band {i}",
                    policy.roles[b.numerator].name, policy.roles[b.denominator].name
                ),
            ));
        }
    }
    None
}

/// Runs each role's algorithm, then the coupled roles (D12).
fn recommend(input: &PlanInput, state: &mut PlannerState) -> Vec<Recommendation> {
    let policy = input.policy;
    let now = input.now;
    let mut recs: Vec<Option<Recommendation>> = vec![None; policy.roles.len()];
    for (i, role) in policy.roles.iter().enumerate() {
        let view = RoleView {
            kind: &role.kind,
            current: input.roles[i].current,
            observation: input.roles[i].observation.as_ref(),
            growth_in_flight: input.roles[i].growth_in_flight,
            readings_predate_growth: input.roles[i].readings_predate_growth,
            observed_at: input.observed_at,
        };
        let memory = state.roles.entry(role.name.clone()).or_default();
        recs[i] = match &policy.algorithm {
            AlgorithmPolicy::Proportional {
                metric,
                tolerance,
                targets,
            } => targets[i]
                .map(|target| algorithms::proportional(*metric, *tolerance, target, &view)),
            AlgorithmPolicy::TokenThroughput(token) => (role.kind != RoleKind::Encode).then(|| {
                algorithms::record_demand(&view, token, memory);
                algorithms::token_throughput(token, &view, memory, now)
            }),
            AlgorithmPolicy::Predictive(predictive) => (role.kind != RoleKind::Encode).then(|| {
                let demand = algorithms::record_demand(&view, &predictive.fallback, memory);
                algorithms::predictive(predictive, &view, demand, memory, now)
            }),
        };
        if let Some(rec) = recs[i].as_mut()
            && !matches!(policy.algorithm, AlgorithmPolicy::Proportional { .. })
        {
            // D33: a shrink the latency guard reverses is not retried at the same load. The
            // guard names its reading whenever it asks for growth.
            memory.shrink.observe(
                now,
                policy.scale_down_window_seconds,
                memory.guard.asked_reading,
                memory.stable_demand,
            );
            memory.shrink.hold(rec);
        }
    }
    // Coupled roles follow a directly linked role's recommendation through the ratio target,
    // or through the current ratio when the band has no target.
    for _ in 0..policy.roles.len() {
        for i in 0..policy.roles.len() {
            if recs[i].is_some() {
                continue;
            }
            for (r, ratio) in policy.ratios.iter().enumerate() {
                let (partner, i_is_numerator) = match (ratio.numerator == i, ratio.denominator == i)
                {
                    (true, _) => (ratio.denominator, true),
                    (_, true) => (ratio.numerator, false),
                    _ => continue,
                };
                let Some((partner_rec, partner_holds)) =
                    recs[partner].as_ref().map(|p| (p.raw, p.holds_scale_down))
                else {
                    continue;
                };
                // Follow what the partner can reach, not a count beyond its bounds.
                let partner_role = &policy.roles[partner];
                let partner_rec = partner_rec.clamp(partner_role.min, partner_role.max);
                let (current, partner_current) = (
                    input.roles[i].current as f64,
                    input.roles[partner].current as f64,
                );
                let ratio_value = ratio
                    .target
                    .map(|t| t.to_f64())
                    .unwrap_or(if i_is_numerator {
                        current / partner_current
                    } else {
                        partner_current / current
                    });
                let raw = if i_is_numerator {
                    partner_rec as f64 * ratio_value
                } else {
                    partner_rec as f64 / ratio_value
                };
                let raw = raw.round().clamp(1.0, 1024.0) as i32;
                recs[i] = Some(Recommendation {
                    raw,
                    reason: Reason::RatioCoupled,
                    // The partner's hold (missing signals, panic, latency) holds this role too.
                    holds_scale_down: partner_holds,
                    note: format!(
                        "follows {:?} ({partner_rec}) through ratio {r} at {ratio_value:.3}",
                        policy.roles[partner].name
                    ),
                    forecast: None,
                    load: None,
                });
                break;
            }
        }
    }
    recs.into_iter()
        .enumerate()
        .map(|(i, rec)| {
            rec.unwrap_or(Recommendation {
                raw: input.roles[i].current,
                reason: Reason::RatioCoupled,
                holds_scale_down: true,
                note: "no linked role has a recommendation".into(),
                forecast: None,
                load: None,
            })
        })
        .collect()
}

/// Connected components of the ratio graph (every role appears in exactly one), each with
/// its ratio indices, in role order.
fn components(policy: &Policy) -> Vec<(Vec<usize>, Vec<usize>)> {
    mds_api::ratio_feasibility::components(
        policy.roles.len(),
        policy.ratios.iter().map(|r| (r.numerator, r.denominator)),
    )
}

/// Solves one component with per-role boxes; `None` when no vector exists.
fn solve_component(
    policy: &Policy,
    roles: &[usize],
    ratios: &[usize],
    boxes: &[(i32, i32)],
    recs: &[i32],
) -> Option<Vec<i32>> {
    let local = |global: usize| {
        roles
            .iter()
            .position(|&r| r == global)
            .expect("role in component")
    };
    let solver_roles: Vec<SolverRole> = roles
        .iter()
        .map(|&g| SolverRole {
            lo: boxes[g].0,
            hi: boxes[g].1,
            recommendation: recs[g],
        })
        .collect();
    let bands: Vec<SolverBand> = ratios
        .iter()
        .map(|&r| {
            let b = band(policy, r);
            SolverBand {
                band: Band {
                    numerator: local(b.numerator),
                    denominator: local(b.denominator),
                    ..b
                },
                target: policy.ratios[r].target,
            }
        })
        .collect();
    solver::solve(&solver_roles, &bands, solver::WORK_LIMIT)
}

/// The earliest moment after `now` at which the pacing this memory holds could plan
/// differently without a new observation: a recommendation reaching the start of the
/// scale-down or scale-up window (the history first spanning the window, or the entry before
/// it leaving the range: the highest or lowest recommendation ageing out), and a decode
/// role's post-scale-up grace ending. `None` when no such edge lies ahead. Pure: `now` is an
/// argument.
pub fn wake_at(policy: &Policy, state: &PlannerState, now: Timestamp) -> Option<Timestamp> {
    let windows = [
        policy.scale_down_window_seconds,
        policy.scale_up_window_seconds,
    ];
    let mut edges: Vec<Timestamp> = Vec::new();
    for role in &policy.roles {
        let Some(memory) = state.roles.get(&role.name) else {
            continue;
        };
        for window in windows.into_iter().filter(|w| *w > 0) {
            let window = SignedDuration::from_secs(window);
            edges.extend(
                memory
                    .recommendations
                    .iter()
                    .filter_map(|(t, _)| t.checked_add(window).ok()),
            );
        }
        if role.kind == RoleKind::Decode {
            let grace = SignedDuration::from_secs(policy.decode_grace_seconds);
            edges.extend(memory.last_scale_up.and_then(|t| t.checked_add(grace).ok()));
        }
    }
    edges.into_iter().filter(|t| *t > now).min()
}

/// Plans one pass and updates the planner memory (demand and recommendation histories, the
/// filters). A caller that needs to discard a pass keeps a clone.
pub fn plan(input: &PlanInput, state: &mut PlannerState) -> Plan {
    let policy = input.policy;
    assert_eq!(
        policy.roles.len(),
        input.roles.len(),
        "one input per policy role"
    );
    let recs = recommend(input, state);
    for (role, rec) in policy.roles.iter().zip(&recs) {
        state
            .roles
            .entry(role.name.clone())
            .or_default()
            .record_recommendation(input.now, rec.raw);
    }
    let current: Vec<i32> = input.roles.iter().map(|r| r.current).collect();
    let mut results = unconstrained(policy, &recs, &current);
    if let Some((reason, message)) = conflict(input) {
        for r in &mut results {
            r.reason = reason;
        }
        return Plan {
            roles: results,
            conflict: Some((reason, message)),
            wake_at: wake_at(policy, state, input.now),
        };
    }

    let raws: Vec<i32> = recs.iter().map(|r| r.raw).collect();
    let moves: Vec<Moves> = (0..policy.roles.len())
        .map(|i| moves(input, state, i, &recs[i]))
        .collect();
    for (r, m) in results.iter_mut().zip(&moves) {
        r.shrink_guards = m.shrink_guards.clone();
    }
    let mut vector = current.clone();
    for (roles, ratios) in &components(policy) {
        let component = Component {
            policy,
            roles,
            ratios,
            current: &current,
            raws: &raws,
            moves: &moves,
        };
        component.solve_and_attribute(&mut vector, &mut results);
    }
    growth_first(&mut vector, &current, &mut results);
    assign_reasons(&vector, &mut results);
    Plan {
        roles: results,
        conflict: None,
        wake_at: wake_at(policy, state, input.now),
    }
}

/// Each role's plan before pacing, bands and guards: its recommendation as the algorithm
/// made it, its count unchanged.
fn unconstrained(policy: &Policy, recs: &[Recommendation], current: &[i32]) -> Vec<RolePlan> {
    policy
        .roles
        .iter()
        .zip(recs)
        .zip(current)
        .map(|((role, rec), &current)| RolePlan {
            name: role.name.clone(),
            current,
            raw: rec.raw,
            constrained: current,
            reason: rec.reason,
            algorithm_reason: rec.reason,
            note: rec.note.clone(),
            forecast: rec.forecast,
            load: rec.load,
            limits: vec![],
            shrink_guards: vec![],
        })
        .collect()
}

/// One connected component of the ratio graph in a pass.
struct Component<'a> {
    policy: &'a Policy,
    roles: &'a [usize],
    ratios: &'a [usize],
    current: &'a [i32],
    raws: &'a [i32],
    moves: &'a [Moves],
}

impl Component<'_> {
    /// Solves the component inside each role's box for this pass (D17: one direction for the
    /// whole component, upward when any role recommends growth, also one that cannot move)
    /// and says, for each role left off its recommendation, which limits hold it: its own
    /// pacing or guard at the edge of its box, the component's direction, the ratio bands,
    /// and a partner's pacing when bounds alone would go on. No vector in the boxes: every
    /// role reports `NoFeasibleVector` and keeps its count.
    fn solve_and_attribute(&self, vector: &mut [i32], results: &mut [RolePlan]) {
        let (policy, roles, ratios) = (self.policy, self.roles, self.ratios);
        let (current, raws, moves) = (self.current, self.raws, self.moves);
        let up = roles.iter().any(|&i| raws[i] > current[i]);
        let boxes: Vec<(i32, i32)> = (0..policy.roles.len())
            .map(|i| {
                if up {
                    (current[i], moves[i].up)
                } else {
                    (moves[i].down, current[i])
                }
            })
            .collect();
        let Some(solution) = solve_component(policy, roles, ratios, &boxes, raws) else {
            for &i in roles {
                results[i].limits.push(Limit::NoFeasibleVector {
                    ratios: ratios.to_vec(),
                });
            }
            return;
        };
        // What the component would do with bounds alone: where it differs, pacing or a guard
        // held the result (the roles at their edges say which limits). A second search, so
        // solved only when a role sits off its boxed recommendation.
        let solve_unpaced = || {
            let bounds: Vec<(i32, i32)> = (0..policy.roles.len())
                .map(|i| {
                    let r = &policy.roles[i];
                    if up {
                        (current[i], r.max.max(current[i]))
                    } else {
                        (r.min.min(current[i]), current[i])
                    }
                })
                .collect();
            solve_component(policy, roles, ratios, &bounds, raws)
        };
        let mut unpaced: Option<Option<Vec<i32>>> = None;
        let edge_limits = |i: usize| {
            if up {
                &moves[i].up_limits
            } else {
                &moves[i].down_limits
            }
        };
        let edge = |i: usize| if up { boxes[i].1 } else { boxes[i].0 };
        for (slot, &i) in roles.iter().enumerate() {
            let value = solution[slot];
            vector[i] = value;
            if value == raws[i] {
                continue;
            }
            // Wanted to shrink inside a growing component: the direction holds it.
            if up && raws[i] < current[i] && value == current[i] {
                results[i].limits.push(Limit::ComponentGrows {
                    ratios: ratios.to_vec(),
                });
                continue;
            }
            // Wanted to grow but could not move up at all: its growth limits hold it.
            // Stopped at the edge of its own moves: the limits that set the edge bind.
            let held = raws[i] > current[i] && moves[i].up == current[i] && value == current[i];
            let limits = held
                .then_some(&moves[i].up_limits)
                .into_iter()
                .chain((value == edge(i)).then(|| edge_limits(i)))
                .flatten();
            for l in limits {
                if !results[i].limits.contains(l) {
                    results[i].limits.push(l.clone());
                }
            }
            if ratios.is_empty() || value == raws[i].clamp(boxes[i].0, boxes[i].1) {
                continue;
            }
            // Moved off its own boxed recommendation by the bands...
            results[i].limits.push(Limit::Ratio {
                ratios: ratios.to_vec(),
            });
            // ...and held there by a partner's pacing when bounds alone would go on.
            if let Some(free) = unpaced.get_or_insert_with(solve_unpaced)
                && free[slot] != value
            {
                for (other_slot, &j) in roles.iter().enumerate() {
                    let outside = free[other_slot] > boxes[j].1 || free[other_slot] < boxes[j].0;
                    if j != i && outside {
                        for l in edge_limits(j) {
                            if !results[i].limits.contains(l) {
                                results[i].limits.push(l.clone());
                            }
                        }
                    }
                }
            }
        }
    }
}

/// D16: growth commits first. When any role grows, no role shrinks in the same commit (each
/// such role keeps its count, limited by `GrowthFirst`); a shrink commit may lower several
/// roles, each within its own step (already in its box).
fn growth_first(vector: &mut [i32], current: &[i32], results: &mut [RolePlan]) {
    let grows = (0..vector.len()).any(|i| vector[i] > current[i]);
    if !grows {
        return;
    }
    for i in 0..vector.len() {
        if vector[i] < current[i] {
            vector[i] = current[i];
            results[i].limits.push(Limit::GrowthFirst);
        }
    }
}

/// The reason each role reports (spec, Conditions and reasons): `RatioConflict` when no
/// vector satisfied its bands, `PacingBounded` when a step, a window, a guard or growth-first
/// held it off its recommendation; else the algorithm's reason stands.
fn assign_reasons(vector: &[i32], results: &mut [RolePlan]) {
    for (i, r) in results.iter_mut().enumerate() {
        r.constrained = vector[i];
        if r.constrained == r.raw {
            continue;
        }
        let paced = r.limits.iter().any(|l| {
            matches!(
                l,
                Limit::Step { .. }
                    | Limit::ScaleUpWindow { .. }
                    | Limit::ScaleDownWindow { .. }
                    | Limit::Guard(_)
                    | Limit::GrowthFirst
            )
        });
        if r.limits
            .iter()
            .any(|l| matches!(l, Limit::NoFeasibleVector { .. }))
        {
            r.reason = Reason::RatioConflict;
        } else if paced {
            r.reason = Reason::PacingBounded;
        }
    }
}
