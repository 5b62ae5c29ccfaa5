//! `mds simulate --compare` and the cold-start sweep: every policy on the same world, one
//! table per cold start (docs/simulator.md, "Comparing policies").

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use jiff::SignedDuration;
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_simulate::compare::{self, Comparison, Contender};
use mds_simulate::roster::{self, PeerName};
use mds_simulate::run::RunOptions;
use serde::Serialize;

use super::inputs::{Stop, unusable};
use super::simulate::Progress;

/// The policies `--compare` names, or a listing.
pub enum Selection {
    Run(Vec<Contender>),
    List(String),
}

/// Reads `--compare VALUE` against the scaler under test.
pub fn selection(
    value: &str,
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
) -> Result<Selection, Stop> {
    let ours = || Contender::Mds {
        name: "mds".into(),
        scaler: Box::new(scaler.clone()),
    };
    let peers = || PeerName::ALL.into_iter().map(Contender::Peer);
    let algorithms = || -> Result<Vec<Contender>, Stop> {
        let targets = compare::targets_for(scaler, target, trace, options)
            .map_err(|e| unusable(format!("--compare: {e}")))?;
        compare::algorithms(scaler, target, &targets)
            .map_err(|e| unusable(format!("--compare: {e}")))
    };
    Ok(Selection::Run(match value {
        "list" => return Ok(Selection::List(listing())),
        "peers" => std::iter::once(ours()).chain(peers()).collect(),
        "all" => algorithms()?.into_iter().chain(peers()).collect(),
        names => {
            let mut out = Vec::new();
            for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if name == "mds" {
                    out.push(ours());
                } else if let Some(peer) = PeerName::parse(name) {
                    out.push(Contender::Peer(peer));
                } else if let Some(c) = algorithms()?.into_iter().find(|c| c.name() == name) {
                    out.push(c);
                } else {
                    return Err(unusable(format!(
                        "--compare {value:?}: no policy {name:?}; `--compare list` lists them"
                    )));
                }
            }
            if out.is_empty() {
                return Err(unusable(format!("--compare {value:?}: names no policy")));
            }
            out
        }
    }))
}

fn listing() -> String {
    let mut out = String::from(
        "policies for --compare (a comma list, or `peers`: mds and every peer, or `all`: our three algorithms and every peer)\n",
    );
    let ours = [
        ("mds", "the scaler as given"),
        (
            "mds-proportional",
            "Proportional on QueueDepth at the request target derived from the capacity",
        ),
        ("mds-tokenthroughput", "TokenThroughput at the capacity"),
        ("mds-predictive", "Predictive at the capacity"),
    ];
    for (name, what) in ours {
        let _ = writeln!(out, "  {name:<26}{what}");
    }
    for p in PeerName::ALL {
        let _ = writeln!(out, "  {:<26}{}", p.as_str(), p.summary());
    }
    out
}

/// `--quota auto`: each instance type of the target gets 80 % of the GPUs static peak holds,
/// so that budget clamping, rollback and rebalancing are exercised.
pub fn auto_quota(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &mut RunOptions,
) -> Result<String, Stop> {
    let targets = compare::targets_for(scaler, target, trace, options)
        .map_err(|e| unusable(format!("--quota auto: {e}")))?;
    let counts = roster::static_counts(scaler, target, trace, options, &targets)
        .map_err(|e| unusable(format!("--quota auto: {e}")))?;
    let mut peak: std::collections::BTreeMap<String, u32> = Default::default();
    for role in &target.spec.roles {
        let n = counts
            .get(&role.name)
            .copied()
            .unwrap_or(role.replicas())
            .max(0) as u32;
        let gpus = n * role.size().clamp(1, 64) as u32 * options.profile.gpus_per_pod;
        *peak
            .entry(role.instance_type.clone().unwrap_or_default())
            .or_default() += gpus;
    }
    let mut said = Vec::new();
    for (instance_type, gpus) in peak {
        let quota = ((f64::from(gpus) * 0.8).round() as u32).max(1);
        said.push(format!("{instance_type}={quota} (80 % of {gpus})"));
        options.quota.insert(instance_type, Some(quota));
    }
    Ok(said.join(", "))
}

#[derive(Serialize)]
struct Sweep<'a> {
    load: &'a str,
    requests: usize,
    quota: &'a str,
    comparisons: &'a [Comparison],
}

/// Runs the comparison at each cold start; the tables, and whether our scaler broke an
/// invariant anywhere.
#[allow(clippy::too_many_arguments)]
pub fn run(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: Trace,
    name: &str,
    options: &RunOptions,
    cold_starts: &[Option<SignedDuration>],
    contenders: &[Contender],
    quota_note: &str,
    json: Option<&std::path::Path>,
    page: Option<&std::path::Path>,
    progress: bool,
) -> Result<(String, usize), Stop> {
    let requests = trace.requests.len();
    let trace = Arc::new(trace);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bar = Mutex::new(Progress::new(progress));
    let mut comparisons = Vec::new();
    let total = cold_starts.len().max(1) as f64;
    for (i, cold) in cold_starts.iter().enumerate() {
        let mut options = options.clone();
        if cold.is_some() {
            options.cold_start = *cold;
        }
        let case = compare::Case {
            scaler,
            target,
            trace: trace.clone(),
            load: name,
            options: &options,
        };
        let comparison = compare::compare(&case, contenders, threads, &|done| {
            if let Ok(mut b) = bar.lock() {
                b.show((i as f64 + done) / total);
            }
        })
        .map_err(|e| unusable(format!("the comparison could not run: {e}")))?;
        comparisons.push(comparison);
    }
    if let Ok(mut b) = bar.lock() {
        b.clear();
    }
    if let Some(path) = json {
        let sweep = Sweep {
            load: name,
            requests,
            quota: quota_note,
            comparisons: &comparisons,
        };
        let text = serde_json::to_string_pretty(&sweep)
            .map_err(|e| unusable(format!("cannot write the comparison as JSON: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| unusable(format!("{}: cannot write: {e}", path.display())))?;
    }
    let mut out = String::new();
    let mut violations = 0;
    for c in &comparisons {
        table(&mut out, c, name, requests, quota_note);
        violations += c.rows.iter().map(|r| r.violations).sum::<usize>();
    }
    if let Some(path) = json {
        let _ = writeln!(out, "json: {}", path.display());
    }
    if let Some(path) = page {
        super::simulate::write_page(
            path,
            name,
            requests,
            quota_note,
            &comparisons,
            Some(&featured(scaler, contenders)),
        )?;
        let _ = writeln!(out, "report: {}", path.display());
    }
    Ok((out, violations))
}

/// The row the report's time plots follow: the scaler as given, else our variant with its
/// algorithm.
fn featured(scaler: &ModelDeploymentScaler, contenders: &[Contender]) -> String {
    let names: Vec<String> = contenders.iter().map(Contender::name).collect();
    if names.iter().any(|n| n == "mds") {
        return "mds".into();
    }
    let algorithm = scaler
        .spec
        .algorithm
        .as_ref()
        .and_then(|a| a.algorithm_type.as_ref())
        .map(|t| format!("mds-{}", format!("{t:?}").to_lowercase()))
        .unwrap_or_default();
    if names.contains(&algorithm) {
        algorithm
    } else {
        names
            .into_iter()
            .find(|n| n.starts_with("mds"))
            .unwrap_or_default()
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |a| format!("{:.1}", a * 100.0))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{:.0}", s * 1000.0))
}

fn times(v: Option<f64>) -> String {
    v.map_or("-".into(), |r| format!("{r:.2}"))
}

fn table(out: &mut String, c: &Comparison, name: &str, requests: usize, quota: &str) {
    let Some(first) = c.runs.first() else {
        return;
    };
    let i = &first.inputs;
    if !out.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "mds simulate --compare: {} policies on {name} ({requests} requests, {:.1} min)",
        c.rows.len(),
        i.duration_seconds / 60.0
    );
    let _ = writeln!(
        out,
        "  world: {}, {} engine, router {}, cold start {:.0} s ± {:.0} %, seed {}, quota {}",
        i.profile,
        i.engine.as_str(),
        i.router,
        c.cold_start_seconds,
        i.cold_start_spread * 100.0,
        i.seed,
        if quota.is_empty() { "unlimited" } else { quota }
    );
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
        "  per-replica targets: {} (SLO TTFT {} ms, ITL {} ms)",
        per_replica.join(", "),
        ms(Some(i.slo.ttft_seconds)),
        ms(Some(i.slo.itl_seconds))
    );
    if let Some(b) = &c.bounds {
        let _ = writeln!(
            out,
            "  bounds: Oracle A {:.2} GPU-h, Oracle B {:.2} GPU-h, static peak {:.2} GPU-h",
            b.oracle_a_gpu_hours, b.oracle_b_gpu_hours, b.static_peak_gpu_hours
        );
    }
    let _ = writeln!(
        out,
        "\n  {:<24} {:>6} {:>6} {:>6} {:>5} {:>6} {:>5} {:>5} {:>6} {:>5} {:>7}",
        "policy",
        "SLO %",
        "min %",
        "TTFT95",
        "ITL95",
        "GPU-h",
        "/B",
        "/HPA",
        "act/h",
        "flaps",
        ">quota"
    );
    for r in &c.rows {
        let _ = writeln!(
            out,
            "  {:<24} {:>6} {:>6} {:>6} {:>5} {:>6.2} {:>5} {:>5} {:>6.1} {:>5} {:>6.0}s{}",
            r.policy,
            percent(r.attainment),
            percent(r.window_attainment),
            ms(r.ttft_p95_seconds),
            ms(r.itl_p95_seconds),
            r.gpu_hours,
            times(r.vs_oracle_b),
            times(r.vs_hpa),
            r.scale_actions_per_hour,
            r.flaps,
            r.above_budget_seconds,
            if r.violations > 0 {
                format!("  {} invariant violation(s)", r.violations)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(
        out,
        "  SLO %: requests within TTFT and ITL; min %: minutes whose p95s meet both; TTFT95/ITL95 in ms; /B, /HPA: GPU-hours over Oracle B's and HPA's; >quota: seconds holding more GPUs than the quota"
    );
}
