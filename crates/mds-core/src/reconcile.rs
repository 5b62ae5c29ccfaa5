//! One reconcile pass (spec, *Binding fence*, *Pacing and guards*, *Status*), top to bottom:
//! read the input into a [`View`] once, classify the [`Case`] once, run the case's phases,
//! finish. The owner's phases are: settle records, guards, plan, choose one write (the
//! records' protocol write, else the rebalance step's, else the planned commit).

use crate::binding;
use crate::episode::{backoff_roles, rebalance_step, settle_transaction};
use crate::finish::finish;
use crate::guards::guards;
use crate::history;
use crate::pass::Pass;
use crate::planning::{plan, report_protocol_write};
use crate::records;
use crate::recovery::{recover_lost_commit, resume_kept_records};
use crate::refusals;
use crate::view::{Case, View};
use crate::write::commit_plan;
use crate::{Input, Memory, Outcome, Write};

/// Runs one pass. `memory` is the shell's in-memory state for this scaler.
pub fn reconcile(input: &Input, memory: &mut Memory) -> Outcome {
    let mut pass = Pass::new(input);
    match (input.target_problem, View::read(input)) {
        (Some(problem), _) => binding::undecodable(&mut pass, problem),
        (None, Err(unreadable)) => binding::unreadable(&mut pass, unreadable),
        (None, Ok(view)) => run(&mut pass, &view, memory),
    }
    finish(pass, memory)
}

fn run(pass: &mut Pass, view: &View, memory: &mut Memory) {
    let case = view.case(pass.input);
    // Every case that goes on with this target records it in status.binding.
    if !matches!(case, Case::Deleting | Case::Replaced) {
        binding::note_target(pass, view, memory);
    }
    match case {
        Case::Deleting => binding::release(pass, view, "the scaler is being deleted"),
        Case::Replaced => binding::replaced(pass, view),
        Case::Suspended => binding::suspend(pass, view, memory),
        Case::Foreign { owner } => {
            binding::foreign(pass, &owner);
            plan_only(pass, view, memory);
            history::record_recommendation(pass, &view.current);
        }
        Case::Shadow => {
            binding::shadow(pass, view, memory);
            plan_only(pass, view, memory);
            history::record_recommendation(pass, &view.current);
        }
        Case::Acquiring => {
            resume_kept_records(pass, view);
            plan_only(pass, view, memory);
            pass.write = Some(binding::bind(pass, view));
            binding::committing(pass, view);
        }
        Case::Owner { term } => {
            own(pass, view, memory, term);
            binding::committing(pass, view);
        }
    }
}

/// A pass that plans and reports but does not commit: Foreign, Shadow, and the pass that
/// binds.
fn plan_only(pass: &mut Pass, view: &View, memory: &mut Memory) {
    let guards = guards(pass, view, memory, false);
    let backoff = backoff_roles(pass, view, memory);
    plan(pass, view, memory, guards, &backoff);
}

/// The owner's phases: settle records, guards, plan, then one write.
fn own(pass: &mut Pass, view: &View, memory: &mut Memory, term: i64) {
    resume_kept_records(pass, view);
    recover_lost_commit(pass, view, term);
    refusals::settle(pass, view);
    let protocol_write = records::settle(pass, view, term, memory);
    settle_transaction(pass, view);
    let guards = guards(pass, view, memory, true);
    let backoff = backoff_roles(pass, view, memory);
    let policy = plan(pass, view, memory, guards, &backoff);
    report_protocol_write(pass, view, protocol_write.as_ref());
    pass.write = choose_write(pass, view, memory, term, protocol_write, policy);
}

/// One write per pass: the records' protocol write, else the rebalance step's, else the
/// planned commit.
fn choose_write(
    pass: &mut Pass,
    view: &View,
    memory: &mut Memory,
    term: i64,
    protocol_write: Option<Write>,
    policy: Option<mds_planner::Policy>,
) -> Option<Write> {
    protocol_write
        .or_else(|| {
            let policy = policy.as_ref()?;
            rebalance_step(pass, view, policy, term, memory)
        })
        .or_else(|| commit_plan(pass, view, term, memory))
}
