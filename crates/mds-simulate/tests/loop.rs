//! The operator's own worker on the simulated world: it binds, grows under load once the
//! engines' pages show it, and a run repeats exactly.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use mds_sim::{Load, LoadProfile, RoleSettings, WorldConfig};
use mds_simulate::{PassRecord, Scenario, Simulation};
use mds_testdata::{mk_role, mk_scaler, mk_target};
use serde_json::json;

fn start() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// One Server role at 2 replicas on a 30 s cold start, its load stepping from 1 to 20 req/s
/// after two minutes; a TokenThroughput scaler between 2 and 10 replicas.
fn scenario() -> Scenario {
    let target = mk_target("chat")
        .namespace("serving")
        .role(mk_role("server").replicas(2).instance_type("h100"))
        .typed();
    let scaler = mk_scaler("chat")
        .role_bounds("server", 2, 10)
        .interval_seconds(15)
        .algorithm(json!({"tokenThroughput": {"serverTargetTokensPerSecond": "4000"}}))
        .typed();
    let low = Load::new(1.0, 1000.0, 200.0, 0.0).unwrap();
    let high = Load::new(20.0, 1000.0, 200.0, 0.0).unwrap();
    let load = LoadProfile::steps(&[(0.0, low), (120.0, high)]).unwrap();
    let settings = RoleSettings {
        cold_start: SignedDuration::from_secs(30),
        ..RoleSettings::default()
    };
    Scenario {
        config: WorldConfig::default(),
        start: start(),
        target,
        scaler,
        roles: BTreeMap::from([("server".to_string(), (settings, load))]),
        quota: BTreeMap::new(),
        requests: None,
        slo: Default::default(),
    }
}

fn run(minutes: i64) -> Vec<PassRecord> {
    let mut sim = Simulation::new(scenario()).unwrap();
    sim.run_until(start() + SignedDuration::from_mins(minutes))
        .unwrap()
}

#[test]
fn the_worker_binds_then_grows_when_the_load_steps_up() {
    let passes = run(10);
    assert_eq!(
        passes[0].write,
        Some(("bind".to_string(), true)),
        "{:?}",
        passes[0]
    );
    let before: Vec<i32> = passes
        .iter()
        .filter(|p| p.t < 120.0)
        .map(|p| p.replicas["server"])
        .collect();
    assert!(before.iter().all(|n| *n == 2), "{before:?}");
    let last = passes.last().unwrap();
    assert!(
        last.replicas["server"] > 2,
        "20 req/s of 1,200 tokens needs more than 2 replicas at 4,000 tok/s each: {passes:#?}"
    );
    assert!(last.ready["server"] > 2, "{last:?}");
    assert!(
        passes
            .iter()
            .any(|p| p.write == Some(("commit".to_string(), true))),
        "a commit landed"
    );
}

#[test]
fn the_same_scenario_runs_the_same_passes() {
    let a = serde_json::to_string(&run(8)).unwrap();
    let b = serde_json::to_string(&run(8)).unwrap();
    assert_eq!(a, b);
}
