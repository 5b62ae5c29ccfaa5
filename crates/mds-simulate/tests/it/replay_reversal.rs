//! D33 through replay: a shrink the latency guard reverses is not retried at the same load.
//! One Server role at 8,000 tokens/s per replica, 6,000 offered: throughput alone wants one
//! replica; one replica breaches the ITL target, two do not.

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
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120}},
            "algorithm": {"tokenThroughput": {
                "serverTargetTokensPerSecond": "8000", "stableWindowSeconds": 60,
                "itlTargetMilliseconds": "50"}}
        }
    }))
    .unwrap()
}

/// A pass's line: `ready` replicas serving `demand` tokens/s at a p95 ITL of `itl` ms.
fn line(t: u32, ready: u32, demand: f64, itl: f64) -> Value {
    json!({"t": t, "roles": {"server": {
        "readyReplicas": ready, "promptTokensPerSecond": demand * 0.75,
        "generationTokensPerSecond": demand * 0.25, "ttftMilliseconds": 100,
        "itlMilliseconds": itl}}})
}

/// Passes every 15 s: the count each pass's observation sees follows the count the last pass
/// left (every replica ready at once); one replica breaches the ITL target above 3,000
/// tokens/s, two never do.
struct Run {
    lines: Vec<Value>,
}

impl Run {
    fn new() -> Run {
        Run { lines: Vec::new() }
    }

    fn t(&self) -> u32 {
        15 * self.lines.len() as u32
    }

    fn push(&mut self, mut line: Value, extra: &[(&str, Value)]) {
        for (k, v) in extra {
            line[*k] = v.clone();
        }
        self.lines.push(line);
    }

    /// Replays the lines so far and returns every pass.
    fn replay(&self) -> Vec<PassReport> {
        let text: Vec<String> = self.lines.iter().map(Value::to_string).collect();
        let timeline = parse_timeline(&text.join("\n")).unwrap();
        replay(&scaler(), synthetic_target(&scaler()), &timeline).unwrap()
    }

    /// Adds passes at `demand` until `until`, each observing the count the previous pass
    /// left, with ITL over the target at one replica only.
    fn serve(&mut self, demand: f64, passes: usize, extra: &[(&str, Value)]) -> Vec<PassReport> {
        for _ in 0..passes {
            let ready = self
                .replay()
                .last()
                .map_or(2, |p| p.roles["server"].constrained);
            let itl = if ready <= 1 && demand > 3000.0 {
                80.0
            } else {
                20.0
            };
            let t = self.t();
            self.push(line(t, ready as u32, demand, itl), extra);
        }
        self.replay()
    }
}

fn counts(passes: &[PassReport]) -> Vec<i32> {
    passes
        .iter()
        .map(|p| p.roles["server"].constrained)
        .collect()
}

/// 2 → 1 on throughput, then the guard's growth back to 2: the reversal. Returns the run.
fn reversed() -> (Run, Vec<PassReport>) {
    let mut run = Run::new();
    let passes = run.serve(6000.0, 16, &[]);
    let c = counts(&passes);
    let shrink = c.iter().position(|&n| n == 1).expect("a shrink to 1");
    let back = shrink + c[shrink..].iter().position(|&n| n == 2).expect("back to 2");
    assert_eq!(passes[back].roles["server"].reason, "LatencyGuardScaleUp");
    (run, passes)
}

fn reversal_event(passes: &[PassReport]) -> Vec<&String> {
    passes
        .iter()
        .flat_map(|p| &p.events)
        .filter(|e| e.contains("reversed our shrink"))
        .collect()
}

#[test]
fn a_reversed_shrink_holds_at_n_with_a_message_naming_the_reversal() {
    let (mut run, passes) = reversed();
    let events = reversal_event(&passes);
    assert_eq!(events.len(), 1, "said once: {events:?}");
    assert!(
        events[0].contains("the latency guard reversed our shrink from 2 to 1: 1 replica breached the ITL target at 6000 tokens/s at ")
            && events[0].contains("the role is not planned below 2 until demand falls to 3000 tokens/s, the scaler spec changes, or "),
        "{}",
        events[0]
    );
    // Without D33 it would go 2 -> 1 -> 2 every scale-down window; held at 2 for 20 minutes.
    let passes = run.serve(6000.0, 80, &[]);
    let tail = &passes[passes.len() - 80..];
    assert!(counts(tail).iter().all(|&n| n == 2), "{:?}", counts(tail));
    assert!(
        tail.iter()
            .all(|p| p.roles["server"].reason == "LatencyGuardHold"),
        "{:?}",
        tail.iter()
            .map(|p| &p.roles["server"].reason)
            .collect::<Vec<_>>()
    );
    assert!(tail.iter().all(|p| p.roles["server"].raw == 2));
}

#[test]
fn the_hold_is_released_when_demand_falls_to_what_the_smaller_count_carried() {
    let (mut run, _) = reversed();
    // 3,100 tokens/s is more than 1 x 6,000 / 2: held.
    let passes = run.serve(3100.0, 20, &[]);
    assert!(counts(&passes[passes.len() - 20..]).iter().all(|&n| n == 2));
    // 3,000 is what one replica carried per replica at 2: released, it shrinks after the window.
    let passes = run.serve(3000.0, 20, &[]);
    let tail = &passes[passes.len() - 20..];
    assert_ne!(tail[5].roles["server"].reason, "LatencyGuardHold");
    assert_eq!(*counts(tail).last().unwrap(), 1, "{:?}", counts(tail));
}

#[test]
fn the_hold_is_released_when_the_scaler_spec_changes() {
    let (mut run, _) = reversed();
    run.serve(6000.0, 4, &[]);
    let edit = json!({"roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 5}]});
    let passes = run.serve(6000.0, 1, &[("scaler", edit)]);
    assert_ne!(
        passes.last().unwrap().roles["server"].reason,
        "LatencyGuardHold"
    );
}

#[test]
fn the_hold_time_runs_out_after_an_hour_and_doubles_after_a_release() {
    let (mut run, _) = reversed();
    // An hour at the same load: held, then released by time and shrunk again (and reversed
    // again, the second reversal holding two hours).
    let passes = run.serve(6000.0, 250, &[]);
    let c = counts(&passes);
    let shrinks: Vec<usize> = (1..c.len()).filter(|&i| c[i] < c[i - 1]).collect();
    assert_eq!(shrinks.len(), 2, "one more shrink after the hour: {c:?}");
    let second = shrinks[1] as f64 * 15.0 - shrinks[0] as f64 * 15.0;
    assert!(
        (3600.0..3600.0 + 300.0).contains(&second),
        "the second shrink {second} s after the first"
    );
    let events = reversal_event(&passes);
    assert_eq!(events.len(), 2, "{events:?}");
    let until = |e: &str| e.rsplit(", or ").next().unwrap().to_string();
    // First: one hour after 00:0x; second: two hours after 01:0x.
    assert!(
        until(events[0]).starts_with("2026-01-01T01:"),
        "{}",
        events[0]
    );
    assert!(
        until(events[1]).starts_with("2026-01-01T03:"),
        "{}",
        events[1]
    );
}

#[test]
fn an_unreversed_shrink_resets_the_hold_time_and_growth_is_never_held() {
    let (mut run, _) = reversed();
    // Demand falls: released and shrunk, and the shrink stands (one replica is enough at
    // 2,000 tokens/s).
    let passes = run.serve(2000.0, 30, &[]);
    assert_eq!(*counts(&passes).last().unwrap(), 1);
    // Demand rises past one replica's capacity: throughput growth is not held by anything.
    let passes = run.serve(12_000.0, 4, &[]);
    assert_eq!(*counts(&passes).last().unwrap(), 2);
    assert_ne!(
        passes.last().unwrap().roles["server"].reason,
        "LatencyGuardHold"
    );
    // Back at 6,000: a shrink, reversed again, holds one hour (the count was reset).
    let passes = run.serve(6000.0, 30, &[]);
    let events = reversal_event(&passes);
    assert_eq!(events.len(), 2, "{events:?}");
    let at = |e: &str| e.split(" at ").nth(2).unwrap()[..5].to_string();
    let until = |e: &str| e.rsplit(", or ").next().unwrap()[11..16].to_string();
    let (h, m) = {
        let a = at(events[1]);
        (a[..2].parse::<u32>().unwrap(), a[3..].to_string())
    };
    assert_eq!(
        until(events[1]),
        format!("{:02}:{m}", h + 1),
        "{}",
        events[1]
    );
}

#[test]
fn a_restart_forgets_the_reversal() {
    let (mut run, _) = reversed();
    run.serve(6000.0, 4, &[]);
    run.serve(6000.0, 1, &[("restart", json!(true))]);
    let passes = run.serve(6000.0, 16, &[]);
    let tail = &passes[passes.len() - 17..];
    // The new process does not know the reversal: it shrinks again after its window.
    assert!(counts(tail).contains(&1), "{:?}", counts(tail));
}

#[test]
fn a_scaler_edit_admission_refuses_is_refused_naming_the_line_and_field() {
    let text = [
        line(0, 2, 6000.0, 20.0).to_string(),
        json!({"t": 15, "scaler": {"roles": [{"name": "server", "minReplicas": 5, "maxReplicas": 4}]}})
            .to_string(),
    ]
    .join("\n");
    let timeline = parse_timeline(&text).unwrap();
    let e = replay(&scaler(), synthetic_target(&scaler()), &timeline).unwrap_err();
    assert!(
        e.0.starts_with(
            "timeline line 2: scaler: admission refuses the patched scaler: spec.roles[0]"
        ),
        "{}",
        e.0
    );
    let e = parse_timeline(r#"{"t": 0, "restart": "yes"}"#).unwrap_err();
    assert!(e.0.contains("restart"), "{}", e.0);
}
