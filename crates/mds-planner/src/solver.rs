//! The bounds-and-ratios solver (D17) for one connected component of the ratio graph.
//!
//! Each role has a box `[lo, hi]` (bounds, pacing and the component's direction already
//! applied) and a recommendation. Among integer vectors in the boxes that satisfy every band
//! exactly, the solver picks the one that minimises, in order: the total distance to the
//! recommendations, the total distance of the ratios to their targets, the total replica
//! count, and finally the vector itself in role order (so the answer is unique). Depth-first
//! search over roles in breadth-first order: an assigned role narrows each neighbour to an
//! interval, values are tried nearest to the recommendation first, and a branch is cut when
//! its distance so far plus the least distance still to come exceeds the best found. The work
//! is bounded; when it runs out the best vector found so far is returned, or `None`.

use std::cmp::Ordering;

use mds_api::quantity::Decimal;
use mds_api::ratio_feasibility::{self, Band};

/// A role as the solver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SolverRole {
    pub lo: i32,
    pub hi: i32,
    pub recommendation: i32,
}

/// A band with its preferred ratio (indices into the roles slice).
#[derive(Clone, Debug, PartialEq)]
pub struct SolverBand {
    pub band: Band,
    pub target: Option<Decimal>,
}

/// Values tried before the search gives up (per component): the same bound as admission's
/// feasibility check.
pub use mds_api::ratio_feasibility::DEFAULT_WORK_LIMIT as WORK_LIMIT;

/// The objective of a complete vector, compared lexicographically.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    pub distance: i64,
    pub target_distance: f64,
    pub total: i64,
    pub vector: Vec<i32>,
}

impl Objective {
    pub fn of(roles: &[SolverRole], bands: &[SolverBand], vector: &[i32]) -> Objective {
        let distance = roles
            .iter()
            .zip(vector)
            .map(|(r, &v)| (v as i64 - r.recommendation as i64).abs())
            .sum();
        let target_distance = bands
            .iter()
            .filter_map(|b| {
                let target = b.target?.to_f64();
                let ratio = vector[b.band.numerator] as f64 / vector[b.band.denominator] as f64;
                Some((ratio - target).abs())
            })
            .sum();
        Objective {
            distance,
            target_distance,
            total: vector.iter().map(|&v| v as i64).sum(),
            vector: vector.to_vec(),
        }
    }

    pub fn compare(&self, other: &Objective) -> Ordering {
        self.distance
            .cmp(&other.distance)
            .then(self.target_distance.total_cmp(&other.target_distance))
            .then(self.total.cmp(&other.total))
            .then(self.vector.cmp(&other.vector))
    }
}

/// Whether a vector satisfies every band and box.
pub fn feasible(roles: &[SolverRole], bands: &[SolverBand], vector: &[i32]) -> bool {
    roles
        .iter()
        .zip(vector)
        .all(|(r, &v)| r.lo <= v && v <= r.hi)
        && bands.iter().all(|b| {
            b.band.satisfied(
                vector[b.band.numerator] as i64,
                vector[b.band.denominator] as i64,
            )
        })
}

struct Search<'a> {
    roles: &'a [SolverRole],
    bands: &'a [SolverBand],
    order: Vec<usize>,
    values: Vec<Option<i64>>,
    best: Option<Objective>,
    work_left: u64,
}

impl Search<'_> {
    fn domain(&self, role: usize) -> Option<(i32, i32)> {
        let bounds = (self.roles[role].lo as i64, self.roles[role].hi as i64);
        ratio_feasibility::narrow(
            bounds,
            self.bands.iter().map(|b| &b.band),
            role,
            &self.values,
        )
        .map(|(lo, hi)| (lo as i32, hi as i32))
    }

    /// The least distance the unassigned roles can still add.
    fn remaining_distance(&self, depth: usize) -> Option<i64> {
        let mut sum = 0;
        for &role in &self.order[depth..] {
            let (lo, hi) = self.domain(role)?;
            let rec = self.roles[role].recommendation;
            sum += if rec < lo {
                (lo - rec) as i64
            } else if rec > hi {
                (rec - hi) as i64
            } else {
                0
            };
        }
        Some(sum)
    }

    fn run(&mut self, depth: usize, distance: i64) {
        if depth == self.order.len() {
            let vector: Vec<i32> = self
                .values
                .iter()
                .map(|v| v.expect("assigned") as i32)
                .collect();
            let objective = Objective::of(self.roles, self.bands, &vector);
            if self
                .best
                .as_ref()
                .is_none_or(|b| objective.compare(b) == Ordering::Less)
            {
                self.best = Some(objective);
            }
            return;
        }
        let role = self.order[depth];
        let Some((lo, hi)) = self.domain(role) else {
            return;
        };
        let rec = self.roles[role].recommendation.clamp(lo, hi);
        // Nearest to the recommendation first; below it before above it at equal distance.
        let mut candidates: Vec<i32> = Vec::with_capacity((hi - lo + 1) as usize);
        candidates.push(rec);
        for step in 1..=(hi - lo) {
            if rec - step >= lo {
                candidates.push(rec - step);
            }
            if rec + step <= hi {
                candidates.push(rec + step);
            }
            if rec - step < lo && rec + step > hi {
                break;
            }
        }
        for value in candidates {
            if self.work_left == 0 {
                return;
            }
            self.work_left -= 1;
            let here = distance + (value as i64 - self.roles[role].recommendation as i64).abs();
            if let Some(best) = &self.best
                && here > best.distance
            {
                // Candidates only get farther from the recommendation from here on.
                break;
            }
            self.values[role] = Some(value as i64);
            if let Some(rest) = self.remaining_distance(depth + 1)
                && self.best.as_ref().is_none_or(|b| here + rest <= b.distance)
            {
                self.run(depth + 1, here);
            }
        }
        self.values[role] = None;
    }
}

/// Solves one component: `roles` and `bands` index the same role numbering (bands must
/// connect only these roles). Returns the best vector, or `None` when none exists or the work
/// bound ran out before any was found.
pub fn solve(roles: &[SolverRole], bands: &[SolverBand], work_limit: u64) -> Option<Vec<i32>> {
    if roles.iter().any(|r| r.lo > r.hi) {
        return None;
    }
    let all: Vec<usize> = (0..roles.len()).collect();
    let edges: Vec<(usize, usize)> = bands
        .iter()
        .map(|b| (b.band.numerator, b.band.denominator))
        .collect();
    let order = ratio_feasibility::assignment_order(&all, &edges);
    let mut search = Search {
        roles,
        bands,
        order,
        values: vec![None; roles.len()],
        best: None,
        work_left: work_limit,
    };
    search.run(0, 0);
    search.best.map(|b| b.vector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_api::quantity::parse_decimal;
    use proptest::prelude::*;

    fn band(
        n: usize,
        d: usize,
        min: Option<&str>,
        max: Option<&str>,
        target: Option<&str>,
    ) -> SolverBand {
        let q = |s: Option<&str>| s.map(|s| parse_decimal(s).unwrap());
        SolverBand {
            band: Band {
                numerator: n,
                denominator: d,
                min: q(min),
                max: q(max),
            },
            target: q(target),
        }
    }

    fn role(lo: i32, hi: i32, recommendation: i32) -> SolverRole {
        SolverRole {
            lo,
            hi,
            recommendation,
        }
    }

    #[test]
    fn feasible_recommendations_are_returned_as_they_are() {
        let bands = [band(0, 1, Some("0.5"), Some("2"), Some("1"))];
        assert_eq!(
            solve(&[role(2, 16, 6), role(2, 16, 4)], &bands, WORK_LIMIT),
            Some(vec![6, 4])
        );
    }

    #[test]
    fn the_nearest_feasible_vector_wins_and_ratio_targets_break_ties() {
        // prefill wants 8, decode 2, but prefill/decode must stay within [0.5, 2]: (8, 4) is
        // two away, every other feasible vector is farther.
        let bands = [band(0, 1, Some("0.5"), Some("2"), Some("1"))];
        let got = solve(&[role(1, 16, 8), role(1, 16, 2)], &bands, WORK_LIMIT).unwrap();
        assert_eq!(got, vec![8, 4]);
        // Wanting (4, 1) under the same band: (2, 1) and (3, 2) are both two away... and
        // (4, 2) is one away: it wins.
        let got = solve(&[role(1, 16, 4), role(1, 16, 1)], &bands, WORK_LIMIT).unwrap();
        assert_eq!(got, vec![4, 2]);
        // Two vectors at distance 1 from (5, 1) with band [1, 4]: (4, 1) ratio 4 and (5, 2)
        // ratio 2.5; the target 2 prefers (5, 2).
        let bands = [band(0, 1, Some("1"), Some("4"), Some("2"))];
        let got = solve(&[role(1, 16, 5), role(1, 16, 1)], &bands, WORK_LIMIT).unwrap();
        assert_eq!(got, vec![5, 2]);
        // A tie on distance goes to the vector closer to the target ratio.
        let bands = [band(0, 1, None, None, Some("1"))];
        let got = solve(&[role(3, 4, 4), role(3, 4, 3)], &bands, WORK_LIMIT).unwrap();
        assert_eq!(got, vec![4, 3], "distance 0 beats any ratio preference");
    }

    #[test]
    fn no_feasible_vector_is_none() {
        let bands = [band(0, 1, Some("0.5"), Some("0.5"), None)];
        assert_eq!(
            solve(&[role(1, 10, 2), role(3, 3, 3)], &bands, WORK_LIMIT),
            None
        );
    }

    fn brute_force(roles: &[SolverRole], bands: &[SolverBand]) -> Option<Vec<i32>> {
        let mut best: Option<Objective> = None;
        let mut v: Vec<i32> = roles.iter().map(|r| r.lo).collect();
        if roles.iter().any(|r| r.lo > r.hi) {
            return None;
        }
        loop {
            if feasible(roles, bands, &v) {
                let o = Objective::of(roles, bands, &v);
                if best.as_ref().is_none_or(|b| o.compare(b) == Ordering::Less) {
                    best = Some(o);
                }
            }
            let mut i = 0;
            loop {
                if i == v.len() {
                    return best.map(|b| b.vector);
                }
                if v[i] < roles[i].hi {
                    v[i] += 1;
                    break;
                }
                v[i] = roles[i].lo;
                i += 1;
            }
        }
    }

    fn arb_quantity() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            2 => Just(None),
            3 => (1u32..=8, 1u32..=4).prop_map(|(n, d)| Some(format!("{:.3}", n as f64 / d as f64))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        #[test]
        fn agrees_with_brute_force_on_small_instances(
            raw_roles in proptest::collection::vec((1i32..=6, 0i32..=5, 1i32..=12), 2..=4),
            raw_bands in proptest::collection::vec((0usize..4, 0usize..4, arb_quantity(), arb_quantity(), arb_quantity()), 1..=4),
        ) {
            let roles: Vec<SolverRole> = raw_roles.iter().map(|&(lo, span, rec)| role(lo, lo + span, rec)).collect();
            let n = roles.len();
            let bands: Vec<SolverBand> = raw_bands
                .iter()
                .map(|(a, b, min, max, t)| band(a % n, b % n, min.as_deref(), max.as_deref(), t.as_deref()))
                .filter(|b| b.band.numerator != b.band.denominator)
                .collect();
            let expected = brute_force(&roles, &bands);
            let got = solve(&roles, &bands, WORK_LIMIT);
            prop_assert_eq!(got, expected);
        }
    }
}
