//! D35 against both GPUStacks: `examples/simulate/pd.yaml` on the bundled conversation trace,
//! once with the stand-in aborting every Prefill/Decode retirement (the revisions examined)
//! and once with it completing them (as the spec describes). Our scaler must be right with
//! either: with the first it stops shrinking a role after two aborts in a row and says why;
//! with the second its shrinks land and nothing is restored.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::manifests;
use jiff::{SignedDuration, Timestamp};
use mds_sim::load::Trace;
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::{PdRetirements, RunOptions, run_seconds, scenario, start};
use mds_simulate::{PassRecord, Simulation};

const EXAMPLE: &str = include_str!("../../../../examples/simulate/pd.yaml");
const CONV: &str = include_str!("../../../../data/traces/azure-2023-conv.csv");

/// Every pass of the hour, and the scaler's `Blocked` condition at the end.
fn run(pd: PdRetirements) -> (Vec<PassRecord>, (String, String)) {
    let (scaler, target) = manifests(EXAMPLE);
    let trace = Arc::new(Trace::parse_azure_csv(CONV).unwrap());
    let mut options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    options.pd_retirements = pd;
    let end = start() + SignedDuration::from_secs_f64(run_seconds(&trace, &options));
    let mut sim = Simulation::new(scenario(scaler, target, trace, &options).unwrap()).unwrap();
    let mut passes = Vec::new();
    let mut until: Timestamp = start();
    while until < end {
        until = (until + SignedDuration::from_secs(60)).min(end);
        passes.extend(sim.run_until(until).unwrap());
    }
    assert!(sim.violations().is_empty(), "{:#?}", sim.violations());
    let status = sim.scaler_now().unwrap().status.unwrap_or_default();
    let blocked = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Blocked")
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default();
    (passes, blocked)
}

/// Passes whose write lowered a count, and the restores.
fn shrinks_and_restores(passes: &[PassRecord]) -> (Vec<f64>, Vec<f64>) {
    let mut before: BTreeMap<String, i32> = BTreeMap::new();
    let (mut shrinks, mut restores) = (Vec::new(), Vec::new());
    for p in passes {
        if let Some((kind, true)) = &p.write {
            if kind == "restore" {
                restores.push(p.t);
            } else if p
                .replicas
                .iter()
                .any(|(r, n)| before.get(r).is_some_and(|b| n < b))
            {
                shrinks.push(p.t);
            }
        }
        before = p.replicas.clone();
    }
    (shrinks, restores)
}

#[test]
fn a_gpustack_that_aborts_pd_retirements_is_not_asked_again_after_two() {
    let (passes, blocked) = run(PdRetirements::Abort);
    let (shrinks, restores) = shrinks_and_restores(&passes);
    assert_eq!(restores.len(), shrinks.len(), "every shrink aborted");
    assert!(!shrinks.is_empty() && shrinks.len() <= 4, "{shrinks:?}");
    assert_eq!(blocked.0, "ScaleDownAborted", "{blocked:?}");
    assert!(
        blocked.1.contains("no verifiable decoder-side release")
            && blocked.1.contains("its scale-down waits until"),
        "{}",
        blocked.1
    );
}

#[test]
fn a_gpustack_that_completes_pd_retirements_sees_them_land() {
    let (passes, blocked) = run(PdRetirements::Complete);
    let (shrinks, restores) = shrinks_and_restores(&passes);
    assert!(restores.is_empty(), "{restores:?}");
    assert!(!shrinks.is_empty());
    assert_ne!(blocked.0, "ScaleDownAborted", "{blocked:?}");
}
