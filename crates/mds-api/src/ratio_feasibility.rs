//! Exact integer feasibility of ratio bands against role bounds (D17, admission side).
//!
//! Roles are variables with integer domains `[min, max]`; each band says
//! `min <= numerator / denominator <= max`. Every connected component of the ratio graph is
//! searched on its own by depth-first search with forward checking: once a role is assigned,
//! each band to an unassigned neighbour narrows that neighbour to an interval. The search is
//! exact and complete; its work is bounded, and a component that exhausts the bound is
//! reported as undecided (admitted with a warning) rather than guessed.

use crate::quantity::Decimal;

/// A ratio band between two roles (indices into the bounds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Band {
    pub numerator: usize,
    pub denominator: usize,
    pub min: Option<Decimal>,
    pub max: Option<Decimal>,
}

impl Band {
    /// The integer interval this band allows for `role` given the assigned counts `values`
    /// (`i128::MIN..=i128::MAX` when the band does not touch `role` or its other end is
    /// unassigned).
    pub fn interval_for(&self, role: usize, values: &[Option<i64>]) -> (i128, i128) {
        let (mut lo, mut hi) = (i128::MIN, i128::MAX);
        if self.numerator == role
            && let Some(den) = values[self.denominator]
        {
            // role / den in [min, max]  ⇔  role in [ceil(min·den), floor(max·den)]
            if let Some(min) = self.min {
                lo = min.ceil_times(den);
            }
            if let Some(max) = self.max {
                hi = max.floor_times(den);
            }
        } else if self.denominator == role
            && let Some(num) = values[self.numerator]
        {
            // num / role in [min, max]  ⇔  role in [ceil(num/max), floor(num/min)]
            if let Some(max) = self.max {
                lo = max.ceil_div_into(num);
            }
            if let Some(min) = self.min {
                hi = min.floor_div_into(num);
            }
        }
        (lo, hi)
    }

    /// Whether whole counts satisfy the band, exactly.
    pub fn satisfied(&self, numerator: i64, denominator: i64) -> bool {
        denominator > 0
            && self
                .min
                .is_none_or(|m| m.cmp_ratio(numerator, denominator).is_ge())
            && self
                .max
                .is_none_or(|m| m.cmp_ratio(numerator, denominator).is_le())
    }
}

/// The verdict for one connected component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A vector satisfying every band; `witness[i]` is the count of `roles[i]`.
    Feasible { witness: Vec<i64> },
    /// No integer vector within the bounds satisfies the bands.
    Infeasible,
    /// The work bound ran out before the search decided.
    Undecided,
}

/// One connected component of the ratio graph and its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentVerdict {
    /// Role indices, ascending.
    pub roles: Vec<usize>,
    /// Band indices, ascending.
    pub bands: Vec<usize>,
    pub verdict: Verdict,
}

/// Default work bound per component: values tried by the search.
pub const DEFAULT_WORK_LIMIT: u64 = 200_000;

/// Decides each connected component (with at least one band) separately.
/// `bounds[i]` is `(min, max)` of role `i`; bands must reference valid, distinct roles and
/// carry positive quantities (validation reports anything else before calling this).
pub fn check(bounds: &[(i64, i64)], bands: &[Band], work_limit: u64) -> Vec<ComponentVerdict> {
    components(
        bounds.len(),
        bands.iter().map(|b| (b.numerator, b.denominator)),
    )
    .into_iter()
    .filter(|(_, band_ids)| !band_ids.is_empty())
    .map(|(roles, band_ids)| {
        let verdict = Search::new(bounds, bands, &roles, &band_ids, work_limit).run();
        ComponentVerdict {
            roles,
            bands: band_ids,
            verdict,
        }
    })
    .collect()
}

/// Connected components of the ratio graph over `role_count` roles, given each band's
/// `(numerator, denominator)`: each component's roles and band indices, both ascending, in
/// order of the component's lowest role. A role in no band is a component of its own.
/// Shared by admission (which skips band-less components) and the planner's solver.
pub fn components(
    role_count: usize,
    edges: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<(Vec<usize>, Vec<usize>)> {
    let mut parent: Vec<usize> = (0..role_count).collect();
    fn find(parent: &mut [usize], x: usize) -> usize {
        let mut root = x;
        while parent[root] != root {
            root = parent[root];
        }
        parent[x] = root;
        root
    }
    let edges: Vec<(usize, usize)> = edges.into_iter().collect();
    for &(a, b) in &edges {
        let (a, b) = (find(&mut parent, a), find(&mut parent, b));
        if a != b {
            parent[a.max(b)] = a.min(b);
        }
    }
    // Roots are the lowest role of their component, so grouping by root in role order gives
    // the components in order of their lowest role.
    let mut slot_of_root = vec![usize::MAX; role_count];
    let mut out: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for role in 0..role_count {
        let root = find(&mut parent, role);
        if slot_of_root[root] == usize::MAX {
            slot_of_root[root] = out.len();
            out.push((Vec::new(), Vec::new()));
        }
        out[slot_of_root[root]].0.push(role);
    }
    for (id, &(a, _)) in edges.iter().enumerate() {
        let root = find(&mut parent, a);
        out[slot_of_root[root]].1.push(id);
    }
    out
}

/// The order a search assigns `roles` in: breadth-first along `edges` from each unvisited
/// role in turn, so every role after a component's first has an assigned neighbour and its
/// domain is already narrowed by a band.
pub fn assignment_order(roles: &[usize], edges: &[(usize, usize)]) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::with_capacity(roles.len());
    for &start in roles {
        if order.contains(&start) {
            continue;
        }
        order.push(start);
        let mut next = order.len() - 1;
        while next < order.len() {
            let role = order[next];
            next += 1;
            for &(a, b) in edges {
                for (from, to) in [(a, b), (b, a)] {
                    if from == role && !order.contains(&to) {
                        order.push(to);
                    }
                }
            }
        }
    }
    order
}

/// The interval `role` may take within `bounds` given every assigned neighbour (`values`);
/// `None` when it is empty.
pub fn narrow<'b>(
    bounds: (i64, i64),
    bands: impl IntoIterator<Item = &'b Band>,
    role: usize,
    values: &[Option<i64>],
) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (bounds.0 as i128, bounds.1 as i128);
    for band in bands {
        let (band_lo, band_hi) = band.interval_for(role, values);
        lo = lo.max(band_lo);
        hi = hi.min(band_hi);
    }
    (lo <= hi).then_some((lo as i64, hi as i64))
}

struct Search<'a> {
    bounds: &'a [(i64, i64)],
    bands: Vec<&'a Band>,
    /// Roles in assignment order (breadth-first, so each new role has an assigned neighbour).
    order: Vec<usize>,
    values: Vec<Option<i64>>,
    work_left: u64,
    exhausted: bool,
}

impl<'a> Search<'a> {
    fn new(
        bounds: &'a [(i64, i64)],
        all_bands: &'a [Band],
        roles: &[usize],
        band_ids: &[usize],
        work_limit: u64,
    ) -> Self {
        let bands: Vec<&Band> = band_ids.iter().map(|&i| &all_bands[i]).collect();
        let edges: Vec<(usize, usize)> =
            bands.iter().map(|b| (b.numerator, b.denominator)).collect();
        let order = assignment_order(roles, &edges);
        Search {
            bounds,
            bands,
            order,
            values: vec![None; bounds.len()],
            work_left: work_limit,
            exhausted: false,
        }
    }

    fn run(mut self) -> Verdict {
        if self.assign(0) {
            let witness = self
                .order
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|role| self.values[role].expect("assigned"))
                .collect();
            Verdict::Feasible { witness }
        } else if self.exhausted {
            Verdict::Undecided
        } else {
            Verdict::Infeasible
        }
    }

    /// The interval a role may take given every assigned neighbour; `None` when empty.
    fn domain(&self, role: usize) -> Option<(i64, i64)> {
        narrow(
            self.bounds[role],
            self.bands.iter().copied(),
            role,
            &self.values,
        )
    }

    fn assign(&mut self, depth: usize) -> bool {
        if depth == self.order.len() {
            return true;
        }
        let role = self.order[depth];
        let Some((lo, hi)) = self.domain(role) else {
            return false;
        };
        for value in lo..=hi {
            if self.work_left == 0 {
                self.exhausted = true;
                return false;
            }
            self.work_left -= 1;
            self.values[role] = Some(value);
            let neighbours_ok = self.order[depth + 1..]
                .iter()
                .all(|&other| self.domain(other).is_some());
            if neighbours_ok && self.assign(depth + 1) {
                return true;
            }
            if self.exhausted {
                break;
            }
        }
        self.values[role] = None;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantity::parse_decimal;
    use proptest::prelude::*;

    #[test]
    fn components_cover_every_role_in_order_of_their_lowest_role() {
        // Bands: 3-1, 4-0, 1-0 join {0, 1, 3, 4}; role 2 has no band.
        let comps = components(5, [(3, 1), (4, 0), (1, 0)]);
        assert_eq!(
            comps,
            vec![(vec![0, 1, 3, 4], vec![0, 1, 2]), (vec![2], vec![])]
        );
        // Each role after the first has a neighbour before it.
        let order = assignment_order(&[0, 1, 3, 4], &[(3, 1), (4, 0), (1, 0)]);
        assert_eq!(order, vec![0, 4, 1, 3]);
        assert_eq!(assignment_order(&[0, 1, 2], &[]), vec![0, 1, 2]);
    }

    fn band(numerator: usize, denominator: usize, min: Option<&str>, max: Option<&str>) -> Band {
        Band {
            numerator,
            denominator,
            min: min.map(|m| parse_decimal(m).unwrap()),
            max: max.map(|m| parse_decimal(m).unwrap()),
        }
    }

    fn satisfies(values: &[i64], bands: &[Band]) -> bool {
        bands
            .iter()
            .all(|b| b.satisfied(values[b.numerator], values[b.denominator]))
    }

    #[test]
    fn fixed_half_ratio_with_odd_only_denominator_is_infeasible() {
        // prefill/decode fixed at 0.5 while decode may only be 3: 1.5 prefill is impossible.
        let verdicts = check(
            &[(1, 10), (3, 3)],
            &[band(0, 1, Some("0.5"), Some("0.5"))],
            DEFAULT_WORK_LIMIT,
        );
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].verdict, Verdict::Infeasible);
    }

    #[test]
    fn spec_example_is_feasible_with_a_witness() {
        // encode, prefill, decode with prefill/decode in [0.5, 2].
        let bounds = [(1, 4), (2, 16), (2, 16)];
        let bands = [band(1, 2, Some("0.5"), Some("2")), band(0, 1, None, None)];
        let verdicts = check(&bounds, &bands, DEFAULT_WORK_LIMIT);
        let Verdict::Feasible { witness } = &verdicts[0].verdict else {
            panic!("{verdicts:?}")
        };
        assert_eq!(verdicts[0].roles, vec![0, 1, 2]);
        assert!(satisfies(witness, &bands));
    }

    #[test]
    fn a_cycle_that_cannot_close_is_infeasible() {
        // a = 2b, b = 2c, c = 2a has no positive solution.
        let bands = [
            band(0, 1, Some("2"), Some("2")),
            band(1, 2, Some("2"), Some("2")),
            band(2, 0, Some("2"), Some("2")),
        ];
        let verdicts = check(&[(1, 1024); 3], &bands, DEFAULT_WORK_LIMIT);
        assert_eq!(verdicts[0].verdict, Verdict::Infeasible);
    }

    #[test]
    fn exhausted_work_is_undecided_not_a_guess() {
        let bands = [
            band(0, 1, Some("2"), Some("2")),
            band(1, 2, Some("2"), Some("2")),
            band(2, 0, Some("2"), Some("2")),
        ];
        let verdicts = check(&[(1, 1024); 3], &bands, 10);
        assert_eq!(verdicts[0].verdict, Verdict::Undecided);
    }

    #[test]
    fn separate_components_are_decided_separately() {
        let bands = [
            band(0, 1, Some("1"), Some("1")),
            band(2, 3, Some("3"), Some("3")),
        ];
        let verdicts = check(
            &[(1, 4), (1, 4), (1, 2), (1, 2)],
            &bands,
            DEFAULT_WORK_LIMIT,
        );
        assert_eq!(verdicts.len(), 2);
        assert!(matches!(verdicts[0].verdict, Verdict::Feasible { .. }));
        assert_eq!(verdicts[1].roles, vec![2, 3]);
        assert_eq!(verdicts[1].verdict, Verdict::Infeasible);
    }

    fn brute_force(bounds: &[(i64, i64)], bands: &[Band]) -> bool {
        let mut values: Vec<i64> = bounds.iter().map(|b| b.0).collect();
        loop {
            if satisfies(&values, bands) {
                return true;
            }
            let mut i = 0;
            loop {
                if i == values.len() {
                    return false;
                }
                if values[i] < bounds[i].1 {
                    values[i] += 1;
                    break;
                }
                values[i] = bounds[i].0;
                i += 1;
            }
        }
    }

    fn arb_quantity() -> impl Strategy<Value = Option<Decimal>> {
        prop_oneof![
            Just(None),
            (1i128..=12, 1i128..=6).prop_map(|(n, d)| {
                // n/d rounded to three decimals: exercises non-terminating ratios too.
                Some(Decimal::from_nanos(
                    n * 1_000_000_000 / d / 1_000_000 * 1_000_000,
                ))
            }),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_brute_force_on_small_instances(
            bounds in proptest::collection::vec((1i64..=6, 0i64..=5), 2..=4),
            raw_bands in proptest::collection::vec((0usize..4, 0usize..4, arb_quantity(), arb_quantity()), 1..=4),
        ) {
            let bounds: Vec<(i64, i64)> = bounds.iter().map(|&(lo, span)| (lo, lo + span)).collect();
            let n = bounds.len();
            let bands: Vec<Band> = raw_bands
                .into_iter()
                .map(|(a, b, min, max)| Band { numerator: a % n, denominator: b % n, min, max })
                .filter(|b| b.numerator != b.denominator)
                .collect();
            let expected = brute_force(&bounds, &bands);
            let verdicts = check(&bounds, &bands, DEFAULT_WORK_LIMIT);
            let feasible = verdicts.iter().all(|v| matches!(v.verdict, Verdict::Feasible { .. }));
            prop_assert_eq!(feasible, expected);
            for v in &verdicts {
                prop_assert!(!matches!(v.verdict, Verdict::Undecided));
                if let Verdict::Feasible { witness } = &v.verdict {
                    let mut full: Vec<i64> = bounds.iter().map(|b| b.0).collect();
                    for (slot, &role) in v.roles.iter().enumerate() {
                        prop_assert!(bounds[role].0 <= witness[slot] && witness[slot] <= bounds[role].1);
                        full[role] = witness[slot];
                    }
                    let component_bands: Vec<Band> = v.bands.iter().map(|&i| bands[i].clone()).collect();
                    prop_assert!(satisfies(&full, &component_bands));
                }
            }
        }
    }
}
