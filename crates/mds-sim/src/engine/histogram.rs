//! Cumulative latency histograms fed by a fluid model: each step adds a (fractional) number of
//! observations spread over a shifted exponential distribution, so buckets fill smoothly and a
//! p95 read from them moves with the load instead of jumping between two boundaries.

/// Default finite bucket boundaries, in seconds, per engine (ENGINE-METRICS.md §7).
pub mod layouts {
    pub static VLLM_TTFT: &[f64] = &[
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ];
    pub static VLLM_ITL: &[f64] = &[
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0,
    ];
    pub static SGLANG_TTFT: &[f64] = &[
        0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
        200.0, 400.0,
    ];
    pub static SGLANG_ITL: &[f64] = &[
        0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
        0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0,
    ];
}

/// An exponent below which `1 − exp(exponent)` is exactly 1 in doubles.
const SATURATED: f64 = -40.0;

/// A cumulative histogram with fractional counts (rendered rounded down, which keeps buckets
/// cumulative and monotone over time).
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramAcc {
    /// Finite upper bounds, ascending.
    pub bounds: &'static [f64],
    /// Cumulative count at each finite bound.
    pub cumulative: Vec<f64>,
    pub count: f64,
    pub sum: f64,
}

impl HistogramAcc {
    /// One member's part of these observations: each count through `part` (a whole-number
    /// split) and the sum divided by `members`.
    pub fn split(&mut self, part: impl Fn(f64) -> f64, members: f64) {
        for c in &mut self.cumulative {
            *c = part(*c);
        }
        self.count = part(self.count);
        self.sum /= members;
    }

    pub fn new(bounds: &'static [f64]) -> HistogramAcc {
        HistogramAcc {
            bounds,
            cumulative: vec![0.0; bounds.len()],
            count: 0.0,
            sum: 0.0,
        }
    }

    /// Adds `n` observations with the given mean, distributed as `floor + Exp(mean − floor)`:
    /// the share at or below `b` is `1 − exp(−(b − floor) / (mean − floor))` for `b ≥ floor`.
    /// A mean at (or under) the floor puts every observation at the mean.
    pub fn observe(&mut self, n: f64, floor: f64, mean: f64) {
        if !counts(n, mean) {
            return;
        }
        let shape = Shape::new(floor, mean);
        for (bound, cumulative) in self.bounds.iter().zip(self.cumulative.iter_mut()) {
            *cumulative += n * shape.share(*bound);
        }
        self.add_totals(n, mean);
    }

    /// [`HistogramAcc::observe`] on two histograms at once, `n` and `m` observations of one
    /// distribution: with the same bounds each share is computed once for both.
    pub fn observe_both(
        &mut self,
        n: f64,
        other: &mut HistogramAcc,
        m: f64,
        floor: f64,
        mean: f64,
    ) {
        if !std::ptr::eq(self.bounds, other.bounds) || !counts(n, mean) || !counts(m, mean) {
            self.observe(n, floor, mean);
            other.observe(m, floor, mean);
            return;
        }
        let shape = Shape::new(floor, mean);
        let pairs = self.cumulative.iter_mut().zip(other.cumulative.iter_mut());
        for (bound, (mine, theirs)) in self.bounds.iter().zip(pairs) {
            let share = shape.share(*bound);
            *mine += n * share;
            *theirs += m * share;
        }
        self.add_totals(n, mean);
        other.add_totals(m, mean);
    }

    fn add_totals(&mut self, n: f64, mean: f64) {
        self.count += n;
        self.sum += n * mean;
    }

    pub fn is_empty(&self) -> bool {
        self.count <= 0.0
    }
}

/// Whether `n` observations of this mean add anything.
fn counts(n: f64, mean: f64) -> bool {
    !(n.is_nan() || n <= 0.0 || !mean.is_finite())
}

/// The distribution `floor + Exp(mean − floor)` of [`HistogramAcc::observe`].
struct Shape {
    floor: f64,
    spread: f64,
    mean: f64,
}

impl Shape {
    fn new(floor: f64, mean: f64) -> Shape {
        let floor = floor.clamp(0.0, mean.max(0.0));
        Shape {
            floor,
            spread: mean - floor,
            mean,
        }
    }

    /// The share of observations at or below `bound`.
    fn share(&self, bound: f64) -> f64 {
        if self.spread <= 1e-12 {
            if bound >= self.mean { 1.0 } else { 0.0 }
        } else if bound < self.floor {
            0.0
        } else {
            let exponent = -(bound - self.floor) / self.spread;
            // Below −40, exp is under 2⁻⁵⁴ (half an ulp of 1), so 1 − exp rounds to 1
            // exactly: the call, most of a step's cost, changes nothing.
            if exponent < SATURATED {
                1.0
            } else {
                1.0 - exponent.exp()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_fill_buckets_cumulatively() {
        let mut h = HistogramAcc::new(&[0.1, 0.5, 1.0, 5.0]);
        h.observe(100.0, 0.1, 0.6);
        assert_eq!(h.count, 100.0);
        assert!((h.sum - 60.0).abs() < 1e-9);
        assert_eq!(h.cumulative[0], 0.0, "nothing below the floor");
        assert!(h.cumulative.windows(2).all(|w| w[0] <= w[1]));
        // 1 − e^{−0.8} of 100 at or below 0.5 s.
        assert!((h.cumulative[1] - 100.0 * (1.0 - (-0.8f64).exp())).abs() < 1e-9);
        assert!(h.cumulative[3] <= h.count);
    }

    #[test]
    fn observing_two_at_once_is_observing_each() {
        // The same bounds (one share per bound for both) and different ones.
        static BOUNDS: &[f64] = &[0.1, 0.5, 1.0, 5.0];
        for other_bounds in [BOUNDS, &[0.2, 0.5, 2.0][..]] {
            let (mut a, mut b) = (HistogramAcc::new(BOUNDS), HistogramAcc::new(other_bounds));
            let (mut one, mut other) = (a.clone(), b.clone());
            for (n, m, floor, mean) in [
                (3.0, 7.5, 0.05, 0.4),
                (0.0, 2.0, 0.1, 0.3),
                (1.5, -1.0, 0.2, 0.2),
                (2.0, 4.0, 0.0, 9.0),
            ] {
                a.observe_both(n, &mut b, m, floor, mean);
                one.observe(n, floor, mean);
                other.observe(m, floor, mean);
            }
            assert_eq!((a, b), (one, other));
        }
    }

    #[test]
    fn a_saturated_share_is_exactly_what_exp_gives() {
        // The shortcut must never change a bucket: at and below the cut, 1 − exp is 1.
        let mut exponent = SATURATED;
        while exponent > -800.0 {
            assert_eq!(1.0 - exponent.exp(), 1.0, "at {exponent}");
            exponent -= 0.37;
        }
        assert_eq!(1.0 - f64::NEG_INFINITY.exp(), 1.0);
    }

    #[test]
    fn a_degenerate_spread_is_a_point_mass() {
        let mut h = HistogramAcc::new(&[0.1, 0.5]);
        h.observe(10.0, 0.3, 0.3);
        assert_eq!(h.cumulative, vec![0.0, 10.0]);
        h.observe(0.0, 0.0, 1.0);
        h.observe(f64::NAN, 0.0, 1.0);
        assert_eq!(h.count, 10.0);
    }
}
