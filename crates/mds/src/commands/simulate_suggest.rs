//! `mds simulate --suggest`: the cheapest per-replica target that meets the SLO attainment
//! goal on this trace (docs/simulator.md, "Finding the per-replica target").

use std::fmt::Write as _;

use mds_simulate::compare::Case;
use mds_simulate::suggest::{Suggestion, Trial, suggest};

use super::inputs::{Stop, unusable};

/// Runs the search and says what it found; exit status 1 when no setting meets the goal.
pub fn run(case: &Case, goal_percent: f64) -> Result<(String, u8), Stop> {
    if !(goal_percent.is_finite() && goal_percent > 0.0 && goal_percent <= 100.0) {
        return Err(unusable(format!(
            "--goal {goal_percent}: it must be a percentage above 0 and at most 100"
        )));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let found = suggest(case, goal_percent / 100.0, threads)
        .map_err(|e| unusable(format!("--suggest: {e}")))?;
    let out = report(case, &found);
    Ok((out, if found.chosen.is_some() { 0 } else { 1 }))
}

fn targets(t: &Trial) -> String {
    t.targets
        .iter()
        .map(|(role, v)| {
            format!(
                "{role} {}",
                if *v >= 10.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn report(case: &Case, s: &Suggestion) -> String {
    let mut out = String::new();
    let i = case.options;
    let _ = writeln!(
        out,
        "mds simulate --suggest: {} on {} ({} requests), goal {:.1} % within TTFT {:.0} ms and ITL {:.0} ms",
        case.scaler.metadata.name.clone().unwrap_or_default(),
        case.load,
        case.trace.requests.len(),
        s.goal * 100.0,
        i.slo.ttft_seconds * 1000.0,
        i.slo.itl_seconds * 1000.0,
    );
    let _ = writeln!(
        out,
        "  world: {}, cold start {:.0} s, seed {}; every role's target scaled by one factor\n",
        i.profile.name,
        i.cold_start
            .map_or(i.profile.cold_start, |c| c)
            .as_secs_f64(),
        i.seed
    );
    let _ = writeln!(
        out,
        "  {:>7}  {:>7}  {:>6}  targets",
        "factor", "SLO %", "GPU-h"
    );
    for t in &s.trials {
        let mark = match &s.chosen {
            Some(c) if c.factor == t.factor => " <- cheapest within the goal",
            _ if t.violations > 0 => " (invariant violations)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "  {:>7.3}  {:>7}  {:>6.2}  {}{mark}",
            t.factor,
            t.attainment
                .map_or("-".into(), |a| format!("{:.1}", a * 100.0)),
            t.gpu_hours,
            targets(t)
        );
    }
    match (&s.chosen, &s.fragment) {
        (Some(c), Some(fragment)) => {
            let slack = c.attainment.unwrap_or(0.0) - s.goal;
            let cheaper_miss = s
                .trials
                .iter()
                .filter(|t| t.gpu_hours < c.gpu_hours)
                .filter_map(|t| Some((t, t.attainment?)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let _ = writeln!(
                out,
                "\nsuggested: {} gives {:.1} % at {:.2} GPU-hours, {:.1} points above the goal",
                targets(c),
                c.attainment.unwrap_or(0.0) * 100.0,
                c.gpu_hours,
                slack * 100.0
            );
            if let Some((t, a)) = cheaper_miss {
                let _ = writeln!(
                    out,
                    "  the best cheaper setting tried ({}) gives {:.1} % at {:.2} GPU-hours",
                    targets(t),
                    a * 100.0,
                    t.gpu_hours
                );
            }
            let _ = writeln!(out, "\npaste into the scaler's spec:\n{fragment}");
        }
        _ => {
            let _ = writeln!(
                out,
                "\nno setting tried meets {:.1} %: raise the roles' maxReplicas, relax the SLO or lower the goal",
                s.goal * 100.0
            );
        }
    }
    out
}

/// `--suggest --metrics FILE`: each role's knee from a recorded timeline (the `mds replay`
/// format), and the targets to paste.
pub fn from_metrics(
    path: &std::path::Path,
    scaler: &mds_api::ModelDeploymentScaler,
    target: &mds_api::target::ModelDeployment,
    slo: mds_simulate::report::Slo,
) -> Result<(String, u8), Stop> {
    use mds_api::target::RoleKind;
    let text = super::read_text(path, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{}: cannot read: {e}", path.display())))?;
    let proportional = scaler
        .spec
        .algorithm
        .as_ref()
        .and_then(|a| a.algorithm_type.as_ref())
        .is_some_and(|t| format!("{t:?}") == "Proportional");
    let mut readings: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| unusable(format!("{} line {}: not JSON: {e}", path.display(), n + 1)))?;
        let Some(roles) = entry["roles"].as_object() else {
            return Err(unusable(format!(
                "{} line {}: no `roles` object (the mds replay timeline format)",
                path.display(),
                n + 1
            )));
        };
        for (name, obs) in roles {
            let Some(role) = target.spec.roles.iter().find(|r| &r.name == name) else {
                return Err(unusable(format!(
                    "{} line {}: role {name:?} is not a role of the target",
                    path.display(),
                    n + 1
                )));
            };
            let num = |k: &str| obs[k].as_f64().filter(|v| v.is_finite() && *v >= 0.0);
            let Some(ready) = num("readyReplicas").filter(|r| *r >= 1.0) else {
                continue;
            };
            let kind = role.kind();
            let load = if proportional {
                num("runningRequests").map(|r| r + num("waitingRequests").unwrap_or(0.0))
            } else {
                match kind {
                    RoleKind::Prefill | RoleKind::Encode => num("promptTokensPerSecond"),
                    RoleKind::Decode => num("generationTokensPerSecond"),
                    _ => num("promptTokensPerSecond")
                        .zip(num("generationTokensPerSecond"))
                        .map(|(p, g)| p + g),
                }
            };
            let ttft = num("ttftMilliseconds").map(|v| v / 1000.0 / slo.ttft_seconds);
            let itl = num("itlMilliseconds").map(|v| v / 1000.0 / slo.itl_seconds);
            let ratio = match kind {
                RoleKind::Prefill | RoleKind::Encode => ttft,
                RoleKind::Decode => itl,
                _ => ttft.into_iter().chain(itl).reduce(f64::max),
            };
            if let (Some(load), Some(ratio)) = (load, ratio) {
                readings
                    .entry(name.clone())
                    .or_default()
                    .push((load / ready, ratio));
            }
        }
    }
    if readings.is_empty() {
        return Err(unusable(format!(
            "{}: no reading has a ready replica, a load and a latency to compare",
            path.display()
        )));
    }
    let unit = if proportional { "requests" } else { "tokens/s" };
    let mut out = format!(
        "mds simulate --suggest --metrics {}: the load per replica at which p95 latency left TTFT {:.0} ms / ITL {:.0} ms\n\n",
        path.display(),
        slo.ttft_seconds * 1000.0,
        slo.itl_seconds * 1000.0
    );
    let mut fields = Vec::new();
    for (role, points) in &readings {
        let k = mds_simulate::knee::knee(points);
        let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            out,
            "  {role}: {} readings; knee {} {unit} per replica ({} misfit readings); highest load within the SLO below it {}; highest seen {}",
            k.readings,
            k.knee.map_or("not reached".into(), |v| format!("{v:.0}")),
            k.misfits,
            show(k.suggested),
            show(k.highest),
        );
        if k.knee.is_none() {
            let _ = writeln!(
                out,
                "    latency never left the SLO: the capacity is at least the highest load seen; a load test above it would find the knee"
            );
        }
        if let Some(v) = k.suggested {
            let kind = target
                .spec
                .roles
                .iter()
                .find(|r| &r.name == role)
                .map(|r| r.kind());
            fields.push((role.clone(), kind, v));
        }
    }
    if fields.is_empty() {
        let _ = writeln!(out, "\nno role has a load seen within the SLO to suggest");
        return Ok((out, 1));
    }
    out.push_str("\npaste into the scaler's spec:\n  algorithm:\n");
    if proportional {
        out.push_str("    type: Proportional\n    proportional:\n      metric: QueueDepth\n      roleTargets:\n");
        for (role, _, v) in &fields {
            let _ = writeln!(out, "        - name: {role}\n          target: \"{v:.1}\"");
        }
    } else {
        out.push_str("    type: TokenThroughput\n    tokenThroughput:\n");
        for (_, kind, v) in &fields {
            let field = match kind {
                Some(RoleKind::Prefill) => "prefill",
                Some(RoleKind::Decode) => "decode",
                _ => "server",
            };
            let _ = writeln!(out, "      {field}TargetTokensPerSecond: \"{v:.0}\"");
        }
    }
    Ok((out, 0))
}
