//! Invariants of the binding fence (D24) over generated targets and requests.

use crate::fence_common;

use fence_common::*;
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{Allowance, NamedScaler, NotClaiming, Verdict};
use proptest::prelude::*;
use serde_json::{Value, json};

fn annotation_value() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some(BINDING.to_string())),
        Just(Some(DECISION.to_string())),
        Just(Some("not json".to_string())),
        Just(Some(
            r#"{"scalerName":"other","scalerUID":"u9","term":1}"#.to_string()
        )),
    ]
}

/// A target with two or three roles and arbitrary fenced fields.
fn any_target() -> impl Strategy<Value = Value> {
    (
        annotation_value(),
        annotation_value(),
        prop::collection::vec(1i32..6, 2..4),
        prop::bool::ANY,
    )
        .prop_map(|(binding, decision, counts, extra_label)| {
            let mut pairs = serde_json::Map::new();
            if let Some(b) = binding {
                pairs.insert(BINDING_ANNOTATION.into(), json!(b));
            }
            if let Some(d) = decision {
                pairs.insert(DECISION_ANNOTATION.into(), json!(d));
            }
            if extra_label {
                pairs.insert("note".into(), json!("x"));
            }
            let roles: Vec<Value> = counts
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"name": format!("r{i}"), "replicas": c}))
                .collect();
            json!({"metadata": {"name": "t", "annotations": pairs}, "spec": {"roles": roles}})
        })
}

/// Edits that touch neither counts nor the two annotations, by number.
fn other_edit(edit: usize, v: &mut Value) {
    match edit {
        0 => v["spec"]["engine"] = json!({"name": "SGLang"}),
        1 => v["spec"]["router"] = json!({"name": "gw"}),
        2 => v["spec"]["roles"][0]["size"] = json!(4),
        3 => v["spec"]["roles"][1]["instanceType"] = json!("h100"),
        4 => v["metadata"]["annotations"]["note"] = json!("changed"),
        _ => v["metadata"]["labels"] = json!({"a": "b"}),
    }
}

fn any_user() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just(USER),
        Just(OPERATOR),
        Just("system:serviceaccount:x:y")
    ]
}

fn any_lookup() -> impl Strategy<Value = NamedScaler> {
    prop_oneof![
        Just(NamedScaler::NotLookedUp),
        Just(NamedScaler::Absent),
        Just(present("uid-1")),
        Just(present("uid-2")),
        Just(releasing(NotClaiming::Suspended)),
        Just(NamedScaler::Failed("boom".into())),
    ]
}

proptest! {
    #[test]
    fn writes_touching_neither_counts_nor_annotations_always_pass(
        old in any_target(), edits in prop::collection::vec(0usize..6, 0..4),
        user in any_user(), lookup in any_lookup(),
    ) {
        let mut new = old.clone();
        for edit in edits {
            other_edit(edit, &mut new);
        }
        prop_assert_eq!(update_checked(&old, &new, user, None, lookup), Verdict::Allowed(Allowance::Untouched));
    }

    #[test]
    fn writes_to_objects_being_deleted_always_pass(
        old in any_target(), new in any_target(), user in any_user(), lookup in any_lookup(),
    ) {
        let going = with(old, "/metadata/name", json!("t"));
        let mut going = going;
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        prop_assert_eq!(update_checked(&going, &new, user, None, lookup), Verdict::Allowed(Allowance::Deleting));
    }

    #[test]
    fn without_a_matching_decision_no_write_moves_a_bound_count(
        old in any_target(), new in any_target(), lookup in any_lookup(),
    ) {
        let verdict = update(&old, &new, lookup.clone());
        let old_binding = old["metadata"]["annotations"][BINDING_ANNOTATION].as_str();
        let new_binding = new["metadata"]["annotations"][BINDING_ANNOTATION].as_str();
        let counts = |v: &Value| v["spec"]["roles"].as_array().unwrap().iter()
            .map(|r| (r["name"].clone(), r["replicas"].clone())).collect::<Vec<_>>();
        let counts_changed = counts(&old).iter().any(|(name, c)| {
            counts(&new).iter().any(|(n, d)| n == name && d != c)
        });
        let new_decision = new["metadata"]["annotations"][DECISION_ANNOTATION].as_str();
        // The generated decision is always DECISION (2, 2 at term 3), already on a bound target
        // or never matching a changed count: no generated write is a valid commit.
        if old_binding == Some(BINDING) && counts_changed {
            prop_assert!(!verdict.is_allowed(), "moved a bound target's counts: {:?}", new_decision);
        }
        // A bind passes only for the Active scaler the lookup found, named with its UID.
        if new_binding.is_some() && new_binding != old_binding && verdict.is_allowed() {
            prop_assert_eq!(new_binding, Some(BINDING));
            prop_assert_eq!(&lookup, &present("uid-1"));
        }
    }

    #[test]
    fn every_refusal_names_its_rule_and_a_way_out(
        old in any_target(), new in any_target(), user in any_user(), lookup in any_lookup(),
    ) {
        if let Verdict::Denied { rule, message } = update_checked(&old, &new, user, Some(OPERATOR), lookup) {
            let prefix = format!("binding fence ({rule}): ");
            prop_assert!(message.starts_with(&prefix), "{}", message);
            let way_out = ["suspend", "Suspend", "delete it", "remove", "Retry", "must carry", "must leave", "must be above", "leaves the counts", "only through a release", "writes modeldeployment", "may remove", "Shadow", "above term", "--operator-user"];
            prop_assert!(way_out.iter().any(|w| message.contains(w)), "{}", message);
        }
    }

    #[test]
    fn a_commit_passes_exactly_when_its_vector_matches(
        counts in prop::collection::vec(1i32..9, 2), claimed in prop::collection::vec(1i32..9, 2),
    ) {
        let text = decision("llm-t3-5000", 3, claimed[0], claimed[1]);
        let new = target(&[(BINDING_ANNOTATION, BINDING), (DECISION_ANNOTATION, &text)], counts[0], counts[1]);
        let verdict = update(&bound(), &new, NamedScaler::NotLookedUp);
        prop_assert_eq!(verdict.is_allowed(), counts == claimed, "{:?}", verdict);
    }
}
