//! Fixtures shared by the fence tests: a target bound to scaler "llm" at term 3, the facts of
//! that scaler as the webhook would look them up, and helpers that run the fence on an UPDATE.
#![allow(dead_code)]

use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{
    FenceRequest, NamedScaler, NotClaiming, Operation, Rule, ScalerFacts, Verdict, decide,
};
pub use mds_api::target::ModelDeployment;
use serde_json::{Value, json};

pub const OPERATOR: &str = "system:serviceaccount:mds-system:mds";
pub const USER: &str = "alice";
pub const BINDING: &str = r#"{"scalerName":"llm","scalerUID":"uid-1","term":3}"#;
pub const TARGET_UID: &str = "target-uid-1";
pub const DECISION: &str =
    r#"{"decisionID":"llm-t3-1000","term":3,"vector":{"decode":2,"prefill":2}}"#;

pub fn target(annotations: &[(&str, &str)], prefill: i32, decode: i32) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "metadata": {"name": "llm-serving", "namespace": "default", "uid": TARGET_UID, "annotations": annotations},
        "spec": {
            "engine": {"name": "vLLM"},
            "roles": [
                {"name": "prefill", "kind": "Prefill", "replicas": prefill},
                {"name": "decode", "kind": "Decode", "replicas": decode}
            ]
        }
    })
}

pub fn bound() -> Value {
    target(
        &[
            (BINDING_ANNOTATION, BINDING),
            (DECISION_ANNOTATION, DECISION),
        ],
        2,
        2,
    )
}

pub fn unbound() -> Value {
    target(&[], 2, 2)
}

pub fn md(value: &Value) -> ModelDeployment {
    serde_json::from_value(value.clone()).expect("the test target deserializes")
}

/// Sets the value at a JSON pointer, creating the last key.
pub fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').expect("pointer has a slash");
    match value.pointer_mut(parent).expect("parent exists") {
        Value::Array(items) => items[last.parse::<usize>().expect("index")] = new,
        parent => {
            parent[last] = new;
        }
    }
    value
}

pub fn annotations(value: Value, pairs: &[(&str, &str)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    with(value, "/metadata/annotations", Value::Object(map))
}

pub fn decision(id: &str, term: i64, prefill: i32, decode: i32) -> String {
    format!(
        r#"{{"decisionID":"{id}","term":{term},"vector":{{"decode":{decode},"prefill":{prefill}}}}}"#
    )
}

/// Scaler "llm" (UID `uid`) as the webhook finds it: Active, targeting the test target.
pub fn scaler(uid: &str) -> ScalerFacts {
    ScalerFacts {
        uid: uid.into(),
        target_name: "llm-serving".into(),
        not_claiming: None,
        status_target_uid: None,
        status_term: None,
    }
}

pub fn present(uid: &str) -> NamedScaler {
    NamedScaler::Present(scaler(uid))
}

/// Scaler "llm" with UID uid-1, no longer claiming its target.
pub fn releasing(why: NotClaiming) -> NamedScaler {
    NamedScaler::Present(ScalerFacts {
        not_claiming: Some(why),
        ..scaler("uid-1")
    })
}

/// Runs the fence on an UPDATE from `old` to `new`, with no operator user configured (the
/// default: the fence decides by content alone).
pub fn update(old: &Value, new: &Value, lookup: NamedScaler) -> Verdict {
    update_checked(old, new, "alice", None, lookup)
}

/// Runs the fence on an UPDATE by `user`, with `operator_user` as the extra identity check.
pub fn update_checked(
    old: &Value,
    new: &Value,
    user: &str,
    operator_user: Option<&str>,
    lookup: NamedScaler,
) -> Verdict {
    let (old, new) = (md(old), md(new));
    decide(&FenceRequest {
        operation: Operation::Update,
        old: Some(&old),
        new: Some(&new),
        username: user,
        operator_user,
        named_scaler: lookup,
    })
}

pub fn denied(verdict: Verdict) -> (Rule, String) {
    match verdict {
        Verdict::Denied { rule, message } => (rule, message),
        Verdict::Allowed(a) => panic!("expected a refusal, got {a:?}"),
    }
}
