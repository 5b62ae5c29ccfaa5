//! The bench's targets and scalers, created at a bounded rate, and the waits for the state the
//! measurement needs: every Pod ready, every scaler bound and observing.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use mds_api::ModelDeploymentScaler;
use serde_json::json;

/// What every target and scaler looks like.
#[derive(Clone, Debug)]
pub struct Shape {
    pub namespace: String,
    pub targets: usize,
    pub pods: u32,
    pub interval_seconds: u32,
    /// Per-replica capacity of the scaler's Server role (tokens per second).
    pub capacity: u32,
}

impl Shape {
    pub fn name(&self, i: usize) -> String {
        format!("llm-{i:04}")
    }
}

fn target_api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("worker.gpustack.ai", "v1", "ModelDeployment");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// A vLLM target with one Server role of `pods` replicas of size 1, behind a router.
fn target(shape: &Shape, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"},
            "roles": [{"name": "server", "kind": "Server", "replicas": shape.pods, "size": 1,
                "instanceType": "h100"}]}
    }))
    .expect("a well-formed target")
}

/// An Active TokenThroughput scaler whose bounds leave room on both sides of `pods`.
fn scaler(shape: &Shape, name: &str) -> ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
        "metadata": {"name": name},
        "spec": {"targetRef": {"name": name}, "mode": "Active",
            "sampling": {"intervalSeconds": shape.interval_seconds},
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": shape.pods * 2}],
            "algorithm": {"type": "TokenThroughput", "tokenThroughput": {
                "serverTargetTokensPerSecond": shape.capacity.to_string()}}}
    }))
    .expect("a well-formed scaler")
}

/// Creates objects one after another, at most `per_second` of them a second.
async fn paced<F, Fut>(
    what: &str,
    count: usize,
    per_second: f64,
    mut create: F,
) -> Result<(), String>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    for i in 0..count {
        ticks.tick().await;
        create(i)
            .await
            .map_err(|e| format!("creating {what} {i}: {e}"))?;
    }
    eprintln!(
        "  {count} {what} created in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub async fn create_targets(
    client: &kube::Client,
    shape: &Shape,
    per_second: f64,
) -> Result<(), String> {
    let api = target_api(client, &shape.namespace);
    paced("targets", shape.targets, per_second, |i| {
        let object = target(shape, &shape.name(i));
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &object)
                .await
                .map(|_| ())
        }
    })
    .await
}

pub async fn create_scalers(
    client: &kube::Client,
    shape: &Shape,
    per_second: f64,
) -> Result<(), String> {
    let api: Api<ModelDeploymentScaler> = Api::namespaced(client.clone(), &shape.namespace);
    paced("scalers", shape.targets, per_second, |i| {
        let object = scaler(shape, &shape.name(i));
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &object)
                .await
                .map(|_| ())
        }
    })
    .await
}

/// Polls `check` every `every` until it returns `Some`, printing its progress line when it
/// changes; an error after `timeout`.
pub async fn wait_for<T, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Result<T, String>, String>>,
{
    let started = Instant::now();
    let mut last = String::new();
    loop {
        match check().await? {
            Ok(done) => {
                eprintln!("  {what}: done in {:.0} s", started.elapsed().as_secs_f64());
                return Ok(done);
            }
            Err(progress) => {
                if progress != last {
                    eprintln!(
                        "  {what}: {progress} ({:.0} s)",
                        started.elapsed().as_secs_f64()
                    );
                    last = progress;
                }
            }
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "{what}: not done after {} s ({last})",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(every).await;
    }
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Ready Pods over all wanted, or done. Read from the API server's watch cache.
pub async fn pods_ready(
    client: &kube::Client,
    shape: &Shape,
) -> Result<Result<(), String>, String> {
    let wanted = shape.targets * shape.pods as usize;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &shape.namespace);
    let list = pods
        .list(&ListParams::default().match_any())
        .await
        .map_err(|e| format!("listing Pods: {e}"))?;
    let ready = list.items.iter().filter(|p| pod_ready(p)).count();
    Ok(if ready == wanted && list.items.len() == wanted {
        Ok(())
    } else {
        Err(format!(
            "{ready} of {wanted} Pods ready, {} exist",
            list.items.len()
        ))
    })
}

/// Targets whose status reports every replica ready, or done. Cheaper than listing Pods: the
/// stand-in writes a target's status after its Pods in each pass.
pub async fn targets_ready(
    client: &kube::Client,
    shape: &Shape,
) -> Result<Result<(), String>, String> {
    let list = target_api(client, &shape.namespace)
        .list(&ListParams::default().match_any())
        .await
        .map_err(|e| format!("listing targets: {e}"))?;
    let ready = list
        .items
        .iter()
        .filter(|t| t.data["status"]["roles"][0]["ready"] == json!(shape.pods))
        .count();
    Ok(if ready == shape.targets {
        Ok(())
    } else {
        Err(format!("{ready} of {} targets ready", shape.targets))
    })
}

fn condition_true(scaler: &ModelDeploymentScaler, kind: &str) -> bool {
    scaler.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    })
}

/// Scalers `Bound` and `MetricsReady`, or done.
pub async fn scalers_observing(
    client: &kube::Client,
    shape: &Shape,
) -> Result<Result<(), String>, String> {
    let api: Api<ModelDeploymentScaler> = Api::namespaced(client.clone(), &shape.namespace);
    let list = api
        .list(&ListParams::default().match_any())
        .await
        .map_err(|e| format!("listing scalers: {e}"))?;
    let bound = list
        .items
        .iter()
        .filter(|s| condition_true(s, "Bound"))
        .count();
    let observing = list
        .items
        .iter()
        .filter(|s| condition_true(s, "Bound") && condition_true(s, "MetricsReady"))
        .count();
    Ok(if observing == shape.targets {
        Ok(())
    } else {
        Err(format!(
            "{bound} of {} scalers bound, {observing} observing",
            shape.targets
        ))
    })
}

/// Targets whose Server role is not at `pods` replicas ("name: replicas"), for the report.
pub async fn targets_moved(client: &kube::Client, shape: &Shape) -> Result<Vec<String>, String> {
    let list = target_api(client, &shape.namespace)
        .list(&ListParams::default().match_any())
        .await
        .map_err(|e| format!("listing targets: {e}"))?;
    Ok(list
        .items
        .iter()
        .filter(|t| t.data["spec"]["roles"][0]["replicas"] != json!(shape.pods))
        .map(|t| {
            format!(
                "{}: {}",
                t.metadata.name.as_deref().unwrap_or_default(),
                t.data["spec"]["roles"][0]["replicas"]
            )
        })
        .collect())
}
