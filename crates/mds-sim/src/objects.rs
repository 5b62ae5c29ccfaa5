//! The Kubernetes objects of the world's views, as a stand-in writes them to an API server
//! (`mds lab`) and the simulator puts them into its in-memory cluster (pure).
//!
//! Pods: metadata as the view says; one `main` container with the metrics port; Kueue's
//! scheduling gate while gated, else bound to the lab's one node. Status: `Pending` with
//! `PodScheduled=False` (`SchedulingGated`) while gated, else `Running` with the Pod's own
//! loopback address, `PodScheduled`, `Initialized`, `ContainersReady` and `Ready`, and the `main`
//! container's restart count. Workloads: the view's metadata and spec, plus the Pod template the
//! Kueue CRD requires, and its conditions as status.

use crate::{PodPhase, PodView};
use jiff::Timestamp;
use mds_api::target::{ModelDeploymentStatus, Workload};
use serde_json::{Value, json};

/// The node every running Pod is bound to. No Node object exists; nothing needs one.
pub const NODE_NAME: &str = "mds-lab-node";
/// The address of that node.
pub const NODE_IP: &str = "127.0.0.1";
/// Kueue's gate on the Pods of a Workload that is not admitted yet.
pub const KUEUE_GATE: &str = "kueue.x-k8s.io/admission";
/// The container image of every Pod (never pulled: no kubelet runs).
pub const ENGINE_IMAGE: &str = "mds-lab/engine:sim";

/// Labels, annotations and owner references: what may change during a Pod's life.
pub fn pod_metadata(view: &PodView) -> Value {
    json!({
        "labels": view.metadata.labels.clone().unwrap_or_default(),
        "annotations": view.metadata.annotations.clone().unwrap_or_default(),
        "ownerReferences": view.metadata.owner_references.clone().unwrap_or_default(),
    })
}

/// The Pod to create.
pub fn pod_manifest(view: &PodView) -> Value {
    let mut spec = json!({
        "containers": [{
            "name": "main",
            "image": ENGINE_IMAGE,
            "ports": [{"name": "http", "containerPort": view.metrics_port, "protocol": "TCP"}],
        }],
        // Nothing runs it, so there is nothing to wait for when it is deleted from a node.
        "terminationGracePeriodSeconds": 30,
    });
    if view.scheduling_gated {
        spec["schedulingGates"] = json!([{"name": KUEUE_GATE}]);
    } else {
        spec["nodeName"] = json!(NODE_NAME);
    }
    let mut metadata = pod_metadata(view);
    metadata["name"] = json!(view.metadata.name);
    metadata["namespace"] = json!(view.metadata.namespace);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// `type -> (status, lastTransitionTime)` of the conditions in a status written before.
fn previous_condition<'a>(previous: &'a Value, kind: &str) -> Option<(&'a str, &'a Value)> {
    previous["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| Some((c["status"].as_str()?, &c["lastTransitionTime"])))
}

/// A condition whose transition time moves only when its status changes.
fn condition(previous: &Value, kind: &str, status: bool, reason: &str, now: &str) -> Value {
    let status = if status { "True" } else { "False" };
    let since = match previous_condition(previous, kind) {
        Some((old, time)) if old == status => time.clone(),
        _ => json!(now),
    };
    let mut c = json!({"type": kind, "status": status, "lastTransitionTime": since});
    if !reason.is_empty() {
        c["reason"] = json!(reason);
    }
    c
}

/// RFC 3339 with whole seconds, as the API server stores times.
pub fn rfc3339(t: Timestamp) -> String {
    let whole = Timestamp::from_second(t.as_second()).unwrap_or(t);
    whole.to_string()
}

/// The Pod's `status`; `previous` is the status last written (or `Null`), so transition
/// times stay put.
pub fn pod_status(view: &PodView, previous: &Value, now: Timestamp) -> Value {
    let now = rfc3339(now);
    let started = view
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| rfc3339(t.0))
        .unwrap_or_else(|| now.clone());
    match (view.phase, &view.pod_ip) {
        (PodPhase::Running, Some(ip)) => json!({
            "phase": "Running",
            "conditions": [
                condition(previous, "PodScheduled", true, "", &now),
                condition(previous, "Initialized", true, "", &now),
                condition(previous, "ContainersReady", view.ready, "", &now),
                condition(previous, "Ready", view.ready, "", &now),
            ],
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": started,
            "containerStatuses": [{
                "name": "main",
                "image": ENGINE_IMAGE,
                "imageID": "",
                "ready": view.ready,
                "started": true,
                "restartCount": view.restart_count,
                "state": {"running": {"startedAt": started}},
            }],
        }),
        _ => json!({
            "phase": "Pending",
            "conditions": [
                condition(previous, "PodScheduled", false, "SchedulingGated", &now),
            ],
        }),
    }
}

/// The Workload to create: the view's metadata and spec, with the Pod template Kueue's CRD
/// requires in each pod set.
pub fn workload_manifest(workload: &Workload) -> Value {
    let pod_sets: Vec<Value> = workload
        .spec
        .pod_sets
        .iter()
        .map(|set| {
            json!({
                "name": set.name,
                "count": set.count.unwrap_or(1),
                "template": {"spec": {"containers": [{"name": "main", "image": ENGINE_IMAGE}]}},
            })
        })
        .collect();
    let mut spec = json!({
        "active": workload.spec.active.unwrap_or(true),
        "podSets": pod_sets,
    });
    if let Some(queue) = queue_name(workload) {
        spec["queueName"] = json!(queue);
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload.metadata.name,
            "namespace": workload.metadata.namespace,
            "labels": workload.metadata.labels.clone().unwrap_or_default(),
            "ownerReferences": workload.metadata.owner_references.clone().unwrap_or_default(),
        },
        "spec": spec,
    })
}

/// Owner references and labels of a Workload: what may change during its life (its Pods are
/// replaced on eviction).
pub fn workload_metadata(workload: &Workload) -> Value {
    json!({
        "labels": workload.metadata.labels.clone().unwrap_or_default(),
        "ownerReferences": workload.metadata.owner_references.clone().unwrap_or_default(),
    })
}

/// The Workload's `status`: its conditions, with the times the world gave them, and while it
/// holds quota the admission Kueue records (the ClusterQueue named after the queue, and one
/// assignment per pod set with the flavor of the same name); `null` removes it in a merge
/// patch.
pub fn workload_status(workload: &Workload) -> Value {
    let conditions = workload
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let reserved = conditions
        .iter()
        .any(|c| c.condition_type == "QuotaReserved" && c.status == "True");
    let queue = queue_name(workload);
    let admission = match (reserved, &queue) {
        (true, Some(queue)) => {
            let assignments: Vec<Value> = workload
                .spec
                .pod_sets
                .iter()
                .map(|set| {
                    json!({
                        "name": set.name,
                        "count": set.count.unwrap_or(1),
                        "flavors": {"nvidia.com/gpu": queue},
                    })
                })
                .collect();
            json!({"clusterQueue": queue, "podSetAssignments": assignments})
        }
        _ => Value::Null,
    };
    json!({"conditions": conditions, "admission": admission})
}

/// The queue as a Kueue object name (a DNS subdomain): instance types may hold capitals or
/// underscores, queue names may not.
fn queue_name(workload: &Workload) -> Option<String> {
    let raw = workload.spec.queue_name.as_deref()?;
    let name: String = raw
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches(|c| c == '-' || c == '.').to_string();
    (!name.is_empty()).then_some(name)
}

/// A ModelDeployment's `status` as JSON.
pub fn deployment_status(status: &ModelDeploymentStatus) -> Value {
    serde_json::to_value(status).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(gated: bool, ready: bool) -> PodView {
        let metadata = serde_json::from_value(json!({
            "name": "llm-server-abcde",
            "namespace": "serving",
            "uid": "00000000-0000-4000-8000-000000000002",
            "labels": {"app.kubernetes.io/name": "model-deployment"},
            "annotations": {"prometheus.io/port": "8000"},
            "creationTimestamp": "2027-01-15T08:00:00Z",
        }))
        .unwrap();
        PodView {
            metadata,
            deployment: crate::DeploymentKey::new("serving", "llm"),
            role: "server".into(),
            ordinal: 0,
            member_index: 0,
            phase: if gated {
                PodPhase::Pending
            } else {
                PodPhase::Running
            },
            scheduling_gated: gated,
            ready,
            ip_slot: 7,
            pod_ip: (!gated).then(|| "127.0.0.9".to_string()),
            metrics_port: 8000,
            restart_count: 2,
            serves_metrics: ready,
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_workload_with_quota_records_its_admission() {
        let mut workload: Workload = serde_json::from_value(json!({
            "metadata": {"name": "gpustack-fnv64-0", "namespace": "serving"},
            "spec": {"active": true, "queueName": "H100_80GB",
                     "podSets": [{"name": "decode", "count": 2}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
        }))
        .unwrap();
        let status = workload_status(&workload);
        assert_eq!(status["admission"]["clusterQueue"], "h100-80gb");
        assert_eq!(status["admission"]["podSetAssignments"][0]["count"], 2);
        assert_eq!(
            workload_manifest(&workload)["spec"]["queueName"],
            "h100-80gb"
        );
        workload.status.as_mut().unwrap().conditions[0].status = "False".into();
        assert_eq!(workload_status(&workload)["admission"], Value::Null);
    }

    #[test]
    fn a_gated_pod_waits_unscheduled() {
        let pod = pod_manifest(&view(true, false));
        assert_eq!(pod["spec"]["schedulingGates"][0]["name"], KUEUE_GATE);
        assert!(pod["spec"].get("nodeName").is_none());
        let status = pod_status(&view(true, false), &Value::Null, at(0));
        assert_eq!(status["phase"], "Pending");
        assert_eq!(status["conditions"][0]["reason"], "SchedulingGated");
        assert!(status.get("podIP").is_none());
    }

    #[test]
    fn a_running_pod_has_its_address_and_keeps_transition_times() {
        let pod = pod_manifest(&view(false, false));
        assert_eq!(pod["spec"]["nodeName"], NODE_NAME);
        assert_eq!(
            pod["spec"]["containers"][0]["ports"][0]["containerPort"],
            8000
        );
        let starting = pod_status(&view(false, false), &Value::Null, at(0));
        assert_eq!(starting["podIP"], "127.0.0.9");
        assert_eq!(starting["containerStatuses"][0]["restartCount"], 2);
        let ready = pod_status(&view(false, true), &starting, at(30));
        let time = |s: &Value, kind: &str| previous_condition(s, kind).unwrap().1.clone();
        assert_eq!(time(&ready, "PodScheduled"), json!(rfc3339(at(0))));
        assert_eq!(time(&ready, "Ready"), json!(rfc3339(at(30))));
        assert_eq!(previous_condition(&ready, "Ready").unwrap().0, "True");
        // Rewriting an unchanged status changes nothing, so it is not written again.
        assert_eq!(pod_status(&view(false, true), &ready, at(60)), ready);
    }
}
