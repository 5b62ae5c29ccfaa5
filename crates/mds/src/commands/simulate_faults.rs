//! `mds simulate --fault`: faults on cue for our scaler's run (docs/simulator.md, "Faults on
//! cue"). The kinds, their keys and where each strikes are in `mds_simulate::faults`; this is
//! the flag's parsing.

use mds_simulate::faults::FaultSpec;
use mds_simulate::run::RunOptions;

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
