//! The CRD's structural schema and CEL rules, evaluated locally with kube-cel: every rule
//! compiles, valid scalers pass, and each cross-field rule refuses what it should.

use crate::common;

use common::*;
use kube::CustomResourceExt;
use mds_api::ModelDeploymentScaler;
use serde_json::{Value, json};

fn schema() -> Value {
    let crd = serde_json::to_value(ModelDeploymentScaler::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm-serving", "namespace": "default"},
        "spec": spec
    })
}

/// CEL messages for `spec` (and `old` on update).
fn cel_errors(spec: Value, old: Option<Value>) -> Vec<String> {
    let old = old.map(object);
    match kube_cel::validate(&schema(), &object(spec), old.as_ref()) {
        Ok(()) => vec![],
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| e.to_string())
            .collect(),
    }
}

#[test]
fn every_rule_compiles() {
    let compiled = kube_cel::compile_schema(&schema());
    assert!(
        !compiled.has_errors(),
        "{:?}",
        compiled.compilation_errors()
    );
}

#[test]
fn the_examples_pass_the_rules() {
    for spec in [proportional(), token_throughput(), predictive()] {
        assert_eq!(cel_errors(spec, None), Vec::<String>::new());
    }
}

#[test]
fn min_replicas_must_not_exceed_max() {
    let mut spec = proportional();
    set(&mut spec, "/roles/0/minReplicas", json!(20));
    let errors = cel_errors(spec, None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("minReplicas must not exceed maxReplicas"),
        "{errors:?}"
    );
}

#[test]
fn at_most_one_algorithm_block() {
    let mut spec = proportional();
    remove(&mut spec, "/algorithm/type");
    set(
        &mut spec,
        "/algorithm/tokenThroughput",
        json!({"serverTargetTokensPerSecond": "2000"}),
    );
    let errors = cel_errors(spec, None);
    assert!(
        errors.iter().any(|e| e.contains("set at most one")),
        "{errors:?}"
    );
}

#[test]
fn only_the_block_matching_the_type() {
    let mut spec = proportional();
    set(&mut spec, "/algorithm/type", json!("Predictive"));
    let errors = cel_errors(spec, None);
    assert!(
        errors.iter().any(|e| e.contains("matching algorithm.type")),
        "{errors:?}"
    );
}

#[test]
fn proportional_type_needs_its_block() {
    let mut spec = proportional();
    remove(&mut spec, "/algorithm/proportional");
    let errors = cel_errors(spec, None);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("needs a proportional block")),
        "{errors:?}"
    );
}

#[test]
fn ratio_roles_differ_and_min_does_not_exceed_max() {
    let mut spec = token_throughput();
    set(&mut spec, "/ratios/1/denominatorRole", json!("encode"));
    set(&mut spec, "/ratios/0/min", json!("3"));
    let errors = cel_errors(spec, None);
    assert!(
        errors.iter().any(|e| e.contains("two different roles")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("min must not exceed max")),
        "{errors:?}"
    );
    // Quantities compare by value, not as text: "500m" < "2".
    let mut spec = token_throughput();
    set(&mut spec, "/ratios/0/min", json!("500m"));
    assert_eq!(cel_errors(spec, None), Vec::<String>::new());
}

#[test]
fn target_ref_is_immutable() {
    let old = proportional();
    let mut new = proportional();
    set(&mut new, "/targetRef/name", json!("other"));
    let errors = cel_errors(new, Some(old.clone()));
    assert!(errors.iter().any(|e| e.contains("immutable")), "{errors:?}");
    assert_eq!(cel_errors(old.clone(), Some(old)), Vec::<String>::new());
}

#[test]
fn schema_carries_ranges_enums_and_list_keys() {
    let schema = schema();
    let spec = &schema["properties"]["spec"];
    let roles = &spec["properties"]["roles"];
    assert_eq!(roles["x-kubernetes-list-type"], "map");
    assert_eq!(roles["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(roles["minItems"], 1);
    let role = &roles["items"]["properties"];
    assert_eq!(role["maxReplicas"]["maximum"], 1024.0);
    assert_eq!(role["minReplicas"]["minimum"], 1.0);
    let required = roles["items"]["required"].as_array().unwrap();
    assert!(required.contains(&json!("maxReplicas")));
    let interval = &spec["properties"]["sampling"]["properties"]["intervalSeconds"];
    assert_eq!(
        (interval["minimum"].clone(), interval["maximum"].clone()),
        (json!(5.0), json!(300.0))
    );
    let mode = &spec["properties"]["mode"];
    assert_eq!(mode["enum"], json!(["Shadow", "Active"]));
    let ratios = &spec["properties"]["ratios"];
    assert_eq!(
        ratios["x-kubernetes-list-map-keys"],
        json!(["numeratorRole", "denominatorRole"])
    );
    let target = &ratios["items"]["properties"]["target"];
    assert_eq!(target["x-kubernetes-int-or-string"], true);
    let proportional = &spec["properties"]["algorithm"]["properties"]["proportional"];
    assert!(
        proportional["required"]
            .as_array()
            .unwrap()
            .contains(&json!("metric"))
    );
    let spec_required = schema["required"].as_array().unwrap();
    assert!(spec_required.contains(&json!("spec")));
}

/// Every `enum` in the schema, with its path.
fn enums(value: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            if let Some(e) = map.get("enum") {
                out.push((path.to_string(), e.clone()));
            }
            for (k, v) in map {
                enums(v, &format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                enums(v, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn no_enum_admits_null_and_priority_items_are_role_names() {
    let schema = schema();
    let mut found = vec![];
    enums(&schema, "", &mut found);
    assert!(!found.is_empty());
    for (path, values) in &found {
        assert!(
            !values.as_array().unwrap().contains(&Value::Null),
            "{path} lists null"
        );
    }
    let rebalance = &schema["properties"]["spec"]["properties"]["rebalance"]["properties"];
    assert_eq!(
        rebalance["policy"]["enum"],
        json!(["Opposing", "Priority", "Disabled"])
    );
    let item = &rebalance["priority"]["items"];
    assert_eq!(
        (item["minLength"].clone(), item["maxLength"].clone()),
        (json!(1), json!(63))
    );
}

#[test]
fn crd_names_columns_and_subresources() {
    let crd = serde_json::to_value(ModelDeploymentScaler::crd()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        "modeldeploymentscalers.worker.gpustack.ai"
    );
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["mds"]));
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert_eq!(version["subresources"]["status"], json!({}));
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Target",
            "Mode",
            "Desired",
            "Ready",
            "Last Reason",
            "Blocked",
            "Algorithm",
            "Bound",
            "Active",
            "Age"
        ]
    );
}
