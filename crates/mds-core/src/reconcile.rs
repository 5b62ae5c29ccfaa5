//! One reconcile pass (spec, *Binding fence*, *Pacing and guards*, *Status*).

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::spec::Mode;
use mds_api::status::{
    BindingStatus, LastCommit, ModelDeploymentScalerStatus, PendingCohort, RebalanceStatus,
    ReplicaVector, RoleStatus, ScaleDownOutcome, SignalState,
};
use mds_api::target::RoleKind;
use mds_planner::{Guards, Plan, PlanInput, PlannerState, Policy, Reason, RoleInput};

use crate::conditions::{self, ACTIVE, BLOCKED, BOUND, METRICS_READY, Report};
use crate::patch::{self, TargetShape};
use crate::protocol::{self, CohortState, RetirementState};
use crate::rebalance;
use crate::{Event, GrowthBackoff, Input, Memory, Outcome, Target, Write, WriteKind};

use crate::rebalance::RESOURCE_EXHAUSTED;

struct Pass<'a> {
    input: &'a Input<'a>,
    status: ModelDeploymentScalerStatus,
    reports: Vec<Report>,
    events: Vec<Event>,
    write: Option<Write>,
    plan: Option<Plan>,
}

impl Pass<'_> {
    fn report(
        &mut self,
        kind: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        self.reports
            .push(Report::new(kind, status, reason, message));
    }

    fn event(
        &mut self,
        warning: bool,
        reason: &'static str,
        action: &'static str,
        message: impl Into<String>,
    ) {
        self.events.push(Event {
            warning,
            reason,
            action,
            message: message.into(),
        });
    }

    fn now(&self) -> Timestamp {
        self.input.now
    }
}

fn shape(target: &Target) -> TargetShape {
    let md = target.deployment;
    TargetShape {
        roles: md
            .spec
            .roles
            .iter()
            .map(|r| (r.name.clone(), r.replicas()))
            .collect(),
        has_annotations: md
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| !a.is_empty()),
        has_decision: protocol::annotation(md, DECISION_ANNOTATION).is_some(),
        resource_version: md.metadata.resource_version.clone(),
    }
}

/// Runs one pass. `memory` is the shell's in-memory state for this scaler.
pub fn reconcile(input: &Input, memory: &mut Memory) -> Outcome {
    let scaler = &input.scaler;
    let mut pass = Pass {
        input,
        status: scaler.status.clone(),
        reports: vec![],
        events: vec![],
        write: None,
        plan: None,
    };
    pass.status.observed_generation = Some(scaler.generation);
    run(&mut pass, memory);
    finish(pass, memory)
}

fn run(pass: &mut Pass, memory: &mut Memory) {
    let input = pass.input;
    let scaler = &input.scaler;
    let spec = scaler.spec;

    let Some(target) = input.target.as_ref() else {
        if !scaler.deleting {
            let message = format!(
                "ModelDeployment {:?} does not exist in this namespace; the scaler waits for it",
                spec.target_ref.name
            );
            pass.report(BOUND, false, "TargetNotFound", message.clone());
            pass.report(ACTIVE, false, "TargetNotFound", message);
        }
        return;
    };
    let md = target.deployment;
    let target_uid = md.metadata.uid.clone().unwrap_or_default();

    // The binding annotation decides who owns the target.
    let binding = match protocol::annotation(md, BINDING_ANNOTATION).map(BindingPayload::parse) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            if !scaler.deleting {
                let message = format!(
                    "the target's binding cannot be parsed ({e}); fix or remove the annotation to let a scaler bind"
                );
                pass.report(BOUND, false, "InvalidBinding", message.clone());
                pass.report(ACTIVE, false, "InvalidBinding", message);
            }
            return;
        }
    };
    let ours = binding.as_ref().is_some_and(|b| b.scaler_uid == scaler.uid);
    // Writes test the annotation's exact text (D3), not a re-encoding of it.
    let binding_text = protocol::annotation(md, BINDING_ANNOTATION)
        .unwrap_or_default()
        .to_string();
    let release = |pass: &mut Pass, why: &str| {
        if let Some(b) = binding.as_ref().filter(|_| ours) {
            pass.write = Some(Write {
                kind: WriteKind::Release,
                ops: patch::release(&shape(target), &binding_text),
                vector: None,
                decision_id: None,
                term: b.term,
            });
            pass.event(
                false,
                "Released",
                WriteKind::Release.action(),
                format!(
                    "released ModelDeployment {:?} ({why}); replica counts stay",
                    spec.target_ref.name
                ),
            );
            // A rebalance transaction belongs to the binding. The pending cohort and the
            // scale-down record stay: they resume on rebinding while the target still shows
            // our last vector (D29).
            pass.status.rebalance = None;
        }
    };
    if scaler.deleting {
        release(pass, "the scaler is being deleted");
        return;
    }

    // A replaced target (same name, new UID) stops planning until a spec edit acknowledges it.
    let known_uid = pass
        .status
        .binding
        .as_ref()
        .and_then(|b| b.target_uid.clone());
    if let Some(known) = known_uid.filter(|k| *k != target_uid) {
        let replaced_at = scaler
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == BOUND && c.reason == "TargetReplaced")
            .and_then(|c| c.observed_generation);
        let acknowledged = replaced_at.is_some_and(|g| scaler.generation > g);
        if !acknowledged {
            let message = format!(
                "ModelDeployment {:?} was deleted and recreated (UID {known} is now {target_uid}); edit the scaler spec to acknowledge and bind the new deployment",
                spec.target_ref.name
            );
            // Keep the generation of the first report so the acknowledgement can be seen.
            let generation = replaced_at.unwrap_or(scaler.generation);
            pass.report(BOUND, false, "TargetReplaced", message.clone());
            pass.report(ACTIVE, false, "TargetReplaced", message);
            pass.status.observed_generation = Some(generation);
            return;
        }
        // Acknowledged: forget everything about the old target.
        let s = &mut pass.status;
        s.binding = None;
        s.last_commit = None;
        s.pending_cohort = None;
        s.rebalance = None;
        s.last_scale_down = None;
        s.roles.clear();
        s.predictors.clear();
        memory.planner = Some(PlannerState::default());
        pass.event(
            false,
            "TargetReplaced",
            "Acknowledge",
            format!(
                "acknowledged the replacement of ModelDeployment {:?}",
                spec.target_ref.name
            ),
        );
    }
    let binding_status = pass
        .status
        .binding
        .get_or_insert_with(BindingStatus::default);
    binding_status.target_uid = Some(target_uid.clone());
    binding_status.target_name = Some(spec.target_ref.name.clone());

    let active_mode = spec.mode.unwrap_or_default() == Mode::Active;
    if spec.suspend.unwrap_or(false) {
        release(pass, "suspended");
        let message = "suspend is true: the scaler does not plan; set it to false to resume";
        pass.report(BOUND, false, "Suspended", message);
        pass.report(ACTIVE, false, "Suspended", message);
        // binding.term stays: the next binding must take a higher one (D19). Planner memory
        // is restored from status when planning resumes (D29).
        memory.planner = None;
        memory.growth_backoff = None;
        return;
    }

    let other_owner = binding.as_ref().filter(|_| !ours);
    let committing = active_mode && other_owner.is_none();
    if let Some(owner) = other_owner {
        let message = format!(
            "ModelDeployment {:?} is bound to scaler {:?}; this scaler only reports its recommendations",
            spec.target_ref.name, owner.scaler_name
        );
        pass.report(BOUND, false, "AlreadyBound", message.clone());
        pass.report(ACTIVE, false, "AlreadyBound", message);
    } else if !active_mode {
        release(pass, "Shadow mode");
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

    if committing {
        resume_kept_records(pass, target);
    }
    if committing && ours {
        recover_lost_commit(pass, target, binding.as_ref().map_or(1, |b| b.term));
    }

    // Protocol steps that write before planning (one write per pass).
    let mut guards = Guards::default();
    if committing && ours {
        let term = binding.as_ref().map(|b| b.term).unwrap_or(1);
        let payload = binding_text.clone();
        scale_down_outcome(pass, target, &payload, term);
        if pass.write.is_none() {
            cohort(pass, target, &payload, term, &mut guards, memory);
        }
    }
    if let Some(last) = pass.status.last_scale_down.as_ref()
        && last.outcome == ScaleDownOutcome::Aborted
    {
        guards.abort_cooldown_until = last.cooldown_until.as_ref().map(|t| t.0);
    }
    guards.retirement_active = md.status.as_ref().is_some_and(|s| s.retirement.is_some());
    guards.commit_unobserved = !commit_observed(pass, target);
    guards.router_missing = retirement_cannot_complete(md);
    // D18: any ordinal not admitted anywhere in the target (ours or not) blocks growth.
    let unadmitted_anywhere = target
        .admission
        .values()
        .any(|a| *a != mds_api::target::WorkloadAdmission::Admitted);
    let own_cohort_pending = committing && ours && pass.status.pending_cohort.is_some();
    if own_cohort_pending || unadmitted_anywhere {
        guards.unadmitted_ordinals = true;
    }
    let backoff = backoff_roles(pass, target, memory);

    let policy = plan_roles(pass, target, memory, &mut guards, &backoff);
    report_protocol_write(pass, target);

    if committing && pass.write.is_none() {
        if ours {
            let term = binding.as_ref().map(|b| b.term).unwrap_or(1);
            let payload = binding_text.clone();
            let transaction = policy
                .as_ref()
                .is_some_and(|policy| rebalance_step(pass, target, policy, &payload, term, memory));
            if !transaction {
                commit(pass, target, &payload, term, memory);
            }
        } else {
            let term = protocol::next_term(md, &pass.status);
            let payload = BindingPayload {
                scaler_name: scaler.name.to_string(),
                scaler_uid: scaler.uid.to_string(),
                term,
            }
            .to_annotation();
            pass.write = Some(Write {
                kind: WriteKind::Bind,
                ops: patch::bind(&shape(target), &payload),
                vector: None,
                decision_id: None,
                term,
            });
            pass.event(
                false,
                "Bound",
                WriteKind::Bind.action(),
                format!(
                    "bound ModelDeployment {:?} with term {term}",
                    spec.target_ref.name
                ),
            );
            if let Some(b) = pass.status.binding.as_mut() {
                b.term = Some(term);
            }
        }
    }
    if committing {
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
        if let (Some(b), Some(owned)) = (
            pass.status.binding.as_mut(),
            binding.as_ref().filter(|_| ours),
        ) {
            b.term = Some(owned.term);
        }
    }
}

/// Our last commit is visible in the target's status: every reported `desired` count equals
/// it, or the retirement reports our generation (TARGET.md section 3). Until then another
/// shrink could race the first retirement, so scale-down waits. An external change of the
/// target supersedes our last commit, so the guard applies only while the generation is ours
/// (D29).
fn commit_observed(pass: &Pass, target: &Target) -> bool {
    let Some(commit) = pass.status.last_commit.as_ref() else {
        return true;
    };
    if external_change(pass, target) {
        return true;
    }
    let Some(status) = target.deployment.status.as_ref() else {
        return true;
    };
    let retirement_caught_up = status
        .retirement
        .as_ref()
        .and_then(|r| r.observed_generation)
        .zip(commit.target_generation)
        .is_some_and(|(seen, ours)| seen >= ours);
    let desired_match =
        status
            .roles
            .iter()
            .all(|r| match (r.desired, commit.vector.get(&r.name)) {
                (Some(desired), Some(&ours)) => desired == ours,
                _ => true,
            });
    desired_match || retirement_caught_up
}

/// Without a router GPUStack never confirms a retirement (TARGET.md section 5): predicting the
/// abort holds scale-down instead of looping through shrink, abort, restore and cooldown.
fn retirement_cannot_complete(md: &mds_api::target::ModelDeployment) -> bool {
    md.spec.router.as_ref().is_none_or(|r| r.name.is_empty())
}

/// Rebinding after a release (Shadow, suspend): the pending cohort and the scale-down record
/// kept in status resume when the target still shows our last vector, so the cohort still
/// times out and an abort is still restored; after an external change they are dropped (D29).
fn resume_kept_records(pass: &mut Pass, target: &Target) {
    let was_committing =
        conditions::reason(&pass.input.scaler.status.conditions, ACTIVE) == Some("Active");
    let kept = pass.status.pending_cohort.is_some() || pass.status.last_scale_down.is_some();
    if was_committing || !kept {
        return;
    }
    let current = protocol::current_vector(target.deployment);
    let ours = pass.status.last_commit.as_ref().is_some_and(|c| {
        c.vector
            .iter()
            .all(|(role, n)| current.get(role).is_none_or(|now| now == n))
    });
    if ours && !external_change(pass, target) {
        return;
    }
    pass.status.pending_cohort = None;
    pass.status.last_scale_down = None;
    pass.event(
        false,
        "RecordsDropped",
        WriteKind::Bind.action(),
        "the target changed while the scaler was not bound; its pending scale-up and scale-down records no longer apply",
    );
}

/// D13: our own growth of `role` is in flight while an ordinal our last growth commit added to
/// it is not ready and that commit is younger than `pendingTimeoutSeconds`.
fn growth_in_flight(pass: &Pass, target: &Target, role: &str) -> bool {
    let status = &pass.status;
    let grew = |baseline: &ReplicaVector, vector: &ReplicaVector| {
        let (from, to) = (*baseline.get(role)?, *vector.get(role)?);
        (to > from).then_some(from..to)
    };
    let last_growth = status
        .pending_cohort
        .as_ref()
        .and_then(|c| {
            Some((
                grew(&c.baseline_vector, &c.target_vector)?,
                c.started_at.as_ref()?,
            ))
        })
        .or_else(|| {
            let c = status.last_commit.as_ref()?;
            Some((grew(&c.baseline_vector, &c.vector)?, c.timestamp.as_ref()?))
        });
    let Some((added, at)) = last_growth else {
        return false;
    };
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    if pass.now() >= at.0 + SignedDuration::from_secs(timeout) {
        return false;
    }
    let current = target
        .deployment
        .spec
        .roles
        .iter()
        .find(|r| r.name == role)
        .map_or(0, |r| r.replicas());
    (added.start..added.end.min(current))
        .any(|o| !target.ready_ordinals.contains(&(role.to_string(), o)))
}

/// A commit of ours is on the target (its decision annotation, our term) but our status does
/// not know it: the status write after it was lost. Rebuild the records it should have left,
/// so a pending cohort still times out and a shrink is still tracked.
fn recover_lost_commit(pass: &mut Pass, target: &Target, term: i64) {
    let md = target.deployment;
    let Some(decision) =
        protocol::annotation(md, DECISION_ANNOTATION).and_then(|d| DecisionPayload::parse(d).ok())
    else {
        return;
    };
    if decision.term != term
        || pass
            .status
            .last_commit
            .as_ref()
            .is_some_and(|c| c.decision_id == decision.decision_id)
    {
        return;
    }
    // The counts before it: the previous commit's vector, else the counts the last written
    // status saw on the target.
    let baseline: ReplicaVector = match pass.status.last_commit.as_ref() {
        Some(previous) => previous.vector.clone(),
        None => pass
            .status
            .roles
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.current_replicas?)))
            .collect(),
    };
    if baseline.is_empty() {
        return; // nothing to compare with: the commit's effects are unknown
    }
    let at = protocol::decision_time(&decision.decision_id).unwrap_or(pass.input.now);
    let changes = protocol::changes(&baseline, &decision.vector);
    pass.status.last_commit = Some(LastCommit {
        decision_id: decision.decision_id.clone(),
        term,
        vector: decision.vector.clone(),
        baseline_vector: baseline.clone(),
        timestamp: Some(Time(at)),
        target_generation: md.metadata.generation,
    });
    if changes.values().any(|(a, b)| b > a) {
        pass.status.pending_cohort = Some(PendingCohort {
            decision_id: decision.decision_id.clone(),
            term,
            baseline_vector: baseline.clone(),
            target_vector: decision.vector.clone(),
            started_at: Some(Time(at)),
        });
        if let Some(r) = pass.status.rebalance.as_mut()
            && r.reason.as_deref() == Some(rebalance::DONOR_RELEASE)
        {
            r.reason = Some(rebalance::RECEIVER_ACQUIRE.to_string());
        }
    } else if let Some(record) = protocol::scale_down_record(&baseline, &decision.vector) {
        pass.status.last_scale_down = Some(record);
    }
    pass.event(
        true,
        "Recovered",
        "Recover",
        format!(
            "decision {} was on the target but not in status; its records were rebuilt",
            decision.decision_id
        ),
    );
}

/// The target's generation moved past what our last write expects: someone else changed it
/// (D22).
fn external_change(pass: &Pass, target: &Target) -> bool {
    target
        .deployment
        .metadata
        .generation
        .zip(
            pass.status
                .last_commit
                .as_ref()
                .and_then(|c| c.target_generation),
        )
        .is_some_and(|(now, ours)| now > ours)
}

/// The roles whose growth waits after a rollback (D29): the rolled-back cohort's roles and the
/// roles on the same instanceType, for `pendingTimeoutSeconds`, or until a scaler spec edit or
/// an external change of the target starts a new episode (spec, *Resource rebalancing*). While
/// a donor releases its replica, that pool waits for the transaction. The receiver's leg is
/// the transaction's own write, never held here.
fn backoff_roles(pass: &Pass, target: &Target, memory: &mut Memory) -> BTreeSet<String> {
    let Some(episode) = pass.status.rebalance.as_ref() else {
        memory.growth_backoff = None;
        return BTreeSet::new();
    };
    let input = pass.input;
    let spec_edited = input
        .scaler
        .status
        .observed_generation
        .is_some_and(|g| input.scaler.generation > g);
    let in_transaction = episode.reason.as_deref() == Some(rebalance::DONOR_RELEASE);
    if !in_transaction && (spec_edited || external_change(pass, target)) {
        memory.growth_backoff = None;
        return BTreeSet::new();
    }
    let receiver = episode.receiver_role.clone().unwrap_or_default();
    let pool = || protocol::same_pool(target.deployment, [receiver.as_str()]);
    if in_transaction {
        return pool();
    }
    // After a restart the timer is gone: start it again from our last commit (never later
    // than now), so it ends at most one timeout late.
    let backoff = memory.growth_backoff.get_or_insert_with(|| {
        let since = pass
            .status
            .last_commit
            .as_ref()
            .and_then(|c| c.timestamp.as_ref())
            .map_or(input.now, |t| t.0.min(input.now));
        GrowthBackoff {
            until: since + SignedDuration::from_secs(input.scaler.spec.pending_timeout_seconds()),
            roles: pool(),
        }
    });
    if input.now < backoff.until {
        backoff.roles.clone()
    } else {
        BTreeSet::new()
    }
}

/// Runs the donor/receiver transaction. Returns true while a transaction owns this pass (a
/// write was made, or the donor's retirement is awaited), so no planned commit competes.
fn rebalance_step(
    pass: &mut Pass,
    target: &Target,
    policy: &Policy,
    binding: &str,
    term: i64,
    memory: &mut Memory,
) -> bool {
    let Some(rb) = pass.status.rebalance.clone() else {
        return false;
    };
    let input = pass.input;
    let md = target.deployment;
    // A spec edit or an external change of the target ends the episode (D22): our own commits
    // do not. A transaction in flight finishes first.
    let spec_edited = rb
        .exhaustion_episode_generation
        .is_some_and(|g| input.scaler.generation > g);
    let external = external_change(pass, target);
    if (spec_edited || external) && rb.reason.as_deref() != Some(rebalance::DONOR_RELEASE) {
        pass.status.rebalance = None;
        return false;
    }
    let current = protocol::current_vector(md);
    let instance_types: BTreeMap<String, String> = md
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.instance_type.clone().unwrap_or_default()))
        .collect();
    let donor_pods_remain = match (&rb.donor_role, rb.donor_target_replicas) {
        (Some(donor), Some(kept)) => target
            .ordinals_with_pods
            .iter()
            .any(|(r, o)| r == donor && *o >= kept),
        _ => false,
    };
    let cooldown_active = pass.status.last_scale_down.as_ref().is_some_and(|l| {
        l.outcome == ScaleDownOutcome::Aborted
            && l.cooldown_until.as_ref().is_some_and(|t| input.now < t.0)
    });
    let growth_blocked = target
        .admission
        .values()
        .any(|a| *a != mds_api::target::WorkloadAdmission::Admitted);
    let facts = rebalance::TargetFacts {
        current: &current,
        instance_types: &instance_types,
        growth_blocked,
        retirement_active: md.status.as_ref().is_some_and(|s| s.retirement.is_some()),
        cooldown_active,
        donor_pods_remain,
    };
    let spec = input.scaler.spec;
    let rebalance_spec = spec.rebalance.clone().unwrap_or_default();
    let Some(plan) = pass.plan.clone() else {
        return false;
    };
    let now = pass.now();
    match rebalance::step(
        &rb,
        policy,
        rebalance_spec.policy.unwrap_or_default(),
        &rebalance_spec.priority,
        &plan,
        &facts,
    ) {
        rebalance::Step::Idle => false,
        rebalance::Step::Over => {
            // Our own regrowth in flight does not end the episode: its cohort decides.
            if pass.status.pending_cohort.is_none() {
                pass.status.rebalance = None;
            }
            false
        }
        rebalance::Step::Done => {
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(rebalance::RECEIVER_ACQUIRE.to_string());
            }
            false
        }
        // Waiting on a retirement or a cooldown holds scale-down only (D29): the planner's
        // guards do that, and other roles' planned commits go ahead.
        rebalance::Step::Waiting => false,
        rebalance::Step::Refused { reason, message } => {
            if rb.reason.as_deref() != Some(reason) {
                pass.event(true, reason, "Rebalance", message);
            }
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(reason.to_string());
            }
            false
        }
        rebalance::Step::Release { donor, vector } => {
            let receiver = rb.receiver_role.clone().unwrap_or_default();
            let decision = commit_vector(pass, target, binding, term, memory, &vector);
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.donor_role = Some(donor.clone());
                r.donor_target_replicas = Some(vector[&donor]);
                r.receiver_target_replicas = Some(current.get(&receiver).copied().unwrap_or(0) + 1);
                r.started_at = Some(Time(now));
                r.donation_attempted = true;
                r.reason = Some(rebalance::DONOR_RELEASE.to_string());
            }
            pass.event(
                false,
                "DonorRelease",
                "Rebalance",
                format!("{donor} releases one replica for {receiver} (decision {decision})"),
            );
            true
        }
        rebalance::Step::Acquire { vector } => {
            let decision = commit_vector(pass, target, binding, term, memory, &vector);
            let receiver = rb.receiver_role.clone().unwrap_or_default();
            if let Some(r) = pass.status.rebalance.as_mut() {
                r.reason = Some(rebalance::RECEIVER_ACQUIRE.to_string());
            }
            pass.event(
                false,
                "ReceiverAcquire",
                "Rebalance",
                format!("{receiver} acquires the released replica (decision {decision})"),
            );
            true
        }
    }
}

/// A rollback or restore is this pass's write: report its counts, not the plan's.
fn report_protocol_write(pass: &mut Pass, target: &Target) {
    let Some(write) = pass
        .write
        .as_ref()
        .filter(|w| matches!(w.kind, WriteKind::Rollback | WriteKind::Restore))
    else {
        return;
    };
    let reason = if write.kind == WriteKind::Rollback {
        Reason::ResourceExhausted
    } else {
        Reason::ScaleDownAborted
    };
    // Only the roles whose count the write changes take its reason.
    let changed = write.vector.as_ref().map_or_else(BTreeMap::new, |vector| {
        protocol::changes(&protocol::current_vector(target.deployment), vector)
    });
    for role in &mut pass.status.roles {
        if let Some(&(_, n)) = changed.get(&role.name) {
            role.constrained_replicas = Some(n);
            role.reason = Some(reason.as_str().to_string());
        }
    }
    if let Some(plan) = pass.plan.as_mut() {
        for role in &mut plan.roles {
            if let Some(&(_, n)) = changed.get(&role.name) {
                role.constrained = n;
                role.reason = reason;
            }
        }
    }
}

/// An aborted retirement restores the pre-scale-down vector and starts the cooldown (D5).
fn scale_down_outcome(pass: &mut Pass, target: &Target, binding: &str, term: i64) {
    let Some(last) = pass
        .status
        .last_scale_down
        .clone()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)
    else {
        return;
    };
    if protocol::retirement_state(&last, target) != RetirementState::Aborted {
        return;
    }
    let now = pass.now();
    let current = protocol::current_vector(target.deployment);
    // The roles the scale-down lowered go back (one commit may lower several, D16); roles that
    // moved since (growth commits after the shrink) keep their counts.
    let shrunk = protocol::shrunk_roles(&last, target.deployment);
    let mut restore = current.clone();
    for (role, removed) in &shrunk {
        restore.insert(role.clone(), removed.end);
    }
    let cooldown = pass.input.scaler.spec.cooldown_after_abort_seconds();
    record_commit(pass, target, binding, term, &restore, WriteKind::Restore);
    let l = pass.status.last_scale_down.as_mut().expect("present");
    l.outcome = ScaleDownOutcome::Aborted;
    l.aborted_at = Some(Time(now));
    l.cooldown_until = Some(Time(now + SignedDuration::from_secs(cooldown)));
    // An aborted donor retirement cancels its rebalance transaction.
    if pass
        .status
        .rebalance
        .as_ref()
        .and_then(|r| r.donor_role.as_deref())
        == Some(last.role.as_str())
        && let Some(r) = pass.status.rebalance.as_mut()
    {
        // Cancel the transaction; the exhaustion episode goes on, its donation spent.
        r.donor_role = None;
        r.donor_target_replicas = None;
        r.receiver_target_replicas = None;
        r.started_at = None;
        r.reason = Some(rebalance::DONATION_ATTEMPTED.to_string());
    }
    let restored: Vec<String> = shrunk
        .iter()
        .map(|(role, removed)| format!("{role} to {}", removed.end))
        .collect();
    pass.event(
        true,
        "ScaleDownAborted",
        WriteKind::Restore.action(),
        format!(
            "a retirement of {} was aborted; restored {}; scale-down waits {cooldown} s",
            last.role,
            restored.join(", ")
        ),
    );
}

/// Tracks the pending cohort; rolls back the whole baseline when admission is exhausted.
fn cohort(
    pass: &mut Pass,
    target: &Target,
    binding: &str,
    term: i64,
    guards: &mut Guards,
    memory: &mut Memory,
) {
    let Some(cohort) = pass.status.pending_cohort.clone() else {
        return;
    };
    let timeout = pass.input.scaler.spec.pending_timeout_seconds();
    match protocol::cohort_state(&cohort, target, timeout, pass.now()) {
        CohortState::Admitted => {
            pass.status.pending_cohort = None;
            // Growth was admitted: the exhaustion episode (and any transaction) is over.
            if pass
                .status
                .rebalance
                .as_ref()
                .is_some_and(|r| r.reason.as_deref() != Some(rebalance::DONOR_RELEASE))
            {
                pass.status.rebalance = None;
            }
        }
        CohortState::Waiting => guards.unadmitted_ordinals = true,
        CohortState::Exhausted { unadmitted, parked } => {
            // Seen before this rollback's own commit record replaces lastCommit (D22).
            let external = external_change(pass, target);
            let current = protocol::current_vector(target.deployment);
            // The roles the cohort grew go back to its baseline; roles that moved otherwise
            // since (a shrink while the cohort waited) keep their counts.
            let mut baseline = current.clone();
            for (role, (from, _)) in
                protocol::changes(&cohort.baseline_vector, &cohort.target_vector)
            {
                if let Some(now) = baseline.get_mut(&role) {
                    *now = (*now).min(from);
                }
            }
            record_commit(pass, target, binding, term, &baseline, WriteKind::Rollback);
            pass.status.pending_cohort = None;
            // A rollback that lowers a role a scale-down also lowered is not that scale-down:
            // its record must not restore the rolled-back count after an abort.
            if let Some(last) = pass.status.last_scale_down.as_mut() {
                for (role, (from, to)) in protocol::changes(&current, &baseline) {
                    if let Some(pre) = last.pre_scale_down_vector.get_mut(&role) {
                        *pre -= from - to;
                    }
                }
            }
            let receiver = unadmitted.first().map(|(role, _)| role.clone());
            // Within one episode a Priority donation is attempted once (D27); our own commits
            // do not end the episode.
            let generation = pass.input.scaler.generation;
            let attempted = !external
                && pass.status.rebalance.as_ref().is_some_and(|r| {
                    r.exhaustion_episode_generation == Some(generation) && r.donation_attempted
                });
            // The transaction has not started: startedAt waits for the donor's release.
            pass.status.rebalance = Some(RebalanceStatus {
                receiver_role: receiver,
                exhaustion_episode_generation: Some(generation),
                donation_attempted: attempted,
                reason: Some(RESOURCE_EXHAUSTED.to_string()),
                ..RebalanceStatus::default()
            });
            let grown = protocol::changes(&cohort.baseline_vector, &cohort.target_vector);
            memory.growth_backoff = Some(GrowthBackoff {
                until: pass.now()
                    + SignedDuration::from_secs(pass.input.scaler.spec.pending_timeout_seconds()),
                roles: protocol::same_pool(target.deployment, grown.keys().map(String::as_str)),
            });
            let why = if parked {
                "a Workload was parked"
            } else {
                "admission timed out"
            };
            let list: Vec<String> = unadmitted.iter().map(|(r, o)| format!("{r}/{o}")).collect();
            pass.event(
                true,
                "ResourceExhausted",
                WriteKind::Rollback.action(),
                format!(
                    "{why} for {}; restored the baseline of decision {}",
                    list.join(", "),
                    cohort.decision_id
                ),
            );
        }
    }
}

/// Builds the policy, restores memory, plans, and fills the role statuses.
fn plan_roles(
    pass: &mut Pass,
    target: &Target,
    memory: &mut Memory,
    guards: &mut Guards,
    backoff: &BTreeSet<String>,
) -> Option<Policy> {
    let input = pass.input;
    let md = target.deployment;
    let kinds: BTreeMap<String, RoleKind> = md
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.kind()))
        .collect();
    let policy = match Policy::from_spec(input.scaler.spec, &kinds) {
        Ok(p) => p,
        Err(e) => {
            pass.report(
                BLOCKED,
                true,
                "BoundsConflict",
                format!("the spec cannot be planned: {e}"),
            );
            return None;
        }
    };
    let current = protocol::current_vector(md);
    guards.unbounded_target_roles = current
        .keys()
        .filter(|r| policy.role_index(r).is_none())
        .cloned()
        .collect();
    let missing: Vec<&str> = policy
        .roles
        .iter()
        .filter(|r| !current.contains_key(&r.name))
        .map(|r| r.name.as_str())
        .collect();
    if !missing.is_empty() {
        pass.report(
            BLOCKED,
            true,
            "BoundsConflict",
            format!("roles {missing:?} do not exist on the target"),
        );
        return None;
    }
    let roles: Vec<RoleInput> = policy
        .roles
        .iter()
        .map(|r| RoleInput {
            current: current[&r.name],
            observation: input.observations.get(&r.name).cloned(),
            growth_in_flight: growth_in_flight(pass, target, &r.name),
            growth_backoff: backoff.contains(&r.name),
        })
        .collect();
    let planner = memory
        .planner
        .get_or_insert_with(|| crate::memory::restore(input.scaler.status));
    let plan = mds_planner::plan(
        &PlanInput {
            policy: &policy,
            roles: &roles,
            guards,
            now: input.now,
        },
        planner,
    );
    let ready: BTreeMap<String, i32> = md
        .status
        .as_ref()
        .map(|s| {
            s.roles
                .iter()
                .filter_map(|r| Some((r.name.clone(), r.ready?)))
                .collect()
        })
        .unwrap_or_default();
    pass.status.roles = plan
        .roles
        .iter()
        .map(|r| {
            let mut status = RoleStatus {
                name: r.name.clone(),
                ..RoleStatus::default()
            };
            if let Some(o) = input.observations.get(&r.name) {
                o.write_status(&mut status);
            }
            status.ready_replicas = status.ready_replicas.or(ready.get(&r.name).copied());
            status.current_replicas = Some(r.current);
            status.raw_recommended_replicas = Some(r.raw);
            status.constrained_replicas = Some(r.constrained);
            status.reason = Some(r.reason.as_str().to_string());
            status
        })
        .collect();
    pass.plan = Some(plan);
    Some(policy)
}

/// Commits the plan's vector when it differs from the target's.
fn commit(pass: &mut Pass, target: &Target, binding: &str, term: i64, memory: &mut Memory) {
    let Some(plan) = pass.plan.as_ref().filter(|p| p.conflict.is_none()) else {
        return;
    };
    let current = protocol::current_vector(target.deployment);
    let mut vector = current.clone();
    for r in &plan.roles {
        vector.insert(r.name.clone(), r.constrained);
    }
    let changes = protocol::changes(&current, &vector);
    if changes.is_empty() {
        return;
    }
    let decision = commit_vector(pass, target, binding, term, memory, &vector);
    let summary: Vec<String> = changes
        .iter()
        .map(|(r, (a, b))| format!("{r} {a}->{b}"))
        .collect();
    pass.event(
        false,
        "Scaled",
        WriteKind::Commit.action(),
        format!("decision {decision}: {}", summary.join(", ")),
    );
}

/// Commits `vector` and records what it starts: a pending cohort and the scale-up time of
/// every grown role, the scale-down record of a shrunk role. Returns the decision ID.
fn commit_vector(
    pass: &mut Pass,
    target: &Target,
    binding: &str,
    term: i64,
    memory: &mut Memory,
    vector: &ReplicaVector,
) -> String {
    let now = pass.now();
    let current = protocol::current_vector(target.deployment);
    let changes = protocol::changes(&current, vector);
    let decision = record_commit(pass, target, binding, term, vector, WriteKind::Commit);
    let grown: Vec<&String> = changes
        .iter()
        .filter(|(_, (a, b))| b > a)
        .map(|(r, _)| r)
        .collect();
    if !grown.is_empty() {
        pass.status.pending_cohort = Some(PendingCohort {
            decision_id: decision.clone(),
            term,
            baseline_vector: current.clone(),
            target_vector: vector.clone(),
            started_at: Some(Time(now)),
        });
        if let Some(planner) = memory.planner.as_mut() {
            for role in &grown {
                planner
                    .roles
                    .entry((*role).clone())
                    .or_default()
                    .last_scale_up = Some(now);
            }
        }
    }
    if let Some(record) = protocol::scale_down_record(&current, vector) {
        pass.status.last_scale_down = Some(record);
    }
    decision
}

/// Writes `vector` with a new decision and records `lastCommit`; returns the decision ID.
fn record_commit(
    pass: &mut Pass,
    target: &Target,
    binding: &str,
    term: i64,
    vector: &ReplicaVector,
    kind: WriteKind,
) -> String {
    let decision = protocol::decision_id(pass.input.scaler.name, term, pass.now());
    let current = protocol::current_vector(target.deployment);
    let payload = DecisionPayload {
        decision_id: decision.to_string(),
        term,
        vector: vector.clone(),
    }
    .to_annotation();
    let spec_changes = !protocol::changes(&current, vector).is_empty();
    let generation = target.deployment.metadata.generation.unwrap_or(0);
    pass.write = Some(Write {
        kind,
        ops: patch::commit(&shape(target), binding, vector, &payload),
        vector: Some(vector.clone()),
        decision_id: Some(decision.to_string()),
        term,
    });
    pass.status.last_commit = Some(LastCommit {
        decision_id: decision.to_string(),
        term,
        vector: vector.clone(),
        baseline_vector: current,
        timestamp: Some(Time(pass.now())),
        // A spec change bumps the generation; the annotation alone does not.
        target_generation: Some(if spec_changes {
            generation + 1
        } else {
            generation
        }),
    });
    decision
}

/// Conditions, memory and the status-write decision.
fn finish(mut pass: Pass, memory: &Memory) -> Outcome {
    let input = pass.input;
    let planned = pass.plan.is_some();
    if planned {
        metrics_and_blocked(&mut pass);
    }
    let generation = pass
        .status
        .observed_generation
        .unwrap_or(input.scaler.generation);
    pass.status.conditions = conditions::apply(
        &input.scaler.status.conditions,
        &pass.reports,
        generation,
        input.now,
    );
    if let Some(planner) = memory.planner.as_ref().filter(|_| planned) {
        crate::memory::persist(planner, &mut pass.status);
    }
    let write_status = control_plane(&pass.status) != control_plane(input.scaler.status);
    Outcome {
        write: pass.write,
        status: pass.status,
        write_status,
        events: pass.events,
        plan: pass.plan,
    }
}

fn metrics_and_blocked(pass: &mut Pass) {
    let plan = pass.plan.as_ref().expect("planned");
    let episode = pass
        .status
        .rebalance
        .as_ref()
        .and_then(|r| r.reason.clone());
    let exhausted = episode.is_some();
    let aborted_cooldown = pass.status.last_scale_down.as_ref().is_some_and(|l| {
        l.outcome == ScaleDownOutcome::Aborted
            && l.cooldown_until
                .as_ref()
                .is_some_and(|t| pass.input.now < t.0)
    });
    // Roles without current readings or complete coverage, and roles their algorithm holds
    // for want of a reading it can use (an unknown kind under a token algorithm, D31).
    let waiting: Vec<&str> = plan
        .roles
        .iter()
        .filter(|r| {
            let observation = pass.input.observations.get(&r.name);
            let observed = observation.is_some_and(|o| {
                matches!(o.signal_state, SignalState::Fresh | SignalState::Idle)
                    && o.coverage_complete
            });
            !observed || r.algorithm_reason == Reason::WaitingForMetrics
        })
        .map(|r| r.name.as_str())
        .collect();
    let (metrics, blocked) = match &plan.conflict {
        Some((reason, message)) => {
            let reason = reason.as_str();
            let message = format!("{message}; adjust the policy to include the current vector");
            (
                Report::new(METRICS_READY, false, reason, message.clone()),
                Report::new(BLOCKED, true, reason, message),
            )
        }
        None => {
            let metrics = if exhausted {
                Report::new(
                    METRICS_READY,
                    false,
                    "ResourceExhausted",
                    "added replicas were not admitted; check quota and admission before growth resumes",
                )
            } else if waiting.is_empty() {
                Report::new(
                    METRICS_READY,
                    true,
                    "Observed",
                    "all required role signals are available",
                )
            } else {
                Report::new(
                    METRICS_READY,
                    false,
                    "WaitingForMetrics",
                    format!(
                        "roles {waiting:?} lack current readings or complete coverage; scale-down waits"
                    ),
                )
            };
            let ratio_conflict = plan.roles.iter().any(|r| r.reason == Reason::RatioConflict);
            let blocked = if ratio_conflict {
                Report::new(
                    BLOCKED,
                    true,
                    "RatioConflict",
                    "no feasible vector was found for a ratio component; it holds its counts",
                )
            } else if aborted_cooldown {
                Report::new(
                    BLOCKED,
                    true,
                    "ScaleDownAborted",
                    "a retirement was aborted and restored; scale-down waits for the cooldown",
                )
            } else if episode.as_deref() == Some(rebalance::NOT_APPLICABLE) {
                Report::new(
                    BLOCKED,
                    true,
                    "RebalanceNotApplicable",
                    "the receiver still needs to grow but no role can donate (same instanceType, above its minimum, allowed by rebalance.policy)",
                )
            } else if episode.as_deref() == Some(rebalance::BLOCKED) {
                Report::new(
                    BLOCKED,
                    true,
                    "RebalanceBlocked",
                    "a donation would break bounds or ratios in between, or was already attempted in this episode; edit the scaler spec to start a new one",
                )
            } else if exhausted {
                Report::new(
                    BLOCKED,
                    true,
                    "ResourceExhausted",
                    "a scale-up was rolled back after its replicas were not admitted",
                )
            } else if plan.pacing_bounded() {
                let held: Vec<String> = plan
                    .roles
                    .iter()
                    .filter(|r| r.reason == Reason::PacingBounded)
                    .map(|r| {
                        let limits: Vec<String> = r.limits.iter().map(|l| l.to_string()).collect();
                        format!("{} ({})", r.name, limits.join("; "))
                    })
                    .collect();
                Report::new(
                    BLOCKED,
                    true,
                    "PacingBounded",
                    format!("held by pacing or guards: {}", held.join(", ")),
                )
            } else {
                Report::new(
                    BLOCKED,
                    false,
                    "Ready",
                    "no constraint holds the recommendations",
                )
            };
            (metrics, blocked)
        }
    };
    pass.reports.push(metrics);
    pass.reports.push(blocked);
}

/// What makes a status write necessary (D23): decisions, the binding, conditions, and each
/// role's counts and reason. Histories and filters ride along but do not trigger a write.
fn control_plane(status: &ModelDeploymentScalerStatus) -> serde_json::Value {
    let roles: Vec<serde_json::Value> = status
        .roles
        .iter()
        .map(|r| {
            serde_json::json!([
                r.name,
                r.current_replicas,
                r.ready_replicas,
                r.raw_recommended_replicas,
                r.constrained_replicas,
                r.reason
            ])
        })
        .collect();
    let conditions: Vec<serde_json::Value> = status
        .conditions
        .iter()
        .map(|c| {
            serde_json::json!([
                c.type_,
                c.status,
                c.reason,
                c.message,
                c.observed_generation
            ])
        })
        .collect();
    serde_json::json!({
        "generation": status.observed_generation,
        "binding": status.binding,
        "lastCommit": status.last_commit,
        "pendingCohort": status.pending_cohort,
        "rebalance": status.rebalance,
        "lastScaleDown": status.last_scale_down,
        "roles": roles,
        "conditions": conditions,
    })
}
