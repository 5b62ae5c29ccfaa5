//! A real Kubernetes control plane for end-to-end tests (dev-only; never a dependency of `mds`).
//!
//! [`ControlPlane::start`] runs etcd and kube-apiserver on free 127.0.0.1 ports with freshly
//! generated certificates, waits until they are ready and installs the ModelDeploymentScaler,
//! ModelDeployment and Kueue Workload CRDs. The binaries come from `tools/control-plane/build.sh`
//! (built once from pinned Go modules into a cache) or from `KUBEBUILDER_ASSETS`.
//!
//! A test binary shares one control plane ([`e2e`] / [`shared`]); each test takes a namespace of
//! its own. No server outlives the test process, however it ends (see `process`).
//!
//! ```no_run
//! #[tokio::test]
//! async fn scaler_round_trip() {
//!     let Some(plane) = mds_testkit::e2e() else { return };
//!     let namespace = plane.namespace("round-trip").await.unwrap();
//!     let client = plane.client();
//!     // ...
//! }
//! ```

mod assets;
mod certs;
mod control_plane;
pub mod crds;
mod kubeconfig;
pub mod process;

use std::future::Future;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use assets::{
    ASSETS_VAR, Assets, BUILD_SCRIPT, DEPLOY_TOOLS_SCRIPT, SKIP_E2E_VAR, cert_manager_crds,
    helm_path, kubectl_path, skip_requested,
};
pub use control_plane::{ControlPlane, START_TIMEOUT, remove_stale_data_folders};
pub use kubeconfig::CONTEXT;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "Go is needed for the end-to-end tests: they build kube-apiserver and etcd from pinned Go \
         modules ({BUILD_SCRIPT}), and `go` is not on PATH. Install Go, or set \
         KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd, or set MDS_SKIP_E2E=1 \
         to skip these tests"
    )]
    GoMissing,
    #[error("{0}")]
    Assets(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Certificates(rcgen::Error),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error(
        "{component} did not start: {message}\n--- last lines of {component}.log ---\n{log_tail}"
    )]
    Start {
        component: String,
        message: String,
        log_tail: String,
    },
    #[error("the API server refused CRD {name}: {message}")]
    Crd { name: String, message: String },
    #[error("{context}: {source}")]
    Kube {
        context: String,
        source: kube::Error,
    },
    #[error("timed out after {} s waiting for {what}", timeout.as_secs())]
    Timeout { what: String, timeout: Duration },
    #[error("the shared control plane failed to start: {0}")]
    Shared(String),
}

impl Error {
    /// Whether a server failed because another process took its port after we probed it.
    fn is_port_clash(&self) -> bool {
        matches!(self, Error::Start { log_tail, .. } if log_tail.contains("address already in use"))
    }
}

/// The control plane of this test process, started on first use and stopped at exit.
///
/// It starts on a thread and runtime of its own, so it does not depend on the runtime of the test
/// that happened to ask first. A failed start is reported to every caller without retrying.
pub fn shared() -> Result<&'static ControlPlane, Error> {
    static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let started = SHARED.get_or_init(|| {
        std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
            runtime
                .block_on(ControlPlane::start())
                .map_err(|e| e.to_string())
        })
        .join()
        .unwrap_or_else(|_| Err("starting the control plane panicked".to_string()))
    });
    started.as_ref().map_err(|e| Error::Shared(e.clone()))
}

/// The start of every end-to-end test: the shared control plane, or `None` (after a loud notice)
/// when `MDS_SKIP_E2E=1`. Without Go or a usable control plane it panics with the reason, so a
/// machine that cannot run the tests fails them instead of passing them silently.
pub fn e2e() -> Option<&'static ControlPlane> {
    if skip_e2e() {
        return None;
    }
    match shared() {
        Ok(plane) => Some(plane),
        Err(error) => panic!("{error}"),
    }
}

/// Whether this end-to-end test is to be skipped (`MDS_SKIP_E2E=1`); says so loudly if it is.
/// For tests that start a control plane of their own instead of the shared one.
pub fn skip_e2e() -> bool {
    if !skip_requested() {
        return false;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("an end-to-end test")
        .to_string();
    // Straight to the process's stderr: `eprintln!` would be captured, and hidden, by libtest.
    let _ = writeln!(
        std::io::stderr(),
        "*** SKIPPED {test}: {SKIP_E2E_VAR}=1 skips the end-to-end tests against a real \
         kube-apiserver. CI never sets it. ***"
    );
    true
}

/// Polls `check` until it yields `Some`, for at most `timeout`: the way end-to-end tests wait for
/// a condition (never a fixed sleep). Polls often at first, then every second at most.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(25);
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
            });
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
