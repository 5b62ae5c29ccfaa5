//! One reconcile pass (spec, *Binding fence*, *Pacing and guards*, *Status*).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::spec::Mode;
use mds_api::status::{
    BindingStatus, LastCommit, ModelDeploymentScalerStatus, PendingCohort, ReplicaVector,
    RoleStatus, ScaleDownOutcome,
};
use mds_api::target::RoleKind;
use mds_planner::state::Growth;
use mds_planner::{Guards, Plan, PlanInput, PlannerState, Policy, RoleInput};

use crate::conditions::{ACTIVE, BLOCKED, BOUND, Report};
use crate::episode::{backoff_roles, rebalance_step, settle_transaction};
use crate::patch::{self, TargetShape};
use crate::protocol;
use crate::records::{
    cohort, commit_observed, growth_in_flight, recover_lost_commit, resume_kept_records,
    retirement_cannot_complete, scale_down_outcome, scale_down_wait,
};
use crate::report::{finish, report_protocol_write};
use crate::{Event, Input, Memory, Outcome, Target, Write, WriteKind};

pub(crate) struct Pass<'a> {
    pub(crate) input: &'a Input<'a>,
    pub(crate) status: ModelDeploymentScalerStatus,
    pub(crate) reports: Vec<Report>,
    pub(crate) events: Vec<Event>,
    pub(crate) write: Option<Write>,
    pub(crate) plan: Option<Plan>,
    /// The planned commit was refused before and is held: why.
    pub(crate) refused: Option<String>,
    /// What a retirement hold on scale-down waits for, in words.
    pub(crate) scale_down_wait: Option<String>,
    /// The policy planning ran under, for the planner's edges in `wake_at`.
    pub(crate) policy: Option<Policy>,
}

impl Pass<'_> {
    pub(crate) fn report(
        &mut self,
        kind: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        self.reports
            .push(Report::new(kind, status, reason, message));
    }

    pub(crate) fn event(
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

    pub(crate) fn now(&self) -> Timestamp {
        self.input.now
    }
}

pub(crate) fn shape(target: &Target) -> TargetShape {
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
        refused: None,
        scale_down_wait: None,
        policy: None,
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
            // A commit whose status write was lost leaves its records in this write: the
            // release removes the decision annotation they could be rebuilt from.
            recover_lost_commit(pass, target, b.term);
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
        // is restored from status when planning resumes (D29), so this write carries it as
        // it is now.
        if let Some(planner) = memory.planner.as_ref() {
            crate::memory::persist(planner, &mut pass.status);
        }
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
        resume_kept_records(pass, target, ours);
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
        settle_transaction(pass, target);
    }
    if let Some(last) = pass.status.last_scale_down.as_ref()
        && last.outcome == ScaleDownOutcome::Aborted
    {
        guards.abort_cooldown_until = last.cooldown_until.as_ref().map(|t| t.0);
    }
    // A retirement reported anywhere, or a removed instance of our last scale-down still there
    // without one (GPUStack retires one ordinal at a time), for a bounded time.
    pass.scale_down_wait = scale_down_wait(pass, target, memory);
    guards.retirement_active = pass.scale_down_wait.is_some();
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
    let planner = memory
        .planner
        .get_or_insert_with(|| crate::memory::restore(input.scaler.status));
    // D32: a change of the spec releases stalled latency guards.
    planner.plan_under(input.scaler.generation);
    let spec = input.scaler.spec;
    let waits = (spec.pending_timeout_seconds(), spec.interval_seconds());
    let roles: Vec<RoleInput> = policy
        .roles
        .iter()
        .map(|r| RoleInput {
            current: current[&r.name],
            observation: input.observations.get(&r.name).cloned(),
            growth_in_flight: growth_in_flight(
                planner.roles.get_mut(&r.name),
                target,
                &r.name,
                waits,
                input.now,
            ),
            growth_backoff: backoff.contains(&r.name),
        })
        .collect();
    let stalled_before = stalled_guards(planner);
    let plan = mds_planner::plan(
        &PlanInput {
            policy: &policy,
            roles: &roles,
            guards,
            now: input.now,
            observed_at: input.observed_at,
        },
        planner,
    );
    report_stalled_guards(pass, &stalled_before, planner);
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
    pass.policy = Some(policy.clone());
    Some(policy)
}

/// Roles whose latency guard has stopped adding replicas (D32).
fn stalled_guards(planner: &PlannerState) -> BTreeSet<String> {
    planner
        .roles
        .iter()
        .filter(|(_, m)| m.guard.stalled_at.is_some())
        .map(|(name, _)| name.clone())
        .collect()
}

/// A latency guard that stopped adding replicas this pass says so once (D32).
fn report_stalled_guards(pass: &mut Pass, before: &BTreeSet<String>, planner: &PlannerState) {
    for (role, memory) in &planner.roles {
        let Some(breach) = memory.guard.stalled_at.filter(|_| !before.contains(role)) else {
            continue;
        };
        pass.event(
            true,
            "LatencyGuardStalled",
            "Plan",
            format!(
                "role {role}: two replicas the latency guard added did not lower latency ({breach:.2}x its target); it adds no more and only holds scale-down until latency falls below 1.2x its target, moves by more than 10 %, or the scaler spec changes"
            ),
        );
    }
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
    // TARGET.md: a refusal is Blocked, not a retry loop. Released by a change of the spec or
    // the target (the shell stops passing the refusal) or by a plan for another vector.
    if let Some(refused) = pass.input.refused.filter(|r| r.vector == vector) {
        pass.refused = Some(refused.message.clone());
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
pub(crate) fn commit_vector(
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
                let (from, to) = changes[*role];
                let memory = planner.roles.entry((*role).clone()).or_default();
                memory.last_scale_up = Some(now);
                memory.last_growth = Some(Growth { at: now, from, to });
                memory.growth_ready_at = None;
                memory.guard.record_growth();
            }
        }
    }
    if let Some(record) = protocol::scale_down_record(&current, vector) {
        pass.status.last_scale_down = Some(record);
    }
    decision
}

/// Writes `vector` with a new decision and records `lastCommit`; returns the decision ID.
pub(crate) fn record_commit(
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
