//! The mirror: the world's Pods, Workloads and ModelDeployment statuses into the API server.
//!
//! Each pass steps the world to now, then writes only what differs from what the mirror wrote
//! before (it remembers each object's UID and last written parts). It is the only writer of
//! these objects and of ModelDeployment status, so its writes carry no resourceVersion and
//! cannot conflict; instead it re-reads where an object is not what it remembers:
//! - a create that finds the object already there (a lost response, a restarted stand-in)
//!   reads it and adopts it;
//! - a patch that finds the object gone forgets it, and an audit every few seconds lists
//!   what is there: a Pod deleted from outside is lost to the world (which replaces it, as
//!   GPUStack would), a vanished Workload is made again, and Pods and Workloads whose owner is
//!   gone are deleted (there is no garbage collector).

mod pods;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use mds_api::target::{ModelDeploymentStatus, Workload};
use mds_sim::{DeploymentKey, PodView};
use serde_json::{Map, Value};

use super::Shared;
use super::engines::Engines;
use super::listeners::Listeners;
use pods::PodRecord;
use workloads::WorkloadRecord;

/// (namespace, name)
type ObjectKey = (String, String);

/// Runs the mirror; with `engines`, real engines serve in place of the listeners' pages.
pub(crate) async fn run(client: Client, shared: Arc<Shared>, engines: Option<Engines>) {
    let mut mirror = Mirror {
        client,
        shared: shared.clone(),
        pods: BTreeMap::new(),
        workloads: BTreeMap::new(),
        statuses: BTreeMap::new(),
        listeners: Listeners::default(),
        engines,
        desired_pods: BTreeSet::new(),
        desired_workloads: BTreeSet::new(),
        last_audit: None,
    };
    loop {
        mirror.pass().await;
        shared.passes.send_modify(|n| *n += 1);
        tokio::select! {
            _ = tokio::time::sleep(shared.tick) => {}
            _ = shared.wake.notified() => {}
        }
    }
}

struct Mirror {
    client: Client,
    shared: Arc<Shared>,
    pods: BTreeMap<ObjectKey, PodRecord>,
    workloads: BTreeMap<ObjectKey, WorkloadRecord>,
    /// The UID and status last written per ModelDeployment.
    statuses: BTreeMap<DeploymentKey, (String, Value)>,
    listeners: Listeners,
    engines: Option<Engines>,
    desired_pods: BTreeSet<ObjectKey>,
    desired_workloads: BTreeSet<ObjectKey>,
    last_audit: Option<Instant>,
}

/// A Pod whose API object vanished, for the world to replace.
struct Lost {
    deployment: DeploymentKey,
    role: String,
    ordinal: u32,
    member: u32,
    uid: String,
}

impl Mirror {
    async fn pass(&mut self) {
        let (pods, termination) = {
            let mut state = self.shared.lock();
            state.catch_up();
            let termination = state.world.config().pod_termination;
            (state.world.all_pods(), termination)
        };
        let grace = termination.as_secs().max(1).unsigned_abs();
        let outcome = self.sync_pods(&pods, grace).await;
        let (workloads, statuses) = {
            let mut state = self.shared.lock();
            if !outcome.adopted.is_empty() {
                // Adopt only where the world still has the Pod it was asked to create.
                let current: BTreeMap<ObjectKey, Option<String>> = state
                    .world
                    .all_pods()
                    .iter()
                    .map(|p| (pod_key(p), p.metadata.uid.clone()))
                    .collect();
                for (namespace, name, world_uid, server_uid) in outcome.adopted {
                    let key = (namespace, name);
                    if current.get(&key) == Some(&Some(world_uid)) {
                        let _ = state.world.set_pod_uid(&key.0, &key.1, &server_uid);
                    }
                }
            }
            for lost in outcome.lost {
                lose(&mut state.world, &lost);
            }
            let keys = state.world.deployment_keys();
            let workloads: Vec<Workload> =
                keys.iter().flat_map(|k| state.world.workloads(k)).collect();
            let statuses: Vec<(DeploymentKey, String, ModelDeploymentStatus)> = keys
                .iter()
                .filter_map(|k| {
                    let md = state.world.deployment(k)?;
                    let uid = md.metadata.uid.clone()?;
                    Some((k.clone(), uid, md.status.clone()?))
                })
                .collect();
            (workloads, statuses)
        };
        let adopted = self.sync_workloads(&workloads).await;
        if !adopted.is_empty() {
            let mut state = self.shared.lock();
            for (namespace, name, world_uid, server_uid) in adopted {
                let current = workloads.iter().any(|w| {
                    w.metadata.namespace.as_deref() == Some(&namespace)
                        && w.metadata.name.as_deref() == Some(&name)
                        && w.metadata.uid.as_deref() == Some(&world_uid)
                });
                if current {
                    let _ = state.world.set_workload_uid(&namespace, &name, &server_uid);
                }
            }
        }
        self.sync_statuses(&statuses).await;
        // The Pods as of the start of the pass: a Pod lost or replaced meanwhile has its
        // listener moved at the next pass.
        match &mut self.engines {
            Some(engines) => engines.reconcile(&pods, &self.shared),
            None => self.listeners.reconcile(&pods, &self.shared),
        }
        if self
            .last_audit
            .is_none_or(|at| at.elapsed() >= self.shared.audit_every)
        {
            self.last_audit = Some(Instant::now());
            self.audit().await;
        }
    }

    /// Writes each ModelDeployment status that differs from the last one written, replacing
    /// the whole `status` (a field that disappeared, such as `retirement`, disappears). The
    /// `test` of the UID keeps a status off a newer object of the same name.
    async fn sync_statuses(&mut self, statuses: &[(DeploymentKey, String, ModelDeploymentStatus)]) {
        let wanted: BTreeSet<&DeploymentKey> = statuses.iter().map(|s| &s.0).collect();
        self.statuses.retain(|key, _| wanted.contains(key));
        for (key, uid, status) in statuses {
            let value = super::objects::deployment_status(status);
            if self.statuses.get(key) == Some(&(uid.clone(), value.clone())) {
                continue;
            }
            match write_status(&self.client, key, uid, &value).await {
                Ok(()) => {
                    self.statuses.insert(key.clone(), (uid.clone(), value));
                }
                // Deleted or replaced: the watch will tell the world.
                Err(e) if api_code(&e) == Some(404) => {}
                Err(e) => self.report(format!("writing the status of ModelDeployment {key}: {e}")),
            }
        }
    }

    /// Lists what is there and reconciles what the mirror remembers with it.
    async fn audit(&mut self) {
        if let Err(e) = self.audit_pods().await {
            self.report(format!("listing Pods: {e}"));
        }
        if let Err(e) = self.audit_workloads().await {
            self.report(format!("listing Workloads: {e}"));
        }
    }

    fn report(&self, message: String) {
        self.shared.lock().error(message);
    }
}

/// What a pod sync found for the world.
#[derive(Default)]
struct PodOutcome {
    /// (namespace, name, the world's UID, the API server's UID)
    adopted: Vec<(String, String, String, String)>,
    lost: Vec<Lost>,
}

fn lose(world: &mut mds_sim::World, lost: &Lost) {
    // Only if the world still has that very Pod (it may have replaced it meanwhile).
    let same = world.pods(&lost.deployment).iter().any(|p| {
        p.metadata.uid.as_deref() == Some(&lost.uid) && p.metadata.deletion_timestamp.is_none()
    });
    if same {
        let _ = world.delete_pod(&lost.deployment, &lost.role, lost.ordinal, lost.member);
    }
}

async fn write_status(
    client: &Client,
    key: &DeploymentKey,
    uid: &str,
    status: &Value,
) -> Result<(), kube::Error> {
    use kube::api::{Api, Patch, PatchParams};
    use mds_api::resources::TargetApiVersion;
    use mds_api::target::ModelDeployment;
    let api: Api<ModelDeployment> =
        Api::namespaced_with(client.clone(), &key.namespace, &TargetApiVersion::V1Alpha1);
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/status", "value": status},
    ]))
    .expect("a well-formed JSON patch");
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await
    .map(|_| ())
}

/// The HTTP status of an API error, if it is one.
fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// A merge patch that turns the map `old` into `new` (keys that went are set to null).
fn map_patch(old: &Value, new: &Value) -> Value {
    let mut patch: Map<String, Value> = new.as_object().cloned().unwrap_or_default();
    for key in old.as_object().into_iter().flat_map(|o| o.keys()) {
        patch.entry(key.clone()).or_insert(Value::Null);
    }
    Value::Object(patch)
}

/// A merge patch of `metadata` from the parts written before to the parts wanted now: label
/// and annotation maps key by key, owner references whole.
fn metadata_patch(old: &Value, new: &Value) -> Value {
    let mut metadata = Map::new();
    for field in ["labels", "annotations"] {
        if new.get(field).is_some() && old.get(field) != new.get(field) {
            metadata.insert(field.into(), map_patch(&old[field], &new[field]));
        }
    }
    if old.get("ownerReferences") != new.get("ownerReferences") {
        metadata.insert("ownerReferences".into(), new["ownerReferences"].clone());
    }
    serde_json::json!({ "metadata": metadata })
}

fn pod_key(view: &PodView) -> ObjectKey {
    (
        view.metadata.namespace.clone().unwrap_or_default(),
        view.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_metadata_patch_removes_what_went_and_keeps_what_stayed() {
        let old = json!({"labels": {"a": "1", "gone": "x"}, "annotations": {"k": "v"},
                         "ownerReferences": [{"uid": "1"}]});
        let new = json!({"labels": {"a": "2"}, "annotations": {"k": "v"},
                         "ownerReferences": [{"uid": "1"}]});
        assert_eq!(
            metadata_patch(&old, &new),
            json!({"metadata": {"labels": {"a": "2", "gone": null}}})
        );
        // Against nothing written (an adopted object), everything is written.
        let all = metadata_patch(&Value::Null, &new);
        assert_eq!(all["metadata"]["labels"], json!({"a": "2"}));
        assert_eq!(all["metadata"]["ownerReferences"], json!([{"uid": "1"}]));
    }
}
