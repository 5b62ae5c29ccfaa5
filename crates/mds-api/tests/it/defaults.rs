//! Stored defaults (D25): every default the spec says is stored is written by default_spec,
//! explicit values survive, zero stores the default where the spec says so, and the planner's
//! use-time defaults (Kalman noises) are never written.

use crate::common;

use common::*;
use mds_api::defaults::{default_spec, values};
use mds_api::spec::*;
use serde_json::json;

fn defaulted(value: serde_json::Value) -> ModelDeploymentScalerSpec {
    let mut spec = spec(&value);
    default_spec(&mut spec);
    spec
}

#[test]
fn omitted_fields_store_the_spec_defaults() {
    let mut value = token_throughput();
    remove(&mut value, "/mode");
    remove(&mut value, "/roles/0/minReplicas");
    let spec = defaulted(value);
    assert_eq!(spec.mode, Some(Mode::Shadow));
    assert_eq!(spec.suspend, Some(false));
    let sampling = spec.sampling.unwrap();
    assert_eq!(sampling.interval_seconds, Some(15));
    assert_eq!(sampling.pending_timeout_seconds, Some(300));
    assert_eq!(spec.roles[0].min_replicas, Some(1));
    let algorithm = spec.algorithm.unwrap();
    assert_eq!(
        algorithm.algorithm_type,
        Some(AlgorithmType::TokenThroughput)
    );
    let token = algorithm.token_throughput.unwrap();
    assert_eq!(token.stable_window_seconds, Some(180));
    assert_eq!(token.panic_window_seconds, Some(60));
    assert_eq!(token.panic_threshold, Some("2".into()));
    assert_eq!(token.ttft_target_milliseconds, Some("500".into()));
    assert_eq!(token.itl_target_milliseconds, Some("50".into()));
    let behavior = spec.behavior.unwrap();
    let up = behavior.scale_up.unwrap();
    assert_eq!(up.stabilization_window_seconds, Some(0));
    assert_eq!(up.max_step_replicas, Some(4));
    assert_eq!(up.max_step_percent, Some(100));
    assert_eq!(up.step_policy, None);
    let down = behavior.scale_down.unwrap();
    assert_eq!(down.stabilization_window_seconds, Some(300));
    assert_eq!(down.cooldown_after_abort_seconds, Some(300));
    assert_eq!(down.decode_post_scale_up_grace_seconds, Some(120));
    assert_eq!(down.step_policy, None);
    assert_eq!(
        spec.rebalance.unwrap().policy,
        Some(RebalancePolicy::Opposing)
    );
}

#[test]
fn proportional_tolerance_defaults_to_one_tenth() {
    let mut value = proportional();
    let spec = defaulted(value.clone());
    let params = spec.algorithm.unwrap().proportional.unwrap();
    assert_eq!(params.tolerance, Some(values::TOLERANCE.into()));
    assert_eq!(values::TOLERANCE, "0.1");
    set(
        &mut value,
        "/algorithm/proportional/tolerance",
        json!("0.25"),
    );
    let params = defaulted(value).algorithm.unwrap().proportional.unwrap();
    assert_eq!(
        params.tolerance,
        Some("0.25".into()),
        "explicit values survive"
    );
}

#[test]
fn predictive_stores_horizon_min_points_and_fallback_defaults_but_not_noises() {
    let spec = defaulted(predictive());
    let params = spec.algorithm.unwrap().predictive.unwrap();
    assert_eq!(params.horizon_seconds, Some(300));
    assert_eq!(params.min_points, Some(6));
    let fallback = params.token_throughput.unwrap();
    assert_eq!(fallback.stable_window_seconds, Some(180));
    assert_eq!(fallback.panic_threshold, Some("2".into()));
    assert_eq!(
        params.q_level, None,
        "Kalman noises are applied at use, never stored"
    );
    assert_eq!(params.q_trend, None);
    assert_eq!(params.measurement_noise, None);
    assert_eq!(
        (values::Q_LEVEL, values::Q_TREND, values::MEASUREMENT_NOISE),
        ("1", "0.1", "10")
    );
}

#[test]
fn zero_stores_the_default_where_the_spec_says_so() {
    let mut value = proportional();
    set(
        &mut value,
        "/behavior",
        json!({
            "scaleUp": {"stabilizationWindowSeconds": 0, "maxStepReplicas": 0, "maxStepPercent": 0},
            "scaleDown": {"stabilizationWindowSeconds": 0, "cooldownAfterAbortSeconds": 0, "decodePostScaleUpGraceSeconds": 0}
        }),
    );
    let behavior = defaulted(value).behavior.unwrap();
    let up = behavior.scale_up.unwrap();
    assert_eq!(
        up.stabilization_window_seconds,
        Some(0),
        "zero disables the scale-up wait"
    );
    assert_eq!(up.max_step_replicas, Some(4));
    assert_eq!(up.max_step_percent, Some(100));
    let down = behavior.scale_down.unwrap();
    assert_eq!(
        down.stabilization_window_seconds,
        Some(300),
        "zero does not disable the guard"
    );
    assert_eq!(down.cooldown_after_abort_seconds, Some(300));
    assert_eq!(down.decode_post_scale_up_grace_seconds, Some(120));
}

#[test]
fn explicit_values_survive_defaulting() {
    let mut value = proportional();
    set(&mut value, "/mode", json!("Active"));
    set(&mut value, "/suspend", json!(true));
    set(
        &mut value,
        "/sampling",
        json!({"intervalSeconds": 30, "pendingTimeoutSeconds": 600}),
    );
    set(
        &mut value,
        "/behavior",
        json!({
            "scaleUp": {"stabilizationWindowSeconds": 60, "maxStepReplicas": 2, "maxStepPercent": 50,
                        "stepPolicy": {"type": "Pods", "value": 0}},
            "scaleDown": {"stabilizationWindowSeconds": 600, "cooldownAfterAbortSeconds": 900,
                          "decodePostScaleUpGraceSeconds": 30, "stepPolicy": {"type": "Percent", "value": 10}}
        }),
    );
    set(&mut value, "/rebalance", json!({"policy": "Disabled"}));
    let before = spec(&value);
    let after = defaulted(value);
    assert_eq!(after.mode, Some(Mode::Active));
    assert_eq!(after.suspend, Some(true));
    assert_eq!(after.sampling, before.sampling);
    assert_eq!(after.behavior, before.behavior);
    assert_eq!(
        after.rebalance.unwrap().policy,
        Some(RebalancePolicy::Disabled)
    );
}

#[test]
fn the_inferred_algorithm_type_is_stored() {
    // D28: admission infers an omitted type and stores it.
    let cases = [
        (proportional(), AlgorithmType::Proportional),
        (predictive(), AlgorithmType::Predictive),
        (token_throughput(), AlgorithmType::TokenThroughput),
    ];
    for (mut value, expected) in cases {
        remove(&mut value, "/algorithm/type");
        let spec = defaulted(value);
        assert_eq!(
            spec.algorithm.as_ref().unwrap().algorithm_type,
            Some(expected)
        );
    }
    let mut value = proportional();
    remove(&mut value, "/algorithm");
    assert_eq!(
        defaulted(value).algorithm.unwrap().algorithm_type,
        Some(AlgorithmType::TokenThroughput),
        "no block selects TokenThroughput"
    );
}

#[test]
fn an_update_that_switches_blocks_re_infers_a_kept_type() {
    use mds_api::defaults::default_spec_on_update;
    // Stored: Proportional (inferred). The new manifest has only a tokenThroughput block, and
    // client-side apply kept the stored type in the request.
    let mut old_value = proportional();
    remove(&mut old_value, "/algorithm/type");
    let old = defaulted(old_value);
    let mut new_value = token_throughput();
    set(&mut new_value, "/algorithm/type", json!("Proportional"));
    let mut new = spec(&new_value);
    default_spec_on_update(&mut new, &old);
    assert_eq!(
        new.algorithm.as_ref().unwrap().algorithm_type,
        Some(AlgorithmType::TokenThroughput)
    );
    // A type the user changes is kept as given, even when it does not match the blocks.
    let mut new_value = token_throughput();
    set(&mut new_value, "/algorithm/type", json!("Predictive"));
    let mut new = spec(&new_value);
    default_spec_on_update(&mut new, &old);
    assert_eq!(
        new.algorithm.as_ref().unwrap().algorithm_type,
        Some(AlgorithmType::Predictive)
    );
    // Two blocks are not unambiguous: the kept type stays (and validation refuses it).
    let mut new_value = token_throughput();
    set(&mut new_value, "/algorithm/type", json!("Proportional"));
    set(
        &mut new_value,
        "/algorithm/predictive",
        predictive()["algorithm"]["predictive"].clone(),
    );
    let mut new = spec(&new_value);
    default_spec_on_update(&mut new, &old);
    assert_eq!(
        new.algorithm.as_ref().unwrap().algorithm_type,
        Some(AlgorithmType::Proportional)
    );
}

#[test]
fn defaulting_is_idempotent_and_keeps_valid_specs_valid() {
    for base in [proportional(), token_throughput(), predictive()] {
        let once = defaulted(base);
        let mut twice = once.clone();
        default_spec(&mut twice);
        assert_eq!(once, twice);
        let report = mds_api::validation::validate(&once, None, None);
        assert!(report.is_valid(), "{:?}", report.errors);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }
}

#[test]
fn effective_values_match_what_defaulting_stores() {
    let undefaulted = spec(&token_throughput());
    let stored = defaulted(token_throughput());
    for s in [&undefaulted, &stored] {
        assert_eq!(s.interval_seconds(), values::INTERVAL_SECONDS as i64);
        assert_eq!(
            s.pending_timeout_seconds(),
            values::PENDING_TIMEOUT_SECONDS as i64
        );
        assert_eq!(
            s.cooldown_after_abort_seconds(),
            values::COOLDOWN_AFTER_ABORT_SECONDS as i64
        );
    }
    let mut value = token_throughput();
    value["behavior"] = json!({"scaleDown": {"cooldownAfterAbortSeconds": 0}});
    value["sampling"] = json!({"intervalSeconds": 30, "pendingTimeoutSeconds": 120});
    let s = spec(&value);
    assert_eq!(
        s.cooldown_after_abort_seconds(),
        values::COOLDOWN_AFTER_ABORT_SECONDS as i64,
        "zero uses the default"
    );
    assert_eq!(
        (s.interval_seconds(), s.pending_timeout_seconds()),
        (30, 120)
    );
}
