//! The comparison: every policy on the same world, and the oracles on a trace whose optimum
//! is known by hand.

use std::sync::Arc;

use mds_sim::load::{Trace, TraceRequest};
use mds_simulate::compare::{self, Contender};
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::roster::PeerName;
use mds_simulate::run::{RunOptions, run};
use mds_testdata::{mk_role, mk_scaler, mk_target};
use serde_json::json;

const CONV: &str = include_str!("../../../../data/traces/azure-2023-conv.csv");

fn server_scaler(capacity: &str) -> mds_api::ModelDeploymentScaler {
    mk_scaler("chat")
        .namespace("default")
        .role_bounds("server", 1, 8)
        .algorithm(json!({"type": "TokenThroughput", "tokenThroughput": {
            "serverTargetTokensPerSecond": capacity}}))
        .typed()
}

fn server_target(replicas: i32) -> mds_api::target::ModelDeployment {
    mk_target("chat")
        .namespace("default")
        .role(mk_role("server").kind("Server").replicas(replicas))
        .typed()
}

/// `rate` requests a second of 900 prompt and 100 output tokens from `from` to `to` seconds.
fn steady(from: u32, to: u32, rate: u32) -> Vec<TraceRequest> {
    (from..to)
        .flat_map(|s| {
            (0..rate).map(move |k| TraceRequest {
                at_seconds: f64::from(s) + f64::from(k) / f64::from(rate),
                prompt_tokens: 900,
                output_tokens: 100,
                prefix_hit_tokens: 0,
                block_hashes: None,
            })
        })
        .collect()
}

#[test]
fn the_oracles_on_a_step_are_sized_from_the_engines_curve_and_pay_for_cold_starts() {
    // 900-in, 100-out requests at 1 per second for 300 s, then 30 per second for 300 s; the run
    // goes on 120 s after the last arrival. Oracle A holds the cheapest replicas per minute
    // that reach 95 % on the replica's measured curve, so more in the busy half; Oracle B
    // starts the extra ones a 60 s cold start ahead; static peak holds the busiest minute's
    // replicas at the knee for all 720 s.
    let mut requests = steady(0, 300, 1);
    requests.extend(steady(300, 600, 30));
    let trace = Arc::new(Trace { requests });
    let mut options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    options.cold_start = Some(jiff::SignedDuration::from_secs(60));
    let report = run(
        server_scaler("1000"),
        server_target(1),
        trace,
        "step",
        &options,
        &mut |_| {},
    )
    .unwrap();
    let b = report.bounds.expect("a token scaler has bounds");
    let seconds = |hours: f64| (hours * 3600.0).round();
    // The last arrival is at 599.97 s.
    assert!((report.inputs.duration_seconds - 719.97).abs() < 0.01);
    let knee = b.knees["server"];
    let (a, ob) = (b.oracle_a_gpu_hours.unwrap(), b.oracle_b_gpu_hours.unwrap());
    // 1,000 tokens/s is under one replica's knee, 30,000 over it.
    assert!(
        (1000.0..30000.0).contains(&knee.tokens_per_second),
        "{knee:?}"
    );
    let busy = (30000.0 / knee.tokens_per_second).ceil();
    assert!(seconds(a) >= 300.0 + 120.0 + 300.0 * (busy - 1.0), "{a}");
    assert!(seconds(a) <= 300.0 + 120.0 + 300.0 * busy, "{a}");
    // B starts the busy half's extra replicas a cold start early.
    assert!(
        seconds(ob) > seconds(a) && seconds(ob) <= seconds(a) + 60.0 * busy,
        "{ob} {a}"
    );
    assert_eq!(seconds(b.static_peak_gpu_hours), 720.0 * busy);
}

#[test]
fn every_policy_runs_on_the_same_world_and_threads_do_not_change_the_table() {
    let trace = Arc::new(
        Trace::parse_azure_csv(CONV)
            .unwrap()
            .window(0.0, Some(600.0))
            .unwrap(),
    );
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let (scaler, target) = (server_scaler("4000"), server_target(2));
    let targets = compare::targets_for(&scaler, &target, &trace, &options).unwrap();
    let contenders: Vec<Contender> = compare::algorithms(&scaler, &target, &targets)
        .unwrap()
        .into_iter()
        .chain(PeerName::ALL.into_iter().map(Contender::peer))
        .collect();
    let case = compare::Case {
        scaler: &scaler,
        target: &target,
        trace,
        load: "conv",
        options: &options,
    };
    let one = compare::compare(&case, &contenders, 1, &|_| {}).unwrap();
    let two = compare::compare(&case, &contenders, 2, &|_| {}).unwrap();
    assert_eq!(
        one.rows, two.rows,
        "the table does not depend on the threads"
    );
    let names: Vec<&str> = one.rows.iter().map(|r| r.policy.as_str()).collect();
    assert_eq!(
        names[..3],
        ["mds-proportional", "mds-tokenthroughput", "mds-predictive"]
    );
    assert_eq!(names[3..], PeerName::ALL.map(PeerName::as_str));
    for run in &one.runs {
        let i = &run.inputs;
        assert_eq!(
            (i.seed, i.load.as_str(), i.cold_start_seconds),
            (1, "conv", 60.0)
        );
        assert_eq!(i.duration_seconds, one.runs[0].inputs.duration_seconds);
        // Every run offers the same requests.
        assert_eq!(
            run.summary.totals.requests,
            one.runs[0].summary.totals.requests
        );
    }
    let row = |name: &str| one.rows.iter().find(|r| r.policy == name).unwrap();
    assert_eq!(row("hpa").vs_hpa, Some(1.0));
    assert_eq!(row("static-peak").scale_actions_per_hour, 0.0);
    // Static peak holds the busiest minute's replicas from the start: its GPU-hours are its
    // count times the run.
    let peak_hours = one
        .runs
        .iter()
        .find(|r| r.inputs.scaler == "static-peak")
        .unwrap();
    let held = peak_hours.summary.replica_stats["server"];
    assert_eq!((held.min, held.max), (held.max, held.max));
    // Our three algorithms break no invariant.
    assert!(one.rows[..3].iter().all(|r| r.violations == 0));
    // Every row is measured against the scaler under test's bounds, whichever ran first.
    let alone = run(
        scaler.clone(),
        target.clone(),
        case.trace.clone(),
        "conv",
        &options,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(one.bounds, alone.bounds);
    // The targets every policy is configured from are in the report.
    assert_eq!(one.targets.tokens_per_second["server"], 4000.0);
    assert!(one.targets.queue_depth["server"] > 1.0);
}

/// A team's file configured as a built-in peer is configured runs exactly that peer: the
/// file's path (reading, bounds, build) adds nothing of its own.
#[test]
fn a_peer_file_written_as_a_built_in_peer_runs_that_peer() {
    use mds_simulate::peers::file::PeerFile;
    let trace = Arc::new(
        Trace::parse_azure_csv(CONV)
            .unwrap()
            .window(0.0, Some(900.0))
            .unwrap(),
    );
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let scaler = mk_scaler("chat")
        .namespace("default")
        .role_bounds("server", 1, 8)
        .algorithm(json!({"type": "Proportional", "proportional": {
            "metric": "QueueDepth", "roleTargets": [{"name": "server", "target": "8"}]}}))
        .typed();
    let target = server_target(2);
    let targets = compare::targets_for(&scaler, &target, &trace, &options).unwrap();
    assert_eq!(targets.queue_depth["server"], 8.0);
    let file = |doc: serde_json::Value| Arc::new(PeerFile::read("team", &doc).unwrap());
    let knative = file(json!({
        "apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "chat"},
        "spec": {"template": {"metadata": {"annotations": {
            "autoscaling.knative.dev/target": "8",
            "autoscaling.knative.dev/min-scale": "1",
            "autoscaling.knative.dev/max-scale": "8"}}}}
    }));
    let aibrix = file(json!({
        "apiVersion": "autoscaling.aibrix.ai/v1alpha1", "kind": "PodAutoscaler",
        "metadata": {"name": "chat"},
        "spec": {"scalingStrategy": "KPA", "minReplicas": 1, "maxReplicas": 8,
            "metricsSources": [{"metricSourceType": "pod", "targetMetric": "kv_cache_usage_perc",
                "targetValue": "0.5"}]}
    }));
    let case = compare::Case {
        scaler: &scaler,
        target: &target,
        trace,
        load: "conv",
        options: &options,
    };
    let contenders = [
        Contender::peer(PeerName::KnativeKpa),
        Contender::File {
            peer: knative,
            factor: 1.0,
        },
        Contender::peer(PeerName::AibrixKpa),
        Contender::File {
            peer: aibrix,
            factor: 1.0,
        },
    ];
    let runs = compare::run_all(&case, &contenders, 2, &|_| {}).unwrap();
    let seen = |i: usize| {
        let t = &runs[i].summary.totals;
        (t.gpu_hours, t.attainment, runs[i].passes.len())
    };
    assert!(seen(0).0 > 0.0 && seen(2).0 > 0.0);
    assert_eq!(seen(0), seen(1), "knative-kpa and the Knative file");
    assert_eq!(seen(2), seen(3), "aibrix-kpa and the PodAutoscaler file");
    assert_eq!(runs[1].inputs.scaler, "team");
}
