//! Renders an [`EngineState`] as the `/metrics` page the real engine serves (Prometheus text
//! format 0.0.4, as Python's `prometheus_client` writes it; ENGINE-METRICS.md §1–§3).
//!
//! Counters and histogram counts are rounded down to whole numbers, as real engines count
//! whole tokens and requests; gauges of requests are whole numbers too.

mod sglang;
mod vllm;

use crate::engine::{EngineFlavor, EngineState, histogram::HistogramAcc};

/// What a page says besides the engine's numbers.
#[derive(Clone, Copy, Debug)]
pub struct PageContext<'a> {
    /// The `model_name` label.
    pub model_name: &'a str,
}

/// The page of one engine process.
pub fn render(state: &EngineState, context: &PageContext) -> String {
    let mut page = Page::default();
    match state.flavor {
        EngineFlavor::Vllm010 | EngineFlavor::Vllm011 => vllm::render(&mut page, state, context),
        EngineFlavor::Sglang => sglang::render(&mut page, state, context),
    }
    page.out
}

/// A number as `prometheus_client` prints it: whole numbers with `.0`, `+Inf`, `NaN`.
pub(crate) fn number(value: f64) -> String {
    let mut out = String::new();
    push_number(&mut out, value);
    out
}

/// [`number`] written onto `out` (pages are rendered on every simulated scrape).
fn push_number(out: &mut String, value: f64) {
    use std::fmt::Write as _;
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        let _ = write!(out, "{}.0", value as i64);
    } else if value.fract() == 0.0 && value.abs() < 1e16 {
        let _ = write!(out, "{value:.1}");
    } else {
        let _ = write!(out, "{value}");
    }
}

/// A label value with `\`, `"` and newlines escaped, written onto `out`.
fn push_escaped(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[derive(Default)]
pub(crate) struct Page {
    out: String,
}

impl Page {
    pub(crate) fn family(&mut self, name: &str, help: &str, kind: &str) {
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }

    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                push_escaped(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_number(&mut self.out, value);
        self.out.push('\n');
    }

    /// A gauge family with one sample.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.family(name, help, "gauge");
        self.sample(name, labels, value);
    }

    /// A counter family (`_total` on the TYPE line and the sample) with one sample.
    pub(crate) fn counter(
        &mut self,
        total_name: &str,
        help: &str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        self.family(total_name, help, "counter");
        self.sample(total_name, labels, value.floor());
    }

    /// The `_created` gauge family single-process collectors add after a counter or histogram.
    pub(crate) fn created(&mut self, base: &str, labels: &[(&str, &str)], unix_seconds: f64) {
        let name = format!("{base}_created");
        self.family(&name, &format!("Creation time of {base}"), "gauge");
        self.sample(&name, labels, unix_seconds);
    }

    /// A histogram child: buckets, `_count` and `_sum`, with `_sum` first when `sum_first`
    /// (multiprocess collectors).
    pub(crate) fn histogram(
        &mut self,
        base: &str,
        help: &str,
        labels: &[(&str, &str)],
        h: &HistogramAcc,
        sum_first: bool,
    ) {
        self.family(base, help, "histogram");
        let sum_name = format!("{base}_sum");
        if sum_first {
            self.sample(&sum_name, labels, h.sum);
        }
        let bucket = format!("{base}_bucket");
        let count = h.count.floor();
        for (bound, cumulative) in h.bounds.iter().zip(&h.cumulative) {
            let le = number(*bound);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative.floor().min(count));
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, count);
        self.sample(&format!("{base}_count"), labels, count);
        if !sum_first {
            self.sample(&sum_name, labels, h.sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_prometheus_client() {
        assert_eq!(number(14.0), "14.0");
        assert_eq!(number(0.62), "0.62");
        assert_eq!(number(2560.0), "2560.0");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NAN), "NaN");
    }

    #[test]
    fn label_values_are_escaped() {
        let mut page = Page::default();
        page.sample("x", &[("model_name", "a\"b\\c")], 1.0);
        assert_eq!(page.out, "x{model_name=\"a\\\"b\\\\c\"} 1.0\n");
    }
}
