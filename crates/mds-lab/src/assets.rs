//! Where the control-plane binaries and the Kueue CRD come from.
//!
//! By default `tools/control-plane/build.sh` provides them: it builds kube-apiserver, kubectl
//! and etcd from the pinned Go modules into a cache keyed by version (minutes, once) and then
//! answers from the cache. `KUBEBUILDER_ASSETS`, the envtest convention, names a folder with
//! `kube-apiserver` and `etcd` (and optionally `kubectl`) to use instead.
//!
//! An `mds` binary run away from its source checkout has no build script; it then reads the
//! cache directly, at the versions it was built with.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The build script, found from this crate's source folder.
pub const BUILD_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tools/control-plane/build.sh"
);

/// The pinned versions build.sh keys its cache on.
const VERSIONS_ENV: &str = include_str!("../../../tools/control-plane/versions.env");

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
                let built = provide("kueue-crd")?;
                Ok(Assets {
                    kube_apiserver,
                    etcd,
                    kueue_workload_crd: built.path("kueue_workload_crd")?,
                })
            }
            None => {
                let built = provide("all")?;
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
    Ok(provide("binaries")?.path("bin_dir")?.join("kubectl"))
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

/// `all`, `binaries` or `kueue-crd`, from the build script when it is there, else from the
/// cache as the script would have left it.
fn provide(what: &str) -> Result<BuildOutput, Error> {
    if Path::new(BUILD_SCRIPT).is_file() {
        run_build_script(what)
    } else {
        read_cache(what)
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

/// Runs one of our cached build scripts (`bash SCRIPT WHAT`) and reads the path it prints
/// as `KEY=path`; `no_go` is the error when the script says Go is missing. For the dev-only
/// tool scripts the test kit runs (helm, cert-manager's CRDs).
pub fn script_path(
    script: &'static str,
    what: &str,
    key: &str,
    no_go: impl FnOnce() -> Error,
) -> Result<PathBuf, Error> {
    let [path] = script_paths(script, what, [key], no_go)?;
    Ok(path)
}

/// Like [`script_path`], for several keys the script prints in one run.
pub fn script_paths<const N: usize>(
    script: &'static str,
    what: &str,
    keys: [&str; N],
    no_go: impl FnOnce() -> Error,
) -> Result<[PathBuf; N], Error> {
    let output = match run_script(script, what) {
        Ok(output) => output,
        Err(ScriptError::NoGo) => return Err(no_go()),
        Err(ScriptError::Other(e)) => return Err(e),
    };
    let mut paths = Vec::with_capacity(N);
    for key in keys {
        paths.push(output.path(key)?);
    }
    Ok(paths.try_into().expect("one path per key"))
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

/// The cache folders build.sh makes (see its header), read without it.
fn read_cache(what: &str) -> Result<BuildOutput, Error> {
    let cache = cache_folder()?;
    let version = |key: &str| pinned_version(key).unwrap_or_default();
    let bin_dir = cache.join(format!(
        "{}-{}",
        version("K8S_VERSION"),
        version("ETCD_VERSION")
    ));
    let kueue_dir = cache.join(format!("kueue-{}", version("KUEUE_VERSION")));
    let mut lines = String::new();
    let mut missing = Vec::new();
    if what != "kueue-crd" {
        match bin_dir.join(".complete").exists() {
            true => lines.push_str(&format!("bin_dir={}\n", bin_dir.display())),
            false => missing.push(bin_dir),
        }
    }
    if what != "binaries" {
        match kueue_dir.join(".complete").exists() {
            true => lines.push_str(&format!(
                "kueue_workload_crd={}\n",
                kueue_dir.join("workloads.yaml").display()
            )),
            false => missing.push(kueue_dir),
        }
    }
    if missing.is_empty() {
        return Ok(BuildOutput {
            script: BUILD_SCRIPT,
            stdout: lines,
        });
    }
    let missing: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
    Err(Error::Assets(format!(
        "the control plane is not built: {} missing, and this mds was built away from its \
         source checkout ({BUILD_SCRIPT} is not there). Run tools/control-plane/build.sh in an \
         mds checkout of this version, or set {ASSETS_VAR} to a folder holding kube-apiserver, \
         etcd and kubectl",
        missing.join(" and ")
    )))
}

/// `$MDS_CONTROL_PLANE_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/mds/control-plane`.
fn cache_folder() -> Result<PathBuf, Error> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(cache) = set("MDS_CONTROL_PLANE_CACHE") {
        return Ok(PathBuf::from(cache));
    }
    let base = match (set("XDG_CACHE_HOME"), set("HOME")) {
        (Some(xdg), _) => PathBuf::from(xdg),
        (None, Some(home)) => PathBuf::from(home).join(".cache"),
        (None, None) => {
            return Err(Error::Assets(
                "neither XDG_CACHE_HOME nor HOME is set, so the control-plane cache cannot be \
                 found; set MDS_CONTROL_PLANE_CACHE"
                    .into(),
            ));
        }
    };
    Ok(base.join("mds").join("control-plane"))
}

/// A `KEY=value` line of versions.env.
fn pinned_version(key: &str) -> Option<&'static str> {
    VERSIONS_ENV
        .lines()
        .find_map(|line| line.trim().strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pinned_version_is_read() {
        for key in ["K8S_VERSION", "ETCD_VERSION", "KUEUE_VERSION"] {
            let version = pinned_version(key).unwrap_or_else(|| panic!("{key} is pinned"));
            assert!(version.split('.').count() == 3, "{key}={version}");
        }
    }
}
