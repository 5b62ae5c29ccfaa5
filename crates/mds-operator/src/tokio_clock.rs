//! The shell's clock: monotonic `Timestamp`s over tokio's clock, for the worker crate's
//! schedule and for stamping when a scraped page arrived.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use mds_worker::schedule::Clock;

/// Timestamps that follow tokio's monotonic clock from the moment of creation, anchored at
/// the wall clock then: a wall-clock step does not move the schedule, and paused tokio time
/// pauses it.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: Timestamp,
    at: tokio::time::Instant,
}

impl TokioClock {
    pub fn new(origin: Timestamp) -> TokioClock {
        TokioClock {
            origin,
            at: tokio::time::Instant::now(),
        }
    }

    /// The tokio instant of `at` (now when `at` has passed), for `sleep_until`.
    pub fn instant(&self, at: Timestamp) -> tokio::time::Instant {
        let now = tokio::time::Instant::now();
        let ahead = at.duration_since(self.now());
        now + Duration::try_from(ahead).unwrap_or(Duration::ZERO)
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.at.elapsed()).unwrap_or(SignedDuration::MAX);
        self.origin
            .saturating_add(elapsed)
            .unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_worker::schedule::{Fingerprint, Next, Schedule};

    fn fp(generation: i64) -> Fingerprint {
        Fingerprint {
            scaler_generation: generation,
            ..Fingerprint::default()
        }
    }

    /// The shell's loop in small: on paused tokio time, a pass whose outcome wakes 4 s later
    /// is followed by a pass 4 s later, not at the interval; a wake_at in the past never
    /// spins.
    #[tokio::test(start_paused = true)]
    async fn on_paused_time_a_pass_comes_at_wake_at_before_the_interval() {
        let clock = TokioClock::new(Timestamp::from_second(1_800_000_000).unwrap());
        let interval = Duration::from_secs(15);
        let start = tokio::time::Instant::now();
        let mut schedule = Schedule::new(clock.now());
        let mut passes = Vec::new();
        // Each pass's outcome: wake 4 s later, then 1 h in the past, then nothing.
        let wakes = [Some(4), Some(-3600), None, None];
        while passes.len() < wakes.len() {
            match schedule.next(clock.now(), interval, &fp(1)) {
                Next::Sleep(until) => tokio::time::sleep_until(clock.instant(until)).await,
                Next::Run { forward } => {
                    let at = clock.now();
                    schedule.ran(at, forward, fp(1));
                    passes.push(start.elapsed());
                    let wake = wakes[passes.len() - 1].map(|s| at + SignedDuration::from_secs(s));
                    schedule.wake(wake);
                }
            }
        }
        let secs: Vec<u64> = passes.iter().map(|d| d.as_secs()).collect();
        assert_eq!(secs, vec![0, 4, 5, 20]);
    }
}
