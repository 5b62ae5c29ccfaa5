//! What a write that did not land means for the conditions (spec *Conditions*,
//! *Troubleshooting*): a bind or release is reported on `Bound` and `Active`, a commit, a
//! rollback or a restore on `Blocked`, each with the API server's message and a Warning
//! event, so a refusal or an outage is never a silent loop. Only the conditions change: the
//! records stay as the last status that landed wrote them.

use jiff::Timestamp;
use mds_api::status::ModelDeploymentScalerStatus;

use crate::conditions::{self, ACTIVE, BLOCKED, BOUND, Report};
use crate::{Event, FailedWrite, Scaler, WriteKind};

/// The `Blocked` message of refused counts the core holds (the same words whether the failed
/// pass or a later one reports it, so the hold writes no second status for its wording).
pub(crate) fn held_commit(message: &str) -> String {
    format!(
        "the target refused the planned counts ({message}); they are held until the scaler spec or the target changes"
    )
}

fn what(kind: WriteKind, target: &str) -> String {
    match kind {
        WriteKind::Bind => format!("binding ModelDeployment {target:?}"),
        WriteKind::Release => format!("releasing the binding of ModelDeployment {target:?}"),
        WriteKind::Commit => format!("committing the planned counts to ModelDeployment {target:?}"),
        WriteKind::Rollback => {
            format!("rolling ModelDeployment {target:?} back to the pending cohort's baseline")
        }
        WriteKind::Restore => format!(
            "restoring the counts of ModelDeployment {target:?} from before the aborted scale-down"
        ),
    }
}

/// Why the write did not land and when it is tried again.
fn detail(failure: &FailedWrite, target: &str) -> String {
    let what = what(failure.kind, target);
    let message = &failure.message;
    if failure.kind == WriteKind::Commit && failure.refused && failure.retry_at.is_none() {
        return held_commit(message);
    }
    let next = match failure.retry_at {
        Some(t) => format!("tried again at {t}"),
        None => "tried again".to_string(),
    };
    if failure.refused {
        format!(
            "{what} was refused: {message}; {next}, or at once when the scaler spec or the target changes"
        )
    } else {
        format!(
            "{what} has failed since {}: {message}; {next}, backing off while it fails",
            failure.since
        )
    }
}

/// The owning conditions of a release, which keep the reasons of why the scaler releases.
fn release(scaler: &Scaler, detail: &str) -> Vec<Report> {
    if scaler.deleting {
        let message = format!(
            "the scaler is being deleted and still holds the binding: {detail}; its finalizer stays until the release lands"
        );
        vec![
            Report::new(BOUND, true, "Bound", message.clone()),
            Report::new(ACTIVE, false, "Suspended", message),
        ]
    } else if scaler.spec.suspend.unwrap_or(false) {
        let message = format!("suspend is true, but {detail}");
        vec![
            Report::new(BOUND, false, "Suspended", message.clone()),
            Report::new(ACTIVE, false, "Suspended", message),
        ]
    } else {
        let message = format!("mode is Shadow, but {detail}");
        vec![
            Report::new(BOUND, true, "Bound", message.clone()),
            Report::new(ACTIVE, false, "ShadowMode", message),
        ]
    }
}

/// The scaler's status as last written with `failure` reported on the conditions that own
/// the write, and the Warning event that says it (`WriteRefused` for a refusal,
/// `WriteFailing` for a write that keeps failing). The shell writes the status when it
/// differs from the one stored.
pub fn report_failed_write(
    scaler: &Scaler,
    failure: &FailedWrite,
    now: Timestamp,
) -> (ModelDeploymentScalerStatus, Event) {
    let detail = detail(failure, &scaler.spec.target_ref.name);
    // No spec reason names a failed write; a refused bind leaves the target unclaimed by us,
    // which `InvalidBinding` describes best.
    let reports = match failure.kind {
        WriteKind::Bind => vec![
            Report::new(BOUND, false, "InvalidBinding", detail.clone()),
            Report::new(ACTIVE, false, "InvalidBinding", detail.clone()),
        ],
        WriteKind::Release => release(scaler, &detail),
        WriteKind::Commit => vec![Report::new(BLOCKED, true, "PacingBounded", detail.clone())],
        WriteKind::Rollback => vec![Report::new(
            BLOCKED,
            true,
            "ResourceExhausted",
            detail.clone(),
        )],
        WriteKind::Restore => vec![Report::new(
            BLOCKED,
            true,
            "ScaleDownAborted",
            detail.clone(),
        )],
    };
    let mut status = scaler.status.clone();
    status.conditions =
        conditions::apply(&scaler.status.conditions, &reports, scaler.generation, now);
    let event = Event {
        warning: true,
        reason: if failure.refused {
            "WriteRefused"
        } else {
            "WriteFailing"
        },
        action: failure.kind.action(),
        message: detail,
    };
    (status, event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_api::spec::ModelDeploymentScalerSpec;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn spec(extra: serde_json::Value) -> ModelDeploymentScalerSpec {
        let mut spec = serde_json::json!({
            "targetRef": {"name": "llm"}, "mode": "Active",
            "roles": [{"name": "server", "maxReplicas": 8}],
            "algorithm": {"proportional": {"metric": "QueueDepth",
                "roleTargets": [{"name": "server", "target": "10"}]}}
        });
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(spec).unwrap()
    }

    fn failure(kind: WriteKind, refused: bool) -> FailedWrite {
        FailedWrite {
            kind,
            refused,
            message: "admission webhook \"fence\" denied the request: no".into(),
            since: at(0),
            retry_at: Some(at(30)),
        }
    }

    /// (type, status, reason) of each condition the report sets.
    fn reported(scaler: &Scaler, failure: &FailedWrite) -> Vec<(String, String, String)> {
        let (status, event) = report_failed_write(scaler, failure, at(15));
        assert!(event.warning);
        assert_eq!(event.action, failure.kind.action());
        assert!(
            event.message.contains("denied the request: no"),
            "{event:?}"
        );
        status
            .conditions
            .iter()
            .inspect(|c| assert!(c.message.contains("denied the request: no"), "{c:?}"))
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn triple(t: &str, s: &str, r: &str) -> (String, String, String) {
        (t.into(), s.into(), r.into())
    }

    #[test]
    fn each_failed_write_is_reported_on_the_condition_that_owns_it_with_a_spec_reason() {
        let status = Default::default();
        let active = spec(serde_json::json!({}));
        let scaler = |spec, deleting| Scaler {
            name: "llm",
            uid: "u",
            generation: 3,
            spec,
            status: &status,
            deleting,
        };
        let s = scaler(&active, false);
        assert_eq!(
            reported(&s, &failure(WriteKind::Bind, true)),
            [
                triple(BOUND, "False", "InvalidBinding"),
                triple(ACTIVE, "False", "InvalidBinding")
            ]
        );
        for (kind, reason) in [
            (WriteKind::Commit, "PacingBounded"),
            (WriteKind::Rollback, "ResourceExhausted"),
            (WriteKind::Restore, "ScaleDownAborted"),
        ] {
            assert_eq!(
                reported(&s, &failure(kind, false)),
                [triple(BLOCKED, "True", reason)]
            );
        }
        let deleting = scaler(&active, true);
        assert_eq!(
            reported(&deleting, &failure(WriteKind::Release, true)),
            [
                triple(BOUND, "True", "Bound"),
                triple(ACTIVE, "False", "Suspended")
            ]
        );
        let suspended = spec(serde_json::json!({"suspend": true}));
        assert_eq!(
            reported(
                &scaler(&suspended, false),
                &failure(WriteKind::Release, true)
            ),
            [
                triple(BOUND, "False", "Suspended"),
                triple(ACTIVE, "False", "Suspended")
            ]
        );
        let shadow = spec(serde_json::json!({"mode": "Shadow"}));
        assert_eq!(
            reported(&scaler(&shadow, false), &failure(WriteKind::Release, false)),
            [
                triple(BOUND, "True", "Bound"),
                triple(ACTIVE, "False", "ShadowMode")
            ]
        );
    }

    #[test]
    fn a_refusal_and_an_outage_say_what_releases_them() {
        let status = Default::default();
        let active = spec(serde_json::json!({}));
        let s = Scaler {
            name: "llm",
            uid: "u",
            generation: 3,
            spec: &active,
            status: &status,
            deleting: false,
        };
        let (_, refused) = report_failed_write(&s, &failure(WriteKind::Bind, true), at(15));
        assert_eq!(refused.reason, "WriteRefused");
        assert!(
            refused
                .message
                .contains("binding ModelDeployment \"llm\" was refused")
        );
        assert!(
            refused
                .message
                .contains("when the scaler spec or the target changes")
        );
        let (status, failing) = report_failed_write(&s, &failure(WriteKind::Commit, false), at(15));
        assert_eq!(failing.reason, "WriteFailing");
        assert!(
            failing.message.contains("has failed since"),
            "{}",
            failing.message
        );
        assert!(failing.message.contains(&at(30).to_string()));
        assert_eq!(status.conditions[0].observed_generation, Some(3));
        // Refused counts are held, in the words of the hold.
        let held = FailedWrite {
            retry_at: None,
            ..failure(WriteKind::Commit, true)
        };
        let (_, event) = report_failed_write(&s, &held, at(15));
        assert_eq!(event.message, held_commit(&held.message));
    }
}
