//! The bodies of the fuzz targets: one per door untrusted bytes come through, each an
//! ordinary function of the input that panics when an oracle finds the code wrong. `fuzz/`
//! runs them under libFuzzer (`tools/fuzz/run.sh`); the test `corpora` feeds each every
//! input stored under `fuzz/corpus/<target>/`, so a regression on a stored input fails on
//! the stable toolchain without a fuzzer.

pub mod exposition;
pub mod fence;
pub mod pass;
pub mod quantity;
pub mod scaler;
pub mod syntax;
pub mod webhook;

/// A target's body: panics when its oracle finds the code wrong.
pub type Body = fn(&[u8]);

/// Every target by the name of its corpus folder and its `fuzz/fuzz_targets` file.
pub const TARGETS: &[(&str, Body)] = &[
    ("exposition", exposition::run),
    ("quantity", quantity::run),
    ("scaler", scaler::run),
    ("fence", fence::run),
    ("syntax", syntax::run),
    ("webhook", webhook::run),
    ("pass", pass::run),
];

/// The input as text, as the door that reads it would see it: every door here refuses bytes
/// that are not UTF-8 before parsing (a scrape's `NotText`, serde's and the CLI's readers).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
