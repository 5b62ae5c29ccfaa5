//! A fresh controller resumes from the status it reads (D19, D22, D29): terms above those the
//! status records, records kept across a release, predictor state; and a commit whose status
//! write was lost keeps its records across a release.

use crate::common;

use common::*;
use mds_api::annotations::{BINDING_ANNOTATION, BindingPayload, DecisionPayload};
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use serde_json::{Value, json};

/// A server role at `replicas`, Active, with `status` as a fresh controller reads it (no
/// planner memory), the target's annotations gone.
fn resumed(replicas: i32, status: Value) -> World {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", replicas)])),
    );
    w.status = serde_json::from_value::<ModelDeploymentScalerStatus>(status).expect("status");
    w.observe("server", wants(replicas, replicas as u32));
    w
}

fn condition(kind: &str, status: &str, reason: &str, generation: i64) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": "",
           "observedGeneration": generation, "lastTransitionTime": t(-300).to_string()})
}

fn bound_term(w: &World) -> i64 {
    BindingPayload::parse(&w.annotation(BINDING_ANNOTATION).expect("bound"))
        .expect("binding")
        .term
}

/// Passes every 15 s for `seconds`; the first rollback's pass time and term.
fn first_rollback(w: &mut World, seconds: i64) -> Option<(i64, i64)> {
    let start = w.now;
    while w.now - start <= seconds {
        let o = w.pass();
        if let Some(x) = o.write.filter(|x| x.kind == WriteKind::Rollback) {
            return Some((w.now, x.term));
        }
        w.now += 15;
    }
    None
}

#[test]
fn a_fresh_controller_binds_above_the_term_its_status_records_for_the_target() {
    let mut w = resumed(
        2,
        json!({
            "binding": {"targetUID": "target-uid-1", "targetName": "llm", "term": 2},
            "conditions": [condition("Bound", "False", "Suspended", 1), condition("Active", "False", "Suspended", 1)]
        }),
    );
    let o = w.pass();
    assert_eq!(
        o.write.as_ref().map(|x| (x.kind, x.term)),
        Some((WriteKind::Bind, 3))
    );
    assert_eq!(bound_term(&w), 3);
    assert_eq!(w.status.binding.as_ref().unwrap().term, Some(3));
    // Decisions carry the new term.
    w.observe("server", wants(4, 2));
    w.now += 15;
    let o = w.pass();
    let commit = o.write.expect("a commit");
    assert_eq!((commit.kind, commit.term), (WriteKind::Commit, 3));
    let decision = DecisionPayload::parse(
        &w.annotation(mds_api::annotations::DECISION_ANNOTATION)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(decision.term, 3);
}

#[test]
fn a_status_for_a_replaced_target_does_not_raise_the_term_once_acknowledged() {
    let status = json!({
        "binding": {"targetUID": "old-target-uid", "targetName": "llm", "term": 2},
        "conditions": [condition("Bound", "False", "TargetReplaced", 1)]
    });
    let mut w = resumed(2, status);
    // Not acknowledged yet: the spec generation is the one the replacement was reported at.
    assert!(w.pass().write.is_none());
    assert_eq!(w.condition("Bound").1, "TargetReplaced");
    w.edit(|_| {});
    w.now += 15;
    let o = w.pass();
    assert_eq!(
        o.write.as_ref().map(|x| (x.kind, x.term)),
        Some((WriteKind::Bind, 1))
    );
}

/// A status written while a scale-up 2 -> 4 waited for admission.
fn pending_status(active: bool, with_commit: bool) -> Value {
    let started = t(-200).to_string();
    let id = format!("llm-t1-{}", t(-200).as_millisecond());
    let reason = if active { "Active" } else { "Suspended" };
    let mut status = json!({
        "binding": {"targetUID": "target-uid-1", "targetName": "llm", "term": 1},
        "pendingCohort": {"decisionID": id, "term": 1, "baselineVector": {"server": 2},
                          "targetVector": {"server": 4}, "startedAt": started},
        "conditions": [condition("Bound", if active { "True" } else { "False" }, if active { "Bound" } else { "Suspended" }, 1),
                       condition("Active", if active { "True" } else { "False" }, reason, 1)]
    });
    if with_commit {
        status["lastCommit"] = json!({"decisionID": id, "term": 1, "vector": {"server": 4},
            "baselineVector": {"server": 2}, "timestamp": started, "targetGeneration": 2});
    }
    status
}

/// The target at 4 (generation 2, as our commit left it), ordinals 2 and 3 never admitted.
fn at_cohort_vector(w: &mut World) {
    w.edit_target(|t| t["metadata"]["generation"] = json!(2));
    for o in 2..4 {
        w.admission
            .insert(("server".into(), o), WorkloadAdmission::Unadmitted);
    }
}

#[test]
fn a_kept_cohort_without_a_commit_record_resumes_when_the_target_shows_its_vector() {
    let mut w = resumed(4, pending_status(false, false));
    at_cohort_vector(&mut w);
    w.observe("server", wants(4, 2));
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Bind);
    assert!(w.status.pending_cohort.is_some(), "{:?}", o.events);
    // Past its timeout already: the pass after the bind rolls back under the new term.
    w.now += 15;
    assert_eq!(first_rollback(&mut w, 0), Some((15, 2)));
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn a_cohort_kept_in_an_active_status_resumes_when_the_target_shows_our_vector() {
    let mut w = resumed(4, pending_status(true, true));
    at_cohort_vector(&mut w);
    w.observe("server", wants(4, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind);
    w.now += 15;
    assert_eq!(first_rollback(&mut w, 0), Some((15, 2)));
    assert_eq!(w.replicas()["server"], 2);
}

#[test]
fn a_cohort_kept_in_an_active_status_is_dropped_after_an_external_change() {
    // The status was written while we were bound and committing; since then the binding went
    // and the user set 3 (generation 3, not ours).
    let mut w = resumed(3, pending_status(true, true));
    w.edit_target(|t| t["metadata"]["generation"] = json!(3));
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Unadmitted);
    let o = w.pass();
    assert_eq!(o.write.unwrap().kind, WriteKind::Bind);
    assert!(
        o.events.iter().any(|e| e.reason == "RecordsDropped"),
        "{:?}",
        o.events
    );
    assert!(w.status.pending_cohort.is_none());
    w.admission
        .insert(("server".into(), 2), WorkloadAdmission::Admitted);
    w.now += 15;
    assert_eq!(
        first_rollback(&mut w, 300),
        None,
        "no rollback of the old cohort"
    );
    assert_eq!(w.replicas()["server"], 3);
}

fn predictive_status(covariance: bool) -> Value {
    let history: Vec<Value> = (0..10)
        .map(|i| json!({"timestamp": t(-150 + 15 * i).to_string(), "tokensPerSecond": "200"}))
        .collect();
    let mut predictor = json!({"name": "server", "level": "200", "trend": "0",
                               "sampleCount": 10, "history": history});
    if covariance {
        predictor["covariance"] = json!({"p00": "1", "p01": "0", "p10": "0", "p11": "1"});
    }
    json!({
        "binding": {"targetUID": "target-uid-1", "targetName": "llm", "term": 1},
        "roles": [{"name": "server", "currentReplicas": 2}],
        "predictors": [predictor]
    })
}

fn predictive_world(status: Value) -> World {
    let mut w = resumed(2, status);
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
    w
}

#[test]
fn a_predictor_restored_with_enough_samples_does_not_warm_up_again() {
    for covariance in [true, false] {
        let mut w = predictive_world(predictive_status(covariance));
        for _ in 0..3 {
            let plan = w.pass().plan.expect("planned");
            assert_ne!(
                plan.roles[0].algorithm_reason,
                mds_planner::Reason::PredictorWarmingUp,
                "covariance in status: {covariance}: {}",
                plan.roles[0].note
            );
            w.now += 15;
        }
        assert!(
            w.status.predictors[0].sample_count > 10,
            "the filter went on"
        );
    }
}

#[test]
fn a_predictor_restored_below_min_points_still_warms_up() {
    let mut status = predictive_status(true);
    status["predictors"][0]["sampleCount"] = json!(3);
    let mut w = predictive_world(status);
    let plan = w.pass().plan.expect("planned");
    assert_eq!(
        plan.roles[0].algorithm_reason,
        mds_planner::Reason::PredictorWarmingUp
    );
    assert!(
        plan.roles[0].note.contains("4 of 6"),
        "{}",
        plan.roles[0].note
    );
}

/// Bound at 2, then a commit 2 -> 4 whose status write is lost; ordinals 2 and 3 are never
/// admitted.
fn lost_commit_world() -> World {
    let mut w = World::new(
        spec("Active", &[("server", 1, 16)]),
        Some(target(&[("server", "Server", 2)])),
    );
    w.observe("server", wants(2, 2));
    w.pass(); // binds
    w.now += 15;
    let before = w.status.clone();
    w.observe("server", wants(4, 2));
    assert_eq!(w.pass().write.unwrap().kind, WriteKind::Commit);
    w.status = before;
    for o in 2..4 {
        w.admission
            .insert(("server".into(), o), WorkloadAdmission::Unadmitted);
    }
    w
}

#[test]
fn a_commit_whose_status_write_was_lost_keeps_its_cohort_across_a_release() {
    for field in ["mode", "suspend"] {
        let mut w = lost_commit_world();
        let (off, on) = if field == "mode" {
            (json!("Shadow"), json!("Active"))
        } else {
            (json!(true), json!(false))
        };
        w.edit(|s| s[field] = off);
        w.now += 15;
        let o = w.pass();
        assert_eq!(o.write.unwrap().kind, WriteKind::Release, "{field}");
        let cohort = w.status.pending_cohort.clone();
        assert!(
            cohort.is_some(),
            "{field}: the release recovers the cohort: {:?}",
            o.events
        );
        assert!(w.status.last_commit.is_some(), "{field}");
        w.edit(|s| s[field] = on);
        w.now += 15;
        assert_eq!(w.pass().write.unwrap().kind, WriteKind::Bind, "{field}");
        assert_eq!(w.status.pending_cohort, cohort, "{field}: resumed");
        // Committed at 15 s with a 120 s timeout: rolled back at the first pass after 135 s.
        w.now += 15;
        let rollback = first_rollback(&mut w, 120);
        assert_eq!(rollback.map(|(at, _)| at), Some(150), "{field}");
        assert_eq!(w.replicas()["server"], 2, "{field}");
    }
}
