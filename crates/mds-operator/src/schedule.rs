//! When a scaler's next pass runs. Passes come every `sampling.intervalSeconds`, never faster.
//! A change of the scaler's spec, of its target, or of the target's binding may bring one pass
//! forward, at most once per interval, so a burst of watch events cannot speed sampling up.
//! First passes are spread over the interval by a per-scaler offset, so a thousand scalers do
//! not tick together after a start or a change of leader. Pure: the caller passes the time.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use tokio::time::Instant;

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
    Sleep(Instant),
}

#[derive(Clone, Debug)]
pub struct Schedule {
    first_due: Instant,
    last_pass: Option<Instant>,
    last_forward: Option<Instant>,
    seen: Option<Fingerprint>,
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
    pub fn new(first_due: Instant) -> Schedule {
        Schedule {
            first_due,
            last_pass: None,
            last_forward: None,
            seen: None,
        }
    }

    pub fn next(&self, now: Instant, interval: Duration, current: &Fingerprint) -> Next {
        let Some(last) = self.last_pass else {
            return if now >= self.first_due {
                Next::Run { forward: false }
            } else {
                Next::Sleep(self.first_due)
            };
        };
        let due = last + interval;
        if now >= due {
            return Next::Run { forward: false };
        }
        let changed = self.seen.as_ref() != Some(current);
        let may_forward = self.last_forward.is_none_or(|f| now >= f + interval);
        if changed && may_forward {
            return Next::Run { forward: true };
        }
        Next::Sleep(due)
    }

    /// Records a pass that started at `at` with what it saw.
    pub fn ran(&mut self, at: Instant, forward: bool, seen: Fingerprint) {
        self.last_pass = Some(at);
        if forward {
            self.last_forward = Some(at);
        }
        self.seen = Some(seen);
    }
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
        let t0 = Instant::now();
        let interval = Duration::from_secs(15);
        let s = |secs: u64| t0 + Duration::from_secs(secs);
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
        let t0 = Instant::now();
        let interval = Duration::from_secs(15);
        let mut schedule = Schedule::new(t0);
        let mut last: Option<Instant> = None;
        for step in 0..200u64 {
            let now = t0 + Duration::from_millis(step * 700);
            if let Next::Run { forward } = schedule.next(now, interval, &fp(1)) {
                assert!(!forward);
                if let Some(l) = last {
                    assert!(now - l >= interval);
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
}
