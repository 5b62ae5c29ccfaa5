//! `--suggest` on a load whose right answer is known by hand.

use std::sync::Arc;

use mds_sim::load::Synthetic;
use mds_simulate::compare::Case;
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::RunOptions;
use mds_simulate::suggest::suggest;
use mds_testdata::{mk_role, mk_scaler, mk_target};
use serde_json::json;

/// A Server role at one replica and a TokenThroughput scaler of `capacity` tokens per second
/// a replica, between 1 and 8 replicas.
fn server(
    capacity: &str,
) -> (
    mds_api::ModelDeploymentScaler,
    mds_api::target::ModelDeployment,
) {
    let scaler = mk_scaler("chat")
        .namespace("default")
        .role_bounds("server", 1, 8)
        .algorithm(json!({"type": "TokenThroughput", "tokenThroughput": {
            "serverTargetTokensPerSecond": capacity}}))
        .typed();
    let target = mk_target("chat")
        .namespace("default")
        .role(mk_role("server").kind("Server").replicas(1))
        .typed();
    (scaler, target)
}

#[test]
fn the_cheapest_capacity_for_a_steady_load_holds_the_minimum() {
    // 3 requests/s of 1,024 prompt and 256 output tokens: 3,840 tokens/s, which one H100
    // serves far within the SLO. At the given 1,000 tokens/s a replica the scaler holds 4;
    // the cheapest setting meeting the goal is any capacity at or above the demand, which
    // holds the minimum of one replica.
    let (scaler, target) = server("1000");
    let load = Synthetic::parse("constant:rate=3,duration=900,prompt=1024,output=256").unwrap();
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(load.generate(1)),
        load: "steady",
        options: &options,
    };
    let found = suggest(&case, 0.95, &[], 2).unwrap();
    let chosen = found.chosen.expect("a setting meets 95 %");
    let capacity = chosen.targets[0].1;
    assert!(
        capacity >= 3840.0,
        "{capacity} tokens/s is below the demand"
    );
    assert!(chosen.attainment.unwrap() >= 0.95);
    // One replica for the whole run (900 s plus the 120 s tail), no more.
    let one_replica_hours = 1020.0 / 3600.0;
    assert!(
        (chosen.gpu_hours - one_replica_hours).abs() < 0.02,
        "{} GPU-hours",
        chosen.gpu_hours
    );
    let given = found.trials.iter().find(|t| t.factor == 1.0).unwrap();
    assert!(given.gpu_hours > 2.0 * chosen.gpu_hours, "{given:?}");
    let fragment = found.fragment.unwrap();
    assert!(
        fragment.contains(&format!(
            "serverTargetTokensPerSecond: \"{}\"",
            capacity.round()
        )),
        "{fragment}"
    );
}

#[test]
fn tuning_beyond_the_capacity_keeps_only_changes_that_save_and_still_meet_the_goal() {
    // A flash crowd (1 -> 8 requests/s for five minutes): after the crowd the default
    // windows hold replicas the load no longer needs, so a shorter window saves GPU-hours
    // at the same goal.
    let (scaler, target) = server("4000");
    let load = Synthetic::parse(
        "flash-crowd:base=1,peak=8,at=300,rise=30,hold=300,decay=60,duration=1500",
    )
    .unwrap();
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(load.generate(1)),
        load: "crowd",
        options: &options,
    };
    let found = suggest(&case, 0.9, &[], 2).unwrap();
    let chosen = found.chosen.expect("a capacity meets 90 %");
    let tuned = found.tuned.expect("tuning ran from the chosen capacity");
    assert!(!tuned.steps.is_empty(), "a window saves GPU-hours here");
    let mut before = chosen.gpu_hours;
    for step in &tuned.steps {
        assert_eq!(step.gpu_hours_before, before, "{step:?}");
        assert!(step.gpu_hours_after < before * 0.995, "{step:?}");
        assert!(step.attainment >= 0.9, "{step:?}");
        before = step.gpu_hours_after;
    }
    assert_eq!(tuned.gpu_hours, before);
    // The tuned scaler is one admission accepts, and its fragment carries every change.
    let report = mds_api::validation::validate_scaler(&tuned.scaler, None, Some(&target));
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let fragment = found.fragment.unwrap();
    for step in &tuned.steps {
        let key = step.field.rsplit('.').next().unwrap();
        assert!(fragment.contains(key), "{key} missing from\n{fragment}");
    }
    // Re-running the tuned scaler gives what the search reported (same world and seed).
    let again = mds_simulate::compare::run_all(
        &case,
        &[mds_simulate::compare::Contender::Mds {
            name: "again".into(),
            scaler: Box::new(tuned.scaler.clone()),
        }],
        1,
        &|_| {},
    )
    .unwrap();
    assert_eq!(again[0].summary.totals.gpu_hours, tuned.gpu_hours);
}
