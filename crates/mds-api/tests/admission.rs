//! Admission rules: a table of invalid manifests, each breaking one rule, with the exact error
//! paths expected. Removing a rule makes its row fail.

mod common;

use common::*;
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    base: fn() -> Value,
    /// Edits the spec and the target.
    edit: fn(&mut Value, &mut Value),
    /// Whether the target takes part (target-dependent rules run only with it).
    with_target: bool,
    expect: &'static [&'static str],
}

const fn case(
    name: &'static str,
    base: fn() -> Value,
    edit: fn(&mut Value, &mut Value),
    expect: &'static [&'static str],
) -> Case {
    Case {
        name,
        base,
        edit,
        with_target: false,
        expect,
    }
}

const fn with_target(
    name: &'static str,
    base: fn() -> Value,
    edit: fn(&mut Value, &mut Value),
    expect: &'static [&'static str],
) -> Case {
    Case {
        name,
        base,
        edit,
        with_target: true,
        expect,
    }
}

fn cases() -> Vec<Case> {
    vec![
        // targetRef
        case(
            "targetRef.name required",
            proportional,
            |s, _| set(s, "/targetRef/name", json!("")),
            &["spec.targetRef.name"],
        ),
        case(
            "targetRef.name is a DNS name",
            proportional,
            |s, _| set(s, "/targetRef/name", json!("LLM_serving")),
            &["spec.targetRef.name"],
        ),
        // roles and bounds
        case(
            "at least one role",
            proportional,
            |s, _| {
                set(s, "/roles", json!([]));
                set(s, "/algorithm/proportional/roleTargets", json!([]));
            },
            &["spec.roles"],
        ),
        case(
            "role names are unique",
            proportional,
            |s, _| set(s, "/roles/1", json!({"name": "server", "maxReplicas": 4})),
            &["spec.roles[1].name"],
        ),
        case(
            "role names are DNS labels",
            proportional,
            |s, _| {
                set(s, "/roles/0/name", json!("Server"));
                set(
                    s,
                    "/algorithm/proportional/roleTargets/0/name",
                    json!("Server"),
                );
            },
            &["spec.roles[0].name"],
        ),
        case(
            "minReplicas at least 1",
            proportional,
            |s, _| set(s, "/roles/0/minReplicas", json!(0)),
            &["spec.roles[0].minReplicas"],
        ),
        case(
            "minReplicas at most 1024",
            proportional,
            |s, _| {
                set(s, "/roles/0/minReplicas", json!(1025));
                set(s, "/roles/0/maxReplicas", json!(1024));
            },
            &["spec.roles[0].minReplicas"],
        ),
        case(
            "maxReplicas at most 1024",
            proportional,
            |s, _| set(s, "/roles/0/maxReplicas", json!(1025)),
            &["spec.roles[0].maxReplicas"],
        ),
        case(
            "maxReplicas at least 1",
            proportional,
            |s, _| {
                remove(s, "/roles/0/minReplicas");
                set(s, "/roles/0/maxReplicas", json!(0));
            },
            &["spec.roles[0].maxReplicas"],
        ),
        case(
            "minReplicas at most maxReplicas",
            proportional,
            |s, _| set(s, "/roles/0/minReplicas", json!(17)),
            &["spec.roles[0].minReplicas"],
        ),
        // sampling
        case(
            "intervalSeconds at least 5",
            proportional,
            |s, _| set(s, "/sampling", json!({"intervalSeconds": 4})),
            &["spec.sampling.intervalSeconds"],
        ),
        case(
            "intervalSeconds at most 300",
            proportional,
            |s, _| set(s, "/sampling", json!({"intervalSeconds": 301})),
            &["spec.sampling.intervalSeconds"],
        ),
        case(
            "pendingTimeoutSeconds at least 60",
            proportional,
            |s, _| set(s, "/sampling", json!({"pendingTimeoutSeconds": 59})),
            &["spec.sampling.pendingTimeoutSeconds"],
        ),
        case(
            "pendingTimeoutSeconds at most 1200",
            proportional,
            |s, _| set(s, "/sampling", json!({"pendingTimeoutSeconds": 1201})),
            &["spec.sampling.pendingTimeoutSeconds"],
        ),
        // algorithm blocks
        case(
            "only the matching block (explicit type)",
            proportional,
            |s, _| set(s, "/algorithm/type", json!("TokenThroughput")),
            &[
                "spec.algorithm.proportional",
                "spec.algorithm.tokenThroughput",
            ],
        ),
        case(
            "only the matching block (inferred type)",
            proportional,
            |s, _| {
                remove(s, "/algorithm/type");
                set(s, "/algorithm/predictive", json!({"horizonSeconds": 60}));
            },
            &["spec.algorithm.predictive"],
        ),
        case(
            "Proportional needs its block",
            proportional,
            |s, _| remove(s, "/algorithm/proportional"),
            &["spec.algorithm.proportional"],
        ),
        case(
            "TokenThroughput needs its block",
            token_throughput,
            |s, _| remove(s, "/algorithm/tokenThroughput"),
            &["spec.algorithm.tokenThroughput"],
        ),
        case(
            "omitted algorithm selects TokenThroughput",
            proportional,
            |s, _| remove(s, "/algorithm"),
            &["spec.algorithm.tokenThroughput"],
        ),
        case(
            "Predictive needs its block",
            predictive,
            |s, _| remove(s, "/algorithm/predictive"),
            &["spec.algorithm.predictive"],
        ),
        // Proportional
        case(
            "metric required",
            proportional,
            |s, _| remove(s, "/algorithm/proportional/metric"),
            &["spec.algorithm.proportional.metric"],
        ),
        case(
            "tolerance positive",
            proportional,
            |s, _| set(s, "/algorithm/proportional/tolerance", json!("0")),
            &["spec.algorithm.proportional.tolerance"],
        ),
        case(
            "tolerance at most 1",
            proportional,
            |s, _| set(s, "/algorithm/proportional/tolerance", json!("1001m")),
            &["spec.algorithm.proportional.tolerance"],
        ),
        case(
            "tolerance is a quantity",
            proportional,
            |s, _| set(s, "/algorithm/proportional/tolerance", json!("ten percent")),
            &["spec.algorithm.proportional.tolerance"],
        ),
        case(
            "roleTargets name scaled roles",
            proportional,
            |s, _| {
                set(
                    s,
                    "/algorithm/proportional/roleTargets/0/name",
                    json!("decode"),
                )
            },
            &[
                "spec.algorithm.proportional.roleTargets",
                "spec.algorithm.proportional.roleTargets[0].name",
            ],
        ),
        case(
            "roleTargets names are unique",
            proportional,
            |s, _| {
                set(
                    s,
                    "/algorithm/proportional/roleTargets/1",
                    json!({"name": "server", "target": "4"}),
                )
            },
            &["spec.algorithm.proportional.roleTargets[1].name"],
        ),
        case(
            "roleTargets targets are positive",
            proportional,
            |s, _| {
                set(
                    s,
                    "/algorithm/proportional/roleTargets/0/target",
                    json!("-8"),
                )
            },
            &["spec.algorithm.proportional.roleTargets[0].target"],
        ),
        case(
            "every scaled role has a target or a direct ratio to a targeted role",
            proportional,
            |s, _| set(s, "/roles/1", json!({"name": "sidecar", "maxReplicas": 4})),
            &["spec.algorithm.proportional.roleTargets"],
        ),
        // TokenThroughput
        case(
            "TokenThroughput needs a capacity",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput",
                    json!({"stableWindowSeconds": 120}),
                )
            },
            &["spec.algorithm.tokenThroughput"],
        ),
        case(
            "stableWindowSeconds at least 30",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/stableWindowSeconds",
                    json!(29),
                )
            },
            &["spec.algorithm.tokenThroughput.stableWindowSeconds"],
        ),
        case(
            "stableWindowSeconds at most 600",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/stableWindowSeconds",
                    json!(601),
                )
            },
            &["spec.algorithm.tokenThroughput.stableWindowSeconds"],
        ),
        case(
            "panicWindowSeconds at least 10",
            token_throughput,
            |s, _| set(s, "/algorithm/tokenThroughput/panicWindowSeconds", json!(9)),
            &["spec.algorithm.tokenThroughput.panicWindowSeconds"],
        ),
        case(
            "panicWindowSeconds at most 300",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/panicWindowSeconds",
                    json!(301),
                )
            },
            &["spec.algorithm.tokenThroughput.panicWindowSeconds"],
        ),
        case(
            "panicThreshold positive",
            token_throughput,
            |s, _| set(s, "/algorithm/tokenThroughput/panicThreshold", json!("0")),
            &["spec.algorithm.tokenThroughput.panicThreshold"],
        ),
        case(
            "ttftTargetMilliseconds positive",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/ttftTargetMilliseconds",
                    json!("-1"),
                )
            },
            &["spec.algorithm.tokenThroughput.ttftTargetMilliseconds"],
        ),
        case(
            "itlTargetMilliseconds positive",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/itlTargetMilliseconds",
                    json!("0m"),
                )
            },
            &["spec.algorithm.tokenThroughput.itlTargetMilliseconds"],
        ),
        case(
            "capacities positive",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm/tokenThroughput/serverTargetTokensPerSecond",
                    json!("0"),
                )
            },
            &["spec.algorithm.tokenThroughput.serverTargetTokensPerSecond"],
        ),
        // Predictive
        case(
            "Predictive needs the fallback block",
            predictive,
            |s, _| remove(s, "/algorithm/predictive/tokenThroughput"),
            &["spec.algorithm.predictive.tokenThroughput"],
        ),
        case(
            "Predictive fallback follows the TokenThroughput rules",
            predictive,
            |s, _| {
                set(
                    s,
                    "/algorithm/predictive/tokenThroughput/panicWindowSeconds",
                    json!(5),
                )
            },
            &["spec.algorithm.predictive.tokenThroughput.panicWindowSeconds"],
        ),
        case(
            "Predictive needs a forecast capacity",
            predictive,
            |s, _| {
                remove(s, "/algorithm/predictive/prefillTokenCapacityPerReplica");
                remove(s, "/algorithm/predictive/decodeTokenCapacityPerReplica");
            },
            &["spec.algorithm.predictive"],
        ),
        case(
            "forecast capacities positive",
            predictive,
            |s, _| {
                set(
                    s,
                    "/algorithm/predictive/decodeTokenCapacityPerReplica",
                    json!("0"),
                )
            },
            &["spec.algorithm.predictive.decodeTokenCapacityPerReplica"],
        ),
        case(
            "horizonSeconds at least 30",
            predictive,
            |s, _| set(s, "/algorithm/predictive/horizonSeconds", json!(29)),
            &["spec.algorithm.predictive.horizonSeconds"],
        ),
        case(
            "horizonSeconds at most 600",
            predictive,
            |s, _| set(s, "/algorithm/predictive/horizonSeconds", json!(601)),
            &["spec.algorithm.predictive.horizonSeconds"],
        ),
        case(
            "minPoints at least 1",
            predictive,
            |s, _| set(s, "/algorithm/predictive/minPoints", json!(0)),
            &["spec.algorithm.predictive.minPoints"],
        ),
        case(
            "minPoints at most 64",
            predictive,
            |s, _| set(s, "/algorithm/predictive/minPoints", json!(65)),
            &["spec.algorithm.predictive.minPoints"],
        ),
        case(
            "Kalman noises are quantities",
            predictive,
            |s, _| set(s, "/algorithm/predictive/qTrend", json!("fast")),
            &["spec.algorithm.predictive.qTrend"],
        ),
        // ratios
        case(
            "ratio roles are scaled roles",
            token_throughput,
            |s, _| set(s, "/ratios/0/numeratorRole", json!("router")),
            &["spec.ratios[0].numeratorRole"],
        ),
        case(
            "ratio roles are distinct",
            token_throughput,
            |s, _| set(s, "/ratios/0/denominatorRole", json!("prefill")),
            &["spec.ratios[0].denominatorRole"],
        ),
        case(
            "ordered pairs are unique",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/ratios/2",
                    json!({"numeratorRole": "prefill", "denominatorRole": "decode", "max": "3"}),
                )
            },
            &["spec.ratios[2]"],
        ),
        case(
            "ratio min positive",
            token_throughput,
            |s, _| set(s, "/ratios/0/min", json!("0")),
            &["spec.ratios[0].min"],
        ),
        case(
            "ratio max positive",
            token_throughput,
            |s, _| set(s, "/ratios/0/max", json!("-2")),
            &["spec.ratios[0].max"],
        ),
        case(
            "ratio target positive",
            token_throughput,
            |s, _| set(s, "/ratios/1/target", json!("0")),
            &["spec.ratios[1].target"],
        ),
        case(
            "ratio min at most max",
            token_throughput,
            |s, _| {
                set(s, "/ratios/0/min", json!("3"));
                remove(s, "/ratios/0/target");
            },
            &["spec.ratios[0].min"],
        ),
        case(
            "ratio target not below min",
            token_throughput,
            |s, _| set(s, "/ratios/0/target", json!("0.4")),
            &["spec.ratios[0].target"],
        ),
        case(
            "ratio target not above max",
            token_throughput,
            |s, _| set(s, "/ratios/0/target", json!("2.5")),
            &["spec.ratios[0].target"],
        ),
        case(
            "ratio bands feasible within bounds (D17)",
            token_throughput,
            |s, _| {
                // prefill fixed at 0.5 x decode while decode may only be 3.
                set(s, "/roles/2/minReplicas", json!(3));
                set(s, "/roles/2/maxReplicas", json!(3));
                set(
                    s,
                    "/ratios/0",
                    json!({"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "0.5"}),
                );
            },
            &["spec.ratios[0]"],
        ),
        // behavior
        case(
            "scaleUp window at most 600",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleUp": {"stabilizationWindowSeconds": 601}}),
                )
            },
            &["spec.behavior.scaleUp.stabilizationWindowSeconds"],
        ),
        case(
            "scaleUp window nonnegative",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleUp": {"stabilizationWindowSeconds": -1}}),
                )
            },
            &["spec.behavior.scaleUp.stabilizationWindowSeconds"],
        ),
        case(
            "maxStepReplicas nonnegative",
            proportional,
            |s, _| set(s, "/behavior", json!({"scaleUp": {"maxStepReplicas": -1}})),
            &["spec.behavior.scaleUp.maxStepReplicas"],
        ),
        case(
            "maxStepPercent at most 1000",
            proportional,
            |s, _| set(s, "/behavior", json!({"scaleUp": {"maxStepPercent": 1001}})),
            &["spec.behavior.scaleUp.maxStepPercent"],
        ),
        case(
            "scaleUp stepPolicy value nonnegative",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleUp": {"stepPolicy": {"type": "Pods", "value": -1}}}),
                )
            },
            &["spec.behavior.scaleUp.stepPolicy.value"],
        ),
        case(
            "scaleDown window at most 1800",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleDown": {"stabilizationWindowSeconds": 1801}}),
                )
            },
            &["spec.behavior.scaleDown.stabilizationWindowSeconds"],
        ),
        case(
            "cooldownAfterAbortSeconds at most 3600",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleDown": {"cooldownAfterAbortSeconds": 3601}}),
                )
            },
            &["spec.behavior.scaleDown.cooldownAfterAbortSeconds"],
        ),
        case(
            "decodePostScaleUpGraceSeconds at most 3600",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleDown": {"decodePostScaleUpGraceSeconds": 3601}}),
                )
            },
            &["spec.behavior.scaleDown.decodePostScaleUpGraceSeconds"],
        ),
        case(
            "scaleDown stepPolicy value nonnegative",
            proportional,
            |s, _| {
                set(
                    s,
                    "/behavior",
                    json!({"scaleDown": {"stepPolicy": {"type": "Percent", "value": -10}}}),
                )
            },
            &["spec.behavior.scaleDown.stepPolicy.value"],
        ),
        // rebalance
        case(
            "priority names scaled roles",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/rebalance",
                    json!({"policy": "Priority", "priority": ["decode", "router"]}),
                )
            },
            &["spec.rebalance.priority[1]"],
        ),
        case(
            "priority names are unique",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/rebalance",
                    json!({"policy": "Priority", "priority": ["decode", "prefill", "decode"]}),
                )
            },
            &["spec.rebalance.priority[2]"],
        ),
        // with the target
        with_target(
            "every target role has bounds",
            token_throughput,
            |_, t| {
                set(
                    t,
                    "/spec/roles/3",
                    json!({"name": "draft", "kind": "Decode"}),
                )
            },
            &["spec.roles"],
        ),
        with_target(
            "every scaler role exists on the target",
            token_throughput,
            |s, t| {
                set(s, "/roles/3", json!({"name": "draft", "maxReplicas": 2}));
                set(
                    s,
                    "/ratios/2",
                    json!({"numeratorRole": "draft", "denominatorRole": "decode", "target": "1"}),
                );
                let _ = t;
            },
            &["spec.roles[3].name"],
        ),
        with_target(
            "roles with a custom command are refused",
            token_throughput,
            |_, t| set(t, "/spec/roles/1/command", json!(["python", "serve.py"])),
            &["spec.roles[1]"],
        ),
        with_target(
            "elasticEp roles are refused",
            token_throughput,
            |_, t| set(t, "/spec/roles/2/elasticEp", json!({"width": 4})),
            &["spec.roles[2]"],
        ),
        with_target(
            "unknown role kinds are refused under a token algorithm (D31)",
            token_throughput,
            |_, t| set(t, "/spec/roles/2/kind", json!("Speculator")),
            &["spec.roles[2]"],
        ),
        with_target(
            "every scaled kind has a capacity",
            token_throughput,
            |s, _| remove(s, "/algorithm/tokenThroughput/decodeTargetTokensPerSecond"),
            &["spec.algorithm.tokenThroughput.decodeTargetTokensPerSecond"],
        ),
        with_target(
            "a Server role needs the server capacity",
            token_throughput,
            |_, t| set(t, "/spec/roles/2/kind", json!("Server")),
            &["spec.algorithm.tokenThroughput.serverTargetTokensPerSecond"],
        ),
        with_target(
            "an absent kind is Server",
            token_throughput,
            |_, t| remove(t, "/spec/roles/2/kind"),
            &["spec.algorithm.tokenThroughput.serverTargetTokensPerSecond"],
        ),
        with_target(
            "Encode roles need a ratio to Prefill or Decode",
            token_throughput,
            |s, _| remove(s, "/ratios/1"),
            &["spec.ratios"],
        ),
        with_target(
            "an Encode ratio to another Encode role does not count",
            token_throughput,
            |s, t| {
                set(
                    t,
                    "/spec/roles/3",
                    json!({"name": "encode2", "kind": "Encode"}),
                );
                set(s, "/roles/3", json!({"name": "encode2", "maxReplicas": 4}));
                set(
                    s,
                    "/ratios/2",
                    json!({"numeratorRole": "encode2", "denominatorRole": "encode", "target": "1"}),
                );
            },
            &["spec.ratios"],
        ),
        with_target(
            "Predictive needs each kind's forecast capacity",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/algorithm",
                    json!({"predictive": {
                        "tokenThroughput": {"prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800"},
                        "prefillTokenCapacityPerReplica": "2000"
                    }}),
                );
            },
            &["spec.algorithm.predictive.decodeTokenCapacityPerReplica"],
        ),
        with_target(
            "generated Pod names fit 63 characters at maxReplicas",
            token_throughput,
            |s, t| {
                let long = "a-deployment-name-that-is-quite-long-already-49ch"; // 49 characters
                set(s, "/targetRef/name", json!(long));
                set(t, "/metadata/name", json!(long));
                set(s, "/roles/2/maxReplicas", json!(1000)); // "-decode-r999-m1" adds 15: 64
                set(s, "/roles/2/minReplicas", json!(2));
            },
            &["spec.roles[2].maxReplicas"],
        ),
        with_target(
            "Service names of instances do not collide with other roles",
            token_throughput,
            |s, t| {
                set(
                    t,
                    "/spec/roles/3",
                    json!({"name": "decode-r3", "kind": "Decode", "replicas": 2}),
                );
                set(
                    s,
                    "/roles/3",
                    json!({"name": "decode-r3", "minReplicas": 2, "maxReplicas": 4}),
                );
            },
            &["spec.roles[2].maxReplicas"],
        ),
    ]
}

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
        let mut spec = (case.base)();
        let mut target = target();
        (case.edit)(&mut spec, &mut target);
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
