//! The fewest replicas per bin that reach an attainment tier over the whole trace, each role's
//! attainment read from its replicas' curve (module `capacity`) at the bin's count and load per
//! replica.
//!
//! A scaler reaches a tier on average over the trace, not in every bin: it may run a bin
//! hotter and another cooler. So the bound does not size each bin for the tier on its own;
//! it picks the vector of each bin that is cheapest for the attainment it buys, all bins at one
//! exchange rate `λ` (GPU-seconds per request attained), and raises `λ` until the trace's
//! attainment reaches the tier (Lagrangian relaxation; the bins are independent given `λ`). A
//! request attains only if every role on its path does (the roles' attainments multiply).
//! Vectors respect the bounds, the ratio bands and the GPU budget.

use crate::capacity::Curves;

use super::{Band, RoleDemand, gpus, in_band};

/// What the tier asks of the trace.
#[derive(Clone, Copy, Debug)]
pub struct Goal<'a> {
    /// The tier, 0..1, of every request offered.
    pub tier: f64,
    /// Requests per bin that some scale can serve within the SLO.
    pub attainable: &'a [f64],
    /// Every request offered, attainable or not.
    pub total: f64,
    /// Seconds the run lasts: a bin that runs past it is paid only for its part within, as
    /// the GPU-hours are.
    pub duration: f64,
}

impl Goal<'_> {
    /// Requests the vectors must attain: the tier of every request offered, less two standard
    /// deviations of the count a trace of this size attains by chance at the tier (binomial).
    /// The curves give the attainment a load expects; a run is one draw of it, and a run
    /// lucky on its own draw must not beat the bound. On 400 requests at 99 % that is four
    /// requests (a point); on 400,000, 126 (0.03 points).
    pub fn wanted(&self) -> f64 {
        let spread = (self.total * self.tier * (1.0 - self.tier)).max(0.0).sqrt();
        self.tier * self.total - 2.0 * spread - 1e-9
    }
}

/// The curves each bin's attainment is read on: per mix group (module `mix`) each role's
/// curves, and the group of each bin.
#[derive(Clone, Debug)]
pub struct BinCurves<'a> {
    /// Per group, per role (`None`: the role's kind serves nothing).
    pub groups: Vec<Vec<Option<&'a Curves>>>,
    /// The group of each bin; bins past its end read the last one's.
    pub bin_group: Vec<usize>,
}

impl<'a> BinCurves<'a> {
    /// The same curves for every bin.
    pub fn one(curves: Vec<Option<&'a Curves>>) -> BinCurves<'a> {
        BinCurves {
            groups: vec![curves],
            bin_group: Vec::new(),
        }
    }

    /// Each role's curves in bin `b`.
    pub fn of_bin(&self, b: usize) -> &[Option<&'a Curves>] {
        let g = self
            .bin_group
            .get(b)
            .or(self.bin_group.last())
            .copied()
            .unwrap_or(0);
        self.groups
            .get(g)
            .or(self.groups.first())
            .map_or(&[], Vec::as_slice)
    }
}

/// One bin's choices: each feasible vector with its GPU-seconds and requests attained.
struct Choices {
    vectors: Vec<(Vec<i32>, f64, f64)>,
}

/// Each role's candidate counts in a bin: from its minimum to where its replicas' load reaches
/// the curve's saturation (more gains nothing), within its maximum.
fn range(role: &RoleDemand, curve: Option<&Curves>, demand: f64) -> (i32, i32) {
    let hi = match curve {
        Some(c) if c.saturation() > 0.0 => (demand / c.saturation()).ceil() as i32 + 1,
        _ => role.min,
    };
    (role.min, hi.clamp(role.min, role.max.max(role.min)))
}

/// Raises each role's top count so its band partners' top counts stay inside the bands: a
/// role that saturates at two replicas must still go to four beside eight of a role whose
/// ratio to it is at most 2, or those eight are never tried.
fn widen_for_bands(roles: &[RoleDemand], bands: &[Band], ranges: &mut [(i32, i32)]) {
    for _ in 0..16 {
        let before = ranges.to_vec();
        for band in bands {
            let (n, d) = (band.numerator, band.denominator);
            if let Some(hi) = band.max.filter(|&m| m > 0.0) {
                let need = (f64::from(ranges[n].1) / hi - 1e-9).ceil() as i32;
                ranges[d].1 = ranges[d].1.max(need.min(roles[d].max.max(roles[d].min)));
            }
            if let Some(lo) = band.min {
                let need = (lo * f64::from(ranges[d].1) - 1e-9).ceil() as i32;
                ranges[n].1 = ranges[n].1.max(need.min(roles[n].max.max(roles[n].min)));
            }
        }
        if ranges == before.as_slice() {
            return;
        }
    }
}

/// Every vector of the ranges (odometer order).
fn vectors(ranges: &[(i32, i32)]) -> Vec<Vec<i32>> {
    let mut out = Vec::new();
    let mut v: Vec<i32> = ranges.iter().map(|r| r.0).collect();
    loop {
        out.push(v.clone());
        let mut i = 0;
        loop {
            if i == v.len() {
                return out;
            }
            if v[i] < ranges[i].1 {
                v[i] += 1;
                break;
            }
            v[i] = ranges[i].0;
            i += 1;
        }
        if out.len() >= 1 << 16 {
            return out;
        }
    }
}

/// The cheapest per-bin vectors that reach `goal` (`None`: no vector within the bounds,
/// bands and budget reaches it), per role per bin.
pub fn needs(
    roles: &[RoleDemand],
    curves: &BinCurves,
    bands: &[Band],
    budget: Option<u32>,
    bin_seconds: f64,
    goal: Goal,
) -> Option<Vec<Vec<i32>>> {
    let bins = roles
        .iter()
        .map(|r| r.tokens_per_second.len())
        .max()
        .unwrap_or(0);
    let choices: Vec<Choices> = (0..bins)
        .map(|b| {
            let demand: Vec<f64> = roles
                .iter()
                .map(|r| r.tokens_per_second.get(b).copied().unwrap_or(0.0))
                .collect();
            let curves = curves.of_bin(b);
            let mut ranges: Vec<(i32, i32)> = roles
                .iter()
                .zip(curves)
                .zip(&demand)
                .map(|((r, c), d)| range(r, *c, *d))
                .collect();
            widen_for_bands(roles, bands, &mut ranges);
            let weight = goal.attainable.get(b).copied().unwrap_or(0.0);
            let paid = bin_seconds
                .min(goal.duration - b as f64 * bin_seconds)
                .max(0.0);
            let mut feasible: Vec<(Vec<i32>, f64, f64)> = vectors(&ranges)
                .into_iter()
                .filter(|v| bands.iter().all(|band| in_band(band, v)))
                .filter(|v| budget.is_none_or(|g| gpus(roles, v) <= u64::from(g)))
                .map(|v| {
                    let share: f64 = curves
                        .iter()
                        .zip(&v)
                        .zip(&demand)
                        .map(|((c, &n), d)| match c {
                            Some(c) => c.at(n, d / f64::from(n.max(1))),
                            None => 1.0,
                        })
                        .product();
                    let cost = gpus(roles, &v) as f64 * paid;
                    (v, cost, weight * share)
                })
                .collect();
            if feasible.is_empty() {
                // A footprint the bands or the budget never admit: the minimums.
                let v: Vec<i32> = roles.iter().map(|r| r.min).collect();
                let cost = gpus(roles, &v) as f64 * paid;
                feasible.push((v, cost, 0.0));
            }
            Choices { vectors: feasible }
        })
        .collect();
    // Each bin's best vector at exchange rate `rate`: most value, then fewest GPUs.
    let pick = |rate: f64| -> (Vec<usize>, f64) {
        let mut attained = 0.0;
        let picks = choices
            .iter()
            .map(|c| {
                let (i, best) = c
                    .vectors
                    .iter()
                    .enumerate()
                    .max_by(|(_, a), (_, b)| {
                        (rate * a.2 - a.1)
                            .total_cmp(&(rate * b.2 - b.1))
                            .then(b.1.total_cmp(&a.1))
                    })
                    .expect("a bin has a vector");
                attained += best.2;
                i
            })
            .collect();
        (picks, attained)
    };
    let wanted = goal.wanted();
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    let (mut best, attained) = pick(high);
    let mut reached = attained >= wanted;
    for _ in 0..64 {
        if reached {
            break;
        }
        high *= 4.0;
        let (p, a) = pick(high);
        best = p;
        reached = a >= wanted;
    }
    if !reached {
        return None;
    }
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        let (p, a) = pick(mid);
        if a >= wanted {
            high = mid;
            best = p;
        } else {
            low = mid;
        }
    }
    let per_bin: Vec<&Vec<i32>> = choices
        .iter()
        .zip(&best)
        .map(|(c, &i)| &c.vectors[i].0)
        .collect();
    Some(
        (0..roles.len())
            .map(|r| per_bin.iter().map(|v| v[r]).collect())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve() -> Curves {
        // Attains everything to 100 tokens/s per replica, nothing from 200, however many.
        Curves {
            by_count: vec![crate::capacity::Curve {
                replicas: 1,
                points: vec![(1.0, 1.0), (100.0, 1.0), (200.0, 0.0)],
                tokens_per_request: 10.0,
            }],
        }
    }

    fn role(demand: &[f64]) -> RoleDemand {
        RoleDemand {
            tokens_per_second: demand.to_vec(),
            capacity: 100.0,
            min: 1,
            max: 8,
            gpus_per_replica: 1,
        }
    }

    /// The cheapest vectors attaining `wanted` requests by trying every one, the oracle.
    fn brute_force(demand: &[f64], weights: &[f64], wanted: f64) -> f64 {
        let c = curve();
        let bins = demand.len();
        let mut best = f64::INFINITY;
        let mut n = vec![1_i32; bins];
        loop {
            let attained: f64 = (0..bins)
                .map(|b| weights[b] * c.at(n[b], demand[b] / f64::from(n[b])))
                .sum();
            if attained >= wanted {
                best = best.min(n.iter().map(|&x| f64::from(x)).sum());
            }
            let mut i = 0;
            loop {
                if i == bins {
                    return best;
                }
                if n[i] < 4 {
                    n[i] += 1;
                    break;
                }
                n[i] = 1;
                i += 1;
            }
        }
    }

    #[test]
    fn the_cheapest_vectors_match_a_brute_force_and_trade_bins() {
        let demand = [50.0, 150.0, 250.0, 390.0];
        let weights = [5.0, 15.0, 25.0, 39.0];
        let c = curve();
        for tier in [0.5, 0.7, 0.9, 0.95, 1.0] {
            let goal = Goal {
                tier,
                attainable: &weights,
                total: weights.iter().sum(),
                duration: f64::INFINITY,
            };
            let r = role(&demand);
            let needs = needs(&[r], &BinCurves::one(vec![Some(&c)]), &[], None, 1.0, goal).unwrap();
            let cost: f64 = needs[0].iter().map(|&n| f64::from(n)).sum();
            let oracle = brute_force(&demand, &weights, goal.wanted());
            // The relaxation's pick reaches the tier at most one bin's replica above the optimum.
            assert!(
                cost >= oracle && cost <= oracle + 1.0,
                "tier {tier}: {cost} vs {oracle} ({needs:?})"
            );
        }
        // All of it at 100 %: 1, 2, 3, 4 replicas.
        let goal = Goal {
            tier: 1.0,
            attainable: &weights,
            total: weights.iter().sum(),
            duration: f64::INFINITY,
        };
        assert_eq!(
            needs(
                &[role(&demand)],
                &BinCurves::one(vec![Some(&c)]),
                &[],
                None,
                1.0,
                goal
            )
            .unwrap()[0],
            vec![1, 2, 3, 4]
        );
    }

    #[test]
    fn a_tier_the_bounds_cannot_reach_has_no_vectors() {
        let c = curve();
        let weights = [10.0];
        let goal = Goal {
            tier: 0.9,
            attainable: &weights,
            total: 10.0,
            duration: f64::INFINITY,
        };
        let mut r = role(&[1000.0]);
        r.max = 2;
        assert!(needs(&[r], &BinCurves::one(vec![Some(&c)]), &[], None, 1.0, goal).is_none());
        // Unattainable requests count in the total: 90 % of 20 when only 10 can attain.
        let goal = Goal {
            tier: 0.9,
            attainable: &weights,
            total: 20.0,
            duration: f64::INFINITY,
        };
        assert!(
            needs(
                &[role(&[50.0])],
                &BinCurves::one(vec![Some(&c)]),
                &[],
                None,
                1.0,
                goal
            )
            .is_none()
        );
    }

    /// The goal allows the count a trace of its size misses by chance: two standard
    /// deviations of a binomial at the tier.
    #[test]
    fn the_goal_allows_two_standard_deviations_of_the_traces_own_draw() {
        let weights = [400.0];
        let goal = |tier, total| Goal {
            tier,
            attainable: &weights,
            total,
            duration: f64::INFINITY,
        };
        // 400 at 99 %: 396 less 2 × sqrt(400 × 0.99 × 0.01) = 3.98.
        assert!((goal(0.99, 400.0).wanted() - 392.02).abs() < 0.01);
        // 400,000 at 99 %: 126 of 396,000.
        let big = goal(0.99, 400_000.0).wanted();
        assert!((396_000.0 - big - 125.9).abs() < 0.1, "{big}");
        // Every request at 100 %: no allowance.
        assert!((goal(1.0, 400.0).wanted() - 400.0).abs() < 1e-6);
    }

    /// A last bin that runs past the end of the run is paid only for its part within, so
    /// the replica the tier needs goes there when it buys the same.
    #[test]
    fn a_short_last_bin_is_priced_for_its_part_within_the_run() {
        let c = curve();
        // 150 tokens/s per bin: one replica attains half, two all of it.
        let weights = [10.0, 10.0];
        let goal = Goal {
            tier: 0.75,
            attainable: &weights,
            total: 20.0,
            duration: 61.0,
        };
        let r = role(&[150.0, 150.0]);
        let curves = BinCurves::one(vec![Some(&c)]);
        let needs = needs(&[r], &curves, &[], None, 60.0, goal).unwrap();
        assert_eq!(needs[0], vec![1, 2]);
    }

    /// A role that saturates at one replica still goes as high as its band partner needs:
    /// seven prefill beside a decode role at most half as many needs four decode.
    #[test]
    fn a_band_partner_of_a_busy_role_is_tried_above_its_own_saturation() {
        let c = curve();
        let weights = [10.0];
        let goal = Goal {
            tier: 1.0,
            attainable: &weights,
            total: 10.0,
            duration: f64::INFINITY,
        };
        let band = Band {
            numerator: 0,
            denominator: 1,
            min: None,
            max: Some(2.0),
        };
        let curves = BinCurves::one(vec![Some(&c), Some(&c)]);
        let needs = needs(
            &[role(&[700.0]), role(&[50.0])],
            &curves,
            &[band],
            None,
            1.0,
            goal,
        )
        .expect("seven and four reach it");
        assert_eq!(needs, vec![vec![7], vec![4]]);
    }
}
