//! Rules on the scaler spec alone: target reference, roles and bounds, sampling, behavior and
//! rebalance.

use std::collections::BTreeSet;

use super::Report;
use super::names::{is_dns1123_label, is_dns1123_subdomain};
use crate::spec::{ModelDeploymentScalerSpec, RebalancePolicy, StepPolicy};

pub(super) fn check(
    spec: &ModelDeploymentScalerSpec,
    old: Option<&ModelDeploymentScalerSpec>,
    report: &mut Report,
) {
    check_target_ref(spec, old, report);
    check_roles(spec, report);
    check_sampling(spec, report);
    check_behavior(spec, report);
    check_rebalance(spec, report);
}

fn check_target_ref(
    spec: &ModelDeploymentScalerSpec,
    old: Option<&ModelDeploymentScalerSpec>,
    report: &mut Report,
) {
    let name = &spec.target_ref.name;
    let path = "spec.targetRef.name";
    if name.is_empty() {
        report.error(
            path,
            "is required; name a ModelDeployment in the scaler's namespace",
        );
    } else if !is_dns1123_subdomain(name) {
        report.error(
            path,
            format!(
                "{name:?} is not a valid ModelDeployment name; use lower-case letters, digits, '-' and '.', at most 253 characters"
            ),
        );
    }
    if let Some(old) = old
        && old.target_ref.name != *name
    {
        report.error(
            path,
            format!(
                "is immutable (was {:?}); create a new scaler to scale another ModelDeployment",
                old.target_ref.name
            ),
        );
    }
}

/// List sizes the CRD schema caps (so CEL cost estimates stay bounded); `mds validate` must
/// refuse what the API server would.
pub(super) const MAX_ROLES: usize = 32;
pub(super) const MAX_RATIOS: usize = 64;
pub(super) const MAX_PRIORITY: usize = 32;

pub(super) fn check_list_size(report: &mut Report, path: &str, len: usize, max: usize) {
    if len > max {
        report.error(
            path,
            format!("has {len} entries; at most {max} are accepted"),
        );
    }
}

fn check_roles(spec: &ModelDeploymentScalerSpec, report: &mut Report) {
    check_list_size(report, "spec.roles", spec.roles.len(), MAX_ROLES);
    check_list_size(report, "spec.ratios", spec.ratios.len(), MAX_RATIOS);
    if spec.roles.is_empty() {
        report.error(
            "spec.roles",
            "needs at least one role; give minReplicas and maxReplicas for every target role",
        );
    }
    let mut seen = BTreeSet::new();
    for (i, role) in spec.roles.iter().enumerate() {
        let path = format!("spec.roles[{i}]");
        if role.name.is_empty() {
            report.error(
                format!("{path}.name"),
                "is required; name a role of the target",
            );
        } else if !is_dns1123_label(&role.name) {
            report.error(
                format!("{path}.name"),
                format!(
                    "{:?} is not a valid role name; use lower-case letters, digits and '-', at most 63 characters",
                    role.name
                ),
            );
        } else if !seen.insert(role.name.as_str()) {
            report.error(
                format!("{path}.name"),
                format!(
                    "role {:?} is listed twice; give each role one entry",
                    role.name
                ),
            );
        }
        report.check_range(&format!("{path}.minReplicas"), role.min_replicas, 1, 1024);
        report.check_range(
            &format!("{path}.maxReplicas"),
            Some(role.max_replicas),
            1,
            1024,
        );
        if let Some(min) = role.min_replicas
            && min > role.max_replicas
        {
            report.error(
                format!("{path}.minReplicas"),
                format!(
                    "{min} is greater than maxReplicas {}; the minimum must not exceed the maximum",
                    role.max_replicas
                ),
            );
        }
    }
}

fn check_sampling(spec: &ModelDeploymentScalerSpec, report: &mut Report) {
    let Some(sampling) = &spec.sampling else {
        return;
    };
    report.check_range(
        "spec.sampling.intervalSeconds",
        sampling.interval_seconds,
        5,
        300,
    );
    report.check_range(
        "spec.sampling.pendingTimeoutSeconds",
        sampling.pending_timeout_seconds,
        60,
        1200,
    );
}

fn check_step_policy(path: &str, policy: Option<&StepPolicy>, report: &mut Report) {
    if let Some(policy) = policy
        && policy.value < 0
    {
        report.error(
            format!("{path}.value"),
            format!(
                "{} is negative; a step is zero (no movement) or more",
                policy.value
            ),
        );
    }
}

fn check_behavior(spec: &ModelDeploymentScalerSpec, report: &mut Report) {
    let Some(behavior) = &spec.behavior else {
        return;
    };
    if let Some(up) = &behavior.scale_up {
        let path = "spec.behavior.scaleUp";
        report.check_range(
            &format!("{path}.stabilizationWindowSeconds"),
            up.stabilization_window_seconds,
            0,
            600,
        );
        if let Some(v) = up.max_step_replicas
            && v < 0
        {
            report.error(
                format!("{path}.maxStepReplicas"),
                format!("{v} is negative; use zero or more (zero stores the default 4)"),
            );
        }
        report.check_range(
            &format!("{path}.maxStepPercent"),
            up.max_step_percent,
            0,
            1000,
        );
        check_step_policy(
            &format!("{path}.stepPolicy"),
            up.step_policy.as_ref(),
            report,
        );
    }
    if let Some(down) = &behavior.scale_down {
        let path = "spec.behavior.scaleDown";
        report.check_range(
            &format!("{path}.stabilizationWindowSeconds"),
            down.stabilization_window_seconds,
            0,
            1800,
        );
        report.check_range(
            &format!("{path}.cooldownAfterAbortSeconds"),
            down.cooldown_after_abort_seconds,
            0,
            3600,
        );
        report.check_range(
            &format!("{path}.decodePostScaleUpGraceSeconds"),
            down.decode_post_scale_up_grace_seconds,
            0,
            3600,
        );
        check_step_policy(
            &format!("{path}.stepPolicy"),
            down.step_policy.as_ref(),
            report,
        );
    }
}

fn check_rebalance(spec: &ModelDeploymentScalerSpec, report: &mut Report) {
    let Some(rebalance) = &spec.rebalance else {
        return;
    };
    check_list_size(
        report,
        "spec.rebalance.priority",
        rebalance.priority.len(),
        MAX_PRIORITY,
    );
    let scaled: BTreeSet<&str> = spec.roles.iter().map(|r| r.name.as_str()).collect();
    let mut seen = BTreeSet::new();
    for (i, name) in rebalance.priority.iter().enumerate() {
        let path = format!("spec.rebalance.priority[{i}]");
        if !scaled.contains(name.as_str()) {
            report.error(
                path,
                format!("{name:?} is not a role in spec.roles; list scaled role names only"),
            );
        } else if !seen.insert(name.as_str()) {
            report.error(
                path,
                format!("{name:?} is listed twice; each role appears once"),
            );
        }
    }
    let policy = rebalance.policy.unwrap_or_default();
    if !rebalance.priority.is_empty() && policy != RebalancePolicy::Priority {
        report.warn(
            "spec.rebalance.priority",
            format!("is ignored because policy is {policy:?}; it only affects the Priority policy"),
        );
    }
}
