//! The status shapes of the spec's Status section deserialize, keep every field, and round-trip.

use mds_api::ModelDeploymentScalerStatus;
use mds_api::status::{ScaleDownOutcome, SignalState};

const STATUS: &str = r#"
observedGeneration: 1
binding: {targetUID: "u-1", targetName: llm-serving, term: 1}
roles:
  - name: prefill
    currentReplicas: 2
    readyReplicas: 2
    signalState: Fresh
    promptTokensPerSecond: "2400"
    generationTokensPerSecond: "0"
    runningRequests: 8
    waitingRequests: 2
    kvCacheUsage: "0.5"
    ttftMilliseconds: "400"
    itlMilliseconds: "0"
    rawRecommendedReplicas: 2
    constrainedReplicas: 2
    reason: TokenThroughput
    lastScaleUpTime: "2026-11-30T10:00:00Z"
    stabilizationHistory:
      - {timestamp: "2026-11-30T10:00:00Z", replicas: 2}
lastCommit:
  decisionID: d-1
  term: 1
  vector: {prefill: 3, decode: 2}
  baselineVector: {prefill: 2, decode: 2}
  timestamp: "2026-11-30T10:00:00Z"
  targetGeneration: 2
pendingCohort:
  decisionID: d-1
  term: 1
  baselineVector: {prefill: 2, decode: 2}
  targetVector: {prefill: 3, decode: 2}
  startedAt: "2026-11-30T10:00:00Z"
rebalance:
  receiverRole: prefill
  donorRole: decode
  donorTargetReplicas: 2
  receiverTargetReplicas: 3
  startedAt: "2026-11-30T10:00:00Z"
  exhaustionEpisodeGeneration: 1
  donationAttempted: true
  reason: ReceiverAcquire
lastScaleDown:
  role: decode
  ordinal: 2
  preScaleDownVector: {prefill: 2, decode: 3}
  outcome: Aborted
  abortedAt: "2026-11-30T10:05:00Z"
  cooldownUntil: "2026-11-30T10:10:00Z"
predictors:
  - name: prefill
    level: "2400"
    trend: "10"
    covariance: {p00: "1", p01: "0", p10: "0", p11: "1"}
    sampleCount: 6
    history:
      - {timestamp: "2026-11-30T10:00:00Z", tokensPerSecond: "2400"}
conditions:
  - type: MetricsReady
    status: "True"
    reason: Observed
    message: all required role signals are available
    observedGeneration: 1
    lastTransitionTime: "2026-11-30T10:00:00Z"
"#;

#[test]
fn the_spec_status_fragments_round_trip() {
    let status: ModelDeploymentScalerStatus = serde_yaml_ng::from_str(STATUS).unwrap();
    assert_eq!(
        status.binding.as_ref().unwrap().target_uid.as_deref(),
        Some("u-1")
    );
    let role = &status.roles[0];
    assert_eq!(role.signal_state, Some(SignalState::Fresh));
    assert_eq!(role.kv_cache_usage.as_ref().unwrap().0, "0.5");
    assert_eq!(status.last_commit.as_ref().unwrap().vector["prefill"], 3);
    assert_eq!(
        status.last_scale_down.as_ref().unwrap().outcome,
        ScaleDownOutcome::Aborted
    );
    assert!(status.rebalance.as_ref().unwrap().donation_attempted);
    assert_eq!(status.predictors[0].sample_count, 6);
    assert_eq!(status.conditions[0].reason, "Observed");

    let expected: serde_json::Value = serde_yaml_ng::from_str(STATUS).unwrap();
    let written = serde_json::to_value(&status).unwrap();
    assert_eq!(written, expected, "every field survives a round trip");
}
