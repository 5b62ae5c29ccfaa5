//! One rule for latency targets in a simulation: the scaler's own `ttftTargetMilliseconds` and
//! `itlTargetMilliseconds` drive its guards, in every row that runs our code (the `mds` row and
//! the `mds-*` rows derived from it alike); `--slo-*` only grades. When the two differ the
//! output says so, and `--suggest` searches and pastes the targets the SLO implies.

use mds_api::ModelDeploymentScaler;
use mds_api::defaults::values;
use mds_api::target::ModelDeployment;
use mds_planner::policy::AlgorithmPolicy;
use serde_json::Value;

use crate::SimError;
use crate::slo::Slo;

/// The latency targets a scaler's guards aim at, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardTargets {
    pub ttft_seconds: f64,
    pub itl_seconds: f64,
    /// Whether the scaler's algorithm has the fields (TokenThroughput, or Predictive's
    /// fallback); a Proportional scaler has none, and its derived token rows take the spec's
    /// defaults.
    pub in_spec: bool,
}

/// The scaler's guard targets (the spec's defaults where it sets none).
pub fn of(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
) -> Result<GuardTargets, SimError> {
    let policy = crate::run::policy_of(scaler, target)?;
    let token = match &policy.algorithm {
        AlgorithmPolicy::TokenThroughput(t) => Some(t),
        AlgorithmPolicy::Predictive(p) => Some(&p.fallback),
        AlgorithmPolicy::Proportional { .. } => None,
    };
    let default = |text: &str| text.parse::<f64>().unwrap_or(0.0) / 1000.0;
    Ok(match token {
        Some(t) => GuardTargets {
            ttft_seconds: t.ttft_target_ms / 1000.0,
            itl_seconds: t.itl_target_ms / 1000.0,
            in_spec: true,
        },
        None => GuardTargets {
            ttft_seconds: default(values::TTFT_TARGET_MILLISECONDS),
            itl_seconds: default(values::ITL_TARGET_MILLISECONDS),
            in_spec: false,
        },
    })
}

/// A TTFT objective the guard can hold: a fixed one (an allowance per prompt token or a
/// multiple of the idle TTFT has no single target).
fn fixed_ttft(slo: &Slo) -> Option<f64> {
    (slo.ttft_per_1k_prompt_seconds == 0.0
        && slo.ttft_scale.is_none()
        && slo.ttft_classes.is_empty())
    .then_some(slo.ttft_seconds)
}

fn ms(seconds: f64) -> String {
    crate::suggest::format_quantity(seconds * 1000.0)
}

/// What to say when the scaler's guards aim elsewhere than the SLO grades; `None` when they
/// agree.
pub fn differ_note(guards: GuardTargets, slo: &Slo) -> Option<String> {
    let ttft_differs = fixed_ttft(slo).is_none_or(|t| (t - guards.ttft_seconds).abs() > 1e-9);
    let itl_differs = (slo.itl_seconds - guards.itl_seconds).abs() > 1e-9;
    if !ttft_differs && !itl_differs {
        return None;
    }
    let source = if guards.in_spec {
        "the scaler's guards aim at"
    } else {
        "the derived token rows' guards aim at the spec's defaults,"
    };
    Some(format!(
        "{source} TTFT {} ms and ITL {} ms; the SLO grades {}: our rows keep the scaler's own targets (set ttftTargetMilliseconds and itlTargetMilliseconds to aim at the SLO; --suggest pastes them)",
        ms(guards.ttft_seconds),
        ms(guards.itl_seconds),
        slo.describe()
    ))
}

/// The scaler with its guard targets set to what the SLO implies, and what changed, for
/// `--suggest`. Unchanged when it has no token block, or when the TTFT objective has an
/// allowance (then only the ITL target follows).
pub fn aimed_at(
    scaler: &ModelDeploymentScaler,
    slo: &Slo,
) -> Result<(ModelDeploymentScaler, Vec<String>), SimError> {
    let mut doc = serde_json::to_value(scaler)
        .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
    let algorithm = &mut doc["spec"]["algorithm"];
    let block: &mut Value = match algorithm["type"].as_str() {
        Some("Predictive") => &mut algorithm["predictive"]["tokenThroughput"],
        Some("TokenThroughput") => &mut algorithm["tokenThroughput"],
        _ => return Ok((scaler.clone(), Vec::new())),
    };
    if !block.is_object() {
        return Ok((scaler.clone(), Vec::new()));
    }
    let mut changed = Vec::new();
    let mut aim = |field: &str, seconds: f64| {
        let wanted = ms(seconds);
        let default = if field.starts_with("ttft") {
            values::TTFT_TARGET_MILLISECONDS
        } else {
            values::ITL_TARGET_MILLISECONDS
        };
        let current = block[field].as_str().unwrap_or(default).to_string();
        let same = mds_api::quantity::parse_decimal(&current)
            .is_ok_and(|c| (c.to_f64() - seconds * 1000.0).abs() < 1e-6);
        if !same {
            changed.push(format!("{field} {current} -> {wanted}"));
            block[field] = Value::String(wanted);
        }
    };
    if let Some(ttft) = fixed_ttft(slo) {
        aim("ttftTargetMilliseconds", ttft);
    }
    aim("itlTargetMilliseconds", slo.itl_seconds);
    let aimed = serde_json::from_value(doc)
        .map_err(|e| SimError::Input(format!("the scaler aimed at the SLO does not parse: {e}")))?;
    Ok((aimed, changed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scaler(algorithm: Value) -> ModelDeploymentScaler {
        serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
            "metadata": {"name": "chat", "namespace": "default"},
            "spec": {"targetRef": {"name": "chat"},
                     "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 8}],
                     "algorithm": algorithm}
        }))
        .unwrap()
    }

    fn target() -> ModelDeployment {
        serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": "chat", "namespace": "default"},
            "spec": {"engine": {"name": "vLLM"},
                     "roles": [{"name": "server", "kind": "Server", "replicas": 1}]}
        }))
        .unwrap()
    }

    fn slo(ttft: f64, itl: f64) -> Slo {
        Slo {
            ttft_seconds: ttft,
            itl_seconds: itl,
            ..Slo::default()
        }
    }

    #[test]
    fn the_scalers_own_targets_are_its_guards_and_a_difference_is_said() {
        let s = scaler(json!({"type": "TokenThroughput", "tokenThroughput": {
            "serverTargetTokensPerSecond": "4000", "ttftTargetMilliseconds": "300"}}));
        let g = of(&s, &target()).unwrap();
        assert_eq!(
            (g.ttft_seconds, g.itl_seconds, g.in_spec),
            (0.3, 0.05, true)
        );
        assert_eq!(differ_note(g, &slo(0.3, 0.05)), None);
        let note = differ_note(g, &slo(0.15, 0.05)).unwrap();
        assert!(note.starts_with("the scaler's guards aim at TTFT 300 ms and ITL 50 ms; the SLO grades TTFT <= 150 ms"), "{note}");
        let proportional = scaler(json!({"type": "Proportional", "proportional": {
            "metric": "QueueDepth", "roleTargets": [{"name": "server", "target": "8"}]}}));
        let g = of(&proportional, &target()).unwrap();
        assert_eq!(
            (g.ttft_seconds, g.itl_seconds, g.in_spec),
            (0.5, 0.05, false)
        );
    }

    #[test]
    fn aiming_at_the_slo_sets_the_token_block_and_says_what_changed() {
        let s = scaler(json!({"type": "Predictive", "predictive": {
            "tokenThroughput": {"serverTargetTokensPerSecond": "4000", "ttftTargetMilliseconds": "500"},
            "serverTokenCapacityPerReplica": "4000"}}));
        let (aimed, changed) = aimed_at(&s, &slo(0.15, 0.04)).unwrap();
        assert_eq!(
            changed,
            [
                "ttftTargetMilliseconds 500 -> 150",
                "itlTargetMilliseconds 50 -> 40"
            ]
        );
        let g = of(&aimed, &target()).unwrap();
        assert_eq!((g.ttft_seconds, g.itl_seconds), (0.15, 0.04));
        let (same, none) = aimed_at(&aimed, &slo(0.15, 0.04)).unwrap();
        assert!(none.is_empty());
        assert_eq!(same, aimed);
        // A TTFT allowance per prompt token has no single target: only the ITL follows.
        let allowance = Slo {
            ttft_per_1k_prompt_seconds: 0.1,
            ..slo(0.15, 0.05)
        };
        let (_, changed) = aimed_at(&s, &allowance).unwrap();
        assert!(changed.is_empty(), "{changed:?}");
    }
}
