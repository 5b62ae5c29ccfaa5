pub mod crd;
pub mod inspect_metrics;
pub mod replay;
pub mod validate;
