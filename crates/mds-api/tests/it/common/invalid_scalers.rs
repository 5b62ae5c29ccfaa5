//! The invalid-scaler corpus: manifests that each break one admission rule, with the exact error
//! paths `mds validate` reports. Shared by the admission tests and by the testkit's test that
//! applies the same manifests to a real API server (the CRD's schema and CEL rules).

use super::{predictive, proportional, remove, set, target, token_throughput};
use serde_json::{Value, json};

pub struct Case {
    pub name: &'static str,
    pub base: fn() -> Value,
    /// Edits the spec and the target.
    pub edit: fn(&mut Value, &mut Value),
    /// Whether the target takes part (target-dependent rules run only with it).
    pub with_target: bool,
    pub expect: &'static [&'static str],
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

pub fn cases() -> Vec<Case> {
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
            "quantities have at most 64 characters",
            token_throughput,
            |s, _| {
                set(
                    s,
                    "/ratios/1/target",
                    json!(format!("0.{}5", "0".repeat(62))),
                )
            },
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

impl Case {
    /// The edited spec and target of this case.
    pub fn build(&self) -> (Value, Value) {
        let mut spec = (self.base)();
        let mut target = target();
        (self.edit)(&mut spec, &mut target);
        (spec, target)
    }
}
