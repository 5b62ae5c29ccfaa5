//! The integration tests of `mds-sim` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;

mod bundled_traces;
mod calibration;
mod lifecycle;
mod load_shapes;
mod measured_profiles;
mod objects;
mod page_source;
mod properties;
mod request_engine;
mod request_serving;
mod retirement;
mod round_trip;
