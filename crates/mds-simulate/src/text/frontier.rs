//! `--frontier`'s text: per tier of attainment, each policy's cheapest trial against the bounds.

use std::fmt::Write as _;

use super::{
    count_requests, per_replica_targets, percent, quota_or_unlimited, refused_line, times,
    world_line,
};
use crate::frontier::{Frontier, Point, PolicyFrontier, TierBounds};
use crate::roster::Knob;

fn tier_name(tier: f64) -> String {
    format!("{} %", tier * 100.0)
}

/// A policy that reaches a tier, and its cheapest point there.
type Reached<'f> = (&'f PolicyFrontier, &'f Point);

/// A frontier: per tier, each policy's cheapest GPU-hours that reaches it, cheapest first,
/// then the policies that reach no tier with their best.
pub fn frontier(f: &Frontier, load: &str, requests: usize, quota: &str) -> String {
    let mut out = String::new();
    frontier_header(&mut out, f, load, requests, quota);
    for (i, t) in f.tiers.iter().enumerate() {
        frontier_tier(&mut out, f, i, t);
    }
    frontier_unreached(&mut out, f, quota);
    as_written(&mut out, f);
    let _ = writeln!(
        out,
        "  GPU-h: the cheapest setting reaching the tier; /B: over that tier's Oracle B (the cheapest replicas that reach the tier on the engine's curves, started a cold start ahead); SLO %: its attainment; act/h, flaps: at that setting"
    );
    out
}

/// A frontier's header: the tiers and policies, the world, the SLO, the knobs' range and
/// each tier's knee and bounds.
fn frontier_header(out: &mut String, f: &Frontier, load: &str, requests: usize, quota: &str) {
    let inputs = &f.inputs;
    let tiers: Vec<String> = f.tiers.iter().map(|t| tier_name(t.tier)).collect();
    let _ = writeln!(
        out,
        "mds simulate --frontier {}: {} policies on {load} ({requests} requests, {:.1} min), {} runs",
        tiers.join(", "),
        f.policies.len(),
        inputs.duration_seconds / 60.0,
        f.runs
    );
    world_line(out, inputs, f.cold_start_seconds, quota_or_unlimited(quota));
    refused_line(out, inputs);
    let _ = writeln!(
        out,
        "  SLO: {}, graded per request; {} ({:.1} %) cannot meet it at any scale",
        inputs.slo.describe(),
        count_requests(f.unattainable),
        f.unattainable_share * 100.0
    );
    let _ = writeln!(
        out,
        "  knobs: each policy's one sizing knob at {}..{} times its setting from the configured {}",
        f.grid.min,
        f.grid.max,
        per_replica_targets(&f.targets).join(", ")
    );
    for t in &f.tiers {
        let bounds = t
            .bounds
            .as_ref()
            .map_or("no bound".into(), crate::run::Bounds::oracles);
        let _ = writeln!(
            out,
            "  at {}: knee {}; {bounds}",
            tier_name(t.tier),
            t.knee_words()
                .unwrap_or_else(|| "none (no load meets it)".into())
        );
    }
}

/// The table of tier `t` (the `i`th): the policies reaching it, cheapest first, those that
/// do not, and the verdict.
fn frontier_tier(out: &mut String, f: &Frontier, i: usize, t: &TierBounds) {
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
    let mut reached: Vec<Reached> = f
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
            match (&c.held, point.at_grid_edge) {
                (Some(held), _) => format!(" ({held}: the knob cannot change it)"),
                (None, true) => " (grid's edge: widen --frontier-grid)".to_string(),
                (None, false) => String::new(),
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
    let _ = writeln!(out, "  verdict: {}", tier_verdict(f, t, &reached));
}

/// A tier's verdict: ours and the cheapest peer reaching it (`reached`, cheapest first), or
/// who comes closest when no policy does.
fn tier_verdict(f: &Frontier, t: &TierBounds, reached: &[Reached]) -> String {
    let ours = reached.iter().find(|(p, _)| p.ours);
    let peer = reached.iter().find(|(p, _)| !p.ours);
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
}

/// Each team's own autoscaler (`--peer`) as its file has it, against the cheapest run of ours
/// that did at least as well: the answer to "would mds save against mine?".
fn as_written(out: &mut String, f: &Frontier) {
    for p in f.policies.iter().filter(|p| p.knob == Knob::FileTargets) {
        let Some(theirs) = p.trials.iter().find(|t| t.factor == 1.0) else {
            continue;
        };
        let _ = writeln!(
            out,
            "\n  {} as written ({}): {:.2} GPU-h, {} % of requests in SLO",
            p.policy,
            theirs.knob,
            theirs.gpu_hours,
            percent(theirs.attainment),
        );
        let bar = theirs.attainment.unwrap_or(0.0);
        let ours = f
            .policies
            .iter()
            .filter(|o| o.ours)
            .flat_map(|o| o.trials.iter().map(move |t| (o, t)))
            .filter(|(_, t)| t.violations == 0 && t.attainment.is_some_and(|a| a + 1e-12 >= bar))
            .min_by(|a, b| a.1.gpu_hours.total_cmp(&b.1.gpu_hours));
        let _ = match ours {
            Some((o, t)) => writeln!(
                out,
                "  the cheapest run of ours at least as good: {} {:.2} GPU-h, {} % ({:.2}x yours; {})",
                o.policy,
                t.gpu_hours,
                percent(t.attainment),
                t.gpu_hours / theirs.gpu_hours.max(1e-9),
                t.knob
            ),
            None => writeln!(
                out,
                "  no run of ours reached its {} %: widen --frontier-grid, or yours holds more replicas than ours ever asked for",
                percent(theirs.attainment)
            ),
        };
    }
}

/// The policies that reach no tier, each with its best attainment, and what bounds them;
/// nothing when every policy reaches some tier.
fn frontier_unreached(out: &mut String, f: &Frontier, quota: &str) {
    let unreached: Vec<&PolicyFrontier> = f
        .policies
        .iter()
        .filter(|p| p.tiers.iter().all(Option::is_none))
        .collect();
    if unreached.is_empty() {
        return;
    }
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
        quota_or_unlimited(quota)
    );
}
