//! The `ModelDeploymentScaler` API: resource types, the target read model, annotation payloads,
//! exact quantities, defaulting and admission validation. Pure: no I/O, no clock.

pub mod annotations;
pub mod decode;
pub mod defaults;
pub mod fence;
pub mod quantity;
pub mod ratio_feasibility;
pub mod resources;
pub mod spec;
pub mod status;
pub mod suggest;
pub mod target;
pub mod validation;

pub use spec::{ModelDeploymentScaler, ModelDeploymentScalerSpec};
pub use status::ModelDeploymentScalerStatus;
