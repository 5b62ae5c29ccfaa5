//! The test control plane: `mds-lab`'s, named `mds-testkit`, with a namespace per test.

use std::io::Write as _;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use crate::Error;

/// The context, cluster and user name of the kubeconfig, and the prefix of the data folder
/// (`/tmp/mds-testkit-<pid>-…`).
pub const CONTEXT: &str = "mds-testkit";

/// A running etcd and kube-apiserver with our CRDs (every method of [`mds_lab::ControlPlane`]
/// is available on it). Dropping it stops both and removes its data folder.
pub struct ControlPlane {
    inner: mds_lab::ControlPlane,
    namespaces_made: AtomicU32,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Deref for ControlPlane {
    type Target = mds_lab::ControlPlane;

    fn deref(&self) -> &mds_lab::ControlPlane {
        &self.inner
    }
}

impl ControlPlane {
    /// Starts a control plane of its own and installs the ModelDeploymentScaler, ModelDeployment
    /// and Kueue Workload CRDs. Builds the binaries first if the cache is cold (minutes, once).
    pub async fn start() -> Result<ControlPlane, Error> {
        let begun = Instant::now();
        let inner = mds_lab::ControlPlane::start(&mds_lab::PlaneOptions::named(CONTEXT)).await?;
        // Straight to stderr (not captured by libtest): start times belong in every test log.
        let _ = writeln!(
            std::io::stderr(),
            "mds-testkit: control plane up at {} in {:.1} s ({:.1} s with the binary lookup)",
            inner.api_url(),
            inner.started_in().as_secs_f64(),
            begun.elapsed().as_secs_f64()
        );
        Ok(ControlPlane {
            inner,
            namespaces_made: AtomicU32::new(0),
        })
    }

    /// Creates a namespace of its own for one test, named after `hint` plus a counter.
    pub async fn namespace(&self, hint: &str) -> Result<String, Error> {
        let n = self.namespaces_made.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", dns_label_prefix(hint));
        self.inner.create_namespace(&name).await?;
        Ok(name)
    }

    /// Stops both servers and removes the data folder (the same as dropping it).
    pub fn stop(self) {}
}

/// Removes the data folders of test processes that were killed before their exit hook ran (every
/// start does this first).
pub fn remove_stale_data_folders() {
    mds_lab::remove_stale_data_folders(CONTEXT);
}

/// A lower-case DNS label prefix made of `hint` (at most 40 characters, never empty).
fn dns_label_prefix(hint: &str) -> String {
    let mut label: String = hint
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    label = label.trim_matches('-').to_string();
    if label.is_empty() {
        "test".to_string()
    } else {
        label
    }
}
