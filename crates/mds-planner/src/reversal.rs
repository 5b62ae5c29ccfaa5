//! D33: a shrink the latency guard reverses is not retried at the same load.
//!
//! When a commit of ours lowers a role from N to M and the latency guard asks for growth of
//! that role within one scale-down stabilization window of the commit, the role records a
//! *reversal*: M replicas breached a latency target at the demand D the shrink was planned
//! on. That teaches a known-good load per replica, D / N. While the reversal stands the role is
//! not planned below N while its demand is above M × D / N (`LatencyGuardHold`). Releases: the
//! demand falls to M × D / N or below, the scaler spec changes, or the hold time passes (1 h
//! for the role's first reversal, doubling with each reversal after a release, up to 8 h;
//! back to 1 h after a shrink the guard did not reverse). In memory only: a restart costs at
//! most one more reversal. Growth is never held by it.

use jiff::{SignedDuration, Timestamp};

use crate::algorithms::Recommendation;
use crate::reason::Reason;

/// The hold time of a role's first reversal, in seconds (D33).
pub const FIRST_HOLD_SECONDS: i64 = 3600;
/// The longest hold time, in seconds (D33).
pub const LONGEST_HOLD_SECONDS: i64 = 8 * 3600;

/// One shrink commit of ours, watched for a reversal for one scale-down window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shrink {
    pub at: Timestamp,
    pub from: i32,
    pub to: i32,
    /// The role's stable-window demand when it was committed, tokens/s (`None`: unknown).
    pub demand: Option<f64>,
}

/// A shrink the latency guard reversed: M replicas breached at demand D.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reversal {
    pub from: i32,
    pub to: i32,
    pub demand: f64,
    /// The reading that breached (`TTFT` or `ITL`).
    pub reading: &'static str,
    pub at: Timestamp,
    /// When the hold time runs out.
    pub until: Timestamp,
}

impl Reversal {
    /// The demand at or below which M replicas carry no more per replica than N carried.
    pub fn release_demand(&self) -> f64 {
        self.to as f64 * self.demand / self.from as f64
    }

    /// "1 replica breached the ITL target at 12000 tokens/s at 10:42".
    pub fn describe(&self) -> String {
        format!(
            "{} replica{} breached the {} target at {:.0} tokens/s at {}",
            self.to,
            if self.to == 1 { "" } else { "s" },
            self.reading,
            self.demand,
            clock(self.at)
        )
    }
}

/// What a role remembers of its shrinks and their reversals.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct ShrinkMemory {
    /// Our last shrink commit, while a reversal of it can still be recorded.
    pub watched: Option<Shrink>,
    /// The reversal in force.
    pub reversal: Option<Reversal>,
    /// Reversals since the last shrink the guard did not reverse (sets the hold time).
    pub reversals: u32,
}

/// The hold time after `earlier` reversals: 1 h, doubling, at most 8 h.
pub fn hold_seconds(earlier: u32) -> i64 {
    FIRST_HOLD_SECONDS
        .saturating_mul(1_i64 << earlier.min(8))
        .min(LONGEST_HOLD_SECONDS)
}

impl ShrinkMemory {
    /// Our commit lowered the role from `from` to `to` at `at`, planned on `demand`.
    pub fn record_shrink(&mut self, at: Timestamp, from: i32, to: i32, demand: Option<f64>) {
        self.watched = Some(Shrink {
            at,
            from,
            to,
            demand,
        });
    }

    /// Releases what no longer applies and records a reversal when the guard asked for growth
    /// (`guard_asked`: the reading that breached) within `window_seconds` of our last shrink.
    pub fn observe(
        &mut self,
        now: Timestamp,
        window_seconds: i64,
        guard_asked: Option<&'static str>,
        demand: Option<f64>,
    ) {
        if let Some(shrink) = self.watched {
            let within = now.duration_since(shrink.at) < SignedDuration::from_secs(window_seconds);
            match (within, guard_asked, shrink.demand) {
                (true, Some(reading), Some(demand)) if shrink.from > shrink.to => {
                    let hold = hold_seconds(self.reversals);
                    self.reversal = Some(Reversal {
                        from: shrink.from,
                        to: shrink.to,
                        demand,
                        reading,
                        at: now,
                        until: now + SignedDuration::from_secs(hold),
                    });
                    self.reversals = self.reversals.saturating_add(1);
                    self.watched = None;
                }
                (true, _, _) => {}
                // A shrink the guard did not reverse: the next reversal is a first one again.
                (false, _, _) => {
                    self.watched = None;
                    self.reversals = 0;
                }
            }
        }
        if let Some(r) = self.reversal {
            let demand_fell = demand.is_some_and(|d| d <= r.release_demand());
            if now >= r.until || demand_fell {
                self.reversal = None;
            }
        }
    }

    /// The scaler spec changed: the reversal in force is released.
    pub fn release(&mut self) {
        self.reversal = None;
    }

    /// Keeps `rec` at or above N while a reversal stands, and says why.
    pub fn hold(&self, rec: &mut Recommendation) {
        let Some(r) = self.reversal else {
            return;
        };
        if rec.raw >= r.from {
            return;
        }
        rec.raw = r.from;
        rec.reason = Reason::LatencyGuardHold;
        rec.holds_scale_down = true;
        rec.note.push_str(&format!(
            "; held at {}: {} (released when demand falls to {:.0} tokens/s, on a spec change, or at {})",
            r.from,
            r.describe(),
            r.release_demand(),
            clock(r.until),
        ));
    }
}

/// "10:42" (UTC).
fn clock(t: Timestamp) -> String {
    t.strftime("%H:%M").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap()
    }

    fn rec(raw: i32) -> Recommendation {
        Recommendation {
            raw,
            reason: Reason::TokenThroughput,
            holds_scale_down: false,
            note: String::new(),
            forecast: None,
            load: None,
        }
    }

    /// 2 → 1 at t=0 on 12,000 tokens/s, the guard asking for growth at t=60 (ITL).
    fn reversed() -> ShrinkMemory {
        let mut m = ShrinkMemory::default();
        m.record_shrink(at(0), 2, 1, Some(12_000.0));
        m.observe(at(60), 300, Some("ITL"), Some(12_000.0));
        m
    }

    #[test]
    fn hold_times_double_from_one_hour_to_eight() {
        let hours: Vec<i64> = (0..6).map(|n| hold_seconds(n) / 3600).collect();
        assert_eq!(hours, [1, 2, 4, 8, 8, 8]);
        assert_eq!(hold_seconds(u32::MAX), LONGEST_HOLD_SECONDS);
    }

    #[test]
    fn a_guard_growth_inside_the_window_records_a_reversal_that_holds_at_n() {
        let m = reversed();
        let r = m.reversal.expect("a reversal");
        assert_eq!(
            (r.from, r.to, r.demand, r.until),
            (2, 1, 12_000.0, at(60 + 3600))
        );
        assert_eq!(r.release_demand(), 6_000.0);
        let mut shrink = rec(1);
        m.hold(&mut shrink);
        assert_eq!(shrink.raw, 2);
        assert_eq!(shrink.reason, Reason::LatencyGuardHold);
        assert!(shrink.holds_scale_down);
        assert_eq!(
            shrink.note,
            "; held at 2: 1 replica breached the ITL target at 12000 tokens/s at 00:01 (released when demand falls to 6000 tokens/s, on a spec change, or at 01:01)"
        );
        // Growth is never held, nor a recommendation at N touched.
        for raw in [2, 3] {
            let mut r = rec(raw);
            m.hold(&mut r);
            assert_eq!((r.raw, r.reason), (raw, Reason::TokenThroughput));
        }
    }

    #[test]
    fn a_guard_growth_after_the_window_is_no_reversal_and_resets_the_count() {
        let mut m = ShrinkMemory {
            reversals: 2,
            ..Default::default()
        };
        m.record_shrink(at(0), 2, 1, Some(12_000.0));
        m.observe(at(300), 300, Some("ITL"), Some(12_000.0));
        assert_eq!(m.reversal, None);
        assert_eq!(m.reversals, 0);
    }

    #[test]
    fn it_is_released_by_demand_by_time_and_by_a_spec_change() {
        let mut m = reversed();
        m.observe(at(120), 300, None, Some(6_001.0));
        assert!(m.reversal.is_some(), "above M x D / N it stands");
        m.observe(at(135), 300, None, Some(6_000.0));
        assert_eq!(m.reversal, None, "at M x D / N it is released");

        let mut m = reversed();
        m.observe(at(60 + 3599), 300, None, None);
        assert!(
            m.reversal.is_some(),
            "an unknown demand keeps it until its time"
        );
        m.observe(at(60 + 3600), 300, None, Some(20_000.0));
        assert_eq!(m.reversal, None, "the hold time is up");

        let mut m = reversed();
        m.release();
        let mut r = rec(1);
        m.hold(&mut r);
        assert_eq!(r.raw, 1);
    }

    #[test]
    fn a_reversal_after_a_release_holds_twice_as_long_and_an_unreversed_shrink_resets_it() {
        let mut m = reversed();
        m.release();
        m.record_shrink(at(4000), 2, 1, Some(12_000.0));
        m.observe(at(4060), 300, Some("TTFT"), Some(12_000.0));
        let r = m.reversal.expect("a second reversal");
        assert_eq!(r.until, at(4060 + 7200));
        assert_eq!(r.reading, "TTFT");
        m.release();
        // A shrink that stands for a whole window: the next reversal holds 1 h again.
        m.record_shrink(at(20_000), 2, 1, Some(8_000.0));
        m.observe(at(20_300), 300, None, Some(8_000.0));
        m.record_shrink(at(30_000), 2, 1, Some(8_000.0));
        m.observe(at(30_015), 300, Some("ITL"), Some(8_000.0));
        assert_eq!(m.reversal.unwrap().until, at(30_015 + 3600));
    }

    #[test]
    fn a_guard_growth_without_a_shrink_of_ours_records_nothing() {
        let mut m = ShrinkMemory::default();
        m.observe(at(60), 300, Some("ITL"), Some(12_000.0));
        assert_eq!(m, ShrinkMemory::default());
    }
}
