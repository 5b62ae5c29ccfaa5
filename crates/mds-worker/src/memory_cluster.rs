//! One cluster in memory behind the `Cluster` port, kept as the API server keeps its objects:
//! a global resource version bumped on every write, a generation bumped on a spec change and
//! on a delete that finalizers hold, JSON Patches whose `test` operations guard them, status
//! and finalizer writes guarded by resource version, the binding fence run on every target
//! write, scalers admitted through `mds-api`'s defaults and validation, an event log, a watch
//! cache that may lag a number of writes behind, and faults on cue (scripted per write, or
//! drawn from a seeded generator). Pure: no clock, no I/O; a delete takes its `now`.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::{ModelDeployment, Workload};
use mds_core::{Event, PatchOp};
use serde_json::{Value, json};

use crate::ports::{Cluster, ScalerKey, Snapshot, WriteError};
use crate::worker::FINALIZER;

mod admission;
mod hooks;
mod parsed;

use admission::{admit_scaler, check, fence_target};

pub use hooks::{Edit, ready};

/// The kinds of object the cluster keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Scaler,
    Target,
    Pod,
    Workload,
}

/// The worker's writes, for scripting faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteKind {
    PatchTarget,
    Status,
    Finalizer,
}

/// A fault the API server answers a write with instead of applying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 409.
    Conflict,
    /// HTTP 503.
    Unavailable,
    /// HTTP 403 from an admission webhook.
    Forbidden,
    /// HTTP 422 naming a field.
    Invalid,
    /// No answer.
    Timeout,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::Conflict,
        Fault::Unavailable,
        Fault::Forbidden,
        Fault::Invalid,
        Fault::Timeout,
    ];

    /// The error the production port classifies this answer as.
    pub fn error(self) -> WriteError {
        match self {
            Fault::Conflict => WriteError::Conflict(
                "the object has been modified; please apply your changes to the latest version and try again (HTTP 409)".into(),
            ),
            Fault::Unavailable => WriteError::Unavailable("service unavailable (HTTP 503)".into()),
            Fault::Forbidden => WriteError::Refused(
                "admission webhook denied the request: scripted refusal (HTTP 403)".into(),
            ),
            Fault::Invalid => WriteError::Refused(
                "spec.roles[0].replicas: Invalid value: scripted refusal (HTTP 422)".into(),
            ),
            Fault::Timeout => WriteError::Unavailable("request timed out".into()),
        }
    }
}

type Objects = BTreeMap<(Kind, String, String), Value>;

/// A small deterministic generator (xorshift64*), so seeded faults repeat exactly.
#[derive(Clone, Debug)]
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Default)]
struct State {
    resource_version: u64,
    uids: u64,
    objects: Objects,
    /// The objects as they stood after each of the last `lag` writes, oldest first.
    history: VecDeque<Objects>,
    lag: usize,
    workloads_served: bool,
    events: Vec<(ScalerKey, Event)>,
    scripted: BTreeMap<WriteKind, VecDeque<Fault>>,
    /// Faults drawn per write: the generator and the chance in thousandths.
    seeded: Option<(XorShift, u32)>,
    hooks: hooks::Hooks,
    parsed_pods: parsed::Parsed<k8s_openapi::api::core::v1::Pod>,
    parsed_scalers: parsed::Parsed<ModelDeploymentScaler>,
    parsed_targets: parsed::Parsed<ModelDeployment>,
    parsed_workloads: parsed::Parsed<Workload>,
}

/// The in-memory cluster. Every method is synchronous under one lock; the port's futures are
/// ready at once.
#[derive(Default)]
pub struct MemoryCluster(Mutex<State>);

fn key_of(doc: &Value) -> (String, String) {
    let meta = &doc["metadata"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (s(&meta["namespace"]), s(&meta["name"]))
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value, what: &str) -> Result<T, String> {
    T::deserialize(doc).map_err(|e| format!("{what} does not parse: {e}"))
}

fn finalizers(doc: &Value) -> Vec<String> {
    doc["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

impl MemoryCluster {
    pub fn new() -> MemoryCluster {
        MemoryCluster::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves snapshots from the objects as they stood `writes` writes ago.
    pub fn set_lag(&self, writes: usize) {
        let mut st = self.state();
        st.lag = writes;
        // The watch cache starts from the objects as they are now.
        st.history.clear();
        if writes > 0 {
            let now = st.objects.clone();
            st.history.push_back(now);
        }
    }

    /// Serves the Kueue Workload API (snapshots then carry the namespace's Workloads).
    pub fn serve_workloads(&self, served: bool) {
        self.state().workloads_served = served;
    }

    /// The next write of `kind` is answered with `fault` (faults queue in order).
    pub fn script(&self, kind: WriteKind, fault: Fault) {
        self.state()
            .scripted
            .entry(kind)
            .or_default()
            .push_back(fault);
    }

    /// Every write fails with a fault drawn from `seed` with a chance of `per_mille`/1000
    /// (scripted faults come first); `per_mille` 0 stops it.
    pub fn seed_faults(&self, seed: u64, per_mille: u32) {
        self.state().seeded = (per_mille > 0).then_some((XorShift(seed | 1), per_mille));
    }

    /// Events emitted, oldest first, with the scaler they are about.
    pub fn events(&self) -> Vec<(ScalerKey, Event)> {
        self.state().events.clone()
    }

    /// The current resource version of the whole cluster.
    pub fn resource_version(&self) -> u64 {
        self.state().resource_version
    }

    /// The stored object, as the API server (not the watch cache) has it.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        self.read(kind, namespace, name, Value::clone)
    }

    /// The stored scaler, typed; parsed once per resource version and shared with the
    /// worker's snapshot of the same version.
    pub fn scaler(&self, namespace: &str, name: &str) -> Option<Arc<ModelDeploymentScaler>> {
        let mut st = self.state();
        let State {
            objects,
            parsed_scalers,
            ..
        } = &mut *st;
        let key = (namespace.to_string(), name.to_string());
        let doc = objects.get(&(Kind::Scaler, key.0.clone(), key.1.clone()))?;
        parsed_scalers.one(&key, doc)
    }

    /// Reads the stored object in place (a simulation reads the target every pass; a copy
    /// of it each time costs more than the read).
    pub fn read<T>(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&Value) -> T,
    ) -> Option<T> {
        let key = (kind, namespace.to_string(), name.to_string());
        self.state().objects.get(&key).map(f)
    }

    /// Creates or replaces an object as a user would (`kubectl apply`): a scaler is defaulted
    /// and validated by `mds-api`, a target write passes the fence. Returns it as stored.
    pub fn apply(&self, kind: Kind, doc: Value) -> Result<Value, WriteError> {
        let mut st = self.state();
        let (ns, name) = key_of(&doc);
        if name.is_empty() {
            return Err(WriteError::Refused(
                "metadata.name: Required value (HTTP 422)".into(),
            ));
        }
        let key = (kind, ns, name);
        let old = st.objects.get(&key).cloned();
        let doc = match kind {
            Kind::Scaler => admit_scaler(&st, doc, old.as_ref())?,
            Kind::Target => doc,
            Kind::Pod => check::<k8s_openapi::api::core::v1::Pod>(doc, "Pod")?,
            Kind::Workload => check::<Workload>(doc, "Workload")?,
        };
        if kind == Kind::Target && st.hooks.fences() {
            fence_target(&st, old.as_ref(), &doc)?;
        }
        Ok(st.store(key, old.as_ref(), doc, Value::clone))
    }

    /// Deletes an object at `now`: with finalizers it gets a deletion timestamp and a new
    /// generation and stays until they are gone; without, it goes at once.
    pub fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let mut st = self.state();
        let key = (kind, namespace.to_string(), name.to_string());
        let Some(old) = st.objects.get(&key).cloned() else {
            return Err(WriteError::NotFound(format!("{namespace}/{name}")));
        };
        if finalizers(&old).is_empty() {
            st.objects.remove(&key);
            st.commit_write();
            return Ok(());
        }
        if old["metadata"]["deletionTimestamp"].is_null() {
            let mut doc = old.clone();
            doc["metadata"]["deletionTimestamp"] = json!(now.to_string());
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1);
            doc["metadata"]["generation"] = json!(g + 1);
            st.objects.insert(key, doc);
            st.bump_rv_of_last(kind, namespace, name);
        }
        Ok(())
    }

    /// A user's JSON Patch of a target (through the fence, like the worker's).
    pub fn patch(
        &self,
        namespace: &str,
        name: &str,
        ops: &[PatchOp],
    ) -> Result<ModelDeployment, WriteError> {
        let mut st = self.state();
        st.patch_target(namespace, name, ops)
    }
}

impl State {
    /// Records a write: the watch cache's history moves on.
    fn commit_write(&mut self) {
        self.resource_version += 1;
        // Without lag a snapshot reads the objects themselves: no copy to keep.
        if self.lag == 0 {
            self.history.clear();
            return;
        }
        self.history.push_back(self.objects.clone());
        while self.history.len() > self.lag + 1 {
            self.history.pop_front();
        }
    }

    /// Moves the resource version of an object changed in place, and records the write.
    fn bump_rv_of_last(&mut self, kind: Kind, ns: &str, name: &str) {
        let rv = (self.resource_version + 1).to_string();
        if let Some(doc) = self
            .objects
            .get_mut(&(kind, ns.to_string(), name.to_string()))
        {
            doc["metadata"]["resourceVersion"] = json!(rv);
        }
        self.commit_write();
    }

    /// Stores `doc` over `old`: keeps uid and creation, moves the resource version, and the
    /// generation when the spec changed; an object being deleted whose finalizers are gone goes.
    /// `read` sees the object as stored (or as it was when it left); keeping the object and
    /// handing out a reference spares a copy of it on every write.
    fn store<T>(
        &mut self,
        key: (Kind, String, String),
        old: Option<&Value>,
        mut doc: Value,
        read: impl FnOnce(&Value) -> T,
    ) -> T {
        let meta_old = old.map_or(&Value::Null, |o| &o["metadata"]);
        if doc["metadata"]["uid"].is_null() {
            doc["metadata"]["uid"] = match &meta_old["uid"] {
                Value::Null => {
                    self.uids += 1;
                    json!(format!("uid-{}", self.uids))
                }
                uid => uid.clone(),
            };
        }
        let generation = meta_old["generation"].as_i64();
        let spec_changed = old.is_none_or(|o| o["spec"] != doc["spec"]);
        doc["metadata"]["generation"] = json!(match generation {
            None => 1,
            Some(g) if spec_changed => g + 1,
            Some(g) => g,
        });
        if !meta_old["deletionTimestamp"].is_null() {
            doc["metadata"]["deletionTimestamp"] = meta_old["deletionTimestamp"].clone();
        }
        doc["metadata"]["resourceVersion"] = json!((self.resource_version + 1).to_string());
        let stored =
            if !doc["metadata"]["deletionTimestamp"].is_null() && finalizers(&doc).is_empty() {
                self.objects.remove(&key);
                read(&doc)
            } else {
                let kept = match self.objects.entry(key) {
                    Entry::Occupied(mut entry) => {
                        entry.insert(doc);
                        entry.into_mut()
                    }
                    Entry::Vacant(entry) => entry.insert(doc),
                };
                read(kept)
            };
        self.commit_write();
        stored
    }

    /// The fault this write gets, if any: a scripted one first, then one a hook set, else a
    /// seeded draw. A write that gets none lets the edit waiting for it land first.
    fn fault(&mut self, kind: WriteKind) -> Option<WriteError> {
        self.hooks.count_attempt(kind);
        let scripted = self.scripted.get_mut(&kind).and_then(VecDeque::pop_front);
        let fault = scripted
            .map(Fault::error)
            .or_else(|| self.hooks.error_for(kind))
            .or_else(|| self.seeded_fault());
        if fault.is_none() {
            self.edit_before(kind);
        }
        fault
    }

    fn seeded_fault(&mut self) -> Option<WriteError> {
        let (rng, per_mille) = self.seeded.as_mut()?;
        if rng.next() % 1000 >= u64::from(*per_mille) {
            return None;
        }
        let pick = (rng.next() % Fault::ALL.len() as u64) as usize;
        Some(Fault::ALL[pick].error())
    }

    fn patch_target(
        &mut self,
        ns: &str,
        name: &str,
        ops: &[PatchOp],
    ) -> Result<ModelDeployment, WriteError> {
        let key = (Kind::Target, ns.to_string(), name.to_string());
        let Some(mut doc) = self.objects.get(&key).cloned() else {
            return Err(WriteError::NotFound(format!(
                "modeldeployments {ns}/{name}"
            )));
        };
        let patch: json_patch::Patch = serde_json::to_value(ops)
            .and_then(serde_json::from_value)
            .map_err(|e| {
            WriteError::Refused(format!("the patch does not parse: {e} (HTTP 400)"))
        })?;
        if json_patch::patch(&mut doc, &patch).is_err() {
            // The API server's bare 422 for a patch that does not apply, a failed `test` included.
            return Err(WriteError::Conflict(
                "the server rejected our request due to an error in our request (HTTP 422)".into(),
            ));
        }
        if self.hooks.fences() {
            fence_target(self, self.objects.get(&key), &doc)?;
        }
        // Taken out, not copied: the patched copy replaces it.
        let old = self.objects.remove(&key);
        self.store(key, old.as_ref(), doc, |d| typed(d, "target"))
            .map_err(WriteError::Unavailable)
    }

    /// Guards a scaler write by its resource version and applies `change` to the stored one.
    fn guarded_scaler_write(
        &mut self,
        scaler: &ModelDeploymentScaler,
        change: impl FnOnce(&mut Value),
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let ns = scaler.metadata.namespace.clone().unwrap_or_default();
        let name = scaler.metadata.name.clone().unwrap_or_default();
        let key = (Kind::Scaler, ns.clone(), name.clone());
        // The stored object is changed in place: a status is most of it and is not copied.
        let Some(mut doc) = self.objects.remove(&key) else {
            return Err(WriteError::NotFound(format!(
                "modeldeploymentscalers {ns}/{name}"
            )));
        };
        let stored_rv = doc["metadata"]["resourceVersion"].as_str();
        if stored_rv != scaler.metadata.resource_version.as_deref() {
            self.objects.insert(key, doc);
            return Err(WriteError::Conflict(format!(
                "Operation cannot be fulfilled on modeldeploymentscalers \"{name}\": the object has been modified; please apply your changes to the latest version and try again (HTTP 409)"
            )));
        }
        // Storing reads only the old metadata and spec.
        let old = json!({"metadata": doc["metadata"].clone(), "spec": doc["spec"].clone()});
        change(&mut doc);
        self.store(key, Some(&old), doc, |d| typed(d, "scaler"))
            .map_err(WriteError::Unavailable)
    }

    fn snapshot(&mut self, key: &ScalerKey) -> Option<Snapshot> {
        let watched = self.hooks.frozen().or(self.history.front());
        let objects = watched.unwrap_or(&self.objects);
        let get =
            |kind: Kind, name: &str| objects.get(&(kind, key.namespace.clone(), name.to_string()));
        let scaler_key = (key.namespace.clone(), key.name.clone());
        let scaler = self
            .parsed_scalers
            .one(&scaler_key, get(Kind::Scaler, &key.name)?)?;
        let target_name = scaler.spec.target_ref.name.clone();
        let target_key = (key.namespace.clone(), target_name.clone());
        let target =
            get(Kind::Target, &target_name).and_then(|d| self.parsed_targets.one(&target_key, d));
        let in_ns = |kind: Kind| {
            objects
                .range((kind, key.namespace.clone(), String::new())..)
                .take_while(move |((k, ns, _), _)| *k == kind && *ns == key.namespace)
                .map(|((_, ns, name), d)| ((ns, name), d))
        };
        let instance = json!(target_name);
        let pod_docs: Vec<((String, String), &Value)> = in_ns(Kind::Pod)
            .filter(|(_, d)| d["metadata"]["labels"][mds_api::target::labels::INSTANCE] == instance)
            .map(|((ns, name), d)| ((ns.clone(), name.clone()), d))
            .collect();
        let pods = self.parsed_pods.of(pod_docs.iter().map(|(k, d)| (k, *d)));
        let live = |kind: Kind| {
            move |(ns, name): &(String, String)| {
                objects.contains_key(&(kind, ns.clone(), name.clone()))
            }
        };
        self.parsed_pods.retain(live(Kind::Pod));
        self.parsed_scalers.retain(live(Kind::Scaler));
        self.parsed_targets.retain(live(Kind::Target));
        self.parsed_workloads.retain(live(Kind::Workload));
        let workloads = if self.workloads_served {
            let docs: Vec<((String, String), &Value)> = in_ns(Kind::Workload)
                .map(|((ns, name), d)| ((ns.clone(), name.clone()), d))
                .collect();
            Some(self.parsed_workloads.of(docs.iter().map(|(k, d)| (k, *d))))
        } else {
            None
        };
        Some(Snapshot {
            target_problem: None,
            scaler,
            target,
            pods,
            workloads,
        })
    }
}

impl Cluster for MemoryCluster {
    async fn snapshot(&self, key: &ScalerKey) -> Option<Snapshot> {
        self.state().snapshot(key)
    }

    async fn patch_target(
        &self,
        namespace: &str,
        target: &str,
        ops: &[PatchOp],
    ) -> Result<ModelDeployment, WriteError> {
        let mut st = self.state();
        if let Some(e) = st.fault(WriteKind::PatchTarget) {
            return Err(e);
        }
        st.patch_target(namespace, target, ops)
    }

    async fn write_status(
        &self,
        scaler: &ModelDeploymentScaler,
        status: &ModelDeploymentScalerStatus,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let mut st = self.state();
        if let Some(e) = st.fault(WriteKind::Status) {
            return Err(e);
        }
        let status =
            serde_json::to_value(status).map_err(|e| WriteError::Refused(e.to_string()))?;
        st.guarded_scaler_write(scaler, |doc| doc["status"] = status)
    }

    async fn set_finalizer(
        &self,
        scaler: &ModelDeploymentScaler,
        present: bool,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        let mut st = self.state();
        if let Some(e) = st.fault(WriteKind::Finalizer) {
            return Err(e);
        }
        st.guarded_scaler_write(scaler, |doc| {
            let mut list: Vec<String> = finalizers(doc)
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            if present {
                list.push(FINALIZER.to_string());
            }
            doc["metadata"]["finalizers"] = json!(list);
        })
    }

    async fn emit(&self, scaler: &ModelDeploymentScaler, event: &Event) {
        let key = ScalerKey {
            namespace: scaler.metadata.namespace.clone().unwrap_or_default(),
            name: scaler.metadata.name.clone().unwrap_or_default(),
        };
        self.state().events.push((key, event.clone()));
    }
}
