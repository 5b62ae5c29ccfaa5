//! The decision history in status and the summary `kubectl get mds` prints.

use crate::common::*;
use mds_api::status::{DECISION_HISTORY, DecisionKind};
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;

fn server_world(mode: &str, replicas: i32) -> World {
    let mut w = World::new(
        spec(mode, &[("server", 1, 16)]),
        Some(target(&[("server", "Server", replicas)])),
    );
    w.observe("server", wants(replicas, replicas as u32));
    w
}

fn bound_world() -> World {
    let mut w = server_world("Active", 2);
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind);
    w.now += 15;
    w
}

#[test]
fn a_commit_records_its_counts_reason_and_the_load_that_decided_it() {
    let mut w = bound_world();
    // Queue depth 40 over 2 ready at a target of 10 per replica: 4 replicas.
    w.observe("server", wants(4, 2));
    let o = w.pass();
    let write = o.write.unwrap();
    assert_eq!(write.kind, WriteKind::Commit);
    let [d] = w.status.decisions.as_slice() else {
        panic!("one decision: {:?}", w.status.decisions)
    };
    assert_eq!(d.kind, DecisionKind::Commit);
    assert_eq!(d.decision_id, write.decision_id);
    assert_eq!(d.reason, "Proportional");
    assert_eq!((d.before["server"], d.after["server"]), (2, 4));
    let role = &d.roles[0];
    assert_eq!(
        (
            role.name.as_str(),
            role.reason.as_str(),
            role.metric.as_deref()
        ),
        ("server", "Proportional", Some("QueueDepth"))
    );
    assert_eq!(
        role.demand.as_ref().map(|q| q.to_string()),
        Some("40".into())
    );
    assert_eq!(
        role.capacity.as_ref().map(|q| q.to_string()),
        Some("20".into())
    );
    // The event says the same reason.
    assert!(
        o.events
            .iter()
            .any(|e| e.reason == "Scaled" && e.message.contains("(reason Proportional)")),
        "{:?}",
        o.events
    );
    let summary = w.status.summary.clone().unwrap();
    assert_eq!(summary.desired.as_deref(), Some("4"));
    assert_eq!(summary.last_reason.as_deref(), Some("Proportional"));
}

#[test]
fn a_rollback_is_recorded_as_resource_exhausted() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass();
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Parked);
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    let d = w.status.decisions.last().unwrap();
    assert_eq!(d.kind, DecisionKind::Rollback);
    assert_eq!(d.reason, "ResourceExhausted");
    assert_eq!((d.before["server"], d.after["server"]), (4, 2));
    assert_eq!(
        w.status.summary.as_ref().unwrap().last_reason.as_deref(),
        Some("ResourceExhausted")
    );
}

#[test]
fn the_history_keeps_the_latest_decisions_only() {
    let mut w = bound_world();
    // One more replica each pass, every one admitted: every pass commits.
    for _ in 0..(DECISION_HISTORY + 4) {
        let current = w.replicas()["server"];
        admit_all(&mut w, current);
        w.observe("server", wants(current + 1, current as u32));
        w.now += 60;
        assert_eq!(w.pass().write.map(|w| w.kind), Some(WriteKind::Commit));
    }
    assert_eq!(w.status.decisions.len(), DECISION_HISTORY);
    assert_eq!(
        w.status.decisions[0].before["server"], 6,
        "the oldest four went"
    );
    let times: Vec<_> = w.status.decisions.iter().map(|d| d.time.0).collect();
    assert!(times.windows(2).all(|p| p[0] < p[1]), "oldest first");
    let last = w.status.decisions.last().unwrap();
    assert_eq!(last.after["server"], w.replicas()["server"]);
}

fn admit_all(w: &mut World, count: i32) {
    for o in 0..count {
        w.admission
            .insert(("server".into(), o), WorkloadAdmission::Admitted);
    }
}

#[test]
fn shadow_records_each_change_of_its_recommendation_once() {
    let mut w = server_world("Shadow", 2);
    w.observe("server", wants(5, 2));
    for _ in 0..3 {
        assert!(w.pass().write.is_none());
        w.now += 15;
    }
    let [d] = w.status.decisions.as_slice() else {
        panic!("one recommendation: {:?}", w.status.decisions)
    };
    assert_eq!(d.kind, DecisionKind::Recommendation);
    assert_eq!(d.decision_id, None);
    assert_eq!((d.before["server"], d.after["server"]), (2, 5));
    // The recommendation changes: a second record, from the first's counts.
    w.observe("server", wants(4, 2));
    w.pass();
    let d = w.status.decisions.last().unwrap();
    assert_eq!((d.before["server"], d.after["server"]), (5, 4));
    assert_eq!(w.status.decisions.len(), 2);
    assert_eq!(w.replicas()["server"], 2, "Shadow never writes counts");
    let summary = w.status.summary.clone().unwrap();
    assert_eq!(summary.desired.as_deref(), Some("2"), "the target's counts");
}

#[test]
fn several_roles_summarize_by_name() {
    let mut w = prefill_decode_world(prefill_decode_spec(), 2, 3);
    w.observe("prefill", wants(2, 2));
    w.observe("decode", wants(3, 3));
    w.pass();
    let summary = w.status.summary.clone().unwrap();
    assert_eq!(
        summary.desired.as_deref(),
        Some("prefill=2,decode=3"),
        "the spec's role order"
    );
    assert_eq!(summary.ready.as_deref(), Some("prefill=2,decode=3"));
}
