//! The binding fence (spec *Binding fence*, D24), rule by rule. The fence decides by content:
//! every test but the identity ones runs with no operator user configured, so the controller's
//! writes and a person's are told apart by what they carry alone.

use crate::fence_common;

use fence_common::*;
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{
    Allowance, FenceRequest, NamedScaler, NotClaiming, Operation, Rule, ScalerFacts, Verdict,
    decide, scaler_to_look_up,
};
use serde_json::{Value, json};

fn both(decision_text: &str) -> [(&'static str, &str); 2] {
    [
        (BINDING_ANNOTATION, BINDING),
        (DECISION_ANNOTATION, decision_text),
    ]
}

#[test]
fn users_keep_every_field_but_counts_and_annotations_of_a_bound_target() {
    let old = bound();
    let new = with(old.clone(), "/spec/engine/name", json!("SGLang"));
    let new = with(new, "/metadata/labels", json!({"team": "a"}));
    assert_eq!(
        update(&old, &new, NamedScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Untouched)
    );
    // Unchanged counts written explicitly are no change either (defaulted replicas are 1).
    let old = target(&[(BINDING_ANNOTATION, BINDING)], 1, 2);
    let mut no_count = old.clone();
    no_count["spec"]["roles"][0]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    assert!(update(&old, &no_count, NamedScaler::NotLookedUp).is_allowed());
}

#[test]
fn a_count_change_without_a_new_decision_is_refused_whoever_sends_it() {
    // kubectl scale and a GitOps apply both send the counts with the annotations as stored.
    let scaled = target(&both(DECISION), 2, 4);
    for user in [
        USER,
        OPERATOR,
        "system:serviceaccount:gpustack-system:gpustack",
    ] {
        let (rule, message) = denied(update_checked(
            &bound(),
            &scaled,
            user,
            None,
            NamedScaler::NotLookedUp,
        ));
        assert_eq!(rule, Rule::BoundCounts, "{user}");
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
    // Dropping the decision while moving counts is no commit either.
    let dropped = target(&[(BINDING_ANNOTATION, BINDING)], 2, 4);
    assert_eq!(
        denied(update(&bound(), &dropped, NamedScaler::NotLookedUp)).0,
        Rule::BoundCounts
    );
}

#[test]
fn a_commit_passes_only_with_a_new_decision_of_the_term_giving_the_counts() {
    let commit = |prefill: i32, decode: i32, text: &str| {
        update(
            &bound(),
            &target(&both(text), prefill, decode),
            NamedScaler::NotLookedUp,
        )
    };
    assert_eq!(
        commit(2, 4, &decision("llm-t3-2000", 3, 2, 4)),
        Verdict::Allowed(Allowance::Commit)
    );
    // A decision that restates the counts under the binding's term changes nothing.
    assert_eq!(
        commit(2, 2, &decision("llm-t3-2000", 3, 2, 2)),
        Verdict::Allowed(Allowance::Commit)
    );
    let cases: [(&str, String, &str); 5] = [
        (
            "old term",
            decision("llm-t2-2000", 2, 2, 4),
            "its decision has term 2",
        ),
        (
            "forged vector",
            decision("llm-t3-2000", 3, 2, 5),
            "its vector says decode=5 but the request sets decode=4",
        ),
        ("unreadable", "{".to_string(), "cannot be read"),
        (
            "same id",
            decision("llm-t3-1000", 3, 2, 4),
            "already on the target",
        ),
        (
            "partial",
            r#"{"decisionID":"llm-t3-2000","term":3,"vector":{"prefill":2}}"#.to_string(),
            "does not name role decode",
        ),
    ];
    for (case, text, expected) in cases {
        let (rule, message) = denied(commit(2, 4, &text));
        assert_eq!(rule, Rule::CommitContent, "{case}");
        assert!(message.contains(expected), "{case}: {message}");
        assert!(message.contains("binding's term 3"), "{case}: {message}");
        assert!(message.contains("suspend the scaler"), "{case}: {message}");
    }
}

#[test]
fn either_annotation_of_a_bound_target_changes_only_by_commit_or_release() {
    let cases: [(&str, Value); 3] = [
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
        let (rule, message) = denied(update(&bound(), &new, present("uid-1")));
        assert_eq!(rule, Rule::BoundAnnotations, "{case}");
        assert!(
            message.contains("suspend the scaler") && message.contains("delete it"),
            "{case}: {message}"
        );
    }
}

#[test]
fn adding_removing_or_renaming_a_role_of_a_bound_target_changes_its_counts() {
    let mut removed = bound();
    removed["spec"]["roles"].as_array_mut().unwrap().pop();
    let (rule, message) = denied(update(&bound(), &removed, NamedScaler::NotLookedUp));
    assert_eq!(rule, Rule::BoundCounts);
    assert!(message.contains("decode 2 -> (none)"), "{message}");
    // With a decision that names the rest, still no commit: a commit never reshapes roles, so
    // the count cannot come back different in a second write.
    let removed = annotations(removed, &both(&decision("llm-t3-2000", 3, 2, 2)));
    let (rule, message) = denied(update(&bound(), &removed, NamedScaler::NotLookedUp));
    assert_eq!(rule, Rule::CommitContent);
    assert!(
        message.contains("never adds, removes or renames"),
        "{message}"
    );
    let renamed = with(bound(), "/spec/roles/1/name", json!("decode-b"));
    assert_eq!(
        denied(update(&bound(), &renamed, NamedScaler::NotLookedUp)).0,
        Rule::BoundCounts
    );
    // On an unbound target the shape is the user's.
    let mut reshaped = unbound();
    reshaped["spec"]["roles"].as_array_mut().unwrap().pop();
    assert!(update(&unbound(), &reshaped, NamedScaler::NotLookedUp).is_allowed());
}

#[test]
fn a_release_passes_when_the_named_scaler_no_longer_claims_the_target() {
    for why in [
        NotClaiming::Shadow,
        NotClaiming::Suspended,
        NotClaiming::Deleting,
    ] {
        assert_eq!(
            update(&bound(), &unbound(), releasing(why)),
            Verdict::Allowed(Allowance::Release),
            "{why:?}"
        );
    }
    // The scaler still claims it: nobody may take the binding away.
    let (rule, message) = denied(update(&bound(), &unbound(), present("uid-1")));
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(message.contains("still exists with UID uid-1"), "{message}");
    assert!(
        message.contains("Suspend the scaler") && message.contains("delete it"),
        "{message}"
    );
    let moved = target(&[], 2, 3);
    let (rule, _) = denied(update(&bound(), &moved, releasing(NotClaiming::Suspended)));
    assert_eq!(
        rule,
        Rule::OrphanRecovery,
        "a release leaves counts as they are"
    );
}

#[test]
fn orphan_recovery_needs_the_scaler_gone_or_replaced_and_counts_unchanged() {
    let only_decision = annotations(bound(), &[(DECISION_ANNOTATION, DECISION)]);
    let neither = annotations(bound(), &[]);
    for new in [&only_decision, &neither] {
        assert_eq!(
            update(&bound(), new, NamedScaler::Absent),
            Verdict::Allowed(Allowance::OrphanRecovery)
        );
        assert_eq!(
            update(&bound(), new, present("uid-2")),
            Verdict::Allowed(Allowance::OrphanRecovery),
            "a scaler of the same name with another UID does not own the binding"
        );
    }
    let moved = target(&[], 2, 3);
    let (rule, message) = denied(update(&bound(), &moved, NamedScaler::Absent));
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(
        message.contains(
            "must leave the replica counts unchanged (this request changes decode 2 -> 3)"
        ),
        "{message}"
    );
    let rewritten = annotations(bound(), &[(DECISION_ANNOTATION, r#"{"x":1}"#)]);
    let (rule, _) = denied(update(&bound(), &rewritten, NamedScaler::Absent));
    assert_eq!(rule, Rule::OrphanRecovery);
    let (rule, message) = denied(update(
        &bound(),
        &neither,
        NamedScaler::Failed("timed out".into()),
    ));
    assert_eq!(rule, Rule::OrphanRecovery);
    assert!(
        message.contains("(timed out)") && message.contains("Retry"),
        "{message}"
    );
    let (rule, _) = denied(update(&bound(), &neither, NamedScaler::NotLookedUp));
    assert_eq!(
        rule,
        Rule::OrphanRecovery,
        "without a lookup nothing shows the binding is released or orphaned"
    );
}

#[test]
fn the_scaler_is_looked_up_for_a_binding_removed_or_installed() {
    let request = |old: &Value, new: &Value| {
        let (old, new) = (md(old), md(new));
        scaler_to_look_up(&FenceRequest {
            operation: Operation::Update,
            old: Some(&old),
            new: Some(&new),
            username: USER,
            operator_user: None,
            named_scaler: NamedScaler::NotLookedUp,
        })
    };
    let neither = annotations(bound(), &[]);
    assert_eq!(request(&bound(), &neither), Some("llm".to_string()));
    let other = r#"{"scalerName":"b","scalerUID":"u","term":1}"#;
    let installed = annotations(unbound(), &[(BINDING_ANNOTATION, other)]);
    assert_eq!(request(&unbound(), &installed), Some("b".to_string()));
    let unreadable = annotations(unbound(), &[(BINDING_ANNOTATION, "nope")]);
    assert_eq!(request(&unreadable, &installed), Some("b".to_string()));
    assert_eq!(request(&unreadable, &unbound()), None);
    assert_eq!(request(&bound(), &bound()), None);
    assert_eq!(request(&bound(), &target(&both(DECISION), 2, 5)), None);
    assert_eq!(request(&unbound(), &unreadable), None);
}

#[test]
fn unbound_targets_take_counts_but_no_hand_made_annotations() {
    let moved = target(&[], 5, 1);
    assert_eq!(
        update(&unbound(), &moved, NamedScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Unbound)
    );
    for (key, value) in [
        (BINDING_ANNOTATION, "not json"),
        (DECISION_ANNOTATION, DECISION),
    ] {
        let new = annotations(unbound(), &[(key, value)]);
        let (rule, message) = denied(update(&unbound(), &new, NamedScaler::NotLookedUp));
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
    assert!(update(&stale, &unbound(), NamedScaler::NotLookedUp).is_allowed());
    let rewritten = annotations(unbound(), &[(DECISION_ANNOTATION, "x")]);
    assert_eq!(
        denied(update(&stale, &rewritten, NamedScaler::NotLookedUp)).0,
        Rule::UnboundAnnotations
    );
}

fn bind_on(old: &Value, text: &str, lookup: NamedScaler) -> Verdict {
    let mut pairs: Vec<(&str, &str)> = vec![(BINDING_ANNOTATION, text)];
    if let Some(d) = old["metadata"]["annotations"][DECISION_ANNOTATION].as_str() {
        pairs.push((DECISION_ANNOTATION, d));
    }
    update(old, &annotations(old.clone(), &pairs), lookup)
}

#[test]
fn a_bind_names_an_active_scaler_of_this_target() {
    assert_eq!(
        bind_on(&unbound(), BINDING, present("uid-1")),
        Verdict::Allowed(Allowance::Bind)
    );
    let shadow = releasing(NotClaiming::Shadow);
    let elsewhere = NamedScaler::Present(ScalerFacts {
        target_name: "other".into(),
        ..scaler("uid-1")
    });
    let cases: [(&str, NamedScaler, &str); 6] = [
        (
            "absent",
            NamedScaler::Absent,
            "no scaler of that name exists",
        ),
        ("other uid", present("uid-2"), "has UID uid-2, not uid-1"),
        ("elsewhere", elsewhere, "targets \"other\""),
        ("shadow", shadow, "is in Shadow mode"),
        (
            "failed",
            NamedScaler::Failed("boom".into()),
            "(boom). Retry",
        ),
        ("not looked up", NamedScaler::NotLookedUp, "Retry"),
    ];
    for (case, lookup, expected) in cases {
        let (rule, message) = denied(bind_on(&unbound(), BINDING, lookup));
        assert_eq!(rule, Rule::BindContent, "{case}");
        assert!(message.contains(expected), "{case}: {message}");
    }
    // A bind that also moves counts or writes a decision is not a bind.
    let moved = target(&[(BINDING_ANNOTATION, BINDING)], 3, 2);
    assert_eq!(
        denied(update(&unbound(), &moved, present("uid-1"))).0,
        Rule::BindContent
    );
    let with_decision = annotations(unbound(), &both(DECISION));
    assert_eq!(
        denied(update(&unbound(), &with_decision, present("uid-1"))).0,
        Rule::BindContent
    );
}

#[test]
fn a_bind_takes_a_term_above_every_term_the_target_or_the_scaler_has_seen() {
    let term = |t: i64| format!(r#"{{"scalerName":"llm","scalerUID":"uid-1","term":{t}}}"#);
    // A stale decision of term 3 is on the target (D19).
    let stale = annotations(unbound(), &[(DECISION_ANNOTATION, DECISION)]);
    let (rule, message) = denied(bind_on(&stale, &term(3), present("uid-1")));
    assert_eq!(rule, Rule::BindContent);
    assert!(
        message.contains("above term 3, already seen in the decision annotation"),
        "{message}"
    );
    assert!(bind_on(&stale, &term(4), present("uid-1")).is_allowed());
    // The scaler's status records term 5 for this very target: a resumed scaler goes on above.
    let remembered = |uid: &str| {
        NamedScaler::Present(ScalerFacts {
            status_target_uid: Some(uid.into()),
            status_term: Some(5),
            ..scaler("uid-1")
        })
    };
    for t in [1, 4, 5] {
        let (_, message) = denied(bind_on(&unbound(), &term(t), remembered(TARGET_UID)));
        assert!(
            message.contains("above term 5, already seen in the scaler's status"),
            "{message}"
        );
    }
    assert!(bind_on(&unbound(), &term(6), remembered(TARGET_UID)).is_allowed());
    // A term recorded for a replaced target (another UID) does not count.
    assert!(bind_on(&unbound(), &term(1), remembered("old-uid")).is_allowed());
}

#[test]
fn an_unreadable_binding_leaves_the_target_unclaimed_and_may_be_fixed() {
    let old = annotations(unbound(), &[(BINDING_ANNOTATION, "not json")]);
    let moved = with(old.clone(), "/spec/roles/1/replicas", json!(7));
    assert_eq!(
        update(&old, &moved, NamedScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Unbound)
    );
    assert!(
        update(&old, &unbound(), NamedScaler::NotLookedUp).is_allowed(),
        "removal"
    );
    let fixed = annotations(unbound(), &[(BINDING_ANNOTATION, BINDING)]);
    assert_eq!(
        update(&old, &fixed, present("uid-1")),
        Verdict::Allowed(Allowance::Bind)
    );
    let (rule, message) = denied(update(&old, &fixed, NamedScaler::Absent));
    assert_eq!(rule, Rule::BindContent);
    assert!(message.contains("no scaler of that name"), "{message}");
    let garbage = annotations(unbound(), &[(BINDING_ANNOTATION, "still not json")]);
    let (rule, message) = denied(update(&old, &garbage, NamedScaler::NotLookedUp));
    assert_eq!(rule, Rule::UnboundAnnotations);
    assert!(message.contains("cannot be read"), "{message}");
}

#[test]
fn creates_may_not_carry_ownership_annotations() {
    let create = |value: &Value| {
        let object = md(value);
        decide(&FenceRequest {
            operation: Operation::Create,
            old: None,
            new: Some(&object),
            username: OPERATOR,
            operator_user: None,
            named_scaler: NamedScaler::NotLookedUp,
        })
    };
    assert!(create(&unbound()).is_allowed());
    assert_eq!(denied(create(&bound())).0, Rule::UnboundAnnotations);
    let binding_only = annotations(unbound(), &[(BINDING_ANNOTATION, BINDING)]);
    let (rule, message) = denied(create(&binding_only));
    assert_eq!(rule, Rule::UnboundAnnotations);
    assert!(message.contains("created unbound"), "{message}");
    let decision_only = annotations(unbound(), &[(DECISION_ANNOTATION, DECISION)]);
    assert_eq!(denied(create(&decision_only)).0, Rule::UnboundAnnotations);
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
        named_scaler: NamedScaler::NotLookedUp,
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
        update(&going, &edited, NamedScaler::NotLookedUp),
        Verdict::Allowed(Allowance::Deleting)
    );
}

#[test]
fn an_operator_user_is_an_extra_check_on_binds_commits_and_releases() {
    let checked = |old: &Value, new: &Value, user: &str, lookup: NamedScaler| {
        update_checked(old, new, user, Some(OPERATOR), lookup)
    };
    let commit = target(&both(&decision("llm-t3-2000", 3, 2, 4)), 2, 4);
    let bind = annotations(unbound(), &[(BINDING_ANNOTATION, BINDING)]);
    let suspended = || releasing(NotClaiming::Suspended);
    assert!(checked(&bound(), &commit, OPERATOR, NamedScaler::NotLookedUp).is_allowed());
    assert!(checked(&unbound(), &bind, OPERATOR, present("uid-1")).is_allowed());
    assert!(checked(&bound(), &unbound(), OPERATOR, suspended()).is_allowed());
    for (case, old, new, lookup) in [
        ("commit", bound(), commit.clone(), NamedScaler::NotLookedUp),
        ("bind", unbound(), bind.clone(), present("uid-1")),
        ("release", bound(), unbound(), suspended()),
    ] {
        let (rule, message) = denied(checked(&old, &new, USER, lookup));
        assert_eq!(rule, Rule::OperatorUser, "{case}");
        assert!(message.contains("\"alice\""), "{case}: {message}");
    }
    // Users' own writes need no identity.
    assert!(checked(&bound(), &unbound(), USER, NamedScaler::Absent).is_allowed());
    let unreadable = annotations(unbound(), &[(BINDING_ANNOTATION, "nope")]);
    assert!(checked(&unreadable, &bind, USER, present("uid-1")).is_allowed());
    // And identity alone is never enough.
    let scaled = target(&both(DECISION), 2, 4);
    assert_eq!(
        denied(checked(
            &bound(),
            &scaled,
            OPERATOR,
            NamedScaler::NotLookedUp
        ))
        .0,
        Rule::BoundCounts
    );
}
