//! The defaults patch over many spec shapes: it always applies to the request's own object and
//! stores exactly what `default_spec` (CREATE) or `default_spec_on_update` (UPDATE) makes.

use crate::common;

use common::*;
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::{default_spec, default_spec_on_update};
use mds_webhook::{review, scaler as hooks};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn maybe(value: Value) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(value))]
}

fn insert(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_string(), v);
    }
}

fn algorithm() -> impl Strategy<Value = Option<Value>> {
    let block = prop_oneof![
        (maybe(json!("0.2"))).prop_map(|tolerance| {
            let mut p = Map::new();
            p.insert("metric".into(), json!("QueueDepth"));
            p.insert("roleTargets".into(), json!([{"name": "r0", "target": "8"}]));
            insert(&mut p, "tolerance", tolerance);
            ("Proportional", json!({"proportional": p}))
        }),
        (maybe(json!(120)), maybe(json!("3"))).prop_map(|(stable, threshold)| {
            let mut t = Map::new();
            t.insert("serverTargetTokensPerSecond".into(), json!("2000"));
            insert(&mut t, "stableWindowSeconds", stable);
            insert(&mut t, "panicThreshold", threshold);
            ("TokenThroughput", json!({"tokenThroughput": t}))
        }),
        (maybe(json!(600)), any::<bool>()).prop_map(|(horizon, fallback)| {
            let mut p = Map::new();
            p.insert("serverTokenCapacityPerReplica".into(), json!("2000"));
            if fallback {
                p.insert(
                    "tokenThroughput".into(),
                    json!({"serverTargetTokensPerSecond": "2000"}),
                );
            }
            insert(&mut p, "horizonSeconds", horizon);
            ("Predictive", json!({"predictive": p}))
        }),
    ];
    prop_oneof![
        Just(None),
        (block, any::<bool>()).prop_map(|((kind, mut body), typed)| {
            if typed {
                body["type"] = json!(kind);
            }
            Some(body)
        }),
    ]
}

fn spec() -> impl Strategy<Value = Value> {
    (
        maybe(json!("Active")),
        maybe(json!(true)),
        maybe(json!({"intervalSeconds": 30})),
        prop::collection::vec(maybe(json!(2)), 1..4),
        algorithm(),
        prop_oneof![
            Just(None),
            Just(Some(json!({"scaleUp": {"maxStepReplicas": 0}}))),
            Just(Some(
                json!({"scaleDown": {"stabilizationWindowSeconds": 60}})
            )),
            Just(Some(
                json!({"scaleUp": {}, "scaleDown": {"cooldownAfterAbortSeconds": 0}})
            )),
        ],
        maybe(json!({"policy": "Disabled"})),
    )
        .prop_map(
            |(mode, suspend, sampling, mins, algorithm, behavior, rebalance)| {
                let mut spec = Map::new();
                spec.insert("targetRef".into(), json!({"name": "llm-serving"}));
                let roles: Vec<Value> = mins
                    .into_iter()
                    .enumerate()
                    .map(|(i, min)| {
                        let mut role = Map::new();
                        role.insert("name".into(), json!(format!("r{i}")));
                        role.insert("maxReplicas".into(), json!(8));
                        insert(&mut role, "minReplicas", min);
                        Value::Object(role)
                    })
                    .collect();
                spec.insert("roles".into(), Value::Array(roles));
                insert(&mut spec, "mode", mode);
                insert(&mut spec, "suspend", suspend);
                insert(&mut spec, "sampling", sampling);
                insert(&mut spec, "algorithm", algorithm);
                insert(&mut spec, "behavior", behavior);
                insert(&mut spec, "rebalance", rebalance);
                Value::Object(spec)
            },
        )
}

/// The spec the mutating webhook stores for `object` (and `old` on UPDATE).
fn stored(object: &Value, old: Option<&Value>) -> ModelDeploymentScaler {
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    let body = review(
        operation,
        "ModelDeploymentScaler",
        "alice",
        Some(object),
        old,
    );
    let request = review::read(&serde_json::to_vec(&body).unwrap()).unwrap();
    let wire = review::to_wire(hooks::mutate(&request));
    let response = &wire["response"];
    assert_eq!(response["allowed"], true, "{response}");
    let result = if response.get("patch").is_some() {
        patched(response, object)
    } else {
        object.clone()
    };
    serde_json::from_value(result).unwrap()
}

proptest! {
    #[test]
    fn create_stores_exactly_the_defaulted_spec(spec in spec()) {
        let object = scaler(spec);
        let mut expected: ModelDeploymentScaler = serde_json::from_value(object.clone()).unwrap();
        default_spec(&mut expected.spec);
        prop_assert_eq!(stored(&object, None).spec, expected.spec);
    }

    #[test]
    fn update_stores_exactly_the_defaulted_spec(old in spec(), new in spec()) {
        let old = serde_json::to_value(stored(&scaler(old), None)).unwrap();
        let object = scaler(new);
        let mut expected: ModelDeploymentScaler = serde_json::from_value(object.clone()).unwrap();
        let previous: ModelDeploymentScaler = serde_json::from_value(old.clone()).unwrap();
        default_spec_on_update(&mut expected.spec, &previous.spec);
        prop_assert_eq!(stored(&object, Some(&old)).spec, expected.spec);
    }
}
