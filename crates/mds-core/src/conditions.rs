//! The four conditions (spec, *Conditions*): `lastTransitionTime` moves only when the status
//! does, and every condition carries the scaler generation it was computed from.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const BOUND: &str = "Bound";
pub const ACTIVE: &str = "Active";
pub const METRICS_READY: &str = "MetricsReady";
pub const BLOCKED: &str = "Blocked";
/// `Blocked`'s reason while the target's latest version does not decode into our model.
pub const TARGET_UNREADABLE: &str = "TargetUnreadable";

/// A condition to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub condition_type: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Report {
    pub fn new(
        condition_type: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Report {
        Report {
            condition_type,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Applies reports to the condition list in a fixed order (Bound, Active, MetricsReady,
/// Blocked), keeping each condition's transition time unless its status changed.
pub fn apply(
    existing: &[Condition],
    reports: &[Report],
    generation: i64,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = Vec::new();
    for kind in [BOUND, ACTIVE, METRICS_READY, BLOCKED] {
        let previous = existing.iter().find(|c| c.type_ == kind);
        match reports.iter().find(|r| r.condition_type == kind) {
            Some(r) => {
                let status = if r.status { "True" } else { "False" };
                let transition = match previous {
                    Some(p) if p.status == status => p.last_transition_time.clone(),
                    _ => Time(now),
                };
                out.push(Condition {
                    type_: kind.to_string(),
                    status: status.to_string(),
                    reason: r.reason.to_string(),
                    message: r.message.clone(),
                    observed_generation: Some(generation),
                    last_transition_time: transition,
                });
            }
            // An early exit leaves the older condition in place, with its older generation.
            None => out.extend(previous.cloned()),
        }
    }
    out
}

/// The reason of a condition, if present.
pub fn reason<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.reason.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let first = apply(&[], &[Report::new(BOUND, true, "Bound", "ok")], 1, at(0));
        let same = apply(
            &first,
            &[Report::new(BOUND, true, "Bound", "still ok")],
            2,
            at(10),
        );
        assert_eq!(same[0].last_transition_time, Time(at(0)));
        assert_eq!(same[0].observed_generation, Some(2));
        assert_eq!(same[0].message, "still ok");
        let flipped = apply(
            &same,
            &[Report::new(BOUND, false, "TargetNotFound", "gone")],
            2,
            at(20),
        );
        assert_eq!(flipped[0].last_transition_time, Time(at(20)));
    }

    #[test]
    fn unreported_conditions_keep_their_older_generation() {
        let first = apply(
            &[],
            &[
                Report::new(BOUND, true, "Bound", ""),
                Report::new(BLOCKED, false, "Ready", ""),
            ],
            1,
            at(0),
        );
        let later = apply(
            &first,
            &[Report::new(BOUND, false, "InvalidBinding", "")],
            2,
            at(5),
        );
        assert_eq!(later.len(), 2);
        assert_eq!(later[1].type_, BLOCKED);
        assert_eq!(later[1].observed_generation, Some(1));
    }
}
