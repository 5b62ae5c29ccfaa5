//! What the controller's end-to-end tests share: a controller run in-process against the
//! shared control plane, targets and scalers as users write them, and waits with deadlines.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_operator::api_client::ApiClients;
use mds_operator::leader::LeaseConfig;
use mds_operator::runtime::ControllerConfig;
use mds_operator::telemetry::Telemetry;
use mds_operator::{Leadership, Operator, OperatorConfig};
use mds_testdata::{mk_scaler, mk_target};
use mds_testkit::eventually;
use serde_json::json;
use tokio::sync::watch;

pub const WAIT: Duration = Duration::from_secs(60);

pub struct Running {
    pub stop: watch::Sender<bool>,
    pub operator: Operator,
    pub telemetry: Arc<Telemetry>,
}

/// The controller of `namespace` as `mds controller --leader-elect=false` runs it.
pub fn config(namespace: &str, instance: &str, leadership: Leadership) -> OperatorConfig {
    OperatorConfig {
        controller: ControllerConfig {
            namespace: Some(namespace.to_string()),
            target_version: TargetApiVersion::V1,
            scrape: Default::default(),
            max_concurrent_passes: 4,
            instance: instance.into(),
        },
        leadership,
        listeners: Vec::new(),
    }
}

/// The operator (`Operator::start`, as `mds controller` starts it) for `namespace`, the
/// only replica.
pub async fn start(client: kube::Client, namespace: &str) -> Running {
    let (stop, shutdown) = watch::channel(false);
    let config = config(namespace, "e2e", Leadership::Single);
    let operator = Operator::start(ApiClients::shared(client), config, shutdown)
        .await
        .expect("the operator starts");
    Running {
        stop,
        telemetry: operator.telemetry().clone(),
        operator,
    }
}

/// Our read model of the target carries no apiVersion and kind, so it is created as a
/// dynamic object.
pub async fn create_target(client: &kube::Client, namespace: &str, name: &str) {
    create_target_value(client, namespace, target(name)).await;
}

/// Creates the target `value` (a [`mds_testdata::mk_target`] built) as a dynamic object.
pub async fn create_target_value(client: &kube::Client, namespace: &str, value: serde_json::Value) {
    let gvk = kube::core::GroupVersionKind::gvk("worker.gpustack.ai", "v1", "ModelDeployment");
    let resource = kube::core::ApiResource::from_gvk(&gvk);
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let object: kube::core::DynamicObject = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Creates [`scaler`] `name` on `target`.
pub async fn create_scaler(
    scalers: &Api<ModelDeploymentScaler>,
    name: &str,
    target: &str,
) -> ModelDeploymentScaler {
    let object = scaler(name, target);
    scalers
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

pub fn target(name: &str) -> serde_json::Value {
    mk_target(name).roles(&[("server", "Server", 2)]).build()
}

pub fn scaler(name: &str, target: &str) -> ModelDeploymentScaler {
    mk_scaler(name)
        .target(target)
        .interval_seconds(5)
        .role_bounds("server", 1, 8)
        .queue_depth("10")
        .algorithm_type("Proportional")
        .typed()
}

pub fn condition(s: &ModelDeploymentScaler, kind: &str) -> Option<(String, String)> {
    s.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

pub fn annotations(md: &ModelDeployment) -> std::collections::BTreeMap<String, String> {
    md.metadata.annotations.clone().unwrap_or_default()
}

/// A test's client, namespace, and its targets and scalers.
pub type Scene = (
    kube::Client,
    String,
    Api<ModelDeployment>,
    Api<ModelDeploymentScaler>,
);

pub async fn setup(name: &str) -> Option<Scene> {
    let plane = mds_testkit::e2e()?;
    let ns = plane.namespace(name).await.unwrap();
    let client = plane.client();
    let targets = Api::namespaced_with(client.clone(), &ns, &TargetApiVersion::V1);
    let scalers = Api::namespaced(client.clone(), &ns);
    Some((client, ns, targets, scalers))
}

/// [`setup`] with target `llm` and scaler `llm` on it created.
pub async fn setup_llm(name: &str) -> Option<Scene> {
    let (client, ns, targets, scalers) = setup(name).await?;
    create_target(&client, &ns, "llm").await;
    create_scaler(&scalers, "llm", "llm").await;
    Some((client, ns, targets, scalers))
}

pub async fn patch_spec(scalers: &Api<ModelDeploymentScaler>, name: &str, spec: serde_json::Value) {
    scalers
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

pub async fn wait_condition(
    scalers: &Api<ModelDeploymentScaler>,
    name: &str,
    kind: &str,
    reason: &str,
) -> ModelDeploymentScaler {
    eventually(&format!("{name}: {kind} {reason}"), WAIT, || async {
        let s = scalers.get(name).await.ok()?;
        (condition(&s, kind).map(|c| c.1) == Some(reason.to_string())).then_some(s)
    })
    .await
    .unwrap()
}

pub async fn stop(running: Running) {
    let _ = running.stop.send(true);
    tokio::time::timeout(WAIT, running.operator.wait())
        .await
        .expect("the controller stops")
        .expect("the controller ran");
}

/// A controller with leader election on a runtime of its own, so a test can kill it outright
/// (its tasks dropped mid-flight, the lease not released), as a crashed Pod would be.
pub struct Replica {
    pub runtime: Option<tokio::runtime::Runtime>,
    pub telemetry: Arc<Telemetry>,
}

/// A replica that seeks the Lease `mds-controller` (4 s, renewed 1 s before expiry).
pub async fn replica(client: kube::Client, namespace: &str, identity: &str) -> Replica {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let lease = LeaseConfig {
        namespace: namespace.to_string(),
        name: "mds-controller".into(),
        identity: identity.to_string(),
        duration_seconds: 4,
        grace_seconds: 1,
    };
    let config = config(namespace, identity, Leadership::Lease(lease));
    let (started, telemetry) = tokio::sync::oneshot::channel();
    runtime.spawn(async move {
        let (_stop, shutdown) = watch::channel(false);
        let operator = Operator::start(ApiClients::shared(client), config, shutdown)
            .await
            .expect("the replica starts");
        let _ = started.send(operator.telemetry().clone());
        let _ = operator.wait().await;
    });
    let telemetry = telemetry.await.expect("the replica started");
    Replica {
        runtime: Some(runtime),
        telemetry,
    }
}

impl Replica {
    pub fn leads(&self) -> bool {
        self.telemetry.leader.get() == 1
    }

    pub fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
