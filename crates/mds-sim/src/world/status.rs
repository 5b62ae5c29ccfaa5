//! `status` of a ModelDeployment, rebuilt from observation on every pass (TARGET.md section 3).
//!
//! Counts are per instance. `ready` counts ready instances except the one a retirement in
//! progress has withdrawn (its Pods are departing); after an abort the retained instance counts
//! again, so `ready` may exceed `desired`, as it may while further removals wait their turn.
//! `quotaReserved` counts instances whose Workload holds quota and still exists.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::target::{
    LooseCondition, ModelDeploymentStatus, RoleKind, RoleParallelism, TargetRoleStatus,
};

use super::deployment::{Deployment, desired_of};
use super::instance::Phase;
use super::instance::{load_balance_name, load_balance_of};

struct Counts {
    ready: i32,
    quota_reserved: i32,
    /// Declared instances still on their way (composing, waiting, starting) and not parked.
    progressing: i32,
}

fn counts(dep: &Deployment, role: &str) -> Counts {
    let desired = dep.desired(role);
    let mut c = Counts {
        ready: 0,
        quota_reserved: 0,
        progressing: 0,
    };
    for instance in dep
        .roles
        .get(role)
        .into_iter()
        .flat_map(|r| r.instances.values())
    {
        if instance.is_ready() && !dep.is_departing(role, instance.ordinal) {
            c.ready += 1;
        }
        if !instance.is_terminating() && instance.workload.as_ref().is_some_and(|w| w.holds_quota())
        {
            c.quota_reserved += 1;
        }
        let parked = instance.workload.as_ref().is_some_and(|w| !w.active);
        let on_the_way = matches!(
            instance.phase,
            Phase::Composing { .. } | Phase::Gated | Phase::Starting { .. }
        );
        if instance.ordinal < desired && on_the_way && !parked {
            c.progressing += 1;
        }
    }
    c
}

fn kind_letter(kind: &RoleKind) -> char {
    match kind {
        RoleKind::Server => 'S',
        RoleKind::Prefill => 'P',
        RoleKind::Decode => 'D',
        RoleKind::Encode => 'E',
        RoleKind::Unknown(_) => 'U',
    }
}

/// Rebuilds the status of `dep` at `now`.
pub(crate) fn rebuild(dep: &mut Deployment, now: Timestamp) {
    let spec_roles = dep.object.spec.roles.clone();
    let mut roles = Vec::new();
    let mut all_ready = true;
    let mut any_over = false;
    let mut any_progressing = false;
    let mut every_kind_ready = !spec_roles.is_empty();
    let mut summary = if dep.router_present() {
        "1R".to_string()
    } else {
        String::new()
    };
    for role in &spec_roles {
        let c = counts(dep, &role.name);
        let desired = desired_of(role) as i32;
        all_ready &= c.ready == desired;
        any_over |= c.ready > desired;
        any_progressing |= c.progressing > 0;
        every_kind_ready &= c.ready > 0;
        summary.push_str(&format!("{desired}{}", kind_letter(&role.kind())));
        roles.push(TargetRoleStatus {
            name: role.name.clone(),
            kind: Some(role.kind()),
            desired: Some(role.replicas()),
            ready: Some(c.ready),
            quota_reserved: Some(c.quota_reserved),
            unmanaged: Some(role.has_command()),
            parallelism: Some(RoleParallelism {
                load_balance: Some(load_balance_name(load_balance_of(role)).to_string()),
            }),
        });
    }
    let phase = if all_ready {
        "Ready"
    } else if any_progressing && !any_over {
        "Starting"
    } else {
        "Degraded"
    };
    let generation = dep.generation();
    let previous = dep
        .object
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let conditions = [
        quota_condition(dep),
        (
            "ReplicasUpToDate",
            "True",
            "UpToDate",
            "no rollout in progress".to_string(),
        ),
        if every_kind_ready {
            (
                "RoleKindsReady",
                "True",
                "AllKindsReady",
                "every role has a ready instance".to_string(),
            )
        } else {
            (
                "RoleKindsReady",
                "False",
                "KindsNotReady",
                "a role has no ready instance".to_string(),
            )
        },
        if dep.router_present() {
            (
                "RouterReady",
                "True",
                "Ready",
                "the router is ready".to_string(),
            )
        } else {
            (
                "RouterReady",
                "True",
                "NotApplicable",
                "no router is declared".to_string(),
            )
        },
    ]
    .into_iter()
    .map(|(kind, status, reason, message)| {
        condition(&previous, kind, status, reason, message, generation, now)
    })
    .collect();
    let retirement = dep
        .retirement
        .as_ref()
        .map(|r| r.view(dep.last_consumed_token.as_deref()));
    dep.object.status = Some(ModelDeploymentStatus {
        phase: Some(phase.to_string()),
        roles,
        conditions,
        retirement,
        role_summary: Some(summary),
    });
}

/// `QuotaReserved` over the declared instances (TARGET.md section 3's reasons).
fn quota_condition(dep: &Deployment) -> (&'static str, &'static str, &'static str, String) {
    let declared: Vec<_> = dep
        .instances()
        .filter(|(role, i)| i.ordinal < dep.desired(role) && !i.is_terminating())
        .map(|(_, i)| i)
        .collect();
    let want: u32 = dep.object.spec.roles.iter().map(desired_of).sum();
    let have = declared
        .iter()
        .filter(|i| i.workload.as_ref().is_some_and(|w| w.holds_quota()))
        .count();
    let t = "QuotaReserved";
    if want == 0 {
        return (t, "Unknown", "NoReplicas", "no instance is declared".into());
    }
    if have as u32 == want {
        return (
            t,
            "True",
            "Reserved",
            format!("{have}/{want} instances hold quota"),
        );
    }
    if declared
        .iter()
        .any(|i| i.workload.as_ref().is_some_and(|w| !w.active))
    {
        return (
            t,
            "False",
            "Parked",
            "a Workload failed to assemble and is parked rather than held".into(),
        );
    }
    if declared
        .iter()
        .any(|i| i.workload.as_ref().is_some_and(|w| w.evicted))
    {
        return (
            t,
            "False",
            "PreemptedInPart",
            format!("{have}/{want} instances hold quota"),
        );
    }
    if declared.iter().any(|i| i.workload.is_none()) {
        return (
            t,
            "Unknown",
            "AdmissionInFlight",
            format!("{have}/{want} instances hold quota"),
        );
    }
    (
        t,
        "False",
        "Pending",
        format!("{have}/{want} instances hold quota"),
    )
}

/// A condition whose `lastTransitionTime` moves only when its status changes.
pub(crate) fn condition(
    previous: &[LooseCondition],
    kind: &str,
    status: &str,
    reason: &str,
    message: String,
    generation: i64,
    now: Timestamp,
) -> LooseCondition {
    let since = previous
        .iter()
        .find(|c| c.condition_type == kind && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    LooseCondition {
        condition_type: kind.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        observed_generation: Some(generation),
        last_transition_time: Some(since),
    }
}
