//! What the stand-in's end-to-end tests share: a stand-in in a namespace of the shared control
//! plane with short delays, ModelDeployments written as users write them, and readers.
#![allow(dead_code)]

use std::time::Duration;

use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use mds_lab::standin::{StandIn, StandInOptions};
use mds_lab::{RoleSettings, WorldConfig};
use serde_json::{Value, json};

/// Generous: two shared cores, a compiler beside us.
pub const WAIT: Duration = Duration::from_secs(60);

/// One test's world: a namespace of the shared control plane and a stand-in mirroring it.
pub struct Setup {
    pub namespace: String,
    pub client: Client,
    pub standin: StandIn,
}

/// Delays short enough for tests: engines start in a second.
pub fn fast_world() -> WorldConfig {
    WorldConfig {
        default_role: RoleSettings {
            cold_start: SignedDuration::from_secs(1),
            ..RoleSettings::default()
        },
        ..WorldConfig::default()
    }
}

/// `None` when the end-to-end tests are skipped.
pub async fn setup(hint: &str, mut options: StandInOptions) -> Option<Setup> {
    let plane = mds_testkit::e2e()?;
    let namespace = plane.namespace(hint).await.unwrap();
    options.namespace = Some(namespace.clone());
    options.tick = Duration::from_millis(100);
    let client = plane.client();
    let standin = StandIn::start(client.clone(), options).await.unwrap();
    Some(Setup {
        namespace,
        client,
        standin,
    })
}

pub fn model_deployments(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "worker.gpustack.ai".into(),
        version: "v1".into(),
        api_version: "worker.gpustack.ai/v1".into(),
        kind: "ModelDeployment".into(),
        plural: "modeldeployments".into(),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

pub fn workloads(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: "Workload".into(),
        plural: "workloads".into(),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// A role as users write it: (name, kind, replicas, size).
pub type Role<'a> = (&'a str, &'a str, i32, i32);

impl Setup {
    /// Creates a ModelDeployment through the `v1` alias.
    pub async fn create_target(&self, name: &str, engine: &str, router: bool, roles: &[Role<'_>]) {
        let roles: Vec<Value> = roles
            .iter()
            .map(|(role, kind, replicas, size)| {
                json!({"name": role, "kind": kind, "replicas": replicas, "size": size,
                       "instanceType": "h100"})
            })
            .collect();
        let mut spec = json!({"engine": {"name": engine}, "roles": roles});
        if router {
            spec["router"] = json!({"name": "vllm-router"});
        }
        let md: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        model_deployments(&self.client, &self.namespace)
            .create(&PostParams::default(), &md)
            .await
            .unwrap();
    }

    /// Sets one role's replicas the way a scaler does: a JSON patch of that field.
    pub async fn set_replicas(&self, name: &str, role_index: usize, replicas: i32) {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": format!("/spec/roles/{role_index}/replicas"), "value": replicas}
        ]))
        .unwrap();
        model_deployments(&self.client, &self.namespace)
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .unwrap();
    }

    pub async fn target(&self, name: &str) -> Option<DynamicObject> {
        model_deployments(&self.client, &self.namespace)
            .get_opt(name)
            .await
            .unwrap()
    }

    /// The target's `status`, once the stand-in wrote one.
    pub async fn status(&self, name: &str) -> Option<Value> {
        let md = self.target(name).await?;
        md.data.get("status").cloned()
    }

    /// The target's Pods (by the instance label), sorted by name.
    pub async fn pods(&self, target: &str) -> Vec<Pod> {
        let selector = format!("app.kubernetes.io/instance={target}");
        let mut pods = Api::<Pod>::namespaced(self.client.clone(), &self.namespace)
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    pub async fn workloads(&self) -> Vec<DynamicObject> {
        workloads(&self.client, &self.namespace)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    /// Fails the test with the stand-in's problems, if it had any.
    pub fn assert_no_errors(&self) {
        let errors = self.standin.take_errors();
        assert!(
            errors.is_empty(),
            "the stand-in reported:\n{}",
            errors.join("\n")
        );
    }
}

pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A condition's status ("True"/"False") in an object's `status.conditions`.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}
