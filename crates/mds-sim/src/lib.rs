//! A world model of a GPUStack target and its engines, for the simulator, the end-to-end
//! stand-in and `mds lab`. Pure: no I/O, no clock, no randomness; time enters as arguments.
//!
//! - [`World`]: the stand-in operator (ordinals, status, retirements with their budgets and
//!   aborts), Kueue admission under GPU quota, and one engine per ready instance; stepped by
//!   [`World::step`] / [`World::advance_to`]; read through views a mirror can turn into
//!   Kubernetes objects ([`World::deployment`], [`World::pods`], [`World::workloads`],
//!   [`World::metrics_page`]).
//! - [`engine`]: the fluid engine model; [`exposition`]: its vLLM and SGLang `/metrics` pages.
//! - [`load`]: offered load over time (constant, steps, ramps, traces).
//!
//! docs/SIMULATION.md describes the model and its formulas.

pub mod engine;
pub mod exposition;
pub mod load;
mod world;

pub use engine::{EngineFlavor, EngineProfile, EngineState, WorkKind};
pub use load::{Arrivals, Load, LoadProfile, Trace};
pub use world::{
    DeploymentKey, InstanceState, InstanceView, MODEL_DEPLOYMENT_API_VERSION,
    POD_GROUP_TOTAL_COUNT, PodPhase, PodView, QuotaUsage, RetirementBudgets, RetirementStep,
    RoleSettings, World, WorldConfig, WorldError, WorldEvent, loopback_ip,
};
