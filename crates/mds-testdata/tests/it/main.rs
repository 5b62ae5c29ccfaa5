//! The integration tests of `mds-testdata` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod builders;
