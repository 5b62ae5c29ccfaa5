//! The binding fence's side of a pass (spec, *Binding fence*): what each case other than the
//! owner's says and writes, the bind and the release, and forgetting a replaced target.

use mds_api::annotations::BindingPayload;
use mds_api::status::BindingStatus;
use mds_planner::PlannerState;

use crate::conditions::{ACTIVE, BLOCKED, BOUND, TARGET_UNREADABLE};
use crate::pass::Pass;
use crate::patch;
use crate::protocol;
use crate::recovery::recover_lost_commit;
use crate::view::{Unreadable, View};
use crate::{Memory, Write, WriteKind};

/// No target, or a binding that does not parse: say so, unless the scaler is going anyway.
pub(crate) fn unreadable(pass: &mut Pass, unreadable: Unreadable) {
    if pass.input.scaler.deleting {
        return;
    }
    let target = &pass.input.scaler.spec.target_ref.name;
    match unreadable {
        Unreadable::NoTarget => {
            let message = format!(
                "ModelDeployment {target:?} does not exist in this namespace; the scaler waits for it"
            );
            pass.not_owning("TargetNotFound", message);
        }
        Unreadable::InvalidBinding(e) => {
            let message = format!(
                "the target's binding cannot be parsed ({e}); fix or remove the annotation to let a scaler bind"
            );
            pass.not_owning("InvalidBinding", message);
        }
    }
}

/// The target (or a Workload of its instances) does not decode: nothing is planned or
/// written, and `Blocked` names what did not decode (a Warning event when it starts). Released
/// by the next version that decodes. A scaler being deleted lets its finalizer go: its binding stays on the target
/// until the fence's orphan recovery or an edit removes it.
pub(crate) fn undecodable(pass: &mut Pass, problem: &str) {
    if pass.input.scaler.deleting {
        return;
    }
    let message = format!(
        "the target cannot be read: {problem}; nothing is planned or written until it decodes (a GPUStack or Kueue revision newer than this mds, or a CRD installed with a looser schema)"
    );
    let already = pass
        .input
        .scaler
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == BLOCKED && c.reason == TARGET_UNREADABLE);
    if !already {
        pass.event(true, TARGET_UNREADABLE, "Plan", message.clone());
    }
    pass.report(BLOCKED, true, TARGET_UNREADABLE, message);
}

/// A replaced target (same name, new UID) stops planning until a spec edit acknowledges it.
pub(crate) fn replaced(pass: &mut Pass, view: &View) {
    let Some(replacement) = view.replacement.as_ref() else {
        return;
    };
    let scaler = &pass.input.scaler;
    let message = format!(
        "ModelDeployment {:?} was deleted and recreated (UID {} is now {}); edit the scaler spec to acknowledge and bind the new deployment",
        scaler.spec.target_ref.name, replacement.known_uid, view.uid
    );
    // Keep the generation of the first report so the acknowledgement can be seen.
    let generation = replacement.reported_at.unwrap_or(scaler.generation);
    pass.not_owning("TargetReplaced", message);
    pass.status.observed_generation = Some(generation);
}

/// Records the target in `status.binding`; an acknowledged replacement first forgets
/// everything about the old one.
pub(crate) fn note_target(pass: &mut Pass, view: &View, memory: &mut Memory) {
    let name = &pass.input.scaler.spec.target_ref.name;
    if view.replacement.as_ref().is_some_and(|r| r.acknowledged) {
        let s = &mut pass.status;
        s.binding = None;
        s.last_commit = None;
        s.pending_cohort = None;
        s.rebalance = None;
        s.last_scale_down = None;
        s.roles.clear();
        s.predictors.clear();
        memory.planner = Some(PlannerState::default());
        let message = format!("acknowledged the replacement of ModelDeployment {name:?}");
        pass.event(false, "TargetReplaced", "Acknowledge", message);
    }
    let binding = pass
        .status
        .binding
        .get_or_insert_with(BindingStatus::default);
    binding.target_uid = Some(view.uid.clone());
    binding.target_name = Some(name.clone());
}

/// Releases the target when the binding is ours; otherwise nothing.
pub(crate) fn release(pass: &mut Pass, view: &View, why: &str) {
    let Some(binding) = view.owned() else {
        return;
    };
    // A commit whose status write was lost leaves its records in this write: the release
    // removes the decision annotation they could be rebuilt from.
    recover_lost_commit(pass, view, binding.term);
    pass.write = Some(Write {
        kind: WriteKind::Release,
        ops: patch::release(&view.shape, &view.binding_text),
        vector: None,
        decision_id: None,
        term: binding.term,
    });
    let message = format!(
        "released ModelDeployment {:?} ({why}); replica counts stay",
        pass.input.scaler.spec.target_ref.name
    );
    pass.event(false, "Released", WriteKind::Release.action(), message);
    // A rebalance transaction belongs to the binding. The pending cohort and the scale-down
    // record stay: they resume on rebinding while the target still shows our last vector
    // (D29).
    pass.status.rebalance = None;
}

/// Suspended: release, and keep planner memory in status until planning resumes.
pub(crate) fn suspend(pass: &mut Pass, view: &View, memory: &mut Memory) {
    release(pass, view, "suspended");
    let message = "suspend is true: the scaler does not plan; set it to false to resume";
    pass.not_owning("Suspended", message.to_string());
    // binding.term stays: the next binding must take a higher one (D19). Planner memory is
    // restored from status when planning resumes (D29), so this write carries it as it is
    // now.
    if let Some(planner) = memory.planner.as_ref() {
        crate::memory::persist(planner, &mut pass.status);
    }
    memory.planner = None;
    memory.growth_backoff = None;
}

/// Bound to another scaler: report recommendations only.
pub(crate) fn foreign(pass: &mut Pass, owner: &str) {
    let message = format!(
        "ModelDeployment {:?} is bound to scaler {owner:?}; this scaler only reports its recommendations",
        pass.input.scaler.spec.target_ref.name
    );
    pass.not_owning("AlreadyBound", message);
}

/// Shadow mode: release what we own, report recommendations without owning the target.
pub(crate) fn shadow(pass: &mut Pass, view: &View, memory: &mut Memory) {
    release(pass, view, "Shadow mode");
    memory.growth_backoff = None;
    pass.report(
        BOUND,
        true,
        "Bound",
        "the target is available; Shadow mode reports recommendations without owning it",
    );
    pass.report(
        ACTIVE,
        false,
        "ShadowMode",
        "mode is Shadow: nothing is written to the target; set mode: Active to commit",
    );
}

/// Installs our binding with the next term (D19).
pub(crate) fn bind(pass: &mut Pass, view: &View) -> Write {
    let term = protocol::next_term(view.md, &pass.status);
    let scaler = &pass.input.scaler;
    let payload = BindingPayload {
        scaler_name: scaler.name.to_string(),
        scaler_uid: scaler.uid.to_string(),
        term,
    }
    .to_annotation();
    let message = format!(
        "bound ModelDeployment {:?} with term {term}",
        scaler.spec.target_ref.name
    );
    pass.event(false, "Bound", WriteKind::Bind.action(), message);
    if let Some(b) = pass.status.binding.as_mut() {
        b.term = Some(term);
    }
    Write {
        kind: WriteKind::Bind,
        ops: patch::bind(&view.shape, &payload),
        vector: None,
        decision_id: None,
        term,
    }
}

/// Active and ours, or just bound: say so, with the term of our binding.
pub(crate) fn committing(pass: &mut Pass, view: &View) {
    pass.report(
        BOUND,
        true,
        "Bound",
        "this scaler owns the target's replica counts",
    );
    pass.report(
        ACTIVE,
        true,
        "Active",
        "decisions are committed to the target",
    );
    if let (Some(b), Some(owned)) = (pass.status.binding.as_mut(), view.owned()) {
        b.term = Some(owned.term);
    }
}
