//! What `mds simulate` prints: a run's summary and its minutes here, a comparison's table and
//! a frontier in their own files. The command writes these strings out; the rules of what
//! they say live here, beside the reports they read.

use std::fmt::Write as _;

use crate::report::{Bin, Percentiles};
use crate::run::{Inputs, RunReport};
use crate::slo::ItlReading;

mod comparison;
mod frontier;

pub use comparison::comparison;
pub use frontier::frontier;

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

/// One labelled line of a run's summary.
fn row(out: &mut String, label: &str, value: String) {
    let _ = writeln!(out, "  {label:<20}{value}");
}

/// The world line every header carries: profile, engine, router, cold start, seed, quota.
fn world_line(out: &mut String, i: &Inputs, cold_start_seconds: f64, quota: &str) {
    let _ = writeln!(
        out,
        "  world: {} ({}), {} engine, router {}, cold start {:.0} s ± {:.0} %, seed {}, quota {}{}",
        i.profile,
        i.profile_why,
        i.engine.as_str(),
        i.router,
        cold_start_seconds,
        i.cold_start_spread * 100.0,
        i.seed,
        quota,
        stand_in_note(i)
    );
    let _ = writeln!(out, "  hardware: {}", i.hardware.summary);
}

/// A `--quota` as the headers say it: `unlimited` when none was given.
pub(crate) fn quota_or_unlimited(quota: &str) -> &str {
    if quota.is_empty() { "unlimited" } else { quota }
}

/// Each role's configured per-replica target, in tokens/s and the queue depth it makes.
pub(crate) fn per_replica_targets(t: &crate::compare::TargetsReport) -> Vec<String> {
    t.tokens_per_second
        .iter()
        .map(|(role, tokens)| {
            let q = t.queue_depth.get(role).copied().unwrap_or(0.0);
            format!("{role} {tokens:.0} tokens/s = {q:.1} requests")
        })
        .collect()
}

/// One run's summary, `requests` being the requests the load offered.
pub fn summary(report: &RunReport, requests: usize) -> String {
    let i = &report.inputs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mds simulate: scaler {} on {} ({requests} requests, {:.1} min)",
        i.scaler,
        i.load,
        i.duration_seconds / 60.0
    );
    world_line(&mut out, i, i.cold_start_seconds, &i.quota_text());
    summary_service(&mut out, report);
    if let Some(b) = &report.bounds {
        summary_bounds(&mut out, report, b);
    }
    summary_scaling(&mut out, report);
    out
}

/// The summary's rows on the requests: their fate, the SLO and its attainment, the
/// latencies, the means and the GPU-hours spent.
fn summary_service(out: &mut String, report: &RunReport) {
    let i = &report.inputs;
    let s = &report.summary;
    let t = &s.totals;
    row(
        out,
        "requests",
        format!(
            "{:.0} (finished {:.0}, rejected {:.0}, never served {:.0})",
            t.requests, s.finished, t.rejected, t.never_served
        ),
    );
    if let Some(r) = &i.refusals {
        row(out, "refused", r.describe(&i.profile));
    }
    row(out, "SLO", i.slo.describe());
    let (other, other_name) = other_reading(t, i.slo.itl_reading);
    row(
        out,
        "SLO attainment",
        format!(
            "{} ({} % reading ITL as {other_name})",
            t.attainment
                .map_or("-".into(), |a| format!("{:.1} %", a * 100.0)),
            percent(other),
        ),
    );
    row(out, "unattainable", unattainable(t));
    row(
        out,
        "minutes within SLO",
        s.window_attainment.map_or("-".into(), |a| {
            format!(
                "{:.1} % (p95 TTFT and p95 ITL of each minute with requests)",
                a * 100.0
            )
        }),
    );
    row(out, "TTFT p50/p95/p99", percentiles(&t.ttft));
    row(
        out,
        "ITL p50/p95/p99",
        format!("{} (every gap between output tokens)", percentiles(&t.itl)),
    );
    row(
        out,
        "TPOT p50/p95/p99",
        format!("{} (each request's mean gap)", percentiles(&t.tpot)),
    );
    row(out, "means", means(&s.means));
    row(out, "GPU-hours", format!("{:.2}", t.gpu_hours));
}

/// The summary's rows on the bounds: each role's knee, and the run's GPU-hours against the
/// oracles' and static peak's.
fn summary_bounds(out: &mut String, report: &RunReport, b: &crate::run::Bounds) {
    let t = &report.summary.totals;
    row(out, "knee", knees(b));
    let oracles = match b.oracle_b_gpu_hours {
        Some(ob) => format!(
            "{} at {} % (this run {:.2}x Oracle B), ",
            b.oracles(),
            b.goal * 100.0,
            t.gpu_hours / ob.max(1e-9)
        ),
        None => format!("{}; ", b.oracles()),
    };
    row(
        out,
        "GPU-hours bounds",
        format!(
            "{oracles}static peak {:.2} GPU-h{}",
            b.static_peak_gpu_hours,
            curves_engine_note(report.inputs.engine)
        ),
    );
}

/// The summary's rows on the scaling: replicas per role, scale actions, unadmitted growth,
/// the metrics, the faults applied and the invariants.
fn summary_scaling(out: &mut String, report: &RunReport) {
    let s = &report.summary;
    let t = &s.totals;
    for (role, r) in &s.replica_stats {
        row(
            out,
            &format!("replicas {role}"),
            format!("min {}, max {}, mean {:.2}", r.min, r.max, r.mean),
        );
    }
    row(
        out,
        "scale actions",
        format!(
            "{} ({:.1} per hour), flaps {}",
            t.scale_actions, s.scale_actions_per_hour, t.flaps
        ),
    );
    for (i, sentence) in report.decided.iter().enumerate() {
        row(
            out,
            if i == 0 { "decided by" } else { "" },
            sentence.clone(),
        );
    }
    row(
        out,
        "unadmitted growth",
        format!("{:.0} s", t.unadmitted_seconds),
    );
    if let Some(m) = &report.metrics {
        metrics(out, m);
    }
    for (i, fault) in report.faults.iter().enumerate() {
        row(out, if i == 0 { "faults" } else { "" }, fault.describe());
    }
    row(
        out,
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

/// Under the fluid engine the knees and the oracles come from its own curves: the header says
/// so, since they differ from the request engine's for the same load.
fn curves_engine_note(engine: crate::run::EngineModel) -> &'static str {
    match engine {
        crate::run::EngineModel::Fluid => {
            "; on the fluid engine's curves (each step's mean request and its spread; the request engine's differ)"
        }
        crate::run::EngineModel::Request => "",
    }
}

/// What the world line adds when the stand-in GPUStack departs from the revisions examined.
fn stand_in_note(i: &Inputs) -> String {
    i.pd_retirements
        .map_or(String::new(), |p| format!(", P/D retirements {p}"))
}
