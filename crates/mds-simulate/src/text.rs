//! What `mds simulate` prints: a run's summary and its minutes, a comparison's table. The
//! command writes these strings out; the rules of what they say live here, beside the
//! reports they read.

use std::fmt::Write as _;

use crate::compare::Comparison;
use crate::report::{Bin, Percentiles};
use crate::run::{Inputs, RunReport};
use crate::slo::ItlReading;

/// Seconds as whole milliseconds, `-` when absent (the text and the HTML report alike).
pub fn ms(seconds: Option<f64>) -> String {
    seconds.map_or("-".into(), |s| format!("{:.0}", s * 1000.0))
}

fn percentiles(p: &Percentiles) -> String {
    format!("{} / {} / {} ms", ms(p.p50), ms(p.p95), ms(p.p99))
}

/// A share as a percentage to one decimal, `-` when absent.
pub fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |a| format!("{:.1}", a * 100.0))
}

/// A ratio to two decimals, `-` when absent.
pub fn times(v: Option<f64>) -> String {
    v.map_or("-".into(), |r| format!("{r:.2}"))
}

/// The attainment by the reading not chosen, and that reading's name.
fn other_reading(t: &Bin, chosen: ItlReading) -> (Option<f64>, &'static str) {
    match chosen {
        ItlReading::P95 => (t.attainment_mean_itl, "each request's mean"),
        ItlReading::Mean => (t.attainment_p95_itl, "each request's p95 gap"),
    }
}

/// `n` requests, singular or plural.
fn count_requests(n: f64) -> String {
    if (n - 1.0).abs() < 1e-9 {
        "1 request".into()
    } else {
        format!("{n:.0} requests")
    }
}

/// Requests no scale serves within the SLO, and the ceiling that leaves.
fn unattainable(t: &Bin) -> String {
    let share = if t.requests > 0.0 {
        t.unattainable / t.requests
    } else {
        0.0
    };
    format!(
        "{} ({:.1} %) cannot meet the SLO at any scale: attainment cannot pass {:.1} %",
        count_requests(t.unattainable),
        share * 100.0,
        (1.0 - share) * 100.0
    )
}

/// Each role's knee, in one line.
fn knees(b: &crate::run::Bounds) -> String {
    if b.knees.is_empty() {
        return "-".into();
    }
    let each: Vec<String> = b
        .knees
        .iter()
        .map(|(role, k)| {
            format!(
                "{role} {:.0} tokens/s ({:.2} requests/s)",
                k.tokens_per_second, k.requests_per_second
            )
        })
        .collect();
    let goal = b.knees.values().next().map_or(0.0, |k| k.goal);
    format!(
        "{} at {} % of requests within the SLO, on this trace's mix",
        each.join(", "),
        goal * 100.0
    )
}

/// A run's metrics (module `metrics`), one line each.
fn metrics(out: &mut String, m: &crate::metrics::Metrics) {
    let row = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "  {label:<20}{value}");
    };
    if let (Some(over), Some(short), Some(minutes)) = (
        m.over_provisioning,
        m.under_provisioned_replica_seconds,
        m.deficit_minutes,
    ) {
        row(
            out,
            "provisioning",
            format!(
                "ready capacity {over:.2}x the demand at the knee; {:.0} replica-seconds short over {minutes} minutes in deficit",
                short
            ),
        );
    }
    let seconds = |v: Option<f64>| v.map_or("-".into(), |s| format!("{s:.0} s"));
    row(
        out,
        "reaction",
        if m.reactions_seconds.is_empty() {
            "no demand step".into()
        } else {
            format!(
                "{} demand steps covered in {} on average, {} at most",
                m.reactions_seconds.len(),
                seconds(m.mean_reaction()),
                seconds(m.reactions_seconds.iter().copied().reduce(f64::max))
            )
        },
    );
    if let Some(lead) = m.mean_lead() {
        row(
            out,
            "lead time",
            format!(
                "{} rising crossings of a replica's worth of demand, the replica ready {:.0} s {} on average",
                m.leads_seconds.len(),
                lead.abs(),
                if lead >= 0.0 { "before" } else { "after" }
            ),
        );
    }
    row(
        out,
        "replica changes",
        format!("{} (sum of |change|)", m.replica_changes),
    );
    if let Some(share) = m.in_band_share {
        row(
            out,
            "inside the bands",
            format!("{:.1} % of the time", share * 100.0),
        );
    }
    if let (Some(f), Some(l)) = (m.forecast_smape, m.last_value_smape) {
        row(
            out,
            "forecast sMAPE",
            format!(
                "{:.3} at the horizon, last value {l:.3} ({:+.0} %)",
                f,
                (f / l.max(1e-12) - 1.0) * 100.0
            ),
        );
    }
}

/// Why a run served nothing, when it did not: `None` when some request finished. The run's
/// exit status says it too (a run that served nothing answers no question about scaling).
pub fn nothing_served(report: &RunReport) -> Option<String> {
    let s = &report.summary;
    let t = &s.totals;
    if s.finished > 0.0 || t.requests == 0.0 {
        return None;
    }
    let mut why = Vec::new();
    if t.rejected > 0.0 {
        why.push(match &report.inputs.refusals {
            Some(r) if r.requests as f64 >= t.rejected => {
                format!("rejected {}", r.describe(&report.inputs.profile))
            }
            _ => format!("{:.0} rejected by the engines", t.rejected),
        });
    }
    if s.unrouted > 0.0 {
        why.push(format!(
            "{:.0} found no ready replica to route to",
            s.unrouted
        ));
    }
    if s.lost > 0.0 {
        why.push(format!("{:.0} lost with a replica that went", s.lost));
    }
    if s.unfinished_at_end > 0.0 {
        why.push(format!(
            "{:.0} still unfinished when the run ended",
            s.unfinished_at_end
        ));
    }
    Some(format!(
        "nothing was served: none of the {:.0} requests finished ({})",
        t.requests,
        why.join("; ")
    ))
}

/// One run's summary, `requests` being the requests the load offered.
pub fn summary(report: &RunReport, requests: usize) -> String {
    let i = &report.inputs;
    let s = &report.summary;
    let t = &s.totals;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mds simulate: scaler {} on {} ({requests} requests, {:.1} min)",
        i.scaler,
        i.load,
        i.duration_seconds / 60.0
    );
    let _ = writeln!(
        out,
        "  world: {} ({}), {} engine, router {}, cold start {:.0} s ± {:.0} %, seed {}, quota {}{}",
        i.profile,
        i.profile_why,
        i.engine.as_str(),
        i.router,
        i.cold_start_seconds,
        i.cold_start_spread * 100.0,
        i.seed,
        i.quota_text(),
        stand_in_note(i)
    );
    let row = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "  {label:<20}{value}");
    };
    row(
        &mut out,
        "requests",
        format!(
            "{:.0} (finished {:.0}, rejected {:.0}, never served {:.0})",
            t.requests, s.finished, t.rejected, t.never_served
        ),
    );
    if let Some(r) = &i.refusals {
        row(&mut out, "refused", r.describe(&i.profile));
    }
    row(&mut out, "SLO", i.slo.describe());
    let (other, other_name) = other_reading(t, i.slo.itl_reading);
    row(
        &mut out,
        "SLO attainment",
        format!(
            "{} ({} % reading ITL as {other_name})",
            t.attainment
                .map_or("-".into(), |a| format!("{:.1} %", a * 100.0)),
            percent(other),
        ),
    );
    row(&mut out, "unattainable", unattainable(t));
    row(
        &mut out,
        "minutes within SLO",
        s.window_attainment.map_or("-".into(), |a| {
            format!(
                "{:.1} % (p95 TTFT and p95 ITL of each minute with requests)",
                a * 100.0
            )
        }),
    );
    row(&mut out, "TTFT p50/p95/p99", percentiles(&t.ttft));
    row(
        &mut out,
        "ITL p50/p95/p99",
        format!("{} (every gap between output tokens)", percentiles(&t.itl)),
    );
    row(
        &mut out,
        "TPOT p50/p95/p99",
        format!("{} (each request's mean gap)", percentiles(&t.tpot)),
    );
    row(&mut out, "means", means(&s.means));
    row(&mut out, "GPU-hours", format!("{:.2}", t.gpu_hours));
    if let Some(b) = &report.bounds {
        row(&mut out, "knee", knees(b));
        row(
            &mut out,
            "GPU-hours bounds",
            format!(
                "{} at {} %{}, static peak {:.2} GPU-h{}",
                b.oracles(),
                b.goal * 100.0,
                b.oracle_b_gpu_hours.map_or(String::new(), |ob| format!(
                    " (this run {:.2}x Oracle B)",
                    t.gpu_hours / ob.max(1e-9)
                )),
                b.static_peak_gpu_hours,
                fluid_caveat(i.engine)
            ),
        );
    }
    for (role, r) in &s.replica_stats {
        row(
            &mut out,
            &format!("replicas {role}"),
            format!("min {}, max {}, mean {:.2}", r.min, r.max, r.mean),
        );
    }
    row(
        &mut out,
        "scale actions",
        format!(
            "{} ({:.1} per hour), flaps {}",
            t.scale_actions, s.scale_actions_per_hour, t.flaps
        ),
    );
    row(
        &mut out,
        "unadmitted growth",
        format!("{:.0} s", t.unadmitted_seconds),
    );
    if let Some(m) = &report.metrics {
        metrics(&mut out, m);
    }
    for (i, fault) in report.faults.iter().enumerate() {
        row(
            &mut out,
            if i == 0 { "faults" } else { "" },
            fault.describe(),
        );
    }
    row(
        &mut out,
        "invariants",
        if report.violations.is_empty() {
            format!("all held, checked at {} passes", report.passes.len())
        } else {
            format!(
                "{} violated (listed on standard error)",
                report.violations.len()
            )
        },
    );
    out
}

/// One row per minute (`--minutes`), after a blank line.
pub fn minutes(report: &RunReport) -> String {
    let mut out = String::new();
    let roles: Vec<&String> = report.summary.replica_stats.keys().collect();
    let _ = write!(out, "\n  min  requests  attain  ttft95  itl95  gpu-h");
    for role in &roles {
        let _ = write!(out, "  {role}(ready)");
    }
    if !report.faults.is_empty() {
        let _ = write!(out, "  faults");
    }
    let _ = writeln!(out);
    for b in &report.bins {
        let _ = write!(
            out,
            "  {:>3}  {:>8.0}  {:>6}  {:>6}  {:>5}  {:>5.2}",
            (b.start / 60.0) as i64,
            b.requests,
            percent(b.attainment),
            ms(b.ttft.p95),
            ms(b.itl.p95),
            b.gpu_hours
        );
        for role in &roles {
            let _ = write!(
                out,
                "  {}({})",
                b.replicas.get(*role).copied().unwrap_or(0),
                b.ready.get(*role).copied().unwrap_or(0)
            );
        }
        let faults = faults_in(report, b);
        if !faults.is_empty() {
            let _ = write!(out, "  {}", faults.join(", "));
        }
        let _ = writeln!(out);
    }
    out
}

/// The kinds of the faults whose window meets the minute `bin`.
fn faults_in<'r>(report: &'r RunReport, bin: &Bin) -> Vec<&'r str> {
    let end = bin.start + bin.seconds;
    report
        .faults
        .iter()
        .filter(|f| f.from < end && (f.until > bin.start || f.from >= bin.start))
        .map(|f| f.kind.as_str())
        .collect()
}

/// A comparison's table, its header saying what every row shares.
pub fn comparison(c: &Comparison, load: &str, requests: usize, quota: &str) -> String {
    let mut out = String::new();
    let Some(first) = c.runs.first() else {
        return out;
    };
    let i = &first.inputs;
    let _ = writeln!(
        out,
        "mds simulate --compare: {} policies on {load} ({requests} requests, {:.1} min)",
        c.rows.len(),
        i.duration_seconds / 60.0
    );
    let _ = writeln!(
        out,
        "  world: {} ({}), {} engine, router {}, cold start {:.0} s ± {:.0} %, seed {}, quota {}{}",
        i.profile,
        i.profile_why,
        i.engine.as_str(),
        i.router,
        c.cold_start_seconds,
        i.cold_start_spread * 100.0,
        i.seed,
        if quota.is_empty() { "unlimited" } else { quota },
        stand_in_note(i)
    );
    refused_line(&mut out, i);
    let per_replica: Vec<String> = c
        .targets
        .tokens_per_second
        .iter()
        .map(|(role, tokens)| {
            let q = c.targets.queue_depth.get(role).copied().unwrap_or(0.0);
            format!("{role} {tokens:.0} tokens/s = {q:.1} requests")
        })
        .collect();
    let _ = writeln!(
        out,
        "  per-replica targets (configured): {}",
        per_replica.join(", ")
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
            fluid_caveat(i.engine)
        );
    }
    let other = match i.slo.itl_reading {
        ItlReading::P95 => "mean %",
        ItlReading::Mean => "p95 %",
    };
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
    if let Some(line) = verdict(c) {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "  SLO %: requests within the SLO as above; {other}: the same reading ITL as each request's {}; min %: minutes whose p95 TTFT and p95 inter-token gap meet both; TTFT95/ITL95: p95 ms ({}); /B, /HPA: GPU-hours over Oracle B's and HPA's; over: ready capacity over demand at the knee; short: minutes in deficit; act/h: writes that changed a count per hour; flaps: reversals within max(2 x cold start, 5 min); >quota: seconds holding more GPUs than the quota",
        match i.slo.itl_reading {
            ItlReading::P95 => "mean gap",
            ItlReading::Mean => "p95 gap",
        },
        match i.slo.itl_reading {
            ItlReading::P95 => "ITL over every gap",
            ItlReading::Mean => "ITL over requests' mean gaps",
        }
    );
    out
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

fn tier_name(tier: f64) -> String {
    format!("{} %", tier * 100.0)
}

/// A frontier: per tier, each policy's cheapest GPU-hours that reaches it, cheapest first,
/// then the policies that reach no tier with their best.
pub fn frontier(f: &crate::frontier::Frontier, load: &str, requests: usize, quota: &str) -> String {
    let inputs = &f.inputs;
    let mut out = String::new();
    let tiers: Vec<String> = f.tiers.iter().map(|t| tier_name(t.tier)).collect();
    let _ = writeln!(
        out,
        "mds simulate --frontier {}: {} policies on {load} ({requests} requests, {:.1} min), {} runs",
        tiers.join(", "),
        f.policies.len(),
        inputs.duration_seconds / 60.0,
        f.runs
    );
    let _ = writeln!(
        out,
        "  world: {} ({}), {} engine, router {}, cold start {:.0} s ± {:.0} %, seed {}, quota {}{}",
        inputs.profile,
        inputs.profile_why,
        inputs.engine.as_str(),
        inputs.router,
        f.cold_start_seconds,
        inputs.cold_start_spread * 100.0,
        inputs.seed,
        if quota.is_empty() { "unlimited" } else { quota },
        stand_in_note(inputs)
    );
    refused_line(&mut out, inputs);
    let _ = writeln!(
        out,
        "  SLO: {}, graded per request; {} ({:.1} %) cannot meet it at any scale",
        inputs.slo.describe(),
        count_requests(f.unattainable),
        f.unattainable_share * 100.0
    );
    let per_replica: Vec<String> = f
        .targets
        .tokens_per_second
        .iter()
        .map(|(role, tokens)| {
            let q = f.targets.queue_depth.get(role).copied().unwrap_or(0.0);
            format!("{role} {tokens:.0} tokens/s = {q:.1} requests")
        })
        .collect();
    let _ = writeln!(
        out,
        "  knobs: each policy's one sizing knob at {}..{} times its setting from the configured {}",
        f.grid.min,
        f.grid.max,
        per_replica.join(", ")
    );
    for t in &f.tiers {
        let knee: Vec<String> = t
            .knees
            .iter()
            .map(|(role, k)| format!("{role} {:.0} tokens/s", k.tokens_per_second))
            .collect();
        let bounds = t
            .bounds
            .as_ref()
            .map_or("no bound".into(), crate::run::Bounds::oracles);
        let _ = writeln!(
            out,
            "  at {}: knee {}; {bounds}",
            tier_name(t.tier),
            if knee.is_empty() {
                "none (no load meets it)".into()
            } else {
                knee.join(", ")
            }
        );
    }
    for (i, t) in f.tiers.iter().enumerate() {
        let _ = writeln!(
            out,
            "\n  {:<22} {:>6} {:>5} {:>6} {:>6} {:>5}  knob",
            format!("reaching {}", tier_name(t.tier)),
            "GPU-h",
            "/B",
            "SLO %",
            "act/h",
            "flaps",
        );
        let mut reached: Vec<(&crate::frontier::PolicyFrontier, &crate::frontier::Point)> = f
            .policies
            .iter()
            .filter_map(|p| Some((p, p.tiers.get(i)?.as_ref()?)))
            .collect();
        reached.sort_by(|a, b| a.1.trial.gpu_hours.total_cmp(&b.1.trial.gpu_hours));
        for (p, point) in &reached {
            let c = &point.trial;
            let _ = writeln!(
                out,
                "  {:<22} {:>6.2} {:>5} {:>6} {:>6.1} {:>5}  {}{}",
                p.policy,
                c.gpu_hours,
                times(point.vs_oracle_b),
                percent(c.attainment),
                c.scale_actions_per_hour,
                c.flaps,
                c.knob,
                if point.at_grid_edge {
                    " (grid's edge: widen --frontier-grid)"
                } else {
                    ""
                }
            );
        }
        let missing: Vec<String> = f
            .policies
            .iter()
            .filter(|p| p.tiers.get(i).is_none_or(|t| t.is_none()))
            .map(|p| p.policy.clone())
            .collect();
        if !missing.is_empty() {
            let _ = writeln!(out, "  not reached by: {}", missing.join(", "));
        }
        let ours = reached.iter().find(|(p, _)| p.ours);
        let peer = reached.iter().find(|(p, _)| !p.ours);
        let _ = writeln!(
            out,
            "  verdict: {}",
            match (ours, peer) {
                (Some(o), Some(p)) => format!(
                    "ours {} {:.2} GPU-h, cheapest peer {} {:.2} GPU-h ({:.2}x)",
                    o.0.policy,
                    o.1.trial.gpu_hours,
                    p.0.policy,
                    p.1.trial.gpu_hours,
                    o.1.trial.gpu_hours / p.1.trial.gpu_hours.max(1e-9)
                ),
                (Some(o), None) => format!(
                    "ours {} {:.2} GPU-h; no peer reaches it",
                    o.0.policy, o.1.trial.gpu_hours
                ),
                (None, Some(p)) => format!(
                    "no algorithm of ours reaches it; cheapest peer {} {:.2} GPU-h",
                    p.0.policy, p.1.trial.gpu_hours
                ),
                (None, None) => {
                    let best = f
                        .policies
                        .iter()
                        .filter_map(|p| Some((p, p.best.as_ref()?.attainment?)))
                        .max_by(|a, b| a.1.total_cmp(&b.1));
                    format!(
                        "no policy reaches it{}; {}",
                        best.map_or(String::new(), |(p, a)| format!(
                            " (the best: {} {:.1} %)",
                            p.policy,
                            a * 100.0
                        )),
                        t.bounds
                            .as_ref()
                            .map_or("no bound".into(), crate::run::Bounds::oracles)
                    )
                }
            }
        );
    }
    let unreached: Vec<&crate::frontier::PolicyFrontier> = f
        .policies
        .iter()
        .filter(|p| p.tiers.iter().all(Option::is_none))
        .collect();
    if !unreached.is_empty() {
        let _ = writeln!(
            out,
            "\n  reaching no tier (best attainment, at the cheapest setting that got it):"
        );
        for p in unreached {
            if let Some(b) = &p.best {
                let _ = writeln!(
                    out,
                    "  {:<22} {:>6} % at {:.2} GPU-h, {}",
                    p.policy,
                    percent(b.attainment),
                    b.gpu_hours,
                    b.knob
                );
            }
        }
        let ceiling = (1.0 - f.unattainable_share) * 100.0;
        let most: Vec<String> = f
            .max_replicas
            .iter()
            .map(|(role, n)| format!("{role} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "  what bounds them: {ceiling:.1} % of requests can meet the SLO at any scale; maxReplicas {}; quota {}; the rest is each policy's own sizing",
            most.join(", "),
            if quota.is_empty() { "unlimited" } else { quota }
        );
    }
    let _ = writeln!(
        out,
        "  GPU-h: the cheapest setting reaching the tier; /B: over that tier's Oracle B (the cheapest replicas that reach the tier on the engine's curves, started a cold start ahead); SLO %: its attainment; act/h, flaps: at that setting"
    );
    out
}

/// A header's word on the requests the profile refuses, if any.
fn refused_line(out: &mut String, i: &Inputs) {
    if let Some(r) = &i.refusals {
        let _ = writeln!(out, "  refused: {}", r.describe(&i.profile));
    }
}

/// The benchmark means' row.
fn means(m: &crate::report::Means) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |s| format!("{:.1} ms", s * 1000.0));
    format!(
        "TTFT {}, TPOT {}, output {} (first arrival to last completion)",
        ms(m.ttft_seconds),
        ms(m.tpot_seconds),
        m.output_tokens_per_second
            .map_or("-".into(), |t| format!("{t:.0} tokens/s"))
    )
}

/// The oracles come from request-level curves; the fluid engine grades step means, more
/// leniently, so a fluid run can come in under them.
fn fluid_caveat(engine: crate::run::EngineModel) -> &'static str {
    match engine {
        crate::run::EngineModel::Fluid => {
            "; sized on the request engine: the fluid engine grades step means, so a fluid run may come in under them"
        }
        crate::run::EngineModel::Request => "",
    }
}

/// What the world line adds when the stand-in GPUStack departs from the revisions examined.
fn stand_in_note(i: &Inputs) -> String {
    i.pd_retirements
        .map_or(String::new(), |p| format!(", P/D retirements {p}"))
}
