//! Starting and stopping one etcd + kube-apiserver pair on free loopback ports.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::assets::{self, Assets};
use crate::certs::Certificates;
use crate::files::{self, FolderGuard, io_error, log_tail, write_private};
use crate::process::{self, ManagedChild};
use crate::{Error, crds, eventually, kubeconfig};

/// How long etcd, the API server and the CRDs may take to become ready. Generous: the machines
/// have two cores shared with a compiler.
pub const START_TIMEOUT: Duration = Duration::from_secs(180);
/// Port clashes (another process took a port between our probe and the server's bind) are
/// retried with fresh ports this many times in all.
const START_ATTEMPTS: usize = 3;

/// How a control plane names itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaneOptions {
    /// The kubeconfig's context, cluster and user name, the etcd member name, the CAs' common
    /// names, and the data folder's prefix (`/tmp/<name>-<pid>-…`). A DNS label.
    pub name: String,
}

impl PlaneOptions {
    pub fn named(name: &str) -> PlaneOptions {
        PlaneOptions {
            name: name.to_string(),
        }
    }
}

/// A running etcd and kube-apiserver, with our CRDs installed. Dropping it stops both and removes
/// its data folder.
pub struct ControlPlane {
    // Field order is drop order: the API server goes before its etcd.
    api_server: ManagedChild,
    etcd: ManagedChild,
    folder: PathBuf,
    api_port: u16,
    kubeconfig: String,
    config: kube::Config,
    started_in: Duration,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("folder", &self.folder)
            .field("api_port", &self.api_port)
            .field("api_server_pid", &self.api_server.id())
            .field("etcd_pid", &self.etcd.id())
            .finish()
    }
}

impl ControlPlane {
    /// Starts a control plane and installs the ModelDeploymentScaler, ModelDeployment and Kueue
    /// Workload CRDs. Builds the binaries first if the cache is cold (minutes, once). Returns
    /// once the API server is ready and every CRD is established and answers lists.
    pub async fn start(options: &PlaneOptions) -> Result<ControlPlane, Error> {
        let assets = tokio::task::spawn_blocking(Assets::locate)
            .await
            .map_err(|e| Error::Assets(format!("locating the binaries panicked: {e}")))??;
        let crds = vec![
            crds::model_deployment_scaler(),
            crds::model_deployment()?,
            crds::kueue_workload(&assets.kueue_workload_crd)?,
        ];
        let began_processes = Instant::now();
        let mut plane = start_processes(&assets, &options.name).await?;
        crds::install(&plane.client(), &crds, START_TIMEOUT).await?;
        plane.started_in = began_processes.elapsed();
        Ok(plane)
    }

    /// A fresh admin client (user `admin`, group `system:masters`). Each call makes a new one
    /// because a client's connections belong to the Tokio runtime that made it, and each
    /// `#[tokio::test]` has its own runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("a kube client for the control plane")
    }

    /// The kube client configuration of the admin user.
    pub fn client_config(&self) -> &kube::Config {
        &self.config
    }

    /// A client that impersonates ServiceAccount `namespace/name` (with the groups the API
    /// server gives ServiceAccounts), for RBAC tests. The ServiceAccount need not exist.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn service_account_client(&self, namespace: &str, name: &str) -> Client {
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
        config.auth_info.impersonate_groups = Some(vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_string(),
        ]);
        Client::try_from(config).expect("a kube client for the control plane")
    }

    /// Creates namespace `name`.
    pub async fn create_namespace(&self, name: &str) -> Result<(), Error> {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|source| Error::Kube {
                context: format!("creating namespace {name}"),
                source,
            })?;
        Ok(())
    }

    /// The admin kubeconfig text (certificates inline).
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// Writes the admin kubeconfig to `path` (mode 0600: it holds the admin key).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        files::write_private(path, &self.kubeconfig)
    }

    /// The kubeconfig file inside the data folder that [`ControlPlane::kubectl`] uses.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.folder.join("admin.kubeconfig")
    }

    /// A `kubectl` command of the pinned version, pointed at this control plane. Builds kubectl
    /// first if the cache is cold.
    pub fn kubectl(&self) -> Result<Command, Error> {
        let mut command = Command::new(assets::kubectl_path()?);
        command.arg("--kubeconfig").arg(self.kubeconfig_path());
        Ok(command)
    }

    pub fn api_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// Process ids of kube-apiserver and etcd.
    pub fn pids(&self) -> [u32; 2] {
        [self.api_server.id(), self.etcd.id()]
    }

    /// The data folder: certificates, etcd's data, and both servers' logs.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// From spawning etcd to the CRDs answering lists.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Whether kube-apiserver and etcd still run (neither has exited).
    pub fn is_running(&mut self) -> bool {
        let alive = |child: &mut ManagedChild| matches!(child.try_wait(), Ok(None));
        alive(&mut self.api_server) && alive(&mut self.etcd)
    }

    /// Stops both servers and removes the data folder (the same as dropping it).
    pub fn stop(self) {}
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.api_server.kill();
        self.etcd.kill();
        let _ = fs::remove_dir_all(&self.folder);
        process::forget_folder_at_exit(&self.folder);
    }
}

async fn start_processes(assets: &Assets, name: &str) -> Result<ControlPlane, Error> {
    files::remove_stale_data_folders(name);
    let mut last_error = None;
    for _ in 0..START_ATTEMPTS {
        match start_once(assets, name).await {
            Err(error) if error.is_port_clash() => last_error = Some(error),
            other => return other,
        }
    }
    Err(last_error.expect("at least one attempt ran"))
}

async fn start_once(assets: &Assets, name: &str) -> Result<ControlPlane, Error> {
    let folder = tempfile::Builder::new()
        .prefix(&files::data_folder_prefix(name))
        .tempdir()
        .map_err(|e| io_error("creating the control plane's data folder", e))?
        .keep();
    process::remove_folder_at_exit(folder.clone());
    // Until the ControlPlane exists (and owns the folder), a failure must clean up itself.
    let cleanup = FolderGuard(Some(folder.clone()));

    let certs = Certificates::generate(name).map_err(Error::Certificates)?;
    for (file, pem) in [
        ("serving-ca.crt", &certs.serving_ca),
        ("apiserver.crt", &certs.serving_cert),
        ("apiserver.key", &certs.serving_key),
        ("client-ca.crt", &certs.client_ca),
        ("sa.key", &certs.service_account_key),
        ("sa.pub", &certs.service_account_public_key),
    ] {
        write_private(&folder.join(file), pem)?;
    }
    let [etcd_port, peer_port, api_port] = free_ports()?;

    let mut etcd = spawn_logged(
        &folder,
        "etcd",
        etcd_command(assets, name, &folder, etcd_port, peer_port),
    )?;
    let healthy = eventually("etcd to report healthy", START_TIMEOUT, || {
        let exited = etcd.try_wait().ok().flatten().is_some();
        async move {
            if exited {
                return Some(false);
            }
            let status = http_get_status(etcd_port, "/health").await?;
            (status == 200).then_some(true)
        }
    })
    .await
    .map_err(|timeout| start_error(&folder, "etcd", timeout.to_string()))?;
    if !healthy {
        return Err(start_error(
            &folder,
            "etcd",
            "etcd exited during start-up".into(),
        ));
    }

    let api_server = spawn_logged(
        &folder,
        "kube-apiserver",
        api_server_command(assets, &folder, etcd_port, api_port),
    )?;
    let kubeconfig = kubeconfig::admin_kubeconfig(name, api_port, &certs);
    write_private(&folder.join("admin.kubeconfig"), &kubeconfig)?;
    let config = kubeconfig::client_config(&kubeconfig).await?;
    let mut plane = ControlPlane {
        api_server,
        etcd,
        folder,
        api_port,
        kubeconfig,
        config,
        started_in: Duration::ZERO,
    };
    cleanup.disarm();
    wait_for_api_server(&mut plane).await?;
    Ok(plane)
}

/// Waits for `/readyz` and for namespace `default` (created by a post-start hook that can trail
/// readiness), failing fast if the API server exits.
async fn wait_for_api_server(plane: &mut ControlPlane) -> Result<(), Error> {
    let client = plane.client();
    let api_server = &mut plane.api_server;
    let ready = eventually("kube-apiserver to be ready", START_TIMEOUT, || {
        let exited = api_server.try_wait().ok().flatten().is_some();
        let client = client.clone();
        async move {
            if exited {
                return Some(false);
            }
            let readyz = http::Request::get("/readyz").body(Vec::new()).ok()?;
            client.request_text(readyz).await.ok()?;
            let namespaces: Api<Namespace> = Api::all(client);
            namespaces.get_opt("default").await.ok()??;
            Some(true)
        }
    })
    .await
    .map_err(|timeout| start_error(&plane.folder, "kube-apiserver", timeout.to_string()))?;
    if ready {
        Ok(())
    } else {
        let message = "kube-apiserver exited during start-up".to_string();
        Err(start_error(&plane.folder, "kube-apiserver", message))
    }
}

fn etcd_command(assets: &Assets, name: &str, folder: &Path, port: u16, peer_port: u16) -> Command {
    let client_url = format!("http://127.0.0.1:{port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let mut command = Command::new(&assets.etcd);
    command
        .arg(format!("--name={name}"))
        .arg(format!("--data-dir={}", folder.join("etcd").display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster={name}={peer_url}"))
        // The data is thrown away at the end; fsync only costs time.
        .arg("--unsafe-no-fsync=true")
        .arg("--log-level=warn");
    command
}

fn api_server_command(assets: &Assets, folder: &Path, etcd_port: u16, port: u16) -> Command {
    let file = |name: &str| folder.join(name).display().to_string();
    let mut command = Command::new(&assets.kube_apiserver);
    command
        .arg(format!("--etcd-servers=http://127.0.0.1:{etcd_port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--cert-dir={}", file("apiserver-certs")))
        .arg(format!("--tls-cert-file={}", file("apiserver.crt")))
        .arg(format!("--tls-private-key-file={}", file("apiserver.key")))
        .arg(format!("--client-ca-file={}", file("client-ca.crt")))
        .arg("--authorization-mode=RBAC")
        .arg(format!(
            "--service-account-issuer=https://127.0.0.1:{port}/"
        ))
        .arg(format!("--service-account-key-file={}", file("sa.pub")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            file("sa.key")
        ))
        .arg("--service-cluster-ip-range=10.0.0.0/24")
        .arg("--allow-privileged=true")
        // No controller-manager makes ServiceAccounts, so Pods must not require one.
        .arg("--disable-admission-plugins=ServiceAccount")
        // Without an advertise address the server looks for a default route; with a loopback
        // one, the `kubernetes` Endpoints reconciler refuses it. No reconciler needs neither.
        .arg("--advertise-address=127.0.0.1")
        .arg("--endpoint-reconciler-type=none")
        .arg("--profiling=false");
    command
}

fn spawn_logged(folder: &Path, name: &str, mut command: Command) -> Result<ManagedChild, Error> {
    let log_path = folder.join(format!("{name}.log"));
    let log =
        fs::File::create(&log_path).map_err(|e| io_error(&format!("creating {name}.log"), e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| io_error(&format!("opening {name}.log"), e))?;
    command
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .env("NO_PROXY", "127.0.0.1,localhost");
    let program = command.get_program().to_owned();
    ManagedChild::spawn(name, command).map_err(|e| Error::Start {
        component: name.to_string(),
        message: format!("cannot run {}: {e}", Path::new(&program).display()),
        log_tail: String::new(),
    })
}

fn start_error(folder: &Path, component: &str, message: String) -> Error {
    Error::Start {
        component: component.to_string(),
        message,
        log_tail: log_tail(folder, component),
    }
}

/// Three distinct free loopback ports (held together while probing so they differ).
fn free_ports() -> Result<[u16; 3], Error> {
    let listeners = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| io_error("finding free loopback ports", e))?;
    let port = |i: usize| listeners[i].local_addr().map(|a| a.port());
    Ok([
        port(0).map_err(|e| io_error("reading a probe port", e))?,
        port(1).map_err(|e| io_error("reading a probe port", e))?,
        port(2).map_err(|e| io_error("reading a probe port", e))?,
    ])
}

/// The status code of a plain-HTTP GET on a loopback port, or None if it does not answer.
async fn http_get_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.ok()?;
    // "HTTP/1.x NNN"
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
