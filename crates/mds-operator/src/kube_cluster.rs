//! The production `Cluster` port: snapshots from watch caches, writes through the API server.
//! Only the leader writes: every write checks the leader gate first and is refused otherwise,
//! so a replica that lost its lease mid-pass cannot write.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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

use crate::api_client::DEFAULT_TIMEOUTS;
use crate::cache::{Cache, GroupKey};
use crate::ports::{Cluster, ScalerKey, Snapshot, WriteError};
use crate::undecodable::Undecodable;
use crate::worker::FINALIZER;

/// The watch caches a controller keeps.
pub struct Caches {
    pub scalers: Cache<ModelDeploymentScaler>,
    pub targets: Cache<ModelDeployment>,
    /// Pods by (namespace, `app.kubernetes.io/instance`), i.e. by target.
    pub pods: Cache<Pod>,
    /// Used while the Kueue Workload API is served (D4); see [`Caches::workloads`].
    workloads: Cache<Workload>,
    workloads_served: AtomicBool,
    /// Watched objects left out of these caches because they do not decode.
    pub undecodable: Arc<Undecodable>,
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
            workloads: Cache::by_name(),
            workloads_served: AtomicBool::new(workloads_served),
            undecodable: Arc::default(),
        }
    }

    /// These caches record their undecodable objects in `undecodable` (the one the metrics
    /// read).
    pub fn with_undecodable(mut self, undecodable: Arc<Undecodable>) -> Caches {
        self.undecodable = undecodable;
        self
    }

    /// The Workload cache, `None` while the Kueue Workload API is not served (D4 then reads
    /// admission from `PodScheduled`).
    pub fn workloads(&self) -> Option<&Cache<Workload>> {
        self.workloads_served
            .load(Ordering::Acquire)
            .then_some(&self.workloads)
    }

    /// The Workload API has appeared: admission follows Workloads from now on.
    pub fn serve_workloads(&self) {
        self.workloads_served.store(true, Ordering::Release);
    }

    /// The Workload cache, to be fed once the API is served.
    pub fn workload_cache(&self) -> &Cache<Workload> {
        &self.workloads
    }

    /// Every cache has its first complete list.
    pub fn synced(&self) -> bool {
        self.scalers.synced()
            && self.targets.synced()
            && self.pods.synced()
            && self.workloads().is_none_or(Cache::synced)
    }

    /// Every cache keeps up with the API server ([`Cache::current`]): what `/readyz` reports.
    pub fn current(&self, now: tokio::time::Instant) -> bool {
        self.scalers.current(now)
            && self.targets.current(now)
            && self.pods.current(now)
            && self.workloads().is_none_or(|c| c.current(now))
    }

    /// One scaler's snapshot from the caches.
    pub fn snapshot(&self, key: &ScalerKey) -> Option<Snapshot> {
        let scaler = self.scalers.get(&key.namespace, &key.name)?;
        let target_name = scaler.spec.target_ref.name.clone();
        let target = self.targets.get(&key.namespace, &target_name);
        let pods = self.pods.group(&key.namespace, &target_name);
        let mut names: Vec<&str> = pods
            .iter()
            .filter_map(|p| p.metadata.labels.as_ref()?.get(labels::POD_GROUP_NAME))
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        // A target, or a Workload of its instances, that does not decode: not planned on (a
        // Workload left out would read as not admitted, and roll growth back).
        let target_problem = self
            .undecodable
            .problem("ModelDeployment", &key.namespace, &target_name)
            .map(|why| format!("ModelDeployment {target_name:?} does not decode: {why}"))
            .or_else(|| {
                names.iter().find_map(|n| {
                    let why = self.undecodable.problem("Workload", &key.namespace, n)?;
                    Some(format!(
                        "the Kueue Workload {n:?} of its instances does not decode: {why}"
                    ))
                })
            });
        let workloads = self.workloads().map(|cache| {
            names
                .iter()
                .filter_map(|n| cache.get(&key.namespace, n))
                .collect()
        });
        Some(Snapshot {
            target_problem,
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
    /// How long a write may wait for its answer (`api_client`).
    write_deadline: Duration,
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
            write_deadline: DEFAULT_TIMEOUTS.write_deadline,
        }
    }

    /// Bounds every write (and event) by `deadline`: one the API server has not answered by
    /// then is `WriteError::Unavailable`, whatever its connection is doing.
    pub fn with_write_deadline(mut self, deadline: Duration) -> KubeCluster {
        self.write_deadline = deadline;
        self
    }

    /// `write`, bounded by the write deadline.
    async fn within<T>(
        &self,
        write: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WriteError> {
        match tokio::time::timeout(self.write_deadline, write).await {
            Ok(result) => result.map_err(write_error),
            // It may still land: its guards (`test` operations, resource versions) make the
            // retry a conflict then.
            Err(_) => Err(WriteError::Unavailable(format!(
                "the API server did not answer within the write deadline of {} ms",
                self.write_deadline.as_millis()
            ))),
        }
    }

    fn check_leader(&self) -> Result<(), WriteError> {
        if self.leader.load(Ordering::Acquire) {
            Ok(())
        } else {
            // Not the API server's word: the lease moved; a new term starts from status.
            Err(WriteError::Unavailable(
                "this controller is not the leader".into(),
            ))
        }
    }

    fn scalers(&self, namespace: &str) -> Api<ModelDeploymentScaler> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

/// How an API error maps onto what the worker does next. By content, not only by code: the
/// API server answers a JSON Patch that does not apply (a failed `test`, a path gone) with a
/// bare 422 (`the server rejected our request due to an error in our request`, no details),
/// while a schema or CEL refusal is a 422 naming the object and its fields; an authorizer's
/// 403 names the user who cannot, while an admission webhook's says it denied the request.
pub fn write_error(error: kube::Error) -> WriteError {
    let kube::Error::Api(status) = error else {
        // No answer: connection, TLS, timeout, a body that does not read.
        return WriteError::Unavailable(error.to_string());
    };
    let message = format!("{} (HTTP {})", status.message, status.code);
    match status.code {
        409 => WriteError::Conflict(message),
        422 if patch_not_applied(&status) => WriteError::Conflict(message),
        404 => WriteError::NotFound(message),
        // Credentials being rotated, or RBAC that has not reached this API server yet.
        401 => WriteError::Unavailable(message),
        403 if authorization_denied(&status) => WriteError::Unavailable(message),
        429 | 500.. => WriteError::Unavailable(message),
        _ => WriteError::Refused(message),
    }
}

/// The patch handler's answer to a JSON Patch that does not apply (apimachinery's
/// `NewGenericServerResponse` for 422: a fixed message and no object in the details).
fn patch_not_applied(status: &kube::core::Status) -> bool {
    status.message == "the server rejected our request due to an error in our request"
        && status
            .details
            .as_ref()
            .is_none_or(|d| d.name.is_empty() && d.kind.is_empty() && d.causes.is_empty())
}

/// The authorizer's refusal (`... is forbidden: User "..." cannot patch resource ...`), as
/// opposed to an admission webhook's or a policy's.
fn authorization_denied(status: &kube::core::Status) -> bool {
    let m = status.message.as_str();
    !m.contains("denied the request") && m.contains(": User \"") && m.contains("\" cannot ")
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
        self.within(api.patch(target, &PatchParams::default(), &Patch::Json::<()>(patch)))
            .await
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
        let scalers = self.scalers(namespace);
        self.within(scalers.replace_status(name, &PostParams::default(), &object))
            .await
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
        let scalers = self.scalers(namespace);
        self.within(scalers.patch(name, &PatchParams::default(), &Patch::Merge(patch)))
            .await
    }

    async fn emit(&self, scaler: &ModelDeploymentScaler, event: &Event) {
        if self.check_leader().is_err() {
            return;
        }
        let reference = scaler.object_ref(&());
        let event_object = KubeEvent {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.to_string(),
            note: Some(event.message.clone()),
            action: event.action.to_string(),
            secondary: None,
        };
        let published = self.within(self.recorder.publish(&event_object, &reference));
        if let Err(e) = published.await {
            tracing::warn!(error = %e, reason = event.reason, "publishing an event failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// An answer as kube-apiserver words it.
    fn api(code: u16, reason: &str, message: &str, details: Value) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details, "code": code
        }))
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    const NOT_APPLIED: &str = "the server rejected our request due to an error in our request";

    #[test]
    fn a_patch_that_does_not_apply_and_a_stale_version_are_conflicts() {
        let e = write_error(api(422, "Invalid", NOT_APPLIED, json!({})));
        assert!(matches!(e, WriteError::Conflict(_)), "{e:?}");
        let e = write_error(api(
            409,
            "Conflict",
            "Operation cannot be fulfilled on modeldeploymentscalers.worker.gpustack.ai \"llm\": the object has been modified; please apply your changes to the latest version and try again",
            json!({"name": "llm", "group": "worker.gpustack.ai", "kind": "modeldeploymentscalers"}),
        ));
        assert!(matches!(e, WriteError::Conflict(_)), "{e:?}");
    }

    #[test]
    fn a_schema_or_cel_refusal_is_refused_not_a_conflict() {
        let e = write_error(api(
            422,
            "Invalid",
            "ModelDeployment.worker.gpustack.ai \"llm\" is invalid: spec.engine: Invalid value: \"object\": engine.name is immutable",
            json!({"name": "llm", "group": "worker.gpustack.ai", "kind": "ModelDeployment",
                "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: \"object\": engine.name is immutable", "field": "spec.engine"}]}),
        ));
        assert!(
            matches!(&e, WriteError::Refused(m) if m.contains("engine.name is immutable")),
            "{e:?}"
        );
        // The generic message with a cause is a refusal too.
        let e = write_error(api(
            422,
            "Invalid",
            NOT_APPLIED,
            json!({"causes": [{"reason": "FieldValueInvalid", "field": "spec"}]}),
        ));
        assert!(matches!(e, WriteError::Refused(_)), "{e:?}");
    }

    #[test]
    fn a_webhook_denial_is_refused_whatever_its_code() {
        for code in [400, 403, 422] {
            let e = write_error(api(
                code,
                "Forbidden",
                "admission webhook \"fence.modeldeployments.worker.gpustack.ai\" denied the request: binding fence (replica counts of a bound target): ...",
                json!({}),
            ));
            assert!(matches!(e, WriteError::Refused(_)), "{code}: {e:?}");
        }
    }

    #[test]
    fn throttling_outages_and_authorization_are_transient() {
        let rbac = "modeldeployments.worker.gpustack.ai \"llm\" is forbidden: User \"system:serviceaccount:mds-system:mds\" cannot patch resource \"modeldeployments\" in API group \"worker.gpustack.ai\" in the namespace \"ns\"";
        for (code, reason, message) in [
            (403, "Forbidden", rbac),
            (401, "Unauthorized", "Unauthorized"),
            (
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            (
                500,
                "InternalError",
                "Internal error occurred: failed calling webhook \"fence.modeldeployments.worker.gpustack.ai\": failed to call webhook: connection refused",
            ),
            (
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            (
                504,
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still be processing the request",
            ),
        ] {
            let e = write_error(api(code, reason, message, json!({})));
            assert!(matches!(e, WriteError::Unavailable(_)), "{code}: {e:?}");
        }
        // A policy's or quota's 403 is no RBAC lag.
        let e = write_error(api(
            403,
            "Forbidden",
            "modeldeployments.worker.gpustack.ai \"llm\" is forbidden: ValidatingAdmissionPolicy 'counts' with binding 'counts' denied request: too many",
            json!({}),
        ));
        assert!(matches!(e, WriteError::Refused(_)), "{e:?}");
    }

    #[test]
    fn a_missing_object_is_not_found() {
        let e = write_error(api(
            404,
            "NotFound",
            "modeldeployments.worker.gpustack.ai \"llm\" not found",
            json!({"name": "llm"}),
        ));
        assert!(matches!(e, WriteError::NotFound(_)), "{e:?}");
    }
}
