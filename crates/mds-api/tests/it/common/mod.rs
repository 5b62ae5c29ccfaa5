//! Shared fixtures for the admission tests: valid base specs, a matching target, and JSON
//! edits that break one rule at a time.
#![allow(dead_code)]

pub mod invalid_scalers;

use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::target::ModelDeployment;
use mds_api::validation::{Report, validate};
use serde_json::{Value, json};

/// One Server role scaled on queue depth.
pub fn proportional() -> Value {
    json!({
        "targetRef": {"name": "llm-serving"},
        "roles": [{"name": "server", "minReplicas": 2, "maxReplicas": 16}],
        "algorithm": {"type": "Proportional", "proportional": {
            "metric": "QueueDepth",
            "roleTargets": [{"name": "server", "target": "8"}]
        }}
    })
}

/// The spec's TokenThroughput example: encode, prefill and decode.
pub fn token_throughput() -> Value {
    json!({
        "targetRef": {"name": "llm-serving"},
        "mode": "Active",
        "roles": [
            {"name": "encode", "minReplicas": 1, "maxReplicas": 4},
            {"name": "prefill", "minReplicas": 2, "maxReplicas": 16},
            {"name": "decode", "minReplicas": 2, "maxReplicas": 16}
        ],
        "ratios": [
            {"numeratorRole": "prefill", "denominatorRole": "decode", "target": "1", "min": "0.5", "max": "2"},
            {"numeratorRole": "encode", "denominatorRole": "prefill", "target": "0.5"}
        ],
        "algorithm": {"type": "TokenThroughput", "tokenThroughput": {
            "prefillTargetTokensPerSecond": "2000",
            "decodeTargetTokensPerSecond": "800"
        }}
    })
}

/// The spec's Predictive example: prefill and decode.
pub fn predictive() -> Value {
    json!({
        "targetRef": {"name": "llm-serving"},
        "roles": [
            {"name": "prefill", "minReplicas": 2, "maxReplicas": 16},
            {"name": "decode", "minReplicas": 2, "maxReplicas": 16}
        ],
        "algorithm": {"type": "Predictive", "predictive": {
            "tokenThroughput": {
                "prefillTargetTokensPerSecond": "2000",
                "decodeTargetTokensPerSecond": "800"
            },
            "prefillTokenCapacityPerReplica": "2000",
            "decodeTokenCapacityPerReplica": "800"
        }}
    })
}

/// A target matching [`token_throughput`].
pub fn target() -> Value {
    json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "llm-serving", "namespace": "default", "uid": "t-1", "generation": 3},
        "spec": {
            "engine": {"name": "SGLang"},
            "router": {"name": "sglang-gateway"},
            "roles": [
                {"name": "encode", "kind": "Encode", "replicas": 1, "instanceType": "l40s"},
                {"name": "prefill", "kind": "Prefill", "replicas": 2, "instanceType": "h200"},
                {"name": "decode", "kind": "Decode", "replicas": 2, "size": 2, "instanceType": "h200"}
            ]
        }
    })
}

/// Sets the value at a JSON pointer, creating the last key (or appending at index == len).
pub fn set(doc: &mut Value, pointer: &str, value: Value) {
    let (parent, last) = pointer.rsplit_once('/').expect("pointer has a slash");
    let parent = doc
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no parent for {pointer}"));
    match parent {
        Value::Object(map) => {
            map.insert(last.to_string(), value);
        }
        Value::Array(items) => {
            let index: usize = last.parse().expect("array index");
            if index == items.len() {
                items.push(value);
            } else {
                items[index] = value;
            }
        }
        _ => panic!("{pointer} does not point into a container"),
    }
}

/// Removes the value at a JSON pointer.
pub fn remove(doc: &mut Value, pointer: &str) {
    let (parent, last) = pointer.rsplit_once('/').expect("pointer has a slash");
    match doc.pointer_mut(parent).expect("parent exists") {
        Value::Object(map) => {
            map.remove(last)
                .unwrap_or_else(|| panic!("nothing at {pointer}"));
        }
        Value::Array(items) => {
            items.remove(last.parse::<usize>().expect("array index"));
        }
        _ => panic!("{pointer} does not point into a container"),
    }
}

pub fn spec(value: &Value) -> ModelDeploymentScalerSpec {
    serde_json::from_value(value.clone()).expect("the test spec deserializes")
}

pub fn md(value: &Value) -> ModelDeployment {
    serde_json::from_value(value.clone()).expect("the test target deserializes")
}

pub fn check(spec_value: &Value, target_value: Option<&Value>) -> Report {
    let target = target_value.map(md);
    validate(&spec(spec_value), None, target.as_ref())
}

/// Sorted, de-duplicated error paths.
pub fn error_paths(report: &Report) -> Vec<String> {
    let mut paths: Vec<String> = report.errors.iter().map(|e| e.path.clone()).collect();
    paths.sort();
    paths.dedup();
    paths
}
