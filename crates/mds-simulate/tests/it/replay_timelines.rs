//! Replay over arbitrary timelines: every line is either refused with its line number or
//! replayed, and nothing panics, whatever the numbers, names and states in it.

use mds_api::ModelDeploymentScaler;
use mds_simulate::replay::{RETIREMENT_STATES, parse_timeline, replay};
use mds_testdata::{mk_role, mk_target};
use proptest::prelude::*;
use serde_json::{Value, json};

fn scaler(algorithm: Value) -> ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm-serving"},
        "spec": {
            "targetRef": {"name": "llm-serving"},
            "mode": "Active",
            "sampling": {"pendingTimeoutSeconds": 60},
            "roles": [
                {"name": "prefill", "minReplicas": 2, "maxReplicas": 8},
                {"name": "decode", "minReplicas": 2, "maxReplicas": 8}
            ],
            "ratios": [{"numeratorRole": "prefill", "denominatorRole": "decode", "target": "1", "min": "0.5", "max": "2"}],
            "algorithm": algorithm
        }
    }))
    .expect("a scaler")
}

fn algorithm() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(
            json!({"tokenThroughput": {"prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800", "stableWindowSeconds": 60, "panicWindowSeconds": 30}})
        ),
        Just(
            json!({"proportional": {"metric": "QueueDepth", "roleTargets": [{"name": "prefill", "target": "8"}, {"name": "decode", "target": "8"}]}})
        ),
        Just(
            json!({"predictive": {"tokenThroughput": {"prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800"}, "prefillTokenCapacityPerReplica": "2000", "decodeTokenCapacityPerReplica": "800", "minPoints": 1}})
        ),
    ]
}

fn target() -> Value {
    let role = |name: &str, kind: &str| mk_role(name).kind(kind).replicas(2).instance_type("h200");
    mk_target("llm-serving")
        .engine("SGLang")
        .router(Some("gw"))
        .role(role("prefill", "Prefill"))
        .role(role("decode", "Decode"))
        .build()
}

/// Numbers a recording might hold, and numbers it should not.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0u32..2000).prop_map(|n| json!(n)),
        2 => (0.0f64..1e6).prop_map(|n| json!(n)),
        2 => (0.0f64..=1.0).prop_map(|n| json!(n)),
        1 => any::<f64>().prop_map(|n| json!(n)),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => Just(json!(1e300)),
        1 => Just(json!(-1)),
        1 => Just(json!("12")),
        1 => Just(Value::Null),
    ]
}

fn role_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just("prefill".to_string()),
        6 => Just("decode".to_string()),
        1 => Just("prefil".to_string()),
        1 => "[a-z]{0,8}",
    ]
}

fn observation() -> impl Strategy<Value = Value> {
    let field = prop_oneof![
        Just("readyReplicas"),
        Just("sampledReplicas"),
        Just("signalState"),
        Just("promptTokensPerSecond"),
        Just("generationTokensPerSecond"),
        Just("runningRequests"),
        Just("waitingRequests"),
        Just("kvCacheUsage"),
        Just("ttftMilliseconds"),
        Just("itlMilliseconds"),
        Just("ttftObservations"),
        Just("itlObservations"),
        Just("readyReplica"),
    ];
    let state = prop_oneof![
        Just(json!("Fresh")),
        Just(json!("Idle")),
        Just(json!("Missing")),
        Just(json!("Stale")),
        Just(json!("fresh")),
    ];
    proptest::collection::vec((field, number(), state), 0..8).prop_map(|fields| {
        let mut object = serde_json::Map::new();
        for (name, value, state) in fields {
            let value = if name == "signalState" { state } else { value };
            object.insert(name.to_string(), value);
        }
        Value::Object(object)
    })
}

fn target_change() -> impl Strategy<Value = Value> {
    let ordinal = prop_oneof![6 => 0i64..12, 1 => any::<i64>()];
    let retirement = prop_oneof![
        2 => Just(Value::Null),
        4 => (role_name(), ordinal.clone(), proptest::sample::select(RETIREMENT_STATES.to_vec()))
            .prop_map(|(role, ordinal, state)| json!({"role": role, "ordinal": ordinal, "state": state})),
        1 => Just(json!({"role": "decode", "ordinal": 1, "state": "Abort"})),
        1 => Just(json!("gone")),
    ];
    (
        proptest::option::of(proptest::collection::btree_map(
            role_name(),
            prop_oneof![4 => 0i64..=12, 1 => any::<i64>()],
            0..3,
        )),
        proptest::option::of(proptest::collection::btree_map(
            role_name(),
            proptest::collection::vec(ordinal.clone(), 0..4),
            0..3,
        )),
        proptest::option::of(retirement),
        proptest::option::of(proptest::collection::btree_map(
            role_name(),
            proptest::collection::vec(ordinal, 0..3),
            0..2,
        )),
    )
        .prop_map(|(replicas, unadmitted, retirement, terminating)| {
            let mut object = serde_json::Map::new();
            if let Some(r) = replicas {
                object.insert("replicas".into(), json!(r));
            }
            if let Some(u) = unadmitted {
                object.insert("unadmitted".into(), json!(u));
            }
            if let Some(p) = terminating {
                object.insert("terminating".into(), json!(p));
            }
            if let Some(r) = retirement {
                object.insert("retirement".into(), r);
            }
            Value::Object(object)
        })
}

/// One timeline line: mostly well formed, sometimes not.
fn line() -> impl Strategy<Value = (u32, String)> {
    let t_step = prop_oneof![8 => 1u32..=60, 1 => Just(0u32)];
    let odd_t = prop_oneof![
        Just(json!(1_767_225_600_000u64)),
        Just(json!(1e19)),
        Just(json!(-5)),
        Just(json!(0.0001)),
        Just(json!("15")),
    ];
    (
        t_step,
        proptest::option::weighted(0.05, odd_t),
        proptest::collection::btree_map(role_name(), observation(), 0..3),
        proptest::option::weighted(0.3, target_change()),
        proptest::option::weighted(0.02, "[ -~]{0,20}"),
    )
        .prop_map(|(step, odd_t, roles, target, junk)| {
            if let Some(junk) = junk {
                return (step, junk);
            }
            let mut object = serde_json::Map::new();
            object.insert("t".into(), odd_t.unwrap_or(Value::Null));
            object.insert("roles".into(), json!(roles));
            if let Some(target) = target {
                object.insert("target".into(), target);
            }
            (step, Value::Object(object).to_string())
        })
}

/// Joins lines, giving each line that left `t` to us (`"t":null`) the running sum of steps.
fn with_times(lines: Vec<(u32, String)>) -> String {
    let mut t = 0u32;
    lines
        .into_iter()
        .map(|(step, text)| {
            t += step;
            text.replacen("\"t\":null", &format!("\"t\":{t}"), 1)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines with increasing times where the line left `t` to us.
fn timeline() -> impl Strategy<Value = String> {
    proptest::collection::vec(line(), 0..40).prop_map(with_times)
}

/// A line that breaks no rule, with values anywhere in their allowed ranges.
fn valid_line() -> impl Strategy<Value = (u32, String)> {
    let reading = prop_oneof![3 => 0.0f64..1e4, 1 => 0.0f64..1e12, 1 => Just(0.0)];
    let observation = (
        proptest::option::of(0u32..=1024),
        proptest::option::of(0u32..=1024),
        proptest::option::of(proptest::sample::select(vec![
            "Fresh", "Idle", "Missing", "Stale",
        ])),
        proptest::collection::vec(proptest::option::of(reading), 7),
        proptest::option::of(0.0f64..=1.0),
    )
        .prop_map(|(ready, sampled, state, readings, kv)| {
            let names = [
                "promptTokensPerSecond",
                "generationTokensPerSecond",
                "runningRequests",
                "waitingRequests",
                "ttftMilliseconds",
                "itlMilliseconds",
            ];
            let mut object = serde_json::Map::new();
            for (name, value) in names.iter().zip(readings) {
                if let Some(v) = value {
                    object.insert(name.to_string(), json!(v));
                }
            }
            let extra = [
                ("readyReplicas", ready.map(|r| json!(r))),
                ("sampledReplicas", sampled.map(|s| json!(s))),
                ("signalState", state.map(|s| json!(s))),
                ("kvCacheUsage", kv.map(|k| json!(k))),
            ];
            for (name, value) in extra {
                if let Some(v) = value {
                    object.insert(name.to_string(), v);
                }
            }
            Value::Object(object)
        });
    let role = proptest::sample::select(vec!["prefill", "decode"]);
    let retirement = prop_oneof![
        Just(Value::Null),
        (
            role.clone(),
            0i64..1024,
            proptest::sample::select(RETIREMENT_STATES.to_vec())
        )
            .prop_map(
                |(role, ordinal, state)| json!({"role": role, "ordinal": ordinal, "state": state})
            ),
    ];
    let change = (
        proptest::option::weighted(
            0.3,
            // Mostly small counts: every declared replica is Pods and a Workload in the
            // replayed cluster, so a thousand of them make a slow case; some still reach the
            // top of the range.
            proptest::collection::btree_map(
                role.clone(),
                prop_oneof![9 => 0i64..=24, 1 => 25i64..=1024],
                1..3,
            ),
        ),
        proptest::option::weighted(
            0.5,
            proptest::collection::btree_map(
                role.clone(),
                proptest::collection::vec(0i64..16, 0..4),
                1..3,
            ),
        ),
        proptest::option::weighted(0.4, retirement),
        proptest::option::weighted(
            0.2,
            proptest::collection::btree_map(
                role.clone(),
                proptest::collection::vec(0i64..16, 0..3),
                1..3,
            ),
        ),
    )
        .prop_map(|(replicas, unadmitted, retirement, terminating)| {
            let mut object = serde_json::Map::new();
            if let Some(r) = replicas {
                object.insert("replicas".into(), json!(r));
            }
            if let Some(u) = unadmitted {
                object.insert("unadmitted".into(), json!(u));
            }
            if let Some(p) = terminating {
                object.insert("terminating".into(), json!(p));
            }
            if let Some(r) = retirement {
                object.insert("retirement".into(), r);
            }
            Value::Object(object)
        });
    (
        prop_oneof![8 => 1u32..=60, 1 => 61u32..=100_000],
        proptest::collection::btree_map(role, observation, 0..3),
        proptest::option::weighted(0.3, change),
    )
        .prop_map(|(step, roles, target)| {
            let mut object = serde_json::Map::new();
            object.insert("t".into(), Value::Null);
            object.insert("roles".into(), json!(roles));
            if let Some(target) = target {
                object.insert("target".into(), target);
            }
            (step, Value::Object(object).to_string())
        })
}

fn valid_timeline() -> impl Strategy<Value = String> {
    proptest::collection::vec(valid_line(), 1..60).prop_map(with_times)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn valid_timelines_replay_every_line(algorithm in algorithm(), text in valid_timeline()) {
        let scaler = scaler(algorithm);
        let entries = parse_timeline(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let reports = replay(&scaler, target(), &entries).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(reports.len(), entries.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_timelines_are_refused_or_replayed(algorithm in algorithm(), text in timeline()) {
        let scaler = scaler(algorithm);
        match parse_timeline(&text) {
            Err(e) => prop_assert!(e.0.starts_with("timeline line "), "{}", e),
            Ok(entries) => {
                if let Err(e) = replay(&scaler, target(), &entries) {
                    prop_assert!(e.0.starts_with("timeline line "), "{}", e);
                }
            }
        }
    }
}
