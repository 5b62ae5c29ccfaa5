//! The one order a pass's outcome is carried out in (spec, *Binding fence* and *Pacing and
//! guards*; D23): the target write first; the status the core asks for and the events only
//! once that write landed or none was due; and a write that did not land puts the memory
//! back as it was before the pass, so the next pass plans again from where this one started
//! instead of from a decision the target never saw. The worker (the operator and the
//! simulator run it) and the core tests' world carry out every pass through [`carry_out`];
//! what a write means to each is its [`Effects`].

use std::future::Future;

use mds_api::status::ModelDeploymentScalerStatus;
use mds_core::{Event, Memory, Outcome, Write};

/// What carrying out an outcome does to a cluster, with the caller's own bookkeeping.
pub trait Effects {
    /// Makes the target write; `true` when it landed.
    fn write_target(&mut self, write: &Write) -> impl Future<Output = bool>;
    /// Stores the status the core computed (only after the write landed, or with none due).
    fn write_status(&mut self, status: &ModelDeploymentScalerStatus) -> impl Future<Output = ()>;
    /// Records one of the core's events (after the write landed, or with none due).
    fn emit(&mut self, event: &Event) -> impl Future<Output = ()>;
    /// After a write that did not land, once the memory is back as it was before the pass.
    fn not_landed(&mut self) -> impl Future<Output = ()>;
}

/// Carries out `outcome`, which the core computed moving `memory` on from `before`: returns
/// whether the target write landed (`true` when none was due).
pub async fn carry_out<E: Effects>(
    effects: &mut E,
    outcome: &Outcome,
    memory: &mut Memory,
    before: Memory,
) -> bool {
    let landed = match &outcome.write {
        Some(write) => effects.write_target(write).await,
        None => true,
    };
    if landed {
        if outcome.write_status {
            effects.write_status(&outcome.status).await;
        }
        for event in &outcome.events {
            effects.emit(event).await;
        }
    } else {
        *memory = before;
        effects.not_landed().await;
    }
    landed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_cluster::ready;
    use mds_core::{RetirementPhase, WriteKind};

    /// Every call, in order.
    struct Recorded {
        lands: bool,
        calls: Vec<String>,
    }

    impl Effects for Recorded {
        async fn write_target(&mut self, write: &Write) -> bool {
            self.calls.push(format!("target {}", write.kind.as_str()));
            self.lands
        }
        async fn write_status(&mut self, _: &ModelDeploymentScalerStatus) {
            self.calls.push("status".into());
        }
        async fn emit(&mut self, event: &Event) {
            self.calls.push(format!("event {}", event.reason));
        }
        async fn not_landed(&mut self) {
            self.calls.push("not landed".into());
        }
    }

    fn outcome(write: bool) -> Outcome {
        Outcome {
            write: write.then(|| Write {
                kind: WriteKind::Commit,
                ops: Vec::new(),
                vector: None,
                decision_id: None,
                term: 1,
            }),
            status: ModelDeploymentScalerStatus::default(),
            write_status: true,
            events: vec![Event {
                warning: false,
                reason: "ScaledUp",
                action: "Commit",
                message: String::new(),
            }],
            plan: None,
            policy: None,
            holds_refused_commit: false,
            wake_at: None,
        }
    }

    /// The memory a pass moved on to.
    fn moved() -> Memory {
        Memory {
            retirement_phase: Some(RetirementPhase {
                role: "decode".into(),
                ordinal: 2,
                state: "Draining".into(),
                since: jiff::Timestamp::UNIX_EPOCH,
                warned: false,
            }),
            ..Memory::default()
        }
    }

    fn run(lands: bool, write: bool) -> (bool, Vec<String>, Memory) {
        let mut effects = Recorded {
            lands,
            calls: Vec::new(),
        };
        let mut memory = moved();
        let landed = ready(carry_out(
            &mut effects,
            &outcome(write),
            &mut memory,
            Memory::default(),
        ));
        (landed, effects.calls, memory)
    }

    #[test]
    fn a_landed_write_comes_before_the_status_and_the_events_and_keeps_the_new_memory() {
        let (landed, calls, memory) = run(true, true);
        assert!(landed);
        assert_eq!(calls, ["target commit", "status", "event ScaledUp"]);
        assert_eq!(memory, moved());
    }

    #[test]
    fn a_write_that_does_not_land_leaves_no_status_no_event_and_the_memory_before_the_pass() {
        let (landed, calls, memory) = run(false, true);
        assert!(!landed);
        assert_eq!(calls, ["target commit", "not landed"]);
        assert_eq!(memory, Memory::default());
    }

    #[test]
    fn with_no_write_due_the_status_and_events_go_out() {
        let (landed, calls, memory) = run(false, false);
        assert!(landed);
        assert_eq!(calls, ["status", "event ScaledUp"]);
        assert_eq!(memory, moved());
    }
}
