//! Every hold names its release (issue 15, item 5): the rebalance transaction waits for its
//! donor's own retirement and Workload, ends on an aborted or undone donor release and on a
//! spec edit, and gives up with `RebalanceBlocked` at its bound; our own scale-down follows
//! the retirement record and the removed instances' Workloads, and what is left without a
//! record holds it for a bounded time only, naming what it waits for.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use serde_json::json;

/// Every declared instance of the target has its Workload.
fn declared(w: &World) -> BTreeSet<(String, i32)> {
    w.replicas()
        .iter()
        .flat_map(|(role, n)| (0..*n).map(move |o| (role.clone(), o)))
        .collect()
}

/// prefill (4) and decode (2) on one instance type; decode's growth timed out and was rolled
/// back, then prefill, which wants to shrink, released one replica for decode (Opposing).
/// The release is at `w.now`; pendingTimeoutSeconds is 120.
fn released_world(workloads: bool) -> World {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Opposing"});
    let mut w = prefill_decode_world(s, 4, 2);
    w.observe("prefill", wants(4, 4));
    w.observe("decode", wants(2, 2));
    w.pass(); // bind
    w.now += 15;
    w.observe("decode", wants(3, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit, "grows");
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    if workloads {
        w.workloads = Some(declared(&w));
    }
    w.observe("prefill", wants(3, 4));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["prefill"], 3, "the donor released one replica");
    assert_eq!(reason(&w), Some("DonorRelease".into()));
    // Once released, prefill holds at 3: only the transaction moves counts.
    w.observe("prefill", wants(3, 3));
    w
}

fn reason(w: &World) -> Option<String> {
    w.status
        .rebalance
        .as_ref()
        .and_then(|r| r.reason.as_ref())
        .map(|r| r.as_str().to_string())
}

fn blocked_message(w: &World) -> String {
    w.status
        .conditions
        .iter()
        .find(|c| c.type_ == "Blocked")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn retirement(role: &str, ordinal: i32, state: &str) -> serde_json::Value {
    json!({"roleName": role, "replicaOrdinal": ordinal, "state": state})
}

#[test]
fn an_aborted_record_of_another_role_does_not_hold_the_receiver() {
    let mut w = released_world(true);
    w.set_retirement(Some(retirement("prefill", 3, "Draining")));
    w.now += 15;
    assert!(w.pass().write.is_none(), "the donor is retiring");
    // The donor retired; then a decode instance was killed from outside, which GPUStack
    // reports as an Aborted retirement that persists.
    w.workloads = Some(declared(&w));
    w.set_retirement(Some(retirement("decode", 1, "Aborted")));
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.map(|x| x.kind),
        Some(WriteKind::Commit),
        "the receiver acquires: the donor is gone"
    );
    assert_eq!(w.replicas()["decode"], 3);
    assert_eq!(reason(&w), Some("ReceiverAcquire".into()));
}

#[test]
fn a_donor_pod_stuck_terminating_does_not_hold_the_receiver_once_its_workload_is_gone() {
    let mut w = released_world(true);
    w.pods = declared(&w);
    w.pods.insert(("prefill".into(), 3));
    w.set_retirement(Some(retirement("prefill", 3, "Deleting")));
    w.workloads = Some(declared(&w)); // deleted with its members after Draining
    w.now += 15;
    assert!(w.pass().write.is_none(), "the retirement has not finished");
    // The record is gone; a Pod on a lost node stays Terminating.
    w.set_retirement(None);
    w.now += 15;
    assert_eq!(w.pass().write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(
        w.replicas()["decode"],
        3,
        "the receiver acquired its replica"
    );
}

#[test]
fn a_donor_that_does_not_go_gives_up_with_rebalance_blocked() {
    // Without the Workload API the donor's Pods are what is watched; one never leaves.
    let mut w = released_world(false);
    let released = w.now;
    w.pods.insert(("prefill".into(), 3));
    let give_up = released + 300 + 120; // GPUStack's retirement budget + pendingTimeoutSeconds
    while w.now + 15 < give_up {
        w.now += 15;
        let o = w.pass();
        assert!(o.write.is_none(), "at {}: {:?}", w.now - released, o.write);
        assert_eq!(reason(&w), Some("DonorRelease".into()));
    }
    assert!(
        blocked_message(&w).contains("prefill/3"),
        "the wait names the donor: {}",
        blocked_message(&w)
    );
    w.now = give_up;
    let o = w.pass();
    assert!(
        o.events.iter().any(|e| e.reason == "RebalanceBlocked"),
        "{:?}",
        o.events
    );
    assert_eq!(reason(&w), Some("RebalanceBlocked".into()));
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceBlocked".into())
    );
    assert!(
        blocked_message(&w).contains("prefill"),
        "{}",
        blocked_message(&w)
    );
    // Nothing holds any more: the receiver's pool grows as its plan says (an ordinary scale-up
    // with its own admission timeout), and the donor gives nothing more in this exhaustion.
    assert_eq!(o.write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(w.replicas()["decode"], 3);
    w.observe("prefill", wants(2, 3));
    for _ in 0..6 {
        w.now += 15;
        let o = w.pass();
        assert!(
            o.events.iter().all(|e| e.reason != "DonorRelease"),
            "no second donation in this exhaustion: {:?}",
            o.events
        );
        assert_ne!(reason(&w), Some("DonorRelease".into()));
    }
}

#[test]
fn a_donor_retirement_stuck_past_its_deadline_gives_up() {
    let mut w = released_world(true);
    let released = w.now;
    let mut stuck = retirement("prefill", 3, "Deleting");
    let deadline = t(released + 400);
    stuck["deadline"] = json!(deadline.to_string());
    w.set_retirement(Some(stuck));
    // The retirement's own deadline (later than 300 s after the release) moves the bound.
    let give_up = released + 400 + 120;
    while w.now + 15 < give_up {
        w.now += 15;
        assert!(w.pass().write.is_none());
        assert_eq!(reason(&w), Some("DonorRelease".into()), "at {}", w.now);
    }
    w.now = give_up;
    w.pass();
    assert_eq!(reason(&w), Some("RebalanceBlocked".into()));
}

#[test]
fn a_spec_edit_ends_a_transaction_in_flight() {
    let mut w = released_world(true);
    w.set_retirement(Some(retirement("prefill", 3, "Draining")));
    w.now += 15;
    assert!(w.pass().write.is_none());
    w.edit(|s| s["sampling"]["intervalSeconds"] = json!(20));
    w.now += 20;
    let o = w.pass();
    assert!(w.status.rebalance.is_none(), "the edit ended the episode");
    assert!(
        o.events.iter().any(|e| e.reason == "RebalanceCancelled"),
        "{:?}",
        o.events
    );
    // The pool's growth is no longer the transaction's: decode grows as planned.
    assert_eq!(o.write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(w.replicas()["decode"], 3);
}

#[test]
fn a_donor_declared_again_ends_the_transaction() {
    let mut w = released_world(true);
    // A user (or GitOps) puts prefill back at 4: its held replica is adopted, stays.
    w.edit_target(|t| {
        t["spec"]["roles"][0]["replicas"] = json!(4);
        let g = t["metadata"]["generation"].as_i64().unwrap();
        t["metadata"]["generation"] = json!(g + 1);
    });
    w.workloads = Some(declared(&w));
    w.pods = declared(&w);
    w.now += 15;
    let o = w.pass();
    assert_ne!(reason(&w), Some("DonorRelease".into()), "{:?}", o.events);
    assert!(
        o.events.iter().any(|e| e.reason == "RebalanceCancelled"),
        "{:?}",
        o.events
    );
    assert_eq!(w.replicas()["prefill"], 4);
}

/// server 4 -> 3 committed at `w.now`; the observation asks for 2.
fn shrunk_world(workloads: bool) -> World {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 4)])),
    );
    w.observe("server", wants(4, 4));
    w.pass(); // bind
    w.observe("server", wants(2, 4));
    w.now += 15;
    w.pass(); // history starts
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 3);
    w.observe("server", wants(2, 3));
    if workloads {
        w.workloads = Some(declared(&w));
    }
    w
}

#[test]
fn a_pod_stuck_terminating_after_its_retirement_does_not_hold_scale_down() {
    let mut w = shrunk_world(true);
    w.set_retirement(Some(retirement("server", 3, "Draining")));
    w.pods.insert(("server".into(), 3));
    w.now += 15;
    assert!(w.pass().write.is_none(), "the retirement holds scale-down");
    assert!(
        blocked_message(&w).contains("server/3"),
        "{}",
        blocked_message(&w)
    );
    // Completed: the record is gone, the Workload with it; a Pod stays Terminating.
    w.set_retirement(None);
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.map(|x| x.kind), Some(WriteKind::Commit));
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn pods_left_without_a_record_hold_scale_down_for_a_bounded_time() {
    // Without the Workload API, a removed ordinal's Pods are what is watched.
    let mut w = shrunk_world(false);
    w.pods.insert(("server".into(), 3));
    let first = w.now + 15;
    while w.now + 15 < first + 120 {
        w.now += 15;
        assert!(w.pass().write.is_none(), "at {}", w.now);
        assert_eq!(
            w.condition("Blocked"),
            ("True".into(), "PacingBounded".into())
        );
        let message = blocked_message(&w);
        assert!(
            message.contains("server/3") && message.contains("Pods"),
            "{message}"
        );
    }
    w.now = first + 120;
    assert_eq!(
        w.pass().write.map(|x| x.kind),
        Some(WriteKind::Commit),
        "released by the bound"
    );
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn a_removed_instance_whose_workload_remains_holds_scale_down_until_the_bound() {
    // GPUStack has not started the removed ordinal's retirement: its Workload is there and
    // no record is.
    let mut w = shrunk_world(true);
    w.workloads.as_mut().unwrap().insert(("server".into(), 3));
    w.pods = w.workloads.clone().unwrap();
    let first = w.now + 15;
    w.now = first;
    assert!(w.pass().write.is_none());
    let message = blocked_message(&w);
    assert!(
        message.contains("server/3") && message.contains("Workload"),
        "{message}"
    );
    // Its retirement starts: the record holds (the spec's guard) and the timer stops.
    w.set_retirement(Some(retirement("server", 3, "Admitted")));
    w.now += 150;
    assert!(w.pass().write.is_none(), "a running retirement holds");
    // It is gone again with the Workload still there: a new bounded wait starts.
    w.set_retirement(None);
    w.now += 15;
    let again = w.now;
    assert!(w.pass().write.is_none());
    w.now = again + 120;
    assert_eq!(w.pass().write.map(|x| x.kind), Some(WriteKind::Commit));
}

/// D18: a replica of the target that Kueue has not admitted holds growth of every role; the
/// hold names that replica and what admits it, so a user knows it is not ours to release.
#[test]
fn growth_held_by_an_unadmitted_replica_names_it() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 8)]),
        Some(target(&[("server", "Server", 3)])),
    );
    for o in 0..2 {
        w.admission
            .insert(("server".into(), o), WorkloadAdmission::Admitted);
    }
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Unadmitted);
    w.observe("server", wants(3, 2));
    w.pass(); // bind
    w.observe("server", wants(5, 2));
    w.now += 15;
    assert!(w.pass().write.is_none(), "no growth while server/2 waits");
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "PacingBounded".into())
    );
    let message = blocked_message(&w);
    assert!(
        message.contains("growth waits for the admission of server/2")
            && message.contains("quota has room"),
        "{message}"
    );
    // Admitted: the hold is gone and growth goes ahead.
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Admitted);
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
}
