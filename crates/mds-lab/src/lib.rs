//! A local Kubernetes lab for mds: a real kube-apiserver and etcd on loopback, with our CRDs, and
//! a stand-in for GPUStack and its engines that mirrors an [`mds_sim::World`] into it.
//!
//! - [`ControlPlane::start`] runs etcd and kube-apiserver on free 127.0.0.1 ports with freshly
//!   generated certificates, waits until they are ready and installs the ModelDeploymentScaler,
//!   ModelDeployment and Kueue Workload CRDs. The binaries come from
//!   `tools/control-plane/build.sh` (built once from pinned Go modules into a cache) or from
//!   `KUBEBUILDER_ASSETS`. No server outlives the process that started it (see [`process`]).
//! - [`StandIn::start`] watches ModelDeployments and plays the GPUStack operator, Kueue and the
//!   engines: it creates Pods and Workloads, writes ModelDeployment status, and serves each
//!   Pod's `/metrics` page on its own 127.x.y.z address.
//! - [`Lab::start`] is both together; `mds lab up` runs it, and tests that need a control plane
//!   of their own use it too (the shared one of a test binary is `mds-testkit`'s).
//!
//! ```no_run
//! # async fn example() -> Result<(), mds_lab::Error> {
//! use mds_lab::{Lab, LabOptions, load_syntax};
//! let lab = Lab::start(LabOptions::default()).await?;
//! lab.standin.set_quota("h100", Some(2));
//! let load = mds_lab::parse_load_profile("constant:rps=5,prompt=512", &load_syntax::read_file)
//!     .expect("a valid profile");
//! lab.standin.set_load("default", "llm", None, load);
//! // Apply ModelDeployment default/llm with lab.plane.client(); its Pods, Workloads and status
//! // follow, and its engines serve pages on their Pods' addresses.
//! # Ok(()) }
//! ```

mod assets;
mod certs;
mod control_plane;
pub mod crds;
mod files;
mod kubeconfig;
mod lab;
pub mod load_syntax;
pub mod process;
pub mod standin;
pub mod vllm;
mod wait;

use std::time::Duration;

pub use assets::{ASSETS_VAR, Assets, BUILD_SCRIPT, kubectl_path, script_path};
pub use control_plane::{ControlPlane, PlaneOptions, START_TIMEOUT};
pub use files::remove_stale_data_folders;
pub use lab::{Lab, LabOptions};
pub use load_syntax::{LoadRule, parse_load_profile, parse_load_rule};
pub use mds_sim::{DeploymentKey, Load, LoadProfile, RoleSettings, World, WorldConfig};
pub use standin::engines::{EngineProcess, RealEngines};
pub use standin::{StandIn, StandInOptions};
pub use wait::eventually;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "Go is needed to build kube-apiserver and etcd from pinned Go modules ({BUILD_SCRIPT}), \
         and `go` is not on PATH. Install Go, or set KUBEBUILDER_ASSETS to a folder holding \
         kube-apiserver and etcd"
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
    #[error("the stand-in's world: {0}")]
    World(#[from] mds_sim::WorldError),
}

impl Error {
    /// Whether a server failed because another process took its port after we probed it.
    fn is_port_clash(&self) -> bool {
        matches!(self, Error::Start { log_tail, .. } if log_tail.contains("address already in use"))
    }
}
