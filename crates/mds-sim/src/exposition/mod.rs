//! Renders an [`EngineState`] as the `/metrics` page the real engine serves (Prometheus text
//! format 0.0.4, as Python's `prometheus_client` writes it; ENGINE-METRICS.md §1–§3).
//!
//! Counters and histogram counts are rounded down to whole numbers, as real engines count
//! whole tokens and requests; gauges of requests are whole numbers too.

mod sglang;
mod vllm;

use std::sync::LazyLock;

use crate::engine::histogram::{HistogramAcc, layouts};
use crate::engine::{EngineFlavor, EngineState};

/// What a page says besides the engine's numbers.
#[derive(Clone, Copy, Debug)]
pub struct PageContext<'a> {
    /// The `model_name` label.
    pub model_name: &'a str,
}

/// The page of one engine process.
pub fn render(state: &EngineState, context: &PageContext) -> String {
    // A vLLM page is about 11 kB plus 107 times the model name; one allocation instead of
    // a dozen doublings.
    let mut page = Page {
        out: Vec::with_capacity(20 * 1024),
    };
    match state.flavor {
        EngineFlavor::Vllm010 | EngineFlavor::Vllm011 => vllm::render(&mut page, state, context),
        EngineFlavor::Sglang => sglang::render(&mut page, state, context),
    }
    // Every byte written is a `str`'s or an ASCII digit or sign, so this never fails.
    String::from_utf8(page.out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
}

/// A number as `prometheus_client` prints it: whole numbers with `.0`, `+Inf`, `NaN`.
#[cfg(test)]
fn number(value: f64) -> String {
    let mut out = Vec::new();
    push_number(&mut out, value);
    String::from_utf8(out).expect("a number is ASCII")
}

/// [`number`] written onto `out` (pages are rendered on every simulated scrape).
fn push_number(out: &mut Vec<u8>, value: f64) {
    use std::io::Write as _;
    if value.is_nan() {
        out.extend_from_slice("NaN".as_bytes());
    } else if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 { "+Inf" } else { "-Inf" }.as_bytes());
    } else if let Some(whole) = whole_below(value, 1e15) {
        push_integer(out, whole);
        out.extend_from_slice(".0".as_bytes());
    } else if whole_below(value, 1e16).is_some() {
        let _ = write!(out, "{value:.1}");
    } else if !push_short_decimal(out, value) {
        let _ = write!(out, "{value}");
    }
}

/// Writes a value that is a decimal of at most six places below a million (bucket bounds,
/// KV fractions) as `{value}` would, without the shortest-digits search the formatter runs;
/// returns false, writing nothing, for any other value. When `n / 10^6` parses back to
/// `value` (division by an exact power of ten rounds correctly, as parsing does), `n`'s
/// digits without trailing zeros are the shortest text that does: a decimal of fewer places
/// would be another `n`, and below a million those lie far more than the value's precision
/// apart.
fn push_short_decimal(out: &mut Vec<u8>, value: f64) -> bool {
    const SCALE: f64 = 1e6;
    if value.is_nan() || value.abs() >= SCALE {
        return false;
    }
    // Rounded half away from zero, as `f64::round` (a library call on baseline x86-64).
    let product = value * SCALE;
    let truncated = product as i64;
    let scaled = if (product - truncated as f64).abs() >= 0.5 {
        truncated + if product < 0.0 { -1 } else { 1 }
    } else {
        truncated
    };
    if scaled as f64 / SCALE != value {
        return false;
    }
    let magnitude = scaled.unsigned_abs();
    let (whole, mut fraction) = (magnitude / 1_000_000, magnitude % 1_000_000);
    if fraction == 0 {
        return false;
    }
    if value < 0.0 {
        out.push(b'-');
    }
    push_integer(out, whole as i64);
    let mut digits = [b'0'; 7];
    digits[0] = b'.';
    for slot in digits[1..].iter_mut().rev() {
        *slot = b'0' + (fraction % 10) as u8;
        fraction /= 10;
    }
    let places = 7 - digits.iter().rev().take_while(|&&d| d == b'0').count();
    out.extend_from_slice(&digits[..places]);
    true
}

/// The value as an integer when it is a whole number of magnitude under `limit` (at most
/// 2^63), found with a conversion instead of `fract` (a library call on baseline x86-64).
fn whole_below(value: f64, limit: f64) -> Option<i64> {
    (value.abs() < limit)
        .then_some(value as i64)
        .filter(|&whole| whole as f64 == value)
}

/// `value.floor()` (a library call on baseline x86-64) by a conversion, for the counts a
/// page rounds down.
fn floor(value: f64) -> f64 {
    if value.is_nan() || value.abs() >= 4.5e15 {
        return value.floor();
    }
    let truncated = value as i64 as f64;
    if truncated > value {
        truncated - 1.0
    } else {
        truncated
    }
}

/// A whole number's digits (the formatter's machinery costs more than the digits on a
/// page of a few hundred numbers rendered on every simulated scrape).
fn push_integer(out: &mut Vec<u8>, value: i64) {
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
    if value < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[start..]);
}

/// A label value with `\\`, `"` and newlines escaped, written onto `out`.
fn push_escaped(out: &mut Vec<u8>, value: &str) {
    if memchr::memchr3(b'\\', b'"', b'\n', value.as_bytes()).is_none() {
        out.extend_from_slice(value.as_bytes());
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.extend_from_slice(b"\\\\"),
            '"' => out.extend_from_slice(b"\\\""),
            '\n' => out.extend_from_slice(b"\\n"),
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

/// A bucket layout and the `le` text of each of its bounds.
type LayoutTexts = (&'static [f64], Vec<Vec<u8>>);

/// The `le` text of each bound of the engines' bucket layouts, written once: every page of
/// every engine prints the same bounds.
static LE_TEXTS: LazyLock<Vec<LayoutTexts>> = LazyLock::new(|| {
    [
        layouts::VLLM_TTFT,
        layouts::VLLM_ITL,
        layouts::SGLANG_TTFT,
        layouts::SGLANG_ITL,
    ]
    .into_iter()
    .map(|bounds| {
        let texts = bounds
            .iter()
            .map(|&bound| {
                let mut text = Vec::new();
                push_number(&mut text, bound);
                text
            })
            .collect();
        (bounds, texts)
    })
    .collect()
});

/// The `le` texts of `bounds` when they are one of the engines' layouts (the same slice).
fn le_texts(bounds: &'static [f64]) -> Option<&'static [Vec<u8>]> {
    LE_TEXTS
        .iter()
        .find(|(layout, _)| std::ptr::eq(*layout, bounds))
        .map(|(_, texts)| texts.as_slice())
}

/// A label set as a sample prints it, `name="value",...` with values escaped: rendered once
/// per page, not once per sample.
#[derive(Default)]
pub(crate) struct Labels(Vec<u8>);

impl Labels {
    pub(crate) fn new(labels: &[(&str, &str)]) -> Labels {
        let mut text = Labels::default();
        for (name, value) in labels {
            text.push(name, value);
        }
        text
    }

    /// These labels and one more, last.
    pub(crate) fn with(&self, name: &str, value: &str) -> Labels {
        let mut text = Labels(self.0.clone());
        text.push(name, value);
        text
    }

    fn push(&mut self, name: &str, value: &str) {
        if !self.0.is_empty() {
            self.0.push(b',');
        }
        self.0.extend_from_slice(name.as_bytes());
        self.0.extend_from_slice(b"=\"");
        push_escaped(&mut self.0, value);
        self.0.push(b'"');
    }
}

#[derive(Default)]
pub(crate) struct Page {
    /// The page's bytes: digits go in without a UTF-8 check each.
    out: Vec<u8>,
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
            self.out.extend_from_slice(part.as_bytes());
        }
    }

    pub(crate) fn sample(&mut self, name: &str, labels: &Labels, value: f64) {
        self.sample_with_le(name, "", labels, None, value);
    }

    /// A sample named `name` + `suffix`, with a last `le` label (its text) when `le` is given.
    fn sample_with_le(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &Labels,
        le: Option<&[u8]>,
        value: f64,
    ) {
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(suffix.as_bytes());
        if !labels.0.is_empty() || le.is_some() {
            self.out.push(b'{');
            self.out.extend_from_slice(&labels.0);
            if let Some(le) = le {
                if !labels.0.is_empty() {
                    self.out.push(b',');
                }
                self.out.extend_from_slice(b"le=\"");
                self.out.extend_from_slice(le);
                self.out.push(b'"');
            }
            self.out.push(b'}');
        }
        self.out.push(b' ');
        push_number(&mut self.out, value);
        self.out.push(b'\n');
    }

    /// A gauge family with one sample.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, labels: &Labels, value: f64) {
        self.family(name, help, "gauge");
        self.sample(name, labels, value);
    }

    /// A counter family (`_total` on the TYPE line and the sample) with one sample.
    pub(crate) fn counter(&mut self, total_name: &str, help: &str, labels: &Labels, value: f64) {
        self.family(total_name, help, "counter");
        self.sample(total_name, labels, floor(value));
    }

    /// The `_created` gauge family single-process collectors add after a counter or histogram.
    pub(crate) fn created(&mut self, base: &str, labels: &Labels, unix_seconds: f64) {
        for part in ["# HELP ", base, "_created Creation time of ", base] {
            self.out.extend_from_slice(part.as_bytes());
        }
        for part in ["\n# TYPE ", base, "_created gauge\n"] {
            self.out.extend_from_slice(part.as_bytes());
        }
        self.sample_with_le(base, "_created", labels, None, unix_seconds);
    }

    /// A histogram child: buckets, `_count` and `_sum`, with `_sum` first when `sum_first`
    /// (multiprocess collectors).
    pub(crate) fn histogram(
        &mut self,
        base: &str,
        help: &str,
        labels: &Labels,
        h: &HistogramAcc,
        sum_first: bool,
    ) {
        self.family(base, help, "histogram");
        if sum_first {
            self.sample_with_le(base, "_sum", labels, None, h.sum);
        }
        let count = floor(h.count);
        let texts = le_texts(h.bounds);
        // Every bucket line starts `base_bucket{labels,le="`: written once, then copied.
        let prefix_start = self.out.len();
        self.out.extend_from_slice(base.as_bytes());
        self.out.extend_from_slice(b"_bucket{");
        self.out.extend_from_slice(&labels.0);
        if !labels.0.is_empty() {
            self.out.push(b',');
        }
        self.out.extend_from_slice(b"le=\"");
        let prefix = prefix_start..self.out.len();
        let mut first = true;
        let mut bucket = |out: &mut Vec<u8>, le: &[u8], value: f64| {
            if !std::mem::take(&mut first) {
                out.extend_from_within(prefix.clone());
            }
            out.extend_from_slice(le);
            out.extend_from_slice(b"\"} ");
            push_number(out, value);
            out.push(b'\n');
        };
        let mut text = Vec::new();
        for (i, (bound, cumulative)) in h.bounds.iter().zip(&h.cumulative).enumerate() {
            let value = floor(*cumulative).min(count);
            let le = match texts.and_then(|t| t.get(i)) {
                Some(known) => known.as_slice(),
                None => {
                    text.clear();
                    push_number(&mut text, *bound);
                    &text
                }
            };
            bucket(&mut self.out, le, value);
        }
        bucket(&mut self.out, b"+Inf", count);
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
    fn short_decimals_print_as_the_formatter_prints_them() {
        for value in [
            0.001, 0.005, 0.025, 0.1, 0.3, 2.5, 7.5, 0.62, -0.5, 123456.7, 0.000001,
        ] {
            assert_eq!(number(value), format!("{value}"), "{value}");
        }
        // Not a short decimal: the formatter's shortest digits.
        assert_eq!(number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number(1e-7), "0.0000001");
        assert_eq!(number(2_000_000.5), "2000000.5");
    }

    proptest::proptest! {
        #[test]
        fn floor_is_the_library_floor(value in proptest::num::f64::ANY) {
            let (ours, library) = (floor(value), value.floor());
            proptest::prop_assert!(ours == library || (ours.is_nan() && library.is_nan()), "{}", value);
        }

        #[test]
        fn every_finite_number_prints_as_the_formatter_prints_it(
            value in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
            places in 0u32..8,
            whole in -2_000_000i64..2_000_000,
        ) {
            // Random doubles, and decimals of a few places (what pages mostly hold).
            let decimal = whole as f64 / 10f64.powi(places as i32);
            for v in [value, decimal] {
                // Whole numbers with `.0`; prometheus_client prints no negative zero.
                let expected = if v == 0.0 {
                    "0.0".to_string()
                } else if v.fract() == 0.0 && v.abs() < 1e16 {
                    format!("{v:.1}")
                } else {
                    format!("{v}")
                };
                proptest::prop_assert_eq!(number(v), expected, "{}", v);
            }
        }
    }

    #[test]
    fn bucket_bounds_print_as_numbers_whether_known_or_not() {
        for layout in [
            layouts::VLLM_TTFT,
            layouts::VLLM_ITL,
            layouts::SGLANG_TTFT,
            layouts::SGLANG_ITL,
        ] {
            let texts = le_texts(layout).expect("every engine layout is written once");
            let printed: Vec<String> = layout.iter().map(|&b| number(b)).collect();
            let known: Vec<String> = texts
                .iter()
                .map(|t| String::from_utf8(t.clone()).unwrap())
                .collect();
            assert_eq!(known, printed);
        }
        static OTHER: &[f64] = &[0.3, 2.0];
        assert!(le_texts(OTHER).is_none());
        let mut page = Page::default();
        let mut h = HistogramAcc::new(OTHER);
        h.observe(3.0, 0.0, 1.0);
        page.histogram("h", "x", &Labels::default(), &h, false);
        let text = String::from_utf8(page.out).unwrap();
        assert!(text.contains("h_bucket{le=\"0.3\"} 0.0\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"2.0\"} 2.0\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"+Inf\"} 3.0\n"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        let mut page = Page::default();
        page.sample("x", &Labels::new(&[("model_name", "a\"b\\c")]), 1.0);
        assert_eq!(
            String::from_utf8(page.out).unwrap(),
            "x{model_name=\"a\\\"b\\\\c\"} 1.0\n"
        );
    }
}
