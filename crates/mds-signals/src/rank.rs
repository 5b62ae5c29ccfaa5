//! The rank rule (D7, ENGINE-METRICS.md §4): copies of one scheduler's state kept by tensor-
//! or pipeline-parallel ranks or by several processes count once; data-parallel schedulers
//! (vLLM `engine`, SGLang `dp_rank`) are different work and all count.

use std::cmp::Ordering;
use std::ops::Range;

use crate::exposition::{Label, Page, Sample};

/// Whether a label is part of a child's identity: not one of the duplicate axes, which only
/// say which copy of a scheduler's state a child is, and not the priority.
pub(crate) fn is_identity(name: &str) -> bool {
    !matches!(
        name,
        "tp_rank" | "pp_rank" | "moe_ep_rank" | "pid" | "priority"
    )
}

/// The byte order of two strings, as `str::cmp`. Label names and values are a few bytes
/// long: a loop is cheaper than the library call `str::cmp` makes.
fn cmp_short(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let common = a.len().min(b.len());
    for i in 0..common {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
    }
    a.len().cmp(&b.len())
}

/// The order of two sorted identities, as the order of `[(name, value)]` slices.
fn cmp_identity(a: &[(&str, &str)], b: &[(&str, &str)]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = cmp_short(x.0, y.0).then_with(|| cmp_short(x.1, y.1));
        if order.is_ne() {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// How `pid` copies of a gauge collapse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidCollapse {
    /// Fractions (KV usage): the mean of the copies.
    Mean,
    /// Counts and counters: the largest copy (never the sum).
    Max,
}

/// One surviving child: the labels of a sample that speaks for it, borrowed from the page,
/// and its value. Its identity is those labels without the duplicate axes and `priority`.
#[derive(Clone, Debug, PartialEq)]
pub struct Child<'a> {
    labels: &'a [Label<'a>],
    pub value: f64,
}

impl<'a> Child<'a> {
    /// A child that speaks for itself (the rule's answer for a sample alone in its group).
    pub(crate) fn new(labels: &'a [Label<'a>], value: f64) -> Child<'a> {
        Child { labels, value }
    }

    /// An identity label's value (`None` for duplicate axes and `priority`).
    pub fn label(&self, name: &str) -> Option<&'a str> {
        if !is_identity(name) {
            return None;
        }
        self.labels
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.as_ref())
    }

    /// The identity labels, sorted by name.
    pub fn identity(&self) -> Vec<(&'a str, &'a str)> {
        let mut identity: Vec<(&'a str, &'a str)> = self
            .labels
            .iter()
            .filter(|l| is_identity(l.name))
            .map(|l| (l.name, l.value.as_ref()))
            .collect();
        identity.sort_unstable();
        identity
    }

    /// The identity labels without `skip`, as a stable key: `dp_rank=1,mode=input`.
    pub fn key_without(&self, skip: &str) -> String {
        let mut key = String::new();
        self.write_key_without(skip, &mut key);
        key
    }

    /// Whether `other` prints the same labels in the same order, `skip` aside; then both have
    /// the same key without `skip`, and building it again can be spared. The parser hands a
    /// label that repeats the line before it the same text, so most compare by address.
    pub fn same_labels_without(&self, other: &Child, skip: &str) -> bool {
        let same = |a: &str, b: &str| std::ptr::eq(a, b) || a == b;
        self.labels.len() == other.labels.len()
            && self
                .labels
                .iter()
                .zip(other.labels)
                .all(|(a, b)| same(a.name, b.name) && (a.name == skip || same(&a.value, &b.value)))
    }

    /// [`Child::key_without`] into a reused buffer (cleared first).
    pub fn write_key_without(&self, skip: &str, key: &mut String) {
        key.clear();
        // Identities hold a handful of labels: sort them on the stack, a Vec only past that.
        const ON_STACK: usize = 16;
        let mut stack = [("", ""); ON_STACK];
        let mut heap = Vec::new();
        let mut count = 0;
        for label in self.labels {
            if is_identity(label.name) && label.name != skip {
                let pair = (label.name, label.value.as_ref());
                match stack.get_mut(count) {
                    Some(slot) => *slot = pair,
                    None => heap.push(pair),
                }
                count += 1;
            }
        }
        let sorted: &mut [(&str, &str)] = if count <= ON_STACK {
            &mut stack[..count]
        } else {
            heap.splice(0..0, stack);
            &mut heap
        };
        // Names are unique within a sample: ordering by name orders the pairs.
        sorted.sort_unstable_by(|a, b| cmp_short(a.0, b.0));
        key.reserve(sorted.iter().map(|(n, v)| n.len() + v.len() + 2).sum());
        push_label_key(key, sorted.iter().copied());
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

/// Applies the rank rule to the samples named `name` on `page`.
pub fn children<'a>(page: &'a Page<'_>, name: &str, collapse: PidCollapse) -> Vec<Child<'a>> {
    children_of(
        page,
        page.samples.iter().filter(|s| s.name == name),
        collapse,
    )
}

/// One sample of a family on its way through the rule.
struct Entry<'a> {
    /// Its identity labels (sorted) in the family's shared buffer.
    identity: Range<usize>,
    /// The identity's place among the family's identities, when [`packed_keys`] found one.
    key: u64,
    /// `(pp_rank, tp_rank)`, 0 when absent or not a number.
    ranks: (u64, u64),
    /// Its place on the page, within the family.
    order: u32,
    pid: Option<&'a str>,
    labels: &'a [Label<'a>],
    value: f64,
}

/// Applies the rank rule to the given samples of one family of `page`. Children come in the
/// order of their sorted identity labels.
pub fn children_of<'a, 'p: 'a>(
    page: &'a Page<'p>,
    samples: impl Iterator<Item = &'a Sample<'p>>,
    collapse: PidCollapse,
) -> Vec<Child<'a>> {
    let mut samples = samples.peekable();
    let Some(first) = samples.next() else {
        return Vec::new();
    };
    if samples.peek().is_none() {
        return only_child(page.labels(first), first.value);
    }
    let samples = std::iter::once(first).chain(samples);
    // Every identity of the family lives in one buffer: a family costs a few allocations,
    // not one per sample.
    let mut entries: Vec<Entry<'a>> = Vec::with_capacity(samples.size_hint().0);
    let mut identities: Vec<(&'a str, &'a str)> = Vec::with_capacity(entries.capacity() * 3);
    for sample in samples {
        let labels = page.labels(sample);
        let start = identities.len();
        let (mut ranks, mut pid, mut priority) = ((0, 0), None, None);
        for label in labels {
            let value = label.value.as_ref();
            match label.name {
                "pp_rank" => ranks.0 = value.parse().unwrap_or(0),
                "tp_rank" => ranks.1 = value.parse().unwrap_or(0),
                "pid" => pid = Some(value),
                "priority" => priority = Some(value),
                "moe_ep_rank" => {}
                name => identities.push((name, value)),
            }
        }
        // 1. Only the total of a priority breakdown counts.
        if priority.is_some_and(|p| !p.is_empty()) {
            identities.truncate(start);
            continue;
        }
        // Names are unique within a sample: ordering by name orders the pairs.
        identities[start..].sort_unstable_by(|a, b| cmp_short(a.0, b.0));
        entries.push(Entry {
            identity: start..identities.len(),
            key: 0,
            ranks,
            order: entries.len() as u32,
            pid,
            labels,
            value: sample.value,
        });
    }
    // 2. Group by identity, in identity order, then by ranks and page order.
    let keyed = packed_keys(&identities, &mut entries);
    let identity = |i: u32| &identities[entries[i as usize].identity.clone()];
    let same_identity = |a: u32, b: u32| match keyed {
        Some(_) => entries[a as usize].key == entries[b as usize].key,
        None => cmp_identity(identity(a), identity(b)).is_eq(),
    };
    let sorted = sorted_order(&entries, keyed, |a, b| {
        cmp_identity(identity(a), identity(b))
    });
    let mut kids = Vec::new();
    let mut rest = sorted.as_slice();
    while let Some(&first) = rest.first() {
        let group = rest
            .iter()
            .position(|&e| !same_identity(e, first))
            .unwrap_or(rest.len());
        // 4. The lowest pp_rank, then the lowest tp_rank, speaks for the group.
        let ranks = entries[first as usize].ranks;
        let lowest = rest[..group]
            .iter()
            .position(|&e| entries[e as usize].ranks != ranks)
            .unwrap_or(group);
        kids.push(Child {
            labels: entries[first as usize].labels,
            value: collapse_copies(&rest[..lowest], &entries, collapse),
        });
        rest = &rest[group..];
    }
    kids
}

/// The rule on a family of one sample (most gauges and counters, a histogram's `_sum` and
/// `_count`): it is its own child, with its value whatever the collapse, unless it is part
/// of a priority breakdown.
fn only_child<'a>(labels: &'a [Label<'a>], value: f64) -> Vec<Child<'a>> {
    let breakdown = labels
        .iter()
        .any(|l| l.name == "priority" && !l.value.is_empty());
    if breakdown {
        Vec::new()
    } else {
        vec![Child { labels, value }]
    }
}

/// The entries' places in identity order, then rank order, then page order. With packed
/// keys of at most 32 bits and one rank for all, which is how engines print a family, key
/// and page order share one integer and the sort moves nothing else.
fn sorted_order(
    entries: &[Entry],
    key_bits: Option<u32>,
    cmp_identity: impl Fn(u32, u32) -> Ordering,
) -> Vec<u32> {
    let one_rank = entries.windows(2).all(|w| w[0].ranks == w[1].ranks);
    match key_bits {
        Some(bits) if bits <= 32 && one_rank => {
            let mut packed: Vec<u64> = entries
                .iter()
                .map(|e| (e.key << 32) | u64::from(e.order))
                .collect();
            packed.sort_unstable();
            packed.into_iter().map(|p| p as u32).collect()
        }
        Some(_) => {
            let mut sorted: Vec<u32> = (0..entries.len() as u32).collect();
            sorted.sort_unstable_by_key(|&i| {
                let e = &entries[i as usize];
                (e.key, e.ranks, i)
            });
            sorted
        }
        None => {
            let mut sorted: Vec<u32> = (0..entries.len() as u32).collect();
            sorted.sort_unstable_by(|&a, &b| {
                let ranks = |i: u32| entries[i as usize].ranks;
                cmp_identity(a, b).then((ranks(a), a).cmp(&(ranks(b), b)))
            });
            sorted
        }
    }
}

/// Gives every entry a `key` whose integer order is the order of its identity, and returns
/// the bits the keys use, when it could: when all identities have the same label names
/// (engines print every child of a family with the same labels), each value is ranked
/// among the distinct values at its position and the ranks are packed, first position
/// highest. Families with mixed label names, many distinct values or too many bits fall
/// back to comparing the strings (`None`).
fn packed_keys(identities: &[(&str, &str)], entries: &mut [Entry]) -> Option<u32> {
    const MAX_DISTINCT: usize = 64;
    let Some(first) = entries.first() else {
        return Some(0);
    };
    let names = &identities[first.identity.clone()];
    let same_names = entries.iter().all(|e| {
        let other = &identities[e.identity.clone()];
        other.len() == names.len() && other.iter().zip(names).all(|(a, b)| a.0 == b.0)
    });
    if !same_names {
        return None;
    }
    let mut bits = 0;
    let mut distinct: Vec<(&str, u64)> = Vec::new();
    let mut slots: Vec<u8> = Vec::with_capacity(entries.len());
    for position in 0..names.len() {
        distinct.clear();
        slots.clear();
        let mut previous = 0;
        for e in entries.iter() {
            let value = identities[e.identity.start + position].1;
            let print = fingerprint(value);
            let same = |&(d, p): &(&str, u64)| p == print && (value.len() <= 7 || d == value);
            // Children of a family come in runs and cycles (every `le` of one child, then of
            // the next): the value is mostly the previous one, the next one or the first.
            let is = |slot: usize| distinct.get(slot).is_some_and(same);
            let slot = if is(previous) {
                previous
            } else if is(previous + 1) {
                previous + 1
            } else if let Some(slot) = distinct.iter().position(same) {
                slot
            } else if distinct.len() == MAX_DISTINCT {
                return None;
            } else {
                distinct.push((value, print));
                distinct.len() - 1
            };
            slots.push(slot as u8);
            previous = slot;
        }
        let width = usize::BITS - (distinct.len() - 1).leading_zeros();
        bits += width;
        if bits > u64::BITS {
            return None;
        }
        let mut by_value: Vec<usize> = (0..distinct.len()).collect();
        by_value.sort_unstable_by(|a, b| cmp_short(distinct[*a].0, distinct[*b].0));
        let mut rank_of_slot = [0u64; MAX_DISTINCT];
        for (rank, slot) in by_value.into_iter().enumerate() {
            rank_of_slot[slot] = rank as u64;
        }
        for (e, slot) in entries.iter_mut().zip(&slots) {
            e.key = (e.key << width) | rank_of_slot[*slot as usize];
        }
    }
    Some(bits)
}

/// A string's length and first seven bytes as one integer: equal strings have equal
/// fingerprints, and strings of at most seven bytes (most label values: `le` bounds, ranks,
/// engine numbers) are equal exactly when theirs are, with no byte comparison.
fn fingerprint(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut print = bytes.len().min(255) as u64;
    for (i, &b) in bytes.iter().take(7).enumerate() {
        print |= u64::from(b) << (8 * (i + 1));
    }
    print
}

/// Collapses the `pid` copies of one group at its lowest rank, given in page order. Each pid
/// counts at its last line (a repeated identical series keeps the last sample). A NaN copy of
/// a fraction is a missing reading and is left out; a NaN among counts or counters poisons
/// the result, so the window check downstream sees it. Never a sum.
fn collapse_copies(copies: &[u32], entries: &[Entry], collapse: PidCollapse) -> f64 {
    match copies {
        [only] => collapse_values([entries[*only as usize].value].into_iter(), collapse),
        _ => collapse_values(last_of_each_pid(copies, entries).into_iter(), collapse),
    }
}

fn collapse_values(values: impl Iterator<Item = f64> + Clone, collapse: PidCollapse) -> f64 {
    match collapse {
        PidCollapse::Mean => {
            let known = values.filter(|v| !v.is_nan());
            let count = known.clone().count();
            if count == 0 {
                f64::NAN
            } else {
                known.sum::<f64>() / count as f64
            }
        }
        PidCollapse::Max => {
            if values.clone().any(|v| v.is_nan()) {
                f64::NAN
            } else {
                values.fold(f64::NEG_INFINITY, f64::max)
            }
        }
    }
}

/// The value at each pid's last line, ordered by those lines.
fn last_of_each_pid(copies: &[u32], entries: &[Entry]) -> Vec<f64> {
    let mut seen = std::collections::HashSet::new();
    let mut values: Vec<f64> = copies
        .iter()
        .rev()
        .map(|&i| &entries[i as usize])
        .filter(|e| seen.insert(e.pid))
        .map(|e| e.value)
        .collect();
    values.reverse();
    values
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
    fn values_that_differ_past_their_seventh_byte_are_different_children() {
        let page = parse("r{m=\"abcdefg1\"} 1\nr{m=\"abcdefg2\"} 2\nr{m=\"abcdefg1\"} 3\n");
        let values: Vec<f64> = children(&page, "r", PidCollapse::Max)
            .iter()
            .map(|c| c.value)
            .collect();
        assert_eq!(values, vec![3.0, 2.0]);
        assert_ne!(
            fingerprint("abc"),
            fingerprint("abc\0"),
            "the length is part of it"
        );
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
