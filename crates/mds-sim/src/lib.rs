//! A world model of a GPUStack target and its engines, for the simulator, the end-to-end
//! stand-in and `mds lab`. Pure: no I/O, no clock; time enters as arguments and every draw
//! comes from a generator seeded by the caller ([`rng`]), so a seed repeats a run exactly.
//!
//! - [`World`]: the stand-in operator (ordinals, status, retirements with their budgets and
//!   aborts), Kueue admission under GPU quota, and one engine per ready instance; stepped by
//!   [`World::step`] / [`World::advance_to`]; read through views a mirror can turn into
//!   Kubernetes objects ([`World::deployment`], [`World::pods`], [`World::workloads`],
//!   [`World::metrics_page`]).
//! - [`engine`]: the fluid engine model, and beside it the request-level one
//!   ([`RequestEngine`], which the world runs per instance when a deployment is offered
//!   requests: [`World::set_requests`]); [`exposition`]: the vLLM and SGLang
//!   `/metrics` pages.
//! - [`load`]: offered load over time (constant, steps, ramps, traces), trace transforms and
//!   synthetic request streams ([`Synthetic`]).
//!
//! docs/SIMULATION.md describes the model and its formulas.
//!
//! ```
//! use jiff::{SignedDuration, Timestamp};
//! use mds_sim::{Load, LoadProfile, World, WorldConfig};
//!
//! let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! let mut world = World::new(WorldConfig::default(), start).unwrap();
//! world.set_quota("h100", Some(2));
//! let md = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "chat", "namespace": "serving"},
//!     "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"},
//!              "roles": [{"name": "server", "replicas": 3, "instanceType": "h100"}]}
//! }))
//! .unwrap();
//! let key = world.apply_deployment(md).unwrap();
//! let load = Load::new(4.0, 1000.0, 200.0, 0.5).unwrap();
//! world.set_load(&key, "server", LoadProfile::constant(load).unwrap()).unwrap();
//! world.advance_to(start + SignedDuration::from_secs(90)).unwrap();
//!
//! let status = world.deployment(&key).unwrap().status.as_ref().unwrap();
//! assert_eq!(status.roles[0].ready, Some(2), "the third instance waits for quota");
//! let pod = world.pods(&key).into_iter().find(|p| p.serves_metrics).unwrap();
//! let page = world.metrics_page("serving", pod.metadata.name.as_deref().unwrap()).unwrap();
//! assert!(page.contains("vllm:prompt_tokens_total"));
//! ```

pub mod calibration;
pub mod engine;
pub mod exposition;
pub mod hardware;
pub mod load;
pub mod objects;
pub mod profile;
pub mod rng;
mod world;

pub use engine::request::{RequestEngine, RequestProfile};
pub use engine::{EngineFlavor, EngineProfile, EngineState, WorkKind};
pub use load::{Arrivals, Load, LoadProfile, Shape, Synthetic, Trace};
pub use world::{
    DeploymentKey, InstanceState, InstanceView, MODEL_DEPLOYMENT_API_VERSION,
    POD_GROUP_TOTAL_COUNT, PageSource, PodPhase, PodView, QuotaUsage, RequestServing,
    RetirementBudgets, RetirementStep, RoleSettings, Router, ServedOutcome, ServedRequest, World,
    WorldConfig, WorldError, WorldEvent, loopback_ip,
};
