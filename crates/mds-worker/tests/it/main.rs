//! The integration tests of `mds-worker` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod bounds;
mod memory_cluster;
mod sampler;
mod worker_sampling;
