//! The spec's Bounds and ratios, and Pacing and guards sections, rule by rule.

use crate::common;

use common::*;
use mds_api::target::RoleKind;
use mds_planner::{Limit, Reason, plan::Guard};
use serde_json::{Value, json};

/// Proportional on QueueDepth with target 10 per replica: a role's recommendation is
/// ceil(requests / 10), easy to steer from a test.
fn world(roles: Value, ratios: Value, behavior: Value, current: &[i32]) -> World {
    let targets: Vec<Value> = roles
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!({"name": r["name"], "target": "10"}))
        .collect();
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": roles,
        "ratios": ratios,
        "behavior": behavior,
        "algorithm": {"proportional": {"metric": "QueueDepth", "tolerance": "0.01", "roleTargets": targets}}
    });
    World::new(policy(spec, &[]), current)
}

/// An observation that makes the role recommend `replicas`.
fn wants(replicas: i32, ready: u32) -> Option<mds_signals::RoleObservation> {
    Some(requests(obs(ready), replicas as f64 * 10.0, 0.0))
}

fn one_role(min: i32, max: i32, behavior: Value, current: i32) -> World {
    world(
        json!([{"name": "a", "minReplicas": min, "maxReplicas": max}]),
        json!([]),
        behavior,
        &[current],
    )
}

#[test]
fn the_result_stays_within_bounds_and_keeps_the_algorithm_reason() {
    let mut w = one_role(2, 8, json!({}), 6);
    let p = w.pass(&[wants(20, 6)]);
    assert_eq!((p.roles[0].raw, p.roles[0].constrained), (20, 8));
    assert_eq!(
        p.roles[0].reason,
        Reason::Proportional,
        "a bound is not a conflict"
    );
    assert!(p.roles[0].limits.contains(&Limit::Bound { min: 2, max: 8 }));
}

#[test]
fn current_counts_outside_the_bounds_stop_planning() {
    let mut w = one_role(2, 8, json!({}), 9);
    let p = w.pass(&[wants(3, 9)]);
    assert_eq!(p.roles[0].constrained, 9);
    assert_eq!(p.roles[0].reason, Reason::BoundsConflict);
    assert_eq!(p.conflict.as_ref().unwrap().0, Reason::BoundsConflict);
    // A target role without bounds also stops planning.
    let mut w = one_role(1, 8, json!({}), 4);
    w.guards.unbounded_target_roles = vec!["router".into()];
    let p = w.pass(&[wants(8, 4)]);
    assert_eq!(
        (p.roles[0].constrained, p.roles[0].reason),
        (4, Reason::BoundsConflict)
    );
    assert!(p.conflict.unwrap().1.contains("router"));
}

fn pair(ratio: Value, current: &[i32]) -> World {
    world(
        json!([{"name": "prefill", "minReplicas": 1, "maxReplicas": 32}, {"name": "decode", "minReplicas": 1, "maxReplicas": 32}]),
        json!([ratio]),
        json!({"scaleUp": {"maxStepPercent": 1000}, "scaleDown": {"stabilizationWindowSeconds": 15}}),
        current,
    )
}

#[test]
fn a_current_vector_outside_a_band_stops_planning() {
    let mut w = pair(
        json!({"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}),
        &[6, 2],
    );
    let p = w.pass(&[wants(8, 6), wants(2, 2)]);
    assert_eq!(p.vector(), vec![6, 2]);
    assert_eq!(p.conflict.unwrap().0, Reason::RatioConflict);
}

#[test]
fn growth_pulls_a_partner_along_its_band() {
    let mut w = pair(
        json!({"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}),
        &[2, 2],
    );
    // Prefill wants 8; decode alone would stay at 2, but 8/2 breaks the band.
    let p = w.pass(&[wants(8, 2), wants(2, 2)]);
    assert_eq!(p.vector(), vec![8, 4]);
    assert!(
        matches!(p.roles[1].limits[..], [Limit::Ratio { .. }]),
        "{:?}",
        p.roles[1].limits
    );
}

#[test]
fn ratio_targets_break_ties() {
    // Both (5, 2) and (4, 1) are one replica from the recommendations (5, 1); the target 2
    // prefers (5, 2).
    let mut w = pair(
        json!({"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1", "max": "4", "target": "2"}),
        &[2, 1],
    );
    let p = w.pass(&[wants(5, 2), wants(1, 1)]);
    assert_eq!(p.vector(), vec![5, 2]);
}

#[test]
fn a_band_and_a_step_limit_together_hold_a_component() {
    // When the band alone explains the result, the algorithm's reason stays: prefill wants 4
    // and decode 4 under a fixed ratio of 2; (4, 2) is nearest with or without pacing.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 32}, {"name": "decode", "maxReplicas": 8}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "2", "max": "2"}]),
        json!({"scaleUp": {"stepPolicy": {"type": "Pods", "value": 1}}}),
        &[4, 2],
    );
    let p = w.pass(&[wants(4, 4), wants(4, 2)]);
    assert_eq!(p.vector(), vec![4, 2]);
    assert_eq!(
        p.roles[1].reason,
        Reason::Proportional,
        "{:?}",
        p.roles[1].limits
    );
    // A fixed ratio of 1 and a decode role that cannot grow past 2.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 32}, {"name": "decode", "maxReplicas": 2}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1", "max": "1"}]),
        json!({}),
        &[2, 2],
    );
    let p = w.pass(&[wants(6, 2), wants(6, 2)]);
    // Prefill may reach 2 (= decode's maximum): the nearest feasible vector is (2, 2).
    assert_eq!(p.vector(), vec![2, 2]);
    // A fixed band of 2 and steps of one replica: decode wants 8 and prefill 8 (ratio 1).
    // Without pacing the nearest feasible vector would be (12, 6)... with one-replica steps
    // decode's next count (3) needs prefill at 6, two steps away: the step holds both.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 32}, {"name": "decode", "maxReplicas": 8}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "2", "max": "2"}]),
        json!({"scaleUp": {"stepPolicy": {"type": "Pods", "value": 1}}}),
        &[4, 2],
    );
    let p = w.pass(&[wants(12, 4), wants(6, 2)]);
    assert_eq!(p.vector(), vec![4, 2]);
    assert_eq!(
        p.roles[1].reason,
        Reason::PacingBounded,
        "{:?}",
        p.roles[1].limits
    );
    assert!(
        p.roles[1]
            .limits
            .iter()
            .any(|l| matches!(l, Limit::Ratio { .. })),
        "{:?}",
        p.roles[1].limits
    );
}

#[test]
fn growth_is_limited_to_the_larger_of_max_step_replicas_and_percent() {
    // From 2: max(4, 100 % of 2) = 4 → 6. From 10: max(4, 10) → 20.
    let mut w = one_role(1, 100, json!({}), 2);
    let p = w.pass(&[wants(50, 2)]);
    assert_eq!(p.roles[0].constrained, 6);
    assert_eq!(p.roles[0].reason, Reason::PacingBounded);
    assert!(p.roles[0].limits.contains(&Limit::Step { max_change: 4 }));
    let mut w = one_role(1, 100, json!({}), 10);
    assert_eq!(w.pass(&[wants(50, 10)]).roles[0].constrained, 20);
    // Zero stores the defaults: it does not disable the bound.
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"maxStepReplicas": 0, "maxStepPercent": 0}}),
        10,
    );
    assert_eq!(w.pass(&[wants(50, 10)]).roles[0].constrained, 20);
}

#[test]
fn an_upward_step_policy_replaces_both_bounds_and_zero_prevents_growth() {
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"stepPolicy": {"type": "Pods", "value": 1}}}),
        10,
    );
    assert_eq!(w.pass(&[wants(50, 10)]).roles[0].constrained, 11);
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"stepPolicy": {"type": "Percent", "value": 15}}}),
        10,
    );
    assert_eq!(
        w.pass(&[wants(50, 10)]).roles[0].constrained,
        12,
        "15 % of 10 rounds up to 2"
    );
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"stepPolicy": {"type": "Pods", "value": 0}}}),
        10,
    );
    let p = w.pass(&[wants(50, 10)]);
    assert_eq!(
        (p.roles[0].constrained, p.roles[0].reason),
        (10, Reason::PacingBounded)
    );
}

#[test]
fn scale_down_removes_one_replica_per_pass_after_its_window() {
    let mut w = one_role(1, 100, json!({}), 10);
    // The default scale-down window is 300 s: nothing shrinks until history spans it.
    let p = w.run(285, 15, &[wants(2, 10)]);
    assert_eq!(
        (p.roles[0].constrained, p.roles[0].reason),
        (10, Reason::PacingBounded)
    );
    assert!(p.roles[0].limits.contains(&Limit::ScaleDownWindow {
        window_seconds: 300,
        highest: None
    }));
    w.now += 15;
    let p = w.pass(&[wants(2, 10)]);
    assert_eq!(p.roles[0].constrained, 9, "{:?}", p.roles[0].limits);
}

#[test]
fn the_scale_down_window_floors_at_its_highest_recommendation() {
    let mut w = one_role(
        1,
        100,
        json!({"scaleDown": {"stabilizationWindowSeconds": 60, "stepPolicy": {"type": "Pods", "value": 10}}}),
        10,
    );
    w.pass(&[wants(8, 10)]);
    w.now += 30;
    w.pass(&[wants(6, 10)]);
    w.now += 30;
    let p = w.pass(&[wants(2, 10)]);
    assert_eq!(p.roles[0].constrained, 8, "{:?}", p.roles[0].limits);
    assert!(p.roles[0].limits.contains(&Limit::ScaleDownWindow {
        window_seconds: 60,
        highest: Some(8)
    }));
}

#[test]
fn a_downward_step_policy_and_zero_prevents_shrinking() {
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 15, "stepPolicy": {"type": "Percent", "value": 30}}});
    let mut w = one_role(1, 100, behavior, 10);
    let p = w.run(15, 15, &[wants(1, 10)]);
    assert_eq!(p.roles[0].constrained, 7, "30 % of 10");
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 15, "stepPolicy": {"type": "Pods", "value": 0}}});
    let mut w = one_role(1, 100, behavior, 10);
    let p = w.run(15, 15, &[wants(1, 10)]);
    assert_eq!(
        (p.roles[0].constrained, p.roles[0].reason),
        (10, Reason::PacingBounded)
    );
}

#[test]
fn the_scale_up_window_waits_then_caps_at_its_lowest_recommendation() {
    let behavior = json!({"scaleUp": {"stabilizationWindowSeconds": 60, "maxStepPercent": 1000}});
    let mut w = one_role(1, 100, behavior, 2);
    let p = w.pass(&[wants(9, 2)]);
    assert_eq!(p.roles[0].constrained, 2, "history does not span 60 s yet");
    w.now += 30;
    w.pass(&[wants(5, 2)]);
    w.now += 30;
    let p = w.pass(&[wants(12, 2)]);
    assert_eq!(p.roles[0].constrained, 5, "the lowest of 9, 5 and 12");
    // Zero disables the wait.
    let mut w = one_role(1, 100, json!({"scaleUp": {"maxStepPercent": 1000}}), 2);
    assert_eq!(w.pass(&[wants(9, 2)]).roles[0].constrained, 9);
}

fn shrinking_world() -> World {
    one_role(
        1,
        100,
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        10,
    )
}

fn shrink_guard(
    setup: impl Fn(&mut World),
    observation: Option<mds_signals::RoleObservation>,
    guard: Guard,
) {
    let mut w = shrinking_world();
    setup(&mut w);
    let p = w.run(15, 15, &[observation]);
    assert_eq!(p.roles[0].constrained, 10, "{guard:?}");
    assert_eq!(p.roles[0].reason, Reason::PacingBounded, "{guard:?}");
    assert!(
        p.roles[0].limits.contains(&Limit::Guard(guard)),
        "{:?}",
        p.roles[0].limits
    );
}

#[test]
fn scale_down_waits_for_every_guard() {
    shrink_guard(
        |w| w.guards.retirement_active = true,
        wants(2, 10),
        Guard::RetirementActive,
    );
    shrink_guard(
        |w| w.guards.abort_cooldown_until = Some(t(1000)),
        wants(2, 10),
        Guard::AbortCooldown,
    );
    let mut partial = wants(2, 10).unwrap();
    partial.coverage_complete = false;
    shrink_guard(|_| {}, Some(partial), Guard::IncompleteCoverage);
    // After the cooldown ends the role shrinks again.
    let mut w = shrinking_world();
    w.guards.abort_cooldown_until = Some(t(10));
    assert_eq!(w.run(15, 15, &[wants(2, 10)]).roles[0].constrained, 9);
}

#[test]
fn a_decode_role_keeps_its_count_during_post_scale_up_grace() {
    let spec = token_spec(
        json!([{"name": "decode", "maxReplicas": 64}]),
        json!([]),
        json!({"decodeTargetTokensPerSecond": "100", "stableWindowSeconds": 30}),
    );
    let mut spec = spec;
    spec["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 15}});
    let mut w = World::new(policy(spec, &[("decode", RoleKind::Decode)]), &[6]);
    w.state
        .roles
        .entry("decode".into())
        .or_default()
        .last_scale_up = Some(t(0));
    let p = w.run(30, 15, &[Some(generation(obs(6), 100.0))]);
    assert_eq!(p.roles[0].constrained, 6);
    assert!(
        p.roles[0]
            .limits
            .contains(&Limit::Guard(Guard::DecodePostScaleUpGrace))
    );
    // The default grace is 120 s.
    w.now += 15;
    let p = w.run(75, 15, &[Some(generation(obs(6), 100.0))]);
    assert_eq!(w.now, 120);
    assert_eq!(p.roles[0].constrained, 5, "{:?}", p.roles[0].limits);
}

#[test]
fn an_unadmitted_ordinal_blocks_growth_everywhere() {
    let mut w = one_role(1, 100, json!({}), 4);
    w.guards.unadmitted_ordinals = true;
    let p = w.pass(&[wants(8, 4)]);
    assert_eq!(
        (p.roles[0].constrained, p.roles[0].reason),
        (4, Reason::PacingBounded)
    );
    assert!(
        p.roles[0]
            .limits
            .contains(&Limit::Guard(Guard::UnadmittedOrdinals))
    );
}

#[test]
fn growth_commits_first_and_shrinking_roles_move_together() {
    let three = || {
        world(
            json!([{"name": "a", "maxReplicas": 32}, {"name": "b", "maxReplicas": 32}, {"name": "c", "maxReplicas": 32}]),
            json!([]),
            json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
            &[4, 4, 4],
        )
    };
    let mut w = three();
    let p = w.run(15, 15, &[wants(6, 4), wants(2, 4), wants(2, 4)]);
    assert_eq!(p.vector(), vec![6, 4, 4]);
    assert!(p.roles[1].limits.contains(&Limit::GrowthFirst));
    // D16 (amended): one shrink commit may lower several roles, each by at most its step.
    let mut w = three();
    let p = w.run(15, 15, &[wants(4, 4), wants(2, 4), wants(3, 4)]);
    assert_eq!(p.vector(), vec![4, 3, 3]);
    assert_eq!(
        p.roles[1].reason,
        Reason::PacingBounded,
        "one replica per pass"
    );
}

#[test]
fn a_fixed_ratio_pair_shrinks_together() {
    // D16 (amended): 4:4 in a band [0.8, 1.25], both recommending 2: 4:4 -> 3:3 -> 2:2.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 16}, {"name": "decode", "maxReplicas": 16}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.8", "max": "1.25"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 4],
    );
    let p = w.run(15, 15, &[wants(2, 4), wants(2, 4)]);
    assert_eq!(p.vector(), vec![3, 3], "{:?}", p.roles[0].limits);
    w.apply(&p);
    w.now += 15;
    let p = w.pass(&[wants(2, 3), wants(2, 3)]);
    assert_eq!(p.vector(), vec![2, 2]);
    // The same with min = target = max.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 16}, {"name": "decode", "maxReplicas": 16}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1", "target": "1", "max": "1"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 4],
    );
    assert_eq!(
        w.run(15, 15, &[wants(2, 4), wants(2, 4)]).vector(),
        vec![3, 3]
    );
}

#[test]
fn a_component_without_growth_may_only_shrink() {
    // prefill recommends shrinking, decode holds: nothing in the component grows.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 32}, {"name": "decode", "maxReplicas": 32}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 4],
    );
    let p = w.run(15, 15, &[wants(1, 4), wants(4, 4)]);
    assert_eq!(p.vector(), vec![3, 4]);
}

#[test]
fn huge_step_limits_do_not_overflow() {
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"maxStepReplicas": 2147483647}}),
        4,
    );
    assert_eq!(w.pass(&[wants(10, 4)]).roles[0].constrained, 10);
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"stepPolicy": {"type": "Percent", "value": 2147483647}}}),
        4,
    );
    assert_eq!(w.pass(&[wants(10, 4)]).roles[0].constrained, 10);
}

#[test]
fn a_ratio_that_binds_before_the_step_keeps_the_algorithm_reason() {
    let mut w = world(
        json!([{"name": "a", "maxReplicas": 16}, {"name": "b", "maxReplicas": 4}]),
        json!([{"numeratorRole": "a", "denominatorRole": "b", "max": "1.5"}]),
        json!({}),
        &[4, 4],
    );
    // a wants 10; its step allows 8, but b can reach at most 4, so a/b <= 1.5 caps a at 6.
    let p = w.pass(&[wants(10, 4), wants(4, 4)]);
    assert_eq!(p.vector(), vec![6, 4]);
    assert_eq!(
        p.roles[0].reason,
        Reason::Proportional,
        "{:?}",
        p.roles[0].limits
    );
    assert!(
        p.roles[0]
            .limits
            .iter()
            .all(|l| matches!(l, Limit::Ratio { .. })),
        "{:?}",
        p.roles[0].limits
    );
}

#[test]
fn a_role_that_wants_to_grow_but_cannot_still_holds_its_partners() {
    // D17 (clarified): an upward recommendation gives the component an upward direction even
    // when that role cannot move (here: at its maximum), so the partner does not shrink.
    let mut w = world(
        json!([{"name": "a", "maxReplicas": 4}, {"name": "b", "maxReplicas": 16}]),
        json!([{"numeratorRole": "a", "denominatorRole": "b", "min": "0.1", "max": "10"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 8],
    );
    let p = w.run(60, 15, &[wants(20, 4), wants(2, 8)]);
    assert_eq!(p.vector(), vec![4, 8]);
    assert!(
        p.roles[1]
            .limits
            .contains(&Limit::ComponentGrows { ratios: vec![0] }),
        "{:?}",
        p.roles[1].limits
    );
}

#[test]
fn prefill_at_its_maximum_keeps_decode_from_shrinking() {
    // The case: prefill at max (4) wants 6, decode at 4 wants 2, band [0.5, 2].
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 4}, {"name": "decode", "maxReplicas": 16}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 4],
    );
    for _ in 0..5 {
        let p = w.pass(&[wants(6, 4), wants(2, 4)]);
        assert_eq!(p.vector(), vec![4, 4]);
        w.apply(&p);
        w.now += 15;
    }
    // The same when the growing role is held by a pending cohort instead of its maximum.
    let mut w = world(
        json!([{"name": "prefill", "maxReplicas": 16}, {"name": "decode", "maxReplicas": 16}]),
        json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}]),
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        &[4, 4],
    );
    w.guards.unadmitted_ordinals = true;
    assert_eq!(
        w.run(60, 15, &[wants(6, 4), wants(2, 4)]).vector(),
        vec![4, 4]
    );
}

#[test]
fn a_growth_backoff_holds_only_its_own_role() {
    // D29: after a rollback, regrowth of the shortage's pool waits; other roles grow.
    let mut w = world(
        json!([{"name": "a", "maxReplicas": 16}, {"name": "b", "maxReplicas": 16}]),
        json!([]),
        json!({}),
        &[4, 4],
    );
    w.growth_backoff[0] = true;
    let p = w.pass(&[wants(8, 4), wants(6, 4)]);
    assert_eq!(p.vector(), vec![4, 6]);
    assert_eq!(p.roles[0].reason, Reason::PacingBounded);
    assert!(
        p.roles[0]
            .limits
            .contains(&Limit::Guard(Guard::ExhaustionBackoff))
    );
}

#[test]
fn a_long_scale_down_window_is_reached_at_a_short_interval() {
    // D30: intervalSeconds 5 with a 1,800 s window (256 x 5 s is only 1,280 s).
    let spec = json!({
        "targetRef": {"name": "md"},
        "sampling": {"intervalSeconds": 5},
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 32}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 1800}},
        "algorithm": {"proportional": {"metric": "QueueDepth", "tolerance": "0.01", "roleTargets": [{"name": "server", "target": "10"}]}}
    });
    let mut w = World::new(policy(spec, &[]), &[6]);
    let p = w.run(1795, 5, &[wants(2, 6)]);
    assert_eq!(p.vector(), vec![6], "the window is not spanned yet");
    w.now += 5;
    let p = w.pass(&[wants(2, 6)]);
    assert_eq!(p.vector(), vec![5], "{:?}", p.roles[0].limits);
    assert_eq!(w.state.roles["server"].recommendations.len(), 1);
}

#[test]
fn scale_down_guards_say_their_real_cause() {
    let mut w = one_role(
        1,
        100,
        json!({"scaleDown": {"stabilizationWindowSeconds": 15}}),
        8,
    );
    w.guards.router_missing = true;
    let p = w.run(15, 15, &[wants(4, 8)]);
    assert_eq!(p.vector(), vec![8]);
    let text: Vec<String> = p.roles[0].limits.iter().map(|l| l.to_string()).collect();
    assert!(
        p.roles[0].limits.contains(&Limit::Guard(Guard::NoRouter)),
        "{text:?}"
    );
    assert!(
        !p.roles[0]
            .limits
            .contains(&Limit::Guard(Guard::RetirementActive)),
        "no retirement is active: {text:?}"
    );
    assert!(text.iter().any(|t| t.contains("no router")), "{text:?}");
}

#[test]
fn the_plan_wakes_when_the_highest_recommendation_leaves_the_scale_down_window() {
    let mut w = one_role(
        1,
        100,
        json!({"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 60, "stepPolicy": {"type": "Pods", "value": 10}}}),
        10,
    );
    w.pass(&[wants(8, 10)]);
    w.now += 30;
    w.pass(&[wants(6, 10)]);
    w.now += 30;
    let p = w.pass(&[wants(2, 10)]);
    assert_eq!(p.roles[0].constrained, 8);
    // The 8 recorded at 0 is in effect until the 6 recorded at 30 reaches the window's start.
    assert_eq!(p.wake_at, Some(t(90)));
    let mut before = World::new(w.policy.clone(), &w.current);
    before.state = w.state.clone();
    before.now = 89;
    assert_eq!(before.pass(&[wants(2, 10)]).roles[0].constrained, 8);
    w.now = 90;
    assert_eq!(w.pass(&[wants(2, 10)]).roles[0].constrained, 6);
}

#[test]
fn the_plan_wakes_when_a_decode_role_s_grace_ends() {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "d", "minReplicas": 1, "maxReplicas": 10}],
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 0}},
        "algorithm": {"proportional": {"metric": "QueueDepth", "tolerance": "0.01", "roleTargets": [{"name": "d", "target": "10"}]}}
    });
    let mut w = World::new(policy(spec, &[("d", RoleKind::Decode)]), &[4]);
    w.now = 100;
    w.state.roles.entry("d".into()).or_default().last_scale_up = Some(t(50));
    let p = w.pass(&[wants(4, 4)]);
    let grace = w.policy.decode_grace_seconds;
    assert_eq!(p.wake_at, Some(t(50 + grace)));
}
