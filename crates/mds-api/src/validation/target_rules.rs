//! Rules that need the target ModelDeployment: every target role bounded, every scaler role
//! present, managed and of a known kind, and generated names that fit at maxReplicas.

use std::collections::BTreeMap;

use super::Report;
use super::names::{NamedRole, generated_name_problems};
use crate::defaults::effective_algorithm_type;
use crate::spec::{AlgorithmType, ModelDeploymentScalerSpec};
use crate::target::{ModelDeployment, RoleKind, TargetRole};

pub(super) fn check(
    spec: &ModelDeploymentScalerSpec,
    target: &ModelDeployment,
    report: &mut Report,
) {
    let md_name = target
        .metadata
        .name
        .as_deref()
        .unwrap_or(&spec.target_ref.name);
    let target_roles: BTreeMap<&str, &TargetRole> = target
        .spec
        .roles
        .iter()
        .map(|r| (r.name.as_str(), r))
        .collect();
    let scaled: BTreeMap<&str, usize> = spec
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();

    for role in &target.spec.roles {
        if !scaled.contains_key(role.name.as_str()) {
            report.error(
                "spec.roles",
                format!(
                    "target role {:?} of ModelDeployment {md_name:?} has no bounds; every target role needs an entry with maxReplicas",
                    role.name
                ),
            );
        }
    }

    let named: Vec<NamedRole> = spec
        .roles
        .iter()
        .filter_map(|r| {
            target_roles.get(r.name.as_str()).map(|t| NamedRole {
                name: &r.name,
                size: t.size(),
                max_replicas: r.max_replicas,
            })
        })
        .collect();
    let others: Vec<NamedRole> = target
        .spec
        .roles
        .iter()
        .map(|t| NamedRole {
            name: &t.name,
            size: t.size(),
            max_replicas: scaled
                .get(t.name.as_str())
                .map_or(t.replicas(), |&i| spec.roles[i].max_replicas),
        })
        .collect();

    for (i, role) in spec.roles.iter().enumerate() {
        let path = format!("spec.roles[{i}]");
        let Some(target_role) = target_roles.get(role.name.as_str()) else {
            let known: Vec<&str> = target_roles.keys().copied().collect();
            report.error(
                format!("{path}.name"),
                format!(
                    "role {:?} does not exist on ModelDeployment {md_name:?} (its roles: {}); name a target role",
                    role.name,
                    known.join(", ")
                ),
            );
            continue;
        };
        if target_role.has_command() {
            report.error(
                path.clone(),
                format!(
                    "role {:?} runs a custom command on the target, so its serving signals are unmanaged; the scaler cannot plan it",
                    role.name
                ),
            );
        }
        if target_role.elastic_ep.is_some() {
            report.error(
                path.clone(),
                format!(
                    "role {:?} uses elasticEp, whose width grows one collective rather than adding replicas; the scaler cannot plan it",
                    role.name
                ),
            );
        }
        // D31: Proportional needs no kind; the token algorithms need a capacity per kind,
        // and none can be given for a kind they do not know.
        if let RoleKind::Unknown(kind) = target_role.kind() {
            match effective_algorithm_type(spec.algorithm.as_ref()) {
                AlgorithmType::Proportional => report.warn(
                    path.clone(),
                    format!(
                        "role {:?} has kind {kind:?} on the target, which the scaler does not know; Proportional plans it from its own metric, but a token algorithm could not",
                        role.name
                    ),
                ),
                token => report.error(
                    path.clone(),
                    format!(
                        "role {:?} has kind {kind:?} on the target; {token:?} needs a token capacity per kind and none can be given for an unknown kind (known: Server, Prefill, Decode, Encode); fix the target's kind or use Proportional",
                        role.name
                    ),
                ),
            }
        }
        if let Some(me) = named.iter().find(|n| n.name == role.name) {
            for problem in generated_name_problems(md_name, me, &others) {
                report.error(format!("{path}.maxReplicas"), problem);
            }
        }
        let current = target_role.replicas();
        let min = role.min_replicas.unwrap_or(1);
        if current < min || current > role.max_replicas {
            report.warn(
                path,
                format!(
                    "the target's current count {current} lies outside [{min}, {}]; planning reports BoundsConflict until the bounds include it",
                    role.max_replicas
                ),
            );
        }
    }

    if target.spec.engine.is_some()
        && let Err(unknown) = target.engine_kind()
    {
        report.warn(
            format!("ModelDeployment {md_name:?} spec.engine.name"),
            format!("{unknown}; the scaler will report WaitingForMetrics for this target"),
        );
    }
}

/// Role name → kind on the target.
pub(super) fn role_kinds(target: &ModelDeployment) -> BTreeMap<String, RoleKind> {
    target
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.kind()))
        .collect()
}
