//! A target's serving side, made by hand as GPUStack and Kueue would make it: one Pod per
//! instance with GPUStack's labels and scrape annotations, Ready through the status
//! subresource with its `podIP` on a loopback address, an admitted Kueue Workload named by the
//! Pod's pod-group label, and a small vLLM `/metrics` page served by the test at that address.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use mds_api::resources::{WORKLOAD_GROUP, WORKLOAD_VERSION};
use mds_api::target::{annotation_keys, labels};
use mds_testdata::{mk_pod, mk_workload};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::lab::Lab;

/// The loopback address the Pods report; the whole 127/8 is local on Linux.
pub const POD_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// One vLLM engine's `/metrics` page, served until dropped. Every scrape moves the token
/// counters on, so each pair of scrapes makes a rate window.
pub struct Engine {
    pub address: SocketAddr,
    running: Arc<AtomicU32>,
    scrapes: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Engine {
    /// Serves a page showing `running` requests in the batch on [`POD_IP`], any free port.
    pub async fn start(running: u32) -> Engine {
        let listener = tokio::net::TcpListener::bind((POD_IP, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (gauge, count) = (
            Arc::new(AtomicU32::new(running)),
            Arc::new(AtomicU64::new(0)),
        );
        let (g, c) = (gauge.clone(), count.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let body = page(g.load(Ordering::SeqCst), c.fetch_add(1, Ordering::SeqCst));
                tokio::spawn(async move {
                    // The request line and headers; the scraper sends no body.
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16384 {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(body.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Engine {
            address,
            running: gauge,
            scrapes: count,
            task,
        }
    }

    /// The requests in the batch from the next scrape on.
    pub fn set_running(&self, running: u32) {
        self.running.store(running, Ordering::SeqCst);
    }

    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::SeqCst)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The families the vLLM adapter reads for a Proportional QueueDepth scaler, as vLLM 0.10
/// names them.
fn page(running: u32, scrape: u64) -> String {
    let series = |name: &str, kind: &str, value: String| {
        format!("# TYPE {name} {kind}\n{name}{{engine=\"0\",model_name=\"m\"}} {value}\n")
    };
    [
        series("vllm:num_requests_running", "gauge", running.to_string()),
        series("vllm:num_requests_waiting", "gauge", "0".into()),
        series("vllm:kv_cache_usage_perc", "gauge", "0.5".into()),
        series(
            "vllm:prompt_tokens_total",
            "counter",
            (1000 + 400 * scrape).to_string(),
        ),
        series(
            "vllm:generation_tokens_total",
            "counter",
            (500 + 200 * scrape).to_string(),
        ),
    ]
    .concat()
}

fn workload_resource() -> ApiResource {
    ApiResource {
        group: WORKLOAD_GROUP.into(),
        version: WORKLOAD_VERSION.into(),
        api_version: format!("{WORKLOAD_GROUP}/{WORKLOAD_VERSION}"),
        kind: "Workload".into(),
        plural: "workloads".into(),
    }
}

/// Instance `ordinal` of `role` of `target`, serving `engine`'s page: its Pod, Ready and
/// scheduled, and its admitted Workload.
pub async fn serve_instance(lab: &Lab, target: &str, role: &str, ordinal: u32, engine: &Engine) {
    let name = format!("{target}-{role}-{ordinal}");
    let mut pod = mk_pod(target, role, ordinal)
        .label(labels::POD_GROUP_NAME, &name)
        .annotation(annotation_keys::SCRAPE, "true")
        .port(engine.address.port())
        .build();
    pod["spec"] = json!({"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.10.2"}]});
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let pods: Api<Pod> = Api::namespaced(lab.admin.clone(), &lab.namespace);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let ip = engine.address.ip().to_string();
    let now = jiff::Timestamp::now().to_string();
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
    let status = json!({"status": {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [condition("PodScheduled"), condition("Ready")],
    }});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();

    let workloads: Api<DynamicObject> =
        Api::namespaced_with(lab.admin.clone(), &lab.namespace, &workload_resource());
    let workload: DynamicObject = mk_workload(&name, "h100").typed();
    workloads
        .create(&PostParams::default(), &workload)
        .await
        .unwrap();
    let admitted = json!({"status": {"conditions": [{
        "type": "Admitted", "status": "True", "reason": "Admitted",
        "message": "admitted by the test", "lastTransitionTime": now,
    }]}});
    workloads
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(admitted))
        .await
        .unwrap();
}
