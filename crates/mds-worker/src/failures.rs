//! A target write that did not land and was not a conflict, kept between passes: when it is
//! tried again, when it is reported, and what releases it. Pure: the caller passes `now`.
//!
//! - A refusal is reported at once; an unavailable API server once the write has failed for
//!   a sampling interval (twice in a row).
//! - The write is tried again after a capped exponential backoff: the interval after the
//!   first failure, then twice, four times… that, at most five minutes. Refused counts of a
//!   commit are not retried by time: the core holds that vector until the scaler spec or the
//!   target changes, and any other vector is tried at once.
//! - Released by a write that lands, a conflict (someone moved; the next pass re-plans), a
//!   change of the scaler spec (generation) or of the target (UID, generation or binding).

use jiff::{SignedDuration, Timestamp};
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::status::ReplicaVector;
use mds_api::target::ModelDeployment;
use mds_core::{FailedWrite, RefusedWrite, WriteKind};

use crate::ports::WriteError;

/// The longest wait between two attempts of a failing write.
pub const MAX_BACKOFF: SignedDuration = SignedDuration::from_secs(300);

/// What identifies the target for a failure: a change of any releases it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetMark {
    pub uid: Option<String>,
    pub generation: Option<i64>,
    pub binding: Option<String>,
}

impl TargetMark {
    pub fn of(md: Option<&ModelDeployment>) -> TargetMark {
        let Some(md) = md else {
            return TargetMark::default();
        };
        TargetMark {
            uid: md.metadata.uid.clone(),
            generation: md.metadata.generation,
            binding: md
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(BINDING_ANNOTATION).cloned()),
        }
    }
}

/// A failing target write.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub write: FailedWrite,
    /// The counts a commit, rollback or restore wrote.
    pub vector: Option<ReplicaVector>,
    /// Failed attempts in a row.
    pub attempts: u32,
    pub scaler_generation: Option<i64>,
    pub target: TargetMark,
}

/// The wait after `attempts` failures in a row: the interval, doubled per further failure,
/// at most `MAX_BACKOFF` (or the interval, when that is longer).
pub fn backoff(attempts: u32, interval: SignedDuration) -> SignedDuration {
    let cap = MAX_BACKOFF.max(interval);
    let factor = 1i32 << attempts.saturating_sub(1).min(16);
    interval.checked_mul(factor).map_or(cap, |d| d.min(cap))
}

impl Failure {
    /// The failure after an attempt of `kind` failed with `error` at `now`; `None` when the
    /// error is a conflict or a missing object, which the next pass re-plans.
    #[allow(clippy::too_many_arguments)]
    pub fn after(
        previous: Option<&Failure>,
        kind: WriteKind,
        error: &WriteError,
        vector: Option<&ReplicaVector>,
        now: Timestamp,
        interval: SignedDuration,
        scaler_generation: Option<i64>,
        target: TargetMark,
    ) -> Option<Failure> {
        let refused = match error {
            WriteError::Conflict(_) | WriteError::NotFound(_) => return None,
            WriteError::Refused(_) => true,
            WriteError::Unavailable(_) => false,
        };
        let previous = previous.filter(|p| p.write.kind == kind && p.write.refused == refused);
        let attempts = previous.map_or(0, |p| p.attempts) + 1;
        let since = previous.map_or(now, |p| p.write.since);
        let held = refused && kind == WriteKind::Commit && vector.is_some();
        Some(Failure {
            write: FailedWrite {
                kind,
                refused,
                message: error.message().to_string(),
                since,
                retry_at: (!held).then(|| now + backoff(attempts, interval)),
            },
            vector: vector.cloned(),
            attempts,
            scaler_generation,
            target,
        })
    }

    /// A change that releases the failure: the scaler spec or the target moved.
    pub fn released_by(&self, scaler_generation: Option<i64>, target: &TargetMark) -> bool {
        self.scaler_generation != scaler_generation || self.target != *target
    }

    /// The write of `kind` waits: its backoff has not run out. A pass that comes up to half
    /// an interval early counts as on time, so a pass's own lateness never costs an interval.
    pub fn holds(&self, kind: WriteKind, now: Timestamp, interval: SignedDuration) -> bool {
        let Some(retry_at) = self.write.retry_at else {
            return false;
        };
        kind == self.write.kind && now + interval / 2 < retry_at
    }

    /// The failure is shown: a refusal at once, an unavailable API server once the write has
    /// failed for an interval (or twice in a row).
    pub fn reportable(&self, now: Timestamp, interval: SignedDuration) -> bool {
        self.write.refused || self.attempts >= 2 || now >= self.write.since + interval
    }

    /// Refused counts the core must not send again (TARGET.md: a refusal is `Blocked`).
    pub fn refused_commit(&self) -> Option<RefusedWrite> {
        (self.write.kind == WriteKind::Commit && self.write.retry_at.is_none())
            .then(|| self.vector.clone())
            .flatten()
            .map(|vector| RefusedWrite {
                vector,
                message: self.write.message.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    const INTERVAL: SignedDuration = SignedDuration::from_secs(15);

    fn fail(previous: Option<&Failure>, error: WriteError, now: i64) -> Failure {
        fail_write(previous, WriteKind::Bind, error, None, now).unwrap()
    }

    /// The failure a write of `kind` (with `vector`) leaves at `now` on spec generation 1.
    fn fail_write(
        previous: Option<&Failure>,
        kind: WriteKind,
        error: WriteError,
        vector: Option<&ReplicaVector>,
        now: i64,
    ) -> Option<Failure> {
        Failure::after(
            previous,
            kind,
            &error,
            vector,
            at(now),
            INTERVAL,
            Some(1),
            TargetMark::default(),
        )
    }

    #[test]
    fn the_backoff_doubles_from_the_interval_up_to_five_minutes() {
        let waits: Vec<i64> = (1..=8).map(|n| backoff(n, INTERVAL).as_secs()).collect();
        assert_eq!(waits, [15, 30, 60, 120, 240, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX, INTERVAL).as_secs(), 300);
        // An interval above the cap waits one interval.
        let long = SignedDuration::from_secs(600);
        assert_eq!(backoff(9, long), long);
    }

    #[test]
    fn a_failing_write_waits_out_its_backoff_then_is_tried_again() {
        let unavailable = || WriteError::Unavailable("503".into());
        let first = fail(None, unavailable(), 0);
        // The next regular pass tries again, a little early or not; a forward pass does not.
        assert!(first.holds(WriteKind::Bind, at(5), INTERVAL));
        assert!(!first.holds(WriteKind::Bind, at(14), INTERVAL));
        assert!(
            !first.holds(WriteKind::Commit, at(5), INTERVAL),
            "another write"
        );
        let second = fail(Some(&first), unavailable(), 15);
        assert_eq!(second.attempts, 2);
        assert_eq!(second.write.since, at(0));
        assert!(second.holds(WriteKind::Bind, at(30), INTERVAL));
        assert!(!second.holds(WriteKind::Bind, at(45), INTERVAL));
    }

    #[test]
    fn an_outage_is_reported_after_an_interval_a_refusal_at_once() {
        let first = fail(None, WriteError::Unavailable("503".into()), 0);
        assert!(!first.reportable(at(5), INTERVAL));
        assert!(first.reportable(at(15), INTERVAL));
        let refused = fail(None, WriteError::Refused("denied".into()), 0);
        assert!(refused.reportable(at(0), INTERVAL));
        // A refusal after an outage starts a new failure.
        let after = fail(Some(&first), WriteError::Refused("denied".into()), 15);
        assert_eq!((after.attempts, after.write.since), (1, at(15)));
    }

    #[test]
    fn conflicts_release_and_refused_counts_are_held_by_the_core_not_by_time() {
        let first = fail(None, WriteError::Unavailable("503".into()), 0);
        let conflict = WriteError::Conflict("test failed".into());
        let none = Failure::after(
            Some(&first),
            WriteKind::Bind,
            &conflict,
            None,
            at(15),
            INTERVAL,
            Some(1),
            TargetMark::default(),
        );
        assert!(none.is_none());
        let vector: ReplicaVector = [("server".to_string(), 6)].into();
        let refused = fail_write(
            None,
            WriteKind::Commit,
            WriteError::Refused("names collide".into()),
            Some(&vector),
            0,
        )
        .unwrap();
        assert_eq!(refused.write.retry_at, None);
        assert!(!refused.holds(WriteKind::Commit, at(1), INTERVAL));
        assert_eq!(
            refused.refused_commit().map(|r| r.vector),
            Some(vector.clone())
        );
        // An unavailable commit is retried by time, and its counts are not held.
        let transient = fail_write(
            None,
            WriteKind::Commit,
            WriteError::Unavailable("503".into()),
            Some(&vector),
            0,
        )
        .unwrap();
        assert!(transient.refused_commit().is_none());
        assert!(transient.holds(WriteKind::Commit, at(1), INTERVAL));
    }

    #[test]
    fn a_spec_or_target_change_releases_a_failure() {
        let f = fail(None, WriteError::Refused("denied".into()), 0);
        assert!(!f.released_by(Some(1), &TargetMark::default()));
        assert!(f.released_by(Some(2), &TargetMark::default()));
        let moved = TargetMark {
            generation: Some(3),
            ..TargetMark::default()
        };
        assert!(f.released_by(Some(1), &moved));
    }
}
