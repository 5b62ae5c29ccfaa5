//! When a scaler's next pass runs. Passes come every `sampling.intervalSeconds`, never faster.
//! A change of the scaler's spec, of its target, or of the target's binding may bring one pass
//! forward, at most once per interval, so a burst of watch events cannot speed sampling up.
//! The core's `wake_at` (the next moment its decision could change without new input) brings
//! the next pass forward to that moment, never closer than [`WAKE_FLOOR`] to the last one.
//! First passes are spread over the interval by a per-scaler offset, so a thousand scalers do
//! not tick together after a start or a change of leader. Pure: the schedule works on
//! `Timestamp`s the caller passes; [`Clock`] is where the shell reads them.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The least time between two passes a `wake_at` brings forward: a `wake_at` at or before the
/// last pass (its edge already passed) runs the next pass this long after it, never a spin.
pub const WAKE_FLOOR: Duration = Duration::from_secs(1);

/// Where the schedule's time comes from: in the shell a monotonic clock over tokio's (paused
/// with it in tests); in tests here, any moments a test chooses.
pub trait Clock {
    fn now(&self) -> Timestamp;
}

/// A moment `d` after `t`, saturating.
fn plus(t: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// What may bring a pass forward: the scaler's generation and deletion, the target's identity,
/// generation and binding annotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    pub scaler_generation: i64,
    pub scaler_deleting: bool,
    pub target_uid: Option<String>,
    pub target_generation: Option<i64>,
    pub binding: Option<String>,
}

/// The next step of a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Run a pass now; `forward` when a change brought it forward.
    Run { forward: bool },
    /// Nothing to do before then (unless woken by a change).
    Sleep(Timestamp),
}

#[derive(Clone, Debug)]
pub struct Schedule {
    first_due: Timestamp,
    last_pass: Option<Timestamp>,
    last_forward: Option<Timestamp>,
    seen: Option<Fingerprint>,
    /// The last pass's `wake_at`, in this schedule's time.
    wake_at: Option<Timestamp>,
}
/// A stable offset within `interval` for the scaler with this UID (FNV-1a, so it does not
/// change between runs).
pub fn offset(uid: &str, interval: Duration) -> Duration {
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for b in bytes {
                self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100000001b3);
            }
        }
    }
    let mut h = Fnv(0xcbf29ce484222325);
    uid.hash(&mut h);
    let millis = interval.as_millis().max(1) as u64;
    Duration::from_millis(h.finish() % millis)
}

impl Schedule {
    /// A schedule whose first pass is due at `first_due`.
    pub fn new(first_due: Timestamp) -> Schedule {
        Schedule {
            first_due,
            last_pass: None,
            last_forward: None,
            seen: None,
            wake_at: None,
        }
    }

    pub fn next(&self, now: Timestamp, interval: Duration, current: &Fingerprint) -> Next {
        let Some(last) = self.last_pass else {
            return if now >= self.first_due {
                Next::Run { forward: false }
            } else {
                Next::Sleep(self.first_due)
            };
        };
        let mut due = plus(last, interval);
        if let Some(wake) = self.wake_at {
            due = due.min(wake.max(plus(last, WAKE_FLOOR)));
        }
        if now >= due {
            return Next::Run { forward: false };
        }
        let changed = self.seen.as_ref() != Some(current);
        let may_forward = self.last_forward.is_none_or(|f| now >= plus(f, interval));
        if changed && may_forward {
            return Next::Run { forward: true };
        }
        Next::Sleep(due)
    }

    /// Records a pass that started at `at` with what it saw; its `wake_at` is unknown until
    /// [`Schedule::wake`].
    pub fn ran(&mut self, at: Timestamp, forward: bool, seen: Fingerprint) {
        self.last_pass = Some(at);
        if forward {
            self.last_forward = Some(at);
        }
        self.seen = Some(seen);
        self.wake_at = None;
    }

    /// The last pass's `wake_at`, converted to this schedule's time: the next pass runs no
    /// later than it (and no sooner than [`WAKE_FLOOR`] after the last one).
    pub fn wake(&mut self, at: Option<Timestamp>) {
        self.wake_at = at;
    }
}

/// `wake_at`, stamped on the wall clock a pass ran at (`stamped`), in the time of a schedule
/// whose clock read `at` at that moment: the same distance ahead.
pub fn convert(wake_at: Timestamp, stamped: Timestamp, at: Timestamp) -> Timestamp {
    let ahead = wake_at.duration_since(stamped);
    at.saturating_add(ahead).unwrap_or(if ahead.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(generation: i64) -> Fingerprint {
        Fingerprint {
            scaler_generation: generation,
            ..Fingerprint::default()
        }
    }

    #[test]
    fn passes_come_every_interval_and_changes_bring_at_most_one_forward_per_interval() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let interval = Duration::from_secs(15);
        let s = |secs: u64| plus(t0, Duration::from_secs(secs));
        let mut schedule = Schedule::new(s(3));
        assert_eq!(schedule.next(s(0), interval, &fp(1)), Next::Sleep(s(3)));
        assert_eq!(
            schedule.next(s(3), interval, &fp(1)),
            Next::Run { forward: false }
        );
        schedule.ran(s(3), false, fp(1));
        // Nothing changed: wait for the interval.
        assert_eq!(schedule.next(s(5), interval, &fp(1)), Next::Sleep(s(18)));
        // A spec edit brings a pass forward...
        assert_eq!(
            schedule.next(s(6), interval, &fp(2)),
            Next::Run { forward: true }
        );
        schedule.ran(s(6), true, fp(2));
        // ...but another change within the interval waits for the regular pass.
        assert_eq!(schedule.next(s(8), interval, &fp(3)), Next::Sleep(s(21)));
        assert_eq!(
            schedule.next(s(21), interval, &fp(3)),
            Next::Run { forward: false }
        );
        schedule.ran(s(21), false, fp(3));
        // Once an interval has passed since the last forward pass, a change may again.
        assert_eq!(
            schedule.next(s(22), interval, &fp(4)),
            Next::Run { forward: true }
        );
    }

    #[test]
    fn no_two_passes_come_closer_than_the_interval_without_a_change() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let interval = Duration::from_secs(15);
        let mut schedule = Schedule::new(t0);
        let mut last: Option<Timestamp> = None;
        for step in 0..200u64 {
            let now = plus(t0, Duration::from_millis(step * 700));
            if let Next::Run { forward } = schedule.next(now, interval, &fp(1)) {
                assert!(!forward);
                if let Some(l) = last {
                    assert!(now.duration_since(l) >= SignedDuration::try_from(interval).unwrap());
                }
                schedule.ran(now, forward, fp(1));
                last = Some(now);
            }
        }
    }

    #[test]
    fn offsets_spread_scalers_over_the_interval_and_are_stable() {
        let interval = Duration::from_secs(15);
        let offsets: Vec<Duration> = (0..1000)
            .map(|i| offset(&format!("uid-{i}"), interval))
            .collect();
        assert!(offsets.iter().all(|o| *o < interval));
        let early = offsets
            .iter()
            .filter(|o| **o < Duration::from_millis(7500))
            .count();
        assert!(
            (400..600).contains(&early),
            "{early} of 1000 in the first half"
        );
        assert_eq!(offset("uid-1", interval), offset("uid-1", interval));
    }

    #[test]
    fn a_wake_at_brings_the_next_pass_forward_but_never_closer_than_the_floor() {
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let s = |secs: u64| plus(t0, Duration::from_secs(secs));
        let interval = Duration::from_secs(15);
        let mut schedule = Schedule::new(s(0));
        schedule.ran(s(0), false, fp(1));
        // Earlier than the interval: the pass comes then.
        schedule.wake(Some(s(4)));
        assert_eq!(schedule.next(s(1), interval, &fp(1)), Next::Sleep(s(4)));
        assert_eq!(
            schedule.next(s(4), interval, &fp(1)),
            Next::Run { forward: false }
        );
        schedule.ran(s(4), false, fp(1));
        // Later than the interval: the interval's pass comes first.
        schedule.wake(Some(s(100)));
        assert_eq!(schedule.next(s(5), interval, &fp(1)), Next::Sleep(s(19)));
        // Already passed: at once, but not within the floor of the last pass.
        schedule.ran(s(19), false, fp(1));
        schedule.wake(Some(s(10)));
        assert_eq!(
            schedule.next(s(19), interval, &fp(1)),
            Next::Sleep(plus(s(19), WAKE_FLOOR))
        );
        assert_eq!(
            schedule.next(s(20), interval, &fp(1)),
            Next::Run { forward: false }
        );
        // A pass without a wake_at falls back to the interval.
        schedule.ran(s(20), false, fp(1));
        assert_eq!(schedule.next(s(21), interval, &fp(1)), Next::Sleep(s(35)));
    }

    #[test]
    fn a_wake_at_converts_by_its_distance_from_the_pass_s_wall_clock() {
        let wall = Timestamp::from_second(1_900_000_000).unwrap();
        let mono = Timestamp::from_second(1_800_000_000).unwrap();
        let ahead = plus(wall, Duration::from_secs(7));
        assert_eq!(
            convert(ahead, wall, mono),
            plus(mono, Duration::from_secs(7))
        );
        let behind = wall - SignedDuration::from_secs(3);
        assert_eq!(
            convert(behind, wall, mono),
            mono - SignedDuration::from_secs(3)
        );
        assert_eq!(
            convert(Timestamp::MAX, Timestamp::MIN, mono),
            Timestamp::MAX
        );
    }
}
