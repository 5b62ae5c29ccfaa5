//! D36 through replay: a retirement that stays in one phase (a Pod that never goes) keeps the
//! spec's scale-down guard for as long as it stands; past its phase budget and
//! `pendingTimeoutSeconds` the `Blocked` message names the ordinal, the phase and the Pod to
//! look at, and a `RetirementStuck` Warning event says the same once.

use mds_simulate::replay::{PassReport, parse_timeline, replay, synthetic_target};
use serde_json::{Value, json};

fn scaler() -> mds_api::ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm"},
        "spec": {
            "targetRef": {"name": "llm"},
            "mode": "Active",
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 4}],
            "sampling": {"pendingTimeoutSeconds": 120},
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
            "algorithm": {"tokenThroughput": {
                "serverTargetTokensPerSecond": "8000", "stableWindowSeconds": 60}}
        }
    }))
    .unwrap()
}

/// Passes every 15 s for `seconds` at 2,000 tokens/s (one replica's worth of two), then at
/// `later` tokens/s. Our shrink at 60 s starts the retirement of server/1: it drains, and from
/// 90 s it stands in `Deleting`, its Pod never gone, until `cleared_at` (if any).
fn run(seconds: usize, later: f64, cleared_at: Option<usize>) -> Vec<PassReport> {
    let lines: Vec<String> = (0..seconds / 15)
        .map(|i| {
            let t = 15 * i;
            let demand = if t < 600 { 2000.0 } else { later };
            let ready = if t <= 60 { 2 } else { 1 };
            let mut line = json!({"t": t, "roles": {"server": {
                "readyReplicas": ready, "promptTokensPerSecond": demand * 0.75,
                "generationTokensPerSecond": demand * 0.25, "ttftMilliseconds": 100,
                "itlMilliseconds": 20}}});
            let state = match t {
                75 => Some("Draining"),
                90 => Some("Deleting"),
                _ => None,
            };
            if let Some(state) = state {
                line["target"] =
                    json!({"retirement": {"role": "server", "ordinal": 1, "state": state}});
            }
            if Some(t) == cleared_at {
                line["target"] = json!({"retirement": null, "terminating": {"server": []}});
            }
            line
        })
        .map(|l: Value| l.to_string())
        .collect();
    let timeline = parse_timeline(&lines.join("\n")).unwrap();
    let mut target = synthetic_target(&scaler());
    target["spec"]["roles"][0]["replicas"] = json!(2);
    replay(&scaler(), target, &timeline).unwrap()
}

fn stuck_events(passes: &[PassReport]) -> Vec<(f64, &String)> {
    passes
        .iter()
        .flat_map(|p| p.events.iter().map(move |e| (p.t, e)))
        .filter(|(_, e)| e.starts_with("RetirementStuck"))
        .collect()
}

#[test]
fn a_retirement_stuck_in_deleting_is_named_once_past_its_budget_and_the_timeout() {
    let passes = run(1200, 2000.0, None);
    let events = stuck_events(&passes);
    assert_eq!(events.len(), 1, "{events:?}");
    // Deleting from 90 s has no budget of its own: the whole operation's 300 s, then the
    // pending timeout of 120 s.
    let (t, event) = events[0];
    assert_eq!(t, 90.0 + 300.0 + 120.0, "{event}");
    assert!(
        event.contains("the retirement of server/1 has stood in Deleting since ")
            && event.contains("look at Pod llm-server-"),
        "{event}"
    );
    let before = passes.iter().find(|p| p.t == t - 15.0).unwrap();
    assert!(
        !before.conditions["Blocked"]
            .message
            .contains("has stood in"),
        "{:?}",
        before.conditions["Blocked"]
    );
    let last = passes.last().unwrap();
    let blocked = &last.conditions["Blocked"];
    assert_eq!(
        (blocked.status.as_str(), blocked.reason.as_str()),
        ("True", "PacingBounded")
    );
    assert!(
        blocked.message.contains("server/1 has stood in Deleting"),
        "{}",
        blocked.message
    );
}

#[test]
fn the_stuck_retirement_holds_scale_down_but_not_growth_and_goes_when_it_is_cleared() {
    // Demand rises at 600 s: growth goes through while the retirement stands.
    let passes = run(900, 12_000.0, Some(840));
    let grown = passes
        .iter()
        .find(|p| p.t >= 600.0 && p.write.is_some())
        .expect("growth while the retirement is stuck");
    assert!(grown.roles["server"].constrained > 1);
    // Cleared at 840 s: Blocked no longer names it.
    let last = passes.last().unwrap();
    assert!(
        !last.conditions["Blocked"].message.contains("has stood in"),
        "{:?}",
        last.conditions["Blocked"]
    );
}
