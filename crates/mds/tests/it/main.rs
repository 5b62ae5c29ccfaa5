//! The integration tests of `mds` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;
mod deploy_support;

mod cli;
mod controller_stop;
mod deploy_manifests;
mod deploy_rbac;
mod docs;
mod fence_e2e;
mod from_prometheus;
mod gitops;
mod inspect;
mod lab;
mod monitoring;
mod prometheus_e2e;
mod real_engines;
mod replay;
mod report_browser;
mod simulate;
mod simulate_faults;
mod simulate_own_setup;
mod simulate_peer_files;
mod webhook;
