//! Target 6: the texts users hand `mds replay`, `mds simulate` and `mds lab up`: replay
//! timelines, Azure CSV and Mooncake JSONL traces, rate curves, `--load` and `--fault` specs,
//! the frontier's grid, `--slo-ttft` and the lab's `--load` rules. The first byte picks the
//! reader, the rest is its text. Oracles: no panic, and every refusal says something (the
//! readers' errors name the line or key).

use std::path::Path;

use mds_lab::parse_load_rule;
use mds_sim::load::{RateCurve, Synthetic, Trace};
use mds_simulate::faults::FaultSpec;
use mds_simulate::frontier::Grid;
use mds_simulate::replay::parse_timeline;
use mds_simulate::slo::Slo;

/// A reader as the fuzzer calls it: the refusal's words, or `None` when it read the text.
type Reader = fn(&str) -> Option<String>;

/// Each reader by name, picked by the first byte of the input modulo their number; new
/// readers go at the end so the stored inputs keep theirs.
pub const READERS: &[(&str, Reader)] = &[
    ("timeline", |t| parse_timeline(t).err().map(|e| e.0)),
    ("azure-csv", |t| {
        Trace::parse_azure_csv(t).err().map(|e| e.to_string())
    }),
    ("mooncake-jsonl", |t| {
        Trace::parse_mooncake_jsonl(t).err().map(|e| e.to_string())
    }),
    ("rate-curve", |t| RateCurve::parse_csv(t, 1.0).err()),
    ("load", |t| Synthetic::parse(t).err()),
    ("fault", |t| FaultSpec::parse(t).err()),
    ("grid", |t| Grid::parse(t).err()),
    ("slo-ttft", |t| Slo::parse_ttft(t).err()),
    ("lab-load", |t| parse_load_rule(t, &no_files).err()),
];

pub fn run(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Some(text) = super::text(rest) else {
        return;
    };
    let (name, reader) = READERS[usize::from(pick) % READERS.len()];
    if let Some(message) = reader(text) {
        assert!(
            !message.trim().is_empty(),
            "{name} refused {text:?} without a word"
        );
    }
}

/// The lab's `trace:PATH` names a file; the fuzzer reads none (the trace readers are their own
/// readers above), so every path is one that cannot be read.
fn no_files(path: &Path) -> Result<String, String> {
    Err(format!("{} is not readable here", path.display()))
}
