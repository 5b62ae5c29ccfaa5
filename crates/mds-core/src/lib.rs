//! The reconcile core: a pure state machine. The scaler (spec, status, generation), the target
//! or its absence (with its Workloads and Pods summarised), the role observations and `now` go
//! in; at most one target write (a JSON Patch), the new status, whether it must be written, and
//! the events to emit come out. No I/O, no clock (ARCHITECTURE.md).

mod binding;
pub mod conditions;
mod episode;
mod failed_write;
mod finish;
mod guards;
mod history;
pub mod memory;
mod pass;
pub mod patch;
mod planning;
mod protocol;
pub mod rebalance;
mod reconcile;
mod records;
mod recovery;
mod refusals;
mod view;
mod wake;
mod write;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::status::{ModelDeploymentScalerStatus, ReplicaVector};
use mds_api::target::{ModelDeployment, WorkloadAdmission};
use mds_planner::{Plan, PlannerState};
use mds_signals::RoleObservation;

pub use failed_write::report_failed_write;
pub use patch::PatchOp;
pub use reconcile::reconcile;

/// The scaler as the core sees it (the spec after defaulting).
#[derive(Clone, Debug)]
pub struct Scaler<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub generation: i64,
    pub spec: &'a ModelDeploymentScalerSpec,
    pub status: &'a ModelDeploymentScalerStatus,
    /// `metadata.deletionTimestamp` is set: release and let the finalizer go.
    pub deleting: bool,
}

/// The target and what the shell learned about its instances.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub deployment: &'a ModelDeployment,
    /// Admission of instances by (role, ordinal), from their Kueue Workloads (D4). An ordinal
    /// without an entry is not composed yet: pending.
    pub admission: BTreeMap<(String, i32), WorkloadAdmission>,
    /// (role, ordinal) pairs that still have Pods, terminating ones included.
    pub ordinals_with_pods: BTreeSet<(String, i32)>,
    /// (role, ordinal) pairs whose Kueue Workload exists (named by the instance's Pods, or by
    /// `status.retirement.targetWorkloadUID` for the ordinal being retired): a removed
    /// instance is gone, and its quota free, when its Workload is. `None` where the Workload
    /// API is not served: then a removed instance is gone when its Pods are (D5, amended in
    /// docs/DESIGN.md).
    pub workloads: Option<BTreeSet<(String, i32)>>,
    /// The names of the Pods of each (role, ordinal), terminating ones included, sorted: the
    /// Pods to look at when a retirement is stuck (D36).
    pub pod_names: BTreeMap<(String, i32), Vec<String>>,
    /// (role, ordinal) pairs whose instance is ready: every member Pod present and Ready
    /// (D13: our growth is in flight while an ordinal it added is not here).
    pub ready_ordinals: BTreeSet<(String, i32)>,
}

/// One pass's inputs.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    pub scaler: Scaler<'a>,
    pub target: Option<Target<'a>>,
    pub observations: &'a BTreeMap<String, RoleObservation>,
    /// When `observations` were sampled: `now` for this pass's own sampling, earlier when a
    /// pass brought forward by a watch event reuses the last one. The planner takes a
    /// sampling once however many passes plan on it: a reused sampling is no new observation.
    pub observed_at: Timestamp,
    /// Why the shell could not sample the target, when the target is at fault (an unknown
    /// engine, D2): `MetricsReady` says it.
    pub sampling_problem: Option<&'a str>,
    /// The target, or a Kueue Workload of its instances, exists but its latest version does not
    /// decode into our model (a revision ahead of us, a CRD with a looser schema): which, what
    /// did not, and where. Nothing is planned or written until it decodes; `Blocked` says why.
    pub target_problem: Option<&'a str>,
    pub now: Timestamp,
    /// A commit the API server refused for good (an admission webhook, a validation rule),
    /// while neither the scaler spec nor the target changed since: the same vector is not
    /// sent again, and `Blocked` says why.
    pub refused: Option<&'a RefusedWrite>,
}

/// A target write that was refused, and what the refusal said.
#[derive(Clone, Debug, PartialEq)]
pub struct RefusedWrite {
    pub vector: ReplicaVector,
    pub message: String,
}

/// A target write that did not land and was not a conflict (a conflict is re-planned next
/// pass and says nothing): refused by the API server as it stands, or failing for now. The
/// shell keeps it between passes and decides when to try again; the core says what it means
/// on the condition that owns the write (`report_failed_write`).
#[derive(Clone, Debug, PartialEq)]
pub struct FailedWrite {
    pub kind: WriteKind,
    /// Refused as it stands (an admission webhook, a validation rule), not just failing.
    pub refused: bool,
    /// What the API server said.
    pub message: String,
    /// When this write first failed.
    pub since: Timestamp,
    /// When it is tried again; `None` for refused counts, held until the scaler spec or the
    /// target changes, or the plan wants other counts.
    pub retry_at: Option<Timestamp>,
}

/// What the shell keeps in memory between passes for one scaler.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// Planner memory; `None` until restored from status (after a start or a replacement).
    pub planner: Option<PlannerState>,
    /// Regrowth backoff after a rollback (D29).
    pub growth_backoff: Option<GrowthBackoff>,
    /// A removed instance of our last scale-down seen without a retirement record.
    pub retirement_gap: Option<RetirementGap>,
    /// The phase the reported retirement stands in, since when, and whether it was reported
    /// stuck (D36).
    pub retirement_phase: Option<RetirementPhase>,
}

/// A retirement reported in one phase: which, since when (its `phaseStartedAt`, else the
/// first pass that saw it there) and whether the `RetirementStuck` event was emitted. Kept
/// in memory only: after a restart a retirement still stuck is reported once more.
#[derive(Clone, Debug, PartialEq)]
pub struct RetirementPhase {
    pub role: String,
    pub ordinal: i32,
    pub state: String,
    pub since: Timestamp,
    pub warned: bool,
}

/// A removed instance of our last scale-down that is still there while no retirement is
/// reported (GPUStack retires one ordinal at a time; or its Pods stay behind): which, and the
/// first pass that saw it so. Scale-down waits for it `pendingTimeoutSeconds` from then at
/// most. Kept in memory only: after a restart the wait starts again, so it ends at most one
/// timeout late.
#[derive(Clone, Debug, PartialEq)]
pub struct RetirementGap {
    pub role: String,
    pub ordinal: i32,
    pub since: Timestamp,
}

/// After a rollback, the roles whose regrowth waits, and until when (D29): the rolled-back
/// cohort's roles and the roles on the same instanceType. Kept in memory only: after a
/// restart during an episode it starts again from the last commit, so it ends at most one
/// `pendingTimeoutSeconds` later than it would have.
#[derive(Clone, Debug, PartialEq)]
pub struct GrowthBackoff {
    pub until: Timestamp,
    pub roles: BTreeSet<String>,
}

/// Why a target write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Installs the binding annotation.
    Bind,
    /// Writes a planned vector and its decision.
    Commit,
    /// Restores a pending cohort's baseline after an admission timeout.
    Rollback,
    /// Restores the pre-scale-down vector after an aborted retirement.
    Restore,
    /// Removes both annotations (Shadow, suspend, deletion).
    Release,
}

impl WriteKind {
    /// The event action of this write.
    pub fn action(self) -> &'static str {
        match self {
            WriteKind::Bind => "Bind",
            WriteKind::Commit => "Commit",
            WriteKind::Rollback => "Rollback",
            WriteKind::Restore => "Restore",
            WriteKind::Release => "Release",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Bind => "bind",
            WriteKind::Commit => "commit",
            WriteKind::Rollback => "rollback",
            WriteKind::Restore => "restore",
            WriteKind::Release => "release",
        }
    }
}

/// The one target write of a pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    pub kind: WriteKind,
    pub ops: Vec<PatchOp>,
    /// The replica vector written (commit, rollback, restore).
    pub vector: Option<ReplicaVector>,
    pub decision_id: Option<String>,
    pub term: i64,
}

/// A Kubernetes event to emit on the scaler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    /// What was done (`events.k8s.io/v1` requires it): the write kind (`Bind`, `Commit`,
    /// `Rollback`, `Restore`, `Release`), or `Rebalance`, `Recover`, `Acknowledge`.
    pub action: &'static str,
    pub message: String,
}

/// One pass's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub write: Option<Write>,
    pub status: ModelDeploymentScalerStatus,
    /// The control plane moved (D23): write the status. When a target write is present, write
    /// the status only after it succeeded; a failed write is re-planned next pass.
    pub write_status: bool,
    pub events: Vec<Event>,
    /// The planner's result, when planning ran (for metrics and reports).
    pub plan: Option<Plan>,
    /// The policy that plan ran under (bounds, targets, interval: for metrics).
    pub policy: Option<mds_planner::Policy>,
    /// The planned commit is held because the API server refused those counts before
    /// (`Input::refused`): the write still fails, though none was tried.
    pub holds_refused_commit: bool,
    /// The earliest moment after `now` at which a pass could decide otherwise without new
    /// input (a cohort's admission timeout, an abort cooldown's end, a window or grace edge,
    /// a backoff end, a bound on a wait); `None` when nothing waits on the clock. The shell
    /// runs the next pass no later than this.
    pub wake_at: Option<Timestamp>,
}
