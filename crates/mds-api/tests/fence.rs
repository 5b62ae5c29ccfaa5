//! The binding fence (spec *Binding fence*, D24), rule by rule.

mod fence_common;

use fence_common::*;
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{
    Allowance, BoundScaler, FenceRequest, Operation, Rule, Verdict, decide, scaler_to_look_up,
};
use serde_json::{Value, json};

#[test]
fn users_keep_every_field_but_counts_and_annotations_of_a_bound_target() {
    let old = bound();
    let new = with(old.clone(), "/spec/engine/name", json!("SGLang"));
    let new = with(new, "/metadata/labels", json!({"team": "a"}));
    assert_eq!(
        update(&old, &new, USER, BoundScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Untouched)
    );
    // Unchanged counts written explicitly are no change either (defaulted replicas are 1).
    let old = target(&[(BINDING_ANNOTATION, BINDING)], 1, 2);
    let mut no_count = old.clone();
    no_count["spec"]["roles"][0]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    assert!(update(&old, &no_count, USER, BoundScaler::NotLookedUp).is_allowed());
}

#[test]
fn users_cannot_change_a_bound_targets_counts() {
    let verdict = update(
        &bound(),
        &target(
            &[
                (BINDING_ANNOTATION, BINDING),
                (DECISION_ANNOTATION, DECISION),
            ],
            2,
            4,
        ),
        USER,
        BoundScaler::NotLookedUp,
    );
    let (rule, message) = denied(verdict);
    assert_eq!(rule, Rule::BoundCounts);
    for part in [
        "binding fence (replica counts of a bound target)",
        "ModelDeployment \"llm-serving\" is bound to ModelDeploymentScaler \"llm\" (term 3)",
        "decode 2 -> 4",
        "suspend the scaler",
        "kubectl patch mds llm -n default --type merge",
        "or delete it",
        "GitOps",
    ] {
        assert!(message.contains(part), "missing {part:?} in {message}");
    }
}

#[test]
fn users_cannot_change_either_annotation_of_a_bound_target() {
    let other_decision = decision("alice-1", 3, 2, 2);
    let cases: [(&str, Value); 4] = [
        (
            "decision rewritten",
            annotations(
                bound(),
                &[
                    (BINDING_ANNOTATION, BINDING),
                    (DECISION_ANNOTATION, &other_decision),
                ],
            ),
        ),
        (
            "decision removed",
            annotations(bound(), &[(BINDING_ANNOTATION, BINDING)]),
        ),
        (
            "binding rewritten",
            annotations(
                bound(),
                &[
                    (
                        BINDING_ANNOTATION,
                        r#"{"scalerName":"mine","scalerUID":"x","term":9}"#,
                    ),
                    (DECISION_ANNOTATION, DECISION),
                ],
            ),
        ),
        (
            "binding made unreadable",
            annotations(
                bound(),
                &[(BINDING_ANNOTATION, "{}"), (DECISION_ANNOTATION, DECISION)],
            ),
        ),
    ];
    for (case, new) in cases {
        let verdict = update(&bound(), &new, USER, BoundScaler::NotLookedUp);
        let (rule, message) = denied(verdict);
        assert_eq!(rule, Rule::BoundAnnotations, "{case}");
        assert!(
            message.contains("suspend the scaler") && message.contains("delete it"),
            "{case}: {message}"
        );
    }
}

#[test]
fn orphan_recovery_needs_the_scaler_gone_or_replaced_and_counts_unchanged() {
    let only_decision = annotations(bound(), &[(DECISION_ANNOTATION, DECISION)]);
    let neither = annotations(bound(), &[]);
    for new in [&only_decision, &neither] {
        assert_eq!(
            update(&bound(), new, USER, BoundScaler::Absent),
            Verdict::Allowed(Allowance::OrphanRecovery)
        );
        assert_eq!(
            update(
                &bound(),
                new,
                USER,
                BoundScaler::Present {
                    uid: "uid-2".into()
                }
            ),
            Verdict::Allowed(Allowance::OrphanRecovery),
            "a scaler of the same name with another UID does not own the binding"
        );
    }

    let verdict = update(
        &bound(),
        &neither,
        USER,
        BoundScaler::Present {
            uid: "uid-1".into(),
        },
    );
    let (rule, message) = denied(verdict);
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(message.contains("still exists with UID uid-1"), "{message}");
    assert!(
        message.contains("Suspend the scaler") && message.contains("delete it"),
        "{message}"
    );

    let moved = target(&[], 2, 3);
    let (rule, message) = denied(update(&bound(), &moved, USER, BoundScaler::Absent));
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(
        message.contains(
            "must leave the replica counts unchanged (this request changes decode 2 -> 3)"
        ),
        "{message}"
    );

    let rewritten = annotations(bound(), &[(DECISION_ANNOTATION, r#"{"x":1}"#)]);
    let (rule, _) = denied(update(&bound(), &rewritten, USER, BoundScaler::Absent));
    assert_eq!(rule, Rule::OrphanRecovery);

    let (rule, message) = denied(update(
        &bound(),
        &neither,
        USER,
        BoundScaler::Failed("timed out".into()),
    ));
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(
        message.contains("(timed out)") && message.contains("Retry"),
        "{message}"
    );

    let (rule, _) = denied(update(&bound(), &neither, USER, BoundScaler::NotLookedUp));
    assert_eq!(
        rule,
        Rule::OrphanRecovery,
        "without a lookup nothing shows the binding is orphaned"
    );
}

#[test]
fn the_scaler_is_looked_up_only_for_a_users_binding_removal() {
    let request = |old: &ModelDeployment, new: &ModelDeployment, user: &'static str| {
        scaler_to_look_up(&FenceRequest {
            operation: Operation::Update,
            old: Some(old),
            new: Some(new),
            username: user,
            operator_user: Some(OPERATOR),
            bound_scaler: BoundScaler::NotLookedUp,
        })
    };
    let (b, neither) = (md(&bound()), md(&annotations(bound(), &[])));
    assert_eq!(request(&b, &neither, USER), Some("llm".to_string()));
    assert_eq!(
        request(&b, &neither, OPERATOR),
        None,
        "the operator's release"
    );
    assert_eq!(request(&b, &b, USER), None);
    let unreadable = md(&annotations(unbound(), &[(BINDING_ANNOTATION, "nope")]));
    assert_eq!(request(&unreadable, &md(&unbound()), USER), None);
}

#[test]
fn unbound_targets_take_counts_but_no_hand_made_annotations() {
    let moved = target(&[], 5, 1);
    assert_eq!(
        update(&unbound(), &moved, USER, BoundScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Unbound)
    );
    for (key, value) in [
        (BINDING_ANNOTATION, BINDING),
        (DECISION_ANNOTATION, DECISION),
    ] {
        let new = annotations(unbound(), &[(key, value)]);
        let (rule, message) = denied(update(&unbound(), &new, USER, BoundScaler::NotLookedUp));
        assert_eq!(rule, Rule::UnboundAnnotations);
        assert!(
            message.contains(&format!("this request sets {key}")),
            "{message}"
        );
        assert!(
            message.contains("remove the annotation from the request"),
            "{message}"
        );
    }
    // A stale decision left on an unbound target may be removed, not rewritten.
    let stale = annotations(unbound(), &[(DECISION_ANNOTATION, DECISION)]);
    assert!(update(&stale, &unbound(), USER, BoundScaler::NotLookedUp).is_allowed());
    let rewritten = annotations(unbound(), &[(DECISION_ANNOTATION, "x")]);
    assert_eq!(
        denied(update(&stale, &rewritten, USER, BoundScaler::NotLookedUp)).0,
        Rule::UnboundAnnotations
    );
}

#[test]
fn an_unreadable_binding_leaves_the_target_unclaimed() {
    let old = annotations(unbound(), &[(BINDING_ANNOTATION, "not json")]);
    let moved = with(old.clone(), "/spec/roles/1/replicas", json!(7));
    assert_eq!(
        update(&old, &moved, USER, BoundScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Unbound)
    );
    assert!(
        update(&old, &unbound(), USER, BoundScaler::NotLookedUp).is_allowed(),
        "removal"
    );
    let fixed = annotations(unbound(), &[(BINDING_ANNOTATION, BINDING)]);
    let (rule, message) = denied(update(&old, &fixed, USER, BoundScaler::NotLookedUp));
    assert_eq!(rule, Rule::UnboundAnnotations);
    assert!(message.contains("cannot be read"), "{message}");
}

#[test]
fn creates_may_not_carry_ownership_annotations_even_from_the_operator() {
    let create = |value: &Value, user: &str| {
        let object = md(value);
        decide(&FenceRequest {
            operation: Operation::Create,
            old: None,
            new: Some(&object),
            username: user,
            operator_user: Some(OPERATOR),
            bound_scaler: BoundScaler::NotLookedUp,
        })
    };
    assert!(create(&unbound(), USER).is_allowed());
    assert_eq!(denied(create(&bound(), USER)).0, Rule::UnboundAnnotations);
    assert_eq!(
        denied(create(&bound(), OPERATOR)).0,
        Rule::UnboundAnnotations
    );
}

#[test]
fn deletes_and_objects_being_deleted_pass() {
    let old = md(&bound());
    let verdict = decide(&FenceRequest {
        operation: Operation::Delete,
        old: Some(&old),
        new: None,
        username: USER,
        operator_user: None,
        bound_scaler: BoundScaler::NotLookedUp,
    });
    assert_eq!(verdict, Verdict::Allowed(Allowance::Deleting));
    let going = with(
        bound(),
        "/metadata/deletionTimestamp",
        json!("2026-01-01T00:00:00Z"),
    );
    let edited = with(going.clone(), "/spec/roles/0/replicas", json!(9));
    let edited = annotations(edited, &[]);
    assert_eq!(
        update(&going, &edited, USER, BoundScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Deleting)
    );
}

#[test]
fn the_operator_binds_an_unbound_target_with_a_rising_term() {
    let bind = |old: &Value, text: &str| {
        let mut pairs: Vec<(&str, &str)> = vec![(BINDING_ANNOTATION, text)];
        if let Some(d) = old["metadata"]["annotations"][DECISION_ANNOTATION].as_str() {
            pairs.push((DECISION_ANNOTATION, d));
        }
        update(
            old,
            &annotations(old.clone(), &pairs),
            OPERATOR,
            BoundScaler::NotLookedUp,
        )
    };
    assert_eq!(
        bind(&unbound(), BINDING),
        Verdict::Allowed(Allowance::OperatorBind)
    );
    // A stale decision of term 3 is on the target: the new term must be above it (D19).
    let stale = annotations(unbound(), &[(DECISION_ANNOTATION, DECISION)]);
    let (rule, message) = denied(bind(&stale, BINDING));
    assert_eq!(rule, Rule::OperatorContent);
    assert!(
        message.contains("term 3 must be above the term 3"),
        "{message}"
    );
    assert!(
        bind(
            &stale,
            r#"{"scalerName":"llm","scalerUID":"uid-1","term":4}"#
        )
        .is_allowed()
    );
    assert_eq!(denied(bind(&unbound(), "garbage")).0, Rule::OperatorContent);
    // A bind that also moves counts or writes a decision is not a bind.
    let moved = target(&[(BINDING_ANNOTATION, BINDING)], 3, 2);
    assert_eq!(
        denied(update(
            &unbound(),
            &moved,
            OPERATOR,
            BoundScaler::NotLookedUp
        ))
        .0,
        Rule::OperatorContent
    );
    let with_decision = annotations(
        unbound(),
        &[
            (BINDING_ANNOTATION, BINDING),
            (DECISION_ANNOTATION, DECISION),
        ],
    );
    assert_eq!(
        denied(update(
            &unbound(),
            &with_decision,
            OPERATOR,
            BoundScaler::NotLookedUp
        ))
        .0,
        Rule::OperatorContent
    );
    // Another scaler's binding is never rewritten, not even by the operator.
    let takeover = annotations(
        bound(),
        &[
            (
                BINDING_ANNOTATION,
                r#"{"scalerName":"b","scalerUID":"u","term":4}"#,
            ),
            (DECISION_ANNOTATION, DECISION),
        ],
    );
    let (rule, message) = denied(update(
        &bound(),
        &takeover,
        OPERATOR,
        BoundScaler::NotLookedUp,
    ));
    assert_eq!(rule, Rule::OperatorContent);
    assert!(message.contains("only through a release"), "{message}");
}

#[test]
fn operator_commits_carry_a_new_decision_of_the_term_matching_the_counts() {
    let commit = |prefill: i32, decode: i32, decision_text: Option<&str>| {
        let mut pairs = vec![(BINDING_ANNOTATION, BINDING)];
        if let Some(d) = decision_text {
            pairs.push((DECISION_ANNOTATION, d));
        }
        update(
            &bound(),
            &target(&pairs, prefill, decode),
            OPERATOR,
            BoundScaler::NotLookedUp,
        )
    };
    let good = decision("llm-t3-2000", 3, 2, 4);
    assert_eq!(
        commit(2, 4, Some(&good)),
        Verdict::Allowed(Allowance::OperatorCommit)
    );
    // A decision-only write (a commit whose vector equals the counts) passes too.
    let same = decision("llm-t3-2000", 3, 2, 2);
    assert_eq!(
        commit(2, 2, Some(&same)),
        Verdict::Allowed(Allowance::OperatorCommit)
    );

    let cases: [(&str, Option<String>, &str); 6] = [
        ("no decision", None, "has no decision"),
        (
            "kept decision",
            Some(DECISION.to_string()),
            "keeps the previous decision",
        ),
        (
            "old term",
            Some(decision("llm-t2-2000", 2, 2, 4)),
            "its decision has term 2",
        ),
        (
            "wrong vector",
            Some(decision("llm-t3-2000", 3, 2, 5)),
            "its vector says decode=5 but the request sets decode=4",
        ),
        ("unreadable", Some("{".to_string()), "cannot be read"),
        (
            "same id",
            Some(decision("llm-t3-1000", 3, 2, 4)),
            "already on the target",
        ),
    ];
    for (case, text, expected) in cases {
        let verdict = commit(2, 4, text.as_deref());
        let (rule, message) = denied(verdict);
        assert_eq!(rule, Rule::OperatorContent, "{case}");
        assert!(message.contains(expected), "{case}: {message}");
        assert!(message.contains("term 3"), "{case}: {message}");
    }
    let partial = r#"{"decisionID":"llm-t3-2000","term":3,"vector":{"prefill":2}}"#;
    let (_, message) = denied(commit(2, 4, Some(partial)));
    assert!(message.contains("does not name role decode"), "{message}");
}

#[test]
fn the_operator_releases_by_removing_both_annotations_with_counts_unchanged() {
    assert_eq!(
        update(&bound(), &unbound(), OPERATOR, BoundScaler::NotLookedUp),
        Verdict::Allowed(Allowance::OperatorRelease)
    );
    let moved = target(&[], 2, 3);
    assert_eq!(
        denied(update(&bound(), &moved, OPERATOR, BoundScaler::NotLookedUp)).0,
        Rule::OperatorContent
    );
}

#[test]
fn identity_alone_is_not_enough_and_a_missing_identity_is_explained() {
    // Another service account is a user.
    let moved = target(
        &[
            (BINDING_ANNOTATION, BINDING),
            (DECISION_ANNOTATION, &decision("x-t3-1", 3, 2, 4)),
        ],
        2,
        4,
    );
    let (rule, _) = denied(update(
        &bound(),
        &moved,
        "system:serviceaccount:x:y",
        BoundScaler::NotLookedUp,
    ));
    assert_eq!(rule, Rule::BoundCounts);
    // Without a configured operator, a service account's refusal says why.
    let (old, new) = (md(&bound()), md(&moved));
    let verdict = decide(&FenceRequest {
        operation: Operation::Update,
        old: Some(&old),
        new: Some(&new),
        username: OPERATOR,
        operator_user: None,
        bound_scaler: BoundScaler::NotLookedUp,
    });
    let (_, message) = denied(verdict);
    assert!(message.contains("set --operator-user"), "{message}");
}
