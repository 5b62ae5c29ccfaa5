//! The virtual-time runner (ARCHITECTURE: the simulator is a second shell): the `mds-sim`
//! world, the operator's own worker or a peer scaling it through one driver (module
//! `driver`), the bounds and the comparisons built on runs, and their reports.

pub mod capacity;
pub mod compare;
pub mod decided;
mod driver;
pub mod faults;
pub mod fragment;
pub mod frontier;
pub mod guards;
pub mod html;
pub mod invariants;
pub mod jobs;
pub mod knee;
pub mod metrics;
mod mirror;
pub mod mix;
pub mod oracle;
mod peer_drive;
pub mod peers;
pub use mds_sim::profile;
pub mod replay;
pub mod report;
pub mod roster;
pub mod run;
mod scaling;
pub mod slo;
mod source;
pub mod suggest;
pub mod targets;
pub mod text;
pub mod tune;

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_sim::{LoadProfile, RequestServing, RoleSettings, WorldConfig, WorldError};
use mds_worker::WriteError;
use serde::Serialize;

pub use driver::{ScaledBy, Simulation};
use report::Slo;

/// Why a simulation cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the world refused it: {0}")]
    World(#[from] WorldError),
    #[error("the cluster refused {what}: {error}")]
    Cluster { what: String, error: WriteError },
    #[error("{0}")]
    Input(String),
}

/// One scaler pass as the run records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassRecord {
    /// Seconds since the start.
    pub t: f64,
    /// The target's counts after the pass.
    pub replicas: BTreeMap<String, i32>,
    /// Ready replicas per role as the world reports them before the pass.
    pub ready: BTreeMap<String, i32>,
    /// The target write the pass made (`commit`, `bind`, ...) and whether it landed.
    pub write: Option<(String, bool)>,
    /// Each planned role's raw recommendation and reason.
    pub plan: BTreeMap<String, (i32, String)>,
    /// What decided a role's count when the algorithm did not (module `decided`): `floor`,
    /// `ceiling`, `latency-guard-added`, `latency-guard-held`, `not-admitted`, `no-router`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub decided: BTreeMap<String, decided::Decider>,
    /// Predictive's forecast per role, where it made one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub forecasts: BTreeMap<String, Forecast>,
}

/// A forecast a pass made and the demand it was made from, tokens/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Forecast {
    pub demand: f64,
    pub value: f64,
    pub horizon_seconds: f64,
}

/// What a run is made of: the world's settings, one target and the scaler that owns it, each
/// role's engine and load.
pub struct Scenario {
    pub config: WorldConfig,
    pub start: Timestamp,
    pub target: ModelDeployment,
    pub scaler: ModelDeploymentScaler,
    pub roles: BTreeMap<String, (RoleSettings, LoadProfile)>,
    /// GPU quota per instance type (`None`: unlimited).
    pub quota: BTreeMap<String, Option<u32>>,
    /// Requests offered to the target, served request by request (`None`: each role's fluid
    /// load in `roles` serves).
    pub requests: Option<(Arc<Trace>, RequestServing)>,
    /// What a request is measured against.
    pub slo: Slo,
    /// How the load's cache-missed prompt lengths spread and its arrivals cluster, which a
    /// fluid run's grading assumes inside each step (`slo::PromptSpread::of`).
    pub prompts: crate::slo::PromptSpread,
}
