//! The worker, sans IO (ARCHITECTURE): one scaler's passes, reaching the cluster only through
//! the `Cluster` and `MetricsSource` ports, the sampler that reads engine pages through the
//! latter, the facts read from Pods and targets, the memory of failed writes, and the pass
//! schedule. No kube client, no HTTP client, no async runtime: futures only. Time enters as
//! an argument (a pass's `now`), through the `MetricsSource`'s clock (when a page arrived),
//! or through the schedule's `Clock`. The kube-rs shell (`mds-operator`), the simulator and
//! the lab drive it; nothing here points back at them.

pub mod carry_out;
pub mod facts;
pub mod failures;
pub mod memory_cluster;
pub mod ports;
pub mod sampler;
pub mod schedule;
pub mod worker;

pub use ports::{Cluster, MetricsSource, ScalerKey, ScrapeError, Snapshot, WriteError};
pub use schedule::Clock;
pub use worker::{FINALIZER, PassReport, Worker};
