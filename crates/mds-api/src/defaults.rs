//! Stored defaults (D25): what the mutating webhook and `mds validate` write into a scaler.
//!
//! Values the spec says are "stored" (step limits, tolerance, windows, ...) are written here.
//! Values that omitted or nonpositive inputs merely "use" (the Kalman noises) are applied by
//! the planner at use, so they appear in [`values`] but are never written.

use crate::quantity::Quantity;
use crate::spec::{
    Algorithm, AlgorithmType, Behavior, Mode, ModelDeploymentScalerSpec, PredictiveParams,
    ProportionalParams, Rebalance, RebalancePolicy, Sampling, ScaleDown, ScaleUp,
    TokenThroughputParams,
};

/// Every default of the spec, in one place.
pub mod values {
    pub const INTERVAL_SECONDS: i32 = 15;
    pub const PENDING_TIMEOUT_SECONDS: i32 = 300;
    pub const MIN_REPLICAS: i32 = 1;
    pub const TOLERANCE: &str = "0.1";
    pub const STABLE_WINDOW_SECONDS: i32 = 180;
    pub const PANIC_WINDOW_SECONDS: i32 = 60;
    pub const PANIC_THRESHOLD: &str = "2";
    pub const TTFT_TARGET_MILLISECONDS: &str = "500";
    pub const ITL_TARGET_MILLISECONDS: &str = "50";
    pub const HORIZON_SECONDS: i32 = 300;
    pub const MIN_POINTS: i32 = 6;
    /// Entries kept per role history in status (spec, *Status*); admission warns about
    /// stabilization windows longer than this many intervals.
    pub const HISTORY_LIMIT: usize = 256;
    /// Used at planning time for omitted or nonpositive values; never stored.
    pub const Q_LEVEL: &str = "1";
    pub const Q_TREND: &str = "0.1";
    pub const MEASUREMENT_NOISE: &str = "10";
    pub const SCALE_UP_STABILIZATION_WINDOW_SECONDS: i32 = 0;
    pub const MAX_STEP_REPLICAS: i32 = 4;
    pub const MAX_STEP_PERCENT: i32 = 100;
    pub const SCALE_DOWN_STABILIZATION_WINDOW_SECONDS: i32 = 300;
    pub const COOLDOWN_AFTER_ABORT_SECONDS: i32 = 300;
    pub const DECODE_POST_SCALE_UP_GRACE_SECONDS: i32 = 120;
}

/// The algorithm a spec selects: the explicit type, else the block that is present
/// (proportional, then predictive), else TokenThroughput.
pub fn effective_algorithm_type(algorithm: Option<&Algorithm>) -> AlgorithmType {
    match algorithm {
        Some(Algorithm {
            algorithm_type: Some(explicit),
            ..
        }) => *explicit,
        Some(a) if a.proportional.is_some() => AlgorithmType::Proportional,
        Some(a) if a.predictive.is_some() => AlgorithmType::Predictive,
        _ => AlgorithmType::TokenThroughput,
    }
}

/// Writes every stored default into `spec`; idempotent.
pub fn default_spec(spec: &mut ModelDeploymentScalerSpec) {
    spec.mode.get_or_insert(Mode::Shadow);
    spec.suspend.get_or_insert(false);

    let sampling = spec.sampling.get_or_insert_with(Sampling::default);
    sampling
        .interval_seconds
        .get_or_insert(values::INTERVAL_SECONDS);
    sampling
        .pending_timeout_seconds
        .get_or_insert(values::PENDING_TIMEOUT_SECONDS);

    for role in &mut spec.roles {
        role.min_replicas.get_or_insert(values::MIN_REPLICAS);
    }

    // The inferred algorithm type is stored (D28), so `kubectl get mds` shows it; an update
    // that switches blocks re-infers it (`default_spec_on_update`).
    let inferred = effective_algorithm_type(spec.algorithm.as_ref());
    let algorithm = spec.algorithm.get_or_insert_with(Algorithm::default);
    algorithm.algorithm_type.get_or_insert(inferred);
    if let Some(proportional) = &mut algorithm.proportional {
        default_proportional(proportional);
    }
    if let Some(token) = &mut algorithm.token_throughput {
        default_token_throughput(token);
    }
    if let Some(predictive) = &mut algorithm.predictive {
        default_predictive(predictive);
    }

    let behavior = spec.behavior.get_or_insert_with(Behavior::default);
    default_scale_up(behavior.scale_up.get_or_insert_with(ScaleUp::default));
    default_scale_down(behavior.scale_down.get_or_insert_with(ScaleDown::default));

    spec.rebalance
        .get_or_insert_with(Rebalance::default)
        .policy
        .get_or_insert(RebalancePolicy::Opposing);
}

/// Defaulting of an UPDATE (D28): when the request keeps the stored `type` but its parameter
/// blocks now name another algorithm unambiguously (the stored type's block is gone and exactly
/// one other block is present), the type is inferred again, so a manifest that switches blocks
/// without naming a type is not refused over a value its author never wrote. A `type` the
/// request changes is kept as given (and validated).
pub fn default_spec_on_update(
    new: &mut ModelDeploymentScalerSpec,
    old: &ModelDeploymentScalerSpec,
) {
    let stored = old.algorithm.as_ref().and_then(|a| a.algorithm_type);
    if let Some(algorithm) = new.algorithm.as_mut()
        && stored.is_some()
        && algorithm.algorithm_type == stored
    {
        let present = [
            (
                AlgorithmType::Proportional,
                algorithm.proportional.is_some(),
            ),
            (
                AlgorithmType::TokenThroughput,
                algorithm.token_throughput.is_some(),
            ),
            (AlgorithmType::Predictive, algorithm.predictive.is_some()),
        ];
        let has = |t: Option<AlgorithmType>| present.iter().any(|(p, on)| Some(*p) == t && *on);
        let others: Vec<AlgorithmType> = present
            .iter()
            .filter(|(t, on)| *on && Some(*t) != stored)
            .map(|(t, _)| *t)
            .collect();
        if !has(stored) && others.len() == 1 {
            algorithm.algorithm_type = Some(others[0]);
        }
    }
    default_spec(new);
}

fn default_proportional(params: &mut ProportionalParams) {
    params
        .tolerance
        .get_or_insert_with(|| Quantity::from(values::TOLERANCE));
}

fn default_token_throughput(params: &mut TokenThroughputParams) {
    params
        .stable_window_seconds
        .get_or_insert(values::STABLE_WINDOW_SECONDS);
    params
        .panic_window_seconds
        .get_or_insert(values::PANIC_WINDOW_SECONDS);
    params
        .panic_threshold
        .get_or_insert_with(|| Quantity::from(values::PANIC_THRESHOLD));
    params
        .ttft_target_milliseconds
        .get_or_insert_with(|| Quantity::from(values::TTFT_TARGET_MILLISECONDS));
    params
        .itl_target_milliseconds
        .get_or_insert_with(|| Quantity::from(values::ITL_TARGET_MILLISECONDS));
}

fn default_predictive(params: &mut PredictiveParams) {
    if let Some(token) = &mut params.token_throughput {
        default_token_throughput(token);
    }
    params
        .horizon_seconds
        .get_or_insert(values::HORIZON_SECONDS);
    params.min_points.get_or_insert(values::MIN_POINTS);
}

/// The value in effect for a field where "omission or zero stores the default" (spec,
/// *Pacing and guards*); planning and admission read such fields through this.
pub fn nonzero_or(value: Option<i32>, default: i32) -> i32 {
    value.filter(|v| *v != 0).unwrap_or(default)
}

/// The values in effect for fields the core and the planner both read, whether or not the
/// spec was defaulted (one rule per field, here).
impl ModelDeploymentScalerSpec {
    pub fn interval_seconds(&self) -> i64 {
        self.sampling
            .as_ref()
            .and_then(|s| s.interval_seconds)
            .unwrap_or(values::INTERVAL_SECONDS) as i64
    }

    pub fn pending_timeout_seconds(&self) -> i64 {
        self.sampling
            .as_ref()
            .and_then(|s| s.pending_timeout_seconds)
            .unwrap_or(values::PENDING_TIMEOUT_SECONDS) as i64
    }

    pub fn cooldown_after_abort_seconds(&self) -> i64 {
        nonzero_or(
            self.behavior
                .as_ref()
                .and_then(|b| b.scale_down.as_ref())
                .and_then(|d| d.cooldown_after_abort_seconds),
            values::COOLDOWN_AFTER_ABORT_SECONDS,
        ) as i64
    }
}

/// Stores `default` when the value is omitted or zero.
fn store_unless_nonzero(value: &mut Option<i32>, default: i32) {
    *value = Some(nonzero_or(*value, default));
}

fn default_scale_up(scale_up: &mut ScaleUp) {
    scale_up
        .stabilization_window_seconds
        .get_or_insert(values::SCALE_UP_STABILIZATION_WINDOW_SECONDS);
    store_unless_nonzero(&mut scale_up.max_step_replicas, values::MAX_STEP_REPLICAS);
    store_unless_nonzero(&mut scale_up.max_step_percent, values::MAX_STEP_PERCENT);
}

fn default_scale_down(scale_down: &mut ScaleDown) {
    store_unless_nonzero(
        &mut scale_down.stabilization_window_seconds,
        values::SCALE_DOWN_STABILIZATION_WINDOW_SECONDS,
    );
    store_unless_nonzero(
        &mut scale_down.cooldown_after_abort_seconds,
        values::COOLDOWN_AFTER_ABORT_SECONDS,
    );
    store_unless_nonzero(
        &mut scale_down.decode_post_scale_up_grace_seconds,
        values::DECODE_POST_SCALE_UP_GRACE_SECONDS,
    );
}
