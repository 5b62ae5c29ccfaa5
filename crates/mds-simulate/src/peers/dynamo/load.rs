//! The load mode's latency estimate and vote, after upstream's
//! `components/src/dynamo/planner/core/load_scaling.py`: an online linear regression of an
//! engine's latency on its load, and the all-engines rule over its estimates.

use std::collections::VecDeque;

/// Observations a regression keeps (the oldest go first).
pub const REGRESSION_WINDOW: usize = 64;
/// Observations a regression needs before it estimates.
pub const REGRESSION_MIN_OBSERVATIONS: usize = 5;
/// Scale-down needs every estimate below the SLA times this (`load_scaling_down_sensitivity`
/// 80 %).
pub const SCALE_DOWN_SENSITIVITY: f64 = 0.8;

/// Ordinary least squares of latency `y` on load `x` over the last
/// [`REGRESSION_WINDOW`] observations. With no spread in the loads seen (a flat load) the
/// slope is undefined and the estimate is the mean latency.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Regression {
    points: VecDeque<(f64, f64)>,
}

impl Regression {
    pub fn observe(&mut self, load: f64, latency: f64) {
        if !(load.is_finite() && latency.is_finite()) {
            return;
        }
        if self.points.len() == REGRESSION_WINDOW {
            self.points.pop_front();
        }
        self.points.push_back((load, latency));
    }

    pub fn observations(&self) -> usize {
        self.points.len()
    }

    pub fn ready(&self) -> bool {
        self.points.len() >= REGRESSION_MIN_OBSERVATIONS
    }

    /// The latency expected at `load` (`None` until [`Regression::ready`]).
    pub fn estimate(&self, load: f64) -> Option<f64> {
        if !self.ready() {
            return None;
        }
        let n = self.points.len() as f64;
        let mean_x = self.points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = self.points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = self.points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        let sxy: f64 = self
            .points
            .iter()
            .map(|p| (p.0 - mean_x) * (p.1 - mean_y))
            .sum();
        if sxx <= 1e-12 * (1.0 + mean_x * mean_x) * n {
            return Some(mean_y);
        }
        let slope = sxy / sxx;
        Some(mean_y + slope * (load - mean_x))
    }
}

/// One ready engine as the vote sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Engine {
    /// The regression's load: running plus waiting for TTFT, running for ITL.
    pub load: f64,
    pub kv_usage: f64,
}

/// What one latency says about a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Every engine's estimate is over the SLA.
    Up,
    /// Every engine's estimate is under `SLA × 0.8` (and, consolidating, stays under with
    /// the role one replica smaller) and the role has more than one replica.
    Down,
    Hold,
    /// The regression is not ready or no engine has a sample.
    NoData,
}

/// The vote of one latency over a role's `engines` at `replicas` replicas.
///
/// `consolidation` (the `dynamo-consolidation` variant) adds to scale-down that every
/// estimate re-made at the engine's load times `N / (N − 1)` stays under `SLA × 0.8`, and,
/// with `check_kv` (the ITL of a decode or server role), that the KV usage times `N / (N −
/// 1)` does not exceed 1. Upstream's later releases check only the re-made estimate; with
/// the regression's slope not negative the current estimates are then below it anyway, so
/// the plain check kept here only matters for a negative fitted slope.
pub fn vote(
    regression: &Regression,
    engines: &[Engine],
    sla: f64,
    replicas: i32,
    consolidation: bool,
    check_kv: bool,
) -> Vote {
    if engines.is_empty() {
        return Vote::NoData;
    }
    let Some(estimates) = engines
        .iter()
        .map(|e| regression.estimate(e.load))
        .collect::<Option<Vec<f64>>>()
    else {
        return Vote::NoData;
    };
    if estimates.iter().all(|&e| e > sla) {
        return Vote::Up;
    }
    let threshold = sla * SCALE_DOWN_SENSITIVITY;
    if replicas <= 1 || !estimates.iter().all(|&e| e < threshold) {
        return Vote::Hold;
    }
    if consolidation {
        let n = f64::from(replicas);
        let scale = n / (n - 1.0);
        let survives = engines.iter().all(|e| {
            let fits = !check_kv || e.kv_usage * scale <= 1.0;
            fits && regression
                .estimate(e.load * scale)
                .is_some_and(|est| est < threshold)
        });
        if !survives {
            return Vote::Hold;
        }
    }
    Vote::Down
}

/// A server role's two votes as one: up if either latency votes up, down only if both vote
/// down (upstream's aggregated mode takes the prefill estimate's scale-up, else the
/// decode's, and scales down only when both do).
pub fn combine(ttft: Vote, itl: Vote) -> Vote {
    match (ttft, itl) {
        (Vote::Up, _) | (_, Vote::Up) => Vote::Up,
        (Vote::Down, Vote::Down) => Vote::Down,
        (Vote::NoData, Vote::NoData) => Vote::NoData,
        _ => Vote::Hold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_fits_a_line_over_its_window_after_five_points() {
        let mut r = Regression::default();
        for x in 0..4 {
            r.observe(f64::from(x), 0.1 + 0.01 * f64::from(x));
            assert_eq!(r.estimate(10.0), None);
        }
        r.observe(4.0, 0.14);
        assert!((r.estimate(10.0).unwrap() - 0.2).abs() < 1e-12);
        // 64 kept: 100 more points of another line replace the first.
        for x in 0..100 {
            r.observe(f64::from(x), 1.0 - 0.001 * f64::from(x));
        }
        assert_eq!(r.observations(), REGRESSION_WINDOW);
        assert!((r.estimate(200.0).unwrap() - 0.8).abs() < 1e-9);
        // A flat load: the mean.
        let mut flat = Regression::default();
        for y in [0.1, 0.2, 0.3, 0.4, 0.5] {
            flat.observe(3.0, y);
        }
        assert!((flat.estimate(100.0).unwrap() - 0.3).abs() < 1e-12);
    }

    /// `load_scaling.py`: the all-engines rule and its consolidation variant.
    #[test]
    fn vote_table() {
        // Latency 10 ms per request of load: 0.5 s at 50.
        let mut r = Regression::default();
        for x in [0.0, 10.0, 20.0, 30.0, 40.0] {
            r.observe(x, 0.01 * x);
        }
        let e = |load: f64, kv: f64| Engine { load, kv_usage: kv };
        #[rustfmt::skip]
        let table: &[(&[Engine], i32, bool, bool, Vote)] = &[
            (&[], 2, false, false, Vote::NoData),
            // All over 0.5 s: up; one under: hold.
            (&[e(60.0, 0.1), e(55.0, 0.1)], 2, false, false, Vote::Up),
            (&[e(60.0, 0.1), e(45.0, 0.1)], 2, false, false, Vote::Hold),
            (&[e(60.0, 0.1)], 1, false, false, Vote::Up),
            // All under 0.4 s with N > 1: down; one at 0.45 s: hold; N = 1: hold.
            (&[e(30.0, 0.1), e(35.0, 0.1)], 2, false, false, Vote::Down),
            (&[e(30.0, 0.1), e(45.0, 0.1)], 2, false, false, Vote::Hold),
            (&[e(30.0, 0.1)], 1, false, false, Vote::Hold),
            // Consolidating 2 → 1 doubles the load: 35 → 70 (0.7 s) refused, 15 → 30 taken;
            // 3 → 2 scales 25 by 1.5 to 37.5 (0.375 s): taken.
            (&[e(30.0, 0.1), e(35.0, 0.1)], 2, true, false, Vote::Hold),
            (&[e(15.0, 0.1), e(10.0, 0.1)], 2, true, false, Vote::Down),
            (&[e(25.0, 0.1), e(25.0, 0.1)], 3, true, false, Vote::Down),
            // With the KV check: 0.6 × 2 = 1.2 does not fit; 0.5 × 2 = 1.0 does.
            (&[e(15.0, 0.6), e(10.0, 0.1)], 2, true, true, Vote::Hold),
            (&[e(15.0, 0.5), e(10.0, 0.5)], 2, true, true, Vote::Down),
            (&[e(15.0, 0.6), e(10.0, 0.1)], 2, true, false, Vote::Down),
        ];
        for (i, &(engines, n, consolidation, kv, want)) in table.iter().enumerate() {
            assert_eq!(
                vote(&r, engines, 0.5, n, consolidation, kv),
                want,
                "row {i}"
            );
        }
        assert_eq!(
            vote(&Regression::default(), &[e(1.0, 0.0)], 0.5, 2, false, false),
            Vote::NoData
        );
    }

    #[test]
    fn a_server_role_scales_up_on_either_latency_and_down_on_both() {
        use Vote::*;
        for (ttft, itl, want) in [
            (Up, Hold, Up),
            (NoData, Up, Up),
            (Down, Up, Up),
            (Down, Down, Down),
            (Down, Hold, Hold),
            (Down, NoData, Hold),
            (NoData, NoData, NoData),
        ] {
            assert_eq!(combine(ttft, itl), want, "{ttft:?} {itl:?}");
        }
    }
}
