//! `mds controller` as deployed: run as deploy/'s ServiceAccount with leader election on, it takes
//! its Lease, and on SIGTERM (a Pod being stopped) it exits and releases the Lease, so the other
//! replica takes over at once instead of after the lease expires or the kubelet's kill.

use crate::deploy_support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use deploy_support::install_operator_identity;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

/// The admin kubeconfig of `plane`, made to impersonate ServiceAccount `namespace/name` (with the
/// groups the API server gives ServiceAccounts).
fn impersonating(plane: &mds_testkit::ControlPlane, namespace: &str, name: &str) -> String {
    let mut config: serde_json::Value = serde_yaml_ng::from_str(plane.kubeconfig()).unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"]["as"] = format!("system:serviceaccount:{namespace}:{name}").into();
        user["user"]["as-groups"] = serde_json::json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated"
        ]);
    }
    serde_yaml_ng::to_string(&config).unwrap()
}

/// A namespace with deploy/'s ServiceAccount and a kubeconfig impersonating it, in a folder kept
/// for the test.
async fn as_operator(
    plane: &mds_testkit::ControlPlane,
    hint: &str,
) -> (String, tempfile::TempDir, std::path::PathBuf) {
    let namespace = plane.namespace(hint).await.unwrap();
    install_operator_identity(plane, &namespace);
    let folder = tempfile::tempdir().unwrap();
    let kubeconfig = folder.path().join("kubeconfig");
    std::fs::write(&kubeconfig, impersonating(plane, &namespace, "mds")).unwrap();
    (namespace, folder, kubeconfig)
}

/// Stops the child if the test ends early.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("mds-controller")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_exits_on_sigterm_and_releases_its_lease() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let (namespace, _folder, kubeconfig) = as_operator(plane, "controller-stop").await;

    let child = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(["controller", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--leader-election-namespace", &namespace])
        .args(["--identity", "replica-a"])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args(["--health-probe-bind-address", "127.0.0.1:0"])
        .stderr(Stdio::null())
        .spawn()
        .expect("mds controller starts");
    let mut running = Running(child);
    let leases: Api<Lease> = Api::namespaced(plane.client(), &namespace);
    mds_testkit::eventually(
        "the controller to hold Lease mds-controller",
        Duration::from_secs(60),
        || {
            let leases = leases.clone();
            async move { (holder(&leases).await.as_deref() == Some("replica-a")).then_some(()) }
        },
    )
    .await
    .unwrap();

    let terminated = Command::new("kill")
        .args(["-TERM", &running.0.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let status = mds_testkit::eventually(
        "the controller to exit after SIGTERM",
        Duration::from_secs(30),
        || {
            let exited = running.0.try_wait().unwrap();
            async move { exited }
        },
    )
    .await
    .unwrap();
    assert_eq!(status.code(), Some(0), "a clean stop");
    assert_eq!(holder(&leases).await, None, "the Lease was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_whose_webhooks_cannot_start_exits_non_zero_naming_why() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let (_namespace, folder, kubeconfig) = as_operator(plane, "controller-webhook").await;
    let missing = folder.path().join("no-such-tls.crt");
    let run = async |cert: &std::path::Path| {
        let child = Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(["controller", "--leader-elect=false", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .args(["--health-probe-bind-address", "127.0.0.1:0"])
            .arg("--webhook-cert")
            .arg(cert)
            .arg("--webhook-key")
            .arg(cert)
            .args(["--webhook-listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mds controller starts");
        let mut running = Running(child);
        let status = mds_testkit::eventually(
            "the controller to exit without its webhooks",
            Duration::from_secs(60),
            || {
                let exited = running.0.try_wait().unwrap();
                async move { exited }
            },
        )
        .await
        .unwrap();
        let mut said = String::new();
        std::io::Read::read_to_string(running.0.stderr.as_mut().unwrap(), &mut said).unwrap();
        (status, said)
    };
    let (status, said) = run(&missing).await;
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(said.contains("no-such-tls.crt"), "{said}");
}
