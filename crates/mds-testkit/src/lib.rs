//! The end-to-end test harness (dev-only; never a dependency of `mds`), on top of `mds-lab`.
//!
//! `mds-lab` starts a real etcd and kube-apiserver with our CRDs and runs the GPUStack stand-in;
//! this crate adds what only tests need: one control plane shared by a whole test binary
//! ([`e2e`] / [`shared`]), a namespace of its own per test ([`ControlPlane::namespace`]), the
//! policy for machines that cannot run the tests (fail with the reason, or skip loudly with
//! `MDS_SKIP_E2E=1`), and [`eventually`]. No server outlives the test process, however it ends
//! (see [`process`]).
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

mod control_plane;
mod deploy_tools;

use std::future::Future;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

pub use control_plane::{CONTEXT, ControlPlane, remove_stale_data_folders};
pub use mds_lab::{
    ASSETS_VAR, Assets, BUILD_SCRIPT, START_TIMEOUT, crds, kubectl_path, process, standin,
};

/// Set to 1 to skip the end-to-end tests (with a notice) instead of building the control plane.
pub const SKIP_E2E_VAR: &str = "MDS_SKIP_E2E";
pub use deploy_tools::{DEPLOY_TOOLS_SCRIPT, cert_manager_crds, helm_path};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "Go is needed for the end-to-end tests: they build kube-apiserver and etcd from pinned Go \
         modules ({BUILD_SCRIPT}), and `go` is not on PATH. Install Go, or set \
         KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd, or set MDS_SKIP_E2E=1 \
         to skip these tests"
    )]
    GoMissing,
    #[error(transparent)]
    Lab(mds_lab::Error),
    #[error("the shared control plane failed to start: {0}")]
    Shared(String),
}

impl From<mds_lab::Error> for Error {
    fn from(error: mds_lab::Error) -> Error {
        match error {
            mds_lab::Error::GoMissing => Error::GoMissing,
            other => Error::Lab(other),
        }
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

/// Whether `MDS_SKIP_E2E=1` asks to skip end-to-end tests.
pub fn skip_requested() -> bool {
    std::env::var(SKIP_E2E_VAR).is_ok_and(|v| v == "1")
}

/// Whether this end-to-end test is to be skipped (`MDS_SKIP_E2E=1`); says so loudly if it is.
/// For tests that start a control plane (or a lab) of their own instead of the shared one.
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
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    Ok(mds_lab::eventually(what, timeout, check).await?)
}
