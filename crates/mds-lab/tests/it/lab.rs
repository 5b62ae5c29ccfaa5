//! A lab of its own (control plane and stand-in) starts with the namespaces `mds controller`
//! needs and stops with nothing left: no server process, no data folder, no engine listener.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::Api;
use mds_lab::process::process_is_running;
use mds_lab::{Lab, LabOptions, StandInOptions};
use mds_testkit::eventually;

#[tokio::test]
async fn a_lab_starts_serves_and_stops_with_nothing_left() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let begun = Instant::now();
    let options = LabOptions {
        standin: StandInOptions {
            world: fast_world(),
            ..StandInOptions::default()
        },
        ..LabOptions::default()
    };
    let lab = Lab::start(options).await.expect("a lab starts");
    eprintln!(
        "lab up in {:.1} s (control plane {:.1} s)",
        begun.elapsed().as_secs_f64(),
        lab.plane.started_in().as_secs_f64()
    );
    let client = lab.plane.client();
    Api::<Namespace>::all(client.clone())
        .get("mds-system")
        .await
        .expect("the controller's lease namespace exists");
    let setup = Setup {
        namespace: "default".into(),
        client: client.clone(),
        standin: lab.standin,
    };
    setup
        .create_target("llm", "vLLM", true, &[("server", "Server", 1, 1)])
        .await;
    let pod: Pod = eventually("a ready Pod", WAIT, || async {
        let pods = setup.pods("llm").await;
        pods.into_iter().find(pod_ready)
    })
    .await
    .unwrap();
    let ip = pod.status.unwrap().pod_ip.unwrap();
    let address = format!("{ip}:8000");
    eventually("the engine to answer", WAIT, || async {
        tokio::net::TcpStream::connect(&address).await.ok()
    })
    .await
    .unwrap();
    setup.assert_no_errors();

    let pids = lab.plane.pids();
    let folder = lab.plane.folder().to_path_buf();
    assert!(pids.iter().all(|p| process_is_running(*p)));
    // Stop: the stand-in first, then the servers.
    drop(setup);
    lab.plane.stop();
    eventually(
        "kube-apiserver and etcd to end",
        Duration::from_secs(20),
        || async { pids.iter().all(|p| !process_is_running(*p)).then_some(()) },
    )
    .await
    .unwrap();
    assert!(!folder.exists(), "{} is left behind", folder.display());
    eventually(
        "the engine listener to close",
        Duration::from_secs(5),
        || async {
            tokio::net::TcpStream::connect(&address)
                .await
                .is_err()
                .then_some(())
        },
    )
    .await
    .unwrap();
}
