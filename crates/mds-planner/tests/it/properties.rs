//! Invariants of the planner on random worlds: bounds, bands, step limits, guards, one
//! direction and one shrink per commit, determinism.

use crate::common;

use common::*;
use mds_api::ratio_feasibility::Band;
use mds_planner::Plan;
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Clone, Debug)]
struct Case {
    bounds: Vec<(i32, i32)>,
    current: Vec<i32>,
    wants: Vec<i32>,
    ratios: Vec<(usize, usize, Option<String>, Option<String>)>,
    up_step: Option<(bool, i32)>,
    down_step: Option<(bool, i32)>,
    retirement: bool,
    unadmitted: bool,
}

fn quantity() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        (1u32..=12, 1u32..=4).prop_map(|(n, d)| Some(format!("{:.3}", n as f64 / d as f64)))
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3)
        .prop_flat_map(|n| {
            (
                proptest::collection::vec((1i32..=4, 0i32..=12, 0i32..=12, 1i32..=30), n),
                proptest::collection::vec((0usize..3, 0usize..3, quantity(), quantity()), 0..=2),
                proptest::option::of((any::<bool>(), 0i32..=5)),
                proptest::option::of((any::<bool>(), 0i32..=60)),
                any::<bool>(),
                any::<bool>(),
            )
        })
        .prop_map(
            |(roles, ratios, up_step, down_step, retirement, unadmitted)| {
                let n = roles.len();
                Case {
                    bounds: roles
                        .iter()
                        .map(|&(min, span, _, _)| (min, min + span))
                        .collect(),
                    current: roles
                        .iter()
                        .map(|&(min, span, off, _)| min + off.min(span))
                        .collect(),
                    wants: roles.iter().map(|&(.., w)| w).collect(),
                    ratios: ratios
                        .into_iter()
                        .map(|(a, b, min, max)| (a % n, b % n, min, max))
                        .filter(|(a, b, ..)| a != b)
                        .collect(),
                    up_step,
                    down_step,
                    retirement,
                    unadmitted,
                }
            },
        )
}

fn step_json(step: Option<(bool, i32)>) -> Option<Value> {
    step.map(|(pods, value)| json!({"type": if pods { "Pods" } else { "Percent" }, "value": value}))
}

fn build(case: &Case) -> World {
    let names = ["a", "b", "c"];
    let roles: Vec<Value> = case
        .bounds
        .iter()
        .enumerate()
        .map(|(i, (min, max))| json!({"name": names[i], "minReplicas": min, "maxReplicas": max}))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let ratios: Vec<Value> = case
        .ratios
        .iter()
        .filter(|(a, b, ..)| seen.insert((*a, *b)))
        .map(|(a, b, min, max)| {
            let mut r = json!({"numeratorRole": names[*a], "denominatorRole": names[*b]});
            if let Some(min) = min {
                r["min"] = json!(min);
            }
            if let Some(max) = max {
                r["max"] = json!(max);
            }
            r
        })
        .collect();
    let targets: Vec<Value> = (0..case.bounds.len())
        .map(|i| json!({"name": names[i], "target": "10"}))
        .collect();
    let mut up = json!({});
    if let Some(s) = step_json(case.up_step) {
        up["stepPolicy"] = s;
    }
    let mut down = json!({"stabilizationWindowSeconds": 15});
    if let Some(s) = step_json(case.down_step) {
        down["stepPolicy"] = s;
    }
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": roles,
        "ratios": ratios,
        "behavior": {"scaleUp": up, "scaleDown": down},
        "algorithm": {"proportional": {"metric": "QueueDepth", "tolerance": "0.01", "roleTargets": targets}}
    });
    let mut w = World::new(policy(spec, &[]), &case.current);
    w.guards.retirement_active = case.retirement;
    w.guards.unadmitted_ordinals = case.unadmitted;
    w
}

/// Two passes 15 s apart (so the scale-down window is spanned); the second plan.
fn run(case: &Case) -> (World, Plan) {
    let mut w = build(case);
    let observations: Vec<_> = case
        .wants
        .iter()
        .zip(&case.current)
        .map(|(&want, &cur)| Some(requests(obs(cur as u32), want as f64 * 10.0, 0.0)))
        .collect();
    w.pass(&observations);
    w.now += 15;
    let plan = w.pass(&observations);
    (w, plan)
}

fn bands(w: &World) -> Vec<Band> {
    w.policy
        .ratios
        .iter()
        .map(|r| Band {
            numerator: r.numerator,
            denominator: r.denominator,
            min: r.min,
            max: r.max,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn invariants_hold(case in case()) {
        let (w, plan) = run(&case);
        let v = plan.vector();
        let current = &case.current;
        let current_in_bands = bands(&w).iter().all(|b| b.satisfied(current[b.numerator] as i64, current[b.denominator] as i64));
        if plan.conflict.is_some() {
            prop_assert_eq!(&v, current, "a conflict moves nothing");
            prop_assert!(!current_in_bands || case.bounds.iter().zip(current).any(|((lo, hi), c)| c < lo || c > hi));
            return Ok(());
        }
        for (i, &n) in v.iter().enumerate() {
            let (lo, hi) = case.bounds[i];
            prop_assert!(lo <= n && n <= hi, "role {i}: {n} outside [{lo}, {hi}]");
            let growth = w.policy.growth_step(current[i]);
            let shrink = w.policy.shrink_step(current[i]);
            prop_assert!(n - current[i] <= growth, "role {i} grew {} > {growth}", n - current[i]);
            prop_assert!(current[i] - n <= shrink, "role {i} shrank {} > {shrink}", current[i] - n);
            if case.retirement {
                prop_assert!(n >= current[i], "shrank during a retirement");
            }
            if case.unadmitted {
                prop_assert!(n <= current[i], "grew with an unadmitted ordinal");
            }
        }
        for b in bands(&w) {
            prop_assert!(b.satisfied(v[b.numerator] as i64, v[b.denominator] as i64), "band {b:?} broken by {v:?}");
        }
        let grows = v.iter().zip(current).any(|(n, c)| n > c);
        let shrinks = v.iter().zip(current).filter(|(n, c)| n < c).count();
        prop_assert!(!(grows && shrinks > 0), "one direction per commit: {v:?} from {current:?}");
        // D17: a component with an upward recommendation shrinks nowhere, even when the role
        // that wants to grow cannot move.
        let comps = mds_api::ratio_feasibility::components(
            current.len(),
            w.policy.ratios.iter().map(|r| (r.numerator, r.denominator)),
        );
        for (roles, _) in comps {
            let up = roles.iter().any(|&i| plan.roles[i].raw > current[i]);
            if up {
                for &i in &roles {
                    prop_assert!(v[i] >= current[i], "role {i} shrank in a growing component: {v:?} from {current:?}");
                }
            }
        }
    }

    #[test]
    fn the_same_input_gives_the_same_output(case in case()) {
        let (_, a) = run(&case);
        let (_, b) = run(&case);
        prop_assert_eq!(a, b);
    }
}
