//! Target 1: an engine's `/metrics` page through the exposition parser and both engine
//! adapters. Oracles: the scaler's path (`read_text`, which parses only the families it
//! reads) and the whole-page reader (`read` of `parse`) agree reading for reading, for vLLM
//! and SGLang; and a page cut at any byte parses its complete lines exactly as the whole page
//! does (a prefix of its samples, skipped lines and declarations), the cut line alone being
//! new.

use mds_signals::EngineKind;
use mds_signals::engine::{read, read_text};
use mds_signals::exposition::{Page, parse};

/// Cut points tried per input: enough to cover each kind of line end, bounded so a long page
/// stays linear.
const CUTS: usize = 48;

pub fn run(data: &[u8]) {
    let Some(text) = super::text(data) else {
        return;
    };
    let whole = parse(text);
    for engine in [EngineKind::Vllm, EngineKind::Sglang] {
        let mut full = read(engine, &whole);
        // The scaler's path records no notes of the series it passed over.
        full.series.clear();
        let fast = read_text(engine, text);
        // Debug text compares NaN readings as equal, which `PartialEq` would not.
        assert_eq!(
            format!("{fast:?}"),
            format!("{full:?}"),
            "read_text and read disagree on a {engine:?} page"
        );
    }
    for cut in cut_points(text) {
        let part = parse(&text[..cut]);
        // Lines ended before the cut are read the same; the cut line may read differently.
        let complete = text[..cut].matches('\n').count() as u32;
        assert_eq!(
            samples_through(&part, complete),
            samples_through(&whole, complete),
            "a page cut at byte {cut} reads its complete lines differently"
        );
        let skipped = |page: &Page<'_>| -> Vec<(u32, &'static str)> {
            page.skipped
                .iter()
                .filter(|s| s.line <= complete)
                .map(|s| (s.line, s.reason))
                .collect()
        };
        assert_eq!(skipped(&part), skipped(&whole), "cut at byte {cut}");
    }
}

/// Char boundaries spread over the text, with its ends.
fn cut_points(text: &str) -> Vec<usize> {
    let step = (text.len() / CUTS).max(1);
    (0..=text.len())
        .step_by(step)
        .chain([text.len()])
        .filter(|&i| text.is_char_boundary(i))
        .collect()
}

/// The samples of `page` on lines up to `last`.
/// A sample as compared: name, labels, value bits and line.
type Read = (String, Vec<(String, String)>, u64, u32);

fn samples_through(page: &Page<'_>, last: u32) -> Vec<Read> {
    page.samples
        .iter()
        .filter(|s| s.line <= last)
        .map(|s| {
            let labels = page
                .labels(s)
                .iter()
                .map(|l| (l.name.to_string(), l.value.to_string()))
                .collect();
            (s.name.to_string(), labels, s.value.to_bits(), s.line)
        })
        .collect()
}
