//! Target 6: the texts users hand `mds replay` and `mds simulate`: replay timelines, Azure CSV
//! and Mooncake JSONL traces, rate curves, `--load` and `--fault` specs, the frontier's grid
//! and `--slo-ttft`. The first byte picks the reader, the rest is its text. Oracles: no
//! panic, and every refusal says something (the readers' errors name the line or key).

use mds_sim::load::{RateCurve, Synthetic, Trace};
use mds_simulate::faults::FaultSpec;
use mds_simulate::frontier::Grid;
use mds_simulate::replay::parse_timeline;
use mds_simulate::slo::Slo;

/// Each reader, by the first byte of the input modulo their number.
pub const READERS: &[&str] = &[
    "timeline",
    "azure-csv",
    "mooncake-jsonl",
    "rate-curve",
    "load",
    "fault",
    "grid",
    "slo-ttft",
];

pub fn run(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Some(text) = super::text(rest) else {
        return;
    };
    let reader = READERS[usize::from(pick) % READERS.len()];
    let refusal = match reader {
        "timeline" => parse_timeline(text).err().map(|e| e.0),
        "azure-csv" => Trace::parse_azure_csv(text).err().map(|e| e.to_string()),
        "mooncake-jsonl" => Trace::parse_mooncake_jsonl(text)
            .err()
            .map(|e| e.to_string()),
        "rate-curve" => RateCurve::parse_csv(text, 1.0).err(),
        "load" => Synthetic::parse(text).err(),
        "fault" => FaultSpec::parse(text).err(),
        "grid" => Grid::parse(text).err(),
        _ => Slo::parse_ttft(text).err(),
    };
    if let Some(message) = refusal {
        assert!(
            !message.trim().is_empty(),
            "{reader} refused {text:?} without a word"
        );
    }
}
