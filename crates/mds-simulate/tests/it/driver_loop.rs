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
        prompts: mds_simulate::slo::PromptSpread::default(),
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

/// The tokens every engine of the target has served since it started (the world's truth).
fn served_tokens(sim: &Simulation) -> f64 {
    sim.instances_now()
        .iter()
        .filter_map(|i| i.engine.as_ref())
        .map(|e| {
            e.counters.prompt_tokens - e.counters.prefix_hit_tokens + e.counters.generation_tokens
        })
        .sum()
}

/// D9 amended, on the world's pages: after the step the role grows while its backlog drains.
/// A replica that joins answers with a first sample and no rate window. Filled in with its
/// peers' mean it read more than the role served (27,692 tokens/s where 25,928 were served);
/// left out it reads less. Counted by what it served since it became Ready, every pass reads
/// what the world's engines served in its window.
#[test]
fn replicas_joining_after_a_step_read_what_the_role_served() {
    let mut sim = Simulation::new(scenario()).unwrap();
    // The world's served tokens at the end of each run: the status a run ends with is the
    // pass that read the pages one interval before.
    let mut served = Vec::new();
    let mut was_ready = 0;
    let mut joins = 0;
    for pass in 1..=40 {
        sim.run_until(start() + SignedDuration::from_secs(15 * pass))
            .unwrap();
        let status = sim.scaler_now().and_then(|s| s.status).unwrap_or_default();
        served.push(served_tokens(&sim));
        let Some(role) = status.roles.first() else {
            continue;
        };
        let rate = |q: &Option<mds_api::quantity::Quantity>| {
            q.as_ref()
                .and_then(|q| q.value().ok())
                .map_or(0.0, |d| d.to_f64())
        };
        let read = rate(&role.prompt_tokens_per_second) + rate(&role.generation_tokens_per_second);
        let ready = role.ready_replicas.unwrap_or(0);
        if let [.., a, b, _] = served[..] {
            let truth = (b - a) / 15.0;
            if ready > was_ready && was_ready > 0 {
                joins += 1;
                assert!(
                    (read - truth).abs() <= truth * 0.01,
                    "pass {pass}: {ready} ready (from {was_ready}) read {read:.0} tokens/s where {truth:.0} were served"
                );
            }
        }
        was_ready = ready;
    }
    assert!(joins >= 3, "replicas joined {joins} times");
}
