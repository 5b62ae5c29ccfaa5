//! The binding fence's rules that need no planner: terms (D19), decision IDs, pending cohorts
//! (D4, D18) and scale-down outcomes (D5).

use std::collections::BTreeMap;

use jiff::Timestamp;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::status::{
    LastScaleDown, ModelDeploymentScalerStatus, PendingCohort, ReplicaVector, ScaleDownOutcome,
};
use mds_api::target::{ModelDeployment, WorkloadAdmission};

use crate::Target;

/// The target's annotation value, if any.
pub fn annotation<'a>(md: &'a ModelDeployment, key: &str) -> Option<&'a str> {
    md.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The term of a new binding (D19): one more than the highest term seen on this target.
pub fn next_term(md: &ModelDeployment, status: &ModelDeploymentScalerStatus) -> i64 {
    let binding = annotation(md, BINDING_ANNOTATION)
        .and_then(|b| BindingPayload::parse(b).ok())
        .map(|b| b.term);
    let decision = annotation(md, DECISION_ANNOTATION)
        .and_then(|d| DecisionPayload::parse(d).ok())
        .map(|d| d.term);
    let same_target = status
        .binding
        .as_ref()
        .and_then(|b| b.target_uid.as_deref())
        == md.metadata.uid.as_deref();
    let ours = same_target
        .then(|| {
            let bound = status.binding.as_ref().and_then(|b| b.term);
            let committed = status.last_commit.as_ref().map(|c| c.term);
            bound.max(committed)
        })
        .flatten();
    1 + [binding, decision, ours]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
}

/// A decision ID unique per scaler, term and millisecond.
pub fn decision_id(scaler: &str, term: i64, now: Timestamp) -> String {
    format!("{scaler}-t{term}-{}", now.as_millisecond())
}

/// When a decision was made, read back from its ID (`None` for an ID not in our format).
pub fn decision_time(decision_id: &str) -> Option<Timestamp> {
    let ms = decision_id.rsplit('-').next()?.parse::<i64>().ok()?;
    Timestamp::from_millisecond(ms).ok()
}

/// The target's current counts by role.
pub fn current_vector(md: &ModelDeployment) -> ReplicaVector {
    md.spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.replicas()))
        .collect()
}

/// Where a pending cohort stands this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CohortState {
    /// Every added ordinal is admitted.
    Admitted,
    /// Still waiting, within the timeout.
    Waiting,
    /// Roll back: an ordinal was parked, or the timeout passed with ordinals unadmitted.
    Exhausted {
        unadmitted: Vec<(String, i32)>,
        parked: bool,
    },
}

/// The ordinals a cohort added: `baseline..target` per grown role.
pub fn added_ordinals(cohort: &PendingCohort) -> Vec<(String, i32)> {
    cohort
        .target_vector
        .iter()
        .flat_map(|(role, &to)| {
            let from = cohort.baseline_vector.get(role).copied().unwrap_or(to);
            (from..to).map(move |o| (role.clone(), o))
        })
        .collect()
}

pub fn cohort_state(
    cohort: &PendingCohort,
    target: &Target,
    timeout_seconds: i64,
    now: Timestamp,
) -> CohortState {
    let mut unadmitted = Vec::new();
    let mut parked = false;
    for key in added_ordinals(cohort) {
        match target.admission.get(&key) {
            Some(WorkloadAdmission::Admitted) => {}
            Some(WorkloadAdmission::Parked) => {
                parked = true;
                unadmitted.push(key);
            }
            _ => unadmitted.push(key),
        }
    }
    if unadmitted.is_empty() {
        return CohortState::Admitted;
    }
    let started = cohort.started_at.as_ref().map(|t| t.0).unwrap_or(now);
    let expired = now.duration_since(started).as_secs() > timeout_seconds;
    if parked || expired {
        CohortState::Exhausted { unadmitted, parked }
    } else {
        CohortState::Waiting
    }
}

/// Where the latest scale-down's retirement stands (D5, amended in docs/DESIGN.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetirementState {
    /// A retirement is reported on the target (of any ordinal, in any state but an abort of
    /// ours): GPUStack clears it when that retirement is done.
    Reported,
    /// No retirement is reported, but this removed instance is still there: GPUStack retires
    /// one ordinal at a time, so its retirement has not started yet, or it left Pods behind
    /// (`pods_only`: without the Workload API nothing else can be seen).
    Remaining {
        role: String,
        ordinal: i32,
        pods_only: bool,
    },
    /// Aborted for a role and an ordinal we removed: restore.
    Aborted,
    /// Gone, and no removed instance remains.
    Succeeded,
}

/// The instance is still there: its Workload exists, or, where the Workload API is not
/// served, one of its Pods does (Terminating ones included). A Pod left Terminating after its
/// Workload was deleted holds no quota (TARGET.md section 4).
pub fn instance_remains(target: &Target, role: &str, ordinal: i32) -> bool {
    let key = (role.to_string(), ordinal);
    match &target.workloads {
        Some(workloads) => workloads.contains(&key),
        None => target.ordinals_with_pods.contains(&key),
    }
}

/// The roles a scale-down lowered that are still below their pre-scale-down count, with the
/// ordinals removed from each (`now..pre`). A role that grew back since is not among them, so
/// an old record never matches a later abort.
pub fn shrunk_roles(
    last: &LastScaleDown,
    md: &ModelDeployment,
) -> Vec<(String, std::ops::Range<i32>)> {
    md.spec
        .roles
        .iter()
        .filter_map(|r| {
            let pre = *last.pre_scale_down_vector.get(&r.name)?;
            let now = r.replicas();
            (now < pre).then(|| (r.name.clone(), now..pre))
        })
        .collect()
}

pub fn retirement_state(last: &LastScaleDown, target: &Target) -> RetirementState {
    let shrunk = shrunk_roles(last, target.deployment);
    let removed = |role: &str, ordinal: i32| {
        shrunk
            .iter()
            .any(|(r, range)| r == role && range.contains(&ordinal))
    };
    match target
        .deployment
        .status
        .as_ref()
        .and_then(|s| s.retirement.as_ref())
    {
        Some(r) if r.is_aborted() && removed(&r.role_name, r.replica_ordinal) => {
            RetirementState::Aborted
        }
        Some(_) => RetirementState::Reported,
        None => shrunk
            .iter()
            .flat_map(|(role, range)| range.clone().map(move |o| (role, o)))
            .find(|(role, o)| instance_remains(target, role, *o))
            .map_or(RetirementState::Succeeded, |(role, ordinal)| {
                RetirementState::Remaining {
                    role: role.clone(),
                    ordinal,
                    pods_only: target.workloads.is_none(),
                }
            }),
    }
}

/// Records a commit's shrink (D5, D16): the roles it lowers are those whose count drops from
/// `before` to `after`; the record names the first of them and its highest removed ordinal.
pub fn scale_down_record(before: &ReplicaVector, after: &ReplicaVector) -> Option<LastScaleDown> {
    let (role, (from, _)) = changes(before, after)
        .into_iter()
        .find(|(_, (a, b))| b < a)?;
    Some(LastScaleDown {
        role,
        ordinal: from - 1,
        pre_scale_down_vector: before.clone(),
        outcome: ScaleDownOutcome::Committed,
        aborted_at: None,
        cooldown_until: None,
    })
}

/// The given roles and every role that shares a nonempty instanceType with one of them: the
/// pool a shortage of quota belongs to (D29).
pub fn same_pool<'a>(
    md: &ModelDeployment,
    roles: impl IntoIterator<Item = &'a str>,
) -> std::collections::BTreeSet<String> {
    let mut pool: std::collections::BTreeSet<String> =
        roles.into_iter().map(str::to_string).collect();
    let types: Vec<&str> = md
        .spec
        .roles
        .iter()
        .filter(|r| pool.contains(&r.name))
        .filter_map(|r| r.instance_type.as_deref().filter(|t| !t.is_empty()))
        .collect();
    for r in &md.spec.roles {
        if r.instance_type
            .as_deref()
            .is_some_and(|t| types.contains(&t))
        {
            pool.insert(r.name.clone());
        }
    }
    pool
}

/// Roles whose count differs between two vectors, with (before, after).
pub fn changes(before: &ReplicaVector, after: &ReplicaVector) -> BTreeMap<String, (i32, i32)> {
    after
        .iter()
        .filter_map(|(role, &to)| {
            let from = before.get(role).copied()?;
            (from != to).then(|| (role.clone(), (from, to)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_time_reads_back_from_its_id() {
        let now: Timestamp = "2026-11-30T10:00:00.123Z".parse().unwrap();
        let id = decision_id("my-scaler", 3, now);
        assert_eq!(decision_time(&id), Some(now));
        assert_eq!(decision_time("hand-written"), None);
    }
}
