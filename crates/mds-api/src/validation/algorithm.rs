//! Rules on spec.algorithm: type inference, the one matching block, and each algorithm's
//! parameters. Capacity-per-kind rules need the target's role kinds and run only with it.

use std::collections::{BTreeMap, BTreeSet};

use super::Report;
use crate::defaults::effective_algorithm_type;
use crate::quantity::{Decimal, Quantity};
use crate::spec::{
    AlgorithmType, ModelDeploymentScalerSpec, PredictiveParams, ProportionalParams, Ratio,
    TokenThroughputParams,
};
use crate::target::RoleKind;

/// Role name → kind, from the target when it exists.
pub(super) type RoleKinds = BTreeMap<String, RoleKind>;

pub(super) fn check(
    spec: &ModelDeploymentScalerSpec,
    kinds: Option<&RoleKinds>,
    report: &mut Report,
) {
    let algorithm = spec.algorithm.clone().unwrap_or_default();
    let selected = effective_algorithm_type(spec.algorithm.as_ref());
    let blocks = [
        (
            AlgorithmType::Proportional,
            "proportional",
            algorithm.proportional.is_some(),
        ),
        (
            AlgorithmType::TokenThroughput,
            "tokenThroughput",
            algorithm.token_throughput.is_some(),
        ),
        (
            AlgorithmType::Predictive,
            "predictive",
            algorithm.predictive.is_some(),
        ),
    ];
    for (block_type, field, present) in blocks {
        if present && block_type != selected {
            report.error(
                format!("spec.algorithm.{field}"),
                format!(
                    "is not accepted with type {}; keep only the block matching spec.algorithm.type",
                    selected.as_str()
                ),
            );
        }
    }
    match selected {
        AlgorithmType::Proportional => match &algorithm.proportional {
            Some(params) => check_proportional(spec, params, report),
            None => report.error(
                "spec.algorithm.proportional",
                "is required for type Proportional; give metric and roleTargets",
            ),
        },
        AlgorithmType::TokenThroughput => match &algorithm.token_throughput {
            Some(params) => {
                check_token_throughput("spec.algorithm.tokenThroughput", params, spec, kinds, report)
            }
            None => report.error(
                "spec.algorithm.tokenThroughput",
                "is required for type TokenThroughput; give the tokens per second one replica of each role kind serves (prefill, decode or server TargetTokensPerSecond)",
            ),
        },
        AlgorithmType::Predictive => match &algorithm.predictive {
            Some(params) => check_predictive(params, spec, kinds, report),
            None => report.error(
                "spec.algorithm.predictive",
                "is required for type Predictive; give tokenThroughput fallback targets and per-replica forecast capacities",
            ),
        },
    }
    if selected != AlgorithmType::Proportional
        && let Some(kinds) = kinds
    {
        check_encode_coupling(spec, kinds, report);
    }
}

/// Token algorithms give Encode roles no capacity: each needs a direct ratio to a Prefill or
/// Decode role, whose count it follows.
fn check_encode_coupling(spec: &ModelDeploymentScalerSpec, kinds: &RoleKinds, report: &mut Report) {
    for role in &spec.roles {
        if kinds.get(&role.name) != Some(&RoleKind::Encode) {
            continue;
        }
        let coupled = has_direct_ratio(&spec.ratios, &role.name, |other| {
            matches!(kinds.get(other), Some(RoleKind::Prefill | RoleKind::Decode))
        });
        if !coupled {
            report.error(
                "spec.ratios",
                format!(
                    "Encode role {:?} needs a ratio to a Prefill or Decode role (either direction); its count follows that ratio",
                    role.name
                ),
            );
        }
    }
}

fn check_proportional(
    spec: &ModelDeploymentScalerSpec,
    params: &ProportionalParams,
    report: &mut Report,
) {
    let base = "spec.algorithm.proportional";
    if params.metric.is_none() {
        report.error(
            format!("{base}.metric"),
            "is required; choose QueueDepth, RunningRequests, WaitingRequests, PromptTokensPerSecond, GenerationTokensPerSecond or TotalTokensPerSecond",
        );
    }
    let tolerance_path = format!("{base}.tolerance");
    if let Some(tolerance) = report.positive_quantity(&tolerance_path, params.tolerance.as_ref())
        && tolerance > crate::quantity::Decimal::ONE
    {
        report.error(
            tolerance_path,
            format!("{tolerance} is greater than 1; a tolerance is positive and at most 1"),
        );
    }
    super::spec_rules::check_list_size(
        report,
        &format!("{base}.roleTargets"),
        params.role_targets.len(),
        super::spec_rules::MAX_ROLES,
    );
    let scaled: BTreeSet<&str> = spec.roles.iter().map(|r| r.name.as_str()).collect();
    let mut targeted = BTreeSet::new();
    for (i, target) in params.role_targets.iter().enumerate() {
        let path = format!("{base}.roleTargets[{i}]");
        if !scaled.contains(target.name.as_str()) {
            report.error(
                format!("{path}.name"),
                format!(
                    "{:?} is not a role in spec.roles; name a scaled role",
                    target.name
                ),
            );
        } else if !targeted.insert(target.name.as_str()) {
            report.error(
                format!("{path}.name"),
                format!("role {:?} has two targets; give each role one", target.name),
            );
        }
        report.positive_quantity(&format!("{path}.target"), Some(&target.target));
    }
    for role in &spec.roles {
        let name = role.name.as_str();
        if !targeted.contains(name)
            && !has_direct_ratio(&spec.ratios, name, |other| targeted.contains(other))
        {
            report.error(
                format!("{base}.roleTargets"),
                format!(
                    "role {name:?} has no target and no direct ratio to a targeted role; add a roleTargets entry for it or a ratio linking it to a targeted role"
                ),
            );
        }
    }
}

/// Whether `role` has a ratio (either direction) to a role accepted by `other_ok`.
fn has_direct_ratio(ratios: &[Ratio], role: &str, other_ok: impl Fn(&str) -> bool) -> bool {
    ratios.iter().any(|r| {
        (r.numerator_role == role && other_ok(&r.denominator_role))
            || (r.denominator_role == role && other_ok(&r.numerator_role))
    })
}

/// The capacity a role kind needs: (field name, value) from a parameter block.
fn capacity_for<'a>(
    kind: &RoleKind,
    prefill: &'a Option<Quantity>,
    decode: &'a Option<Quantity>,
    server: &'a Option<Quantity>,
) -> Option<(&'static str, &'a Option<Quantity>)> {
    match kind {
        RoleKind::Prefill => Some(("prefill", prefill)),
        RoleKind::Decode => Some(("decode", decode)),
        RoleKind::Server => Some(("server", server)),
        RoleKind::Encode | RoleKind::Unknown(_) => None,
    }
}

fn check_token_throughput(
    base: &str,
    params: &TokenThroughputParams,
    spec: &ModelDeploymentScalerSpec,
    kinds: Option<&RoleKinds>,
    report: &mut Report,
) {
    report.check_range(
        &format!("{base}.stableWindowSeconds"),
        params.stable_window_seconds,
        30,
        600,
    );
    report.check_range(
        &format!("{base}.panicWindowSeconds"),
        params.panic_window_seconds,
        10,
        300,
    );
    let stable = params
        .stable_window_seconds
        .unwrap_or(crate::defaults::values::STABLE_WINDOW_SECONDS);
    let panic = params
        .panic_window_seconds
        .unwrap_or(crate::defaults::values::PANIC_WINDOW_SECONDS);
    if panic >= stable {
        report.warn(
            format!("{base}.panicWindowSeconds"),
            format!(
                "{panic} is not shorter than stableWindowSeconds {stable}; a panic window shorter than the stable window reacts to bursts sooner"
            ),
        );
    }
    let fields = [
        ("panicThreshold", &params.panic_threshold),
        ("ttftTargetMilliseconds", &params.ttft_target_milliseconds),
        ("itlTargetMilliseconds", &params.itl_target_milliseconds),
        (
            "prefillTargetTokensPerSecond",
            &params.prefill_target_tokens_per_second,
        ),
        (
            "decodeTargetTokensPerSecond",
            &params.decode_target_tokens_per_second,
        ),
        (
            "serverTargetTokensPerSecond",
            &params.server_target_tokens_per_second,
        ),
    ];
    for (field, value) in fields {
        let path = format!("{base}.{field}");
        let Some(v) = report.positive_quantity(&path, value.as_ref()) else {
            continue;
        };
        if field.ends_with("Milliseconds") {
            latency_unit_slip(report, &path, v);
        }
    }
    check_capacities(
        base,
        "TargetTokensPerSecond",
        [
            &params.prefill_target_tokens_per_second,
            &params.decode_target_tokens_per_second,
            &params.server_target_tokens_per_second,
        ],
        spec,
        kinds,
        report,
    );
}

/// A latency target under a millisecond or over ten minutes is almost surely a unit slip
/// ("0.5" meant as seconds): no engine meets the one, the other never guards; both are
/// admitted, with a warning naming the field and the value meant.
fn latency_unit_slip(report: &mut Report, path: &str, value: Decimal) {
    use std::cmp::Ordering::{Greater, Less};
    const TEN_MINUTES_MS: i64 = 600_000;
    let ms = value.to_f64();
    // `cmp_ratio` compares the ratio with the value: `Greater` means the value is below it.
    if value.cmp_ratio(1, 1) == Greater {
        report.warn(
            path,
            format!(
                "{ms} ms is under one millisecond: the field is in milliseconds, so no engine meets it and the latency guard keeps adding replicas; for {ms} s write \"{}\"",
                ms * 1000.0
            ),
        );
    } else if value.cmp_ratio(TEN_MINUTES_MS, 1) == Less {
        report.warn(
            path,
            format!(
                "{ms} ms is over ten minutes: the field is in milliseconds, so the latency guard would never act; if it is in microseconds, write \"{}\"",
                ms / 1000.0
            ),
        );
    }
}

/// Every scaled non-encode kind needs a capacity; without the target, at least one must be
/// given.
fn check_capacities(
    base: &str,
    suffix: &str,
    [prefill, decode, server]: [&Option<Quantity>; 3],
    spec: &ModelDeploymentScalerSpec,
    kinds: Option<&RoleKinds>,
    report: &mut Report,
) {
    let Some(kinds) = kinds else {
        if prefill.is_none() && decode.is_none() && server.is_none() {
            report.error(
                base.to_string(),
                format!(
                    "needs a per-replica capacity for each role kind: set server{suffix}, prefill{suffix} or decode{suffix}"
                ),
            );
        }
        return;
    };
    let mut reported = BTreeSet::new();
    for role in &spec.roles {
        let Some(kind) = kinds.get(&role.name) else {
            continue; // reported by the target rules
        };
        if let Some((prefix, value)) = capacity_for(kind, prefill, decode, server)
            && value.is_none()
            && reported.insert(prefix.to_string())
        {
            report.error(
                format!("{base}.{prefix}{suffix}"),
                format!(
                    "is required because role {:?} has kind {kind}; give the tokens per second one replica serves",
                    role.name
                ),
            );
        }
    }
}

fn check_predictive(
    params: &PredictiveParams,
    spec: &ModelDeploymentScalerSpec,
    kinds: Option<&RoleKinds>,
    report: &mut Report,
) {
    let base = "spec.algorithm.predictive";
    match &params.token_throughput {
        Some(token) => check_token_throughput(&format!("{base}.tokenThroughput"), token, spec, kinds, report),
        None => report.error(
            format!("{base}.tokenThroughput"),
            "is required; Predictive falls back to TokenThroughput during warm-up and never goes below it",
        ),
    }
    report.check_range(
        &format!("{base}.horizonSeconds"),
        params.horizon_seconds,
        30,
        600,
    );
    report.check_range(&format!("{base}.minPoints"), params.min_points, 1, 64);
    let capacities = [
        (
            "prefillTokenCapacityPerReplica",
            &params.prefill_token_capacity_per_replica,
        ),
        (
            "decodeTokenCapacityPerReplica",
            &params.decode_token_capacity_per_replica,
        ),
        (
            "serverTokenCapacityPerReplica",
            &params.server_token_capacity_per_replica,
        ),
    ];
    for (field, value) in capacities {
        report.positive_quantity(&format!("{base}.{field}"), value.as_ref());
    }
    check_capacities(
        base,
        "TokenCapacityPerReplica",
        [
            &params.prefill_token_capacity_per_replica,
            &params.decode_token_capacity_per_replica,
            &params.server_token_capacity_per_replica,
        ],
        spec,
        kinds,
        report,
    );
    let noises = [
        ("qLevel", &params.q_level, crate::defaults::values::Q_LEVEL),
        ("qTrend", &params.q_trend, crate::defaults::values::Q_TREND),
        (
            "measurementNoise",
            &params.measurement_noise,
            crate::defaults::values::MEASUREMENT_NOISE,
        ),
    ];
    for (field, value, default) in noises {
        let Some(quantity) = value else { continue };
        let path = format!("{base}.{field}");
        match quantity.value() {
            Err(e) => report.error(path, format!("the quantity {e}")),
            Ok(v) if !v.is_positive() => report.warn(
                path,
                format!(
                    "\"{quantity}\" is not positive, so the filter uses the default {default:?}"
                ),
            ),
            Ok(_) => {}
        }
    }
}
