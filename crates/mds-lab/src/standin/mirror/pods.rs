//! Pods: created gated or bound, ungated and bound on admission, status and metadata kept as the
//! world says, deleted gracefully while the world terminates them and for good once it drops
//! them.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use mds_sim::PodView;
use serde_json::{Value, json};

use super::super::objects::{self, NODE_NAME};
use super::{Lost, Mirror, ObjectKey, PodOutcome, api_code, metadata_patch, pod_key};

/// What the mirror wrote of one Pod.
pub(super) struct PodRecord {
    /// The API server's UID (the world adopts it).
    pub uid: String,
    pub gated: bool,
    /// Labels, annotations and owner references last written (`Null`: none yet).
    pub meta: Value,
    pub status: Value,
    /// A graceful delete was sent.
    pub deleting: bool,
    /// Where the world keeps it, to report it lost.
    pub place: (mds_sim::DeploymentKey, String, u32, u32),
}

impl Mirror {
    pub(super) async fn sync_pods(&mut self, views: &[PodView], grace: u64) -> PodOutcome {
        let mut outcome = PodOutcome::default();
        let wanted: BTreeSet<ObjectKey> = views.iter().map(pod_key).collect();
        // Gone from the world: delete for good.
        let gone: Vec<ObjectKey> = self
            .pods
            .keys()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            let record = self.pods.remove(&key).expect("listed");
            self.delete_pod(&key, &record.uid, 0).await;
        }
        for view in views {
            let key = pod_key(view);
            let world_uid = view.metadata.uid.clone().unwrap_or_default();
            let mut record = self.pods.remove(&key);
            if record.as_ref().is_some_and(|r| r.uid != world_uid) {
                // The world replaced the member under the same name (size > 1).
                let old = record.take().expect("checked");
                self.delete_pod(&key, &old.uid, 0).await;
            }
            let terminating = view.metadata.deletion_timestamp.is_some();
            let record = match record {
                None if terminating => continue,
                None => match self.create_pod(&key, view).await {
                    Some(created) => {
                        outcome.adopted.push((
                            key.0.clone(),
                            key.1.clone(),
                            world_uid,
                            created.uid.clone(),
                        ));
                        created
                    }
                    None => continue,
                },
                Some(mut r) if terminating => {
                    if !r.deleting {
                        self.delete_pod(&key, &r.uid, grace).await;
                        r.deleting = true;
                    }
                    r
                }
                Some(r) => r,
            };
            if record.deleting {
                self.pods.insert(key, record);
                continue;
            }
            match self.update_pod(&key, view, record).await {
                Ok(record) => {
                    self.pods.insert(key, record);
                }
                Err(lost) => outcome.lost.push(lost),
            }
        }
        self.desired_pods = wanted;
        outcome
    }

    fn pods_api(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates the Pod, or adopts one of that name already there (a lost response, an earlier
    /// stand-in). `None` when neither worked; the next pass tries again.
    async fn create_pod(&mut self, key: &ObjectKey, view: &PodView) -> Option<PodRecord> {
        let manifest: Pod =
            serde_json::from_value(objects::pod_manifest(view)).expect("a well-formed Pod");
        let api = self.pods_api(&key.0);
        let created = match api.create(&PostParams::default(), &manifest).await {
            Ok(pod) => pod,
            Err(e) if api_code(&e) == Some(409) => match api.get(&key.1).await {
                Ok(pod) if pod.metadata.deletion_timestamp.is_none() => pod,
                Ok(_) => return None,
                Err(e) => {
                    self.report(format!("reading Pod {}/{}: {e}", key.0, key.1));
                    return None;
                }
            },
            Err(e) => {
                self.report(format!("creating Pod {}/{}: {e}", key.0, key.1));
                return None;
            }
        };
        let gated = created
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        Some(PodRecord {
            uid: created.uid().unwrap_or_default(),
            gated,
            meta: Value::Null,
            status: Value::Null,
            deleting: false,
            place: place(view),
        })
    }

    /// Brings one Pod to what the world says; `Err` when it vanished.
    async fn update_pod(
        &mut self,
        key: &ObjectKey,
        view: &PodView,
        mut record: PodRecord,
    ) -> Result<PodRecord, Lost> {
        let api = self.pods_api(&key.0);
        let params = PatchParams::default();
        let meta = objects::pod_metadata(view);
        let mut outcome = Ok(());
        if meta != record.meta {
            let patch = metadata_patch(&record.meta, &meta);
            outcome = api
                .patch(&key.1, &params, &Patch::Merge(patch))
                .await
                .map(|_| ());
            if outcome.is_ok() {
                record.meta = meta;
            }
        }
        if outcome.is_ok() && record.gated && !view.scheduling_gated {
            outcome = self.admit_pod(&api, &key.1).await;
            if outcome.is_ok() {
                record.gated = false;
            }
        }
        let status = objects::pod_status(view, &record.status, Timestamp::now());
        if outcome.is_ok() && status != record.status {
            let patch = Patch::Merge(json!({ "status": status }));
            outcome = api.patch_status(&key.1, &params, &patch).await.map(|_| ());
            if outcome.is_ok() {
                record.status = status;
            }
        }
        match outcome {
            Ok(()) => Ok(record),
            Err(e) if api_code(&e) == Some(404) => Err(lost(&record)),
            Err(e) => {
                self.report(format!("updating Pod {}/{}: {e}", key.0, key.1));
                Ok(record)
            }
        }
    }

    /// Kueue admitted the Pod's Workload: the gate goes and the scheduler binds it.
    async fn admit_pod(&self, api: &Api<Pod>, name: &str) -> Result<(), kube::Error> {
        let ungate = Patch::Merge(json!({"spec": {"schedulingGates": null}}));
        api.patch(name, &PatchParams::default(), &ungate).await?;
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        });
        api.create_subresource::<_, Value>("binding", name, &PostParams::default(), &binding)
            .await
            .map(|_| ())
    }

    /// Deletes the Pod with this UID (never a newer one of the same name). Bound Pods stay,
    /// terminating, for `grace` seconds unless `grace` is 0; unbound ones go at once.
    pub(super) async fn delete_pod(&self, key: &ObjectKey, uid: &str, grace: u64) {
        let params = DeleteParams {
            grace_period_seconds: Some(grace as u32),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.pods_api(&key.0).delete(&key.1, &params).await {
            Ok(_) => {}
            // Gone already, or a newer Pod of that name (the precondition).
            Err(e) if matches!(api_code(&e), Some(404 | 409)) => {}
            Err(e) => self.report(format!("deleting Pod {}/{}: {e}", key.0, key.1)),
        }
    }

    /// Pods deleted from outside are lost to the world (it replaces them); Pods whose
    /// ModelDeployment is gone are deleted, as the garbage collector would.
    pub(super) async fn audit_pods(&mut self) -> Result<(), kube::Error> {
        let api: Api<Pod> = match &self.shared.namespace {
            Some(namespace) => self.pods_api(namespace),
            None => Api::all(self.client.clone()),
        };
        let listed = api
            .list(&ListParams::default().labels("app.kubernetes.io/name=model-deployment"))
            .await?;
        let present: BTreeSet<(ObjectKey, String)> = listed
            .items
            .iter()
            .map(|p| {
                let key = (p.namespace().unwrap_or_default(), p.name_any());
                (key, p.uid().unwrap_or_default())
            })
            .collect();
        let vanished: Vec<ObjectKey> = self
            .pods
            .iter()
            .filter(|(key, r)| !r.deleting && !present.contains(&((*key).clone(), r.uid.clone())))
            .map(|(key, _)| key.clone())
            .collect();
        let mut lost_pods = Vec::new();
        for key in vanished {
            let record = self.pods.remove(&key).expect("listed");
            lost_pods.push(lost(&record));
        }
        if !lost_pods.is_empty() {
            let mut state = self.shared.lock();
            for lost_pod in &lost_pods {
                super::lose(&mut state.world, lost_pod);
            }
        }
        let owners = self.deployment_uids();
        for pod in &listed.items {
            let key = (pod.namespace().unwrap_or_default(), pod.name_any());
            let owner = pod
                .owner_references()
                .iter()
                .find(|o| o.kind == "ModelDeployment" && o.controller == Some(true))
                .map(|o| o.uid.clone());
            let orphan = owner.is_some_and(|uid| !owners.contains(&uid));
            if orphan && !self.pods.contains_key(&key) {
                self.delete_pod(&key, &pod.uid().unwrap_or_default(), 0)
                    .await;
            }
        }
        Ok(())
    }

    /// UIDs of the ModelDeployments the world holds.
    pub(super) fn deployment_uids(&self) -> BTreeSet<String> {
        let state = self.shared.lock();
        state
            .world
            .deployment_keys()
            .iter()
            .filter_map(|k| state.world.deployment(k)?.metadata.uid.clone())
            .collect()
    }
}

fn place(view: &PodView) -> (mds_sim::DeploymentKey, String, u32, u32) {
    (
        view.deployment.clone(),
        view.role.clone(),
        view.ordinal,
        view.member_index,
    )
}

fn lost(record: &PodRecord) -> Lost {
    let (deployment, role, ordinal, member) = record.place.clone();
    Lost {
        deployment,
        role,
        ordinal,
        member,
        uid: record.uid.clone(),
    }
}
