//! Invariants of the binding fence (D24) over generated targets and requests.

mod fence_common;

use fence_common::*;
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{Allowance, BoundScaler, Verdict};
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

fn any_lookup() -> impl Strategy<Value = BoundScaler> {
    prop_oneof![
        Just(BoundScaler::NotLookedUp),
        Just(BoundScaler::Absent),
        Just(BoundScaler::Present {
            uid: "uid-1".into()
        }),
        Just(BoundScaler::Present {
            uid: "uid-2".into()
        }),
        Just(BoundScaler::Failed("boom".into())),
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
        prop_assert_eq!(update(&old, &new, user, lookup), Verdict::Allowed(Allowance::Untouched));
    }

    #[test]
    fn writes_to_objects_being_deleted_always_pass(
        old in any_target(), new in any_target(), user in any_user(), lookup in any_lookup(),
    ) {
        let going = with(old, "/metadata/name", json!("t"));
        let mut going = going;
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        prop_assert_eq!(update(&going, &new, user, lookup), Verdict::Allowed(Allowance::Deleting));
    }

    #[test]
    fn users_never_change_counts_of_a_bound_target_nor_bind_one(
        old in any_target(), new in any_target(), lookup in any_lookup(),
    ) {
        let verdict = update(&old, &new, USER, lookup);
        let old_binding = old["metadata"]["annotations"][BINDING_ANNOTATION].as_str();
        let new_binding = new["metadata"]["annotations"][BINDING_ANNOTATION].as_str();
        let counts = |v: &Value| v["spec"]["roles"].as_array().unwrap().iter()
            .map(|r| (r["name"].clone(), r["replicas"].clone())).collect::<Vec<_>>();
        let counts_changed = counts(&old).iter().any(|(name, c)| {
            counts(&new).iter().any(|(n, d)| n == name && d != c)
        });
        if old_binding == Some(BINDING) && counts_changed {
            prop_assert!(!verdict.is_allowed(), "a user moved a bound target's counts");
        }
        if new_binding.is_some() && new_binding != old_binding {
            prop_assert!(!verdict.is_allowed(), "a user installed a binding");
        }
    }

    #[test]
    fn every_refusal_names_its_rule_and_a_way_out(
        old in any_target(), new in any_target(), user in any_user(), lookup in any_lookup(),
    ) {
        if let Verdict::Denied { rule, message } = update(&old, &new, user, lookup) {
            let prefix = format!("binding fence ({rule}): ");
            prop_assert!(message.starts_with(&prefix), "{}", message);
            let way_out = ["suspend", "Suspend", "delete it", "remove", "Retry", "must carry", "must leave", "must be above", "must write", "only through a release", "writes modeldeployment", "removes modeldeployment", "may remove"];
            prop_assert!(way_out.iter().any(|w| message.contains(w)), "{}", message);
        }
    }

    #[test]
    fn an_operator_commit_passes_exactly_when_its_vector_matches(
        counts in prop::collection::vec(1i32..9, 2), claimed in prop::collection::vec(1i32..9, 2),
    ) {
        let text = decision("llm-t3-5000", 3, claimed[0], claimed[1]);
        let new = target(&[(BINDING_ANNOTATION, BINDING), (DECISION_ANNOTATION, &text)], counts[0], counts[1]);
        let verdict = update(&bound(), &new, OPERATOR, BoundScaler::NotLookedUp);
        prop_assert_eq!(verdict.is_allowed(), counts == claimed, "{:?}", verdict);
    }
}
