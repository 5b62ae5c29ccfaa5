//! D35 through replay: a retirement the target keeps refusing is not retried in a loop. One
//! Server role at 8,000 tokens/s per replica and 2,000 offered: throughput wants one replica
//! of the two. The timeline plays GPUStack: each of our shrinks is either aborted (the
//! revisions examined refuse disaggregated retirements) or completes.

use mds_simulate::replay::{PassReport, parse_timeline, replay, synthetic_target};
use serde_json::{Value, json};

const REASON: &str = "a disaggregated replica has no verifiable decoder-side release";

fn scaler() -> mds_api::ModelDeploymentScaler {
    serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm"},
        "spec": {
            "targetRef": {"name": "llm"},
            "mode": "Active",
            "roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 4}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60,
                                       "cooldownAfterAbortSeconds": 60}},
            "algorithm": {"tokenThroughput": {
                "serverTargetTokensPerSecond": "8000", "stableWindowSeconds": 60}}
        }
    }))
    .unwrap()
}

#[derive(Clone, Copy, PartialEq)]
enum Gpustack {
    /// Every retirement ends `Aborted` with [`REASON`]; the record goes once the count is
    /// raised again (the replica adopted).
    Refuses,
    /// Every retirement completes: the removed replica is simply gone.
    Completes,
}

/// Passes every 15 s; each observation sees the count the previous pass left, every replica
/// ready at once.
struct Run {
    lines: Vec<Value>,
    /// Tokens per second offered from now on.
    demand: f64,
}

impl Run {
    fn new() -> Run {
        Run {
            lines: Vec::new(),
            demand: 2000.0,
        }
    }

    fn replay(&self) -> Vec<PassReport> {
        let text: Vec<String> = self.lines.iter().map(Value::to_string).collect();
        let timeline = parse_timeline(&text.join("\n")).unwrap();
        let mut target = synthetic_target(&scaler());
        target["spec"]["roles"][0]["replicas"] = json!(2);
        replay(&scaler(), target, &timeline).unwrap()
    }

    /// The line after `last` with the target behaving as `gpustack`.
    fn next_line(&self, gpustack: Gpustack, last: Option<&PassReport>) -> Value {
        let ready = last.map_or(2, count_after);
        let t = 15 * self.lines.len();
        let mut line = json!({"t": t, "roles": {"server": {
            "readyReplicas": ready, "promptTokensPerSecond": self.demand * 0.75,
            "generationTokensPerSecond": self.demand * 0.25, "ttftMilliseconds": 100,
            "itlMilliseconds": 20}}});
        if let Some(p) = last.filter(|p| p.write.is_some()) {
            if gpustack == Gpustack::Refuses && count_after(p) < p.roles["server"].current {
                line["target"] = json!({"retirement": {"role": "server", "ordinal": ready,
                    "state": "Aborted", "reason": REASON}});
            } else if aborted_events(std::slice::from_ref(p)).len() == 1 {
                line["target"] = json!({"retirement": null});
            }
        }
        line
    }

    /// Adds `passes` passes at the run's demand with the target behaving as `gpustack`, the
    /// first line with the fields of `extra`. Lines are added in batches that assume nothing
    /// is written, cut after the first pass that writes (replaying is linear in the lines).
    fn serve(
        &mut self,
        gpustack: Gpustack,
        passes: usize,
        extra: &[(&str, Value)],
    ) -> Vec<PassReport> {
        let end = self.lines.len() + passes;
        let mut reports = self.replay();
        let first = self.lines.len();
        while self.lines.len() < end {
            let start = self.lines.len();
            let batch = (end - start).min(40);
            for _ in 0..batch {
                let last = if self.lines.len() == start {
                    reports.last()
                } else {
                    None
                };
                let mut line = self.next_line(gpustack, last);
                if last.is_none() && self.lines.len() > start {
                    // Nothing written since the batch began: the count the batch began with.
                    let ready = reports.last().map_or(2, count_after);
                    line["roles"]["server"]["readyReplicas"] = json!(ready);
                }
                if self.lines.len() == first {
                    for (k, v) in extra {
                        line[*k] = v.clone();
                    }
                }
                self.lines.push(line);
            }
            reports = self.replay();
            if let Some(k) = (start..start + batch - 1).find(|&i| reports[i].write.is_some()) {
                self.lines.truncate(k + 1);
                reports.truncate(k + 1);
            }
        }
        reports
    }
}

/// The count a pass leaves: what it wrote, else what the target had.
fn count_after(p: &PassReport) -> i32 {
    p.write
        .as_ref()
        .and_then(|w| w.vector.as_ref())
        .map_or(p.roles["server"].current, |v| v["server"])
}

fn shrinks(passes: &[PassReport]) -> Vec<f64> {
    passes
        .iter()
        .filter(|p| count_after(p) < p.roles["server"].current)
        .map(|p| p.t)
        .collect()
}

fn aborted_events(passes: &[PassReport]) -> Vec<&String> {
    passes
        .iter()
        .flat_map(|p| &p.events)
        .filter(|e| e.starts_with("ScaleDownAborted"))
        .collect()
}

/// Two aborts in a row: the run after the second.
fn refused() -> (Run, Vec<PassReport>) {
    let mut run = Run::new();
    let passes = run.serve(Gpustack::Refuses, 40, &[]);
    assert_eq!(shrinks(&passes).len(), 2, "{:?}", shrinks(&passes));
    (run, passes)
}

#[test]
fn two_aborts_in_a_row_refuse_the_roles_scale_down_with_the_targets_reason() {
    let (mut run, passes) = refused();
    let events = aborted_events(&passes);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(!events[0].contains("aborted the last"), "{}", events[0]);
    assert!(
        events[1].contains(&format!(
            "the target aborted the last 2 retirements of server (\"{REASON}\"): its scale-down waits until "
        )) && events[1].contains("router, kind) or to this scaler's spec releases it now"),
        "{}",
        events[1]
    );
    // Without D35 it would shrink again every window and cooldown; held for the hour.
    let passes = run.serve(Gpustack::Refuses, 200, &[]);
    let held = &passes[40..];
    assert!(shrinks(held).is_empty(), "{:?}", shrinks(held));
    let blocked = &held.last().unwrap().conditions["Blocked"];
    assert_eq!(blocked.reason, "ScaleDownAborted");
    assert!(blocked.message.contains(REASON), "{}", blocked.message);
    assert!(held.iter().all(|p| p.roles["server"].raw == 1));
}

#[test]
fn after_the_hold_one_retry_and_a_refused_retry_doubles_the_hold() {
    let (mut run, passes) = refused();
    let second = shrinks(&passes)[1];
    // Three and a half hours: one retry about an hour after the refusal, refused again, then
    // held two hours, then another retry.
    let passes = run.serve(Gpustack::Refuses, 860, &[]);
    let later: Vec<f64> = shrinks(&passes)
        .into_iter()
        .filter(|t| *t > second)
        .collect();
    assert_eq!(later.len(), 2, "{later:?}");
    let first_wait = later[0] - second;
    let second_wait = later[1] - later[0];
    assert!(
        (3600.0..3600.0 + 60.0).contains(&first_wait),
        "retried {first_wait} s after the refusal"
    );
    assert!(
        (7200.0..7200.0 + 60.0).contains(&second_wait),
        "retried {second_wait} s after the first retry"
    );
    let events = aborted_events(&passes);
    assert!(
        events[2].contains("the last 3 retirements"),
        "{}",
        events[2]
    );
}

#[test]
fn a_change_to_the_role_in_the_target_spec_releases_the_refusal() {
    let (mut run, _) = refused();
    let edit = json!({"extraArgs": {"server": ["--max-num-seqs", "512"]}});
    let passes = run.serve(Gpustack::Completes, 20, &[("target", edit)]);
    let tail = &passes[40..];
    assert_eq!(shrinks(tail).len(), 1, "{:?}", shrinks(tail));
    assert_eq!(tail.last().unwrap().roles["server"].constrained, 1);
}

#[test]
fn a_scaler_spec_change_releases_the_refusal() {
    let (mut run, _) = refused();
    let edit = json!({"roles": [{"name": "server", "minReplicas": 1, "maxReplicas": 5}]});
    let passes = run.serve(Gpustack::Completes, 20, &[("scaler", edit)]);
    assert_eq!(shrinks(&passes[40..]).len(), 1);
}

#[test]
fn a_retirement_that_completes_resets_the_count() {
    let mut run = Run::new();
    // One abort.
    let mut passes = run.serve(Gpustack::Refuses, 1, &[]);
    while aborted_events(&passes).is_empty() {
        passes = run.serve(Gpustack::Refuses, 1, &[]);
    }
    // The next shrink completes.
    let passes = run.serve(Gpustack::Completes, 20, &[]);
    assert_eq!(shrinks(&passes).len(), 2);
    assert_eq!(count_after(passes.last().unwrap()), 1);
    // Load grows it back to two, then falls: the next abort is the first in a row again, not
    // a refusal, and the shrink after it is tried.
    run.demand = 12_000.0;
    run.serve(Gpustack::Refuses, 8, &[]);
    run.demand = 2000.0;
    let passes = run.serve(Gpustack::Refuses, 40, &[]);
    let events = aborted_events(&passes);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(!events[1].contains("aborted the last"), "{}", events[1]);
    assert!(
        events[2].contains("aborted the last 2 retirements"),
        "{}",
        events[2]
    );
}

#[test]
fn a_restart_keeps_the_refusal_from_status() {
    let (mut run, _) = refused();
    let passes = run.serve(Gpustack::Refuses, 40, &[("restart", json!(true))]);
    assert!(shrinks(&passes[40..]).is_empty());
    assert_eq!(
        passes.last().unwrap().conditions["Blocked"].reason,
        "ScaleDownAborted"
    );
}
