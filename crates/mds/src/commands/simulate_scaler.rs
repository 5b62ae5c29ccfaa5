//! The scaler as `mds simulate` runs it: a Shadow or suspended scaler is run as Active (the
//! question asked of a simulation is what it would do if it wrote the counts), and what holds
//! the counts whatever the load is said before the results.

use mds_api::ModelDeploymentScaler;
use mds_api::spec::Mode;
use mds_api::target::ModelDeployment;

/// Makes a Shadow or suspended scaler Active; the headline line saying so, or nothing when it
/// was Active already.
pub(super) fn simulated_as_active(scaler: &mut ModelDeploymentScaler) -> String {
    let spec = &mut scaler.spec;
    let shadow = spec.mode.unwrap_or_default() != Mode::Active;
    let suspended = spec.suspend.unwrap_or(false);
    let written = match (shadow, suspended) {
        (false, false) => return String::new(),
        (true, false) => "spec.mode is Shadow (it only reports)",
        (false, true) => "spec.suspend is true (it plans nothing)",
        (true, true) => "spec.mode is Shadow and spec.suspend is true",
    };
    spec.mode = Some(Mode::Active);
    spec.suspend = Some(false);
    format!(
        "simulated as Active: {written}, so as written it would never scale; this run shows what it would do if it wrote the counts (--as-written runs it as written)\n"
    )
}

/// What holds the scaler's counts on this target whatever the load: the headline lines, or
/// nothing.
pub(super) fn held_by_target(scaler: &ModelDeploymentScaler, target: &ModelDeployment) -> String {
    let mut lines = String::new();
    if let Some(why) = router_hold(target) {
        lines.push_str(&format!("scale-down held: {why}\n"));
    }
    let fixed: Vec<String> = scaler
        .spec
        .roles
        .iter()
        .filter(|r| r.min_replicas.is_some_and(|min| min == r.max_replicas))
        .map(|r| format!("{} at {}", r.name, r.max_replicas))
        .collect();
    if !fixed.is_empty() {
        lines.push_str(&format!(
            "counts held: minReplicas equals maxReplicas ({}), so those roles never scale\n",
            fixed.join(", ")
        ));
    }
    lines
}

/// Why a router-less target never shrinks, or `None` when it has a router.
pub(super) fn router_hold(target: &ModelDeployment) -> Option<String> {
    if target.has_router() {
        return None;
    }
    let name = target.metadata.name.as_deref().unwrap_or("(no name)");
    Some(format!(
        "ModelDeployment {name:?} has no spec.router, and GPUStack completes no retirement without one, so the scaler never shrinks a role (its NoRouter guard); give the target a router (vllm-router, llm-d-router or sglang-gateway) for it to scale down"
    ))
}

/// A warning for each `--quota` that holds fewer GPUs than the roles of its instance type
/// need at their minReplicas (`gpus_per_pod` GPUs per Pod): the floor is never admitted.
pub(super) fn quota_below_floor(
    quota: &std::collections::BTreeMap<String, Option<u32>>,
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    gpus_per_pod: u32,
) -> Vec<String> {
    let mut warnings = Vec::new();
    for (kind, gpus) in quota {
        let Some(gpus) = *gpus else { continue };
        let floors: Vec<(String, i64)> = target
            .spec
            .roles
            .iter()
            .filter(|r| r.instance_type.as_deref() == Some(kind.as_str()))
            .filter_map(|r| {
                let min = scaler
                    .spec
                    .roles
                    .iter()
                    .find(|s| s.name == r.name)?
                    .min_replicas?;
                let per_replica = i64::from(r.size()) * i64::from(gpus_per_pod);
                Some((
                    format!(
                        "{}'s minReplicas {min} ({per_replica} GPU per replica)",
                        r.name
                    ),
                    i64::from(min) * per_replica,
                ))
            })
            .collect();
        let needed: i64 = floors.iter().map(|(_, g)| g).sum();
        if i64::from(gpus) < needed {
            let roles: Vec<String> = floors.into_iter().map(|(what, _)| what).collect();
            warnings.push(format!(
                "--quota {kind}={gpus}: {gpus} GPU{} fewer than the {needed} that {} need, so the floor is never admitted and growth above it waits for admission until pendingTimeoutSeconds rolls it back",
                if gpus == 1 { " is" } else { "s are" },
                roles.join(" and ")
            ));
        }
    }
    warnings
}
