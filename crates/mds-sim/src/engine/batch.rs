//! The running batch as cohorts: the requests served in one step enter evenly over that step
//! and each stays in the batch for the residence time computed then (a fluid M/D/∞ queue).
//! In steady state the batch holds rate × residence requests (Little's law); once nothing new
//! is served it empties within one residence time, as a real batch finishes its last requests.

use std::collections::VecDeque;

#[derive(Clone, Debug, PartialEq)]
struct Cohort {
    start: f64,
    end: f64,
    amount: f64,
    residence: f64,
}

impl Cohort {
    /// Requests of this cohort in the batch at `t`: those that entered in `(t − residence, t]`.
    fn in_flight(&self, t: f64) -> f64 {
        let from = self.start.max(t - self.residence);
        let to = self.end.min(t);
        if to <= from {
            return 0.0;
        }
        self.amount * (to - from) / (self.end - self.start)
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Batch {
    /// Seconds since the process started.
    clock: f64,
    cohorts: VecDeque<Cohort>,
}

impl Batch {
    /// Moves `dt` seconds on, with `served` requests entering over them for `residence` seconds
    /// each; returns the requests in the batch at the end.
    pub fn advance(&mut self, dt: f64, served: f64, residence: f64) -> f64 {
        let start = self.clock;
        self.clock += dt;
        if served > 0.0 && residence > 0.0 && dt > 0.0 {
            self.cohorts.push_back(Cohort {
                start,
                end: self.clock,
                amount: served,
                residence,
            });
        }
        let now = self.clock;
        self.cohorts.retain(|c| c.end + c.residence > now);
        self.running()
    }

    pub fn running(&self) -> f64 {
        self.cohorts.iter().map(|c| c.in_flight(self.clock)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_state_is_littles_law_and_a_drain_takes_one_residence() {
        let mut batch = Batch::default();
        for _ in 0..20 {
            batch.advance(1.0, 3.0, 5.0);
        }
        assert!((batch.running() - 15.0).abs() < 1e-9);
        batch.advance(2.0, 0.0, 0.0);
        assert!((batch.running() - 9.0).abs() < 1e-9, "linear drain");
        batch.advance(3.0, 0.0, 0.0);
        assert_eq!(batch.running(), 0.0);
        assert!(batch.cohorts.is_empty());
    }
}
