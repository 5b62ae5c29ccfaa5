//! Regressions from the review of the issue 8 changes: each scenario broke a rule before its fix.

use crate::common;

use common::*;
use mds_api::status::ScaleDownOutcome;
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use serde_json::json;

fn admit(w: &mut World, role: &str, ordinals: std::ops::Range<i32>) {
    for o in ordinals {
        w.admission
            .insert((role.to_string(), o), WorkloadAdmission::Admitted);
        w.pods.insert((role.to_string(), o));
    }
}

fn slow_decode(ready: u32) -> mds_signals::RoleObservation {
    let mut o = wants(1, ready);
    o.generation_tokens_per_second = Some(150.0);
    o.itl_milliseconds = Some(75.0);
    o
}

/// D13: another role's commit (here a shrink of prefill) makes our decode growth no longer
/// "in flight", so the latency guard compounds during decode's cold start.
#[test]
fn growth_in_flight_survives_another_roles_commit() {
    let mut s = spec("Active", &[("prefill", 1, 16), ("decode", 1, 16)]);
    s["algorithm"] = json!({"tokenThroughput": {
        "decodeTargetTokensPerSecond": "100", "prefillTargetTokensPerSecond": "1000",
        "itlTargetMilliseconds": "50", "ttftTargetMilliseconds": "500"}});
    s["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = json!(15);
    let mut w = prefill_decode_world(s, 4, 3);
    admit(&mut w, "decode", 0..3);
    admit(&mut w, "prefill", 0..4);
    w.ready = Some(
        (0..3)
            .map(|o| ("decode".to_string(), o))
            .chain((0..4).map(|o| ("prefill".to_string(), o)))
            .collect(),
    );
    w.observe("decode", slow_decode(3));
    // prefill: busy enough to hold at 4 for now
    let mut p = wants(1, 4);
    p.prompt_tokens_per_second = Some(3500.0);
    w.observe("prefill", p.clone());
    w.pass(); // bind
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["decode"], 4, "latency guard grew decode");
    // admitted, not ready yet (cold start)
    admit(&mut w, "decode", 0..4);
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["decode"], 4, "held while in flight");
    // prefill's demand drops: it shrinks (another role's commit)
    p.prompt_tokens_per_second = Some(1500.0);
    w.observe("prefill", p);
    let mut shrank = false;
    for _ in 0..20 {
        w.now += 15;
        w.pass();
        if w.replicas()["prefill"] < 4 {
            shrank = true;
            break;
        }
    }
    assert!(shrank, "prefill never shrank: {:?}", w.status.roles);
    w.now += 15;
    w.pass();
    w.now += 15;
    w.pass();
    // decode ordinal 3 is still not ready: D13 says hold at 4
    assert_eq!(
        w.replicas()["decode"],
        4,
        "compounded through decode's cold start"
    );
}

/// Joint shrink: between GPUStack's two retirements the planner shrinks again, the first
/// shrink's record is replaced, and an abort of its second ordinal is never restored.
#[test]
fn no_second_shrink_between_the_retirements_of_a_joint_shrink() {
    let mut s = prefill_decode_spec();
    s["ratios"] = json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1", "target": "1", "max": "1"}]);
    let mut w = prefill_decode_world(s, 4, 4);
    admit(&mut w, "prefill", 0..4);
    admit(&mut w, "decode", 0..4);
    w.observe("prefill", wants(2, 4));
    w.observe("decode", wants(2, 4));
    w.run(15, 15);
    assert_eq!(w.replicas()["decode"], 3);
    // GPUStack retires prefill 3 first; it is done (field gone, Pods gone); decode 3 has not
    // started yet (still has Pods).
    w.pods.remove(&("prefill".to_string(), 3));
    w.observe("prefill", wants(2, 3));
    w.observe("decode", wants(2, 3));
    w.now += 15;
    w.pass();
    // decode 3's retirement now starts and aborts
    w.set_retirement(Some(
        json!({"roleName": "decode", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    for _ in 0..10 {
        w.now += 15;
        w.pass();
    }
    assert!(
        w.status
            .last_scale_down
            .as_ref()
            .is_some_and(|l| l.outcome == ScaleDownOutcome::Aborted),
        "decode 3's abort was never restored; blocked: {:?}",
        w.condition("Blocked")
    );
}

/// The rollback's adjustment of preScaleDownVector when the cohort's growth came after the
/// shrink: the abort of the shrink is no longer recognised.
#[test]
fn a_rollback_after_regrowth_keeps_the_abort_restore() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 4)])),
    );
    admit(&mut w, "server", 0..4);
    w.observe("server", wants(3, 4));
    w.run(15, 15); // bind, then 4 -> 3
    assert_eq!(w.replicas()["server"], 3);
    // retirement of ordinal 3 running
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Draining"}),
    ));
    // load spikes: growth while the retirement runs (scale-down guards only)
    w.observe("server", wants(5, 3));
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["server"], 5);
    // ordinal 4 never admitted: rollback after the timeout
    w.admission
        .insert(("server".into(), 4), WorkloadAdmission::Unadmitted);
    w.now += 135;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Rollback);
    // the retirement of ordinal 3 aborts
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.map(|x| x.kind),
        Some(WriteKind::Restore),
        "abort of ordinal 3 not restored; last {:?}",
        w.status.last_scale_down
    );
}

/// The donor release of a rebalance ignores the NoRouter guard (and the donor's other
/// scale-down guards): a router-less target donates a replica GPUStack cannot retire.
#[test]
fn a_donor_release_respects_the_donors_guards() {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Opposing"});
    let mut t = target(&[("prefill", "Prefill", 4), ("decode", "Decode", 2)]);
    t["spec"].as_object_mut().unwrap().remove("router");
    let mut w = World::new(s, Some(t));
    admit(&mut w, "prefill", 0..4);
    admit(&mut w, "decode", 0..2);
    w.observe("prefill", wants(2, 4)); // wants to shrink, held by NoRouter
    w.observe("decode", wants(2, 2));
    w.pass(); // bind
    w.now += 15;
    w.pass();
    assert_eq!(w.replicas()["prefill"], 4, "planner holds: no router");
    w.observe("decode", wants(3, 2));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    w.admission
        .insert(("decode".into(), 2), WorkloadAdmission::Unadmitted);
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    w.pass();
    assert_eq!(
        w.replicas()["prefill"],
        4,
        "donor released on a router-less target"
    );
}

/// A pass that reads the scaler from a cache that has not seen the rollback's status write.
#[test]
fn a_stale_status_after_a_rollback_writes_nothing() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 2)])),
    );
    admit(&mut w, "server", 0..2);
    w.observe("server", wants(2, 2));
    w.pass();
    w.now += 15;
    w.observe("server", wants(3, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    w.pods.insert(("server".into(), 2));
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Unadmitted);
    w.now += 135;
    let stale = w.status.clone();
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    let fresh = w.status.clone();
    w.status = stale; // the forward pass reads the old status
    w.now += 1;
    let o = w.pass();
    let _ = fresh;
    assert!(
        o.write.is_none(),
        "a second rollback write from a stale status"
    );
}

/// A decision annotation whose ID encodes a time near jiff's maximum.
#[test]
fn a_far_future_decision_id_does_not_panic() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 2)])),
    );
    admit(&mut w, "server", 0..2);
    w.observe("server", wants(2, 2));
    w.pass(); // bind (term 1)
    w.now += 15;
    w.pass();
    // Someone writes a decision of term 1 with a crafted ID (no webhook installed).
    w.set_annotation(
        "modeldeployment.gpustack.ai/scaler-decision",
        r#"{"decisionID":"x-t1-253402207199999","term":1,"vector":{"server":3}}"#,
    );
    w.edit_target(|t| t["spec"]["roles"][0]["replicas"] = serde_json::json!(3));
    w.now += 15;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.pass()));
    assert!(r.is_ok(), "reconcile panicked");
}

/// A spec the admission webhook would refuse but the CRD schema stores (target "0").
#[test]
fn a_zero_proportional_target_does_not_panic() {
    let mut s = spec("Active", &[("server", 1, 16)]);
    s["algorithm"]["proportional"]["roleTargets"][0]["target"] = json!("0");
    let mut w = World::new(s, Some(target(&[("server", "Server", 2)])));
    admit(&mut w, "server", 0..2);
    w.observe("server", wants(2, 2));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.pass();
        w.now += 15;
        w.pass();
    }));
    assert!(r.is_ok(), "reconcile panicked");
}

#[test]
fn a_cancelled_donation_is_not_retried_without_a_new_exhaustion() {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Opposing"});
    let mut t = target(&[("prefill", "Prefill", 4), ("decode", "Decode", 2)]);
    t["spec"].as_object_mut().unwrap().remove("router");
    let mut w = World::new(s, Some(t));
    admit(&mut w, "prefill", 0..4);
    admit(&mut w, "decode", 0..2);
    w.observe("prefill", wants(2, 4));
    w.observe("decode", wants(2, 2));
    w.pass();
    w.now += 15;
    w.observe("decode", wants(3, 2));
    w.pass();
    w.admission
        .insert(("decode".into(), 2), WorkloadAdmission::Unadmitted);
    w.pods.insert(("decode".into(), 2));
    w.now += 135;
    w.pass(); // rollback
    w.pods.remove(&("decode".into(), 2));
    w.admission.remove(&("decode".into(), 2));
    let mut releases = 0;
    for _ in 0..40 {
        w.now += 15;
        let before = w.replicas()["prefill"];
        let o = w.pass();
        if let Some(x) = o.write.as_ref() {
            println!(
                "t={} {:?} {:?} rb={:?}",
                w.now,
                x.kind,
                x.vector,
                w.status.rebalance.as_ref().and_then(|r| r.reason.clone())
            );
        }
        if w.replicas()["prefill"] < before {
            releases += 1;
            // GPUStack without a router: the retirement aborts
            w.set_retirement(Some(
                json!({"roleName": "prefill", "replicaOrdinal": before - 1, "state": "Aborted"}),
            ));
        } else if o
            .write
            .as_ref()
            .is_some_and(|x| x.kind == WriteKind::Restore)
        {
            w.set_retirement(None); // adopted
        }
    }
    assert!(
        releases <= 1,
        "donation retried after every cooldown: {releases}"
    );
}

/// A P/D cohort exceeds the quota: decode's added ordinal is admitted, prefill's is not, and
/// the timeout rolls back both. GPUStack refuses every Prefill/Decode retirement (TARGET.md
/// section 5), so the retirement of prefill 2 the rollback starts goes `Aborted` and stays,
/// keeping both removed instances. The rollback recorded no scale-down, so nothing restored
/// it: for ever after the target's counts said (prefill 2, decode 1) while (3, 2) ran,
/// scale-down waited on the `Aborted` record and growth on the unadmitted ordinal (D18).
/// Spec (*Pacing and guards*) and D5: an aborted retirement of a removed ordinal restores the
/// pre-scale-down vector, so GPUStack adopts the held replica, and starts the cooldown.
#[test]
fn an_aborted_retirement_of_a_rollbacks_removal_is_restored() {
    let mut w = prefill_decode_world(prefill_decode_spec(), 2, 1);
    admit(&mut w, "prefill", 0..2);
    admit(&mut w, "decode", 0..1);
    w.observe("prefill", wants(2, 2));
    w.observe("decode", wants(1, 1));
    w.pass(); // bind
    w.observe("prefill", wants(3, 2));
    w.observe("decode", wants(2, 1));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 2), ("prefill".to_string(), 3)].into()
    );
    // decode 1 fits the quota; prefill 2 waits for it (its gated Pods exist).
    admit(&mut w, "decode", 1..2);
    w.pods.insert(("prefill".into(), 2));
    w.admission
        .insert(("prefill".into(), 2), WorkloadAdmission::Unadmitted);
    w.observe("prefill", wants(2, 2));
    w.observe("decode", wants(1, 2));
    w.now += 135;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Rollback);
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 1), ("prefill".to_string(), 2)].into()
    );
    let record = w.status.last_scale_down.clone();
    assert!(
        record
            .as_ref()
            .is_some_and(|l| l.outcome == ScaleDownOutcome::Committed
                && l.pre_scale_down_vector["prefill"] == 3
                && l.pre_scale_down_vector["decode"] == 2),
        "the rollback's shrink is recorded: {record:?}"
    );
    // GPUStack starts with prefill 2 (the first role's highest undeclared ordinal) and
    // refuses it at once; every instance stays.
    w.set_retirement(Some(
        json!({"roleName": "prefill", "replicaOrdinal": 2, "state": "Aborted"}),
    ));
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.as_ref().map(|x| x.kind),
        Some(WriteKind::Restore),
        "the rollback's aborted removal was not restored; blocked: {:?}",
        w.condition("Blocked")
    );
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 2), ("prefill".to_string(), 3)].into(),
        "the counts are what runs again"
    );
    let last = w.status.last_scale_down.clone().unwrap();
    assert_eq!(last.outcome, ScaleDownOutcome::Aborted);
    assert_eq!(last.cooldown_until.map(|c| c.0), Some(t(w.now + 60)));
    let event = o.events.iter().find(|e| e.reason == "ScaleDownAborted");
    assert!(
        event.is_some_and(|e| e.message.contains("prefill/2")),
        "{:?}",
        o.events
    );
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "ScaleDownAborted".into())
    );
    // Adopted: the reservation is cancelled. The restore is no new growth: no cohort, so it
    // does not time out into the same rollback again.
    w.set_retirement(None);
    assert!(w.status.pending_cohort.is_none());
    // What holds now and what releases it: the cooldown holds scale-down until it ends; the
    // unadmitted prefill 2 holds growth (D18) until it is admitted.
    // (decode holds at 2, so it is no donor: rebalancing is not what this is about.)
    w.observe("prefill", wants(4, 2));
    w.observe("decode", wants(2, 2));
    for _ in 0..8 {
        w.now += 15;
        let o = w.pass();
        assert!(
            o.write.is_none(),
            "at {}: {:?} {:?} {:?}",
            w.now,
            o.write.map(|x| (x.kind, x.vector)),
            w.condition("Blocked"),
            w.status.rebalance
        );
    }
    admit(&mut w, "prefill", 2..3);
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.map(|x| x.kind),
        Some(WriteKind::Commit),
        "growth once prefill 2 is admitted"
    );
    assert_eq!(w.replicas()["prefill"], 4);
}

/// A rollback while an abort cooldown runs: its shrink replaces the `Aborted` record, which
/// ended the cooldown with it. The spec's cooldown prevents scale-down for
/// `cooldownAfterAbortSeconds` after the abort, whatever is committed in between.
#[test]
fn a_rollback_during_an_abort_cooldown_keeps_the_cooldown() {
    let mut s = spec("Active", &[("server", 1, 16)]);
    s["behavior"]["scaleDown"]["cooldownAfterAbortSeconds"] = json!(600);
    let mut w = World::new(s, Some(target(&[("server", "Server", 4)])));
    admit(&mut w, "server", 0..4);
    w.observe("server", wants(3, 4));
    w.run(15, 15); // bind, then 4 -> 3
    assert_eq!(w.replicas()["server"], 3);
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Restore);
    let aborted_at = w.now;
    w.set_retirement(None);
    // Growth during the cooldown (it holds scale-down only, D29); ordinal 4 never admitted.
    w.observe("server", wants(5, 4));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    w.pods.insert(("server".into(), 4));
    w.admission
        .insert(("server".into(), 4), WorkloadAdmission::Unadmitted);
    w.observe("server", wants(3, 4));
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    // Its retirement succeeds: ordinal 4 is gone.
    w.pods.remove(&("server".into(), 4));
    w.admission.remove(&("server".into(), 4));
    let mut shrank_at = None;
    while w.now < aborted_at + 700 {
        w.now += 15;
        if w.pass()
            .write
            .is_some_and(|x| x.kind == WriteKind::Commit && w.replicas()["server"] < 4)
        {
            shrank_at = Some(w.now);
            break;
        }
    }
    let shrank_at = shrank_at.expect("scale-down resumes after the cooldown");
    assert!(
        shrank_at >= aborted_at + 600,
        "scale-down {} s after the abort, inside its 600 s cooldown",
        shrank_at - aborted_at
    );
}

/// The world carries a pass out as the worker does: a write that does not land leaves the
/// memory from before the pass and no status (issue 28: the test world kept the new memory).
#[test]
fn a_write_that_does_not_land_leaves_the_memory_from_before_the_pass() {
    use mds_core::Memory;
    use mds_worker::WriteError;
    let mut w = prefill_decode_world(prefill_decode_spec(), 1, 1);
    let patch = mds_worker::memory_cluster::WriteKind::PatchTarget;
    w.cluster
        .fail_next(patch, WriteError::Conflict("stale".into()));
    let mut moved = w.memory.clone();
    w.decide_with(&mut moved);
    assert_ne!(
        moved,
        Memory::default(),
        "the bind pass moves the memory on"
    );
    let out = w.pass();
    assert_eq!(out.write.as_ref().map(|w| w.kind), Some(WriteKind::Bind));
    assert_eq!(w.rejected.len(), 1);
    assert_eq!(
        w.memory,
        Memory::default(),
        "the memory from before the pass"
    );
    assert_eq!(w.status_writes, 0, "no status without the write");
    w.pass();
    assert_eq!(w.applied.len(), 1, "the next pass binds");
    assert_eq!(
        w.memory, moved,
        "and moves the memory on as the first one would have"
    );
}
