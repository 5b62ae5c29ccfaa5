//! The integration tests of `mds-webhook` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;

mod certs_and_config;
mod defaults_props;
mod fence_hook;
mod garbage;
mod scaler_hooks;
mod tls;
