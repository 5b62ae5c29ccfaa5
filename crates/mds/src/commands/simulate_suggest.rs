//! `mds simulate --suggest`: the cheapest per-replica target that meets the SLO attainment
//! goal on this trace (docs/simulator.md, "Finding the per-replica target").

use std::fmt::Write as _;
use std::sync::Arc;

use mds_simulate::compare::Case;
use mds_simulate::knee::RoleKnee;
use mds_simulate::peers::file::PeerFile;
use mds_simulate::suggest::{Suggestion, Trial, suggest};
use mds_simulate::tune::Tuned;

use super::inputs::{Stop, unusable};

/// Runs the search and says what it found; exit status 1 when no setting meets the goal.
pub fn run(case: &Case, goal_percent: f64, own: &[Arc<PeerFile>]) -> Result<(String, u8), Stop> {
    if !(goal_percent.is_finite() && goal_percent > 0.0 && goal_percent <= 100.0) {
        return Err(unusable(format!(
            "--goal {goal_percent}: it must be a percentage above 0 and at most 100"
        )));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let found = suggest(case, goal_percent / 100.0, own, threads)
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

/// What the search beyond the capacity kept, and what each change bought.
fn tuning(out: &mut String, tuned: &Tuned, goal: f64) {
    let _ = writeln!(
        out,
        "\ntuned beyond the capacity ({} settings run, each kept only if it saves GPU-hours and still meets the goal):",
        tuned.trials
    );
    if tuned.steps.is_empty() {
        let _ = writeln!(
            out,
            "  no window, threshold or role capacity tried does better"
        );
        return;
    }
    for step in &tuned.steps {
        let _ = writeln!(
            out,
            "  {}: {} -> {}  {:.2} -> {:.2} GPU-hours ({:+.1} %), {:.1} %",
            step.field,
            step.from,
            step.to,
            step.gpu_hours_before,
            step.gpu_hours_after,
            (step.gpu_hours_after / step.gpu_hours_before - 1.0) * 100.0,
            step.attainment * 100.0
        );
    }
    let _ = writeln!(
        out,
        "tuned: {:.1} % at {:.2} GPU-hours, {:.1} points above the goal",
        tuned.attainment * 100.0,
        tuned.gpu_hours,
        (tuned.attainment - goal) * 100.0
    );
}

/// What the peers cost: the team's own as written beside the suggestion, else the default
/// peers configured from the suggested capacity (said as such: not the team's settings).
fn peers(out: &mut String, s: &Suggestion) {
    if s.peers.is_empty() {
        return;
    }
    let ours = s
        .tuned
        .as_ref()
        .map(|t| t.gpu_hours)
        .or(s.chosen.as_ref().map(|c| c.gpu_hours));
    if s.peers.iter().any(|p| p.as_written) {
        let _ = writeln!(out, "\nyour autoscalers as written (--peer), same world:");
    } else {
        let _ = writeln!(
            out,
            "\nthe peers whose per-replica target comes from the capacity, at the suggested one, same world (not your settings: --peer FILE prices your own HPA, ScaledObject, Knative Service or PodAutoscaler as written):"
        );
    }
    for p in &s.peers {
        let versus = match ours {
            Some(o) if p.as_written => format!(
                "  (the suggestion: {:.2}x its GPU-hours{})",
                o / p.gpu_hours.max(1e-9),
                if p.attainment.is_some_and(|a| a < s.goal) {
                    ", and it misses the goal"
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<18} {:>6} %  {:>6.2} GPU-hours{versus}",
            p.peer,
            mds_simulate::text::percent(p.attainment),
            p.gpu_hours
        );
    }
}

fn report(case: &Case, s: &Suggestion) -> String {
    let mut out = String::new();
    let refusals = header(&mut out, case, s);
    trials(&mut out, s);
    match (&s.chosen, &s.fragment) {
        (Some(c), Some(fragment)) => suggested(&mut out, s, c, fragment),
        _ => nothing_meets(&mut out, case, s, refusals),
    }
    out
}

/// The run's header: the goal and SLO, the world, the guards pasted, requests refused by the
/// profile's context and the knee; returns the refusals for the closing advice.
fn header(out: &mut String, case: &Case, s: &Suggestion) -> Option<mds_simulate::slo::Refusals> {
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
        "  world: {} ({}), cold start {:.0} s, seed {}; every role's target scaled by one factor",
        i.profile.name,
        i.profile_why,
        i.cold_start
            .map_or(i.profile.cold_start, |c| c)
            .as_secs_f64(),
        i.seed
    );
    let _ = writeln!(out, "  hardware: {}", i.profile.describe());
    if !s.guard_changes.is_empty() {
        let _ = writeln!(
            out,
            "  guards: aimed at the SLO before the search, and pasted so: {}",
            s.guard_changes.join(", ")
        );
    }
    let refusals = mds_simulate::slo::Refusals::of(&case.trace, &i.profile);
    if let Some(r) = &refusals {
        let _ = writeln!(out, "  refused: {}", r.describe(i.profile.name));
    }
    if !s.ceiling.is_empty() {
        let knees: Vec<String> = s
            .ceiling
            .iter()
            .map(|(kind, k)| format!("{kind} {k:.0} tokens/s"))
            .collect();
        let _ = writeln!(
            out,
            "  knee at the goal: {}; no target above it is suggested, and near-ties (within 1 % of GPU-hours) go to the smaller target",
            knees.join(", ")
        );
    }
    refusals
}

/// One line per factor tried, the cheapest within the goal marked.
fn trials(out: &mut String, s: &Suggestion) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:>7}  {:>7}  {:>6}  targets",
        "factor", "SLO %", "GPU-h"
    );
    for t in &s.trials {
        let mark = match &s.chosen {
            Some(c) if c.factor == t.factor => " <- cheapest within the goal",
            _ if t.violations > 0 => " (invariant violations)",
            _ if t.above_knee => " (above the knee)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "  {:>7.3}  {:>7}  {:>6.2}  {}{mark}",
            t.factor,
            mds_simulate::text::percent(t.attainment),
            t.gpu_hours,
            targets(t)
        );
    }
}

/// The suggestion: what it gives, the best cheaper miss, the tuned settings, the peers and the
/// fragment to paste.
fn suggested(out: &mut String, s: &Suggestion, c: &Trial, fragment: &str) {
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
            "  the best cheaper setting tried ({}) gives {:.1} % at {:.2} GPU-hours{}",
            targets(t),
            a * 100.0,
            t.gpu_hours,
            if t.above_knee { ", above the knee" } else { "" }
        );
    }
    if let Some(tuned) = &s.tuned {
        tuning(out, tuned, s.goal);
    }
    peers(out, s);
    let _ = writeln!(out, "\npaste into the scaler's spec:\n{fragment}");
}

/// No setting meets the goal: say what would (above the knee), which requests no count of
/// replicas serves in time, and which the profile's context refuses.
fn nothing_meets(
    out: &mut String,
    case: &Case,
    s: &Suggestion,
    refusals: Option<mds_simulate::slo::Refusals>,
) {
    let i = case.options;
    let _ = writeln!(
        out,
        "\nno setting tried meets {:.1} %: raise the roles' maxReplicas, relax the SLO or lower the goal",
        s.goal * 100.0
    );
    let over = s
        .trials
        .iter()
        .filter(|t| t.above_knee && t.violations == 0)
        .filter(|t| t.attainment.is_some_and(|a| a >= s.goal))
        .min_by(|a, b| a.gpu_hours.total_cmp(&b.gpu_hours));
    if let Some(t) = over {
        let _ = writeln!(
            out,
            "  {} meets it at {:.2} GPU-hours, but above the knee: one replica does not serve that within the SLO, the latency guard would be scaling",
            targets(t),
            t.gpu_hours
        );
    }
    if s.unattainable_share > 0.0 {
        let ceiling = 1.0 - s.unattainable_share;
        let _ = writeln!(
            out,
            "  {:.1} % of the requests cannot meet the SLO at any count of replicas (on an idle replica their TTFT or decode step is over the objective): no setting passes {:.1} %{}",
            s.unattainable_share * 100.0,
            ceiling * 100.0,
            if ceiling < s.goal {
                ", below the goal; relax the SLO (for long prompts --slo-ttft BASE+TIME/1k or --slo-scale K) or lower the goal"
            } else {
                ""
            }
        );
    }
    if let Some(r) = refusals.filter(|r| r.share > 1.0 - s.goal) {
        let _ = writeln!(
            out,
            "  {:.1} % of the requests are refused by {}'s context, more than the goal leaves: {}",
            r.share * 100.0,
            i.profile.name,
            match &r.fits {
                Some((name, _)) => format!("--profile {name}"),
                None => "a profile with a longer context".into(),
            }
        );
    }
}

/// `--suggest --metrics FILE`: each role's knee from a recorded timeline (the `mds replay`
/// format), and the targets to paste.
pub fn from_metrics(
    path: &std::path::Path,
    scaler: &mds_api::ModelDeploymentScaler,
    target: &mds_api::target::ModelDeployment,
    slo: mds_simulate::report::Slo,
) -> Result<(String, u8), Stop> {
    let text = super::read_text(path, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{}: cannot read: {e}", path.display())))?;
    let entries = mds_simulate::replay::parse_timeline(&text)
        .map_err(|e| unusable(format!("{}: {e}", path.display())))?;
    let requests = scaler
        .spec
        .algorithm
        .as_ref()
        .and_then(|a| a.algorithm_type.as_ref())
        .is_some_and(|t| format!("{t:?}") == "Proportional");
    let knees = mds_simulate::knee::from_timeline(&entries, target, requests, slo)
        .map_err(|e| unusable(format!("{}: {e}", path.display())))?;
    let unit = if requests { "requests" } else { "tokens/s" };
    let mut out = format!(
        "mds simulate --suggest --metrics {}: the load per replica at which p95 latency left TTFT {:.0} ms / ITL {:.0} ms\n\n",
        path.display(),
        slo.ttft_seconds * 1000.0,
        slo.itl_seconds * 1000.0
    );
    let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
    for RoleKnee { role, knee: k, .. } in &knees {
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
    }
    match mds_simulate::knee::fragment(&knees, requests) {
        Some(fragment) => {
            let _ = write!(out, "\npaste into the scaler's spec:\n{fragment}");
            Ok((out, 0))
        }
        None => {
            let _ = writeln!(out, "\nno role has a load seen within the SLO to suggest");
            Ok((out, 1))
        }
    }
}
