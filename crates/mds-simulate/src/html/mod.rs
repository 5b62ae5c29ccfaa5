//! The simulation report people look at: one self-contained HTML page (inline CSS and SVG, no
//! script, nothing fetched), readable on a laptop screen and in print. Demand against ready
//! capacity, replicas per role with the scale actions marked, p95 TTFT and ITL against their
//! SLOs, and across policies attainment against GPU-hours with Oracle B marked; then the
//! summary table and the run's inputs.

mod frontier;
mod styles;
mod svg;

pub use frontier::frontier_page;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::compare::Comparison;
use crate::run::RunReport;
use crate::text::{ms, per_replica_targets, percent, quota_or_unlimited, times as ratio};
use svg::{Dot, LineChart, PALETTE, Series, escape};

/// What the page shows.
pub struct Page<'a> {
    /// The load's description.
    pub load: &'a str,
    pub requests: usize,
    /// The quota as the command states it (empty: unlimited).
    pub quota: &'a str,
    /// One comparison per cold start; the plots show the first.
    pub comparisons: &'a [Comparison],
    /// The policy the time plots follow (the scaler under test); `None`: our first row.
    pub featured: Option<&'a str>,
}

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111; margin: 24px auto; max-width: 980px; padding: 0 16px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 6px; }
p.meta { color: #444; margin: 0 0 12px; }
figure { margin: 12px 0 20px; break-inside: avoid; } figcaption { color: #444; font-size: 12.5px; }
svg.chart { width: 100%; height: auto; background: #fff; }
svg .title { font-size: 13px; font-weight: 600; } svg .tick, svg .legend, svg .label { font-size: 10.5px; fill: #333; }
svg .axis { font-size: 11.5px; fill: #222; } svg .grid { stroke: #e4e4e4; stroke-width: 1; }
svg .frame { fill: none; stroke: #888; } svg .reference { stroke: #b00; stroke-dasharray: 6 4; stroke-width: 1.2; }
svg .mark { stroke-width: 1.4; opacity: .8; } svg .leader { stroke: #999; stroke-width: .8; } svg .band { fill: #f0c000; opacity: .18; } svg .reference-label { fill: #b00; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 6px; text-align: right; } th:first-child, td:first-child { text-align: left; }
tr.ours td { font-weight: 600; } dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 13px; }
dt { color: #555; } dd { margin: 0; }
@media print { body { margin: 0; max-width: none; } h2 { break-after: avoid; } }
"#;

/// Records on `body` what each plot drew (its series' and dots' union box, in pixels), and
/// which of its texts overlap another or leave the plot, so a browser test can tell a drawn
/// plot from an empty one and a legible one from a crowded one; the page renders without it.
const DRAWN: &str = r#"addEventListener('load', () => {
  const charts = [...document.querySelectorAll('svg.chart')];
  document.body.dataset.overlaps = charts.map(svg => {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => [t.textContent, t.getBoundingClientRect()]);
    const bad = [];
    texts.forEach(([a, r], i) => {
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1) bad.push(`${a} leaves the plot`);
      for (const [b, q] of texts.slice(i + 1)) {
        const w = Math.min(r.right, q.right) - Math.max(r.left, q.left), h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 1 && h > 1.5) bad.push(`${a} over ${b}`);
      }
    });
    return bad.map(b => `${svg.id}: ${b};`).join('');
  }).join('');
  document.body.dataset.drawn = charts.map(svg => {
    const els = [...svg.querySelectorAll('.series, .dot')];
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const r of els.map(e => e.getBoundingClientRect())) {
      x0 = Math.min(x0, r.left); y0 = Math.min(y0, r.top); x1 = Math.max(x1, r.right); y1 = Math.max(y1, r.bottom);
    }
    const w = els.length ? Math.round(x1 - x0) : 0, h = els.length ? Math.round(y1 - y0) : 0;
    return `${svg.id}:${els.length}:${w}x${h};`;
  }).join('');
});"#;

/// The run the time plots show: the featured policy, else our first row, else the first.
fn featured<'c>(c: &'c Comparison, name: Option<&str>) -> Option<&'c RunReport> {
    let find = |pick: &dyn Fn(&str) -> bool| {
        c.runs
            .iter()
            .zip(&c.rows)
            .find(|(_, row)| pick(&row.policy))
            .map(|(run, _)| run)
    };
    name.and_then(|n| find(&|p| p == n))
        .or_else(|| find(&|p| p.starts_with("mds")))
        .or_else(|| c.runs.first())
}

/// Minutes since the start of each bin's end (plots put a bin's value at its end).
fn minute(start: f64, seconds: f64) -> f64 {
    (start + seconds) / 60.0
}

/// A role's token demand per minute of the trace, as steps ending at each minute.
fn demand_series(role: &str, demand: &[f64], colour: &'static str) -> Series {
    Series {
        name: format!("{role} demand"),
        colour,
        dash: styles::SOLID,
        steps: true,
        points: demand
            .iter()
            .enumerate()
            .map(|(m, d)| (m as f64 + 1.0, *d))
            .collect(),
    }
}

fn demand_chart(c: &Comparison, run: &RunReport) -> String {
    let mut series = Vec::new();
    for (i, (role, demand)) in c.demand.iter().enumerate() {
        series.push(demand_series(
            role,
            demand,
            PALETTE[(2 * i) % PALETTE.len()],
        ));
        let capacity = c
            .targets
            .tokens_per_second
            .get(role)
            .copied()
            .unwrap_or(0.0);
        series.push(Series {
            name: format!("{role} ready capacity"),
            colour: PALETTE[(2 * i + 1) % PALETTE.len()],
            dash: styles::DASHED,
            steps: true,
            points: run
                .bins
                .iter()
                .map(|b| {
                    let ready = b.ready.get(role).copied().unwrap_or(0);
                    (minute(b.start, b.seconds), f64::from(ready) * capacity)
                })
                .collect(),
        });
    }
    LineChart::over_minutes(
        "demand",
        format!("Demand against ready capacity ({})", run.inputs.scaler),
        "tokens/s",
        series,
    )
    .render()
}

/// Predictive's forecasts against the demand they forecast: each forecast drawn at the time
/// it was for (its horizon after the pass that made it), beside the trace's demand per minute
/// and the demand the pass read. `None` when the run made no forecast.
fn forecast_chart(c: &Comparison, run: &RunReport) -> Option<(String, f64)> {
    let roles: std::collections::BTreeSet<&String> =
        run.passes.iter().flat_map(|p| p.forecasts.keys()).collect();
    if roles.is_empty() {
        return None;
    }
    let end = run.inputs.duration_seconds / 60.0;
    let mut horizon = 0.0_f64;
    let mut series = Vec::new();
    for (i, role) in roles.iter().enumerate() {
        if let Some(demand) = c.demand.get(*role) {
            series.push(demand_series(
                role,
                demand,
                PALETTE[(2 * i) % PALETTE.len()],
            ));
        }
        let made: Vec<(f64, &crate::Forecast)> = run
            .passes
            .iter()
            .filter_map(|p| Some((p.t, p.forecasts.get(*role)?)))
            .collect();
        horizon = made
            .iter()
            .map(|(_, f)| f.horizon_seconds)
            .fold(horizon, f64::max);
        series.push(Series {
            name: format!("{role} read"),
            colour: PALETTE[7],
            dash: styles::DASHED,
            steps: false,
            points: made.iter().map(|(t, f)| (t / 60.0, f.demand)).collect(),
        });
        series.push(Series {
            name: format!("{role} forecast"),
            colour: PALETTE[(2 * i + 1) % PALETTE.len()],
            dash: styles::SOLID,
            steps: false,
            // Forecasts for times past the run's end have nothing to be read against.
            points: made
                .iter()
                .map(|(t, f)| ((t + f.horizon_seconds) / 60.0, f.value))
                .filter(|(m, _)| *m <= end)
                .collect(),
        });
    }
    let chart = LineChart::over_minutes(
        "forecast",
        format!("Forecast against demand ({})", run.inputs.scaler),
        "tokens/s",
        series,
    )
    .render();
    Some((chart, horizon))
}

/// The fault windows of a run, in minutes, for shading.
fn fault_bands(run: &RunReport) -> Vec<(f64, f64, String)> {
    run.faults
        .iter()
        .map(|f| (f.from / 60.0, f.until / 60.0, f.spec.clone()))
        .collect()
}

fn replicas_chart(run: &RunReport) -> String {
    let roles: Vec<&String> = run.summary.replica_stats.keys().collect();
    let mut series = Vec::new();
    for (i, role) in roles.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let counts = |ready: bool| -> Vec<(f64, f64)> {
            std::iter::once((
                0.0,
                run.passes
                    .first()
                    .and_then(|p| p.replicas.get(*role))
                    .copied()
                    .unwrap_or(0) as f64,
            ))
            .chain(run.bins.iter().map(|b| {
                let map = if ready { &b.ready } else { &b.replicas };
                (
                    minute(b.start, b.seconds),
                    f64::from(map.get(*role).copied().unwrap_or(0)),
                )
            }))
            .collect()
        };
        series.push(Series {
            name: format!("{role} target"),
            colour,
            dash: styles::SOLID,
            steps: true,
            points: counts(false),
        });
        series.push(Series {
            name: format!("{role} ready"),
            colour,
            dash: styles::DASHED,
            steps: true,
            points: counts(true),
        });
    }
    let marks = run
        .passes
        .iter()
        .filter(|p| {
            p.write
                .as_ref()
                .is_some_and(|(kind, landed)| *landed && kind != "bind")
        })
        .map(|p| (p.t / 60.0, PALETTE[6]))
        .collect();
    LineChart {
        marks,
        bands: fault_bands(run),
        ..LineChart::over_minutes(
            "replicas",
            format!(
                "Replicas per role ({}; ticks at the bottom: scale actions)",
                run.inputs.scaler
            ),
            "replicas",
            series,
        )
    }
    .render()
}

fn latency_chart(c: &Comparison, itl: bool, featured_name: Option<&str>) -> String {
    let slo = c
        .runs
        .first()
        .map(|r| {
            if itl {
                r.inputs.slo.itl_seconds
            } else {
                r.inputs.slo.ttft_seconds
            }
        })
        .unwrap_or(0.0);
    // The scaler under test, our other runs and HPA, so the page stays legible with many
    // policies.
    let under_test = featured(c, featured_name);
    let shown: Vec<&RunReport> = c
        .runs
        .iter()
        .zip(&c.rows)
        .filter(|(run, row)| {
            under_test.is_some_and(|t| std::ptr::eq(t, *run))
                || row.policy.starts_with("mds")
                || row.policy == "hpa"
        })
        .map(|(run, _)| run)
        .take(MOST_LINES)
        .collect();
    // Objectives of their own per request (an allowance, prompt classes, a scale): each
    // request's TTFT is drawn as a share of its own objective, against 100 %.
    let own = !itl
        && c.runs
            .first()
            .is_some_and(|r| r.inputs.slo.objective_varies())
        && shown
            .iter()
            .any(|r| r.bins.iter().any(|b| !b.ttft_of_objective.is_empty()));
    // Ours in our colour, each peer its own colour and dash, as on every page.
    let drawn = styles::styles(
        &shown
            .iter()
            .map(|r| r.inputs.scaler.starts_with("mds"))
            .collect::<Vec<_>>(),
    );
    let series = shown
        .iter()
        .zip(drawn)
        .map(|(run, style)| Series {
            name: run.inputs.scaler.clone(),
            colour: style.colour,
            dash: style.dash,
            steps: false,
            points: run
                .bins
                .iter()
                .filter_map(|b| {
                    let (p, unit) = match (itl, own) {
                        (true, _) => (b.itl.p95, 1000.0),
                        (false, true) => (b.ttft_of_objective.p95, 100.0),
                        (false, false) => (b.ttft.p95, 1000.0),
                    };
                    Some((minute(b.start, b.seconds), p? * unit))
                })
                .collect(),
        })
        .collect();
    let name = if itl { "ITL" } else { "TTFT" };
    let (reference, title, axis) = if own {
        (
            ("each request's own objective".to_string(), 100.0),
            "p95 of each request's TTFT over its own objective, per minute".to_string(),
            "p95 TTFT (% of its objective, log scale)".to_string(),
        )
    } else {
        (
            (format!("SLO {:.0} ms", slo * 1000.0), slo * 1000.0),
            format!("p95 {name} per minute against the SLO"),
            format!("p95 {name} (ms, log scale)"),
        )
    };
    LineChart {
        references: vec![reference],
        log_y: true,
        bands: shown.first().map(|r| fault_bands(r)).unwrap_or_default(),
        ..LineChart::over_minutes(&name.to_lowercase(), title, &axis, series)
    }
    .render()
}

/// The names the policies chart's dots do not show: behind each shared dot's "+N" (first
/// name -> the others), and dots left unlabelled for want of room.
struct Unshown {
    shared: BTreeMap<String, Vec<String>>,
    unlabelled: Vec<String>,
}

/// More lines than this make a per-minute chart unreadable.
const MOST_LINES: usize = 8;

/// The policies chart, and the names its dots do not show.
fn policies_chart(c: &Comparison) -> (String, Unshown) {
    // Policies that land on the same spot share one dot, labelled by the first and a count.
    let mut dots: Vec<(Dot, usize)> = Vec::new();
    let mut shared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let drawn = styles::styles(
        &c.rows
            .iter()
            .map(|r| r.policy.starts_with("mds"))
            .collect::<Vec<_>>(),
    );
    for (r, style) in c.rows.iter().zip(drawn) {
        let Some(attainment) = r.attainment else {
            continue;
        };
        let (x, y) = (r.gpu_hours, attainment * 100.0);
        let ours = r.policy.starts_with("mds");
        match dots
            .iter_mut()
            .find(|(d, _)| d.ours == ours && (d.x - x).abs() < 0.02 && (d.y - y).abs() < 0.15)
        {
            Some((d, n)) => {
                *n += 1;
                shared
                    .entry(d.name.clone())
                    .or_default()
                    .push(r.policy.clone());
            }
            None => dots.push((
                Dot {
                    name: r.policy.clone(),
                    x,
                    y,
                    ours,
                    colour: style.colour,
                },
                1,
            )),
        }
    }
    let dots: Vec<Dot> = dots
        .into_iter()
        .map(|(mut d, n)| {
            if n > 1 {
                d.name = format!("{} +{}", d.name, n - 1);
            }
            d
        })
        .collect();
    let (chart, unlabelled) = svg::scatter(
        "policies",
        "SLO attainment against GPU-hours, every policy",
        &dots,
        c.bounds
            .as_ref()
            .and_then(|b| b.oracle_b_gpu_hours)
            .map(|b| (format!("Oracle B {b:.2}"), b)),
    );
    (chart, Unshown { shared, unlabelled })
}

/// The caption of the policies chart, true for this run: what Oracle A and B mean here, and
/// the names behind each "+N".
fn policies_caption(c: &Comparison, unshown: &Unshown) -> String {
    let mut caption = String::from(
        "Up and to the left is better; ours in blue, each peer in a colour of its own. Each policy runs at one setting here; --frontier compares them at their best.",
    );
    if let Some(b) = &c.bounds
        && let (Some(a), Some(ob)) = (b.oracle_a_gpu_hours, b.oracle_b_gpu_hours)
    {
        let _ = write!(
            caption,
            " The red line is Oracle B, {ob:.2} GPU-h: a clairvoyant scaler that pays for its cold starts, at the run's goal of {:.0} %. A policy can reach the goal left of it by paying fewer cold starts, but none reaches it for less than Oracle A, {a:.2} GPU-h.",
            b.goal * 100.0
        );
    }
    for (first, others) in &unshown.shared {
        let _ = write!(
            caption,
            " {} shares its dot with {}.",
            escape(first),
            escape(&others.join(", "))
        );
    }
    if !unshown.unlabelled.is_empty() {
        let _ = write!(
            caption,
            " Unlabelled for want of room (their names show on hover): {}.",
            escape(&unshown.unlabelled.join(", "))
        );
    }
    caption
}

fn table(out: &mut String, c: &Comparison) {
    out.push_str("<table><thead><tr><th>policy</th><th>SLO %</th><th>minutes %</th><th>TTFT p95 ms</th><th>ITL p95 ms</th><th>GPU-h</th><th>/ Oracle B</th><th>/ HPA</th><th>actions/h</th><th>flaps</th><th>s above quota</th><th>violations</th></tr></thead><tbody>");
    for r in &c.rows {
        let _ = write!(
            out,
            "<tr{cls}><td>{p}</td><td>{a}</td><td>{w}</td><td>{t}</td><td>{i}</td><td>{g:.2}</td><td>{b}</td><td>{h}</td><td>{act:.1}</td><td>{f}</td><td>{q:.0}</td><td>{v}</td></tr>",
            cls = if r.policy.starts_with("mds") {
                r#" class="ours""#
            } else {
                ""
            },
            p = escape(&r.policy),
            a = percent(r.attainment),
            w = percent(r.window_attainment),
            t = ms(r.ttft_p95_seconds),
            i = ms(r.itl_p95_seconds),
            g = r.gpu_hours,
            b = ratio(r.vs_oracle_b),
            h = ratio(r.vs_hpa),
            act = r.scale_actions_per_hour,
            f = r.flaps,
            q = r.above_budget_seconds,
            v = r.violations,
        );
    }
    out.push_str("</tbody></table>");
}

fn inputs(out: &mut String, page: &Page, c: &Comparison) {
    let Some(run) = c.runs.first() else {
        return;
    };
    let i = &run.inputs;
    out.push_str("<dl>");
    let mut row = |k: &str, v: String| {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    let scaler = featured(c, page.featured).map_or_else(String::new, |r| r.inputs.scaler.clone());
    row("scaler", scaler);
    world_rows(
        &mut row,
        i,
        &World {
            load: page.load,
            requests: page.requests,
            quota: page.quota,
            cold_start_seconds: c.cold_start_seconds,
        },
    );
    row(
        "per-replica targets",
        per_replica_targets(&c.targets).join(", "),
    );
    if let Some(b) = &c.bounds {
        row(
            "bounds",
            format!(
                "at {} %: {}, static peak {:.2} GPU-h",
                b.goal * 100.0,
                b.oracles(),
                b.static_peak_gpu_hours
            ),
        );
    }
    row("simulated", format!("{:.1} min", i.duration_seconds / 60.0));
    row("version", format!("mds {}", i.version));
    out.push_str("</dl>");
}

/// What a page's runs shared besides the inputs every run records.
pub(crate) struct World<'a> {
    pub load: &'a str,
    pub requests: usize,
    pub quota: &'a str,
    pub cold_start_seconds: f64,
}

/// The rows every page's inputs start with: the target, the trace, the profile and its
/// hardware, the engine and router, the cold start, the seed, the SLO as read and the quota.
pub(crate) fn world_rows(row: &mut dyn FnMut(&str, String), i: &crate::run::Inputs, w: &World) {
    row("target", i.target.clone());
    row("trace", format!("{} ({} requests)", w.load, w.requests));
    row("profile", format!("{} ({})", i.profile, i.profile_why));
    row("hardware", i.hardware.summary.clone());
    if !i.hardware.tables.is_empty() {
        row("kernel tables", i.hardware.tables.clone());
    }
    row(
        "engine",
        format!("{}, router {}", i.engine.as_str(), i.router),
    );
    row(
        "cold start",
        format!(
            "{:.0} s ± {:.0} %",
            w.cold_start_seconds,
            i.cold_start_spread * 100.0
        ),
    );
    row("seed", i.seed.to_string());
    row("SLO", i.slo.describe());
    row("quota", quota_or_unlimited(w.quota).to_string());
}

/// The whole page.
pub fn page(page: &Page) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>mds simulate: {}</title><style>{STYLE}</style></head><body>",
        escape(page.load)
    );
    let Some(first) = page.comparisons.first() else {
        out.push_str("<p>No run.</p></body></html>");
        return out;
    };
    let _ = write!(
        out,
        "<h1>mds simulate: {} on {}</h1><p class=\"meta\">{} requests · cold start {:.0} s · the plots show the first cold start; tables follow for each</p>",
        if first.rows.len() == 1 {
            escape(&first.rows[0].policy)
        } else {
            format!("{} policies", first.rows.len())
        },
        escape(page.load),
        page.requests,
        first.cold_start_seconds
    );
    if let Some(run) = featured(first, page.featured) {
        let _ = write!(
            out,
            "<h2>Demand and capacity</h2><figure>{}<figcaption>Token demand per minute of the trace as the role counts it (cache-missed prompt tokens for prefill, generated tokens for decode, both for a server) against ready replicas times the per-replica capacity.</figcaption></figure>",
            demand_chart(first, run)
        );
        if let Some((chart, horizon)) = forecast_chart(first, run) {
            let error = run
                .metrics
                .as_ref()
                .and_then(|m| Some((m.forecast_smape?, m.last_value_smape?)))
                .map(|(f, l)| {
                    format!(
                        " sMAPE at the horizon: {:.1} % (the last value read: {:.1} %).",
                        f * 100.0,
                        l * 100.0
                    )
                })
                .unwrap_or_default();
            let _ = write!(
                out,
                "<h2>Forecast</h2><figure>{chart}<figcaption>Each forecast is drawn at the time it was for, {horizon:.0} s after the pass that made it, against the trace's demand per minute (solid steps) and the demand the pass read (grey, dashed): a forecast that leads the demand's rises buys capacity a cold start early.{error}</figcaption></figure>"
            );
        }
        let faults = if run.faults.is_empty() {
            ""
        } else {
            " Shaded: the windows of the faults injected (--fault)."
        };
        let _ = write!(
            out,
            "<h2>Replicas</h2><figure>{}<figcaption>The count the scaler wrote (solid) and the replicas ready (dashed); the gap is cold start and admission.{faults}</figcaption></figure>",
            replicas_chart(run)
        );
    }
    let _ = write!(
        out,
        "<h2>Latency</h2><figure>{}</figure><figure>{}<figcaption>p95 of each minute: TTFT over its requests, ITL over every gap between output tokens as the engine's histogram records it (the requests' mean gaps with --slo-itl-mode mean); our runs in blue, HPA's in its own colour, dashed; the red line is the SLO.</figcaption></figure>",
        latency_chart(first, false, page.featured),
        latency_chart(first, true, page.featured)
    );
    let (chart, unshown) = policies_chart(first);
    let _ = write!(
        out,
        "<h2>Every policy</h2><figure>{chart}<figcaption>{}</figcaption></figure>",
        policies_caption(first, &unshown)
    );
    for c in page.comparisons {
        let _ = write!(
            out,
            "<h2>Summary at a {:.0} s cold start</h2>",
            c.cold_start_seconds
        );
        table(&mut out, c);
    }
    out.push_str("<h2>Inputs</h2>");
    inputs(&mut out, page, first);
    let _ = writeln!(out, "<script>{DRAWN}</script></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained_and_escapes_what_it_shows() {
        let page = page(&Page {
            load: "a <trace> & more",
            requests: 3,
            quota: "",
            comparisons: &[],
            featured: None,
        });
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("a &lt;trace&gt; &amp; more"));
        assert!(!page.contains("<trace>"));
        assert!(page.contains("No run."));
    }
}
