//! The load at which latency leaves its SLO, from recorded metrics: readings of one role's
//! load per ready replica and its latency relative to the SLO (p95 ÷ objective; above 1 is
//! out of SLO). The knee is the split of the readings, sorted by load, that misclassifies the
//! fewest of them as "within below, out above" (ties: the lower split, the cautious one). The
//! suggested per-replica target is the highest load within the SLO below the knee, so it is a
//! load the role was seen to serve within the SLO.

use serde::Serialize;

/// What the readings say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Knee {
    /// The load at which latency leaves the SLO (`None`: it never did in the readings).
    pub knee: Option<f64>,
    /// The highest load within the SLO below the knee (every reading's highest without one).
    pub suggested: Option<f64>,
    pub readings: usize,
    /// Readings out of SLO below the knee and within it above (the split's misfits).
    pub misfits: usize,
    /// The highest load seen.
    pub highest: Option<f64>,
}

/// The knee of `(load, latency ÷ SLO)` readings (module documentation); readings that are
/// not finite or not positive loads are left out.
pub fn knee(readings: &[(f64, f64)]) -> Knee {
    let mut points: Vec<(f64, bool)> = readings
        .iter()
        .filter(|(l, r)| l.is_finite() && *l > 0.0 && r.is_finite())
        .map(|(l, r)| (*l, *r > 1.0))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = points.len();
    let highest = points.last().map(|p| p.0);
    if !points.iter().any(|p| p.1) {
        return Knee {
            knee: None,
            suggested: highest,
            readings: n,
            misfits: 0,
            highest,
        };
    }
    // Split at index k: points[..k] "within", points[k..] "out".
    let out_total = points.iter().filter(|p| p.1).count();
    let mut best = (usize::MAX, 0);
    let mut out_below = 0;
    for k in 0..=n {
        if k > 0 && points[k - 1].1 {
            out_below += 1;
        }
        // Splits only between distinct loads.
        if k > 0 && k < n && points[k - 1].0 == points[k].0 {
            continue;
        }
        let within_above = (n - k) - (out_total - out_below);
        let misfits = out_below + within_above;
        if misfits < best.0 {
            best = (misfits, k);
        }
    }
    let (misfits, k) = best;
    let knee = match k {
        0 => points.first().map(|p| p.0),
        k if k >= n => None,
        k => Some((points[k - 1].0 + points[k].0) / 2.0),
    };
    let suggested = points[..k].iter().rev().find(|p| !p.1).map(|p| p.0);
    Knee {
        knee,
        suggested,
        readings: n,
        misfits,
        highest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_knee_is_found_and_the_target_is_the_highest_load_within_it() {
        // 1,000 to 10,000 tokens/s per replica; latency at 60 % of the SLO below 6,000, at
        // 180 % from 6,000 on.
        let readings: Vec<(f64, f64)> = (2..=20)
            .map(|i| {
                let load = f64::from(i) * 500.0;
                (load, if load < 6000.0 { 0.6 } else { 1.8 })
            })
            .collect();
        let k = knee(&readings);
        assert_eq!(k.knee, Some(5750.0));
        assert_eq!(k.suggested, Some(5500.0));
        assert_eq!(k.misfits, 0);
    }

    #[test]
    fn noise_moves_the_knee_to_the_fewest_misfits_and_no_breach_gives_the_highest_load() {
        // One stray breach at 2,000 and one good reading at 7,000.
        let mut readings: Vec<(f64, f64)> = (2..=20)
            .map(|i| {
                let load = f64::from(i) * 500.0;
                (load, if load < 6000.0 { 0.6 } else { 1.8 })
            })
            .collect();
        readings.push((2000.0, 1.5));
        readings.push((7000.0, 0.9));
        let k = knee(&readings);
        assert_eq!(k.knee, Some(5750.0));
        assert_eq!(k.misfits, 2);
        let calm = knee(&[(1000.0, 0.5), (3000.0, 0.9), (f64::NAN, 2.0)]);
        assert_eq!(
            (calm.knee, calm.suggested, calm.readings),
            (None, Some(3000.0), 2)
        );
        // Every reading out of SLO: the knee is at the lowest load, nothing to suggest.
        let hot = knee(&[(1000.0, 1.5), (2000.0, 2.0)]);
        assert_eq!((hot.knee, hot.suggested), (Some(1000.0), None));
    }
}
