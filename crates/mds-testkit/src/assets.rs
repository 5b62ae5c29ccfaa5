//! Where the control-plane binaries and the Kueue CRD come from.
//!
//! By default `tools/control-plane/build.sh` provides them: it builds kube-apiserver, kubectl
//! and etcd from the pinned Go modules into a cache keyed by version (minutes, once) and then
//! answers from the cache. `KUBEBUILDER_ASSETS`, the envtest convention, names a folder with
//! `kube-apiserver` and `etcd` (and optionally `kubectl`) to use instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The build script, found from this crate's source folder (the testkit is never installed).
pub const BUILD_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/control-plane/build.sh"
);

/// Set to 1 to skip the end-to-end tests (with a notice) instead of building the control plane.
pub const SKIP_E2E_VAR: &str = "MDS_SKIP_E2E";
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The exit status build.sh uses for "Go is needed and missing".
const NO_GO_STATUS: i32 = 3;

/// Paths of what one control plane runs and installs.
#[derive(Clone, Debug)]
pub struct Assets {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    pub kueue_workload_crd: PathBuf,
}

impl Assets {
    /// Finds the binaries (building them if needed) and the Kueue Workload CRD.
    pub fn locate() -> Result<Assets, Error> {
        match assets_folder() {
            Some(folder) => {
                let kube_apiserver = existing(&folder, "kube-apiserver")?;
                let etcd = existing(&folder, "etcd")?;
                let built = run_build_script("kueue-crd")?;
                Ok(Assets {
                    kube_apiserver,
                    etcd,
                    kueue_workload_crd: built.path("kueue_workload_crd")?,
                })
            }
            None => {
                let built = run_build_script("all")?;
                let bin_dir = built.path("bin_dir")?;
                Ok(Assets {
                    kube_apiserver: bin_dir.join("kube-apiserver"),
                    etcd: bin_dir.join("etcd"),
                    kueue_workload_crd: built.path("kueue_workload_crd")?,
                })
            }
        }
    }
}

/// The kubectl of the pinned Kubernetes version (`KUBEBUILDER_ASSETS/kubectl` when that exists).
pub fn kubectl_path() -> Result<PathBuf, Error> {
    if let Some(folder) = assets_folder() {
        let candidate = folder.join("kubectl");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Ok(run_build_script("binaries")?
        .path("bin_dir")?
        .join("kubectl"))
}

/// Whether `MDS_SKIP_E2E=1` asks to skip end-to-end tests.
pub fn skip_requested() -> bool {
    std::env::var(SKIP_E2E_VAR).is_ok_and(|v| v == "1")
}

fn assets_folder() -> Option<PathBuf> {
    std::env::var_os(ASSETS_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn existing(folder: &Path, name: &str) -> Result<PathBuf, Error> {
    let path = folder.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Assets(format!(
            "{ASSETS_VAR}={} has no {name}; it must name a folder holding kube-apiserver and etcd \
             (unset it to build them from the pinned Go modules)",
            folder.display()
        )))
    }
}

/// The `name=path` lines a build script prints.
struct BuildOutput {
    script: &'static str,
    stdout: String,
}

impl BuildOutput {
    fn path(&self, key: &str) -> Result<PathBuf, Error> {
        self.stdout
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(PathBuf::from)
            .ok_or_else(|| {
                Error::Assets(format!(
                    "{} printed no {key}= line; it printed:\n{}",
                    self.script, self.stdout
                ))
            })
    }
}

fn run_build_script(what: &str) -> Result<BuildOutput, Error> {
    run_script(BUILD_SCRIPT, what).map_err(|e| match e {
        ScriptError::NoGo => Error::GoMissing,
        ScriptError::Other(e) => e,
    })
}

enum ScriptError {
    /// The script's exit status for "Go is needed and missing".
    NoGo,
    Other(Error),
}

fn run_script(script: &'static str, what: &str) -> Result<BuildOutput, ScriptError> {
    // stderr is inherited so that a cold build's progress shows even under cargo test's capture.
    let output = Command::new("bash")
        .arg(script)
        .arg(what)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| ScriptError::Other(Error::Assets(format!("cannot run bash {script}: {e}"))))?;
    match output.status.code() {
        Some(0) => Ok(BuildOutput {
            script,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        }),
        Some(NO_GO_STATUS) => Err(ScriptError::NoGo),
        _ => Err(ScriptError::Other(Error::Assets(format!(
            "{script} {what} failed ({}); its messages are above",
            output.status
        )))),
    }
}

/// The script that builds the tools checking deploy/: helm, and cert-manager's CRDs.
pub const DEPLOY_TOOLS_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/deploy-tools/build.sh"
);

fn run_deploy_tools_script(what: &str) -> Result<BuildOutput, Error> {
    run_script(DEPLOY_TOOLS_SCRIPT, what).map_err(|e| match e {
        ScriptError::NoGo => Error::Assets(format!(
            "Go is needed to build the pinned helm and read cert-manager's CRDs \
             ({DEPLOY_TOOLS_SCRIPT}), and `go` is not on PATH. Install Go, or set \
             MDS_SKIP_E2E=1 to skip these tests"
        )),
        ScriptError::Other(e) => e,
    })
}

/// The pinned `helm`, built from its Go module on first use (minutes, once).
pub fn helm_path() -> Result<PathBuf, Error> {
    run_deploy_tools_script("helm")?.path("helm")
}

/// The folder holding cert-manager's own `certificates.yaml` and `issuers.yaml` CRDs, taken
/// from its pinned Go module.
pub fn cert_manager_crds() -> Result<PathBuf, Error> {
    run_deploy_tools_script("cert-manager-crds")?.path("cert_manager_crds")
}
