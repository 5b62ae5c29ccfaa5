//! A stalled API server cannot stall the controller: against a server that accepts
//! connections and never answers (a half-open connection looks the same to the client), every
//! write of the `Cluster` port ends at its deadline as `Unavailable`, events too, and the write
//! client's read timeout ends any other request. Short real timeouts; every test bounds its
//! own wait.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use mds_api::ModelDeploymentScaler;
use mds_api::resources::TargetApiVersion;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_core::{Event, PatchOp};
use mds_operator::api_client::{ApiClients, ApiTimeouts, DEFAULT_TIMEOUTS, configs};
use mds_operator::kube_cluster::{Caches, KubeCluster};
use mds_operator::{Cluster, WriteError};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// Far above every timeout here.
const NEVER: Duration = Duration::from_secs(20);

/// An API server that reads requests and never answers; its configuration.
async fn silent_server() -> kube::Config {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                }
            });
        }
    });
    kube::Config::new(format!("http://{address}").parse().unwrap())
}

fn cluster(client: kube::Client, deadline: Duration) -> KubeCluster {
    KubeCluster::new(
        client,
        Arc::new(Caches::new(false)),
        TargetApiVersion::default(),
        "test".into(),
        Arc::new(AtomicBool::new(true)),
    )
    .with_write_deadline(deadline)
}

fn scaler() -> ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm", "namespace": "ns", "uid": "scaler-1", "resourceVersion": "7"},
        "spec": {"targetRef": {"name": "llm"}, "mode": "Active",
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 8}],
            "algorithm": {"proportional": {"metric": "QueueDepth", "roleTargets": [{"name": "server", "target": "10"}]}}}
    }))
    .unwrap()
}

fn assert_deadline(result: Result<impl std::fmt::Debug, WriteError>, took: Duration) {
    match result {
        Err(WriteError::Unavailable(message)) => {
            assert!(message.contains("write deadline of 300 ms"), "{message}")
        }
        other => panic!("expected Unavailable at the deadline, got {other:?}"),
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test]
async fn every_write_ends_at_its_deadline_when_the_api_server_does_not_answer() {
    // A client without a read timeout: the deadline alone ends the writes.
    let client = kube::Client::try_from(silent_server().await).unwrap();
    let cluster = cluster(client, Duration::from_millis(300));
    let scaler = scaler();

    let began = Instant::now();
    let written = tokio::time::timeout(
        NEVER,
        cluster.write_status(&scaler, &ModelDeploymentScalerStatus::default()),
    )
    .await
    .expect("the status write was not cut at its deadline");
    assert_deadline(written, began.elapsed());

    let began = Instant::now();
    let ops = [PatchOp::Test {
        path: "/spec".into(),
        value: json!({}),
    }];
    let patched = tokio::time::timeout(NEVER, cluster.patch_target("ns", "llm", &ops))
        .await
        .expect("the target write was not cut at its deadline");
    assert_deadline(patched, began.elapsed());

    let began = Instant::now();
    let finalized = tokio::time::timeout(NEVER, cluster.set_finalizer(&scaler, true))
        .await
        .expect("the finalizer write was not cut at its deadline");
    assert_deadline(finalized, began.elapsed());

    let event = Event {
        reason: "Scaled",
        action: "Scale",
        message: "m".into(),
        warning: false,
    };
    tokio::time::timeout(NEVER, cluster.emit(&scaler, &event))
        .await
        .expect("the event was not cut at the deadline");
}

#[tokio::test]
async fn the_write_client_stops_waiting_at_its_read_timeout() {
    let timeouts = ApiTimeouts {
        connect: Duration::from_secs(1),
        read: Duration::from_millis(300),
        write_deadline: NEVER,
    };
    let clients = ApiClients::new(silent_server().await, timeouts).unwrap();
    let began = Instant::now();
    let answer = tokio::time::timeout(NEVER, clients.write.apiserver_version())
        .await
        .expect("the request was not cut at the read timeout");
    assert!(answer.is_err());
    assert!(began.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn watches_get_no_read_timeout_and_writes_do() {
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let (watch, write) = configs(config, DEFAULT_TIMEOUTS);
    assert_eq!(watch.connect_timeout, Some(Duration::from_secs(5)));
    assert_eq!(watch.read_timeout, None, "a quiet watch is no stalled one");
    assert_eq!(write.connect_timeout, Some(Duration::from_secs(5)));
    assert_eq!(write.read_timeout, Some(Duration::from_secs(15)));
    assert!(write.reset_reader_on_write);
    assert_eq!(DEFAULT_TIMEOUTS.write_deadline, Duration::from_secs(20));
}
