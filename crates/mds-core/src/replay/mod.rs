//! Replays a recorded timeline through the core, pass by pass (`mds replay`; format in
//! docs/REPLAY.md). The replayed target is a JSON document: the core's writes are applied to
//! it with JSON Patch semantics, so its counts and generation move and later passes see them.
//! Deterministic: time comes from the timeline.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::status::ReplicaVector;
use mds_api::target::{ModelDeployment, WorkloadAdmission};
use mds_signals::RoleObservation;
use serde::Serialize;
use serde_json::{Value, json};

use crate::{Input, Memory, Outcome, Scaler, Target, reconcile};

mod timeline;

pub use timeline::{
    MAX_REPLICAS, MAX_T_SECONDS, ObservedRole, RETIREMENT_STATES, RetirementChange, TargetChange,
    TimelineEntry, check_roles, parse_timeline,
};

/// One pass as `mds replay --json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassReport {
    pub t: f64,
    pub roles: BTreeMap<String, RoleReport>,
    pub write: Option<WriteReport>,
    pub conditions: BTreeMap<String, ConditionReport>,
    /// Events emitted this pass (`reason: message`).
    pub events: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleReport {
    /// What the role's observation said, for the text output.
    #[serde(skip)]
    pub observed: String,
    pub raw: i32,
    pub constrained: i32,
    pub reason: String,
    /// Binding limits, for the text output.
    #[serde(skip)]
    pub limits: Vec<String>,
    #[serde(skip)]
    pub current: i32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteReport {
    pub vector: Option<ReplicaVector>,
    #[serde(rename = "decisionID")]
    pub decision_id: Option<String>,
    pub term: i64,
    pub kind: &'static str,
    /// The patch was refused (a `test` failed); the next pass re-plans.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rejected: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConditionReport {
    pub status: String,
    pub reason: String,
}

/// Why a replay cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError(pub String);

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A target made from the scaler's roles when none is given: Server roles at their minimum.
pub fn synthetic_target(scaler: &ModelDeploymentScaler) -> Value {
    let roles: Vec<Value> = scaler
        .spec
        .roles
        .iter()
        .map(|r| json!({"name": r.name, "kind": "Server", "replicas": r.min_replicas.unwrap_or(1), "instanceType": "replay"}))
        .collect();
    json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": scaler.spec.target_ref.name, "uid": "replay-target", "generation": 1, "resourceVersion": "1"},
        "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"}, "roles": roles}
    })
}

/// Pass `t` happens `t` seconds after 2026-01-01T00:00:00Z.
const START_UNIX_SECONDS: i64 = 1_767_225_600;

/// The target document as replay needs it: a ModelDeployment object whose metadata has a
/// UID, generation and resource version (filled in when absent).
fn checked_target(target: Value) -> Result<Value, ReplayError> {
    if let Some(kind) = target.get("kind").and_then(Value::as_str)
        && kind != "ModelDeployment"
    {
        return Err(ReplayError(format!(
            "the target is a {kind}, not a ModelDeployment"
        )));
    }
    let mut doc = target;
    let Some(object) = doc.as_object_mut() else {
        return Err(ReplayError(
            "the target is not a ModelDeployment object".into(),
        ));
    };
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(ReplayError("the target's metadata is not an object".into()));
    };
    metadata
        .entry("uid")
        .or_insert_with(|| json!("replay-target"));
    metadata.entry("generation").or_insert_with(|| json!(1));
    metadata
        .entry("resourceVersion")
        .or_insert_with(|| json!("1"));
    Ok(doc)
}

/// The target's role names; each role's count must lie in what a replay can hold.
fn target_roles(doc: &Value) -> Result<BTreeSet<String>, ReplayError> {
    let md: ModelDeployment = serde_json::from_value(doc.clone())
        .map_err(|e| ReplayError(format!("the target is not a ModelDeployment: {e}")))?;
    for (i, role) in md.spec.roles.iter().enumerate() {
        if !(0..=MAX_REPLICAS).contains(&i64::from(role.replicas())) {
            return Err(ReplayError(format!(
                "the target's spec.roles[{i}].replicas: {} is out of range for a replay; allowed is 0 to {MAX_REPLICAS}",
                role.replicas()
            )));
        }
    }
    Ok(md.spec.roles.into_iter().map(|r| r.name).collect())
}

/// Replays `timeline` for `scaler` against `target` (a ModelDeployment document).
pub fn replay(
    scaler: &ModelDeploymentScaler,
    target: Value,
    timeline: &[TimelineEntry],
) -> Result<Vec<PassReport>, ReplayError> {
    let mut spec = scaler.spec.clone();
    default_spec(&mut spec);
    let name = scaler
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "replay".into());
    let uid = scaler
        .metadata
        .uid
        .clone()
        .unwrap_or_else(|| "replay-scaler".into());
    // A fresh controller starts from the status it reads, and sees the spec's generation.
    let mut status = scaler.status.clone().unwrap_or_default();
    let generation = scaler.metadata.generation.unwrap_or(1);
    let mut doc = checked_target(target)?;
    let roles: BTreeSet<String> = target_roles(&doc)?;
    check_roles(timeline, &roles)?;
    let start = Timestamp::from_second(START_UNIX_SECONDS).unwrap_or(Timestamp::UNIX_EPOCH);
    let mut memory = Memory::default();
    let mut unadmitted: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut terminating: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut reports = Vec::new();
    for entry in timeline {
        if let Some(change) = &entry.target {
            apply_change(&mut doc, change, &mut unadmitted, &mut terminating)
                .map_err(|e| ReplayError(format!("timeline line {}: {e}", entry.line)))?;
        }
        let md: ModelDeployment = serde_json::from_value(doc.clone())
            .map_err(|e| ReplayError(format!("the target is not a ModelDeployment: {e}")))?;
        let mut admission = BTreeMap::new();
        let mut pods = BTreeSet::new();
        for role in &md.spec.roles {
            for o in 0..role.replicas() {
                let refused = unadmitted
                    .get(&role.name)
                    .is_some_and(|list| list.contains(&o));
                admission.insert(
                    (role.name.clone(), o),
                    if refused {
                        WorkloadAdmission::Unadmitted
                    } else {
                        WorkloadAdmission::Admitted
                    },
                );
                pods.insert((role.name.clone(), o));
            }
        }
        // Every declared instance has its Workload; a retired one keeps it until GPUStack
        // deletes it with its Pods (TARGET.md section 5: after Draining).
        let mut workloads = pods.clone();
        if let Some(r) = md.status.as_ref().and_then(|s| s.retirement.as_ref()) {
            pods.insert((r.role_name.clone(), r.replica_ordinal));
            if !matches!(r.state.as_str(), "Deleting" | "Settling" | "Completed") {
                workloads.insert((r.role_name.clone(), r.replica_ordinal));
            }
        }
        // Pods left behind Terminating: no Workload.
        for (role, ordinals) in &terminating {
            pods.extend(ordinals.iter().map(|o| (role.clone(), *o)));
        }
        let observations: BTreeMap<String, RoleObservation> = entry
            .roles
            .iter()
            .map(|(role, o)| (role.clone(), o.observation()))
            .collect();
        let now = SignedDuration::try_from_secs_f64(entry.t)
            .ok()
            .and_then(|offset| start.checked_add(offset).ok())
            .filter(|_| (0.0..=MAX_T_SECONDS).contains(&entry.t))
            .ok_or_else(|| {
                ReplayError(format!(
                    "timeline line {}: t: {} is out of range; allowed is 0 to {MAX_T_SECONDS} seconds",
                    entry.line, entry.t
                ))
            })?;
        let input = Input {
            scaler: Scaler {
                name: &name,
                uid: &uid,
                generation,
                spec: &spec,
                status: &status,
                deleting: false,
            },
            target: Some(Target {
                deployment: &md,
                // Replay has no cold start: an admitted instance is ready.
                ready_ordinals: admission
                    .iter()
                    .filter(|(_, a)| **a == WorkloadAdmission::Admitted)
                    .map(|(key, _)| key.clone())
                    .collect(),
                admission,
                ordinals_with_pods: pods,
                workloads: Some(workloads),
            }),
            observations: &observations,
            // Every timeline entry is its own sampling.
            observed_at: now,
            sampling_problem: None,
            now,
            refused: None,
        };
        let outcome = reconcile(&input, &mut memory);
        let rejected = match &outcome.write {
            Some(write) => !apply_write(&mut doc, write)?,
            None => false,
        };
        if outcome.write_status && !rejected {
            status = outcome.status.clone();
        }
        let mut pass = report(entry.t, &outcome, rejected);
        for (role, r) in pass.roles.iter_mut() {
            r.observed = entry
                .roles
                .get(role)
                .map_or_else(|| "no observation".into(), ObservedRole::summary);
        }
        reports.push(pass);
    }
    Ok(reports)
}

fn apply_change(
    doc: &mut Value,
    change: &TargetChange,
    unadmitted: &mut BTreeMap<String, Vec<i32>>,
    terminating: &mut BTreeMap<String, Vec<i32>>,
) -> Result<(), ReplayError> {
    if let Some(replicas) = &change.replicas {
        let roles = doc
            .pointer_mut("/spec/roles")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| ReplayError("the target has no spec.roles".into()))?;
        for (name, count) in replicas {
            let role = roles
                .iter_mut()
                .find(|r| r["name"] == json!(name))
                .ok_or_else(|| {
                    ReplayError(format!(
                        "the timeline edits role {name:?}, which the target does not have"
                    ))
                })?;
            role["replicas"] = json!(count);
        }
        bump(doc, true);
    }
    if let Some(map) = &change.unadmitted {
        for (role, list) in map {
            unadmitted.insert(role.clone(), list.clone());
        }
    }
    if let Some(map) = &change.terminating {
        for (role, list) in map {
            terminating.insert(role.clone(), list.clone());
        }
    }
    if let Some(retirement) = &change.retirement {
        let Some(object) = doc.as_object_mut() else {
            return Err(ReplayError(
                "the target is not a ModelDeployment object".into(),
            ));
        };
        let status = object.entry("status").or_insert(json!({}));
        match retirement {
            Some(r) => {
                status["retirement"] =
                    json!({"roleName": r.role, "replicaOrdinal": r.ordinal, "state": r.state})
            }
            None => {
                if let Some(s) = status.as_object_mut() {
                    s.remove("retirement");
                }
            }
        }
    }
    Ok(())
}

/// Moves the resource version, and the generation when the spec changed.
fn bump(doc: &mut Value, spec_changed: bool) {
    let rv: i64 = doc["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    doc["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
    if spec_changed {
        let g = doc["metadata"]["generation"].as_i64().unwrap_or(1);
        doc["metadata"]["generation"] = json!(g + 1);
    }
}

/// Applies a write; `false` when its patch is refused.
fn apply_write(doc: &mut Value, write: &crate::Write) -> Result<bool, ReplayError> {
    let ops: json_patch::Patch = serde_json::to_value(&write.ops)
        .and_then(serde_json::from_value)
        .map_err(|e| ReplayError(format!("the core produced an invalid patch: {e}")))?;
    let mut candidate = doc.clone();
    if json_patch::patch(&mut candidate, &ops).is_err() {
        return Ok(false);
    }
    let spec_changed = candidate["spec"] != doc["spec"];
    *doc = candidate;
    bump(doc, spec_changed);
    Ok(true)
}

fn report(t: f64, outcome: &Outcome, rejected: bool) -> PassReport {
    let roles = outcome
        .plan
        .as_ref()
        .map(|p| {
            p.roles
                .iter()
                .map(|r| {
                    (
                        r.name.clone(),
                        RoleReport {
                            observed: String::new(),
                            raw: r.raw,
                            constrained: r.constrained,
                            reason: r.reason.as_str().to_string(),
                            limits: r.limits.iter().map(|l| l.to_string()).collect(),
                            current: r.current,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let conditions: BTreeMap<String, ConditionReport> = outcome
        .status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                ConditionReport {
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                },
            )
        })
        .collect();
    PassReport {
        t,
        roles,
        write: outcome.write.as_ref().map(|w| WriteReport {
            vector: w.vector.clone(),
            decision_id: w.decision_id.clone(),
            term: w.term,
            kind: w.kind.as_str(),
            rejected,
        }),
        conditions,
        events: outcome
            .events
            .iter()
            .map(|e| format!("{}: {}", e.reason, e.message))
            .collect(),
    }
}
