//! The tools that check deploy/ (dev-only): the pinned helm, and cert-manager's CRDs, built
//! from their Go modules by `tools/deploy-tools/build.sh` into a cache (minutes, once).

use std::path::PathBuf;

use crate::Error;

/// The script that builds the tools checking deploy/.
pub const DEPLOY_TOOLS_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/deploy-tools/build.sh"
);

fn tool(what: &str, key: &str) -> Result<PathBuf, Error> {
    mds_lab::script_path(DEPLOY_TOOLS_SCRIPT, what, key, || {
        mds_lab::Error::Assets(format!(
            "Go is needed to build the pinned helm and read cert-manager's CRDs \
             ({DEPLOY_TOOLS_SCRIPT}), and `go` is not on PATH. Install Go, or set \
             MDS_SKIP_E2E=1 to skip these tests"
        ))
    })
    .map_err(Error::from)
}

/// The pinned `helm`.
pub fn helm_path() -> Result<PathBuf, Error> {
    tool("helm", "helm")
}

/// The folder holding cert-manager's own `certificates.yaml` and `issuers.yaml` CRDs.
pub fn cert_manager_crds() -> Result<PathBuf, Error> {
    tool("cert-manager-crds", "cert_manager_crds")
}
