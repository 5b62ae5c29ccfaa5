//! The integration tests of `mds-core` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;

mod conformance;
mod history;
mod holds;
mod latency_guard;
mod properties;
mod regressions;
mod resume;
mod sampling;
mod scenarios;
mod wake_at;
