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
    // A vLLM page is about 9 kB; one allocation instead of a dozen doublings.
    let mut page = Page {
        out: String::with_capacity(12 * 1024),
    };
    match state.flavor {
        EngineFlavor::Vllm010 | EngineFlavor::Vllm011 => vllm::render(&mut page, state, context),
        EngineFlavor::Sglang => sglang::render(&mut page, state, context),
    }
    page.out
}

/// A number as `prometheus_client` prints it: whole numbers with `.0`, `+Inf`, `NaN`.
#[cfg(test)]
fn number(value: f64) -> String {
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
        push_integer(out, value as i64);
        out.push_str(".0");
    } else if value.fract() == 0.0 && value.abs() < 1e16 {
        let _ = write!(out, "{value:.1}");
    } else {
        let _ = write!(out, "{value}");
    }
}

/// A whole number's digits (the formatter's machinery costs more than the digits on a
/// page of a few hundred numbers rendered on every simulated scrape).
fn push_integer(out: &mut String, value: i64) {
    if value < 0 {
        out.push('-');
    }
    let mut digits = [0u8; 20];
    let mut rest = value.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for &d in &digits[start..] {
        out.push(char::from(d));
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
        for part in [
            "# HELP ",
            name,
            " ",
            help,
            "\n# TYPE ",
            name,
            " ",
            kind,
            "\n",
        ] {
            self.out.push_str(part);
        }
    }

    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.sample_with_le(name, "", labels, None, value);
    }

    /// A sample named `name` + `suffix`, with a last `le` label when `le` is given.
    fn sample_with_le(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<f64>,
        value: f64,
    ) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
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
            if let Some(le) = le {
                if !labels.is_empty() {
                    self.out.push(',');
                }
                self.out.push_str("le=\"");
                push_number(&mut self.out, le);
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
        if sum_first {
            self.sample_with_le(base, "_sum", labels, None, h.sum);
        }
        let count = h.count.floor();
        for (bound, cumulative) in h.bounds.iter().zip(&h.cumulative) {
            let value = cumulative.floor().min(count);
            self.sample_with_le(base, "_bucket", labels, Some(*bound), value);
        }
        self.sample_with_le(base, "_bucket", labels, Some(f64::INFINITY), count);
        self.sample_with_le(base, "_count", labels, None, count);
        if !sum_first {
            self.sample_with_le(base, "_sum", labels, None, h.sum);
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
        assert_eq!(number(0.0), "0.0");
        assert_eq!(number(-0.0), "0.0");
        assert_eq!(number(-3.0), "-3.0");
        assert_eq!(number(912_345_678_901.0), "912345678901.0");
        assert_eq!(number(2e15), "2000000000000000.0");
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
