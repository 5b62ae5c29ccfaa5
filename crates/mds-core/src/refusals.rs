//! D35: a role whose retirements the target keeps aborting is not shrunk in a loop. Two
//! aborts in a row with the role unchanged in the target spec refuse its scale-down; the
//! refusal is kept in `status.scaleDownRefusals` so a restart does not retry at once.
//!
//! Releases: a change to the role in the target spec (anything but its count, or the router),
//! a scaler spec change, a retirement of the role that completes, or one retry after the hold
//! (one hour, doubling with each refused retry up to a day).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::status::{ScaleDownOutcome, ScaleDownRefusal};
use mds_api::target::ModelDeployment;

use crate::pass::Pass;
use crate::protocol::{self, RetirementState};
use crate::view::View;

/// Aborts in a row that refuse a role's scale-down.
pub const REFUSING_ABORTS: i32 = 2;
/// The first hold after a refusal; each refused retry doubles it.
pub const FIRST_HOLD_SECONDS: i64 = 3600;
/// The longest hold.
pub const MAX_HOLD_SECONDS: i64 = 24 * 3600;

/// The role's serving fingerprint on `md`, `None` when the role is gone.
fn fingerprint(md: &ModelDeployment, role: &str) -> Option<String> {
    let r = md.spec.roles.iter().find(|r| r.name == role)?;
    Some(r.serving_fingerprint(md.spec.router.as_ref()))
}

/// Drops the records a release ends: the role changed or left the target spec, the scaler
/// spec changed, or a retirement of the role completed. Runs every pass before the guards.
pub(crate) fn settle(pass: &mut Pass, view: &View) {
    if pass.status.scale_down_refusals.is_empty() {
        return;
    }
    let generation = pass.input.scaler.generation;
    let completed: Vec<String> = pass
        .status
        .last_scale_down
        .as_ref()
        .filter(|l| l.outcome == ScaleDownOutcome::Committed)
        .filter(|l| protocol::retirement_state(l, view.target) == RetirementState::Succeeded)
        .map(|l| {
            l.pre_scale_down_vector
                .iter()
                .filter(|(role, pre)| view.current.get(*role).is_some_and(|now| now < *pre))
                .map(|(role, _)| role.clone())
                .collect()
        })
        .unwrap_or_default();
    pass.status.scale_down_refusals.retain(|r| {
        r.scaler_generation >= generation
            && fingerprint(view.md, &r.name).as_deref() == Some(r.role_spec_hash.as_str())
            && !completed.contains(&r.name)
    });
}

/// Records an aborted retirement of `role` with the target's `reason`; returns the refusal's
/// words for the restore's event when the role's scale-down is refused from now on.
pub(crate) fn record_abort(
    pass: &mut Pass,
    view: &View,
    role: &str,
    reason: Option<&str>,
) -> Option<String> {
    let now = pass.now();
    let generation = pass.input.scaler.generation;
    let hash = fingerprint(view.md, role)?;
    let refusals = &mut pass.status.scale_down_refusals;
    // New records go in role order, so the status reads the same whatever the order of aborts.
    let index = match refusals.iter().position(|r| r.name == role) {
        Some(i) => i,
        None => {
            let i = refusals.partition_point(|r| r.name.as_str() < role);
            let record = ScaleDownRefusal {
                name: role.to_string(),
                ..ScaleDownRefusal::default()
            };
            refusals.insert(i, record);
            i
        }
    };
    let record = &mut refusals[index];
    // `settle` dropped a record whose role or scaler changed, so a record here counts.
    record.aborts = record.aborts.saturating_add(1);
    record.target_reason = reason.map(str::to_string);
    record.role_spec_hash = hash;
    record.scaler_generation = generation;
    if record.aborts < REFUSING_ABORTS {
        return None;
    }
    record.hold_seconds = if record.hold_seconds <= 0 {
        FIRST_HOLD_SECONDS
    } else {
        record.hold_seconds.saturating_mul(2).min(MAX_HOLD_SECONDS)
    };
    let retry = now + SignedDuration::from_secs(record.hold_seconds);
    record.retry_at = Some(Time(retry));
    Some(refusal_words(record))
}

/// The roles whose scale-down the target refuses at `now`.
pub(crate) fn refused_roles(pass: &Pass) -> Vec<String> {
    pass.status
        .scale_down_refusals
        .iter()
        .filter(|r| holds(r, pass.now()))
        .map(|r| r.name.clone())
        .collect()
}

fn holds(record: &ScaleDownRefusal, now: Timestamp) -> bool {
    record.aborts >= REFUSING_ABORTS && record.retry_at.as_ref().is_some_and(|t| now < t.0)
}

/// What holds, in words, for `Blocked`: each refused role, the target's reason and what
/// clears it. `None` when no role is refused.
pub(crate) fn blocked_message(pass: &Pass) -> Option<String> {
    let now = pass.now();
    let words: Vec<String> = pass
        .status
        .scale_down_refusals
        .iter()
        .filter(|r| holds(r, now))
        .map(refusal_words)
        .collect();
    (!words.is_empty()).then(|| words.join("; "))
}

fn refusal_words(record: &ScaleDownRefusal) -> String {
    let reason = record
        .target_reason
        .as_deref()
        .map_or(String::new(), |r| format!(" (\"{r}\")"));
    let retry = record
        .retry_at
        .as_ref()
        .map_or(String::new(), |t| format!(" until {}", t.0));
    format!(
        "the target aborted the last {} retirements of {}{reason}: its scale-down waits{retry} \
         and is then tried once; a change to the role in the target spec (engine arguments, \
         router, kind) or to this scaler's spec releases it now",
        record.aborts, record.name
    )
}
