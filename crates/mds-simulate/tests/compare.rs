//! The comparison: every policy on the same world, and the oracles on a trace whose optimum
//! is known by hand.

use std::sync::Arc;

use mds_sim::load::{Trace, TraceRequest};
use mds_simulate::compare::{self, Contender};
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::roster::PeerName;
use mds_simulate::run::{RunOptions, run};
use serde_json::json;

const CONV: &str = include_str!("../../../data/traces/azure-2023-conv.csv");

fn server_scaler(capacity: &str) -> mds_api::ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
        "metadata": {"name": "chat", "namespace": "default"},
        "spec": {"targetRef": {"name": "chat"}, "mode": "Active",
                 "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 8}],
                 "algorithm": {"type": "TokenThroughput", "tokenThroughput": {
                     "serverTargetTokensPerSecond": capacity}}}
    }))
    .unwrap()
}

fn server_target(replicas: i32) -> mds_api::target::ModelDeployment {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
        "metadata": {"name": "chat", "namespace": "default"},
        "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"},
                 "roles": [{"name": "server", "kind": "Server", "replicas": replicas,
                            "instanceType": "h100"}]}
    }))
    .unwrap()
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
fn the_oracles_on_a_step_whose_optimum_is_known_by_hand() {
    // 1000 tokens/s for 300 s, then 3000 tokens/s for 300 s, at 1000 tokens/s a replica; the
    // run goes on 120 s after the last arrival (one replica, the minimum). Oracle A holds
    // 1 × 300 + 3 × 300 + 1 × 120 = 1320 (in 10 s bins) replica-seconds; Oracle B also starts the two extra
    // replicas one 60 s cold start ahead: 1440; static peak holds 3 for all 720 s: 2160.
    let mut requests = steady(0, 300, 1);
    requests.extend(steady(300, 600, 3));
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
    // The last arrival is at 599.67 s: 72 bins of 10 s.
    assert!((report.inputs.duration_seconds - 719.67).abs() < 0.01);
    assert_eq!(seconds(b.oracle_a_gpu_hours), 1320.0);
    assert_eq!(seconds(b.oracle_b_gpu_hours), 1440.0);
    assert_eq!(seconds(b.static_peak_gpu_hours), 2160.0);
}
