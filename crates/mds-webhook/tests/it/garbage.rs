//! No request body makes a handler panic or fail with a server error: arbitrary bytes get 400,
//! review-shaped bodies with arbitrary objects get an answer.

use crate::common;

use common::*;
use mds_webhook::router::{MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH, VALIDATE_TARGETS_PATH};
use proptest::prelude::*;
use serde_json::{Value, json};

const PATHS: [&str; 3] = [
    MUTATE_SCALERS_PATH,
    VALIDATE_SCALERS_PATH,
    VALIDATE_TARGETS_PATH,
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// JSON values that look a little like the objects the handlers read.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[a-zA-Z0-9/._ -]{0,12}".prop_map(Value::from),
        Just(json!("modeldeployment.gpustack.ai/scaler-binding")),
        Just(json!(r#"{"scalerName":"llm","scalerUID":"u","term":1}"#)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("metadata".to_string()),
            Just("spec".to_string()),
            Just("roles".to_string()),
            Just("name".to_string()),
            Just("replicas".to_string()),
            Just("annotations".to_string()),
            Just("algorithm".to_string()),
            Just("targetRef".to_string()),
            Just("maxReplicas".to_string()),
            Just("modeldeployment.gpustack.ai/scaler-binding".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects shaped like Kubernetes objects (metadata and spec) with arbitrary insides, and
/// sometimes anything at all.
fn object() -> impl Strategy<Value = Value> {
    prop_oneof![
        json_value(),
        (json_value(), json_value(), "[ -~]{0,40}").prop_map(|(spec, status, binding)| json!({
            "metadata": {
                "name": "x",
                "annotations": {"modeldeployment.gpustack.ai/scaler-binding": binding}
            },
            "spec": spec,
            "status": status
        })),
        json_value().prop_map(|spec| json!({"metadata": {"name": "x"}, "spec": spec})),
    ]
}

fn operation() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("CREATE"),
        Just("UPDATE"),
        Just("DELETE"),
        Just("CONNECT")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_bytes_get_a_400_never_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), path in 0usize..3) {
        let (status, _) = runtime().block_on(post(app(Fake::default()), PATHS[path], bytes));
        prop_assert!(status == 400 || status == 200, "{}", status);
    }

    #[test]
    fn arbitrary_objects_in_a_review_get_an_answer(
        object in object(), old in object(), op in operation(), path in 0usize..3,
    ) {
        let mut body = review(op, "ModelDeployment", OPERATOR, Some(&json!({"metadata": {"name": "x"}})), None);
        body["request"]["object"] = object;
        body["request"]["oldObject"] = old;
        let bytes = serde_json::to_vec(&body).unwrap();
        let (status, answer) = runtime().block_on(post(app(Fake::default()), PATHS[path], bytes));
        // 400 only when kube's types refuse the review itself (an object that is not a map).
        prop_assert!(status == 200 || status == 400, "{}", status);
        if status == 200 {
            prop_assert!(answer["response"]["allowed"].is_boolean(), "{}", answer);
        }
    }
}
