//! A control plane and a stand-in together: what `mds lab up` runs.

use crate::standin::{StandIn, StandInOptions};
use crate::{ControlPlane, Error, PlaneOptions};

/// How a lab starts.
#[derive(Clone, Debug)]
pub struct LabOptions {
    pub plane: PlaneOptions,
    pub standin: StandInOptions,
    /// Namespaces to create besides `default`. `mds-system` is where `mds controller` keeps
    /// its leader Lease by default.
    pub namespaces: Vec<String>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            plane: PlaneOptions::named("mds-lab"),
            standin: StandInOptions::default(),
            namespaces: vec!["mds-system".to_string()],
        }
    }
}

/// A running lab. Dropping it stops the stand-in, then kube-apiserver and etcd, and removes the
/// data folder.
pub struct Lab {
    // Field order is drop order: the stand-in stops before its API server.
    pub standin: StandIn,
    pub plane: ControlPlane,
}

impl Lab {
    /// Starts the control plane (building it first if the cache is cold), creates the
    /// namespaces and starts the stand-in on the current Tokio runtime.
    pub async fn start(options: LabOptions) -> Result<Lab, Error> {
        let plane = ControlPlane::start(&options.plane).await?;
        for namespace in &options.namespaces {
            plane.create_namespace(namespace).await?;
        }
        let standin = StandIn::start(plane.client(), options.standin).await?;
        Ok(Lab { standin, plane })
    }

    /// Stops everything (the same as dropping it).
    pub fn stop(self) {}
}
