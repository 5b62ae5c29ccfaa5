//! Replays a recorded timeline pass by pass (`mds replay`; format in docs/REPLAY.md) through
//! the operator's own worker on the in-memory cluster: the scaler and target go in as
//! recorded, each entry's changes and instances are put into the cluster, and the worker's
//! pass plans on the entry's readings and makes its writes there, so counts, generations and
//! the status move as on an API server and later passes see them. Deterministic: time comes
//! from the timeline.

use std::collections::{BTreeMap, BTreeSet};

use futures::executor::block_on;
use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::status::ReplicaVector;
use mds_api::target::{ModelDeployment, labels};
use mds_core::Outcome;
use mds_signals::RoleObservation;
use serde::Serialize;
use serde_json::{Value, json};

use mds_worker::ScalerKey;
use mds_worker::Worker;
use mds_worker::memory_cluster::{Kind, MemoryCluster};

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
    /// The condition's message, for tests (the output shows status and reason).
    #[serde(skip)]
    pub message: String,
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
    let mut world = ReplayWorld::new(scaler, target)?;
    check_roles(timeline, &world.roles)?;
    let start = Timestamp::from_second(START_UNIX_SECONDS).unwrap_or(Timestamp::UNIX_EPOCH);
    let mut worker = Worker::new(world.key.clone());
    let mut unadmitted: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut terminating: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut reports = Vec::new();
    for entry in timeline {
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
        if let Some(change) = &entry.target {
            if let Some(map) = &change.unadmitted {
                unadmitted.extend(map.clone());
            }
            if let Some(map) = &change.terminating {
                terminating.extend(map.clone());
            }
            world
                .apply_change(change)
                .map_err(|e| ReplayError(format!("timeline line {}: {e}", entry.line)))?;
        }
        if let Some(patch) = &entry.scaler {
            world
                .edit_scaler(patch)
                .map_err(|e| ReplayError(format!("timeline line {}: scaler: {e}", entry.line)))?;
        }
        if entry.restart {
            worker = Worker::new(world.key.clone());
        }
        world.sync_instances(&unadmitted, &terminating, now)?;
        let observations: BTreeMap<String, RoleObservation> = entry
            .roles
            .iter()
            .map(|(role, o)| (role.clone(), o.observation()))
            .collect();
        let pass = block_on(worker.pass_on_readings(&world.cluster, observations, now));
        let Some(outcome) = pass.outcome.as_ref() else {
            return Err(ReplayError(format!(
                "timeline line {}: the pass stopped before planning: {}",
                entry.line,
                pass.problem.as_deref().unwrap_or("the scaler is gone")
            )));
        };
        let rejected = pass.held.is_some() || pass.write.as_ref().is_some_and(|(_, r)| r.is_err());
        let mut report = report(entry.t, outcome, rejected);
        for (role, r) in report.roles.iter_mut() {
            r.observed = entry
                .roles
                .get(role)
                .map_or_else(|| "no observation".into(), ObservedRole::summary);
        }
        reports.push(report);
    }
    Ok(reports)
}

/// The replayed scaler and target in an in-memory cluster, and the instances the timeline
/// says exist (TARGET.md section 4's labels; one Kueue Workload per instance).
struct ReplayWorld {
    cluster: MemoryCluster,
    key: ScalerKey,
    target: String,
    roles: BTreeSet<String>,
    /// The instances in the cluster, and their member counts.
    instances: BTreeMap<(String, i32), (Instance, i32)>,
}

impl ReplayWorld {
    /// A user's edit of the scaler's spec: merged, admitted as the webhook would (an invalid
    /// result is refused naming the field), stored with the next generation.
    fn edit_scaler(&mut self, patch: &Value) -> Result<(), String> {
        if !patch.is_object() {
            return Err("it must be a JSON object, a merge patch onto the scaler's spec".into());
        }
        let key = self.key.clone();
        let stored = self
            .cluster
            .get(Kind::Scaler, &key.namespace, &key.name)
            .ok_or("the scaler is gone")?;
        let mut doc = stored.clone();
        json_patch::merge(&mut doc["spec"], patch);
        let old: ModelDeploymentScaler = serde_json::from_value(stored)
            .map_err(|e| format!("the stored scaler does not parse: {e}"))?;
        let new: ModelDeploymentScaler = serde_json::from_value(doc.clone())
            .map_err(|e| format!("the patched spec does not parse: {e}"))?;
        let target = self
            .cluster
            .get(Kind::Target, &key.namespace, &self.target)
            .and_then(|t| serde_json::from_value(t).ok());
        let report = mds_api::validation::validate_scaler(&new, Some(&old), target.as_ref());
        if let Some(error) = report.errors.first() {
            return Err(format!("admission refuses the patched scaler: {error}"));
        }
        let generation = doc["metadata"]["generation"].as_i64().unwrap_or(1);
        doc["metadata"]["generation"] = json!(generation + 1);
        self.cluster.edit(|e| e.put(Kind::Scaler, doc));
        Ok(())
    }

    fn new(scaler: &ModelDeploymentScaler, target: Value) -> Result<ReplayWorld, ReplayError> {
        let namespace = scaler
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut recorded = scaler.clone();
        recorded.metadata.namespace = Some(namespace.clone());
        let name = recorded
            .metadata
            .name
            .get_or_insert_with(|| "replay".into())
            .clone();
        recorded
            .metadata
            .uid
            .get_or_insert_with(|| "replay-scaler".into());
        // A fresh controller starts from the status it reads, and sees the spec's generation.
        recorded.metadata.generation.get_or_insert(1);
        let scaler_doc = serde_json::to_value(&recorded)
            .map_err(|e| ReplayError(format!("the scaler does not serialise: {e}")))?;
        let mut doc = checked_target(target)?;
        doc["metadata"]["namespace"] = json!(namespace);
        let roles = target_roles(&doc)?;
        let cluster = MemoryCluster::new();
        cluster.serve_workloads(true);
        cluster.edit(|e| e.put(Kind::Scaler, scaler_doc));
        let target = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        cluster.edit(|e| e.put(Kind::Target, doc));
        Ok(ReplayWorld {
            cluster,
            key: ScalerKey { namespace, name },
            target,
            roles,
            instances: BTreeMap::new(),
        })
    }

    fn target(&self) -> Result<ModelDeployment, ReplayError> {
        let doc = self
            .cluster
            .get(Kind::Target, &self.key.namespace, &self.target)
            .ok_or_else(|| ReplayError("the target is gone".into()))?;
        serde_json::from_value(doc)
            .map_err(|e| ReplayError(format!("the target is not a ModelDeployment: {e}")))
    }

    /// A recorded change of the target: someone's edit of the counts (the generation moves,
    /// D22), GPUStack's retirement status.
    fn apply_change(&self, change: &TargetChange) -> Result<(), ReplayError> {
        let mut problem = None;
        let (ns, name) = (&self.key.namespace, &self.target);
        let edited = self.cluster.edit(|e| {
            e.update(Kind::Target, ns, name, |doc| {
                if let Err(e) = change_target(doc, change) {
                    problem = Some(e);
                }
            })
        });
        match (problem, edited) {
            (Some(e), _) => Err(e),
            (None, None) => Err(ReplayError("the target is gone".into())),
            (None, Some(_)) => Ok(()),
        }
    }

    /// The Pods and Workloads of the instances the timeline says exist: every declared
    /// instance, admitted and ready unless listed as unadmitted (replay has no cold start);
    /// the instance being retired, whose Workload goes once the retirement reaches `Deleting`
    /// (its Pods are then terminating); Pods left behind Terminating, without a Workload.
    fn sync_instances(
        &mut self,
        unadmitted: &BTreeMap<String, Vec<i32>>,
        terminating: &BTreeMap<String, Vec<i32>>,
        now: Timestamp,
    ) -> Result<(), ReplayError> {
        let md = self.target()?;
        let mut instances: BTreeMap<(String, i32), Instance> = BTreeMap::new();
        for (role, ordinals) in terminating {
            for o in ordinals {
                instances.insert((role.clone(), *o), Instance::Terminating);
            }
        }
        if let Some(r) = md.status.as_ref().and_then(|s| s.retirement.as_ref()) {
            let gone = matches!(r.state.as_str(), "Deleting" | "Settling" | "Completed");
            let instance = if gone {
                Instance::Terminating
            } else {
                Instance::Retiring
            };
            instances.insert((r.role_name.clone(), r.replica_ordinal), instance);
        }
        for role in &md.spec.roles {
            let refused = unadmitted.get(&role.name);
            for o in 0..role.replicas() {
                let admitted = refused.is_none_or(|list| !list.contains(&o));
                instances.insert((role.name.clone(), o), Instance::Declared { admitted });
            }
        }
        let size = |role: &str| {
            md.spec
                .roles
                .iter()
                .find(|r| r.name == role)
                .map_or(1, |r| r.size())
        };
        let instances: BTreeMap<(String, i32), (Instance, i32)> = instances
            .into_iter()
            .map(|(key, instance)| {
                let members = size(&key.0);
                (key, (instance, members))
            })
            .collect();
        // Only what changed is written: a target of a thousand replicas stays cheap to replay.
        let ns = self.key.namespace.clone();
        for (key, was) in &self.instances {
            if instances.get(key) != Some(was) {
                for member in 0..was.1 {
                    let _ = self
                        .cluster
                        .delete(Kind::Pod, &ns, &self.pod_name(key, member), now);
                }
                let _ = self
                    .cluster
                    .delete(Kind::Workload, &ns, &self.group(key), now);
            }
        }
        for ((role, ordinal), (instance, members)) in &instances {
            let key = (role.clone(), *ordinal);
            if self.instances.get(&key) == Some(&(*instance, *members)) {
                continue;
            }
            let group = self.group(&key);
            for member in 0..*members {
                let mut pod = instance.pod(&self.target, role, *ordinal, member, &group, now);
                pod["metadata"]["name"] = json!(self.pod_name(&key, member));
                pod["metadata"]["namespace"] = json!(ns);
                self.cluster.edit(|e| e.put(Kind::Pod, pod));
            }
            if let Some(admitted) = instance.workload_admitted() {
                let mut workload = workload(&group, admitted);
                workload["metadata"]["namespace"] = json!(ns);
                self.cluster.edit(|e| e.put(Kind::Workload, workload));
            }
        }
        self.instances = instances;
        Ok(())
    }

    /// The Kueue pod group (and Workload) of an instance.
    fn group(&self, (role, ordinal): &(String, i32)) -> String {
        format!("{}-{role}-{ordinal}", self.target)
    }

    fn pod_name(&self, key: &(String, i32), member: i32) -> String {
        format!("{}-{member}", self.group(key))
    }
}

/// What the timeline says of one instance.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Instance {
    Declared {
        admitted: bool,
    },
    /// Being retired, its Workload still there.
    Retiring,
    /// Its Pods are being deleted; no Workload.
    Terminating,
}

impl Instance {
    fn workload_admitted(&self) -> Option<bool> {
        match self {
            Instance::Declared { admitted } => Some(*admitted),
            Instance::Retiring => Some(true),
            Instance::Terminating => None,
        }
    }

    fn pod(
        &self,
        target: &str,
        role: &str,
        ordinal: i32,
        member: i32,
        group: &str,
        now: Timestamp,
    ) -> Value {
        let ready = matches!(self, Instance::Declared { admitted: true });
        let condition = |kind: &str, on: bool| json!({"type": kind, "status": if on { "True" } else { "False" }});
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "uid": format!("pod-{role}-{ordinal}-{member}"),
                "labels": {
                    labels::INSTANCE: target,
                    labels::COMPONENT: role,
                    labels::POD_ORDINAL: ordinal.to_string(),
                    labels::MEMBER_INDEX: member.to_string(),
                    labels::POD_GROUP_NAME: group,
                }
            },
            "status": {"conditions": [condition("PodScheduled", true), condition("Ready", ready)]}
        });
        if matches!(self, Instance::Terminating) {
            pod["metadata"]["deletionTimestamp"] = json!(now.to_string());
        }
        pod
    }
}

fn workload(name: &str, admitted: bool) -> Value {
    let status = if admitted { "True" } else { "False" };
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "uid": format!("workload-{name}")},
        "spec": {"podSets": []},
        "status": {"conditions": [{"type": "Admitted", "status": status}]}
    })
}

/// Each role's edit as the JSON the target's field takes.
fn to_values<T: serde::Serialize>(edits: &BTreeMap<String, T>) -> Vec<(String, Value)> {
    edits
        .iter()
        .map(|(role, edit)| (role.clone(), json!(edit)))
        .collect()
}

/// Applies a timeline entry's change to the target document.
fn change_target(doc: &mut Value, change: &TargetChange) -> Result<(), ReplayError> {
    let edits = [
        ("replicas", change.replicas.as_ref().map(to_values)),
        ("extraArgs", change.extra_args.as_ref().map(to_values)),
    ];
    for (field, edit) in edits {
        let Some(edit) = edit else { continue };
        let roles = doc
            .pointer_mut("/spec/roles")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| ReplayError("the target has no spec.roles".into()))?;
        for (name, value) in edit {
            let role = roles
                .iter_mut()
                .find(|r| r["name"] == json!(name))
                .ok_or_else(|| {
                    ReplayError(format!(
                        "the timeline edits role {name:?}, which the target does not have"
                    ))
                })?;
            role[field] = value;
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
                let mut retirement =
                    json!({"roleName": r.role, "replicaOrdinal": r.ordinal, "state": r.state});
                if let Some(reason) = &r.reason {
                    retirement["reason"] = json!(reason);
                }
                status["retirement"] = retirement;
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
                    message: c.message.clone(),
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
