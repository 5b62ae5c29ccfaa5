//! What the adapters read with: a page indexed by series name, the rank rule per family, and
//! the notes on which series were used or ignored and which readings are missing.

use std::collections::BTreeMap;

use super::filter::{HISTOGRAM_PARTS, histogram_base};
use super::{Counter, EngineKind, EngineSample, Histogram, Latency, SeriesUse, reads_series};
use crate::exposition::{Page, Sample, parse_value};
use crate::rank::{Child, PidCollapse, children_of, is_identity, push_label_key};

/// A page with its samples found by series name.
pub struct Families<'a, 'p> {
    pub page: &'a Page<'p>,
    /// The runs of samples of one series, in page order: children of a family come in runs,
    /// and an engine page has a few dozen, so a scan beats hashing every name.
    runs: Vec<Run<'p>>,
    /// The engine whose family list every lookup must pass (checked in debug builds), so a
    /// series the adapter reads can never be filtered out of the page before it.
    listed: Option<EngineKind>,
}

/// Samples `start..end` of a page, all of series `name`.
struct Run<'p> {
    name: &'p str,
    start: usize,
    end: usize,
}

impl<'a, 'p> Families<'a, 'p> {
    pub fn new(page: &'a Page<'p>) -> Self {
        // An engine page has a few dozen runs.
        let mut runs: Vec<Run<'p>> = Vec::with_capacity(64);
        for (i, sample) in page.samples.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if run.name == sample.name => run.end = i + 1,
                _ => runs.push(Run {
                    name: sample.name,
                    start: i,
                    end: i + 1,
                }),
            }
        }
        Families {
            page,
            runs,
            listed: None,
        }
    }

    pub(super) fn listed(page: &'a Page<'p>, engine: EngineKind) -> Self {
        Families {
            listed: Some(engine),
            ..Families::new(page)
        }
    }

    /// Whether any sample of this series is on the page.
    pub fn has(&self, name: &str) -> bool {
        self.check_listed(name);
        self.runs.iter().any(|run| run.name == name)
    }

    /// Whether any part of this histogram is on the page.
    pub fn has_histogram(&self, base: &str) -> bool {
        if cfg!(debug_assertions) {
            for part in HISTOGRAM_PARTS {
                self.check_listed(&format!("{base}{part}"));
            }
        }
        self.runs
            .iter()
            .any(|run| histogram_base(run.name) == Some(base))
    }

    fn check_listed(&self, name: &str) {
        if let Some(engine) = self.listed {
            debug_assert!(
                reads_series(engine, name),
                "{name} is read but missing from the {engine:?} family list"
            );
        }
    }

    fn samples<'s>(
        &'s self,
        name: &'s str,
    ) -> impl Iterator<Item = &'a Sample<'p>> + use<'a, 'p, 's> {
        self.check_listed(name);
        let page = self.page;
        let mut runs = self.runs.iter().filter(move |run| run.name == name);
        // Mostly one run: its slice iterator, so the rank rule can size its buffers.
        let first = runs
            .next()
            .map_or(&[][..], |run| &page.samples[run.start..run.end]);
        first
            .iter()
            .chain(runs.flat_map(move |run| &page.samples[run.start..run.end]))
    }

    fn children(&self, name: &str, collapse: PidCollapse) -> Vec<Child<'a>> {
        children_of(self.page, self.samples(name), collapse)
    }
}

/// One page being read into an [`EngineSample`].
pub(super) struct Reader<'a, 'p> {
    pub families: Families<'a, 'p>,
    pub sample: EngineSample,
    /// Whether to record [`EngineSample::series`]: only `mds inspect-metrics` shows them.
    notes: bool,
}

impl<'a, 'p> Reader<'a, 'p> {
    pub fn new(families: Families<'a, 'p>, notes: bool) -> Self {
        Reader {
            families,
            sample: EngineSample::default(),
            notes,
        }
    }

    /// Notes how a series was treated; the text is only built when notes are recorded.
    pub fn note(&mut self, name: &str, used: bool, note: impl FnOnce() -> String) {
        if self.notes {
            self.sample.series.push(SeriesUse {
                name: name.to_string(),
                used,
                note: note(),
            });
        }
    }

    pub fn lack(&mut self, reading: Option<&'static str>, why: impl FnOnce() -> String) {
        if let Some(reading) = reading {
            self.sample.missing.insert(reading, why());
        }
    }

    /// Sums a gauge family after the rank rule; notes its use, and why values were left out.
    /// `reading` names what is missing without it (none for optional gauges).
    pub fn gauge_sum(
        &mut self,
        name: &str,
        what: &str,
        reading: Option<&'static str>,
    ) -> Option<f64> {
        let kids = self.families.children(name, PidCollapse::Max);
        if kids.is_empty() {
            self.lack(reading, || format!("{name} is not on the page"));
            return None;
        }
        // A request count is finite and never negative; anything else is garbage.
        let valid = |v: &f64| v.is_finite() && *v >= 0.0;
        let values = kids.iter().map(|c| c.value).filter(valid);
        let kept = values.clone().count();
        let garbage = kids.len() - kept;
        if kept == 0 {
            let why = format!(
                "every value of {name} is negative or not a number ({garbage} scheduler(s)); a request count never is"
            );
            self.note(name, false, || why.clone());
            self.lack(reading, || why);
            return None;
        }
        self.note(name, true, || {
            let left_out = match garbage {
                0 => String::new(),
                n => format!("; {n} negative or not-a-number value(s) left out"),
            };
            format!("{what}: {kept} scheduler(s){left_out}")
        });
        Some(values.sum())
    }

    pub fn kv_fractions(&mut self, name: &str) -> bool {
        let kids = self.families.children(name, PidCollapse::Mean);
        if kids.is_empty() {
            self.lack(Some(super::reading::KV_USAGE), || {
                format!("{name} is not on the page")
            });
            return false;
        }
        // A usage fraction lies in [0, 1]; NaN, infinities and percentages are no reading.
        self.sample.kv_usage = kids
            .iter()
            .map(|c| c.value)
            .filter(|v| (0.0..=1.0).contains(v))
            .collect();
        let kept = self.sample.kv_usage.len();
        let outside = kids.len() - kept;
        if kept == 0 {
            let why = format!(
                "every value of {name} lies outside 0 to 1 ({outside} scheduler(s)); a usage fraction never does (a percentage?)"
            );
            self.note(name, false, || why.clone());
            self.lack(Some(super::reading::KV_USAGE), || why);
            return true;
        }
        self.note(name, true, || {
            let left_out = match outside {
                0 => String::new(),
                n => format!("; {n} value(s) outside 0 to 1 left out"),
            };
            format!("KV usage: {kept} scheduler(s){left_out}")
        });
        true
    }

    /// Adds every child of a counter family and notes the family when it has any; `reading`
    /// names what is missing without it.
    pub fn counter(
        &mut self,
        name: &str,
        counter: Counter,
        note: &str,
        reading: Option<&'static str>,
    ) -> bool {
        let added = self.add_counter(name, counter, |_| true);
        if added == 0 {
            self.lack(reading, || format!("{name} is not on the page"));
            return false;
        }
        let broken = self
            .sample
            .counters
            .iter()
            .filter(|((c, _), v)| *c == counter && (!v.is_finite() || **v < 0.0))
            .count();
        self.note(name, true, || match broken {
            0 => note.to_string(),
            n => format!(
                "{note}; {n} value(s) negative or not a number: a window over them has no rate"
            ),
        });
        true
    }

    pub fn add_counter(
        &mut self,
        name: &str,
        counter: Counter,
        filter: impl Fn(&Child) -> bool,
    ) -> usize {
        let mut added = 0;
        for child in self
            .families
            .children(name, PidCollapse::Max)
            .into_iter()
            .filter(|c| filter(c))
        {
            self.sample
                .counters
                .insert((counter, child.key_without("")), child.value);
            added += 1;
        }
        added
    }

    pub fn add_histogram(&mut self, base: &str, latency: Latency) -> bool {
        let mut name = String::with_capacity(base.len() + "_bucket".len());
        let mut part = |suffix: &str| {
            name.clear();
            name.push_str(base);
            name.push_str(suffix);
            self.families.children(&name, PidCollapse::Max)
        };
        let (sums, counts) = (part("_sum"), part("_count"));
        let mut bucket_name = String::with_capacity(base.len() + "_bucket".len());
        bucket_name.push_str(base);
        bucket_name.push_str("_bucket");
        let mut grouped = Grouped::default();
        let mut key = String::new();
        let (any_bucket, bad_bounds) =
            match plain_buckets(self.families.samples(&bucket_name), self.families.page) {
                Some((child, buckets)) => {
                    child.write_key_without("le", &mut key);
                    let slot = grouped.slot(&key);
                    grouped.children[slot].1.buckets = buckets;
                    (true, 0)
                }
                None => {
                    let buckets = self.families.children(&bucket_name, PidCollapse::Max);
                    (!buckets.is_empty(), group_buckets(&buckets, &mut grouped))
                }
            };
        if !any_bucket && sums.is_empty() && counts.is_empty() {
            self.lack(Some(latency.reading()), || {
                format!("{base} is not on the page")
            });
            return false;
        }
        for child in &sums {
            child.write_key_without("", &mut key);
            let slot = grouped.slot(&key);
            grouped.children[slot].1.sum = Some(child.value);
        }
        for child in &counts {
            child.write_key_without("", &mut key);
            let slot = grouped.slot(&key);
            grouped.children[slot].1.count = Some(child.value);
        }
        for (key, mut histogram) in grouped.children {
            histogram.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            self.sample.histograms.insert((latency, key), histogram);
        }
        self.note(base, true, || match bad_bounds {
            0 => format!("{latency:?} histogram"),
            n => format!(
                "{latency:?} histogram; {n} bucket line(s) whose le is not a number or -Inf left out"
            ),
        });
        true
    }

    /// Records every `_created` gauge and `process_start_time_seconds`.
    pub fn process_marks(&mut self) {
        let page = self.families.page;
        // A page has a mark per counter and histogram child and one for the process.
        let mut labels: Vec<(&str, &str)> = Vec::with_capacity(8);
        let mut marks: Vec<(String, f64)> = Vec::with_capacity(16);
        for sample in &page.samples {
            if sample.name.ends_with("_created") || sample.name == "process_start_time_seconds" {
                // Label order on the page is not significant: key by sorted labels.
                labels.clear();
                labels.extend(
                    page.labels(sample)
                        .iter()
                        .map(|l| (l.name, l.value.as_ref())),
                );
                labels.sort_unstable();
                let length = labels
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 2)
                    .sum::<usize>();
                let mut key = String::with_capacity(sample.name.len() + length);
                key.push_str(sample.name);
                push_label_key(&mut key, labels.iter().copied());
                marks.push((key, sample.value));
            }
        }
        // Built from sorted, distinct keys in one pass; a repeated mark keeps its last value.
        marks.sort_by(|a, b| a.0.cmp(&b.0));
        let mut distinct: Vec<(String, f64)> = Vec::with_capacity(marks.len());
        for mark in marks {
            match distinct.last_mut() {
                Some(last) if last.0 == mark.0 => *last = mark,
                _ => distinct.push(mark),
            }
        }
        self.sample.process_marks = distinct.into_iter().collect();
    }
}

/// Histogram children by key, in the order first seen.
#[derive(Default)]
struct Grouped {
    children: Vec<(String, Histogram)>,
    index: BTreeMap<String, usize>,
}

impl Grouped {
    /// The place of the child with this key, added empty when new.
    fn slot(&mut self, key: &str) -> usize {
        if let Some(&slot) = self.index.get(key) {
            return slot;
        }
        self.index.insert(key.to_string(), self.children.len());
        self.children.push((key.to_string(), Histogram::default()));
        self.children.len() - 1
    }
}

/// The bucket lines of a histogram as engines print them, read without the rank rule: every
/// line prints the labels of the first in the same order, `le` aside, none of them a duplicate
/// axis or `priority`, and the bounds rise strictly down the page. Then every line is its own
/// child, all of one histogram child, already in bound order: what the rule and
/// [`group_buckets`] make of them, at a fraction of the cost. Gives that child (its value
/// unused) and its buckets; `None` for any page printed otherwise (and for no lines at all).
fn plain_buckets<'a, 'p: 'a>(
    mut samples: impl Iterator<Item = &'a Sample<'p>>,
    page: &'a Page<'p>,
) -> Option<(Child<'a>, Vec<(f64, f64)>)> {
    let first = samples.next()?;
    let labels = page.labels(first);
    let le_at = labels.iter().position(|l| l.name == "le")?;
    if !labels.iter().all(|l| is_identity(l.name)) {
        return None;
    }
    let child = Child::new(labels, 0.0);
    let mut buckets = Vec::with_capacity(samples.size_hint().0 + 1);
    buckets.push((bucket_bound(&labels[le_at].value)?, first.value));
    for sample in samples {
        let other = page.labels(sample);
        if !Child::new(other, sample.value).same_labels_without(&child, "le") {
            return None;
        }
        // The same names in the same order: `le` is where it was on the first line.
        let le =
            bucket_bound(&other[le_at].value).filter(|le| *le > buckets[buckets.len() - 1].0)?;
        buckets.push((le, sample.value));
    }
    Some((child, buckets))
}

/// A bucket's bound: finite or +Inf; `NaN` or `-Inf` drops just that bucket line.
fn bucket_bound(le: &str) -> Option<f64> {
    parse_value(le).filter(|le| le.is_finite() || *le == f64::INFINITY)
}

/// Bucket lines, after the rank rule, grouped into histogram children by their identity
/// without `le`; a key is allocated once per histogram child, not once per bucket line.
/// Returns the lines left out for a bound that is not a number or is −Inf.
fn group_buckets(buckets: &[Child], grouped: &mut Grouped) -> usize {
    let mut key = String::new();
    let mut bad_bounds = 0;
    let mut previous: Option<(&Child, usize)> = None;
    for child in buckets {
        let Some(le) = child.label("le").and_then(bucket_bound) else {
            bad_bounds += 1;
            continue;
        };
        let slot = match previous {
            Some((last, slot)) if child.same_labels_without(last, "le") => slot,
            _ => {
                child.write_key_without("le", &mut key);
                grouped.slot(&key)
            }
        };
        grouped.children[slot].1.buckets.push((le, child.value));
        previous = Some((child, slot));
    }
    bad_bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::parse;
    use proptest::prelude::*;

    /// Each histogram child's key and buckets in bound order, and the lines left out, as the
    /// rank rule and [`group_buckets`] read the family.
    fn by_the_rule(page: &Page, name: &str) -> (String, usize) {
        let children = Families::new(page).children(name, PidCollapse::Max);
        let mut grouped = Grouped::default();
        let bad = group_buckets(&children, &mut grouped);
        let read: Vec<_> = grouped
            .children
            .into_iter()
            .map(|(key, mut h)| {
                h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                (key, h.buckets)
            })
            .collect();
        // Debug shows NaN and -0.0 as they are.
        (format!("{read:?}"), bad)
    }

    fn plain(page: &Page, name: &str) -> Option<String> {
        let families = Families::new(page);
        let (child, buckets) = plain_buckets(families.samples(name), page)?;
        let key = child.key_without("le");
        Some(format!("{:?}", vec![(key, buckets)]))
    }

    /// Bucket lines mostly as engines print them (the same labels in one order, bounds rising),
    /// now and then broken: a duplicate axis or priority, a bound out of order, repeated, not
    /// a number or written another way, a label that differs on one line, a missing `le`.
    fn bucket_family() -> impl Strategy<Value = String> {
        let bounds = proptest::sample::subsequence(
            vec!["0.001", "0.01", "0.1", "0.5", "1", "2.5", "10", "+Inf"],
            1..8,
        );
        let odd_bound = proptest::sample::select(vec!["NaN", "-Inf", "x", "1.0", "0.1", "+Inf"]);
        let extra = proptest::sample::select(vec![
            "",
            "",
            "",
            "",
            "tp_rank=\"1\"",
            "pid=\"7\"",
            "priority=\"\"",
            "priority=\"2\"",
            "moe_ep_rank=\"0\"",
            "dp_rank=\"1\"",
        ]);
        let value = proptest::sample::select(vec!["0", "1", "3", "3.5", "NaN", "-0.0", "9"]);
        (
            bounds,
            proptest::collection::vec(value, 8),
            0..3usize,
            extra,
            proptest::option::weighted(0.2, (0..8usize, odd_bound)),
            proptest::option::weighted(0.15, 0..8usize),
            proptest::option::weighted(0.1, 0..8usize),
        )
            .prop_map(|(bounds, values, le_at, extra, odd, differs, no_le)| {
                let mut lines = Vec::new();
                for (i, bound) in bounds.iter().enumerate() {
                    let le = match odd {
                        Some((at, text)) if at == i => text,
                        _ => bound,
                    };
                    let engine = if differs == Some(i) { "1" } else { "0" };
                    let mut labels = vec![
                        "model_name=\"m\"".to_string(),
                        format!("engine=\"{engine}\""),
                    ];
                    if no_le != Some(i) {
                        labels.insert(le_at, format!("le=\"{le}\""));
                    }
                    if !extra.is_empty() {
                        labels.push(extra.to_string());
                    }
                    lines.push(format!("h_bucket{{{}}} {}", labels.join(","), values[i]));
                }
                lines.join("\n")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn plain_buckets_read_as_the_rank_rule_does(text in bucket_family()) {
            let page = parse(&text);
            if let Some(plain) = plain(&page, "h_bucket") {
                prop_assert_eq!((plain, 0), by_the_rule(&page, "h_bucket"), "{}", text);
            }
        }
    }

    #[test]
    fn bucket_lines_as_engines_print_them_are_read_plainly() {
        let text = "h_bucket{model_name=\"m\",engine=\"0\",le=\"0.1\"} 1\n\
                    h_bucket{model_name=\"m\",engine=\"0\",le=\"1.0\"} 2\n\
                    h_bucket{model_name=\"m\",engine=\"0\",le=\"+Inf\"} 2\n";
        let page = parse(text);
        assert_eq!(
            plain(&page, "h_bucket"),
            Some(by_the_rule(&page, "h_bucket").0)
        );
        // Two children of one family take the rule's way.
        let two = format!("{text}{}", text.replace("\"0\"", "\"1\""));
        assert_eq!(plain(&parse(&two), "h_bucket"), None);
    }
}
