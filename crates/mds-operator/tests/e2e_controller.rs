//! The controller against a real kube-apiserver (mds-testkit): watches, the binding write, the
//! status subresource, the finalizer, events, and the release on deletion. Engines and the
//! GPUStack stand-in come in the scenario tests; here the target has no Pods, so the scaler
//! binds, reports WaitingForMetrics and plans nothing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_operator::runtime::{self, ControllerConfig};
use mds_operator::telemetry::Telemetry;
use mds_testkit::eventually;
use serde_json::json;
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(60);

struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    telemetry: Arc<Telemetry>,
    _leader: watch::Sender<bool>,
}

fn start(client: kube::Client, namespace: &str) -> Running {
    let telemetry = Arc::new(Telemetry::new());
    let (stop, shutdown) = watch::channel(false);
    let (leader_tx, leader) = watch::channel(true);
    let config = ControllerConfig {
        namespace: Some(namespace.to_string()),
        target_version: TargetApiVersion::V1,
        scrape: Default::default(),
        max_concurrent_passes: 4,
        instance: "e2e".into(),
    };
    let t = telemetry.clone();
    let task = tokio::spawn(async move {
        runtime::run(client, config, t, leader, shutdown)
            .await
            .expect("the controller runs");
    });
    Running {
        stop,
        task,
        telemetry,
        _leader: leader_tx,
    }
}

/// Our read model of the target carries no apiVersion and kind, so it is created as a
/// dynamic object.
async fn create_target(client: &kube::Client, namespace: &str, name: &str) {
    let gvk = kube::core::GroupVersionKind::gvk("worker.gpustack.ai", "v1", "ModelDeployment");
    let resource = kube::core::ApiResource::from_gvk(&gvk);
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let object: kube::core::DynamicObject = serde_json::from_value(target(name)).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

fn target(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"},
            "roles": [{"name": "server", "kind": "Server", "replicas": 2, "instanceType": "h100"}]}
    })
}

fn scaler(name: &str, target: &str) -> ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
        "metadata": {"name": name},
        "spec": {"targetRef": {"name": target}, "mode": "Active",
            "sampling": {"intervalSeconds": 5},
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 8}],
            "algorithm": {"type": "Proportional", "proportional": {"metric": "QueueDepth",
                "roleTargets": [{"name": "server", "target": "10"}]}}}
    }))
    .unwrap()
}

fn condition(s: &ModelDeploymentScaler, kind: &str) -> Option<(String, String)> {
    s.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_reports_and_releases_on_deletion() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let ns = plane.namespace("controller").await.unwrap();
    let client = plane.client();
    let targets: Api<ModelDeployment> =
        Api::namespaced_with(client.clone(), &ns, &TargetApiVersion::V1);
    let scalers: Api<ModelDeploymentScaler> = Api::namespaced(client.clone(), &ns);
    create_target(&client, &ns, "llm").await;
    scalers
        .create(&PostParams::default(), &scaler("llm", "llm"))
        .await
        .unwrap();
    let running = start(client.clone(), &ns);

    // The controller takes the binding and says so.
    let md = eventually("the binding annotation", WAIT, || async {
        let md = targets.get("llm").await.ok()?;
        md.metadata
            .annotations
            .as_ref()?
            .contains_key(BINDING_ANNOTATION)
            .then_some(md)
    })
    .await
    .unwrap();
    assert_eq!(
        md.spec.roles[0].replicas(),
        2,
        "binding leaves counts alone"
    );
    let s = eventually("Bound and Active", WAIT, || async {
        let s = scalers.get("llm").await.ok()?;
        (condition(&s, "Active") == Some(("True".into(), "Active".into()))).then_some(s)
    })
    .await
    .unwrap();
    assert!(
        s.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == mds_operator::FINALIZER))
    );
    let s = eventually("MetricsReady reports the missing engines", WAIT, || async {
        let s = scalers.get("llm").await.ok()?;
        condition(&s, "MetricsReady")
            .filter(|c| c.1 == "WaitingForMetrics")
            .map(|_| s)
    })
    .await
    .unwrap();
    assert_eq!(
        s.status.as_ref().unwrap().binding.as_ref().unwrap().term,
        Some(1)
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let bound = eventually("a Bound event with an action", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Bound"))
    })
    .await
    .unwrap();
    assert_eq!(bound.action.as_deref(), Some("Bind"));
    assert_eq!(bound.reporting_controller.as_deref(), Some("mds"));

    // Deleting the scaler releases the binding before the finalizer lets it go.
    scalers
        .delete("llm", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the scaler is gone", WAIT, || async {
        scalers.get_opt("llm").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    let md = targets.get("llm").await.unwrap();
    assert!(
        md.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(BINDING_ANNOTATION)),
        "released: {:?}",
        md.metadata.annotations
    );
    assert!(running.telemetry.encode().contains("mds_passes_total"));
    let _ = running.stop.send(true);
    tokio::time::timeout(WAIT, running.task)
        .await
        .expect("the controller stops")
        .unwrap();
}

fn annotations(md: &ModelDeployment) -> std::collections::BTreeMap<String, String> {
    md.metadata.annotations.clone().unwrap_or_default()
}

async fn setup(
    name: &str,
) -> Option<(
    kube::Client,
    String,
    Api<ModelDeployment>,
    Api<ModelDeploymentScaler>,
)> {
    let plane = mds_testkit::e2e()?;
    let ns = plane.namespace(name).await.unwrap();
    let client = plane.client();
    let targets = Api::namespaced_with(client.clone(), &ns, &TargetApiVersion::V1);
    let scalers = Api::namespaced(client.clone(), &ns);
    Some((client, ns, targets, scalers))
}

async fn patch_spec(scalers: &Api<ModelDeploymentScaler>, name: &str, spec: serde_json::Value) {
    scalers
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

async fn wait_condition(
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

async fn stop(running: Running) {
    let _ = running.stop.send(true);
    tokio::time::timeout(WAIT, running.task)
        .await
        .expect("the controller stops")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_scaler_is_already_bound_and_shadow_writes_nothing() {
    let Some((client, ns, targets, scalers)) = setup("already-bound").await else {
        return;
    };
    create_target(&client, &ns, "llm").await;
    scalers
        .create(&PostParams::default(), &scaler("first", "llm"))
        .await
        .unwrap();
    let running = start(client.clone(), &ns);
    wait_condition(&scalers, "first", "Active", "Active").await;
    scalers
        .create(&PostParams::default(), &scaler("second", "llm"))
        .await
        .unwrap();
    let second = wait_condition(&scalers, "second", "Bound", "AlreadyBound").await;
    assert_eq!(
        condition(&second, "Active").map(|c| c.1).as_deref(),
        Some("AlreadyBound")
    );
    let binding = annotations(&targets.get("llm").await.unwrap())[BINDING_ANNOTATION].clone();
    assert!(binding.contains("\"first\""), "{binding}");

    // A Shadow scaler releases its binding and then writes nothing to the target.
    patch_spec(&scalers, "second", json!({"mode": "Shadow"})).await;
    patch_spec(&scalers, "first", json!({"mode": "Shadow"})).await;
    wait_condition(&scalers, "first", "Active", "ShadowMode").await;
    let md = eventually("the release", WAIT, || async {
        let md = targets.get("llm").await.ok()?;
        (!annotations(&md).contains_key(BINDING_ANNOTATION)).then_some(md)
    })
    .await
    .unwrap();
    assert!(!annotations(&md).contains_key(mds_api::annotations::DECISION_ANNOTATION));
    let version = md.metadata.resource_version.clone();
    // Two more intervals: nothing moves on the target.
    let s = scalers.get("first").await.unwrap();
    let generation = s.status.as_ref().and_then(|st| st.observed_generation);
    eventually("two passes of the Shadow scaler", WAIT, || async {
        let passes = running.telemetry.passes.get();
        (passes >= 6).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        targets.get("llm").await.unwrap().metadata.resource_version,
        version
    );
    assert_eq!(
        generation,
        scalers
            .get("first")
            .await
            .unwrap()
            .status
            .unwrap()
            .observed_generation
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_releases_both_annotations_and_a_replaced_target_waits_for_an_edit() {
    let Some((client, ns, targets, scalers)) = setup("suspend").await else {
        return;
    };
    create_target(&client, &ns, "llm").await;
    scalers
        .create(&PostParams::default(), &scaler("llm", "llm"))
        .await
        .unwrap();
    let running = start(client.clone(), &ns);
    wait_condition(&scalers, "llm", "Active", "Active").await;
    patch_spec(&scalers, "llm", json!({"suspend": true})).await;
    wait_condition(&scalers, "llm", "Bound", "Suspended").await;
    eventually("both annotations gone", WAIT, || async {
        let a = annotations(&targets.get("llm").await.ok()?);
        (!a.contains_key(BINDING_ANNOTATION)
            && !a.contains_key(mds_api::annotations::DECISION_ANNOTATION))
        .then_some(())
    })
    .await
    .unwrap();
    patch_spec(&scalers, "llm", json!({"suspend": false})).await;
    let s = wait_condition(&scalers, "llm", "Active", "Active").await;
    let term = s.status.unwrap().binding.unwrap().term.unwrap();
    assert!(term >= 2, "a new binding takes a higher term: {term}");

    // The target is deleted and recreated under the same name: the scaler waits for an edit.
    targets
        .delete("llm", &DeleteParams::default())
        .await
        .unwrap();
    wait_condition(&scalers, "llm", "Bound", "TargetNotFound").await;
    create_target(&client, &ns, "llm").await;
    wait_condition(&scalers, "llm", "Bound", "TargetReplaced").await;
    let md = targets.get("llm").await.unwrap();
    assert!(
        !annotations(&md).contains_key(BINDING_ANNOTATION),
        "not bound before the edit"
    );
    patch_spec(
        &scalers,
        "llm",
        json!({"sampling": {"pendingTimeoutSeconds": 120}}),
    )
    .await;
    wait_condition(&scalers, "llm", "Active", "Active").await;
    eventually("the new target is bound", WAIT, || async {
        annotations(&targets.get("llm").await.ok()?)
            .contains_key(BINDING_ANNOTATION)
            .then_some(())
    })
    .await
    .unwrap();
    stop(running).await;
}

/// A controller with leader election on a runtime of its own, so a test can kill it outright
/// (its tasks dropped mid-flight, the lease not released), as a crashed Pod would be.
struct Replica {
    runtime: Option<tokio::runtime::Runtime>,
    telemetry: Arc<Telemetry>,
}

fn replica(client: kube::Client, namespace: &str, identity: &str) -> Replica {
    use mds_operator::leader::{Election, LeaseConfig};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let telemetry = Arc::new(Telemetry::new());
    let t = telemetry.clone();
    let (namespace, identity) = (namespace.to_string(), identity.to_string());
    runtime.spawn(async move {
        let lease = LeaseConfig {
            namespace: namespace.clone(),
            name: "mds-controller".into(),
            identity: identity.clone(),
            duration_seconds: 4,
            grace_seconds: 1,
        };
        let election = Election::start(client.clone(), &lease).await.unwrap();
        let (_stop, shutdown) = watch::channel(false);
        let config = ControllerConfig {
            namespace: Some(namespace),
            target_version: TargetApiVersion::V1,
            scrape: Default::default(),
            max_concurrent_passes: 4,
            instance: identity,
        };
        let _ = runtime::run(client, config, t, election.leader.clone(), shutdown).await;
        drop(_stop);
        election.release().await;
    });
    Replica {
        runtime: Some(runtime),
        telemetry,
    }
}

impl Replica {
    fn leads(&self) -> bool {
        self.telemetry.leader.get() == 1
    }

    fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_leader_dies() {
    let Some((client, ns, targets, scalers)) = setup("failover").await else {
        return;
    };
    create_target(&client, &ns, "llm").await;
    scalers
        .create(&PostParams::default(), &scaler("llm", "llm"))
        .await
        .unwrap();
    let a = replica(client.clone(), &ns, "replica-a");
    eventually("replica a leads", WAIT, || async {
        a.leads().then_some(())
    })
    .await
    .unwrap();
    let b = replica(client.clone(), &ns, "replica-b");
    wait_condition(&scalers, "llm", "Active", "Active").await;
    // The standby keeps its caches warm but runs no pass while a leads.
    eventually("the leader passes", WAIT, || async {
        (a.telemetry.passes.get() >= 2).then_some(())
    })
    .await
    .unwrap();
    assert!(!b.leads());
    assert_eq!(
        b.telemetry.passes.get(),
        0,
        "only the leader plans and writes"
    );

    a.kill();
    let started = std::time::Instant::now();
    eventually("replica b leads", WAIT, || async {
        b.leads().then_some(())
    })
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took over in {:?}",
        started.elapsed()
    );
    // The new leader acts: a suspend is released by it.
    patch_spec(&scalers, "llm", json!({"suspend": true})).await;
    eventually("released by the new leader", WAIT, || async {
        (!annotations(&targets.get("llm").await.ok()?).contains_key(BINDING_ANNOTATION))
            .then_some(())
    })
    .await
    .unwrap();
    assert!(b.telemetry.passes.get() > 0);
    b.kill();
}
