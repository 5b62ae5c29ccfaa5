//! The planner's GPU budget clamp, after upstream's `proportional_clamp_pair` in
//! `components/src/dynamo/planner/core/budget.py` (BASELINES.md section 4).
//!
//! Total GPUs `P·g_p + D·g_d` must lie in `[min_gpus − tol, max_gpus]`, where `tol =
//! max(g_p, g_d)` when both bounds are active and 0 otherwise; the ceiling is never relaxed.
//! A bound that is `None` or negative is inactive; with both inactive, or a pool of no GPUs,
//! the pair is returned as it is.
//!
//! - Over the ceiling: if the pools' minimum footprint `min_p·g_p + min_d·g_d` is above it
//!   the configuration is infeasible and the answer is `(0, 0)`; else with `scale = max /
//!   total`, `P' = max(min_p, min(floor((max − min_d·g_d) / g_p), floor(P·scale)))` and `D' =
//!   max(min_d, floor((max − P'·g_p) / g_d))`.
//! - Under the floor: grow toward `min_gpus` proportionally, rounding up: from nothing, prefill
//!   takes `ceil(min / 2 / g_p)` (at least `min_p`) and decode the rest, `ceil((min − P'·g_p)
//!   / g_d)` (at least `min_d`); otherwise `P' = max(min_p, ceil(P · min / total))` and decode
//!   the rest likewise. A grown pair over an active ceiling is infeasible: the pair is
//!   returned unchanged.
//!
//! `floor(P·scale)` is taken in integers, `floor(P·max / total)`: upstream multiplies by the
//! floating-point `max / total`, which at an exact multiple can land one below.
//!
//! The simulator's scenarios have a quota and no floor, so only the ceiling path runs there.

/// One pool of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    pub count: i64,
    pub gpus_per_replica: i64,
    /// The pool's `min_endpoint`.
    pub min_endpoint: i64,
}

/// The budget band (`None` or negative: inactive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Band {
    pub min_gpus: Option<i64>,
    pub max_gpus: Option<i64>,
}

fn active(bound: Option<i64>) -> Option<i64> {
    bound.filter(|&b| b >= 0)
}

fn div_floor(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

fn div_ceil(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

/// Clamps the (prefill, decode) pair into the band (module documentation).
pub fn proportional_clamp_pair(prefill: Pool, decode: Pool, band: Band) -> (i64, i64) {
    let (p, d) = (prefill.count, decode.count);
    let (g_p, g_d) = (prefill.gpus_per_replica, decode.gpus_per_replica);
    let (min_p, min_d) = (prefill.min_endpoint, decode.min_endpoint);
    let (floor, ceiling) = (active(band.min_gpus), active(band.max_gpus));
    if (floor.is_none() && ceiling.is_none()) || g_p <= 0 || g_d <= 0 {
        return (p, d);
    }
    let total = p * g_p + d * g_d;
    let tolerance = if floor.is_some() && ceiling.is_some() {
        g_p.max(g_d)
    } else {
        0
    };
    let over = ceiling.is_some_and(|max| total > max);
    let under = floor.is_some_and(|min| total < min - tolerance);
    if let (true, Some(max)) = (over, ceiling) {
        if max < min_p * g_p + min_d * g_d {
            return (0, 0);
        }
        // floor(P × max / total), in integers.
        let scaled = div_floor(p * max, total);
        let new_p = min_p.max(div_floor(max - min_d * g_d, g_p).min(scaled));
        let new_d = min_d.max(div_floor(max - new_p * g_p, g_d));
        return (new_p, new_d);
    }
    let Some(min) = floor.filter(|_| under) else {
        return (p, d);
    };
    let new_p = if total <= 0 {
        min_p.max(div_ceil(min, 2 * g_p))
    } else {
        // ceil(P × min / total), in integers.
        min_p.max(div_ceil(p * min, total))
    };
    let new_d = min_d.max(div_ceil((min - new_p * g_p).max(0), g_d));
    if ceiling.is_some_and(|max| new_p * g_p + new_d * g_d > max) {
        return (p, d);
    }
    (new_p, new_d)
}

/// One pool alone under a ceiling (a Server role): at most `floor(max_gpus / g)` replicas;
/// `None` or a negative ceiling, or a pool of no GPUs, leaves `count` as it is.
pub fn clamp_single(count: i64, gpus_per_replica: i64, max_gpus: Option<i64>) -> i64 {
    match active(max_gpus) {
        Some(max) if gpus_per_replica > 0 => count.min(div_floor(max, gpus_per_replica)),
        _ => count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools(p: i64, d: i64, g_p: i64, g_d: i64) -> (Pool, Pool) {
        let pool = |count, gpus| Pool {
            count,
            gpus_per_replica: gpus,
            min_endpoint: 1,
        };
        (pool(p, g_p), pool(d, g_d))
    }

    fn ceiling(max: i64) -> Band {
        Band {
            min_gpus: None,
            max_gpus: Some(max),
        }
    }

    /// `(P, D, g_p, g_d, band, clamped)`.
    type Row = (i64, i64, i64, i64, Band, (i64, i64));

    /// `budget.py`: `proportional_clamp_pair`, worked by hand.
    #[test]
    fn budget_clamp_table() {
        #[rustfmt::skip]
        let table: &[Row] = &[
            // In the band, or no band: unchanged.
            (3, 5, 1, 1, ceiling(8), (3, 5)),
            (30, 50, 1, 1, Band::default(), (30, 50)),
            (30, 50, 1, 1, ceiling(-1), (30, 50)),
            // 12 GPUs over 8: scale 2/3, P = min(floor(7/1), floor(4 × 2/3) = 2) = 2, D = 6.
            (4, 8, 1, 1, ceiling(8), (2, 6)),
            // 2-GPU prefill, 1-GPU decode: total 3·2 + 6 = 12 over 8, scale 2/3,
            // P = min(floor((8 − 1)/2) = 3, floor(2) = 2) = 2, D = 8 − 4 = 4.
            (3, 6, 2, 1, ceiling(8), (2, 4)),
            // floor(P × scale) of 0 is raised to min_endpoint: 1 + 20 = 21 over 8,
            // P = max(1, min(7, 0)) = 1, D = 7.
            (1, 20, 1, 1, ceiling(8), (1, 7)),
            // The ceiling bounds P by what leaves room for one decode: 20 + 1 over 8,
            // P = min(floor(7), floor(20 × 8/21) = 7) = 7, D = 1.
            (20, 1, 1, 1, ceiling(8), (7, 1)),
            // Minimum footprint 8 + 8 over 12: infeasible.
            (2, 2, 8, 8, ceiling(12), (0, 0)),
            // 8 + 16 over 12: P = max(1, min(floor((12 − 8)/4) = 1, floor(2 × 1/2) = 1)),
            // D = max(1, floor((12 − 4)/8)) = 1.
            (2, 2, 4, 8, ceiling(12), (1, 1)),
            // Minimum footprint 1·4 + 1·8 = 12 over 10: infeasible.
            (2, 2, 4, 8, ceiling(10), (0, 0)),
            // The floor: 2 + 2 under 10 (tol 1: under 9), grow: P = ceil(2 × 10/4) = 5, D = 5.
            (2, 2, 1, 1, Band { min_gpus: Some(10), max_gpus: Some(16) }, (5, 5)),
            // Within the tolerance of the floor: 9 ≥ 10 − 1.
            (4, 5, 1, 1, Band { min_gpus: Some(10), max_gpus: Some(16) }, (4, 5)),
            // From nothing: P = ceil(10 / 2 / 2) = 3, D = ceil((10 − 6) / 1) = 4.
            (0, 0, 2, 1, Band { min_gpus: Some(10), max_gpus: None }, (3, 4)),
            // Growing past the ceiling: unchanged.
            (1, 1, 2, 2, Band { min_gpus: Some(9), max_gpus: Some(9) }, (1, 1)),
        ];
        for &(p, d, g_p, g_d, band, want) in table {
            let (prefill, decode) = pools(p, d, g_p, g_d);
            assert_eq!(
                proportional_clamp_pair(prefill, decode, band),
                want,
                "P {p} × {g_p}, D {d} × {g_d}, {band:?}"
            );
        }
    }

    /// Against the formula over a grid: the result is the formula's and never exceeds the
    /// ceiling (or is `(0, 0)` when infeasible).
    #[test]
    fn ceiling_path_matches_the_formula_and_holds_the_ceiling() {
        for (g_p, g_d) in [(1, 1), (1, 2), (2, 1), (2, 4), (8, 8)] {
            for max in 0..=24 {
                for p in 0..=12 {
                    for d in 0..=12 {
                        let (prefill, decode) = pools(p, d, g_p, g_d);
                        let got = proportional_clamp_pair(prefill, decode, ceiling(max));
                        let total = p * g_p + d * g_d;
                        if total <= max {
                            assert_eq!(got, (p, d));
                            continue;
                        }
                        if max < g_p + g_d {
                            assert_eq!(got, (0, 0));
                            continue;
                        }
                        let scaled = (p * max) as f64 / total as f64;
                        let new_p = ((max - g_d) as f64 / g_p as f64)
                            .floor()
                            .min(scaled.floor())
                            .max(1.0) as i64;
                        let new_d =
                            (((max - new_p * g_p) as f64 / g_d as f64).floor() as i64).max(1);
                        assert_eq!(got, (new_p, new_d), "{p} {d} {g_p} {g_d} {max}");
                        assert!(got.0 * g_p + got.1 * g_d <= max);
                    }
                }
            }
        }
    }

    #[test]
    fn a_server_role_is_clamped_to_the_replicas_the_ceiling_holds() {
        assert_eq!(clamp_single(5, 2, Some(8)), 4);
        assert_eq!(clamp_single(3, 2, Some(8)), 3);
        assert_eq!(clamp_single(5, 8, Some(7)), 0);
        assert_eq!(clamp_single(5, 8, None), 5);
        assert_eq!(clamp_single(5, 8, Some(-1)), 5);
    }
}
