//! The kube-rs shell around the sans-IO worker (ARCHITECTURE): the production adapters of the
//! worker's `Cluster` and `MetricsSource` ports (kube-rs watch caches and writes, reqwest
//! scrapes), the controller runtime that schedules passes on tokio, leader election, the
//! operator's own metrics and probes, and [`Operator::start`], which runs them all. The
//! worker, its ports, the sampler and the schedule live in `mds-worker` and are re-exported
//! here under their old paths. No decision logic lives here.

pub mod api_client;
pub mod cache;
pub mod http_source;
pub mod kube_cluster;
pub mod leader;
pub mod operator;
pub mod runtime;
pub mod telemetry;
pub mod tokio_clock;
pub mod undecodable;

pub use mds_worker::{facts, failures, ports, sampler, worker};

/// The worker crate's schedule, with the shell's tokio clock beside it.
pub mod schedule {
    pub use crate::tokio_clock::TokioClock;
    pub use mds_worker::schedule::*;
}

pub use operator::{Leadership, Operator, OperatorConfig, StartError};
pub use ports::{Cluster, MetricsSource, ScalerKey, ScrapeError, Snapshot, WriteError};
pub use worker::{FINALIZER, PassReport, Worker};
