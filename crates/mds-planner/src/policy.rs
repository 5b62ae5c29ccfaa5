//! The planner's view of a scaler spec: every default applied, every quantity parsed, role
//! kinds taken from the target. Built once per spec generation from a spec that admission
//! accepted; building it again from an invalid spec reports the first problem instead of
//! guessing.

use std::collections::BTreeMap;

use mds_api::defaults::{effective_algorithm_type, nonzero_or, values};
use mds_api::quantity::{Decimal, Quantity};
use mds_api::spec::{
    Algorithm, AlgorithmType, ModelDeploymentScalerSpec, ProportionalMetric, StepPolicy,
    StepPolicyType, TokenThroughputParams,
};
use mds_api::target::RoleKind;

/// One scaled role.
#[derive(Clone, Debug, PartialEq)]
pub struct RolePolicy {
    pub name: String,
    pub kind: RoleKind,
    pub min: i32,
    pub max: i32,
}

/// One ratio band between roles (indices into [`Policy::roles`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RatioPolicy {
    pub numerator: usize,
    pub denominator: usize,
    pub min: Option<Decimal>,
    pub max: Option<Decimal>,
    pub target: Option<Decimal>,
}

/// Per-kind token capacities (tokens per second one replica serves).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Capacities {
    pub prefill: Option<f64>,
    pub decode: Option<f64>,
    pub server: Option<f64>,
}

impl Capacities {
    pub fn for_kind(&self, kind: &RoleKind) -> Option<f64> {
        match kind {
            RoleKind::Prefill => self.prefill,
            RoleKind::Decode => self.decode,
            RoleKind::Server => self.server,
            RoleKind::Encode | RoleKind::Unknown(_) => None,
        }
    }
}

/// TokenThroughput parameters (also the Predictive fallback).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenPolicy {
    pub capacities: Capacities,
    /// Demand windows, each at least one sampling interval long so it always holds the newest
    /// sample even when the interval is longer than the configured window.
    pub stable_window_seconds: i64,
    pub panic_window_seconds: i64,
    pub panic_threshold: f64,
    pub ttft_target_ms: f64,
    pub itl_target_ms: f64,
}

impl TokenPolicy {
    /// The longest window the algorithm reads: demand samples older than this are dropped.
    pub fn longest_window_seconds(&self) -> i64 {
        self.stable_window_seconds.max(self.panic_window_seconds)
    }
}

/// Predictive parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictivePolicy {
    pub fallback: TokenPolicy,
    pub horizon_seconds: f64,
    pub capacities: Capacities,
    pub q_level: f64,
    pub q_trend: f64,
    pub measurement_noise: f64,
    pub min_points: u32,
}

/// The algorithm and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum AlgorithmPolicy {
    Proportional {
        metric: ProportionalMetric,
        /// Exact, so the deadband's edges hold exactly (D11, D26).
        tolerance: Decimal,
        /// Per role (by index): the target per ready replica.
        targets: Vec<Option<Decimal>>,
    },
    TokenThroughput(TokenPolicy),
    Predictive(PredictivePolicy),
}

/// A step unit for one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Pods(i32),
    Percent(i32),
}

impl Step {
    /// The replicas a step allows from `current`, rounding percentages up.
    pub fn replicas(self, current: i32) -> i32 {
        match self {
            Step::Pods(n) => n.max(0),
            Step::Percent(p) => {
                ((current as i64 * p.max(0) as i64 + 99) / 100).min(i32::MAX as i64) as i32
            }
        }
    }
}

fn step(policy: Option<&StepPolicy>) -> Option<Step> {
    policy.map(|p| match p.policy_type {
        StepPolicyType::Pods => Step::Pods(p.value),
        StepPolicyType::Percent => Step::Percent(p.value),
    })
}

/// Everything the planner needs from the spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub roles: Vec<RolePolicy>,
    pub ratios: Vec<RatioPolicy>,
    pub algorithm: AlgorithmPolicy,
    pub interval_seconds: i64,
    pub scale_up_window_seconds: i64,
    pub max_step_replicas: i32,
    pub max_step_percent: i32,
    pub scale_up_step: Option<Step>,
    pub scale_down_window_seconds: i64,
    pub cooldown_after_abort_seconds: i64,
    pub decode_grace_seconds: i64,
    pub scale_down_step: Option<Step>,
}

/// Why a policy could not be built; admission refuses such specs, so seeing one means the
/// spec bypassed admission.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PolicyError {
    pub path: String,
    pub message: String,
}

fn quantity(
    path: &(impl std::fmt::Display + ?Sized),
    q: Option<&Quantity>,
    default: Option<&str>,
) -> Result<Option<Decimal>, PolicyError> {
    let text = match (q, default) {
        (Some(q), _) => q.0.as_str(),
        (None, Some(d)) => d,
        (None, None) => return Ok(None),
    };
    mds_api::quantity::parse_decimal(text)
        .map(Some)
        .map_err(|e| PolicyError {
            path: path.to_string(),
            message: format!("the quantity {e}"),
        })
}

/// A field's path, `base.field`, written out only into an error (policies are built every
/// pass).
struct Field<'a, B: ?Sized>(&'a B, &'a str);

impl<B: std::fmt::Display + ?Sized> std::fmt::Display for Field<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// An element of a list field, `list[index]`, written out only into an error.
struct Item(&'static str, usize);

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.0, self.1)
    }
}

/// A per-replica target or capacity: admission refuses nonpositive ones, and a spec that
/// bypassed it must not divide by zero.
fn positive(
    path: &(impl std::fmt::Display + ?Sized),
    value: Option<Decimal>,
) -> Result<Option<Decimal>, PolicyError> {
    match value {
        Some(v) if !v.is_positive() => Err(PolicyError {
            path: path.to_string(),
            message: format!("{v} must be a positive quantity"),
        }),
        other => Ok(other),
    }
}

/// A Kalman noise: omitted or nonpositive values use the default (spec, *Predictive*).
fn noise(
    path: &impl std::fmt::Display,
    q: Option<&Quantity>,
    default: &str,
) -> Result<f64, PolicyError> {
    let value = quantity(path, q, Some(default))?.unwrap_or_default();
    if value.is_positive() {
        Ok(value.to_f64())
    } else {
        Ok(quantity(path, None, Some(default))?
            .unwrap_or_default()
            .to_f64())
    }
}

fn token_policy(
    base: &(impl std::fmt::Display + ?Sized),
    p: &TokenThroughputParams,
    interval_seconds: i64,
) -> Result<TokenPolicy, PolicyError> {
    let f =
        |field: &str, q: Option<&Quantity>, d: Option<&str>| -> Result<Option<f64>, PolicyError> {
            let path = Field(base, field);
            Ok(positive(&path, quantity(&path, q, d)?)?.map(Decimal::to_f64))
        };
    Ok(TokenPolicy {
        capacities: Capacities {
            prefill: f(
                "prefillTargetTokensPerSecond",
                p.prefill_target_tokens_per_second.as_ref(),
                None,
            )?,
            decode: f(
                "decodeTargetTokensPerSecond",
                p.decode_target_tokens_per_second.as_ref(),
                None,
            )?,
            server: f(
                "serverTargetTokensPerSecond",
                p.server_target_tokens_per_second.as_ref(),
                None,
            )?,
        },
        stable_window_seconds: (p
            .stable_window_seconds
            .unwrap_or(values::STABLE_WINDOW_SECONDS) as i64)
            .max(interval_seconds),
        panic_window_seconds: (p
            .panic_window_seconds
            .unwrap_or(values::PANIC_WINDOW_SECONDS) as i64)
            .max(interval_seconds),
        panic_threshold: f(
            "panicThreshold",
            p.panic_threshold.as_ref(),
            Some(values::PANIC_THRESHOLD),
        )?
        .unwrap_or(2.0),
        ttft_target_ms: f(
            "ttftTargetMilliseconds",
            p.ttft_target_milliseconds.as_ref(),
            Some(values::TTFT_TARGET_MILLISECONDS),
        )?
        .unwrap_or(500.0),
        itl_target_ms: f(
            "itlTargetMilliseconds",
            p.itl_target_milliseconds.as_ref(),
            Some(values::ITL_TARGET_MILLISECONDS),
        )?
        .unwrap_or(50.0),
    })
}

impl Policy {
    /// Builds the policy from a spec (defaults applied here too, so an undefaulted spec plans
    /// the same) and the target's role kinds (absent kinds are Server, D2).
    pub fn from_spec(
        spec: &ModelDeploymentScalerSpec,
        kinds: &BTreeMap<String, RoleKind>,
    ) -> Result<Policy, PolicyError> {
        let roles = role_policies(spec, kinds);
        let ratios = ratio_policies(spec, &roles)?;
        let interval_seconds = spec.interval_seconds();
        // Borrowed, not cloned: the policy is built every pass.
        let no_algorithm = Algorithm::default();
        let algorithm_spec = spec.algorithm.as_ref().unwrap_or(&no_algorithm);
        let algorithm = match effective_algorithm_type(spec.algorithm.as_ref()) {
            AlgorithmType::Proportional => proportional_policy(algorithm_spec, &roles)?,
            AlgorithmType::TokenThroughput => {
                let p = algorithm_spec
                    .token_throughput
                    .as_ref()
                    .ok_or_else(|| missing("spec.algorithm.tokenThroughput"))?;
                AlgorithmPolicy::TokenThroughput(token_policy(
                    "spec.algorithm.tokenThroughput",
                    p,
                    interval_seconds,
                )?)
            }
            AlgorithmType::Predictive => predictive_policy(algorithm_spec, interval_seconds)?,
        };
        let behavior = spec.behavior.clone().unwrap_or_default();
        let up = behavior.scale_up.unwrap_or_default();
        let down = behavior.scale_down.unwrap_or_default();
        Ok(Policy {
            roles,
            ratios,
            algorithm,
            interval_seconds,
            scale_up_window_seconds: up
                .stabilization_window_seconds
                .unwrap_or(values::SCALE_UP_STABILIZATION_WINDOW_SECONDS)
                as i64,
            max_step_replicas: nonzero_or(up.max_step_replicas, values::MAX_STEP_REPLICAS),
            max_step_percent: nonzero_or(up.max_step_percent, values::MAX_STEP_PERCENT),
            scale_up_step: step(up.step_policy.as_ref()),
            scale_down_window_seconds: nonzero_or(
                down.stabilization_window_seconds,
                values::SCALE_DOWN_STABILIZATION_WINDOW_SECONDS,
            ) as i64,
            cooldown_after_abort_seconds: spec.cooldown_after_abort_seconds(),
            decode_grace_seconds: nonzero_or(
                down.decode_post_scale_up_grace_seconds,
                values::DECODE_POST_SCALE_UP_GRACE_SECONDS,
            ) as i64,
            scale_down_step: step(down.step_policy.as_ref()),
        })
    }

    /// The most replicas one pass may add to a role at `current` (D16).
    pub fn growth_step(&self, current: i32) -> i32 {
        match self.scale_up_step {
            Some(step) => step.replicas(current),
            None => self
                .max_step_replicas
                .max(Step::Percent(self.max_step_percent).replicas(current)),
        }
    }

    /// The most replicas one pass may remove from a role at `current`.
    pub fn shrink_step(&self, current: i32) -> i32 {
        match self.scale_down_step {
            Some(step) => step.replicas(current),
            None => 1,
        }
    }

    pub fn role_index(&self, name: &str) -> Option<usize> {
        self.roles.iter().position(|r| r.name == name)
    }
}

/// `spec.roles` with their kinds (Server when the target does not say) and bounds.
fn role_policies(
    spec: &ModelDeploymentScalerSpec,
    kinds: &BTreeMap<String, RoleKind>,
) -> Vec<RolePolicy> {
    spec.roles
        .iter()
        .map(|r| RolePolicy {
            name: r.name.clone(),
            kind: kinds.get(&r.name).cloned().unwrap_or(RoleKind::Server),
            min: r.min_replicas.unwrap_or(values::MIN_REPLICAS),
            max: r.max_replicas,
        })
        .collect()
}

/// The position of role `name` in `roles`; the error names `path`.
fn role_index(
    roles: &[RolePolicy],
    name: &str,
    path: &impl std::fmt::Display,
) -> Result<usize, PolicyError> {
    roles
        .iter()
        .position(|r| r.name == name)
        .ok_or_else(|| PolicyError {
            path: path.to_string(),
            message: format!("{name:?} is not a role in spec.roles"),
        })
}

/// A required field that is absent.
fn missing(path: &str) -> PolicyError {
    PolicyError {
        path: path.to_string(),
        message: "is required".to_string(),
    }
}

/// `spec.ratios`, each naming its roles by position.
fn ratio_policies(
    spec: &ModelDeploymentScalerSpec,
    roles: &[RolePolicy],
) -> Result<Vec<RatioPolicy>, PolicyError> {
    let mut ratios = Vec::new();
    for (i, r) in spec.ratios.iter().enumerate() {
        let base = &Item("spec.ratios", i);
        ratios.push(RatioPolicy {
            numerator: role_index(roles, &r.numerator_role, &Field(base, "numeratorRole"))?,
            denominator: role_index(roles, &r.denominator_role, &Field(base, "denominatorRole"))?,
            min: quantity(&Field(base, "min"), r.min.as_ref(), None)?,
            max: quantity(&Field(base, "max"), r.max.as_ref(), None)?,
            target: quantity(&Field(base, "target"), r.target.as_ref(), None)?,
        });
    }
    Ok(ratios)
}

/// `spec.algorithm.proportional`: the metric, the tolerance and each role's target.
fn proportional_policy(
    algorithm: &Algorithm,
    roles: &[RolePolicy],
) -> Result<AlgorithmPolicy, PolicyError> {
    let p = algorithm
        .proportional
        .as_ref()
        .ok_or_else(|| missing("spec.algorithm.proportional"))?;
    let mut targets = vec![None; roles.len()];
    for (i, t) in p.role_targets.iter().enumerate() {
        let base = &Item("spec.algorithm.proportional.roleTargets", i);
        let slot = role_index(roles, &t.name, &Field(base, "name"))?;
        let path = Field(base, "target");
        targets[slot] = positive(&path, quantity(&path, Some(&t.target), None)?)?;
    }
    Ok(AlgorithmPolicy::Proportional {
        metric: p
            .metric
            .ok_or_else(|| missing("spec.algorithm.proportional.metric"))?,
        tolerance: quantity(
            "spec.algorithm.proportional.tolerance",
            p.tolerance.as_ref(),
            Some(values::TOLERANCE),
        )?
        .unwrap_or_default(),
        targets,
    })
}

/// `spec.algorithm.predictive`: the TokenThroughput fallback, the horizon, the per-replica
/// capacities and the filter's noises.
fn predictive_policy(
    algorithm: &Algorithm,
    interval_seconds: i64,
) -> Result<AlgorithmPolicy, PolicyError> {
    let base = "spec.algorithm.predictive";
    let p = algorithm.predictive.as_ref().ok_or_else(|| missing(base))?;
    let fallback = p
        .token_throughput
        .as_ref()
        .ok_or_else(|| missing("spec.algorithm.predictive.tokenThroughput"))?;
    let cap = |field: &str, q: Option<&Quantity>| -> Result<Option<f64>, PolicyError> {
        let path = Field(base, field);
        Ok(positive(&path, quantity(&path, q, None)?)?.map(Decimal::to_f64))
    };
    Ok(AlgorithmPolicy::Predictive(PredictivePolicy {
        fallback: token_policy(&Field(base, "tokenThroughput"), fallback, interval_seconds)?,
        horizon_seconds: p.horizon_seconds.unwrap_or(values::HORIZON_SECONDS) as f64,
        capacities: Capacities {
            prefill: cap(
                "prefillTokenCapacityPerReplica",
                p.prefill_token_capacity_per_replica.as_ref(),
            )?,
            decode: cap(
                "decodeTokenCapacityPerReplica",
                p.decode_token_capacity_per_replica.as_ref(),
            )?,
            server: cap(
                "serverTokenCapacityPerReplica",
                p.server_token_capacity_per_replica.as_ref(),
            )?,
        },
        q_level: noise(&Field(base, "qLevel"), p.q_level.as_ref(), values::Q_LEVEL)?,
        q_trend: noise(&Field(base, "qTrend"), p.q_trend.as_ref(), values::Q_TREND)?,
        measurement_noise: noise(
            &Field(base, "measurementNoise"),
            p.measurement_noise.as_ref(),
            values::MEASUREMENT_NOISE,
        )?,
        min_points: p.min_points.unwrap_or(values::MIN_POINTS).max(1) as u32,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(algorithm: serde_json::Value) -> ModelDeploymentScalerSpec {
        serde_json::from_value(serde_json::json!({
            "targetRef": {"name": "chat"},
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 4}],
            "algorithm": algorithm,
        }))
        .expect("a spec")
    }

    /// A spec that bypassed admission names the field it broke, whole path included.
    #[test]
    fn a_bad_quantity_names_its_field() {
        let kinds = BTreeMap::new();
        let zero = spec(serde_json::json!({"type": "TokenThroughput",
            "tokenThroughput": {"serverTargetTokensPerSecond": "0"}}));
        let e = Policy::from_spec(&zero, &kinds).expect_err("zero capacity");
        assert_eq!(
            e.path,
            "spec.algorithm.tokenThroughput.serverTargetTokensPerSecond"
        );
        assert_eq!(e.message, "0 must be a positive quantity");
        let garbage = spec(serde_json::json!({"type": "Predictive",
            "predictive": {"tokenThroughput": {"panicThreshold": "x"},
                "prefillCapacityTokensPerSecond": "1"}}));
        let e = Policy::from_spec(&garbage, &kinds).expect_err("garbage");
        assert_eq!(
            e.path,
            "spec.algorithm.predictive.tokenThroughput.panicThreshold"
        );
        let noise = spec(serde_json::json!({"type": "Predictive",
            "predictive": {"tokenThroughput": {}, "qTrend": "x"}}));
        let e = Policy::from_spec(&noise, &kinds).expect_err("garbage noise");
        assert_eq!(e.path, "spec.algorithm.predictive.qTrend");
        let target = spec(serde_json::json!({"type": "Proportional",
            "proportional": {"metric": "QueueDepth",
                "roleTargets": [{"name": "server", "target": "1"},
                                {"name": "server", "target": "0"}]}}));
        let e = Policy::from_spec(&target, &kinds).expect_err("zero target");
        assert_eq!(e.path, "spec.algorithm.proportional.roleTargets[1].target");
        let mut ratio = spec(serde_json::json!({"type": "TokenThroughput",
            "tokenThroughput": {"serverTargetTokensPerSecond": "1"}}));
        ratio.ratios = serde_json::from_value(serde_json::json!([
            {"numeratorRole": "server", "denominatorRole": "decode", "target": "1"}]))
        .expect("a ratio");
        let e = Policy::from_spec(&ratio, &kinds).expect_err("unknown role");
        assert_eq!(e.path, "spec.ratios[0].denominatorRole");
        assert_eq!(e.message, "\"decode\" is not a role in spec.roles");
    }
}
