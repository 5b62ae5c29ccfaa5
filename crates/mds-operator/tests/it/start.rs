//! `Operator::start` as a whole: a start that fails leaves nothing serving behind it.

use std::time::Duration;

use mds_operator::api_client::ApiClients;
use mds_operator::leader::LeaseConfig;
use mds_operator::telemetry::Endpoints;
use mds_operator::{Leadership, Operator};
use mds_testkit::eventually;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A loopback address nothing listens on (bound, read and let go).
async fn free_address() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test]
async fn a_start_whose_election_fails_leaves_no_listener_serving() {
    // An API server that refuses connections: the lease cannot be read or created.
    let api = free_address().await;
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{api}").parse().unwrap()))
            .unwrap();
    let probes = free_address().await;
    let lease = LeaseConfig {
        namespace: "default".into(),
        name: "mds".into(),
        identity: "start".into(),
        duration_seconds: 15,
        grace_seconds: 5,
    };
    let mut config = super::common::config("default", "start", Leadership::Lease(lease));
    config.listeners = vec![(
        probes,
        Endpoints {
            metrics: true,
            probes: true,
        },
    )];
    // The sender stays alive: only the failed start may stop the listener.
    let (_shutdown, shutdown) = watch::channel(false);
    let started = Operator::start(ApiClients::shared(client), config, shutdown).await;
    assert!(
        started.is_err(),
        "the lease cannot be sought without an API server"
    );
    eventually(
        "the probe port is let go",
        Duration::from_secs(10),
        || async { TcpStream::connect(probes).await.is_err().then_some(()) },
    )
    .await
    .unwrap();
}
