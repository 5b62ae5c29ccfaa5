//! Rules on spec.ratios, including the exact feasibility check against role bounds (D17).

use std::collections::{BTreeMap, BTreeSet};

use super::Report;
use crate::ratio_feasibility::{self, Band, Verdict};
use crate::spec::ModelDeploymentScalerSpec;

pub(super) fn check(spec: &ModelDeploymentScalerSpec, report: &mut Report) {
    let index: BTreeMap<&str, usize> = spec
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let mut pairs = BTreeSet::new();
    let mut bands = Vec::new();
    let mut all_bands_checkable = true;
    for (i, ratio) in spec.ratios.iter().enumerate() {
        let path = format!("spec.ratios[{i}]");
        let mut ends = Vec::new();
        for (field, role) in [
            ("numeratorRole", &ratio.numerator_role),
            ("denominatorRole", &ratio.denominator_role),
        ] {
            match index.get(role.as_str()) {
                Some(&slot) => ends.push(slot),
                None => report.error(
                    format!("{path}.{field}"),
                    format!("{role:?} is not a role in spec.roles; ratios connect scaled roles"),
                ),
            }
        }
        if ratio.numerator_role == ratio.denominator_role {
            report.error(
                format!("{path}.denominatorRole"),
                format!(
                    "names the same role as numeratorRole ({:?}); a ratio connects two different roles",
                    ratio.numerator_role
                ),
            );
        } else if !pairs.insert((&ratio.numerator_role, &ratio.denominator_role)) {
            report.error(
                path.clone(),
                format!(
                    "repeats the pair {:?}/{:?}; each ordered pair appears once",
                    ratio.numerator_role, ratio.denominator_role
                ),
            );
        }
        let errors_before = report.errors.len();
        let min = report.positive_quantity(&format!("{path}.min"), ratio.min.as_ref());
        let max = report.positive_quantity(&format!("{path}.max"), ratio.max.as_ref());
        let target = report.positive_quantity(&format!("{path}.target"), ratio.target.as_ref());
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            report.error(
                format!("{path}.min"),
                format!("{min} is greater than max {max}; the band needs min <= max"),
            );
        }
        if let Some(target) = target {
            if let Some(min) = min.filter(|m| target < *m) {
                report.error(
                    format!("{path}.target"),
                    format!("{target} is below min {min}; the target must lie within the band"),
                );
            }
            if let Some(max) = max.filter(|m| target > *m) {
                report.error(
                    format!("{path}.target"),
                    format!("{target} is above max {max}; the target must lie within the band"),
                );
            }
        }
        match ends[..] {
            [numerator, denominator]
                if report.errors.len() == errors_before && numerator != denominator =>
            {
                bands.push((
                    i,
                    Band {
                        numerator,
                        denominator,
                        min,
                        max,
                    },
                ));
            }
            _ => all_bands_checkable = false,
        }
    }
    check_feasibility(spec, &bands, all_bands_checkable, report);
}

/// Decides with exact integers whether the role bounds admit a vector inside every band.
fn check_feasibility(
    spec: &ModelDeploymentScalerSpec,
    bands: &[(usize, Band)],
    all_bands_checkable: bool,
    report: &mut Report,
) {
    let bounds: Option<Vec<(i64, i64)>> = spec
        .roles
        .iter()
        .map(|r| {
            let min = r.min_replicas.unwrap_or(1);
            let valid = (1..=1024).contains(&min)
                && (1..=1024).contains(&r.max_replicas)
                && min <= r.max_replicas;
            valid.then_some((min as i64, r.max_replicas as i64))
        })
        .collect();
    // Bounds or bands with their own errors are reported already; deciding feasibility on
    // them would only add noise.
    let (Some(bounds), true) = (bounds, all_bands_checkable) else {
        return;
    };
    let only_bands: Vec<Band> = bands.iter().map(|(_, b)| b.clone()).collect();
    for component in
        ratio_feasibility::check(&bounds, &only_bands, ratio_feasibility::DEFAULT_WORK_LIMIT)
    {
        let first_ratio = bands[component.bands[0]].0;
        let names: Vec<String> = component
            .roles
            .iter()
            .map(|&r| {
                format!(
                    "{:?} [{}..{}]",
                    spec.roles[r].name, bounds[r].0, bounds[r].1
                )
            })
            .collect();
        let ratio_paths: Vec<String> = component
            .bands
            .iter()
            .map(|&b| format!("spec.ratios[{}]", bands[b].0))
            .collect();
        match component.verdict {
            Verdict::Feasible { .. } => {}
            Verdict::Infeasible => report.error(
                format!("spec.ratios[{first_ratio}]"),
                format!(
                    "no whole replica counts within the role bounds ({}) satisfy the bands of {}; widen a band or the bounds",
                    names.join(", "),
                    ratio_paths.join(", ")
                ),
            ),
            Verdict::Undecided => report.warn(
                format!("spec.ratios[{first_ratio}]"),
                format!(
                    "feasibility of the bands of {} within the role bounds ({}) could not be decided within the search limit; planning may hold these roles with RatioConflict",
                    ratio_paths.join(", "),
                    names.join(", ")
                ),
            ),
        }
    }
}
