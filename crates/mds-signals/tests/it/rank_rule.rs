//! The rank rule against a reference written the plain way (one owned identity per sample in
//! a sorted map, as the first version did): same children, same order, same values, on
//! generated families with tensor, pipeline and pid copies, priorities, repeats, label sets
//! that differ within a family, and many distinct values.

use std::collections::BTreeMap;

use mds_signals::exposition::{Page, parse};
use mds_signals::rank::{PidCollapse, children};
use proptest::prelude::*;

type Identity = Vec<(String, String)>;

/// The reference: drop priority breakdowns; group by the labels other than the duplicate
/// axes; in each group the lowest (pp_rank, tp_rank) speaks; its pid copies collapse (a
/// repeated series keeps its last line); groups in identity order.
fn reference(page: &Page<'_>, name: &str, collapse: PidCollapse) -> Vec<(Identity, f64)> {
    let axes = ["tp_rank", "pp_rank", "moe_ep_rank", "pid", "priority"];
    let rank = |s, axis| {
        page.label(s, axis)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    type Copies = Vec<(Option<String>, f64)>;
    let mut groups: BTreeMap<Identity, BTreeMap<(u64, u64), Copies>> = BTreeMap::new();
    for sample in page.samples.iter().filter(|s| s.name == name) {
        if page
            .label(sample, "priority")
            .is_some_and(|p| !p.is_empty())
        {
            continue;
        }
        let mut identity: Identity = page
            .labels(sample)
            .iter()
            .filter(|l| !axes.contains(&l.name))
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect();
        identity.sort();
        let pid = page.label(sample, "pid").map(str::to_string);
        let copies = groups
            .entry(identity)
            .or_default()
            .entry((rank(sample, "pp_rank"), rank(sample, "tp_rank")))
            .or_default();
        copies.retain(|(p, _)| *p != pid);
        copies.push((pid, sample.value));
    }
    groups
        .into_iter()
        .map(|(identity, by_rank)| {
            let (_, copies) = by_rank.into_iter().next().expect("a group has a sample");
            let values: Vec<f64> = copies.iter().map(|(_, v)| *v).collect();
            let value = match collapse {
                PidCollapse::Mean => {
                    let known: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
                    if known.is_empty() {
                        f64::NAN
                    } else {
                        known.iter().sum::<f64>() / known.len() as f64
                    }
                }
                PidCollapse::Max if values.iter().any(|v| v.is_nan()) => f64::NAN,
                PidCollapse::Max => values.into_iter().fold(f64::NEG_INFINITY, f64::max),
            };
            (identity, value)
        })
        .collect()
}

fn actual(page: &Page<'_>, name: &str, collapse: PidCollapse) -> Vec<(Identity, f64)> {
    children(page, name, collapse)
        .into_iter()
        .map(|c| {
            let identity = c
                .identity()
                .into_iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            (identity, c.value)
        })
        .collect()
}

/// Values compared by their bits: NaN is NaN and -0.0 stays -0.0.
fn bits(children: Vec<(Identity, f64)>) -> Vec<(Identity, u64)> {
    children
        .into_iter()
        .map(|(identity, value)| (identity, value.to_bits()))
        .collect()
}

/// One family's lines: label names from a small set (so most lines share them), values from
/// small pools, or from a large one (past what the packed keys hold).
fn family() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        Just("engine"),
        Just("dp_rank"),
        Just("tp_rank"),
        Just("pp_rank"),
        Just("moe_ep_rank"),
        Just("pid"),
        Just("priority"),
        Just("le"),
        Just("model_name"),
    ];
    let value = prop_oneof![
        4 => proptest::sample::select(vec!["0", "1", "2", "", "x", "0.5", "+Inf", "10", "9"])
            .prop_map(str::to_string),
        1 => (0..200u32).prop_map(|v| v.to_string()),
    ];
    let sample_value = proptest::sample::select(vec!["1", "2", "0.25", "NaN", "-0.0", "0", "7"]);
    let line = (
        proptest::collection::btree_map(label, value, 0..5),
        sample_value,
    )
        .prop_map(|(labels, value)| {
            let labels: Vec<String> = labels
                .into_iter()
                .map(|(n, v)| format!("{n}=\"{v}\""))
                .collect();
            format!("r{{{}}} {value}", labels.join(","))
        });
    let shared = proptest::collection::btree_map(
        proptest::sample::select(vec!["engine", "le", "model_name", "tp_rank", "pid"]),
        Just(()),
        0..4,
    );
    // Half the families print the same label names on every line, as engines do.
    let uniform = (
        shared,
        proptest::collection::vec((0..70u32, 0..3u32, 0..4u32), 1..40),
    )
        .prop_map(|(names, values)| {
            values
                .into_iter()
                .map(|(a, b, v)| {
                    let labels: Vec<String> = names
                        .keys()
                        .enumerate()
                        .map(|(i, n)| format!("{n}=\"{}\"", if i == 0 { a } else { b }))
                        .collect();
                    format!("r{{{}}} {v}", labels.join(","))
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
    prop_oneof![
        proptest::collection::vec(line, 0..40).prop_map(|lines| lines.join("\n")),
        uniform,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn the_rank_rule_matches_the_plain_reference(text in family()) {
        let page = parse(&text);
        for collapse in [PidCollapse::Max, PidCollapse::Mean] {
            prop_assert_eq!(
                bits(actual(&page, "r", collapse)),
                bits(reference(&page, "r", collapse)),
                "{:?}\n{}", collapse, text
            );
        }
    }
}
