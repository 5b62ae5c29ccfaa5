//! The integration tests of `mds-signals` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod engines;
mod fast_path;
mod gaps;
mod garbage;
mod joining;
mod parser_props;
mod rank_rule;
