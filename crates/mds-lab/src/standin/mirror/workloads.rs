//! Kueue Workloads (`kueue.x-k8s.io/v1beta2`): created when the world composes an instance,
//! `spec.active`, owners and status conditions kept as the world says, deleted when it drops
//! them.

use std::collections::BTreeSet;

use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use mds_api::target::Workload;
use serde_json::{Value, json};

use super::super::objects;
use super::{Mirror, ObjectKey, api_code, metadata_patch};

/// What the mirror wrote of one Workload.
pub(super) struct WorkloadRecord {
    pub uid: String,
    pub meta: Value,
    pub active: Option<bool>,
    pub status: Value,
}

fn resource() -> ApiResource {
    ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: "Workload".into(),
        plural: "workloads".into(),
    }
}

fn workload_key(w: &Workload) -> ObjectKey {
    (
        w.metadata.namespace.clone().unwrap_or_default(),
        w.metadata.name.clone().unwrap_or_default(),
    )
}

/// (namespace, name, the world's UID, the API server's UID)
type Adopted = Vec<(String, String, String, String)>;

impl Mirror {
    fn workloads_api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resource())
    }

    pub(super) async fn sync_workloads(&mut self, workloads: &[Workload]) -> Adopted {
        let mut adopted = Vec::new();
        let wanted: BTreeSet<ObjectKey> = workloads.iter().map(workload_key).collect();
        let gone: Vec<ObjectKey> = self
            .workloads
            .keys()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            let record = self.workloads.remove(&key).expect("listed");
            self.delete_workload(&key, &record.uid).await;
        }
        for workload in workloads {
            let key = workload_key(workload);
            let world_uid = workload.metadata.uid.clone().unwrap_or_default();
            let mut record = self.workloads.remove(&key);
            if record.as_ref().is_some_and(|r| r.uid != world_uid) {
                let old = record.take().expect("checked");
                self.delete_workload(&key, &old.uid).await;
            }
            let record = match record {
                Some(r) => r,
                None => match self.create_workload(&key, workload).await {
                    Some(r) => {
                        adopted.push((key.0.clone(), key.1.clone(), world_uid, r.uid.clone()));
                        r
                    }
                    None => continue,
                },
            };
            if let Some(record) = self.update_workload(&key, workload, record).await {
                self.workloads.insert(key, record);
            }
        }
        self.desired_workloads = wanted;
        adopted
    }

    async fn create_workload(
        &self,
        key: &ObjectKey,
        workload: &Workload,
    ) -> Option<WorkloadRecord> {
        let manifest: DynamicObject = serde_json::from_value(objects::workload_manifest(workload))
            .expect("a well-formed Workload");
        let api = self.workloads_api(&key.0);
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) if api_code(&e) == Some(409) => match api.get(&key.1).await {
                Ok(existing) if existing.metadata.deletion_timestamp.is_none() => existing,
                Ok(_) => return None,
                Err(e) => {
                    self.report(format!("reading Workload {}/{}: {e}", key.0, key.1));
                    return None;
                }
            },
            Err(e) => {
                self.report(format!("creating Workload {}/{}: {e}", key.0, key.1));
                return None;
            }
        };
        Some(WorkloadRecord {
            uid: created.uid().unwrap_or_default(),
            meta: Value::Null,
            active: created.data["spec"]["active"].as_bool(),
            status: Value::Null,
        })
    }

    /// Brings one Workload to what the world says; `None` when it vanished (it is made again on
    /// the next pass).
    async fn update_workload(
        &self,
        key: &ObjectKey,
        workload: &Workload,
        mut record: WorkloadRecord,
    ) -> Option<WorkloadRecord> {
        let api = self.workloads_api(&key.0);
        let params = PatchParams::default();
        let mut outcome = Ok(());
        let meta = objects::workload_metadata(workload);
        if meta != record.meta {
            let patch = Patch::Merge(metadata_patch(&record.meta, &meta));
            outcome = api.patch(&key.1, &params, &patch).await.map(|_| ());
            if outcome.is_ok() {
                record.meta = meta;
            }
        }
        let active = workload.spec.active.or(Some(true));
        if outcome.is_ok() && active != record.active {
            let patch = Patch::Merge(json!({"spec": {"active": active}}));
            outcome = api.patch(&key.1, &params, &patch).await.map(|_| ());
            if outcome.is_ok() {
                record.active = active;
            }
        }
        let status = objects::workload_status(workload);
        if outcome.is_ok() && status != record.status {
            let patch = Patch::Merge(json!({ "status": status }));
            outcome = api.patch_status(&key.1, &params, &patch).await.map(|_| ());
            if outcome.is_ok() {
                record.status = status;
            }
        }
        match outcome {
            Ok(()) => Some(record),
            Err(e) if api_code(&e) == Some(404) => None,
            Err(e) => {
                self.report(format!("updating Workload {}/{}: {e}", key.0, key.1));
                Some(record)
            }
        }
    }

    async fn delete_workload(&self, key: &ObjectKey, uid: &str) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.workloads_api(&key.0).delete(&key.1, &params).await {
            Ok(_) => {}
            Err(e) if matches!(api_code(&e), Some(404 | 409)) => {}
            Err(e) => self.report(format!("deleting Workload {}/{}: {e}", key.0, key.1)),
        }
    }

    /// Forgets Workloads deleted from outside (the next pass makes them again) and deletes
    /// Workloads whose Pods are all gone and that the world no longer has.
    pub(super) async fn audit_workloads(&mut self) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> = match &self.shared.namespace {
            Some(namespace) => self.workloads_api(namespace),
            None => Api::all_with(self.client.clone(), &resource()),
        };
        let listed = api.list(&ListParams::default()).await?;
        let present: BTreeSet<(ObjectKey, String)> = listed
            .items
            .iter()
            .map(|w| {
                let key = (w.namespace().unwrap_or_default(), w.name_any());
                (key, w.uid().unwrap_or_default())
            })
            .collect();
        self.workloads
            .retain(|key, r| present.contains(&(key.clone(), r.uid.clone())));
        let pods: BTreeSet<String> = self.pods.values().map(|r| r.uid.clone()).collect();
        for workload in &listed.items {
            let key = (
                workload.namespace().unwrap_or_default(),
                workload.name_any(),
            );
            let owners = workload.owner_references();
            let pod_owned = !owners.is_empty() && owners.iter().all(|o| o.kind == "Pod");
            let orphan = pod_owned && owners.iter().all(|o| !pods.contains(&o.uid));
            if orphan
                && !self.workloads.contains_key(&key)
                && !self.desired_workloads.contains(&key)
            {
                self.delete_workload(&key, &workload.uid().unwrap_or_default())
                    .await;
            }
        }
        Ok(())
    }
}
