//! The spec's Algorithms section, rule by rule. These tests read the algorithm's own reason;
//! pacing and constraint reasons are tested in pacing.rs.

use crate::common;

use common::*;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_planner::Reason;
use serde_json::json;

fn proportional_world(metric: &str, current: i32) -> World {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 64}],
        "algorithm": {"proportional": {"metric": metric, "roleTargets": [{"name": "server", "target": "8"}]}}
    });
    World::new(policy(spec, &[("server", RoleKind::Server)]), &[current])
}

#[test]
fn proportional_holds_within_tolerance() {
    let mut w = proportional_world("QueueDepth", 4);
    // 34 requests over 4 ready = 8.5 per replica: |8.5/8 - 1| = 0.0625 <= 0.1.
    let p = w.pass(&[Some(requests(obs(4), 30.0, 4.0))]);
    assert_eq!(p.roles[0].raw, 4);
    assert_eq!(p.roles[0].algorithm_reason, Reason::WithinTolerance);
}

#[test]
fn proportional_outside_tolerance_is_the_ceiling_of_total_over_target() {
    let mut w = proportional_world("QueueDepth", 4);
    // 40 + 5 = 45 requests, 11.25 per replica: ceil(45 / 8) = 6.
    let p = w.pass(&[Some(requests(obs(4), 40.0, 5.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (6, Reason::Proportional)
    );
    // Zero load still recommends one replica.
    let p = w.pass(&[Some(requests(obs(4), 0.0, 0.0))]);
    assert_eq!(p.roles[0].raw, 1);
}

#[test]
fn proportional_metrics_read_the_right_signals() {
    let o = prompt(generation(requests(obs(1), 10.0, 30.0), 50.0), 30.0);
    let cases = [
        ("RunningRequests", 2),           // 10 / 8
        ("WaitingRequests", 4),           // 30 / 8
        ("QueueDepth", 5),                // 40 / 8
        ("PromptTokensPerSecond", 4),     // 30 / 8
        ("GenerationTokensPerSecond", 7), // 50 / 8
        ("TotalTokensPerSecond", 10),     // 80 / 8
    ];
    for (metric, expected) in cases {
        let mut w = proportional_world(metric, 1);
        assert_eq!(
            w.pass(&[Some(o.clone())]).roles[0].raw,
            expected,
            "{metric}"
        );
    }
}

#[test]
fn proportional_without_ready_replicas_holds() {
    let mut w = proportional_world("QueueDepth", 3);
    let p = w.pass(&[Some(requests(obs(0), 100.0, 0.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (3, Reason::NoReadyReplicas)
    );
    assert_eq!(p.roles[0].constrained, 3);
}

#[test]
fn proportional_missing_metric_holds_and_never_reads_zero() {
    let mut w = proportional_world("QueueDepth", 3);
    let mut o = obs(3);
    o.waiting_requests = None;
    let p = w.pass(&[Some(o)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (3, Reason::WaitingForMetrics)
    );
}

#[test]
fn proportional_garbage_totals_hold_instead_of_shrinking_to_one() {
    for garbage in [f64::INFINITY, f64::NAN, -5.0] {
        let mut w = proportional_world("QueueDepth", 6);
        let p = w.pass(&[Some(requests(obs(6), garbage, 0.0))]);
        assert_eq!(
            (p.roles[0].raw, p.roles[0].algorithm_reason),
            (6, Reason::WaitingForMetrics),
            "running {garbage}"
        );
        assert_eq!(p.roles[0].constrained, 6);
    }
}

#[test]
fn a_role_without_its_own_target_follows_its_ratio() {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "server", "maxReplicas": 64}, {"name": "sidecar", "maxReplicas": 64}],
        "ratios": [{"numeratorRole": "sidecar", "denominatorRole": "server", "target": "0.5"}],
        "algorithm": {"proportional": {"metric": "QueueDepth", "roleTargets": [{"name": "server", "target": "8"}]}}
    });
    let mut w = World::new(policy(spec, &[]), &[4, 2]);
    let p = w.pass(&[Some(requests(obs(4), 64.0, 0.0)), Some(obs(2))]);
    assert_eq!(p.roles[0].raw, 8);
    assert_eq!(
        (p.roles[1].raw, p.roles[1].algorithm_reason),
        (4, Reason::RatioCoupled)
    );
    assert_eq!(p.vector(), vec![8, 4]);
}

fn prefill_world(current: i32) -> World {
    let spec = token_spec(
        json!([{"name": "prefill", "minReplicas": 1, "maxReplicas": 64}]),
        json!([]),
        json!({"prefillTargetTokensPerSecond": "1000", "stableWindowSeconds": 60, "panicWindowSeconds": 30}),
    );
    World::new(policy(spec, &[("prefill", RoleKind::Prefill)]), &[current])
}

#[test]
fn token_throughput_waits_for_a_demand_sample() {
    let mut w = prefill_world(2);
    let mut no_rate = obs(2);
    no_rate.prompt_tokens_per_second = None;
    let p = w.pass(&[Some(no_rate)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (2, Reason::WaitingForMetrics)
    );
    // One rate sample (itself from two scrapes) establishes the windows.
    w.now += 15;
    let p = w.pass(&[Some(prompt(obs(2), 3000.0))]);
    assert_eq!(p.roles[0].raw, 3);
}

#[test]
fn windows_shorter_than_the_interval_still_see_the_newest_sample() {
    // intervalSeconds 120 with a 60 s panic window: panic must still trigger.
    let spec = token_spec(
        json!([{"name": "prefill", "minReplicas": 1, "maxReplicas": 64}]),
        json!([]),
        json!({"prefillTargetTokensPerSecond": "1000", "stableWindowSeconds": 60, "panicWindowSeconds": 30}),
    );
    let mut spec = spec;
    spec["sampling"] = json!({"intervalSeconds": 120});
    let mut w = World::new(policy(spec, &[("prefill", RoleKind::Prefill)]), &[8]);
    for _ in 0..5 {
        w.pass(&[Some(prompt(obs(8), 100.0))]);
        w.now += 120;
    }
    let p = w.pass(&[Some(prompt(obs(8), 30_000.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (30, Reason::Panic)
    );
}

#[test]
fn token_throughput_divides_the_stable_average_by_capacity_rounding_up() {
    let mut w = prefill_world(4);
    let p = w.run(60, 15, &[Some(prompt(obs(4), 2500.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (3, Reason::TokenThroughput)
    );
}

#[test]
fn panic_uses_the_larger_recommendation_and_prevents_scale_down() {
    let mut w = prefill_world(2);
    w.run(60, 15, &[Some(prompt(obs(2), 1000.0))]);
    // A burst: the panic window mean reaches 2 x 2 ready x 1000 = 4000.
    w.now += 15;
    w.pass(&[Some(prompt(obs(2), 7000.0))]);
    w.now += 15;
    let p = w.pass(&[Some(prompt(obs(2), 7000.0))]);
    let role = &p.roles[0];
    assert_eq!(role.algorithm_reason, Reason::Panic);
    assert_eq!(
        role.raw, 7,
        "panic window 7000 / 1000 beats the stable {}",
        role.note
    );
    // Panic with a demand that would shrink: raw never below current.
    let mut w = prefill_world(8);
    w.run(60, 15, &[Some(prompt(obs(2), 5000.0))]);
    let p = w.pass(&[Some(prompt(obs(2), 5000.0))]);
    assert_eq!(p.roles[0].algorithm_reason, Reason::Panic);
    assert!(p.roles[0].raw >= 8);
}

fn decode_world(current: i32, spec_extra: serde_json::Value) -> World {
    let mut token = json!({"decodeTargetTokensPerSecond": "100", "stableWindowSeconds": 60, "panicWindowSeconds": 30, "itlTargetMilliseconds": "50"});
    token
        .as_object_mut()
        .unwrap()
        .extend(spec_extra.as_object().unwrap().clone());
    let spec = token_spec(
        json!([{"name": "decode", "minReplicas": 1, "maxReplicas": 64}]),
        json!([]),
        token,
    );
    World::new(policy(spec, &[("decode", RoleKind::Decode)]), &[current])
}

#[test]
fn latency_above_one_point_two_asks_for_one_more_replica() {
    let mut w = decode_world(4, json!({}));
    // Demand fits 3 replicas, but ITL is 70 ms against 50: 1.4x.
    let p = w.run(
        45,
        15,
        &[Some(latency(generation(obs(4), 300.0), None, Some(70.0)))],
    );
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (5, Reason::LatencyGuardScaleUp)
    );
}

#[test]
fn latency_above_target_holds_scale_down() {
    let mut w = decode_world(4, json!({}));
    let p = w.run(
        45,
        15,
        &[Some(latency(generation(obs(4), 150.0), None, Some(55.0)))],
    );
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (4, Reason::LatencyGuardHold)
    );
}

#[test]
fn missing_latency_holds_scale_down_but_allows_growth() {
    let mut w = decode_world(4, json!({}));
    let p = w.run(
        45,
        15,
        &[Some(latency(generation(obs(4), 150.0), None, None))],
    );
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (4, Reason::LatencyGuardHold)
    );
    let mut w = decode_world(4, json!({}));
    let p = w.run(
        45,
        15,
        &[Some(latency(generation(obs(4), 650.0), None, None))],
    );
    assert_eq!(p.roles[0].raw, 7, "throughput-driven growth is allowed");
}

#[test]
fn an_idle_role_without_latency_may_shrink() {
    let mut w = decode_world(4, json!({}));
    let mut idle = latency(generation(obs(4), 0.0), None, None);
    idle.signal_state = SignalState::Idle;
    let p = w.run(45, 15, &[Some(idle)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (1, Reason::TokenThroughput)
    );
}

#[test]
fn a_server_role_uses_the_larger_relative_breach() {
    let spec = token_spec(
        json!([{"name": "server", "maxReplicas": 64}]),
        json!([]),
        json!({"serverTargetTokensPerSecond": "1000", "ttftTargetMilliseconds": "500", "itlTargetMilliseconds": "50"}),
    );
    let mut w = World::new(policy(spec, &[]), &[4]);
    // TTFT 550 / 500 = 1.1 (hold), ITL 65 / 50 = 1.3 (scale up): the larger wins.
    let o = latency(
        generation(prompt(obs(4), 1000.0), 1000.0),
        Some(550.0),
        Some(65.0),
    );
    let p = w.run(200, 15, &[Some(o)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (5, Reason::LatencyGuardScaleUp)
    );
}

#[test]
fn a_known_breach_counts_even_when_the_other_latency_is_missing() {
    let spec = token_spec(
        json!([{"name": "server", "maxReplicas": 64}]),
        json!([]),
        json!({"serverTargetTokensPerSecond": "1000", "ttftTargetMilliseconds": "500"}),
    );
    let mut w = World::new(policy(spec, &[]), &[4]);
    // TTFT at 3x target, ITL missing: the guard still asks for one more replica.
    let o = latency(generation(prompt(obs(4), 3000.0), 0.0), Some(1500.0), None);
    let p = w.pass(&[Some(o)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (5, Reason::LatencyGuardScaleUp)
    );
}

#[test]
fn the_latency_guard_acts_before_a_throughput_window_exists() {
    let mut w = decode_world(4, json!({}));
    let mut o = latency(obs(4), None, Some(150.0));
    o.generation_tokens_per_second = None;
    let p = w.pass(&[Some(o)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (5, Reason::LatencyGuardScaleUp)
    );
}

#[test]
fn proportional_reports_no_ready_replicas_even_when_signals_are_missing() {
    let mut w = proportional_world("QueueDepth", 3);
    let mut o = obs(0);
    o.signal_state = SignalState::Missing;
    let p = w.pass(&[Some(o)]);
    assert_eq!(p.roles[0].algorithm_reason, Reason::NoReadyReplicas);
}

#[test]
fn predictive_warm_up_is_reported_even_during_panic() {
    let mut w = predictive_world(4, 64);
    let p = w.pass(&[Some(prompt(obs(4), 20_000.0))]);
    assert_eq!(p.roles[0].algorithm_reason, Reason::PredictorWarmingUp);
    assert!(
        p.roles[0].raw >= 5,
        "the fallback's panic result is used: {}",
        p.roles[0].note
    );
}

#[test]
fn encode_roles_follow_their_ratio() {
    let spec = token_spec(
        json!([{"name": "encode", "maxReplicas": 16}, {"name": "prefill", "maxReplicas": 16}]),
        json!([{"numeratorRole": "encode", "denominatorRole": "prefill", "target": "0.5"}]),
        json!({"prefillTargetTokensPerSecond": "1000", "stableWindowSeconds": 60}),
    );
    let mut w = World::new(
        policy(
            spec,
            &[("encode", RoleKind::Encode), ("prefill", RoleKind::Prefill)],
        ),
        &[1, 2],
    );
    let p = w.run(60, 15, &[Some(obs(1)), Some(prompt(obs(2), 5500.0))]);
    assert_eq!(p.roles[1].raw, 6);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (3, Reason::RatioCoupled)
    );
}

fn predictive_world(current: i32, min_points: i32) -> World {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "prefill", "minReplicas": 1, "maxReplicas": 64}],
        "algorithm": {"predictive": {
            "tokenThroughput": {"prefillTargetTokensPerSecond": "1000", "stableWindowSeconds": 60, "panicWindowSeconds": 30},
            "prefillTokenCapacityPerReplica": "1000",
            "horizonSeconds": 300,
            "minPoints": min_points
        }}
    });
    World::new(policy(spec, &[("prefill", RoleKind::Prefill)]), &[current])
}

#[test]
fn predictive_warms_up_on_the_fallback() {
    let mut w = predictive_world(4, 6);
    let mut reasons = vec![];
    for i in 0..7 {
        w.now = 15 * i;
        reasons.push(w.pass(&[Some(prompt(obs(4), 3500.0))]).roles[0].algorithm_reason);
    }
    assert!(
        reasons[0..5]
            .iter()
            .all(|r| *r == Reason::PredictorWarmingUp),
        "{reasons:?}"
    );
    assert_eq!(reasons[6], Reason::Predictive, "{reasons:?}");
}

#[test]
fn predictive_grows_ahead_of_a_ramp_and_never_below_the_fallback() {
    let mut w = predictive_world(4, 6);
    let mut last = None;
    for i in 0..20 {
        w.now = 15 * i;
        // Demand climbs 10 tokens/s every second.
        last = Some(w.pass(&[Some(prompt(obs(4), 2000.0 + 150.0 * i as f64))]));
    }
    let role = &last.unwrap().roles[0];
    // Now 4850 tok/s; in 300 s about 7850, while the stable window says 5 replicas. Five
    // minutes into the ramp the filter trusts part of its slope (D37: the trend starts as
    // uncertain as one measurement deviation over the horizon, so a slope must last to be
    // believed): 6,088 tok/s, 7 replicas. With the old start of 1 (token/s per s)² it was 8.
    assert_eq!(role.algorithm_reason, Reason::Predictive, "{}", role.note);
    assert_eq!(role.raw, 7, "{}", role.note);
    // A falling forecast never goes below the TokenThroughput result.
    let mut w = predictive_world(4, 2);
    let mut last = None;
    for i in 0..20 {
        w.now = 15 * i;
        last = Some(w.pass(&[Some(prompt(obs(4), (6000.0 - 300.0 * i as f64).max(0.0)))]));
    }
    let role = &last.unwrap().roles[0];
    let fallback = w.state.roles["prefill"].window_mean(t(w.now), 60).unwrap();
    assert!(
        role.raw >= (fallback / 1000.0).ceil() as i32,
        "{} {}",
        role.raw,
        role.note
    );
}

#[test]
fn predictive_does_not_carry_the_first_readings_jump_a_horizon_ahead() {
    // D37: a window filling from 3,000 to 6,000 tok/s in the first passes, then flat. With the
    // trend started at 1 (token/s per s)², the jump became a trend of about 180 tok/s per
    // second and the first forecast about 61,000 tok/s: 62 replicas for a load 6 serve.
    let mut w = predictive_world(4, 2);
    for (i, demand) in [3000.0, 6000.0, 6000.0, 6000.0, 6000.0]
        .into_iter()
        .enumerate()
    {
        w.now = 15 * i as i64;
        let p = w.pass(&[Some(prompt(obs(4), demand))]);
        assert!(p.roles[0].raw <= 6, "pass {i}: {}", p.roles[0].note);
    }
}

#[test]
fn predictive_consolidation_needs_eighty_percent_headroom() {
    // 4 replicas, 2900 tok/s: 3 replicas would carry 2900 > 0.8 x 3 x 1000 = 2400.
    let mut w = predictive_world(4, 2);
    let p = w.run(120, 15, &[Some(prompt(obs(4), 2900.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (4, Reason::PredictiveConsolidationHold)
    );
    // At 2300 tok/s the three remaining replicas stay under 80 %: shrinking is allowed.
    let mut w = predictive_world(4, 2);
    let p = w.run(120, 15, &[Some(prompt(obs(4), 2300.0))]);
    assert_eq!(p.roles[0].raw, 3);
}

#[test]
fn predictive_panic_after_warm_up_adds_a_replica() {
    let mut w = predictive_world(4, 2);
    w.run(60, 15, &[Some(prompt(obs(4), 1000.0))]);
    w.now += 15;
    w.pass(&[Some(prompt(obs(4), 20000.0))]);
    w.now += 15;
    let p = w.pass(&[Some(prompt(obs(4), 20000.0))]);
    assert!(p.roles[0].raw >= 5, "{}", p.roles[0].note);
}

// Regressions found in the second review.

#[test]
fn the_extra_replica_does_not_compound_while_our_growth_starts() {
    let mut w = decode_world(2, json!({}));
    // ITL at 1.4x target; the added replica is ours and still starting (D13).
    let slow = |ready: u32| latency(generation(obs(ready), 150.0), None, Some(70.0));
    let p = w.pass(&[Some(slow(2))]);
    assert_eq!(p.roles[0].raw, 3);
    w.apply(&p);
    w.growth_in_flight[0] = true;
    for _ in 0..5 {
        w.now += 15;
        let p = w.pass(&[Some(slow(2))]); // 3 desired, still 2 ready
        assert_eq!(
            p.roles[0].raw, 3,
            "holds while the added replica starts: {}",
            p.roles[0].note
        );
        w.apply(&p);
    }
    // Once it is ready (or the commit is older than pendingTimeoutSeconds) the guard adds
    // one more if latency still breaches.
    w.growth_in_flight[0] = false;
    w.now += 15;
    assert_eq!(w.pass(&[Some(slow(3))]).roles[0].raw, 4);
}

#[test]
fn a_replica_not_ready_for_another_reason_does_not_suppress_the_latency_guard() {
    // D13 (amended): 3 decode replicas, 2 ready (one restarting since before any commit of
    // ours), ITL at 1.5x: the guard asks for current + 1.
    let mut w = decode_world(3, json!({}));
    let slow = latency(generation(obs(2), 150.0), None, Some(75.0));
    let p = w.pass(&[Some(slow)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].reason),
        (4, Reason::LatencyGuardScaleUp)
    );
    assert_eq!(p.roles[0].constrained, 4);
}

#[test]
fn predictive_extra_replica_follows_the_same_in_flight_rule() {
    // TTFT at 1.5x target after warm-up, demand for 3 of the 4 replicas, one replica not
    // ready: the extra replica counts from the current 4, not from the ready 3 (D13, D14).
    let slow = |ready| latency(prompt(obs(ready), 3000.0), Some(750.0), None);
    let mut w = predictive_world(4, 2);
    let p = w.run(60, 15, &[Some(slow(3))]);
    assert_eq!(p.roles[0].raw, 5, "{}", p.roles[0].note);
    // While our own growth starts, it holds at the current count.
    w.growth_in_flight[0] = true;
    w.now += 15;
    let p = w.pass(&[Some(slow(3))]);
    assert_eq!(p.roles[0].raw, 4, "{}", p.roles[0].note);
}

#[test]
fn predictive_does_not_oscillate_with_a_low_panic_threshold() {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "prefill", "minReplicas": 1, "maxReplicas": 16}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 15}},
        "algorithm": {"predictive": {
            "tokenThroughput": {"prefillTargetTokensPerSecond": "1000", "panicThreshold": "0.5"},
            "prefillTokenCapacityPerReplica": "1000", "minPoints": 2
        }}
    });
    let mut w = World::new(policy(spec, &[("prefill", RoleKind::Prefill)]), &[3]);
    let mut counts = vec![];
    for _ in 0..60 {
        let ready = w.current[0] as u32;
        let p = w.pass(&[Some(prompt(obs(ready), 1000.0))]);
        w.apply(&p);
        counts.push(w.current[0]);
        w.now += 15;
    }
    let changes = counts.windows(2).filter(|c| c[0] != c[1]).count();
    assert!(changes <= 1, "counts kept changing: {counts:?}");
}

#[test]
fn a_coupled_role_follows_what_its_partner_can_reach_and_shares_its_hold() {
    let spec = token_spec(
        json!([{"name": "encode", "maxReplicas": 16}, {"name": "prefill", "maxReplicas": 4}]),
        json!([{"numeratorRole": "encode", "denominatorRole": "prefill", "target": "0.5"}]),
        json!({"prefillTargetTokensPerSecond": "1000"}),
    );
    let mut w = World::new(
        policy(
            spec,
            &[("encode", RoleKind::Encode), ("prefill", RoleKind::Prefill)],
        ),
        &[2, 4],
    );
    let p = w.pass(&[Some(obs(2)), Some(prompt(obs(4), 20_000.0))]);
    assert_eq!(
        p.roles[0].raw, 2,
        "prefill can reach 4 at most: encode follows 4 x 0.5"
    );
    // Prefill has no ready replica: encode must not shrink either.
    let spec = token_spec(
        json!([{"name": "encode", "maxReplicas": 16}, {"name": "prefill", "maxReplicas": 16}]),
        json!([{"numeratorRole": "encode", "denominatorRole": "prefill", "target": "0.5"}]),
        json!({"prefillTargetTokensPerSecond": "1000"}),
    );
    let mut spec = spec;
    spec["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 15}});
    let mut w = World::new(
        policy(
            spec,
            &[("encode", RoleKind::Encode), ("prefill", RoleKind::Prefill)],
        ),
        &[8, 4],
    );
    let p = w.run(60, 15, &[Some(obs(8)), Some(obs(0))]);
    assert_eq!(p.vector(), vec![8, 4], "{:?}", p.roles[0].limits);
}

#[test]
fn nan_or_infinite_demand_is_no_reading() {
    let mut w = prefill_world(8);
    let p = w.run(120, 15, &[Some(prompt(obs(8), f64::NAN))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (8, Reason::WaitingForMetrics)
    );
    let mut w = predictive_world(4, 2);
    w.run(60, 15, &[Some(prompt(obs(4), 3000.0))]);
    w.now += 15;
    w.pass(&[Some(prompt(obs(4), f64::INFINITY))]);
    let k = w.state.roles["prefill"].kalman.clone().unwrap();
    assert!(k.level.is_finite() && k.trend.is_finite(), "{k:?}");
}

#[test]
fn a_huge_current_count_does_not_overflow() {
    let mut w = decode_world(i32::MAX, json!({}));
    let p = w.pass(&[Some(latency(generation(obs(4), 150.0), None, Some(500.0)))]);
    assert_eq!(
        p.conflict.as_ref().map(|c| c.0),
        Some(Reason::BoundsConflict)
    );
}

// Issue 8: conformance fixes.

fn proportional_with(tolerance: &str, target: &str, current: i32) -> World {
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 64}],
        "algorithm": {"proportional": {"metric": "QueueDepth", "tolerance": tolerance,
            "roleTargets": [{"name": "server", "target": target}]}}
    });
    World::new(policy(spec, &[("server", RoleKind::Server)]), &[current])
}

#[test]
fn the_tolerance_deadband_is_inclusive_at_both_edges_exactly() {
    // D11: 110 over 10 ready against 10 is exactly 1.1; in floats 0.10000000000000009 > 0.1.
    let mut w = proportional_with("0.1", "10", 10);
    let p = w.pass(&[Some(requests(obs(10), 100.0, 10.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (10, Reason::WithinTolerance)
    );
    // The lower edge at tolerance 0.3: 70 over 10 ready is exactly 0.7.
    let mut w = proportional_with("0.3", "10", 10);
    let p = w.pass(&[Some(requests(obs(10), 70.0, 0.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (10, Reason::WithinTolerance)
    );
    // One request beyond either edge scales.
    let p = w.pass(&[Some(requests(obs(10), 69.0, 0.0))]);
    assert_eq!(p.roles[0].raw, 7);
    let mut w = proportional_with("0.1", "10", 10);
    let p = w.pass(&[Some(requests(obs(10), 111.0, 0.0))]);
    assert_eq!(p.roles[0].raw, 12);
}

#[test]
fn proportional_rate_sums_compare_as_the_decimals_they_are() {
    // 0.1 + 0.2 tokens/s over one replica against 0.3 is exactly on target; the ceiling of
    // 0.3 / 0.1 is 3, not 4.
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 64}],
        "algorithm": {"proportional": {"metric": "TotalTokensPerSecond", "tolerance": "0.01",
            "roleTargets": [{"name": "server", "target": "0.3"}]}}
    });
    let mut w = World::new(policy(spec, &[("server", RoleKind::Server)]), &[1]);
    let p = w.pass(&[Some(generation(prompt(obs(1), 0.1), 0.2))]);
    assert_eq!(p.roles[0].algorithm_reason, Reason::WithinTolerance);
    let spec = json!({
        "targetRef": {"name": "md"},
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 64}],
        "algorithm": {"proportional": {"metric": "TotalTokensPerSecond", "tolerance": "0.01",
            "roleTargets": [{"name": "server", "target": "0.1"}]}}
    });
    let mut w = World::new(policy(spec, &[("server", RoleKind::Server)]), &[1]);
    let p = w.pass(&[Some(generation(prompt(obs(1), 0.1), 0.2))]);
    assert_eq!(p.roles[0].raw, 3);
}

#[test]
fn predictive_warm_up_is_the_reason_even_without_a_fallback_reading() {
    let mut w = predictive_world(4, 6);
    let mut o = obs(4);
    o.signal_state = SignalState::Missing;
    o.prompt_tokens_per_second = None;
    let p = w.pass(&[Some(o)]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (4, Reason::PredictorWarmingUp)
    );
    assert!(
        p.roles[0].note.contains("WaitingForMetrics"),
        "the note says what the fallback saw: {}",
        p.roles[0].note
    );
}

#[test]
fn a_token_algorithm_holds_an_unknown_kind_and_names_it() {
    // D31: the target gained a kind no capacity describes.
    let spec = token_spec(
        json!([{"name": "vision", "minReplicas": 1, "maxReplicas": 8}]),
        json!([]),
        json!({"serverTargetTokensPerSecond": "100"}),
    );
    let mut w = World::new(
        policy(spec, &[("vision", RoleKind::Unknown("Vision".into()))]),
        &[3],
    );
    let p = w.run(60, 15, &[Some(prompt(obs(3), 10_000.0))]);
    assert_eq!(
        (p.roles[0].raw, p.roles[0].algorithm_reason),
        (3, Reason::WaitingForMetrics)
    );
    assert!(
        p.roles[0].note.contains("\"Vision\""),
        "{}",
        p.roles[0].note
    );
}
