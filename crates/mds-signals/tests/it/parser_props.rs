//! Property tests of the exposition parser: it never panics, never reports a series that is
//! not on the page, round-trips generated pages exactly (escapes, NaN, infinities, timestamps,
//! CRLF, trailing commas, blanks), and agrees with the prometheus-parse crate on the subset of
//! the format that crate understands.

use std::collections::BTreeMap;

use mds_signals::exposition::parse;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct GenSample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

fn metric_name(colons: bool) -> impl Strategy<Value = String> {
    if colons {
        "[a-z_][a-z0-9_:]{0,20}".boxed()
    } else {
        "[a-z_][a-z0-9_]{0,20}".boxed()
    }
}

fn label_value(plain: bool) -> impl Strategy<Value = String> {
    if plain {
        "[a-zA-Z0-9_./ -]{0,12}".boxed()
    } else {
        prop_oneof![
            "[a-z0-9]{0,8}",
            "\\PC{0,8}",
            Just("a\"b\\c\nd".to_string()),
            Just("x,y=z}".to_string())
        ]
        .boxed()
    }
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        (0u32..100_000).prop_map(f64::from),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
    ]
}

fn sample(plain: bool) -> impl Strategy<Value = GenSample> {
    (
        metric_name(!plain),
        proptest::collection::btree_map("[a-z_][a-z0-9_]{0,8}", label_value(plain), 0..4),
        value(),
    )
        .prop_map(|(name, labels, value)| GenSample {
            name,
            labels: labels.into_iter().collect(),
            value,
        })
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(v: f64, style: u8) -> String {
    if v.is_nan() {
        ["NaN", "nan", "NAN"][style as usize % 3].to_string()
    } else if v == f64::INFINITY {
        ["+Inf", "inf", "+inf"][style as usize % 3].to_string()
    } else if v == f64::NEG_INFINITY {
        ["-Inf", "-inf", "-INF"][style as usize % 3].to_string()
    } else if style.is_multiple_of(2) {
        format!("{v:?}")
    } else {
        format!("{v:e}")
    }
}

/// Renders samples with varied but valid formatting.
fn render(samples: &[GenSample], style: u8) -> String {
    let mut out = String::new();
    for (i, s) in samples.iter().enumerate() {
        let variant = style.wrapping_add(i as u8);
        if variant.is_multiple_of(5) {
            out.push_str(&format!(
                "# HELP {} some help\n# TYPE {} gauge\n",
                s.name, s.name
            ));
        }
        if variant.is_multiple_of(7) {
            out.push('\n');
        }
        out.push_str(&s.name);
        if !s.labels.is_empty() || variant.is_multiple_of(3) {
            let parts: Vec<String> = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let sep = if variant.is_multiple_of(4) { ", " } else { "," };
            out.push('{');
            out.push_str(&parts.join(sep));
            if variant.is_multiple_of(6) && !parts.is_empty() {
                out.push(',');
            }
            out.push('}');
        }
        out.push_str(if variant.is_multiple_of(2) { " " } else { "\t" });
        out.push_str(&format_value(s.value, variant));
        if variant % 3 == 1 {
            out.push_str(" 1700000000000");
        }
        out.push_str(if variant % 4 == 1 { "\r\n" } else { "\n" });
    }
    out
}

fn same_value(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn never_panics_on_any_text(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn never_panics_on_exposition_like_noise(parts in proptest::collection::vec(
        prop_oneof![
            Just("a".to_string()), Just("{".to_string()), Just("}".to_string()), Just("=".to_string()),
            Just("\"".to_string()), Just("\\".to_string()), Just(",".to_string()), Just(" ".to_string()),
            Just("\n".to_string()), Just("# TYPE".to_string()), Just("1e9".to_string()), Just("NaN".to_string()),
            Just("ü".to_string()), Just("\r".to_string()), Just("le=\"+Inf\"".to_string()),
        ], 0..60)) {
        let text = parts.concat();
        let page = parse(&text);
        // Never a value for a series that is not on the page: every sample's name starts its line.
        let lines: Vec<&str> = text.split('\n').collect();
        for s in &page.samples {
            let line = lines[s.line as usize - 1].trim_start_matches([' ', '\t']);
            prop_assert!(line.starts_with(s.name), "{:?} not at the start of {:?}", s.name, line);
        }
    }

    #[test]
    fn generated_pages_round_trip_exactly(samples in proptest::collection::vec(sample(false), 0..30), style in any::<u8>()) {
        let text = render(&samples, style);
        let page = parse(&text);
        prop_assert!(page.skipped.is_empty(), "{:?}\n{text}", page.skipped);
        prop_assert_eq!(page.samples.len(), samples.len());
        for (got, want) in page.samples.iter().zip(&samples) {
            prop_assert_eq!(got.name, want.name.as_str());
            prop_assert!(same_value(got.value, want.value), "{} != {}", got.value, want.value);
            let labels: Vec<(String, String)> = page
                .labels(got)
                .iter()
                .map(|l| (l.name.to_string(), l.value.to_string()))
                .collect();
            prop_assert_eq!(&labels, &want.labels);
        }
    }

    #[test]
    fn a_broken_line_never_costs_the_other_lines(samples in proptest::collection::vec(sample(false), 1..20), at in any::<usize>(), junk in "[a-z{}=\",]{1,10} ?[a-z]{0,4}") {
        let mut text = render(&samples, 0);
        let lines: Vec<&str> = text.lines().collect();
        let at = at % (lines.len() + 1);
        let mut with_junk: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        with_junk.insert(at, format!("{{{junk}"));
        text = with_junk.join("\n");
        let page = parse(&text);
        prop_assert_eq!(page.samples.len(), samples.len());
        prop_assert_eq!(page.skipped.len(), 1);
    }

    #[test]
    fn agrees_with_prometheus_parse_on_its_subset(samples in proptest::collection::vec(sample(true), 0..30)) {
        // prometheus-parse reads neither colons in names, nor escapes, commas or '=' in
        // values, nor trailing commas: render the plain subset.
        let mut text = String::new();
        for s in &samples {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            if labels.is_empty() {
                text.push_str(&format!("{} {}\n", s.name, format_value(s.value, 0)));
            } else {
                text.push_str(&format!("{}{{{}}} {}\n", s.name, labels.join(","), format_value(s.value, 0)));
            }
        }
        let ours = parse(&text);
        let theirs = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        prop_assert_eq!(ours.samples.len(), theirs.samples.len());
        for (a, b) in ours.samples.iter().zip(&theirs.samples) {
            prop_assert_eq!(a.name, b.metric.as_str());
            let value = match b.value {
                prometheus_parse::Value::Untyped(v) | prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Counter(v) => v,
                _ => f64::NAN,
            };
            prop_assert!(same_value(a.value, value));
            let ours_labels: BTreeMap<String, String> = ours.labels(a).iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            let theirs_labels: BTreeMap<String, String> = b.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(ours_labels, theirs_labels);
        }
    }
}
