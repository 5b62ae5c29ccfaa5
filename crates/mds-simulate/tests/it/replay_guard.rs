//! D32 through replay: a timeline's count of observations behind a p95 reaches the latency
//! guard, and a bad count is refused naming its field.

use serde_json::json;

/// The same scaler replayed over a timeline of one Server role at 4 ready replicas with a p95
/// TTFT at 2x its target, with and without a count of observations behind it.
fn replay_thin(count: Option<u32>) -> Vec<mds_simulate::replay::PassReport> {
    use mds_simulate::replay::{parse_timeline, replay, synthetic_target};
    let scaler: mds_api::ModelDeploymentScaler = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm"},
        "spec": {
            "targetRef": {"name": "llm"},
            "mode": "Active",
            "roles": [{"name": "server", "minReplicas": 4, "maxReplicas": 8}],
            "algorithm": {"tokenThroughput": {"serverTargetTokensPerSecond": "2000"}}
        }
    }))
    .unwrap();
    let count = count.map_or(String::new(), |n| format!(", \"ttftObservations\": {n}"));
    let lines: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "{{\"t\": {}, \"roles\": {{\"server\": {{\"readyReplicas\": 4, \"promptTokensPerSecond\": 500, \"generationTokensPerSecond\": 140, \"ttftMilliseconds\": 1000, \"itlMilliseconds\": 20{count}}}}}}}",
                15 * i
            )
        })
        .collect();
    let timeline = parse_timeline(&lines.join("\n")).unwrap();
    replay(&scaler, synthetic_target(&scaler), &timeline).unwrap()
}

#[test]
fn a_replay_timeline_without_counts_grows_as_before_and_a_thin_one_does_not() {
    // Without the count (every timeline written before D32): enough, the guard grows.
    let passes = replay_thin(None);
    assert_eq!(passes[1].roles["server"].reason, "LatencyGuardScaleUp");
    assert_eq!(passes[1].roles["server"].constrained, 5);
    // Five requests behind the p95: held at 4, never grown.
    let passes = replay_thin(Some(5));
    for pass in &passes[1..] {
        assert_eq!(pass.roles["server"].reason, "LatencyGuardHold");
        assert_eq!(pass.roles["server"].constrained, 4);
    }
}

#[test]
fn a_negative_count_of_observations_is_refused_naming_the_field() {
    let e = mds_simulate::replay::parse_timeline(
        r#"{"t": 0, "roles": {"server": {"readyReplicas": 1, "itlObservations": -3}}}"#,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "timeline line 1: roles.server.itlObservations: -3 is negative; a count of observations is 0 or more"
    );
}
