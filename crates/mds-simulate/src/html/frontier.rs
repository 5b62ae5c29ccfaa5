//! The frontier's page: per tier, each policy's cheapest trial drawn and tabled against the
//! bounds.

use std::fmt::Write as _;

use super::styles;
use super::svg::{LineChart, PALETTE, Series, escape};
use super::{DRAWN, STYLE, World, world_rows};
use crate::roster::Knob;
use crate::text::{per_replica_targets, percent, quota_or_unlimited, times as ratio};

/// One policy's frontier as a line: its trials that no cheaper trial beats on attainment,
/// by GPU-hours.
fn frontier_line(p: &crate::frontier::PolicyFrontier) -> Vec<(f64, f64)> {
    let mut trials: Vec<&crate::frontier::Trial> = p
        .trials
        .iter()
        .filter(|t| t.violations == 0 && t.attainment.is_some())
        .collect();
    trials.sort_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
    let mut best = f64::NEG_INFINITY;
    let mut line = Vec::new();
    for t in trials {
        let a = t.attainment.unwrap_or(0.0) * 100.0;
        if a > best {
            best = a;
            line.push((t.gpu_hours, a));
        }
    }
    line
}

fn frontier_chart(f: &crate::frontier::Frontier, index: usize) -> String {
    let drawn = styles::styles(&f.policies.iter().map(|p| p.ours).collect::<Vec<_>>());
    let series: Vec<Series> = f
        .policies
        .iter()
        .zip(drawn)
        .map(|(p, style)| Series {
            name: p.policy.clone(),
            colour: style.colour,
            dash: style.dash,
            steps: false,
            points: frontier_line(p),
        })
        .collect();
    // The window: from ten points under the lowest tier to 100 %, and over the GPU-hours
    // where some policy's frontier crosses it, up to twice the dearest tier's cheapest.
    let floor = f
        .tiers
        .first()
        .map_or(0.0, |t| (t.tier * 100.0 - 10.0).max(0.0));
    let inside: Vec<f64> = series
        .iter()
        .flat_map(|s| &s.points)
        .filter(|(_, y)| *y >= floor)
        .map(|(x, _)| *x)
        .collect();
    let cheapest_top = f
        .policies
        .iter()
        .filter_map(|p| p.tiers.last()?.as_ref().map(|t| t.trial.gpu_hours))
        .fold(f64::INFINITY, f64::min);
    let x_lo = inside.iter().copied().fold(f64::INFINITY, f64::min);
    let x_hi = inside
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .min(if cheapest_top.is_finite() {
            2.0 * cheapest_top
        } else {
            f64::INFINITY
        });
    let window =
        (x_lo.is_finite() && x_hi > x_lo).then_some(((x_lo * 0.95, x_hi * 1.02), (floor, 100.0)));
    let clip = |s: Series| Series {
        points: s
            .points
            .into_iter()
            .filter(|(x, y)| *y >= floor && window.is_none_or(|w| *x <= w.0.1))
            .collect(),
        ..s
    };
    LineChart {
        id: format!("frontier-{index}"),
        title: format!(
            "SLO attainment against GPU-hours, each policy's frontier ({:.0} s cold start)",
            f.cold_start_seconds
        ),
        x_label: "GPU-hours".into(),
        y_label: "requests within the SLO (%)".into(),
        series: series.into_iter().map(clip).collect(),
        references: f
            .tiers
            .iter()
            .map(|t| (format!("{} %", t.tier * 100.0), t.tier * 100.0))
            .collect(),
        marks: f
            .tiers
            .iter()
            .filter_map(|t| Some((t.bounds.as_ref()?.oracle_b_gpu_hours?, PALETTE[6])))
            .collect(),
        log_y: false,
        bands: Vec::new(),
        window,
        end_labels: true,
    }
    .render()
}

fn frontier_table(out: &mut String, f: &crate::frontier::Frontier) {
    for (i, t) in f.tiers.iter().enumerate() {
        let _ = write!(
            out,
            "<h3>Reaching {} %</h3><table><thead><tr><th>policy</th><th>GPU-h</th><th>/ Oracle B</th><th>SLO %</th><th>actions/h</th><th>flaps</th><th>knob</th></tr></thead><tbody>",
            t.tier * 100.0
        );
        let mut rows: Vec<(&crate::frontier::PolicyFrontier, &crate::frontier::Point)> = f
            .policies
            .iter()
            .filter_map(|p| Some((p, p.tiers.get(i)?.as_ref()?)))
            .collect();
        rows.sort_by(|a, b| a.1.trial.gpu_hours.total_cmp(&b.1.trial.gpu_hours));
        for (p, point) in rows {
            let c = &point.trial;
            let _ = write!(
                out,
                "<tr{cls}><td>{name}</td><td>{g:.2}</td><td>{b}</td><td>{a}</td><td>{act:.1}</td><td>{fl}</td><td>{k}</td></tr>",
                cls = if p.ours { r#" class="ours""# } else { "" },
                name = escape(&p.policy),
                g = c.gpu_hours,
                b = ratio(point.vs_oracle_b),
                a = percent(c.attainment),
                act = c.scale_actions_per_hour,
                fl = c.flaps,
                k = escape(&c.knob),
            );
        }
        out.push_str("</tbody></table>");
        let missing: Vec<&str> = f
            .policies
            .iter()
            .filter(|p| p.tiers.get(i).is_none_or(Option::is_none))
            .map(|p| p.policy.as_str())
            .collect();
        if !missing.is_empty() {
            let _ = write!(
                out,
                "<p class=\"unreached\">Not reached by: {}.</p>",
                escape(&missing.join(", "))
            );
        }
    }
    as_written(out, f);
}

/// Each team's own autoscaler (`--peer`) at its file's setting.
fn as_written(out: &mut String, f: &crate::frontier::Frontier) {
    for p in f.policies.iter().filter(|p| p.knob == Knob::FileTargets) {
        if let Some(t) = p.trials.iter().find(|t| t.factor == 1.0) {
            let _ = write!(
                out,
                "<p class=\"as-written\">{} as written ({}): {:.2} GPU-h, {} % of requests within the SLO.</p>",
                escape(&p.policy),
                escape(&t.knob),
                t.gpu_hours,
                percent(t.attainment)
            );
        }
    }
}

/// What every run of the frontier shared, the knobs' range, and each tier's knee and bounds.
fn frontier_inputs(out: &mut String, f: &crate::frontier::Frontier, world: &World) {
    out.push_str("<dl>");
    let mut row = |k: &str, v: String| {
        let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    world_rows(&mut row, &f.inputs, world);
    row(
        "cannot meet the SLO",
        format!(
            "{:.0} requests ({:.1} %) at any scale",
            f.unattainable,
            f.unattainable_share * 100.0
        ),
    );
    row(
        "knobs",
        format!(
            "each policy's one sizing knob at {}..{} times its setting from the configured {}",
            f.grid.min,
            f.grid.max,
            per_replica_targets(&f.targets).join(", ")
        ),
    );
    row(
        "maxReplicas",
        f.max_replicas
            .iter()
            .map(|(role, n)| format!("{role} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    for t in &f.tiers {
        let knee = t.knee_words().map_or_else(
            || "no knee (no load meets it)".to_string(),
            |k| format!("knee {k}"),
        );
        let bounds = t.bounds.as_ref().map_or("no bound".into(), |b| {
            format!(
                "{}, static peak {:.2} GPU-h",
                b.oracles(),
                b.static_peak_gpu_hours
            )
        });
        row(
            &format!("at {} %", t.tier * 100.0),
            format!("{knee}; {bounds}"),
        );
    }
    row(
        "simulated",
        format!(
            "{:.1} min, {} runs",
            f.inputs.duration_seconds / 60.0,
            f.runs
        ),
    );
    row("version", format!("mds {}", f.inputs.version));
    out.push_str("</dl>");
}

/// The page of `--frontier`: per cold start, each policy's attainment against its GPU-hours
/// as a line over the settings tried, then per tier the cheapest setting that reaches it.
pub fn frontier_page(
    load: &str,
    requests: usize,
    quota: &str,
    frontiers: &[crate::frontier::Frontier],
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>mds simulate --frontier: {}</title><style>{STYLE}</style></head><body>",
        escape(load)
    );
    let Some(first) = frontiers.first() else {
        out.push_str("<p>No run.</p></body></html>");
        return out;
    };
    let _ = write!(
        out,
        "<h1>mds simulate --frontier: {} policies on {}</h1><p class=\"meta\">{} requests · {} · quota {} · each policy's one sizing knob swept; per tier, the cheapest setting that reaches it</p>",
        first.policies.len(),
        escape(load),
        requests,
        escape(&first.inputs.slo.describe()),
        escape(quota_or_unlimited(quota)),
    );
    for (i, f) in frontiers.iter().enumerate() {
        let _ = write!(
            out,
            "<h2>At a {:.0} s cold start</h2><figure>{}<figcaption>Each line joins a policy's settings that no cheaper setting of it beats (ours in blue, each peer in a colour and dash of its own, named at its line's end); up and to the left is better. Red lines: the tiers; ticks at the bottom: each tier's Oracle B (the cheapest replicas that reach it on the engine's curves, started a cold start ahead). {:.1} % of requests cannot meet the SLO at any scale.</figcaption></figure>",
            f.cold_start_seconds,
            frontier_chart(f, i),
            f.unattainable_share * 100.0
        );
        frontier_table(&mut out, f);
        let _ = write!(out, "<h3>Inputs</h3>");
        frontier_inputs(
            &mut out,
            f,
            &World {
                load,
                requests,
                quota,
                cold_start_seconds: f.cold_start_seconds,
            },
        );
    }
    let _ = writeln!(out, "<script>{DRAWN}</script></body></html>");
    out
}
