//! Issue 8's departures from the spec, each pinned by a scenario: holds that reach only as far
//! as D29 lets them, repeated Opposing donations (D27), the latency guard's base (D13), joint
//! shrinks and their restore (D16), and the status and event details.

use crate::common;

use common::*;
use mds_api::status::ScaleDownOutcome;
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use serde_json::json;

/// prefill and decode on `h100`, `other` on `a100`; decode's growth to 3 is rolled back.
fn exhausted_world(policy: &str, prefill: i32) -> World {
    let mut s = spec(
        "Active",
        &[("prefill", 1, 8), ("decode", 1, 8), ("other", 1, 8)],
    );
    s["rebalance"] = json!({"policy": policy});
    let mut t = target(&[
        ("prefill", "Prefill", prefill),
        ("decode", "Decode", 2),
        ("other", "Server", 2),
    ]);
    t["spec"]["roles"][2]["instanceType"] = json!("a100");
    let mut w = World::new(s, Some(t));
    w.observe("prefill", wants(prefill, prefill as u32));
    w.observe("decode", wants(2, 2));
    w.observe("other", wants(2, 2));
    w.pass(); // bind
    w.now += 15;
    w.observe("decode", wants(3, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    w.now += 135;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    w
}

#[test]
fn a_rollback_reports_its_reason_only_on_the_roles_it_changed() {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Disabled"});
    let mut w = prefill_decode_world(s, 2, 2);
    w.observe("prefill", wants(2, 2));
    w.observe("decode", wants(2, 2));
    w.pass();
    w.now += 15;
    w.observe("decode", wants(3, 2));
    w.pass();
    w.now += 135;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Rollback);
    let reason = |role: &str| {
        w.status
            .roles
            .iter()
            .find(|r| r.name == role)
            .and_then(|r| r.reason.clone())
    };
    assert_eq!(reason("decode").as_deref(), Some("ResourceExhausted"));
    assert_eq!(reason("prefill").as_deref(), Some("WithinTolerance"));
    // The transaction has not started: no startedAt yet.
    let rb = w.status.rebalance.clone().unwrap();
    assert_eq!(rb.started_at, None);
    assert_eq!(
        rb.reason.as_ref().map(|r| r.as_str()),
        Some("ResourceExhausted")
    );
}

#[test]
fn after_a_rollback_only_the_shortage_pool_waits() {
    // D29 (b): decode's growth on h100 was rolled back. prefill (h100) waits; other (a100)
    // grows at once.
    let mut w = exhausted_world("Disabled", 2);
    w.observe("prefill", wants(4, 2));
    w.observe("other", wants(4, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert_eq!(
        w.replicas(),
        [
            ("decode".to_string(), 2),
            ("other".to_string(), 4),
            ("prefill".to_string(), 2)
        ]
        .into()
    );
    let plan = o.plan.unwrap();
    let prefill = plan.roles.iter().find(|r| r.name == "prefill").unwrap();
    assert!(
        prefill.limits.contains(&mds_planner::Limit::Guard(
            mds_planner::Guard::ExhaustionBackoff
        )),
        "{:?}",
        prefill.limits
    );
    // The backoff ends after pendingTimeoutSeconds (120 s): then the pool grows again.
    admit(&mut w, "other", 0..4);
    w.now += 120;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert!(w.replicas()["prefill"] > 2);
}

#[test]
fn a_retirement_during_an_episode_holds_scale_down_only() {
    // D29 (a): the receiver still wants to grow and a retirement is active, so the episode
    // waits; another role's growth still commits, even with rebalancing Disabled.
    let mut w = exhausted_world("Disabled", 2);
    w.now += 120; // past the backoff
    w.set_retirement(Some(
        json!({"roleName": "other", "replicaOrdinal": 5, "state": "Draining"}),
    ));
    w.observe("other", wants(4, 2));
    let o = w.pass();
    assert_eq!(o.write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(w.replicas()["other"], 4);
}

#[test]
fn opposing_takes_another_donation_at_a_second_exhaustion() {
    // D27: the once-per-episode rule is Priority's. Under Opposing, when the receiver's
    // acquired replica is not admitted either, a donor that still wants to shrink gives again.
    let mut w = exhausted_world("Opposing", 6);
    w.observe("prefill", wants(2, 6));
    w.observe("decode", wants(3, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit, "donor releases");
    assert_eq!(w.replicas()["prefill"], 5);
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.unwrap().kind,
        WriteKind::Commit,
        "receiver acquires"
    );
    assert_eq!(w.replicas()["decode"], 3);
    // Its ordinal is not admitted either: a second rollback in the same episode.
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    let rb = w.status.rebalance.clone().unwrap();
    assert!(rb.donation_attempted);
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.map(|x| x.kind),
        Some(WriteKind::Commit),
        "a second donation, not RebalanceBlocked: {:?}",
        w.status.rebalance
    );
    assert_eq!(w.replicas()["prefill"], 4);
    assert_eq!(
        w.status
            .rebalance
            .as_ref()
            .unwrap()
            .reason
            .as_ref()
            .map(|r| r.as_str()),
        Some("DonorRelease")
    );
}

#[test]
fn an_opposing_donor_that_holds_is_not_applicable() {
    let mut w = exhausted_world("Opposing", 4);
    w.observe("prefill", wants(4, 4));
    w.observe("decode", wants(3, 2));
    w.now += 120;
    w.pass();
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceNotApplicable".into())
    );
}

fn decode_token_world(replicas: i32) -> World {
    let mut s = spec("Active", &[("decode", 1, 16)]);
    s["algorithm"] = json!({"tokenThroughput": {"decodeTargetTokensPerSecond": "100", "itlTargetMilliseconds": "50"}});
    let mut w = World::new(s, Some(target(&[("decode", "Decode", replicas)])));
    admit(&mut w, "decode", 0..replicas);
    w
}

fn slow_decode(ready: u32) -> mds_signals::RoleObservation {
    let mut o = wants(1, ready);
    o.generation_tokens_per_second = Some(150.0);
    o.itl_milliseconds = Some(75.0);
    o
}

#[test]
fn the_latency_guard_ignores_replicas_that_are_not_ready_for_reasons_of_their_own() {
    // D13 (amended): 3 decode replicas, ordinal 1 restarting since before any commit of ours,
    // ITL at 1.5x: the guard grows the role.
    let mut w = decode_token_world(3);
    w.ready = Some([("decode".to_string(), 0), ("decode".to_string(), 2)].into());
    w.observe("decode", slow_decode(2));
    w.pass(); // bind
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(w.replicas()["decode"], 4);
    // Our own growth (ordinal 3) is admitted but still starting: the guard holds at 4.
    admit(&mut w, "decode", 0..4);
    for _ in 0..3 {
        w.now += 15;
        let o = w.pass();
        assert!(o.write.is_none(), "compounded: {:?}", o.write);
    }
    // Ready: measured for one interval (D32), latency still breaches, so one more.
    w.ready = Some((0..4).map(|o| ("decode".to_string(), o)).collect());
    w.observe("decode", slow_decode(4));
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["decode"], 4, "not measured with ordinal 3 yet");
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["decode"], 5);
}

#[test]
fn a_joint_shrink_is_restored_together_when_a_retirement_aborts() {
    // D16 (amended): a fixed ratio shrinks both roles in one commit; an abort restores both.
    let mut s = prefill_decode_spec();
    s["ratios"] = json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1", "target": "1", "max": "1"}]);
    let mut w = prefill_decode_world(s, 4, 4);
    w.observe("prefill", wants(2, 4));
    w.observe("decode", wants(2, 4));
    w.run(15, 15); // bind, then one joint shrink
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 3), ("prefill".to_string(), 3)].into()
    );
    let last = w.status.last_scale_down.clone().unwrap();
    assert_eq!(last.pre_scale_down_vector["prefill"], 4);
    assert_eq!(last.pre_scale_down_vector["decode"], 4);
    // The retirements run one at a time: prefill's completed (its Pods are gone), decode's
    // aborts (its members stay).
    w.pods.insert(("decode".into(), 3));
    w.set_retirement(Some(
        json!({"roleName": "decode", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Restore);
    // prefill's ordinal 3 comes back as a new replica: tracked like growth, so it times out
    // and rolls back if it is not admitted.
    let cohort = w
        .status
        .pending_cohort
        .clone()
        .expect("a cohort for the recreated role");
    assert_eq!(mds_core_added(&cohort), vec![("prefill".to_string(), 3)]);
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 4), ("prefill".to_string(), 4)].into()
    );
    assert_eq!(
        w.status.last_scale_down.as_ref().unwrap().outcome,
        ScaleDownOutcome::Aborted
    );
}

#[test]
fn a_rebind_after_a_users_edit_can_shrink_again() {
    // D29 (d): our last commit (4) is superseded by the user's 3 made while unbound; the
    // "our last commit is visible" guard must not hold scale-down for ever.
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 2)])),
    );
    w.observe("server", wants(4, 2));
    w.pass(); // bind
    w.now += 15;
    w.pass(); // 2 -> 4
    admit(&mut w, "server", 0..4);
    w.now += 15;
    w.pass(); // cohort admitted
    w.edit(|s| s["mode"] = json!("Shadow"));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Release);
    // The user sets 3; GPUStack reports it as desired.
    w.edit_target(|t| {
        t["spec"]["roles"][0]["replicas"] = json!(3);
        t["metadata"]["generation"] = json!(t["metadata"]["generation"].as_i64().unwrap() + 1);
        t["status"]["roles"] = json!([{"name": "server", "desired": 3, "ready": 3}]);
    });
    w.edit(|s| s["mode"] = json!("Active"));
    w.observe("server", wants(1, 3));
    w.now += 15;
    let outcomes = w.run(120, 15);
    assert!(
        w.replicas()["server"] < 3,
        "never shrank: {:?}",
        outcomes
            .last()
            .and_then(|o| o.plan.as_ref())
            .map(|p| p.roles[0].limits.clone())
    );
}

#[test]
fn a_router_less_hold_says_so() {
    let mut t = target(&[("server", "Server", 4)]);
    t["spec"].as_object_mut().unwrap().remove("router");
    let mut w = World::new(spec("Active", &[("server", 1, 16)]), Some(t));
    w.observe("server", wants(1, 4));
    w.run(60, 15);
    let blocked = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Blocked")
        .unwrap();
    assert!(blocked.message.contains("no router"), "{}", blocked.message);
    assert!(
        !blocked.message.contains("retirement is active"),
        "{}",
        blocked.message
    );
}

#[test]
fn an_unknown_kind_under_a_token_algorithm_waits_for_metrics_and_says_why() {
    let mut s = spec("Active", &[("vision", 1, 8)]);
    s["algorithm"] = json!({"tokenThroughput": {"serverTargetTokensPerSecond": "100"}});
    let mut w = World::new(s, Some(target(&[("vision", "Vision", 2)])));
    admit(&mut w, "vision", 0..2);
    w.observe("vision", wants(2, 2));
    w.run(30, 15);
    assert_eq!(
        w.status.roles[0].reason.as_deref(),
        Some("WaitingForMetrics")
    );
    let (status, reason) = w.condition("MetricsReady");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "WaitingForMetrics")
    );
    assert_eq!(w.replicas()["vision"], 2);
}

fn admit(w: &mut World, role: &str, ordinals: std::ops::Range<i32>) {
    for o in ordinals {
        w.admission
            .insert((role.to_string(), o), WorkloadAdmission::Admitted);
    }
}

#[test]
fn predictor_history_keeps_only_samples_inside_the_active_window() {
    // Stable window 180 s, panic window 60 s: samples older than 180 s leave the history.
    let mut w = decode_token_world(2);
    w.edit(|s| {
        s["algorithm"]["tokenThroughput"]["stableWindowSeconds"] = json!(180);
        s["algorithm"]["tokenThroughput"]["panicWindowSeconds"] = json!(60);
    });
    let mut o = wants(2, 2);
    o.generation_tokens_per_second = Some(150.0);
    w.observe("decode", o);
    let outcomes = w.run(900, 15);
    let last = outcomes.last().unwrap();
    let history = &last.status.predictors[0].history;
    assert_eq!(history.len(), 12, "{history:?}");
    let oldest = history.first().unwrap().timestamp.0;
    assert!(oldest > t(w.now) - jiff::SignedDuration::from_secs(180));
}

fn mds_core_added(cohort: &mds_api::status::PendingCohort) -> Vec<(String, i32)> {
    cohort
        .target_vector
        .iter()
        .flat_map(|(role, &to)| {
            let from = cohort.baseline_vector.get(role).copied().unwrap_or(to);
            (from..to).map(move |o| (role.clone(), o))
        })
        .collect()
}
