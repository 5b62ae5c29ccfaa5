//! The production `Cluster` port: snapshots from watch caches, writes through the API server.
//! Only the leader writes: every write checks the leader gate first and is refused otherwise,
//! so a replica that lost its lease mid-pass cannot write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use mds_api::ModelDeploymentScaler;
use mds_api::resources::TargetApiVersion;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::{ModelDeployment, Workload, labels};
use mds_core::{Event, PatchOp};
use serde_json::json;

use crate::cache::{Cache, GroupKey};
use crate::ports::{Cluster, ScalerKey, Snapshot, WriteError};
use crate::worker::FINALIZER;

/// The watch caches a controller keeps.
pub struct Caches {
    pub scalers: Cache<ModelDeploymentScaler>,
    pub targets: Cache<ModelDeployment>,
    /// Pods by (namespace, `app.kubernetes.io/instance`), i.e. by target.
    pub pods: Cache<Pod>,
    /// `None` when the Kueue Workload API is not served (D4).
    pub workloads: Option<Cache<Workload>>,
}

/// Files a Pod under its target.
pub fn pod_group(pod: &Pod) -> Option<GroupKey> {
    let instance = pod.metadata.labels.as_ref()?.get(labels::INSTANCE)?;
    Some((pod.metadata.namespace.clone()?, instance.clone()))
}

impl Caches {
    pub fn new(workloads_served: bool) -> Caches {
        Caches {
            scalers: Cache::by_name(),
            targets: Cache::by_name(),
            pods: Cache::new(pod_group),
            workloads: workloads_served.then(Cache::by_name),
        }
    }

    /// Every cache has its first complete list.
    pub fn synced(&self) -> bool {
        self.scalers.synced()
            && self.targets.synced()
            && self.pods.synced()
            && self.workloads.as_ref().is_none_or(Cache::synced)
    }

    /// One scaler's snapshot from the caches.
    pub fn snapshot(&self, key: &ScalerKey) -> Option<Snapshot> {
        let scaler = self.scalers.get(&key.namespace, &key.name)?;
        let target_name = scaler.spec.target_ref.name.clone();
        let target = self.targets.get(&key.namespace, &target_name);
        let pods = self.pods.group(&key.namespace, &target_name);
        let workloads = self.workloads.as_ref().map(|cache| {
            let mut names: Vec<&str> = pods
                .iter()
                .filter_map(|p| p.metadata.labels.as_ref()?.get(labels::POD_GROUP_NAME))
                .map(String::as_str)
                .collect();
            names.sort_unstable();
            names.dedup();
            names
                .into_iter()
                .filter_map(|n| cache.get(&key.namespace, n))
                .collect()
        });
        Some(Snapshot {
            scaler,
            target,
            pods,
            workloads,
        })
    }
}

/// Writes through the API server; reads from the caches.
pub struct KubeCluster {
    client: Client,
    caches: Arc<Caches>,
    target_version: TargetApiVersion,
    recorder: Recorder,
    leader: Arc<AtomicBool>,
}

impl KubeCluster {
    pub fn new(
        client: Client,
        caches: Arc<Caches>,
        target_version: TargetApiVersion,
        instance: String,
        leader: Arc<AtomicBool>,
    ) -> KubeCluster {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "mds".into(),
                instance: Some(instance),
            },
        );
        KubeCluster {
            client,
            caches,
            target_version,
            recorder,
            leader,
        }
    }

    fn check_leader(&self) -> Result<(), WriteError> {
        if self.leader.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(WriteError::Refused(
                "this controller is not the leader".into(),
            ))
        }
    }

    fn scalers(&self, namespace: &str) -> Api<ModelDeploymentScaler> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

/// How an API error maps onto what the worker does next.
pub fn write_error(error: kube::Error) -> WriteError {
    match error {
        kube::Error::Api(status) => {
            let message = format!("{} (HTTP {})", status.message, status.code);
            match status.code {
                // A failed `test` operation is 422; a stale resource version is 409.
                409 | 422 => WriteError::Conflict(message),
                404 => WriteError::NotFound(message),
                500.. => WriteError::Unavailable(message),
                _ => WriteError::Refused(message),
            }
        }
        other => WriteError::Unavailable(other.to_string()),
    }
}

impl Cluster for KubeCluster {
    async fn snapshot(&self, key: &ScalerKey) -> Option<Snapshot> {
        self.caches.snapshot(key)
    }

    async fn patch_target(
        &self,
        namespace: &str,
        target: &str,
        ops: &[PatchOp],
    ) -> Result<ModelDeployment, WriteError> {
        self.check_leader()?;
        let patch: json_patch::Patch =
            serde_json::to_value(ops)
                .and_then(serde_json::from_value)
                .map_err(|e| WriteError::Refused(format!("the patch does not encode: {e}")))?;
        let api: Api<ModelDeployment> =
            Api::namespaced_with(self.client.clone(), namespace, &self.target_version);
        api.patch(target, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(write_error)
    }

    async fn write_status(
        &self,
        scaler: &ModelDeploymentScaler,
        status: &ModelDeploymentScalerStatus,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        self.check_leader()?;
        let mut object = scaler.clone();
        object.status = Some(status.clone());
        let namespace = scaler.metadata.namespace.as_deref().unwrap_or_default();
        let name = scaler.metadata.name.as_deref().unwrap_or_default();
        self.scalers(namespace)
            .replace_status(name, &PostParams::default(), &object)
            .await
            .map_err(write_error)
    }

    async fn set_finalizer(
        &self,
        scaler: &ModelDeploymentScaler,
        present: bool,
    ) -> Result<ModelDeploymentScaler, WriteError> {
        self.check_leader()?;
        let mut finalizers: Vec<String> = scaler
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        if present {
            finalizers.push(FINALIZER.to_string());
        }
        // The resource version in a merge patch is a precondition: a changed object is 409.
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": scaler.metadata.resource_version,
        }});
        let namespace = scaler.metadata.namespace.as_deref().unwrap_or_default();
        let name = scaler.metadata.name.as_deref().unwrap_or_default();
        self.scalers(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(write_error)
    }

    async fn emit(&self, scaler: &ModelDeploymentScaler, event: &Event) {
        if self.check_leader().is_err() {
            return;
        }
        let reference = scaler.object_ref(&());
        let published = self
            .recorder
            .publish(
                &KubeEvent {
                    type_: if event.warning {
                        EventType::Warning
                    } else {
                        EventType::Normal
                    },
                    reason: event.reason.to_string(),
                    note: Some(event.message.clone()),
                    action: event.action.to_string(),
                    secondary: None,
                },
                &reference,
            )
            .await;
        if let Err(e) = published {
            tracing::warn!(error = %e, reason = event.reason, "publishing an event failed");
        }
    }
}
