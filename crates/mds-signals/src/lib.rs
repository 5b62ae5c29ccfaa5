//! Engine signals: the Prometheus exposition parser, the vLLM and SGLang adapters, per-pod
//! samples and the per-role observation the planner consumes. Pure: no I/O, no clock.

pub mod engine;
pub mod exposition;
pub mod observation;
pub mod rank;
pub mod samples;
pub mod scrape;

pub use engine::{EngineKind, EngineSample};
pub use observation::{RoleInputs, RoleObservation, observe_role};
pub use samples::{PodReading, SampleStore};
