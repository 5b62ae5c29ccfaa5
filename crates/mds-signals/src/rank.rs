//! The rank rule (D7, ENGINE-METRICS.md §4): copies of one scheduler's state kept by tensor-
//! or pipeline-parallel ranks or by several processes count once; data-parallel schedulers
//! (vLLM `engine`, SGLang `dp_rank`) are different work and all count.

use std::collections::BTreeMap;

use crate::exposition::{Page, Sample};

/// Labels that only say which copy of a scheduler's state a child is.
const DUPLICATE_AXES: [&str; 4] = ["tp_rank", "pp_rank", "moe_ep_rank", "pid"];

/// How `pid` copies of a gauge collapse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidCollapse {
    /// Fractions (KV usage): the mean of the copies.
    Mean,
    /// Counts and counters: the largest copy (never the sum).
    Max,
}

/// One surviving child: its identity labels (duplicate axes removed, sorted) and value.
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Child {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The identity labels without `le`, as a stable key: `dp_rank=1,mode=input`.
    pub fn key_without(&self, skip: &str) -> String {
        let mut key = String::new();
        push_label_key(
            &mut key,
            self.labels
                .iter()
                .filter(|(n, _)| n != skip)
                .map(|(n, v)| (n.as_str(), v.as_str())),
        );
        key
    }
}

/// Appends `name=value` pairs, comma-separated, to `key`. Callers pass labels sorted by
/// name, so the key never depends on the order a page printed them in.
pub fn push_label_key<'a>(key: &mut String, labels: impl Iterator<Item = (&'a str, &'a str)>) {
    for (name, value) in labels {
        if !key.is_empty() {
            key.push(',');
        }
        key.push_str(name);
        key.push('=');
        key.push_str(value);
    }
}

fn rank_of(page: &Page<'_>, sample: &Sample<'_>, axis: &str) -> u64 {
    page.label(sample, axis)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Identity labels (sorted) of a scheduler's state, borrowed from the page.
type Identity<'a> = Vec<(&'a str, &'a str)>;
/// `(pp_rank, tp_rank)` → the `pid` copies at that rank, in page order.
type CopiesByRank<'a> = BTreeMap<(u64, u64), Vec<(Option<&'a str>, f64)>>;

/// Applies the rank rule to the samples named `name` on `page`.
pub fn children(page: &Page<'_>, name: &str, collapse: PidCollapse) -> Vec<Child> {
    children_of(
        page,
        page.samples.iter().filter(|s| s.name == name),
        collapse,
    )
}

/// Applies the rank rule to the given samples of one family of `page`.
pub fn children_of<'s, 'p: 's>(
    page: &'s Page<'p>,
    samples: impl Iterator<Item = &'s Sample<'p>>,
    collapse: PidCollapse,
) -> Vec<Child> {
    let mut groups: BTreeMap<Identity<'s>, CopiesByRank<'s>> = BTreeMap::new();
    for sample in samples {
        // 1. Only the total of a priority breakdown counts.
        if page
            .label(sample, "priority")
            .is_some_and(|p| !p.is_empty())
        {
            continue;
        }
        let mut identity: Identity<'s> = page
            .labels(sample)
            .iter()
            .filter(|l| !DUPLICATE_AXES.contains(&l.name) && l.name != "priority")
            .map(|l| (l.name, l.value.as_ref()))
            .collect();
        identity.sort();
        let ranks = (
            rank_of(page, sample, "pp_rank"),
            rank_of(page, sample, "tp_rank"),
        );
        let pid = page.label(sample, "pid");
        let copies = groups
            .entry(identity)
            .or_default()
            .entry(ranks)
            .or_default();
        // A repeated identical series keeps the last sample.
        copies.retain(|(p, _)| *p != pid);
        copies.push((pid, sample.value));
    }
    groups
        .into_iter()
        .filter_map(|(labels, by_rank)| {
            // 4. The lowest pp_rank, then the lowest tp_rank, speaks for the group.
            let (_, copies) = by_rank.into_iter().next()?;
            // 3. pid copies collapse; never summed.
            let value = collapse_copies(copies.iter().map(|(_, v)| *v), collapse);
            let labels = labels
                .into_iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            Some(Child { labels, value })
        })
        .collect()
}

/// Collapses `pid` copies. A NaN copy of a fraction is a missing reading and is left out; a
/// NaN among counts or counters poisons the result, so the window check downstream sees it.
fn collapse_copies(values: impl Iterator<Item = f64>, collapse: PidCollapse) -> f64 {
    let values: Vec<f64> = values.collect();
    match collapse {
        PidCollapse::Mean => {
            let known: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
            if known.is_empty() {
                f64::NAN
            } else {
                known.iter().sum::<f64>() / known.len() as f64
            }
        }
        PidCollapse::Max => {
            if values.iter().any(|v| v.is_nan()) {
                f64::NAN
            } else {
                values.into_iter().fold(f64::NEG_INFINITY, f64::max)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::parse;

    #[test]
    fn tensor_parallel_copies_count_once_data_parallel_groups_all_count() {
        let page = parse(
            "r{dp_rank=\"0\",tp_rank=\"0\",pp_rank=\"0\",moe_ep_rank=\"0\"} 8\n\
             r{dp_rank=\"0\",tp_rank=\"1\",pp_rank=\"0\",moe_ep_rank=\"1\"} 8\n\
             r{dp_rank=\"1\",tp_rank=\"2\",pp_rank=\"0\",moe_ep_rank=\"2\"} 7\n\
             r{dp_rank=\"1\",tp_rank=\"3\",pp_rank=\"0\",moe_ep_rank=\"3\"} 7\n",
        );
        let kids = children(&page, "r", PidCollapse::Max);
        let values: Vec<f64> = kids.iter().map(|c| c.value).collect();
        assert_eq!(values, vec![8.0, 7.0]);
        assert_eq!(kids[1].label("dp_rank"), Some("1"));
        assert_eq!(
            kids[1].label("tp_rank"),
            None,
            "duplicate axes leave the identity"
        );
    }

    #[test]
    fn lowest_pipeline_stage_wins_then_lowest_tensor_rank() {
        let page = parse(
            "r{pp_rank=\"1\",tp_rank=\"0\"} 5\nr{pp_rank=\"0\",tp_rank=\"3\"} 9\nr{pp_rank=\"0\",tp_rank=\"2\"} 4\n",
        );
        assert_eq!(children(&page, "r", PidCollapse::Max)[0].value, 4.0);
    }

    #[test]
    fn vllm_engines_are_distinct_work() {
        let page = parse("r{engine=\"0\"} 14\nr{engine=\"1\"} 11\n");
        assert_eq!(children(&page, "r", PidCollapse::Max).len(), 2);
    }

    #[test]
    fn pid_copies_collapse_never_sum_and_priority_breakdowns_drop() {
        let page = parse(
            "kv{pid=\"1\"} 0.5\nkv{pid=\"2\"} 0.7\nq{priority=\"\"} 3\nq{priority=\"1\"} 2\nq{priority=\"2\"} 1\n",
        );
        let kv = children(&page, "kv", PidCollapse::Mean);
        assert_eq!(kv.len(), 1);
        assert!((kv[0].value - 0.6).abs() < 1e-12);
        assert_eq!(children(&page, "kv", PidCollapse::Max)[0].value, 0.7);
        let q = children(&page, "q", PidCollapse::Max);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].value, 3.0);
    }

    #[test]
    fn nan_is_missing_for_fractions_and_poisons_counts() {
        let page = parse("kv{pid=\"1\"} NaN\nkv{pid=\"2\"} 0.5\nc NaN\n");
        assert_eq!(children(&page, "kv", PidCollapse::Mean)[0].value, 0.5);
        assert!(
            children(&page, "c", PidCollapse::Max)[0].value.is_nan(),
            "never -inf"
        );
    }

    #[test]
    fn repeated_identical_series_keep_the_last_sample() {
        let page = parse("r{a=\"1\"} 1\nr{a=\"1\"} 2\n");
        assert_eq!(children(&page, "r", PidCollapse::Max)[0].value, 2.0);
    }
}
