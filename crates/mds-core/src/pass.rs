//! The pass under way: the status it builds, the conditions and events it reports, its one
//! write, and what finishing needs from the owner's phases.

use jiff::Timestamp;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_planner::{Plan, Policy};

use crate::conditions::{ACTIVE, BOUND, Report};
use crate::{Event, Input, Write};

pub(crate) struct Pass<'a> {
    pub(crate) input: &'a Input<'a>,
    pub(crate) status: ModelDeploymentScalerStatus,
    pub(crate) reports: Vec<Report>,
    pub(crate) events: Vec<Event>,
    pub(crate) write: Option<Write>,
    pub(crate) plan: Option<Plan>,
    /// The policy planning ran under, for the planner's edges in `wake_at`.
    pub(crate) policy: Option<Policy>,
    /// The planned commit was refused before and is held: why.
    pub(crate) refused: Option<String>,
    /// What a retirement hold on scale-down waits for, in words.
    pub(crate) scale_down_wait: Option<String>,
    /// The reported retirement stands in one phase past its budget and
    /// `pendingTimeoutSeconds` (D36): what to look at, in words.
    pub(crate) retirement_stuck: Option<String>,
}

impl<'a> Pass<'a> {
    pub(crate) fn new(input: &'a Input<'a>) -> Pass<'a> {
        let mut status = input.scaler.status.clone();
        status.observed_generation = Some(input.scaler.generation);
        Pass {
            input,
            status,
            reports: vec![],
            events: vec![],
            write: None,
            plan: None,
            policy: None,
            refused: None,
            scale_down_wait: None,
            retirement_stuck: None,
        }
    }

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

    /// `Bound` and `Active` false for the same reason: this scaler does not own the target.
    pub(crate) fn not_owning(&mut self, reason: &'static str, message: String) {
        self.report(BOUND, false, reason, message.clone());
        self.report(ACTIVE, false, reason, message);
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
