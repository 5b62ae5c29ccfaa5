//! The integration tests of `mds-api` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;
mod fence_common;

mod admission;
mod crd_cel;
mod defaults;
mod fence;
mod fence_props;
mod rebalance_reason;
mod status;
