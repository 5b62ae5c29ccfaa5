//! `--compare`'s table: every policy on the same trace and world, and the verdict.

use std::fmt::Write as _;

use super::{
    curves_engine_note, knees, ms, per_replica_targets, percent, quota_or_unlimited, refused_line,
    times, unattainable, world_line,
};
use crate::compare::Comparison;
use crate::run::RunReport;
use crate::slo::ItlReading;

/// A comparison's table, its header saying what every row shares.
pub fn comparison(c: &Comparison, load: &str, requests: usize, quota: &str) -> String {
    let mut out = String::new();
    let Some(first) = c.runs.first() else {
        return out;
    };
    comparison_header(&mut out, c, first, load, requests, quota);
    let reading = first.inputs.slo.itl_reading;
    let other = match reading {
        ItlReading::P95 => "mean %",
        ItlReading::Mean => "p95 %",
    };
    comparison_table(&mut out, c, other);
    if let Some(line) = verdict(c) {
        let _ = writeln!(out, "  {line}");
    }
    comparison_legend(&mut out, reading, other);
    out
}

/// A comparison's header: the policies, the world, the targets, the knee, the SLO and the
/// bounds every row shares.
fn comparison_header(
    out: &mut String,
    c: &Comparison,
    first: &RunReport,
    load: &str,
    requests: usize,
    quota: &str,
) {
    let i = &first.inputs;
    let _ = writeln!(
        out,
        "mds simulate --compare: {} policies on {load} ({requests} requests, {:.1} min)",
        c.rows.len(),
        i.duration_seconds / 60.0
    );
    world_line(out, i, c.cold_start_seconds, quota_or_unlimited(quota));
    refused_line(out, i);
    let _ = writeln!(
        out,
        "  per-replica targets (configured): {}",
        per_replica_targets(&c.targets).join(", ")
    );
    if let Some(b) = &c.bounds {
        let _ = writeln!(out, "  knee (what one replica serves): {}", knees(b));
    }
    let totals = &first.summary.totals;
    let _ = writeln!(out, "  SLO: {}; {}", i.slo.describe(), unattainable(totals));
    if let Some(b) = &c.bounds {
        let _ = writeln!(
            out,
            "  bounds at {} %: {}, static peak {:.2} GPU-h{}",
            b.goal * 100.0,
            b.oracles(),
            b.static_peak_gpu_hours,
            curves_engine_note(i.engine)
        );
    }
}

/// A comparison's table: its column heads, then a row per policy, `other` heading the
/// attainment by the ITL reading not chosen.
fn comparison_table(out: &mut String, c: &Comparison, other: &str) {
    let _ = writeln!(
        out,
        "\n  {:<24} {:>6} {:>6} {:>6} {:>6} {:>5} {:>6} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} {:>7}",
        "policy",
        "SLO %",
        other,
        "min %",
        "TTFT95",
        "ITL95",
        "GPU-h",
        "/B",
        "/HPA",
        "over",
        "short",
        "act/h",
        "flaps",
        ">quota"
    );
    // Rows whose every cell is the same (peers whose variants behave alike here) are one
    // row, with the others named beneath it.
    let cells: Vec<String> = c.rows.iter().map(row_cells).collect();
    let mut shown: Vec<usize> = Vec::new();
    for (index, r) in c.rows.iter().enumerate() {
        if shown.iter().any(|&s| cells[s] == cells[index]) {
            continue;
        }
        shown.push(index);
        let _ = writeln!(out, "  {:<24} {}", r.policy, cells[index]);
        let same: Vec<&str> = c
            .rows
            .iter()
            .enumerate()
            .filter(|(j, _)| *j > index && cells[*j] == cells[index])
            .map(|(_, other)| other.policy.as_str())
            .collect();
        if !same.is_empty() {
            let _ = writeln!(out, "    = {} (the same results)", same.join(", "));
        }
    }
}

/// What a comparison's columns mean, `other` being the column of the ITL reading not chosen.
fn comparison_legend(out: &mut String, reading: ItlReading, other: &str) {
    let _ = writeln!(
        out,
        "  SLO %: requests within the SLO as above; {other}: the same reading ITL as each request's {}; min %: minutes whose p95 TTFT and p95 inter-token gap meet both; TTFT95/ITL95: p95 ms ({}); /B, /HPA: GPU-hours over Oracle B's and HPA's; over: ready capacity over demand at the knee; short: minutes in deficit; act/h: writes that changed a count per hour; flaps: reversals within max(2 x cold start, 5 min); >quota: seconds holding more GPUs than the quota",
        match reading {
            ItlReading::P95 => "mean gap",
            ItlReading::Mean => "p95 gap",
        },
        match reading {
            ItlReading::P95 => "ITL over every gap",
            ItlReading::Mean => "ITL over requests' mean gaps",
        }
    );
}

/// Whether a row is one of ours (`mds`, `mds-*`, the tuned scaler).
fn is_ours(policy: &str) -> bool {
    policy == "mds" || policy.starts_with("mds-") || policy.starts_with("mds ")
}

/// At the bounds' goal: the cheapest row that reaches it, and ours beside it.
fn verdict(c: &Comparison) -> Option<String> {
    let goal = c.bounds.as_ref()?.goal;
    let reaches =
        |r: &&crate::compare::Row| r.violations == 0 && r.attainment.is_some_and(|a| a >= goal);
    let cheapest = |ours: bool| {
        c.rows
            .iter()
            .filter(reaches)
            .filter(|r| is_ours(&r.policy) == ours)
            .min_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours))
    };
    let said = |r: Option<&crate::compare::Row>| {
        r.map_or("none reaches it".to_string(), |r| {
            format!("{} {:.2} GPU-h", r.policy, r.gpu_hours)
        })
    };
    let (ours, peer) = (cheapest(true), cheapest(false));
    if ours.is_none() && peer.is_none() {
        return Some(format!(
            "verdict at {} %: no policy reaches it",
            goal * 100.0
        ));
    }
    let ratio = match (ours, peer) {
        (Some(o), Some(p)) if p.gpu_hours > 0.0 => {
            format!(" ({:.2}x)", o.gpu_hours / p.gpu_hours)
        }
        _ => String::new(),
    };
    Some(format!(
        "verdict at {} %: ours {}, cheapest peer {}{ratio}",
        goal * 100.0,
        said(ours),
        said(peer)
    ))
}

/// A comparison row's cells after the policy's name.
fn row_cells(r: &crate::compare::Row) -> String {
    format!(
        "{:>6} {:>6} {:>6} {:>6} {:>5} {:>6.2} {:>5} {:>5} {:>5} {:>5} {:>6.1} {:>5} {:>6.0}s{}",
        percent(r.attainment),
        percent(r.attainment_other),
        percent(r.window_attainment),
        ms(r.ttft_p95_seconds),
        ms(r.itl_p95_seconds),
        r.gpu_hours,
        times(r.vs_oracle_b),
        times(r.vs_hpa),
        times(r.over_provisioning),
        r.deficit_minutes.map_or("-".into(), |m| m.to_string()),
        r.scale_actions_per_hour,
        r.flaps,
        r.above_budget_seconds,
        if r.violations > 0 {
            format!("  {} invariant violation(s)", r.violations)
        } else {
            String::new()
        }
    )
}
