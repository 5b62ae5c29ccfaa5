//! A zero-copy parser for the Prometheus text exposition format (0.0.4), as vLLM and SGLang
//! serve it (ENGINE-METRICS.md §8).
//!
//! Names and label values borrow from the page; only a label value with escapes is copied.
//! Labels of all samples live in one pool so a page costs a handful of allocations. A
//! malformed line is skipped and recorded with its line number; it never discards the page's
//! valid samples.

use std::borrow::Cow;

mod number;
mod select;

#[cfg(test)]
use number::fast_decimal;
pub use number::parse_value;
pub use select::{Interest, Take, parse_families};

/// The declared type of a metric family (`# TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn parse(text: &str) -> MetricType {
        match text {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            _ => MetricType::Untyped,
        }
    }
}

/// One label of a sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label<'a> {
    pub name: &'a str,
    pub value: Cow<'a, str>,
}

/// One sample line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    labels: (u32, u32),
    pub value: f64,
    /// 1-based line number in the page.
    pub line: u32,
}

/// A line that was not understood, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedLine {
    pub line: u32,
    pub reason: &'static str,
}

/// A parsed page.
#[derive(Clone, Debug, Default)]
pub struct Page<'a> {
    pub samples: Vec<Sample<'a>>,
    label_pool: Vec<Label<'a>>,
    /// `# TYPE` declarations in page order.
    pub types: Vec<(&'a str, MetricType)>,
    /// `# HELP` texts in page order (escapes left as written).
    pub helps: Vec<(&'a str, &'a str)>,
    pub skipped: Vec<SkippedLine>,
    /// Sample lines [`parse_families`] set aside unparsed: (line number, name, line).
    set_aside: Vec<(u32, &'a str, &'a str)>,
    /// The label sets of the last sample with labels and of the line being parsed.
    last_labels: LabelRun<'a>,
    next_labels: LabelRun<'a>,
}

/// A parsed label set as written: the text after `{`, where each label followed by `,` ends
/// (after the comma), and its labels in the pool. Children of a family repeat all their
/// labels but the last, so the next line reuses the labels of the prefix it repeats.
#[derive(Clone, Debug, Default)]
struct LabelRun<'a> {
    text: &'a str,
    ends: Vec<usize>,
    pool_start: usize,
}

impl<'a> Page<'a> {
    /// The labels of a sample of this page.
    pub fn labels(&self, sample: &Sample<'a>) -> &[Label<'a>] {
        &self.label_pool[sample.labels.0 as usize..sample.labels.1 as usize]
    }

    /// The value of a label of a sample, if present.
    pub fn label(&self, sample: &Sample<'a>, name: &str) -> Option<&str> {
        self.labels(sample)
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.as_ref())
    }

    /// The declared type of the family a series belongs to. TYPE lines may name the base or
    /// the `_total` form of a counter; histogram parts resolve to their base.
    pub fn declared_type(&self, series: &str) -> Option<MetricType> {
        let lookup = |name: &str| self.types.iter().find(|(n, _)| *n == name).map(|(_, t)| *t);
        lookup(series).or_else(|| {
            ["_total", "_bucket", "_count", "_sum", "_created"]
                .iter()
                .find_map(|suffix| series.strip_suffix(suffix).and_then(lookup))
        })
    }

    /// The HELP text of a family (base or `_total` form).
    pub fn help(&self, family: &str) -> Option<&'a str> {
        let lookup = |name: &str| self.helps.iter().find(|(n, _)| *n == name).map(|(_, h)| *h);
        lookup(family).or_else(|| family.strip_suffix("_total").and_then(lookup))
    }
}

/// Parses a page. Never fails: bad lines land in [`Page::skipped`].
pub fn parse(text: &str) -> Page<'_> {
    parse_lines(text, None)
}
fn parse_lines<'a>(text: &'a str, mut selector: Option<select::Selector<'_, 'a>>) -> Page<'a> {
    let mut page = Page {
        // Engine pages run about 100 bytes per sample and 35 per label.
        samples: Vec::with_capacity(text.len() / 100 + 16),
        label_pool: Vec::with_capacity(text.len() / 32 + 16),
        // A HELP and a TYPE line per family, and a family every few hundred bytes.
        types: Vec::with_capacity(text.len() / 256 + 8),
        helps: Vec::with_capacity(text.len() / 256 + 8),
        ..Page::default()
    };
    for (line_no, raw) in (1u32..).zip(lines(text)) {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = &line[skip_blanks(line.as_bytes(), 0)..];
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            if is_eof(comment) {
                break;
            }
            parse_comment(comment, &mut page);
            continue;
        }
        if let Some(selector) = &mut selector {
            match selector.interest(trimmed) {
                Interest::Parse => {}
                Interest::Skip => continue,
                Interest::Later => {
                    page.set_aside.push((line_no, selector.name(), trimmed));
                    continue;
                }
            }
        }
        page.push_sample_line(line_no, trimmed);
    }
    page
}

impl<'a> Page<'a> {
    /// Parses one sample line (blanks trimmed) into the page, or records why it is skipped.
    /// Returns whether it was a sample.
    fn push_sample_line(&mut self, line_no: u32, line: &'a str) -> bool {
        let pool_start = self.label_pool.len();
        let previous_name = self.samples.last().map_or("", |s| s.name);
        self.next_labels.text = "";
        self.next_labels.ends.clear();
        self.next_labels.pool_start = pool_start;
        let parsed = parse_sample(
            line,
            previous_name,
            &mut self.label_pool,
            &self.last_labels,
            &mut self.next_labels,
        );
        match parsed {
            Ok((name, value)) => {
                if !self.next_labels.text.is_empty() {
                    std::mem::swap(&mut self.last_labels, &mut self.next_labels);
                }
                self.samples.push(Sample {
                    name,
                    labels: (pool_start as u32, self.label_pool.len() as u32),
                    value,
                    line: line_no,
                });
                true
            }
            Err(reason) => {
                self.label_pool.truncate(pool_start);
                self.skipped.push(SkippedLine {
                    line: line_no,
                    reason,
                });
                false
            }
        }
    }
}

/// Whether `bytes` starts with the whole metric name `name` (not a longer name it prefixes).
fn starts_with_name(bytes: &[u8], name: &str) -> bool {
    !name.is_empty()
        && bytes.starts_with(name.as_bytes())
        && !bytes.get(name.len()).copied().is_some_and(is_name_char)
}

/// The lines of `text` split at '\n' (a vectorised search; `str::split` scans a word at a
/// time).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', text.as_bytes())
        .map(Some)
        .chain(std::iter::once(None))
        .map(move |end| {
            let end = end.unwrap_or(text.len());
            let line = &text[start..end];
            start = end + 1;
            line
        })
}

/// Whether a comment (the text after `#`) is the end marker `EOF`, whitespace around it
/// allowed. Every HELP and TYPE line asks, so a line whose first byte after the blanks is
/// printable and not `E` is refused without trimming it.
fn is_eof(comment: &str) -> bool {
    match comment.as_bytes().get(skip_blanks(comment.as_bytes(), 0)) {
        Some(&b) if b.is_ascii_graphic() && b != b'E' => false,
        _ => comment.trim() == "EOF",
    }
}

/// Reads `# TYPE name kind` and `# HELP name text`: the keyword, the name and the rest are
/// split at single blanks (two blanks make an empty name, as the format's other readers
/// split them). Other comments carry nothing we use.
fn parse_comment<'a>(comment: &'a str, page: &mut Page<'a>) {
    // Split by bytes: every page has a HELP and a TYPE line per family.
    let blank = |text: &str| text.bytes().position(|b| b == b' ' || b == b'\t');
    let rest = &comment[skip_blanks(comment.as_bytes(), 0)..];
    let Some(keyword_end) = blank(rest) else {
        return;
    };
    let (keyword, after) = (&rest[..keyword_end], &rest[keyword_end + 1..]);
    let (name, tail) = match blank(after) {
        Some(end) => (&after[..end], Some(&after[end + 1..])),
        None => (after, None),
    };
    match (keyword, tail) {
        ("TYPE", Some(kind)) => page.types.push((name, MetricType::parse(kind.trim()))),
        ("HELP", help) => page.helps.push((name, help.unwrap_or("").trim_end())),
        _ => {}
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

/// Bytes allowed after the first one of a metric name (bit 0) and of a label name (bit 1), as
/// a table: one load per byte on the hottest loops of the parser.
const NAME_CHAR: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'_' {
            table[b] = 0b11;
        } else if c == b':' {
            table[b] = 0b01;
        }
        b += 1;
    }
    table
};

fn is_name_char(b: u8) -> bool {
    NAME_CHAR[b as usize] & 0b01 != 0
}

fn is_label_name_char(b: u8) -> bool {
    NAME_CHAR[b as usize] & 0b10 != 0
}

fn skip_blanks(bytes: &[u8], mut pos: usize) -> usize {
    // Most tokens are separated by exactly one space or none: a plain loop beats an iterator.
    while let Some(b' ' | b'\t') = bytes.get(pos) {
        pos += 1;
    }
    pos
}

/// The end of the token (value or timestamp) starting at `pos`.
fn token_end(bytes: &[u8], pos: usize) -> usize {
    pos + bytes[pos..]
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(bytes.len() - pos)
}

/// The end of the run of name bytes starting at `pos`.
fn name_end(bytes: &[u8], pos: usize) -> usize {
    pos + bytes[pos..]
        .iter()
        .position(|&b| !is_name_char(b))
        .unwrap_or(bytes.len() - pos)
}

fn parse_sample<'a>(
    line: &'a str,
    previous_name: &str,
    labels: &mut Vec<Label<'a>>,
    last_labels: &LabelRun<'a>,
    run: &mut LabelRun<'a>,
) -> Result<(&'a str, f64), &'static str> {
    let bytes = line.as_bytes();
    // Children of one family come in runs: when the line repeats the previous sample's name
    // (already validated), a prefix compare replaces the byte-by-byte scan.
    let mut pos = if starts_with_name(bytes, previous_name) {
        previous_name.len()
    } else if is_name_start(bytes[0]) {
        name_end(bytes, 1)
    } else {
        return Err("a sample line starts with a metric name");
    };
    let name = &line[..pos];
    let after_name = pos;
    pos = skip_blanks(bytes, pos);
    if pos < bytes.len() && bytes[pos] == b'{' {
        run.text = &line[pos + 1..];
        let resume = reuse_labels(last_labels, run, labels);
        pos = parse_labels(line, pos + 1, resume, labels, run)?;
        pos = skip_blanks(bytes, pos);
    } else if pos == after_name && pos < bytes.len() {
        // `name+7` or `name.5` would otherwise read as a different sample.
        return Err("the metric name must be followed by a space or '{'");
    }
    let value_start = pos;
    pos = token_end(bytes, pos);
    if value_start == pos {
        return Err("the sample has no value");
    }
    let value = parse_value(&line[value_start..pos]).ok_or("the value is not a number")?;
    pos = skip_blanks(bytes, pos);
    if pos < bytes.len() {
        let stamp_start = pos;
        pos = token_end(bytes, pos);
        if line[stamp_start..pos].parse::<i64>().is_err() {
            return Err("the timestamp is not an integer");
        }
        if skip_blanks(bytes, pos) < bytes.len() {
            return Err("unexpected text after the timestamp");
        }
    }
    Ok((name, value))
}

/// Copies the labels of the longest prefix of `run`'s text that repeats whole labels of the
/// last label set, and returns where parsing resumes (relative to the text). The parser reads
/// left to right, so identical bytes up to a comma leave it in the same state: the same
/// labels, which passed every check on the earlier line.
fn reuse_labels<'a>(
    last: &LabelRun<'a>,
    run: &mut LabelRun<'a>,
    labels: &mut Vec<Label<'a>>,
) -> usize {
    let Some(&whole) = last.ends.last() else {
        return 0;
    };
    let (text, previous) = (run.text.as_bytes(), last.text.as_bytes());
    let count = if text.get(..whole) == Some(&previous[..whole]) {
        last.ends.len()
    } else {
        let common = common_prefix_len(text, previous);
        last.ends.partition_point(|&end| end <= common)
    };
    if count == 0 {
        return 0;
    }
    let start = last.pool_start;
    labels.extend_from_within(start..start + count);
    run.ends.extend_from_slice(&last.ends[..count]);
    last.ends[count - 1]
}

/// The length of the longest common prefix of two byte strings, a word at a time.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let len = a.len().min(b.len());
    let word = |bytes: &[u8], at: usize| {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
    };
    let mut at = 0;
    while at + 8 <= len {
        let differ = word(a, at) ^ word(b, at);
        if differ != 0 {
            return at + (differ.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < len && a[at] == b[at] {
        at += 1;
    }
    at
}

/// Engines print fewer than ten labels per sample; more is not a page we can use.
pub const MAX_LABELS_PER_SAMPLE: usize = 64;

/// Parses `name="value",...}` from `resume` bytes after the `{` at `open - 1` (the labels
/// before `resume` already in `labels`, as [`reuse_labels`] leaves them); returns the position
/// after `}`.
fn parse_labels<'a>(
    line: &'a str,
    open: usize,
    resume: usize,
    labels: &mut Vec<Label<'a>>,
    run: &mut LabelRun<'a>,
) -> Result<usize, &'static str> {
    let bytes = line.as_bytes();
    let first = labels.len() - run.ends.len();
    let mut pos = open + resume;
    loop {
        pos = skip_blanks(bytes, pos);
        match bytes.get(pos) {
            None => return Err("the label set is not closed with '}'"),
            Some(b'}') => return Ok(pos + 1),
            Some(&b) if b.is_ascii_alphabetic() || b == b'_' => {}
            Some(_) => return Err("a label name is expected"),
        }
        let name_start = pos;
        pos += bytes[pos..]
            .iter()
            .position(|&b| !is_label_name_char(b))
            .unwrap_or(bytes.len() - pos);
        let name = &line[name_start..pos];
        pos = skip_blanks(bytes, pos);
        if bytes.get(pos) != Some(&b'=') {
            return Err("a label name must be followed by '='");
        }
        pos = skip_blanks(bytes, pos + 1);
        if bytes.get(pos) != Some(&b'"') {
            return Err("a label value must be quoted");
        }
        pos += 1;
        let value_start = pos;
        let mut escaped = false;
        loop {
            // Jump to the next quote or backslash; most values are short and have neither
            // inside, so look at a few bytes before paying for a vectorised search.
            let rest = &bytes[pos.min(bytes.len())..];
            let near = rest[..rest.len().min(16)]
                .iter()
                .position(|&b| b == b'"' || b == b'\\');
            let found = match near {
                Some(offset) => Some(offset),
                None if rest.len() <= 16 => None,
                None => memchr::memchr2(b'"', b'\\', &rest[16..]).map(|o| o + 16),
            };
            match found {
                None => return Err("a label value is not closed with '\"'"),
                Some(offset) if bytes[pos + offset] == b'"' => {
                    pos += offset;
                    break;
                }
                Some(offset) => {
                    escaped = true;
                    pos += offset + 2;
                }
            }
        }
        let raw = &line[value_start..pos];
        pos += 1;
        let value = if escaped {
            Cow::Owned(unescape(raw))
        } else {
            Cow::Borrowed(raw)
        };
        // Bounding the count keeps the duplicate check (quadratic) cheap on hostile lines.
        if labels.len() - first >= MAX_LABELS_PER_SAMPLE {
            return Err("a sample has more than 64 labels");
        }
        if labels[first..].iter().any(|l| l.name == name) {
            return Err("a label name appears twice");
        }
        labels.push(Label { name, value });
        pos = skip_blanks(bytes, pos);
        match bytes.get(pos) {
            Some(b',') => {
                pos += 1;
                run.ends.push(pos - open);
            }
            Some(b'}') => return Ok(pos + 1),
            _ => return Err("labels are separated by ',' and closed with '}'"),
        }
    }
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_fast_path_takes_one_point_and_needs_a_digit() {
        assert_eq!(fast_decimal(b"1."), Some(1.0));
        assert_eq!(fast_decimal(b".5"), Some(0.5));
        assert_eq!(fast_decimal(b"."), None);
        assert_eq!(fast_decimal(b"1.2.3"), None);
        assert_eq!(parse_value("1.2.3"), None);
        assert_eq!(fast_decimal(b"-"), None);
    }

    proptest! {
        #[test]
        fn fast_path_agrees_with_the_standard_parser(
            mantissa in 0u64..1_000_000_000_000_000,
            point in 0usize..18,
            exp in proptest::option::of(-30i32..30),
            negative in any::<bool>(),
        ) {
            let digits = mantissa.to_string();
            let point = point.min(digits.len());
            let mut text = format!("{}{}.{}", if negative { "-" } else { "" }, &digits[..point], &digits[point..]);
            if let Some(e) = exp {
                text.push_str(&format!("e{e}"));
            }
            let expected: f64 = text.parse().unwrap();
            let got = parse_value(&text).unwrap();
            prop_assert_eq!(got.to_bits(), expected.to_bits(), "{}", text);
        }
    }

    fn one(text: &str) -> (String, Vec<(String, String)>, f64) {
        let page = parse(text);
        assert_eq!(page.samples.len(), 1, "{text:?}: {:?}", page.skipped);
        let s = page.samples[0];
        let labels = page
            .labels(&s)
            .iter()
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect();
        (s.name.to_string(), labels, s.value)
    }

    #[test]
    fn tolerates_what_engines_emit() {
        let (name, labels, value) =
            one("vllm:num_requests_running{engine=\"0\",model_name=\"a/b\"} 14.0");
        assert_eq!(name, "vllm:num_requests_running");
        assert_eq!(
            labels,
            vec![
                ("engine".into(), "0".into()),
                ("model_name".into(), "a/b".into())
            ]
        );
        assert_eq!(value, 14.0);
        assert_eq!(
            one("a{x=\"1\",} 2").1,
            vec![("x".into(), "1".into())],
            "trailing comma"
        );
        assert_eq!(one("a{} 2").1, vec![], "empty braces");
        assert_eq!(one("a 2 1700000000000").2, 2.0, "timestamp ignored");
        assert_eq!(one("a\t{ x = \"1\" }\t3").2, 3.0, "blanks between tokens");
        assert_eq!(one("a 1.7641e+09").2, 1.7641e9);
        assert!(one("a NaN").2.is_nan());
        assert_eq!(one("a +Inf").2, f64::INFINITY);
        assert_eq!(one("a -inf").2, f64::NEG_INFINITY);
        assert_eq!(one("a -0.0").2, 0.0);
        assert_eq!(one("a 2\r\n").2, 2.0, "CRLF");
        assert_eq!(
            one(r#"a{path="C:\\x",q="say \"hi\"",nl="1\n2",u="ünï"} 1"#).1,
            vec![
                ("path".into(), "C:\\x".into()),
                ("q".into(), "say \"hi\"".into()),
                ("nl".into(), "1\n2".into()),
                ("u".into(), "ünï".into())
            ]
        );
    }

    proptest! {
        /// The byte-split comment reader reads what splitting at blank characters reads.
        #[test]
        fn comments_read_as_split_at_blanks(
            parts in prop::collection::vec(
                prop::sample::select(vec!["TYPE", "HELP", " ", "\t", "a:b_c", "counter", "gauge", "x y", "ü", ""]),
                0..7,
            )
        ) {
            let comment: String = parts.concat();
            let mut page = Page::default();
            parse_comment(&comment, &mut page);
            let mut oracle = Page::default();
            let mut split = comment.trim_start_matches([' ', '\t']).splitn(3, [' ', '\t']);
            match (split.next(), split.next(), split.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    oracle.types.push((name, MetricType::parse(kind.trim())));
                }
                (Some("HELP"), Some(name), help) => {
                    oracle.helps.push((name, help.unwrap_or("").trim_end()));
                }
                _ => {}
            }
            prop_assert_eq!(page.types, oracle.types);
            prop_assert_eq!(page.helps, oracle.helps);
        }

        /// The end marker is recognised exactly when the trimmed comment is `EOF`, whatever
        /// whitespace (ASCII or not) surrounds it.
        #[test]
        fn the_end_marker_is_the_trimmed_comment(
            parts in prop::collection::vec(
                prop::sample::select(vec![
                    "EOF", "E", "OF", " ", "\t", "\r", "\u{b}", "\u{c}", "\u{3000}", "\u{a0}",
                    "HELP", "x", "",
                ]),
                0..5,
            )
        ) {
            let comment: String = parts.concat();
            prop_assert_eq!(is_eof(&comment), comment.trim() == "EOF", "{:?}", comment);
        }
    }

    /// A sample as read, owned, for comparing two readings.
    type Reading = (String, Vec<(String, String)>, u64, u32);

    fn readings(page: &Page) -> Vec<Reading> {
        page.samples
            .iter()
            .map(|s| {
                let labels = page.labels(s).iter();
                let labels = labels.map(|l| (l.name.to_string(), l.value.to_string()));
                (
                    s.name.to_string(),
                    labels.collect(),
                    s.value.to_bits(),
                    s.line,
                )
            })
            .collect()
    }

    proptest! {
        /// Reusing the labels of the prefix a line repeats reads what parsing every line on
        /// its own reads: the same samples and the same skipped lines for the same reasons.
        #[test]
        fn repeated_label_prefixes_read_as_lines_parsed_alone(
            lines in prop::collection::vec(
                (
                    prop::sample::select(vec!["h_bucket", "h_bucket", "g", "h_bucket "]),
                    prop::collection::vec(prop::sample::select(vec![
                        r#"model_name="m/x""#, r#"engine="0""#, r#"le="0.5""#, r#"le="+Inf""#,
                        r#"q="say \"hi\"""#, r#"engine="1""#, r#"x = "a,b" "#, r#"le="#,
                        r#"model_name="m/x"  "#, "", r#"engine="0"}"#,
                    ]), 0..5),
                    prop::sample::select(vec!["} 1", "} 2.5", ",} 3", "}", " 4", "} x"]),
                ),
                1..12,
            ),
            braces in any::<bool>(),
        ) {
            let text: Vec<String> = lines
                .iter()
                .map(|(name, labels, tail)| {
                    let open = if braces { "{" } else { "{ " };
                    format!("{name}{open}{}{tail}", labels.join(","))
                })
                .collect();
            let joined = text.join("\n");
            let page = parse(&joined);
            let mut alone = Vec::new();
            let mut skipped = Vec::new();
            for (line, number) in text.iter().zip(1u32..) {
                let one = parse(line);
                alone.extend(readings(&one).into_iter().map(|mut r| { r.3 = number; r }));
                skipped.extend(one.skipped.iter().map(|s| (number, s.reason)));
            }
            prop_assert_eq!(readings(&page), alone);
            let page_skipped: Vec<(u32, &str)> =
                page.skipped.iter().map(|s| (s.line, s.reason)).collect();
            prop_assert_eq!(page_skipped, skipped);
        }
    }

    #[test]
    fn a_histogram_child_reuses_the_labels_before_le() {
        let page = parse(
            "h_bucket{model_name=\"m\",engine=\"0\",le=\"1\"} 1\n\
             h_bucket{model_name=\"m\",engine=\"0\",le=\"+Inf\"} 2\n\
             h_bucket{model_name=\"m\",engine=\"1\",le=\"1\"} 3\n",
        );
        assert_eq!(page.samples.len(), 3);
        assert_eq!(
            page.last_labels.ends,
            vec![15, 26],
            "the last line's commas"
        );
        let engines: Vec<_> = page
            .samples
            .iter()
            .map(|s| page.label(s, "engine"))
            .collect();
        assert_eq!(engines, vec![Some("0"), Some("0"), Some("1")]);
        let bounds: Vec<_> = page.samples.iter().map(|s| page.label(s, "le")).collect();
        assert_eq!(bounds, vec![Some("1"), Some("+Inf"), Some("1")]);
    }

    #[test]
    fn common_prefixes_are_counted_across_words() {
        for (a, b, len) in [
            ("", "abc", 0),
            ("abcdefghij", "abcdefghij", 10),
            ("abcdefghijk", "abcdefghiXk", 9),
            ("abcdefgh", "abcdefgX", 7),
            ("ab", "abcdefghijklmnop", 2),
        ] {
            assert_eq!(
                common_prefix_len(a.as_bytes(), b.as_bytes()),
                len,
                "{a} {b}"
            );
        }
    }

    #[test]
    fn comments_types_help_and_eof() {
        let page = parse(
            "# HELP vllm:gpu_prefix_cache_hits Prefix cache hits, in blocks.\n\
             # TYPE vllm:gpu_prefix_cache_hits counter\n\
             vllm:gpu_prefix_cache_hits_total 10\n\
             # some other comment\n\
             # TYPE h histogram\n\
             h_bucket{le=\"1\"} 1\n\
             \n\
             # EOF\n\
             after_eof 1\n",
        );
        assert_eq!(page.samples.len(), 2);
        assert_eq!(
            page.declared_type("vllm:gpu_prefix_cache_hits_total"),
            Some(MetricType::Counter)
        );
        assert_eq!(page.declared_type("h_bucket"), Some(MetricType::Histogram));
        assert_eq!(
            page.help("vllm:gpu_prefix_cache_hits_total"),
            Some("Prefix cache hits, in blocks.")
        );
        assert!(page.skipped.is_empty());
    }

    #[test]
    fn a_bad_line_is_skipped_with_its_number_and_the_rest_survives() {
        let page = parse(
            "good 1\nbad{x=\"1\" 2\nalso_good{a=\"b\"} 3\nx{a=\"1\",a=\"2\"} 4\ny abc\nz 1 2 3\n{a=\"1\"} 5\nlast 6",
        );
        let names: Vec<&str> = page.samples.iter().map(|s| s.name).collect();
        assert_eq!(names, vec!["good", "also_good", "last"]);
        let lines: Vec<u32> = page.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![2, 4, 5, 6, 7]);
        assert_eq!(page.skipped[1].reason, "a label name appears twice");
        assert_eq!(page.label(&page.samples[1], "a"), Some("b"));
    }

    #[test]
    fn a_name_glued_to_its_value_is_refused_not_reread() {
        let page = parse("vllm:num_requests_running+7\na-1 5\nfoo.5 3\nok{a=\"1\"}2\n");
        let names: Vec<&str> = page.samples.iter().map(|s| s.name).collect();
        assert_eq!(names, vec!["ok"], "only the labelled line is a sample");
        assert_eq!(page.skipped.len(), 3);
        assert!(
            page.skipped
                .iter()
                .all(|s| s.reason == "the metric name must be followed by a space or '{'")
        );
    }

    #[test]
    fn a_line_with_too_many_labels_is_skipped() {
        let labels: Vec<String> = (0..=MAX_LABELS_PER_SAMPLE)
            .map(|i| format!("l{i}=\"v\""))
            .collect();
        let text = format!("wide{{{}}} 1\nnarrow 2\n", labels.join(","));
        let page = parse(&text);
        assert_eq!(page.samples.len(), 1);
        assert_eq!(page.skipped[0].reason, "a sample has more than 64 labels");
    }
}
