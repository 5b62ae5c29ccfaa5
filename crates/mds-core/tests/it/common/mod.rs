//! A scripted world for core scenarios: a ModelDeployment kept in mds-worker's in-memory
//! cluster, which applies the core's writes as the API server does (JSON Patch, a failed
//! `test` rejects the whole write; no fence webhook installed, so the core's writes are judged
//! by their patches alone), a status that is stored only when the core asks for it, and a
//! clock that only moves when told.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use mds_api::defaults::default_spec;
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::status::{ModelDeploymentScalerStatus, SignalState};
use mds_api::target::{ModelDeployment, WorkloadAdmission};
use mds_core::{Input, Memory, Outcome, Scaler, Target, Write, reconcile};
use mds_signals::RoleObservation;
use mds_testdata::{mk_scaler, mk_target};
use mds_worker::carry_out::{Effects, carry_out};
use mds_worker::memory_cluster::{Kind, MemoryCluster, ready};
use mds_worker::{Cluster, WriteError};
use serde_json::{Value, json};

pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

pub const SCALER_UID: &str = "scaler-uid-1";

/// Where the target is kept.
const NAMESPACE: &str = "default";
const TARGET: &str = "llm";

/// A ModelDeployment document with the given roles (name, kind, replicas).
pub fn target(roles: &[(&str, &str, i32)]) -> Value {
    mk_target("llm")
        .stored("default", "target-uid-1", "100")
        .roles(roles)
        .empty_status()
        .build()
}

/// A Proportional spec on QueueDepth (target 10 per replica) over the given roles.
pub fn spec(mode: &str, roles: &[(&str, i32, i32)]) -> Value {
    let bounded = roles
        .iter()
        .fold(mk_scaler("llm").mode(mode), |s, (n, min, max)| {
            s.role_bounds(n, *min, *max)
        });
    let behavior =
        json!({"scaleDown": {"stabilizationWindowSeconds": 15, "cooldownAfterAbortSeconds": 60}});
    let mut spec = bounded
        .queue_depth("10")
        .field("sampling", json!({"pendingTimeoutSeconds": 120}))
        .field("behavior", behavior)
        .spec();
    spec["algorithm"]["proportional"]["tolerance"] = json!("0.01");
    spec
}

/// [`spec`] in Active mode over prefill and decode, each bounded 1 to 8.
pub fn prefill_decode_spec() -> Value {
    spec("Active", &[("prefill", 1, 8), ("decode", 1, 8)])
}

/// A world of scaler spec `s` over a target of prefill and decode at the given replicas.
pub fn prefill_decode_world(s: Value, prefill: i32, decode: i32) -> World {
    let roles = [
        ("prefill", "Prefill", prefill),
        ("decode", "Decode", decode),
    ];
    World::new(s, Some(target(&roles)))
}

/// An observation that makes Proportional recommend `replicas` with `ready` ready replicas.
pub fn wants(replicas: i32, ready: u32) -> RoleObservation {
    RoleObservation {
        ready_replicas: ready,
        sampled_replicas: ready,
        coverage_complete: true,
        signal_state: SignalState::Fresh,
        prompt_tokens_per_second: Some(0.0),
        generation_tokens_per_second: Some(0.0),
        running_requests: Some(replicas as f64 * 10.0),
        waiting_requests: Some(0.0),
        kv_cache_usage: Some(0.5),
        ttft_milliseconds: Some(100.0),
        itl_milliseconds: Some(10.0),
        ttft_observations: None,
        itl_observations: None,
        prompt_paths: vec![],
    }
}

pub struct World {
    pub spec_value: Value,
    pub generation: i64,
    pub status: ModelDeploymentScalerStatus,
    /// Keeps the target (read it with `target_doc`, change it with `edit_target`).
    pub cluster: MemoryCluster,
    pub admission: BTreeMap<(String, i32), WorkloadAdmission>,
    pub pods: BTreeSet<(String, i32)>,
    /// Instances whose Workload exists; `None` is a cluster without the Workload API.
    pub workloads: Option<BTreeSet<(String, i32)>>,
    /// Ready instances; `None` makes every admitted ordinal ready (no cold start).
    pub ready: Option<BTreeSet<(String, i32)>>,
    pub observations: BTreeMap<String, RoleObservation>,
    pub memory: Memory,
    /// A refused commit the shell passes back (while nothing changed).
    pub refused: Option<mds_core::RefusedWrite>,
    pub deleting: bool,
    pub now: i64,
    /// When the observations were sampled; `None` is this pass (`now`).
    pub observed_at: Option<i64>,
    /// Why the shell could not sample the target.
    pub sampling_problem: Option<String>,
    /// Why the target does not decode.
    pub target_problem: Option<String>,
    /// Every write that reached the target.
    pub applied: Vec<Write>,
    /// Writes whose patch failed.
    pub rejected: Vec<Write>,
    pub status_writes: usize,
}

impl World {
    pub fn new(spec_value: Value, target: Option<Value>) -> World {
        let cluster = MemoryCluster::new();
        cluster.set_fence(false);
        let world = World {
            spec_value,
            generation: 1,
            status: ModelDeploymentScalerStatus::default(),
            cluster,
            admission: BTreeMap::new(),
            pods: BTreeSet::new(),
            workloads: None,
            ready: None,
            observations: BTreeMap::new(),
            memory: Memory::default(),
            refused: None,
            deleting: false,
            now: 0,
            observed_at: None,
            sampling_problem: None,
            target_problem: None,
            applied: vec![],
            rejected: vec![],
            status_writes: 0,
        };
        if let Some(doc) = target {
            world.put_target(doc);
        }
        world
    }

    /// The target as stored.
    pub fn target_doc(&self) -> Option<Value> {
        self.cluster.get(Kind::Target, NAMESPACE, TARGET)
    }

    /// Creates or replaces the target as it is (a user's or GitOps' write: no admission, and
    /// the generation is what `doc` says).
    pub fn put_target(&self, doc: Value) {
        self.cluster.edit(|objects| objects.put(Kind::Target, doc));
    }

    /// Changes the stored target as [`World::put_target`] does.
    ///
    /// # Panics
    /// When there is no target.
    pub fn edit_target(&self, change: impl FnOnce(&mut Value)) {
        self.cluster
            .edit(|objects| objects.edit(Kind::Target, NAMESPACE, TARGET, change))
            .expect("a target to edit");
    }

    pub fn spec(&self) -> ModelDeploymentScalerSpec {
        let mut spec: ModelDeploymentScalerSpec =
            serde_json::from_value(self.spec_value.clone()).expect("spec");
        default_spec(&mut spec);
        spec
    }

    /// Edits the scaler spec (bumps its generation).
    pub fn edit(&mut self, f: impl FnOnce(&mut Value)) {
        f(&mut self.spec_value);
        self.generation += 1;
    }

    pub fn deployment(&self) -> Option<ModelDeployment> {
        self.target_doc()
            .map(|v| serde_json::from_value(v).expect("target"))
    }

    pub fn replicas(&self) -> BTreeMap<String, i32> {
        self.deployment()
            .map(|md| {
                md.spec
                    .roles
                    .iter()
                    .map(|r| (r.name.clone(), r.replicas()))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn annotation(&self, key: &str) -> Option<String> {
        self.target_doc()?
            .pointer("/metadata/annotations")?
            .get(key)?
            .as_str()
            .map(str::to_string)
    }

    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.edit_target(|t| {
            let meta = t["metadata"].as_object_mut().unwrap();
            let annotations = meta.entry("annotations").or_insert(json!({}));
            annotations[key] = json!(value);
        });
    }

    pub fn set_retirement(&mut self, retirement: Option<Value>) {
        self.edit_target(|t| match retirement {
            Some(r) => t["status"]["retirement"] = r,
            None => {
                t["status"].as_object_mut().unwrap().remove("retirement");
            }
        });
    }

    pub fn observe(&mut self, role: &str, o: RoleObservation) {
        self.observations.insert(role.to_string(), o);
    }

    /// Reconciles with `memory` (not the world's) and applies nothing: what a controller with
    /// that memory would decide now. `Memory::default()` is a controller that just restarted.
    pub fn decide_with(&self, memory: &mut Memory) -> Outcome {
        let spec = self.spec();
        let md = self.deployment();
        let input = Input {
            scaler: Scaler {
                name: "llm",
                uid: SCALER_UID,
                generation: self.generation,
                spec: &spec,
                status: &self.status,
                deleting: self.deleting,
            },
            target: md.as_ref().map(|md| Target {
                deployment: md,
                admission: self.admission.clone(),
                ordinals_with_pods: self.pods.clone(),
                pod_names: Default::default(),
                workloads: self.workloads.clone(),
                ready_ordinals: self.ready.clone().unwrap_or_else(|| {
                    self.admission
                        .iter()
                        .filter(|(_, a)| **a == WorkloadAdmission::Admitted)
                        .map(|(key, _)| key.clone())
                        .collect()
                }),
            }),
            observations: &self.observations,
            observed_at: t(self.observed_at.unwrap_or(self.now)),
            sampling_problem: self.sampling_problem.as_deref(),
            target_problem: self.target_problem.as_deref(),
            now: t(self.now),
            refused: self.refused.as_ref(),
        };
        reconcile(&input, memory)
    }

    /// One pass: reconcile, then carry the outcome out as the worker does
    /// (`mds_worker::carry_out`): the write to the cluster first, the status when asked and
    /// only once the write (if any) landed, and the memory from before the pass kept when it
    /// did not.
    pub fn pass(&mut self) -> Outcome {
        let before = self.memory.clone();
        let mut memory = std::mem::take(&mut self.memory);
        let outcome = self.decide_with(&mut memory);
        let mut effects = WorldEffects { world: self };
        ready(carry_out(&mut effects, &outcome, &mut memory, before));
        self.memory = memory;
        outcome
    }

    /// Passes every `interval` seconds for `seconds`; returns the outcomes.
    pub fn run(&mut self, seconds: i64, interval: i64) -> Vec<Outcome> {
        let mut out = vec![self.pass()];
        let mut elapsed = 0;
        while elapsed + interval <= seconds {
            self.now += interval;
            elapsed += interval;
            out.push(self.pass());
        }
        out
    }

    pub fn condition(&self, kind: &str) -> (String, String) {
        let c = self
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap_or_else(|| panic!("no {kind} condition"));
        (c.status.clone(), c.reason.clone())
    }
}

/// What a pass's outcome does to the world: the cluster applies the write (a conflict is a
/// write that did not land; any other failure is a bug in the test), the world keeps the
/// status; events are read from the outcome itself.
struct WorldEffects<'a> {
    world: &'a mut World,
}

impl Effects for WorldEffects<'_> {
    async fn write_target(&mut self, write: &Write) -> bool {
        match ready(
            self.world
                .cluster
                .patch_target(NAMESPACE, TARGET, &write.ops),
        ) {
            Ok(_) => {
                self.world.applied.push(write.clone());
                true
            }
            Err(WriteError::Conflict(_)) => {
                self.world.rejected.push(write.clone());
                false
            }
            Err(e) => panic!("the core's write {:?} failed: {e}", write.kind),
        }
    }

    async fn write_status(&mut self, status: &ModelDeploymentScalerStatus) {
        self.world.status = status.clone();
        self.world.status_writes += 1;
    }

    async fn emit(&mut self, _: &mds_core::Event) {}

    async fn not_landed(&mut self) {}
}
