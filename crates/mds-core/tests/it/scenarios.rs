//! Scenarios that step a scripted world through the binding fence, commits, rollbacks,
//! aborted retirements and status writes.

use crate::common;

use common::*;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::status::ScaleDownOutcome;
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use mds_worker::memory_cluster::ready;
use mds_worker::{Cluster, WriteError};
use serde_json::json;

fn server_world(mode: &str, replicas: i32) -> World {
    let mut w = World::new(
        spec(mode, &[("server", 1, 16)]),
        Some(target(&[("server", "Server", replicas)])),
    );
    w.observe("server", wants(replicas, replicas as u32));
    w
}

fn admit(w: &mut World, role: &str, ordinals: std::ops::Range<i32>) {
    for o in ordinals {
        w.admission
            .insert((role.to_string(), o), WorkloadAdmission::Admitted);
    }
}

#[test]
fn shadow_reports_without_owning_or_writing() {
    let mut w = server_world("Shadow", 2);
    w.observe("server", wants(5, 2));
    for _ in 0..5 {
        let o = w.pass();
        assert!(o.write.is_none());
        w.now += 15;
    }
    assert_eq!(w.condition("Bound"), ("True".into(), "Bound".into()));
    assert_eq!(w.condition("Active"), ("False".into(), "ShadowMode".into()));
    assert_eq!(w.annotation(BINDING_ANNOTATION), None);
    let role = &w.status.roles[0];
    assert_eq!(
        (role.raw_recommended_replicas, role.constrained_replicas),
        (Some(5), Some(5))
    );
    assert_eq!(w.replicas()["server"], 2, "Shadow never writes counts");
}

#[test]
fn active_binds_with_term_one_then_commits_under_it() {
    let mut w = server_world("Active", 2);
    w.observe("server", wants(5, 2));
    let first = w.pass();
    assert_eq!(first.write.as_ref().unwrap().kind, WriteKind::Bind);
    let binding = BindingPayload::parse(&w.annotation(BINDING_ANNOTATION).unwrap()).unwrap();
    assert_eq!((binding.scaler_uid.as_str(), binding.term), (SCALER_UID, 1));
    assert_eq!(w.replicas()["server"], 2, "binding writes no counts");
    w.now += 15;
    let second = w.pass();
    let write = second.write.unwrap();
    assert_eq!(write.kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 5);
    let decision = DecisionPayload::parse(&w.annotation(DECISION_ANNOTATION).unwrap()).unwrap();
    assert_eq!(decision.term, 1);
    assert_eq!(decision.vector["server"], 5);
    let last = w.status.last_commit.as_ref().unwrap();
    assert_eq!(last.decision_id, decision.decision_id);
    assert_eq!(last.baseline_vector["server"], 2);
    assert_eq!(
        last.target_generation,
        Some(2),
        "the write bumps the target generation once"
    );
    assert_eq!(w.deployment().unwrap().metadata.generation, Some(2));
    assert_eq!(w.condition("Active"), ("True".into(), "Active".into()));
}

#[test]
fn a_new_binding_takes_one_more_than_the_highest_term_seen() {
    let mut w = server_world("Active", 2);
    w.set_annotation(
        DECISION_ANNOTATION,
        r#"{"decisionID":"old","term":4,"vector":{"server":2}}"#,
    );
    w.pass();
    let binding = BindingPayload::parse(&w.annotation(BINDING_ANNOTATION).unwrap()).unwrap();
    assert_eq!(binding.term, 5);
}

#[test]
fn another_scalers_binding_is_left_alone() {
    let mut w = server_world("Active", 2);
    let other = r#"{"scalerName":"other","scalerUID":"other-uid","term":3}"#;
    w.set_annotation(BINDING_ANNOTATION, other);
    w.observe("server", wants(6, 2));
    for _ in 0..3 {
        assert!(w.pass().write.is_none());
        w.now += 15;
    }
    assert_eq!(
        w.condition("Bound"),
        ("False".into(), "AlreadyBound".into())
    );
    assert_eq!(
        w.condition("Active"),
        ("False".into(), "AlreadyBound".into())
    );
    assert_eq!(w.annotation(BINDING_ANNOTATION).as_deref(), Some(other));
    assert_eq!(
        w.status.roles[0].raw_recommended_replicas,
        Some(6),
        "it still reports like Shadow"
    );
}

#[test]
fn an_unparsable_binding_plans_nothing() {
    let mut w = server_world("Active", 2);
    w.set_annotation(BINDING_ANNOTATION, "not json");
    let o = w.pass();
    assert!(o.write.is_none());
    assert!(o.plan.is_none());
    assert_eq!(
        w.condition("Bound"),
        ("False".into(), "InvalidBinding".into())
    );
    assert_eq!(
        w.condition("Active"),
        ("False".into(), "InvalidBinding".into())
    );
}

fn bound_world() -> World {
    let mut w = server_world("Active", 2);
    w.observe("server", wants(2, 2));
    w.pass();
    w.now += 15;
    w
}

#[test]
fn suspend_and_shadow_release_an_owned_binding_and_keep_counts() {
    for change in ["suspend", "shadow"] {
        let mut w = bound_world();
        w.set_annotation(
            DECISION_ANNOTATION,
            r#"{"decisionID":"d","term":1,"vector":{"server":2}}"#,
        );
        w.edit(|s| {
            if change == "suspend" {
                s["suspend"] = json!(true);
            } else {
                s["mode"] = json!("Shadow");
            }
        });
        let o = w.pass();
        assert_eq!(o.write.unwrap().kind, WriteKind::Release, "{change}");
        assert_eq!(w.annotation(BINDING_ANNOTATION), None, "{change}");
        assert_eq!(w.annotation(DECISION_ANNOTATION), None, "{change}");
        assert_eq!(w.replicas()["server"], 2);
        let next = w.pass();
        assert!(next.write.is_none(), "{change}: nothing more to release");
    }
    let mut w = bound_world();
    w.edit(|s| s["suspend"] = json!(true));
    w.pass();
    assert_eq!(w.condition("Bound"), ("False".into(), "Suspended".into()));
}

#[test]
fn deletion_releases_the_binding() {
    let mut w = bound_world();
    w.deleting = true;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Release);
    assert_eq!(w.annotation(BINDING_ANNOTATION), None);
}

#[test]
fn a_missing_target_is_reported_until_it_appears() {
    let mut w = World::new(spec("Active", &[("server", 1, 16)]), None);
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Bound"),
        ("False".into(), "TargetNotFound".into())
    );
    w.put_target(target(&[("server", "Server", 2)]));
    w.observe("server", wants(2, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind);
}

#[test]
fn a_replaced_target_waits_for_a_spec_edit_then_binds_anew() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass(); // commits 4 on the old target
    w.now += 15;
    let mut replacement = target(&[("server", "Server", 3)]);
    replacement["metadata"]["uid"] = json!("target-uid-2");
    w.put_target(replacement);
    for _ in 0..3 {
        assert!(w.pass().write.is_none());
        w.now += 15;
    }
    assert_eq!(
        w.condition("Bound"),
        ("False".into(), "TargetReplaced".into())
    );
    assert!(
        w.status.last_commit.is_some(),
        "old target state kept until acknowledged"
    );
    w.edit(|s| s["sampling"]["intervalSeconds"] = json!(20));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Bind);
    assert_eq!(
        w.status.binding.as_ref().unwrap().target_uid.as_deref(),
        Some("target-uid-2")
    );
    assert!(
        w.status.last_commit.is_none(),
        "target-specific state cleared"
    );
}

#[test]
fn growth_waits_for_admission_and_a_timeout_restores_the_baseline() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 4);
    let cohort = w.status.pending_cohort.clone().expect("cohort recorded");
    assert_eq!(cohort.baseline_vector["server"], 2);
    // Ordinal 2 admitted, ordinal 3 not: no further growth while waiting.
    admit(&mut w, "server", 2..3);
    w.observe("server", wants(8, 4));
    w.now += 15;
    let o = w.pass();
    assert!(
        o.write.is_none(),
        "growth waits while an ordinal is unadmitted"
    );
    assert_eq!(w.status.roles[0].reason.as_deref(), Some("PacingBounded"));
    // Past pendingTimeoutSeconds (120 s) the whole cohort's baseline comes back in one write.
    w.now += 120;
    let o = w.pass();
    let write = o.write.unwrap();
    assert_eq!(write.kind, WriteKind::Rollback);
    assert_eq!(w.replicas()["server"], 2);
    assert!(w.status.pending_cohort.is_none());
    assert_eq!(
        w.condition("MetricsReady"),
        ("False".into(), "ResourceExhausted".into())
    );
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "ResourceExhausted".into())
    );
    assert!(
        o.events
            .iter()
            .any(|e| e.reason == "ResourceExhausted" && e.warning)
    );
}

#[test]
fn an_admitted_cohort_clears_and_growth_resumes() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass();
    admit(&mut w, "server", 2..4);
    w.observe("server", wants(6, 4));
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 6);
    assert_eq!(
        w.status.pending_cohort.as_ref().unwrap().baseline_vector["server"],
        4
    );
}

#[test]
fn a_parked_workload_rolls_back_at_once() {
    let mut w = bound_world();
    w.observe("server", wants(3, 2));
    w.pass();
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Parked);
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    assert_eq!(w.replicas()["server"], 2);
}

fn shrunk_world() -> World {
    let mut w = server_world("Active", 4);
    w.pass(); // bind
    w.observe("server", wants(2, 4));
    w.now += 15;
    w.pass(); // history starts
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.unwrap().kind,
        WriteKind::Commit,
        "one replica per pass"
    );
    assert_eq!(w.replicas()["server"], 3);
    w
}

#[test]
fn a_scale_down_is_recorded_and_an_aborted_retirement_restored_with_cooldown() {
    let mut w = shrunk_world();
    let last = w.status.last_scale_down.clone().unwrap();
    assert_eq!(
        (last.role.as_str(), last.ordinal, last.outcome),
        ("server", 3, ScaleDownOutcome::Committed)
    );
    assert_eq!(last.pre_scale_down_vector["server"], 4);
    // The retirement runs: no further scale-down anywhere.
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Draining"}),
    ));
    w.now += 15;
    assert!(w.pass().write.is_none());
    // It aborts: the pre-scale-down vector comes back in one write.
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Restore);
    assert_eq!(w.replicas()["server"], 4);
    let last = w.status.last_scale_down.clone().unwrap();
    assert_eq!(last.outcome, ScaleDownOutcome::Aborted);
    assert!(last.cooldown_until.is_some());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "ScaleDownAborted".into())
    );
    assert!(o.events.iter().any(|e| e.reason == "ScaleDownAborted"));
    // The operator adopts the ordinal and clears the retirement; the cooldown (60 s) still
    // prevents scale-down.
    w.set_retirement(None);
    w.now += 30;
    assert!(w.pass().write.is_none(), "cooldown holds");
    w.now += 45;
    let o = w.pass();
    assert_eq!(
        o.write.unwrap().kind,
        WriteKind::Commit,
        "after the cooldown the scale-down resumes"
    );
}

#[test]
fn a_steady_scaler_writes_no_status() {
    let mut w = bound_world();
    w.observe("server", wants(2, 2));
    w.run(60, 15);
    let before = w.status_writes;
    w.run(300, 15);
    assert_eq!(w.status_writes, before, "nothing moved, nothing written");
}

#[test]
fn a_failed_write_is_replanned_not_half_applied() {
    let mut w = bound_world();
    w.observe("server", wants(5, 2));
    // Someone changes the count between the read and the write: the test op fails.
    let outcome = w.decide_with(&mut w.memory.clone());
    w.edit_target(|t| t["spec"]["roles"][0]["replicas"] = json!(3));
    let ops = outcome.write.unwrap().ops;
    let written = ready(w.cluster.patch_target("default", "llm", &ops));
    assert!(
        matches!(written, Err(WriteError::Conflict(_))),
        "the stale test fails the whole patch: {written:?}"
    );
    assert_eq!(
        w.target_doc().unwrap()["spec"]["roles"][0]["replicas"],
        3,
        "nothing half-applied"
    );
    // The next pass plans from the new count.
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 5);
}

#[test]
fn a_restart_from_the_last_written_status_decides_the_same() {
    let mut w = bound_world();
    let mut twin_states = vec![];
    for step in 0..12 {
        w.observe(
            "server",
            wants(
                [3, 3, 5, 5, 5, 2, 2, 2, 2, 4, 4, 1][step],
                w.replicas()["server"] as u32,
            ),
        );
        admit(&mut w, "server", 0..16);
        // A controller that restarts now restores memory from the written status.
        let fresh = w.decide_with(&mut mds_core::Memory::default());
        let o = w.pass();
        twin_states.push((
            fresh.write.as_ref().map(|w| w.vector.clone()),
            o.write.as_ref().map(|w| w.vector.clone()),
        ));
        w.now += 15;
    }
    for (i, (fresh, running)) in twin_states.iter().enumerate() {
        assert_eq!(fresh, running, "pass {i}");
    }
}

#[test]
fn after_a_rollback_growth_waits_for_the_episode_to_end() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass(); // grows to 4, ordinals 2 and 3 pending
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    let role = &w.status.roles[0];
    assert_eq!(
        (role.constrained_replicas, role.reason.as_deref()),
        (Some(2), Some("ResourceExhausted"))
    );
    // Still wanting 4: growth waits out pendingTimeoutSeconds (120 s)...
    w.now += 60;
    assert!(w.pass().write.is_none(), "no immediate retry");
    // ...unless a spec edit starts a new episode.
    w.edit(|s| s["sampling"]["intervalSeconds"] = json!(20));
    w.now += 20;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 4);
}

/// prefill and decode on one instance type; decode's growth times out.
fn rebalance_world(policy: serde_json::Value, prefill: i32, decode: i32) -> World {
    let mut s = prefill_decode_spec();
    s["rebalance"] = policy;
    let mut w = prefill_decode_world(s, prefill, decode);
    w.observe("prefill", wants(prefill, prefill as u32));
    w.observe("decode", wants(decode, decode as u32));
    w.pass(); // bind
    w.now += 15;
    w.observe("decode", wants(decode + 1, decode as u32));
    assert_eq!(
        w.pass().write.unwrap().kind,
        WriteKind::Commit,
        "decode grows"
    );
    w.now += 135;
    assert_eq!(
        w.pass().write.unwrap().kind,
        WriteKind::Rollback,
        "its ordinal was never admitted"
    );
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "ResourceExhausted".into())
    );
    w.now += 15;
    w
}

#[test]
fn opposing_rebalance_moves_one_replica_in_two_steps() {
    let mut w = rebalance_world(json!({"policy": "Opposing"}), 4, 2);
    // Prefill's own recommendation is to shrink (by one): it donates.
    w.observe("prefill", wants(3, 4));
    w.observe("decode", wants(3, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert!(
        o.events.iter().all(|e| !e.action.is_empty()),
        "events.k8s.io needs an action: {:?}",
        o.events
    );
    assert_eq!(
        w.replicas(),
        [("decode".to_string(), 2), ("prefill".to_string(), 3)].into()
    );
    let rb = w.status.rebalance.clone().unwrap();
    assert_eq!(rb.reason.as_ref().map(|r| r.as_str()), Some("DonorRelease"));
    assert_eq!(
        (
            rb.donor_role.as_deref(),
            rb.donor_target_replicas,
            rb.receiver_target_replicas
        ),
        (Some("prefill"), Some(3), Some(3))
    );
    assert!(rb.donation_attempted);
    assert_eq!(
        rb.started_at.map(|t| t.0),
        Some(t(w.now)),
        "startedAt is the transaction's start"
    );
    assert_eq!(w.status.last_scale_down.as_ref().unwrap().role, "prefill");
    // The donor's retirement runs, then its Pods linger: the receiver waits.
    w.set_retirement(Some(
        json!({"roleName": "prefill", "replicaOrdinal": 3, "state": "Draining"}),
    ));
    w.pods.insert(("prefill".into(), 3));
    w.now += 15;
    assert!(w.pass().write.is_none());
    w.set_retirement(None);
    w.now += 15;
    assert!(
        w.pass().write.is_none(),
        "Pods of the removed ordinal remain"
    );
    w.pods.clear();
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert_eq!(
        w.replicas()["decode"],
        3,
        "the receiver acquires one replica"
    );
    assert_eq!(
        w.status
            .rebalance
            .as_ref()
            .unwrap()
            .reason
            .as_ref()
            .map(|r| r.as_str()),
        Some("ReceiverAcquire")
    );
    assert!(w.status.pending_cohort.is_some());
    assert!(o.events.iter().any(|e| e.reason == "ReceiverAcquire"));
}

#[test]
fn no_donor_in_another_pool_is_not_applicable() {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Opposing"});
    let mut t = target(&[("prefill", "Prefill", 4), ("decode", "Decode", 2)]);
    t["spec"]["roles"][0]["instanceType"] = json!("l40s");
    let mut w = World::new(s, Some(t));
    w.observe("prefill", wants(4, 4));
    w.observe("decode", wants(2, 2));
    w.pass();
    w.now += 15;
    w.observe("decode", wants(3, 2));
    w.pass();
    w.now += 135;
    w.pass(); // rollback
    w.now += 15;
    w.observe("prefill", wants(2, 4));
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceNotApplicable".into())
    );
}

#[test]
fn priority_lets_a_holding_role_donate_once_per_episode() {
    let mut w = rebalance_world(
        json!({"policy": "Priority", "priority": ["decode", "prefill"]}),
        4,
        2,
    );
    w.observe("prefill", wants(4, 4)); // holds
    w.observe("decode", wants(3, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["prefill"], 3);
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit, "acquire");
    assert_eq!(w.replicas()["decode"], 3);
    // The acquired ordinal times out too: a second donation in the same episode is blocked.
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    let rb = w.status.rebalance.clone().unwrap();
    assert_eq!(
        rb.reason.as_ref().map(|r| r.as_str()),
        Some("ResourceExhausted")
    );
    assert!(rb.donation_attempted, "the episode remembers its donation");
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceBlocked".into())
    );
}

#[test]
fn an_intermediate_vector_that_breaks_a_ratio_blocks_the_donation() {
    let mut s = prefill_decode_spec();
    s["rebalance"] = json!({"policy": "Priority", "priority": ["decode", "prefill"]});
    s["ratios"] = json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "1"}]);
    let mut w = prefill_decode_world(s, 2, 2);
    w.observe("prefill", wants(2, 2));
    w.observe("decode", wants(2, 2));
    w.pass();
    w.now += 15;
    w.observe("prefill", wants(3, 2));
    w.observe("decode", wants(3, 2));
    w.pass(); // both grow to 3
    w.admission.insert(
        ("prefill".into(), 2),
        mds_api::target::WorkloadAdmission::Admitted,
    );
    w.now += 135;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    w.now += 15;
    // decode needs 3; prefill donating (2 -> 1) would leave prefill/decode = 1/2 < 1.
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceBlocked".into())
    );
}

#[test]
fn an_aborted_donor_retirement_restores_and_cancels_the_transaction() {
    let mut w = rebalance_world(json!({"policy": "Opposing"}), 4, 2);
    w.observe("prefill", wants(2, 4));
    w.observe("decode", wants(3, 2));
    w.pass(); // donor releases
    w.set_retirement(Some(
        json!({"roleName": "prefill", "replicaOrdinal": 3, "state": "Aborted"}),
    ));
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Restore);
    assert_eq!(w.replicas()["prefill"], 4);
    let rb = w.status.rebalance.clone().unwrap();
    assert_eq!(rb.donor_role, None, "the transaction is cancelled");
    assert_eq!(
        rb.reason.as_ref().map(|r| r.as_str()),
        Some("DonationAttempted"),
        "the episode goes on, its donation spent"
    );
    assert!(rb.donation_attempted, "and remembers its donation");
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "ScaleDownAborted".into())
    );
}

#[test]
fn a_spec_edit_starts_a_new_episode() {
    let mut w = rebalance_world(
        json!({"policy": "Priority", "priority": ["decode", "prefill"]}),
        4,
        2,
    );
    w.observe("decode", wants(3, 2));
    w.pass(); // donor releases
    w.now += 15;
    w.pass(); // receiver acquires
    w.now += 135;
    w.pass(); // rolled back again, donation already attempted
    w.now += 15;
    w.pass();
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceBlocked".into())
    );
    w.edit(|s| s["sampling"]["intervalSeconds"] = json!(20));
    w.now += 20;
    let o = w.pass();
    assert!(w.status.rebalance.is_none(), "the edit ended the episode");
    assert_eq!(
        o.write.unwrap().kind,
        WriteKind::Commit,
        "growth is retried"
    );
}

#[test]
fn disabled_rebalancing_attempts_no_donation() {
    let mut w = rebalance_world(json!({"policy": "Disabled"}), 4, 2);
    w.observe("prefill", wants(2, 4));
    w.observe("decode", wants(3, 2));
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceNotApplicable".into())
    );
}

// Regressions found in review.

#[test]
fn an_old_scale_down_record_never_matches_a_later_abort() {
    let mut w = shrunk_world(); // 4 -> 3, record pre 4
    w.now += 15;
    w.pass();
    // The role grows back past its old count; then an outside kill of ordinal 1 is Aborted.
    admit(&mut w, "server", 0..16);
    w.observe("server", wants(10, 3));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    let grown = w.replicas()["server"];
    assert!(grown > 4, "{grown}");
    w.set_retirement(Some(
        json!({"roleName": "server", "replicaOrdinal": 1, "state": "Aborted"}),
    ));
    w.observe("server", wants(grown, grown as u32));
    w.now += 15;
    let o = w.pass();
    assert!(
        o.write
            .as_ref()
            .is_none_or(|x| x.kind != WriteKind::Restore),
        "{:?}",
        o.write
    );
    assert_eq!(w.replicas()["server"], grown);
}

#[test]
fn a_restore_writes_back_only_the_shrunk_role() {
    let mut w = World::new(
        spec("Active", &[("a", 1, 8), ("b", 1, 8)]),
        Some(target(&[("a", "Server", 3), ("b", "Server", 3)])),
    );
    w.observe("a", wants(3, 3));
    w.observe("b", wants(3, 3));
    w.pass();
    w.observe("b", wants(2, 3));
    w.now += 15;
    w.pass();
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["b"], 2);
    // a grows while b's retirement runs; then b's retirement aborts.
    w.observe("a", wants(4, 3));
    w.observe("b", wants(2, 2));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["a"], 4);
    w.set_retirement(Some(
        json!({"roleName": "b", "replicaOrdinal": 2, "state": "Aborted"}),
    ));
    // An aborted retirement keeps the instance's members.
    w.pods.insert(("b".into(), 2));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Restore);
    assert_eq!(
        w.replicas(),
        [("a".to_string(), 4), ("b".to_string(), 3)].into(),
        "a keeps its growth"
    );
    // a's cohort then times out: only a goes back, b keeps its restored count.
    w.set_retirement(None);
    w.now += 150;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    assert_eq!(
        w.replicas(),
        [("a".to_string(), 3), ("b".to_string(), 3)].into()
    );
}

#[test]
fn a_release_keeps_decisions_in_flight_until_the_target_changes() {
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass(); // 2 -> 4, cohort pending
    w.edit(|s| s["mode"] = json!("Shadow"));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Release);
    assert!(w.status.pending_cohort.is_some(), "D29: kept in status");
    // The user sets 3 while unbound, then goes back to Active an hour later.
    w.edit_target(|t| t["spec"]["roles"][0]["replicas"] = json!(3));
    w.observe("server", wants(3, 3));
    w.edit(|s| s["mode"] = json!("Active"));
    w.now += 3600;
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Bind);
    assert!(
        w.status.pending_cohort.is_none(),
        "dropped after the change"
    );
    assert!(o.events.iter().any(|e| e.reason == "RecordsDropped"));
    w.now += 15;
    let o = w.pass();
    assert!(
        o.write.is_none(),
        "no rollback of the old cohort: {:?}",
        o.write
    );
    assert_eq!(w.replicas()["server"], 3);
}

#[test]
fn a_pending_cohort_kept_across_a_suspension_still_times_out() {
    // D29 (c): suspend during a pending scale-up, resume with the target unchanged.
    let mut w = bound_world();
    w.observe("server", wants(4, 2));
    w.pass(); // 2 -> 4, ordinals 2 and 3 never admitted
    let started = w.status.pending_cohort.clone().unwrap();
    w.edit(|s| s["suspend"] = json!(true));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Release);
    w.edit(|s| s["suspend"] = json!(false));
    w.now += 30;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind);
    assert_eq!(w.status.pending_cohort.as_ref(), Some(&started));
    // The timer is the cohort's own: 120 s after its commit, the baseline comes back.
    let outcomes = w.run(120, 15);
    let rollback = outcomes
        .iter()
        .find_map(|o| o.write.as_ref().filter(|x| x.kind == WriteKind::Rollback));
    assert!(rollback.is_some(), "the cohort still times out");
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn any_unadmitted_ordinal_in_the_target_blocks_growth() {
    let mut w = bound_world();
    w.admission
        .insert(("server".into(), 1), WorkloadAdmission::Unadmitted);
    w.observe("server", wants(6, 2));
    let o = w.pass();
    assert!(o.write.is_none(), "D18 without a cohort of ours");
    assert_eq!(w.status.roles[0].reason.as_deref(), Some("PacingBounded"));
}

#[test]
fn a_donation_waits_for_scale_down_guards() {
    let mut w = rebalance_world(
        json!({"policy": "Priority", "priority": ["decode", "prefill"]}),
        4,
        2,
    );
    w.observe("decode", wants(3, 2));
    w.set_retirement(Some(
        json!({"roleName": "decode", "replicaOrdinal": 5, "state": "Draining"}),
    ));
    assert!(
        w.pass().write.is_none(),
        "a retirement is active: no donor release"
    );
    assert_eq!(w.replicas()["prefill"], 4);
    w.set_retirement(None);
    w.now += 15;
    assert_eq!(
        w.pass().write.unwrap().kind,
        WriteKind::Commit,
        "then the donor releases"
    );
    assert_eq!(w.replicas()["prefill"], 3);
}

#[test]
fn a_refused_donation_is_retried_when_a_donor_appears() {
    let mut w = rebalance_world(json!({"policy": "Opposing"}), 4, 2);
    w.observe("prefill", wants(4, 4)); // holds: no opposing donor yet
    w.observe("decode", wants(3, 2));
    assert!(w.pass().write.is_none());
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "RebalanceNotApplicable".into())
    );
    w.observe("prefill", wants(2, 4)); // now it wants to shrink
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["prefill"], 3);
}

#[test]
fn the_episode_ends_when_the_receiver_no_longer_needs_to_grow() {
    let mut w = rebalance_world(json!({"policy": "Disabled"}), 4, 2);
    w.observe("decode", wants(2, 2));
    w.pass();
    assert!(w.status.rebalance.is_none());
    assert_eq!(w.condition("Blocked"), ("False".into(), "Ready".into()));
    assert_eq!(
        w.condition("MetricsReady"),
        ("True".into(), "Observed".into())
    );
}

#[test]
fn writes_test_the_binding_text_exactly_as_stored() {
    let mut w = server_world("Active", 2);
    // Our own binding, written with another key order.
    w.set_annotation(
        BINDING_ANNOTATION,
        &format!(r#"{{"term":1,"scalerUID":"{SCALER_UID}","scalerName":"llm"}}"#),
    );
    w.observe("server", wants(4, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Commit);
    assert!(w.rejected.is_empty(), "the test op matched the stored text");
    assert_eq!(w.replicas()["server"], 4);
}

// Regressions found in the second review.

#[test]
fn one_donation_per_episode_even_when_our_regrowth_times_out() {
    let mut w = rebalance_world(
        json!({"policy": "Priority", "priority": ["decode", "prefill"]}),
        4,
        2,
    );
    w.observe("decode", wants(3, 2));
    w.pass(); // donor releases: prefill 3
    w.now += 15;
    w.pass(); // receiver acquires: decode 3, never admitted
    let mut donations = 0;
    for _ in 0..80 {
        w.now += 15;
        let before = w.replicas()["prefill"];
        w.pass();
        if w.replicas()["prefill"] < before {
            donations += 1;
        }
    }
    assert_eq!(
        donations,
        0,
        "prefill donated again in the same episode: {:?}",
        w.replicas()
    );
    assert_eq!(w.replicas()["prefill"], 3);
}

#[test]
fn a_lost_status_write_is_rebuilt_from_the_decision_annotation() {
    let mut w = bound_world();
    let before = w.status.clone();
    w.observe("server", wants(4, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    // The target write landed; the status write after it was lost.
    w.status = before;
    w.now += 15;
    let o = w.pass();
    assert!(
        o.events.iter().any(|e| e.reason == "Recovered"),
        "{:?}",
        o.events
    );
    assert!(
        w.status.pending_cohort.is_some(),
        "the cohort is tracked again"
    );
    // Its ordinals never get admitted: the timeout still rolls back.
    w.now += 120;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Rollback);
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn the_receiver_waits_for_admission_everywhere() {
    let mut w = rebalance_world(
        json!({"policy": "Priority", "priority": ["decode", "prefill"]}),
        4,
        2,
    );
    w.observe("decode", wants(3, 2));
    w.pass(); // donor releases
    w.admission
        .insert(("prefill".into(), 0), WorkloadAdmission::Unadmitted);
    w.now += 15;
    assert!(w.pass().write.is_none(), "D18 holds the acquire");
    w.admission
        .insert(("prefill".into(), 0), WorkloadAdmission::Admitted);
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["decode"], 3);
}

#[test]
fn no_second_shrink_before_the_target_has_seen_the_first() {
    let mut w = shrunk_world(); // 4 -> 3 committed
    // The operator has not caught up: status still says 4 desired.
    w.edit_target(|t| t["status"]["roles"] = json!([{"name": "server", "desired": 4, "ready": 4}]));
    w.observe("server", wants(1, 3));
    for _ in 0..4 {
        w.now += 15;
        assert!(
            w.pass().write.is_none(),
            "waits for the first shrink to be seen"
        );
    }
    w.edit_target(|t| t["status"]["roles"] = json!([{"name": "server", "desired": 3, "ready": 3}]));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn terms_never_move_backwards_across_a_release() {
    let mut w = server_world("Active", 2);
    w.set_annotation(
        DECISION_ANNOTATION,
        r#"{"decisionID":"old","term":4,"vector":{"server":2}}"#,
    );
    w.pass();
    assert_eq!(
        BindingPayload::parse(&w.annotation(BINDING_ANNOTATION).unwrap())
            .unwrap()
            .term,
        5
    );
    w.edit(|s| s["mode"] = json!("Shadow"));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Release);
    w.edit(|s| s["mode"] = json!("Active"));
    w.now += 15;
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind);
    assert_eq!(
        BindingPayload::parse(&w.annotation(BINDING_ANNOTATION).unwrap())
            .unwrap()
            .term,
        6
    );
}

#[test]
fn resuming_after_a_suspension_restores_history_and_predictors() {
    // D29: a Predictive scaler with samples does not warm up again after suspend and resume.
    let mut w = server_world("Active", 2);
    w.edit(|s| {
        s["algorithm"] = json!({"predictive": {
            "tokenThroughput": {"serverTargetTokensPerSecond": "100"},
            "serverTokenCapacityPerReplica": "100",
            "minPoints": 6
        }})
    });
    let mut busy = wants(2, 2);
    busy.prompt_tokens_per_second = Some(150.0);
    busy.generation_tokens_per_second = Some(50.0);
    w.observe("server", busy);
    for pass in w.run(150, 15) {
        assert!(
            pass.write
                .as_ref()
                .is_none_or(|x| x.kind == WriteKind::Bind)
        );
    }
    let count = |w: &World| w.status.predictors.first().map_or(0, |p| p.sample_count);
    assert!(count(&w) >= 6, "warmed up before the suspension");
    assert_ne!(
        w.status.roles[0].reason.as_deref(),
        Some("PredictorWarmingUp")
    );
    w.edit(|s| s["suspend"] = json!(true));
    w.now += 15;
    w.pass();
    w.now += 600;
    w.pass();
    w.edit(|s| s["suspend"] = json!(false));
    w.now += 15;
    w.pass(); // rebinds
    w.now += 15;
    let o = w.pass();
    let plan = o.plan.expect("planned");
    assert_ne!(
        plan.roles[0].algorithm_reason,
        mds_planner::Reason::PredictorWarmingUp,
        "{}",
        plan.roles[0].note
    );
    assert!(count(&w) > 6, "the filter went on from its stored state");
}

#[test]
fn a_target_without_a_router_holds_scale_down() {
    let mut t = target(&[("server", "Server", 4)]);
    t["spec"].as_object_mut().unwrap().remove("router");
    let mut w = World::new(spec("Active", &[("server", 1, 16)]), Some(t));
    w.observe("server", wants(1, 4));
    let outcomes = w.run(120, 15);
    assert!(
        outcomes
            .iter()
            .all(|o| o.write.as_ref().is_none_or(|x| x.kind == WriteKind::Bind))
    );
    assert_eq!(w.replicas()["server"], 4);
    assert_eq!(
        w.condition("Blocked"),
        ("True".into(), "PacingBounded".into())
    );
}

#[test]
fn a_target_that_does_not_decode_blocks_naming_the_field_and_writes_nothing() {
    let mut w = bound_world();
    let status_before = w.status.clone();
    w.observe("server", wants(6, 2));
    w.target_problem =
        Some("spec.roles[0].replicas: invalid type: string \"two\", expected i32".into());
    let o = w.pass();
    assert!(
        o.write.is_none(),
        "nothing is written to a target we cannot read"
    );
    assert!(o.plan.is_none(), "nothing is planned");
    let blocked = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Blocked")
        .unwrap();
    assert_eq!(
        (blocked.status.as_str(), blocked.reason.as_str()),
        ("True", "TargetUnreadable")
    );
    assert!(
        blocked.message.contains("spec.roles[0].replicas"),
        "{}",
        blocked.message
    );
    assert_eq!(
        w.status.binding, status_before.binding,
        "the binding is kept: the target is there"
    );
    let warned = |o: &mds_core::Outcome| {
        o.events
            .iter()
            .filter(|e| e.reason == "TargetUnreadable" && e.warning)
            .count()
    };
    assert_eq!(warned(&o), 1);
    // Once, not every pass.
    w.now += 15;
    assert_eq!(warned(&w.pass()), 0);
    // The next version that decodes releases it, and planning goes on.
    w.target_problem = None;
    w.now += 15;
    let o = w.pass();
    assert_eq!(o.write.map(|w| w.kind), Some(WriteKind::Commit));
    assert_eq!(w.condition("Blocked").1, "Ready");
}
