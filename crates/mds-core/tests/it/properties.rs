//! Protocol invariants over random event sequences: at most one target write per pass, terms
//! never decrease, nothing is written unless the scaler is Active and owns (or is acquiring)
//! the binding, and a restart from the last written status decides like an uninterrupted run.

use crate::common;

use common::*;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::target::WorkloadAdmission;
use mds_core::WriteKind;
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
enum Step {
    Wait(i64),
    Want(i32),
    Mode(bool),
    Suspend(bool),
    AdmitAll,
    Park(i32),
    Retire { ordinal: i32, aborted: bool },
    RetirementDone,
    ForeignBinding,
    ClearBinding,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1i64..=60).prop_map(Step::Wait),
        6 => (1i32..=12).prop_map(Step::Want),
        1 => any::<bool>().prop_map(Step::Mode),
        1 => any::<bool>().prop_map(Step::Suspend),
        3 => Just(Step::AdmitAll),
        1 => (0i32..12).prop_map(Step::Park),
        1 => ((0i32..12), any::<bool>()).prop_map(|(ordinal, aborted)| Step::Retire { ordinal, aborted }),
        2 => Just(Step::RetirementDone),
        1 => Just(Step::ForeignBinding),
        1 => Just(Step::ClearBinding),
    ]
}

fn binding_term(w: &World) -> Option<i64> {
    w.annotation(BINDING_ANNOTATION)
        .and_then(|b| BindingPayload::parse(&b).ok())
        .map(|b| b.term)
}

fn ours_before(w: &World) -> bool {
    w.annotation(BINDING_ANNOTATION)
        .and_then(|b| BindingPayload::parse(&b).ok())
        .is_some_and(|b| b.scaler_uid == SCALER_UID)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn protocol_invariants(steps in proptest::collection::vec(step(), 1..40)) {
        let mut w = World::new(spec("Active", &[("server", 1, 12)]), Some(target(&[("server", "Server", 2)])));
        w.observe("server", wants(2, 2));
        let mut active = true;
        let mut suspended = false;
        let mut highest_decision_term = 0;
        let mut highest_binding_term = 0;
        for step in steps {
            match step {
                Step::Wait(s) => w.now += s,
                Step::Want(n) => {
                    let ready = w.replicas()["server"] as u32;
                    w.observe("server", wants(n, ready));
                }
                Step::Mode(a) => {
                    active = a;
                    w.edit(|s| s["mode"] = json!(if a { "Active" } else { "Shadow" }));
                }
                Step::Suspend(on) => {
                    suspended = on;
                    w.edit(|s| s["suspend"] = json!(on));
                }
                Step::AdmitAll => {
                    for o in 0..12 {
                        w.admission.insert(("server".into(), o), WorkloadAdmission::Admitted);
                    }
                }
                Step::Park(o) => {
                    w.admission.insert(("server".into(), o), WorkloadAdmission::Parked);
                }
                Step::Retire { ordinal, aborted } => {
                    w.set_retirement(Some(json!({"roleName": "server", "replicaOrdinal": ordinal, "state": if aborted { "Aborted" } else { "Draining" }})));
                }
                Step::RetirementDone => w.set_retirement(None),
                Step::ForeignBinding => {
                    if w.annotation(BINDING_ANNOTATION).is_none() {
                        let term = binding_term(&w).unwrap_or(0).max(highest_decision_term) + 1;
                        w.set_annotation(BINDING_ANNOTATION, &format!(r#"{{"scalerName":"other","scalerUID":"other","term":{term}}}"#));
                    }
                }
                Step::ClearBinding => {
                    if !ours_before(&w) && w.target_doc().is_some() {
                        w.edit_target(|t| {
                            if let Some(a) = t["metadata"]["annotations"].as_object_mut() {
                                a.remove(BINDING_ANNOTATION);
                            }
                        });
                    }
                }
            }
            let owned = ours_before(&w);
            let bound_by_anyone = w.annotation(BINDING_ANNOTATION).is_some();
            let before = w.replicas();
            let outcome = w.pass();
            if let Some(write) = &outcome.write {
                match write.kind {
                    WriteKind::Bind => prop_assert!(active && !suspended && !bound_by_anyone, "bind only when Active and unbound"),
                    WriteKind::Release => prop_assert!(owned && (!active || suspended), "release only what we own"),
                    _ => prop_assert!(owned && active && !suspended, "{:?} without owning the binding in Active mode", write.kind),
                }
            } else {
                prop_assert_eq!(w.replicas(), before.clone(), "counts never move without a write");
            }
            if let Some(t) = binding_term(&w)
                && ours_before(&w)
            {
                prop_assert!(t >= highest_binding_term, "binding term went back: {} < {}", t, highest_binding_term);
                highest_binding_term = t;
            }
            if let Some(d) = w.annotation(DECISION_ANNOTATION).and_then(|d| DecisionPayload::parse(&d).ok()) {
                prop_assert!(d.term >= highest_decision_term, "decision term went back");
                highest_decision_term = d.term;
            }
            let n = w.replicas()["server"];
            prop_assert!((1..=12).contains(&n), "count {} outside the bounds", n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A controller restarted from the last written status makes the same next decision as
    /// one that kept running, at the controller's cadence of one pass per intervalSeconds
    /// (Proportional: no demand windows to lose; see docs/DESIGN.md for token windows).
    #[test]
    fn a_restart_decides_like_an_uninterrupted_run(wants_seq in proptest::collection::vec(1i32..=10, 1..30)) {
        let mut w = World::new(spec("Active", &[("server", 1, 12)]), Some(target(&[("server", "Server", 2)])));
        w.observe("server", wants(2, 2));
        w.pass();
        for (i, want) in wants_seq.iter().enumerate() {
            w.now += 15;
            let ready = w.replicas()["server"] as u32;
            w.observe("server", wants(*want, ready));
            for o in 0..12 {
                w.admission.insert(("server".into(), o), WorkloadAdmission::Admitted);
            }
            let restarted = w.decide_with(&mut mds_core::Memory::default());
            let running = w.pass();
            prop_assert_eq!(
                restarted.write.as_ref().map(|x| x.vector.clone()),
                running.write.as_ref().map(|x| x.vector.clone()),
                "pass {}", i
            );
        }
    }
}
