//! The integration tests of `mds-operator` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;

mod api_deadline;
mod e2e_controller;
mod e2e_scenarios;
mod e2e_undecodable;
mod http_source;
mod start;
mod worker;
