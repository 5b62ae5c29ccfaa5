pub mod crd;
pub mod validate;
