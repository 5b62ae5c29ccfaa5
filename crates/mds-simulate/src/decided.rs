//! What decided a run's counts when the load did not: a floor, a ceiling, a guard, the quota
//! or the router rule, in sentences the single run and the frontier print ("server held at
//! minReplicas 2 throughout", "the latency guard added server replicas in 31 of 240 passes").

use std::collections::BTreeMap;

use mds_planner::{Guard, Limit, Reason, RolePlan};
use serde::Serialize;

use crate::PassRecord;

/// What decided one role's count in one pass, when the algorithm's own answer did not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decider {
    /// The algorithm asked for fewer than minReplicas.
    Floor,
    /// The algorithm asked for more than maxReplicas.
    Ceiling,
    /// The latency guard added replicas the algorithm did not ask for.
    LatencyGuardAdded,
    /// The latency guard held a shrink.
    LatencyGuardHeld,
    /// A scale-up was not admitted in time (quota, scheduling) and was rolled back.
    NotAdmitted,
    /// The target has no router, so a shrink cannot complete.
    NoRouter,
}

impl Decider {
    /// The sentence for `passes` of `of` passes of `role`, bounds `(min, max)`.
    fn sentence(self, role: &str, (min, max): (i32, i32), passes: usize, of: usize) -> String {
        let share = format!("in {passes} of {of} passes");
        match self {
            Decider::Floor => format!("minReplicas {min} floored {role} {share}"),
            Decider::Ceiling => format!("maxReplicas {max} capped {role} {share}"),
            Decider::LatencyGuardAdded => {
                format!("the latency guard added {role} replicas {share}")
            }
            Decider::LatencyGuardHeld => {
                format!("the latency guard held {role}'s scale-down {share}")
            }
            Decider::NotAdmitted => {
                format!("{role}'s growth was not admitted (quota) and rolled back {share}")
            }
            Decider::NoRouter => format!(
                "{role}'s scale-down was held {share}: the target has no router, so no retirement completes"
            ),
        }
    }
}

/// What decided a role's count in a pass of ours, from its plan; `None` when the algorithm
/// (with its pacing) did.
pub(crate) fn decider(r: &RolePlan) -> Option<Decider> {
    let bound = r.limits.iter().find_map(|l| match l {
        Limit::Bound { min, max } => Some((*min, *max)),
        _ => None,
    });
    match r.reason {
        Reason::ResourceExhausted => Some(Decider::NotAdmitted),
        Reason::LatencyGuardScaleUp => Some(Decider::LatencyGuardAdded),
        _ if bound.is_some_and(|(_, max)| r.raw > max && r.constrained == max) => {
            Some(Decider::Ceiling)
        }
        _ if bound.is_some_and(|(min, _)| r.raw < min && r.constrained == min) => {
            Some(Decider::Floor)
        }
        Reason::LatencyGuardHold if r.raw < r.current => Some(Decider::LatencyGuardHeld),
        _ if r.raw < r.current
            && r.constrained >= r.current
            && r.limits.contains(&Limit::Guard(Guard::NoRouter)) =>
        {
            Some(Decider::NoRouter)
        }
        _ => None,
    }
}

/// The sentences for a run's passes, given each role's bounds `(min, max)`: a role whose
/// count never left a bound is "held at" it; otherwise each decider that decided at least
/// one pass, most passes first.
pub fn sentences(passes: &[PassRecord], bounds: &BTreeMap<String, (i32, i32)>) -> Vec<String> {
    let mut out = Vec::new();
    for (role, &(min, max)) in bounds {
        let counts: Vec<i32> = passes
            .iter()
            .filter_map(|p| p.replicas.get(role).copied())
            .collect();
        let held = |bound: i32| !counts.is_empty() && counts.iter().all(|&n| n == bound);
        let throughout = if held(min) {
            Some(format!("{role} held at minReplicas {min} throughout"))
        } else if held(max) {
            Some(format!("{role} held at maxReplicas {max} throughout"))
        } else {
            None
        };
        if let Some(sentence) = throughout {
            out.push(sentence);
            continue;
        }
        let mut tally: BTreeMap<Decider, usize> = BTreeMap::new();
        for &d in passes.iter().filter_map(|p| p.decided.get(role)) {
            *tally.entry(d).or_default() += 1;
        }
        let mut ranked: Vec<(Decider, usize)> = tally.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out.extend(
            ranked
                .into_iter()
                .map(|(d, n)| d.sentence(role, (min, max), n, counts.len())),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(n: i32, decided: Option<Decider>) -> PassRecord {
        PassRecord {
            t: 0.0,
            replicas: [("server".to_string(), n)].into(),
            ready: BTreeMap::new(),
            write: None,
            plan: BTreeMap::new(),
            decided: decided
                .map(|d| [("server".to_string(), d)].into())
                .unwrap_or_default(),
            forecasts: BTreeMap::new(),
        }
    }

    fn bounds() -> BTreeMap<String, (i32, i32)> {
        [("server".to_string(), (2, 8))].into()
    }

    #[test]
    fn a_role_that_never_left_its_floor_is_held_at_it_throughout() {
        let passes = vec![pass(2, Some(Decider::Floor)), pass(2, None)];
        assert_eq!(
            sentences(&passes, &bounds()),
            ["server held at minReplicas 2 throughout"]
        );
    }

    #[test]
    fn deciders_are_counted_most_passes_first() {
        let passes = vec![
            pass(3, Some(Decider::LatencyGuardAdded)),
            pass(8, Some(Decider::Ceiling)),
            pass(8, Some(Decider::Ceiling)),
            pass(4, None),
        ];
        assert_eq!(
            sentences(&passes, &bounds()),
            [
                "maxReplicas 8 capped server in 2 of 4 passes",
                "the latency guard added server replicas in 1 of 4 passes"
            ]
        );
    }

    #[test]
    fn a_run_the_load_decided_has_nothing_to_say() {
        let passes = vec![pass(3, None), pass(5, None)];
        assert!(sentences(&passes, &bounds()).is_empty());
    }
}

#[cfg(test)]
mod decider_tests {
    use super::*;

    fn role(
        current: i32,
        raw: i32,
        constrained: i32,
        reason: Reason,
        limits: Vec<Limit>,
    ) -> RolePlan {
        RolePlan {
            name: "server".into(),
            current,
            raw,
            constrained,
            reason,
            algorithm_reason: Reason::TokenThroughput,
            note: String::new(),
            forecast: None,
            load: None,
            limits,
            shrink_guards: vec![],
        }
    }

    #[test]
    fn a_pass_names_the_bound_guard_or_rule_that_moved_the_algorithms_answer() {
        let bound = || Limit::Bound { min: 2, max: 8 };
        let cases = [
            (
                role(8, 12, 8, Reason::PacingBounded, vec![bound()]),
                Some(Decider::Ceiling),
            ),
            (
                role(2, 1, 2, Reason::PacingBounded, vec![bound()]),
                Some(Decider::Floor),
            ),
            (
                role(
                    3,
                    2,
                    3,
                    Reason::PacingBounded,
                    vec![Limit::Guard(Guard::NoRouter)],
                ),
                Some(Decider::NoRouter),
            ),
            (
                role(3, 2, 3, Reason::LatencyGuardHold, vec![]),
                Some(Decider::LatencyGuardHeld),
            ),
            (
                role(3, 3, 4, Reason::LatencyGuardScaleUp, vec![]),
                Some(Decider::LatencyGuardAdded),
            ),
            (
                role(3, 5, 3, Reason::ResourceExhausted, vec![]),
                Some(Decider::NotAdmitted),
            ),
            // The algorithm's own answer, paced or not, names nothing.
            (role(3, 5, 5, Reason::TokenThroughput, vec![]), None),
            (
                role(
                    3,
                    6,
                    5,
                    Reason::PacingBounded,
                    vec![Limit::Step { max_change: 2 }],
                ),
                None,
            ),
            // A guard that held a shrink nobody asked for decided nothing.
            (
                role(
                    3,
                    4,
                    4,
                    Reason::TokenThroughput,
                    vec![Limit::Guard(Guard::NoRouter)],
                ),
                None,
            ),
        ];
        for (plan, expected) in cases {
            assert_eq!(decider(&plan), expected, "{plan:?}");
        }
    }
}
