//! The kube-rs shell around the pure core (ARCHITECTURE): a worker per scaler that reaches the
//! cluster only through the `Cluster` and `MetricsSource` ports, their production adapters
//! (kube-rs watch caches and writes, reqwest scrapes), the controller runtime that schedules
//! passes, leader election, and the operator's own metrics and probes. No decision logic lives
//! here.

pub mod api_client;
pub mod cache;
pub mod facts;
pub mod failures;
pub mod http_source;
pub mod kube_cluster;
pub mod leader;
pub mod lookups;
pub mod ports;
pub mod runtime;
pub mod sampler;
pub mod schedule;
pub mod telemetry;
pub mod worker;

pub use ports::{Cluster, MetricsSource, ScalerKey, ScrapeError, Snapshot, WriteError};
pub use worker::{FINALIZER, PassReport, Worker};
