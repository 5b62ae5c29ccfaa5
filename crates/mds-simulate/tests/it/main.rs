//! The integration tests of `mds-simulate` in one binary: one link instead of one per file, and
//! one shared setup (a control plane, where the tests start one) for all of them.

mod common;

mod compare;
mod driver_loop;
mod engines;
mod faults;
mod frontier;
mod pd_retirements;
mod replay_guard;
mod replay_refusal;
mod replay_reversal;
mod replay_stuck;
mod replay_timelines;
mod rollback_pd;
mod simulate;
mod suggest;
