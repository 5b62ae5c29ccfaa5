//! What the shell's sampling means to the core: a sampling reused by a pass brought forward
//! is not a new observation (the planner's windows and the predictor's point count take it
//! once), and a target the shell cannot sample says why in `MetricsReady` (D2).

use crate::common;

use common::*;
use serde_json::{Value, json};

fn predictive() -> Value {
    json!({
        "targetRef": {"name": "llm"},
        "mode": "Active",
        "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 8}],
        "algorithm": {"predictive": {
            "tokenThroughput": {"serverTargetTokensPerSecond": "100"},
            "serverTokenCapacityPerReplica": "100",
            "minPoints": 3
        }}
    })
}

fn serving(tokens_per_second: f64) -> mds_signals::RoleObservation {
    let mut o = wants(2, 2);
    o.generation_tokens_per_second = Some(tokens_per_second);
    o
}

/// The server role's demand samples and the predictor's point count.
fn recorded(w: &World) -> (Vec<(jiff::Timestamp, f64)>, u32) {
    let role = &w.memory.planner.as_ref().expect("planning ran").roles["server"];
    let demand = role.demand.iter().copied().collect();
    (demand, role.kalman.as_ref().map_or(0, |k| k.sample_count))
}

#[test]
fn a_reused_sampling_is_recorded_once() {
    let mut w = World::new(predictive(), Some(target(&[("server", "Server", 2)])));
    w.observe("server", serving(150.0));
    w.pass(); // binds
    w.now = 15;
    w.observe("server", serving(160.0));
    w.pass();
    let before = recorded(&w);
    assert_eq!(before.0.last(), Some(&(t(15), 160.0)));
    // A watch event brings a pass forward at 16 s: it plans on the 15 s sampling again.
    w.now = 16;
    w.observed_at = Some(15);
    w.pass();
    assert_eq!(recorded(&w), before, "the reused sampling counted twice");
    // The next sampling is a new observation.
    w.now = 30;
    w.observed_at = None;
    w.observe("server", serving(170.0));
    w.pass();
    let after = recorded(&w);
    assert_eq!(after.0.last(), Some(&(t(30), 170.0)));
    assert_eq!(after.0.len(), before.0.len() + 1);
    assert_eq!(after.1, before.1 + 1);
}

#[test]
fn an_engine_the_shell_cannot_read_is_named_by_metrics_ready() {
    let mut w = World::new(
        spec("Active", &[("server", 1, 8)]),
        Some(target(&[("server", "Server", 2)])),
    );
    w.sampling_problem =
        Some("engine \"TGI\" is not supported; the scaler reads vLLM and SGLang metrics".into());
    w.pass();
    w.now = 15;
    w.pass();
    let metrics = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "MetricsReady")
        .expect("MetricsReady");
    assert_eq!(
        (metrics.status.as_str(), metrics.reason.as_str()),
        ("False", "WaitingForMetrics")
    );
    assert!(metrics.message.contains("\"TGI\""), "{}", metrics.message);
    assert!(metrics.message.contains("server"), "{}", metrics.message);
}
