//! `Outcome::wake_at` (issue 16, item 2): the earliest moment after `now` at which the core
//! could decide otherwise without new input. For each source the outcome names the expected
//! moment; and a pass just before it, on the same input, decides as a pass right after `now`.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use mds_api::status::ReplicaVector;
use mds_core::{Outcome, WriteKind};
use serde_json::json;

/// Seconds of `common::t` at the outcome's `wake_at`.
fn wake(o: &Outcome) -> Option<i64> {
    o.wake_at.map(|at| at.duration_since(t(0)).as_secs())
}

type Decision = (
    Option<(WriteKind, Option<ReplicaVector>)>,
    Option<Vec<(i32, String)>>,
    Vec<&'static str>,
);

/// What a pass at `at` decides on the world as it stands, its sampling taken at `sampled`
/// (no new input); nothing is applied.
fn decision_at(w: &mut World, at: i64, sampled: i64) -> Decision {
    let (now, observed) = (w.now, w.observed_at);
    w.now = at;
    w.observed_at = Some(sampled);
    let o = w.decide_with(&mut w.memory.clone());
    w.now = now;
    w.observed_at = observed;
    (
        o.write.map(|x| (x.kind, x.vector)),
        o.plan.map(|p| {
            p.roles
                .iter()
                .map(|r| (r.constrained, r.reason.as_str().to_string()))
                .collect()
        }),
        o.events.iter().map(|e| e.reason).collect(),
    )
}

/// Nothing changes before `wake_at`: a pass one second before it decides as one a second
/// after the pass that returned it. Without `wake_at`, nothing changes for an hour either.
fn still_until_wake(w: &mut World, o: &Outcome) {
    let p = w.now;
    let wake = wake(o).unwrap_or(p + 3600);
    assert!(wake > p, "wake_at {wake} is after now {p}");
    if wake - 1 > p + 1 {
        assert_eq!(
            decision_at(w, p + 1, p),
            decision_at(w, wake - 1, p),
            "the decision moved before wake_at {wake} (pass at {p})"
        );
    }
}

/// Passes and checks the property on each outcome.
fn pass(w: &mut World) -> Outcome {
    let o = w.pass();
    still_until_wake(w, &o);
    o
}

fn declared(w: &World) -> BTreeSet<(String, i32)> {
    w.replicas()
        .iter()
        .flat_map(|(role, n)| (0..*n).map(move |o| (role.clone(), o)))
        .collect()
}

/// One server role at 2, bound at 0; at 15 it grows to 3, never admitted.
fn grown() -> World {
    let mut w = World::new(
        spec("Active", &[("server", 1, 8)]),
        Some(target(&[("server", "Server", 2)])),
    );
    w.observe("server", wants(2, 2));
    pass(&mut w); // bind
    w.now = 15;
    w.observe("server", wants(3, 2));
    assert_eq!(pass(&mut w).write.unwrap().kind, WriteKind::Commit);
    w
}

#[test]
fn a_new_recommendation_wakes_when_it_spans_the_scale_down_window() {
    let mut w = grown();
    w.now = 16;
    // Recorded at 15; the window is 15 s.
    assert_eq!(wake(&pass(&mut w)), Some(30));
}

#[test]
fn growth_in_flight_then_the_pending_cohort_then_the_regrowth_backoff() {
    let mut w = grown();
    w.now = 30;
    // D13: the growth is in flight until pendingTimeoutSeconds after its commit.
    assert_eq!(wake(&pass(&mut w)), Some(15 + 120));
    w.now = 135;
    // The cohort is exhausted once more than 120 whole seconds have passed since it started.
    let o = pass(&mut w);
    assert!(o.write.is_none(), "{:?}", o.write);
    assert_eq!(wake(&o), Some(15 + 121));
    w.now = 136;
    let o = pass(&mut w);
    assert_eq!(o.write.as_ref().map(|x| x.kind), Some(WriteKind::Rollback));
    // D29: regrowth waits pendingTimeoutSeconds after the rollback; once the window edges
    // of the rollback's pass are behind, the backoff's end is the next edge.
    w.now = 151;
    pass(&mut w);
    w.now = 166;
    let o = pass(&mut w);
    let until = w.memory.growth_backoff.as_ref().map(|b| b.until).unwrap();
    assert_eq!(until, t(136 + 120));
    assert_eq!(o.wake_at, Some(until));
    w.now = 256;
    assert_eq!(
        pass(&mut w).write.map(|x| x.kind),
        Some(WriteKind::Commit),
        "regrows"
    );
}

#[test]
fn a_ready_growth_wakes_one_interval_after_it_was_first_seen_ready() {
    let mut w = grown();
    w.admission.insert(
        ("server".into(), 2),
        mds_api::target::WorkloadAdmission::Admitted,
    );
    w.now = 45;
    // D32: readings that include the added replica for one interval.
    assert_eq!(wake(&pass(&mut w)), Some(45 + 15));
}

/// server at 4 shrinks to 3 at 30 (history from 15, window 15).
fn shrunk(workloads: bool) -> World {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 4)])),
    );
    w.observe("server", wants(4, 4));
    pass(&mut w);
    w.observe("server", wants(2, 4));
    w.now += 15;
    pass(&mut w);
    w.now += 15;
    assert_eq!(pass(&mut w).write.unwrap().kind, WriteKind::Commit);
    w.observe("server", wants(2, 3));
    if workloads {
        w.workloads = Some(declared(&w));
    }
    w
}

#[test]
fn a_removed_instance_without_record_wakes_at_its_bound() {
    let mut w = shrunk(false);
    w.pods.insert(("server".into(), 3));
    w.now = 45;
    let o = pass(&mut w);
    assert!(o.write.is_none());
    assert_eq!(wake(&o), Some(45 + 120));
    w.now = 165;
    assert_eq!(pass(&mut w).write.map(|x| x.kind), Some(WriteKind::Commit));
}

#[test]
fn an_abort_cooldown_wakes_at_its_end() {
    let mut w = shrunk(true);
    w.now = 45;
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    let o = pass(&mut w);
    assert_eq!(o.write.as_ref().map(|x| x.kind), Some(WriteKind::Restore));
    let until = w
        .status
        .last_scale_down
        .as_ref()
        .and_then(|l| l.cooldown_until.as_ref())
        .map(|t| t.0)
        .expect("a cooldown");
    w.now = 60;
    w.observe("server", wants(2, 4));
    let o = pass(&mut w);
    assert_eq!(o.wake_at, Some(until), "cooldownAfterAbortSeconds is 60");
}

/// prefill (4) and decode (2) on one instance type; decode's growth timed out and was rolled
/// back, then prefill released one replica for decode (Opposing); its Pods never leave.
#[test]
fn a_rebalance_transaction_wakes_at_its_give_up_bound() {
    let mut s = spec("Active", &[("prefill", 1, 8), ("decode", 1, 8)]);
    s["rebalance"] = json!({"policy": "Opposing"});
    let mut w = World::new(
        s,
        Some(target(&[
            ("prefill", "Prefill", 4),
            ("decode", "Decode", 2),
        ])),
    );
    w.observe("prefill", wants(4, 4));
    w.observe("decode", wants(2, 2));
    pass(&mut w);
    w.now += 15;
    w.observe("decode", wants(3, 2));
    assert_eq!(pass(&mut w).write.unwrap().kind, WriteKind::Commit);
    w.now += 135;
    assert_eq!(pass(&mut w).write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    w.observe("prefill", wants(3, 4));
    assert_eq!(pass(&mut w).write.unwrap().kind, WriteKind::Commit);
    let released = w.now;
    w.observe("prefill", wants(3, 3));
    w.pods.insert(("prefill".into(), 3));
    let give_up = released + 300 + 120; // the retirement budget + pendingTimeoutSeconds
    let mut last = None;
    while w.now + 15 < give_up {
        w.now += 15;
        last = wake(&pass(&mut w));
    }
    assert_eq!(last, Some(give_up));
    w.now = give_up;
    let o = pass(&mut w);
    assert!(o.events.iter().any(|e| e.reason == "RebalanceBlocked"));
}

#[test]
fn nothing_on_the_clock_means_no_wake() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 8)]),
        Some(target(&[("server", "Server", 2)])),
    );
    w.observe("server", wants(2, 2));
    pass(&mut w);
    for _ in 0..4 {
        w.now += 15;
        pass(&mut w);
    }
    w.now += 15;
    assert_eq!(
        wake(&pass(&mut w)),
        None,
        "a steady scaler waits for its interval"
    );
}
