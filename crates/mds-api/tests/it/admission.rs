//! Admission rules: a table of invalid manifests, each breaking one rule, with the exact error
//! paths expected. Removing a rule makes its row fail.

use crate::common;

use common::invalid_scalers::cases;
use common::*;
use serde_json::{Value, json};

#[test]
fn the_bases_are_valid_without_warnings() {
    for (name, base) in [
        ("proportional", proportional()),
        ("token", token_throughput()),
        ("predictive", predictive()),
    ] {
        let report = check(&base, None);
        assert_eq!(report.errors, vec![], "{name}");
        assert_eq!(report.warnings, vec![], "{name}");
    }
    let report = check(&token_throughput(), Some(&target()));
    assert_eq!(report.errors, vec![]);
    assert_eq!(report.warnings, vec![]);
}

#[test]
fn each_invalid_manifest_reports_exactly_its_paths() {
    let mut failures = Vec::new();
    for case in cases() {
        let (spec, target) = case.build();
        let report = check(&spec, case.with_target.then_some(&target));
        let paths = error_paths(&report);
        let expected: Vec<String> = case.expect.iter().map(|p| p.to_string()).collect();
        if paths != expected {
            failures.push(format!(
                "{}: expected {expected:?}, got {:#?}",
                case.name, report.errors
            ));
        }
        for error in &report.errors {
            assert!(
                error.message.len() > 20 && !error.message.ends_with('.'),
                "{}: terse message {error}",
                case.name
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn target_ref_is_immutable_on_update() {
    let old = spec(&proportional());
    let mut new_value = proportional();
    set(&mut new_value, "/targetRef/name", json!("other"));
    let report = mds_api::validation::validate(&spec(&new_value), Some(&old), None);
    assert_eq!(error_paths(&report), vec!["spec.targetRef.name"]);
    assert!(
        report.errors[0].message.contains("immutable"),
        "{}",
        report.errors[0]
    );
    let unchanged = mds_api::validation::validate(&old, Some(&old), None);
    assert!(unchanged.is_valid());
}

#[test]
fn a_direct_ratio_to_a_targeted_role_covers_an_untargeted_role() {
    let mut value = proportional();
    set(
        &mut value,
        "/roles/1",
        json!({"name": "sidecar", "maxReplicas": 8}),
    );
    set(
        &mut value,
        "/ratios",
        json!([{"numeratorRole": "sidecar", "denominatorRole": "server", "target": "0.5"}]),
    );
    assert!(check(&value, None).is_valid());
}

#[test]
fn warnings_admit_with_a_note() {
    let mut value = predictive();
    set(&mut value, "/algorithm/predictive/qLevel", json!("0"));
    set(
        &mut value,
        "/algorithm/predictive/tokenThroughput/panicWindowSeconds",
        json!(200),
    );
    let report = check(&value, None);
    assert!(report.is_valid(), "{:?}", report.errors);
    let paths: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "spec.algorithm.predictive.tokenThroughput.panicWindowSeconds",
            "spec.algorithm.predictive.qLevel"
        ]
    );
    assert!(
        report.warnings[1].message.contains("default \"1\""),
        "{}",
        report.warnings[1]
    );

    let mut value = token_throughput();
    set(&mut value, "/rebalance", json!({"priority": ["decode"]}));
    let report = check(&value, None);
    assert!(report.is_valid());
    assert_eq!(report.warnings[0].path, "spec.rebalance.priority");
}

#[test]
fn target_current_count_outside_bounds_is_a_warning() {
    let mut t = target();
    set(&mut t, "/spec/roles/1/replicas", json!(40));
    let report = check(&token_throughput(), Some(&t));
    assert!(report.is_valid());
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(report.warnings[0].path, "spec.roles[1]");
    assert!(report.warnings[0].message.contains("BoundsConflict"));
}

#[test]
fn unknown_engine_is_a_warning_naming_it() {
    let mut t = target();
    set(&mut t, "/spec/engine/name", json!("TensorRT-LLM"));
    let report = check(&token_throughput(), Some(&t));
    assert!(report.is_valid());
    assert!(
        report.warnings[0].message.contains("TensorRT-LLM"),
        "{}",
        report.warnings[0]
    );
}

#[test]
fn undecided_feasibility_admits_with_a_warning() {
    // a >= b >= c >= d >= e (each step at most doubling) yet e = 3a: infeasible, but only a
    // deep search notices, and the search's work bound runs out first. Admission must admit
    // with a warning rather than guess (D17).
    let roles: Vec<Value> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| json!({"name": n, "minReplicas": 1, "maxReplicas": 1024}))
        .collect();
    let chain = |n: &str, d: &str| json!({"numeratorRole": n, "denominatorRole": d, "min": "1", "max": "2"});
    let targets: Vec<Value> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| json!({"name": n, "target": "4"}))
        .collect();
    let value = json!({
        "targetRef": {"name": "llm-serving"},
        "roles": roles,
        "ratios": [chain("a", "b"), chain("b", "c"), chain("c", "d"), chain("d", "e"),
                   {"numeratorRole": "e", "denominatorRole": "a", "min": "3", "max": "3"}],
        "algorithm": {"proportional": {"metric": "QueueDepth", "roleTargets": targets}}
    });
    let report = check(&value, None);
    assert!(report.is_valid(), "{:?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert_eq!(report.warnings[0].path, "spec.ratios[0]");
    assert!(report.warnings[0].message.contains("could not be decided"));
}

#[test]
fn validate_scaler_requires_a_name() {
    let scaler: mds_api::ModelDeploymentScaler = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {},
        "spec": proportional()
    }))
    .unwrap();
    let report = mds_api::validation::validate_scaler(&scaler, None, None);
    assert_eq!(error_paths(&report), vec!["metadata.name"]);
}

#[test]
fn a_long_window_at_a_short_interval_is_fine() {
    // D30: change-point histories reach any window, so no warning about history reach.
    let mut value = proportional();
    set(&mut value, "/sampling", json!({"intervalSeconds": 5}));
    set(
        &mut value,
        "/behavior",
        json!({"scaleDown": {"stabilizationWindowSeconds": 1800}}),
    );
    let report = check(&value, None);
    assert!(report.is_valid());
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn list_sizes_match_the_crd_caps() {
    let mut value = proportional();
    let roles: Vec<Value> = (0..33)
        .map(|i| json!({"name": format!("r{i}"), "maxReplicas": 2}))
        .collect();
    let targets: Vec<Value> = (0..33)
        .map(|i| json!({"name": format!("r{i}"), "target": "8"}))
        .collect();
    set(&mut value, "/roles", json!(roles));
    set(
        &mut value,
        "/algorithm/proportional/roleTargets",
        json!(targets),
    );
    assert_eq!(
        error_paths(&check(&value, None)),
        vec!["spec.algorithm.proportional.roleTargets", "spec.roles"]
    );
}

#[test]
fn an_empty_kind_is_server_and_size_one_service_names_are_dns_labels() {
    let mut t = target();
    set(&mut t, "/spec/roles/2/kind", json!(""));
    let report = check(&token_throughput(), Some(&t));
    assert_eq!(
        error_paths(&report),
        vec!["spec.algorithm.tokenThroughput.serverTargetTokensPerSecond"],
        "Server, not unknown"
    );
    let mut value = token_throughput();
    let mut t = target();
    set(&mut value, "/targetRef/name", json!("llm.serving"));
    set(&mut t, "/metadata/name", json!("llm.serving"));
    set(&mut t, "/spec/roles/2/size", json!(1));
    let paths = error_paths(&check(&value, Some(&t)));
    assert!(
        paths.contains(&"spec.roles[0].maxReplicas".to_string()),
        "{paths:?}"
    );
}

#[test]
fn an_unknown_kind_is_a_warning_under_proportional() {
    // D31: Proportional needs no kind, so the scaler is admitted whichever came first.
    let mut t = target();
    set(&mut t, "/spec/roles/2/kind", json!("Speculator"));
    let mut s = proportional();
    set(
        &mut s,
        "/roles",
        json!([
            {"name": "encode", "maxReplicas": 4},
            {"name": "prefill", "maxReplicas": 16},
            {"name": "decode", "maxReplicas": 16}
        ]),
    );
    set(
        &mut s,
        "/algorithm/proportional/roleTargets",
        json!([{"name": "encode", "target": "4"}, {"name": "prefill", "target": "4"}, {"name": "decode", "target": "4"}]),
    );
    let report = check(&s, Some(&t));
    assert!(report.is_valid(), "{:?}", report.errors);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.path == "spec.roles[2]" && w.message.contains("\"Speculator\"")),
        "{:?}",
        report.warnings
    );
}
