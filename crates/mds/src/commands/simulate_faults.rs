//! `mds simulate --fault`: faults on cue for our scaler's run (docs/simulator.md, "Faults on
//! cue"). The kinds, their keys and where each strikes are in `mds_simulate::faults`; this is
//! the flag's parsing and the summary's lines.

use std::fmt::Write as _;

use mds_simulate::faults::FaultSpec;
use mds_simulate::report::Bin;
use mds_simulate::run::{RunOptions, RunReport};

use super::inputs::{Stop, unusable};

/// Every `--fault`, parsed; a bad one names the flag, the value and the rule.
pub(super) fn parse(specs: &[String]) -> Result<Vec<FaultSpec>, Stop> {
    specs
        .iter()
        .map(|s| FaultSpec::parse(s).map_err(|rule| unusable(format!("--fault {s:?}: {rule}"))))
        .collect()
}

/// Faults meet our scaler alone: a comparison runs peers, which write the target directly
/// and never read the cluster or the pages the faults strike.
pub(super) fn alone(options: &RunOptions, comparing: bool) -> Result<(), Stop> {
    if comparing && !options.faults.is_empty() {
        return Err(unusable(
            "--fault: faults apply to our scaler alone, not to a comparison; add --compare none",
        ));
    }
    Ok(())
}

/// One summary line per fault applied.
pub(super) fn summary(out: &mut String, report: &RunReport) {
    for (i, fault) in report.faults.iter().enumerate() {
        let label = if i == 0 { "faults" } else { "" };
        let _ = writeln!(out, "  {label:<20}{}", fault.describe());
    }
}

/// The faults whose window meets the minute `bin`, for its `--minutes` row.
pub(super) fn minute(out: &mut String, report: &RunReport, bin: &Bin) {
    let end = bin.start + bin.seconds;
    let kinds: Vec<&str> = report
        .faults
        .iter()
        .filter(|f| f.from < end && (f.until > bin.start || f.from >= bin.start))
        .map(|f| f.kind.as_str())
        .collect();
    if !kinds.is_empty() {
        let _ = write!(out, "  {}", kinds.join(", "));
    }
}
