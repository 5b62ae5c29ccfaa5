//! `mds simulate --frontier`: every policy at its best setting, per attainment tier the
//! cheapest GPU-hours that reaches it (docs/simulator.md, "The frontier").

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use jiff::SignedDuration;
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_simulate::compare::Case;
use mds_simulate::frontier::{self, DEFAULT_PEERS, Frontier, Grid, Policy, Search};
use mds_simulate::roster::PeerName;
use mds_simulate::run::RunOptions;
use serde::Serialize;

use super::inputs::{Stop, unusable};
use super::simulate_compare::{Named, OURS};
use super::simulate_io::Progress;

/// The tiers of `--frontier` without a value, and of the first screen.
pub const DEFAULT_TIERS: &str = "90,95,99";

/// `--frontier TIERS`: percentages in (0, 100], ascending, without repeats.
pub fn tiers(text: &str) -> Result<Vec<f64>, Stop> {
    let mut tiers = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let tier = part
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t > 0.0 && *t <= 100.0)
            .ok_or_else(|| {
                unusable(format!(
                    "--frontier {text:?}: tier {part:?} must be a percentage above 0 and at most 100"
                ))
            })?;
        tiers.push(tier / 100.0);
    }
    if tiers.is_empty() {
        return Err(unusable(format!("--frontier {text:?}: names no tier")));
    }
    tiers.sort_by(f64::total_cmp);
    tiers.dedup();
    Ok(tiers)
}

/// `--frontier-grid`.
pub fn grid(text: Option<&str>) -> Result<Grid, Stop> {
    match text {
        None => Ok(Grid::default()),
        Some(t) => {
            Grid::parse(t).map_err(|rule| unusable(format!("--frontier-grid {t:?}: {rule}")))
        }
    }
}

/// The policies `--compare` names for a frontier (without it: our three algorithms, the
/// tuned scaler and one of each peer).
pub fn policies(value: Option<&str>) -> Result<Vec<Policy>, Stop> {
    let ours = || OURS.iter().map(|n| Policy::Ours(n.to_string()));
    Ok(match value {
        None => ours()
            .chain([Policy::Tuned])
            .chain(DEFAULT_PEERS.map(Policy::Peer))
            .collect(),
        Some("all") => ours()
            .chain([Policy::Tuned])
            .chain(PeerName::ALL.map(Policy::Peer))
            .collect(),
        Some("peers") => [Policy::Tuned]
            .into_iter()
            .chain(PeerName::ALL.map(Policy::Peer))
            .collect(),
        Some(list) => super::simulate_compare::names(list)?
            .into_iter()
            .map(|named| match named {
                Named::Mds => Policy::Tuned,
                Named::Ours(name) => Policy::Ours(name),
                Named::Peer(peer) => Policy::Peer(peer),
            })
            .collect(),
    })
}

#[derive(Serialize)]
struct Sweep<'a> {
    load: &'a str,
    requests: usize,
    quota: &'a str,
    frontiers: &'a [Frontier],
}

/// What a frontier run needs besides the scaler, target and trace.
pub struct Request<'a> {
    pub tiers: Vec<f64>,
    pub grid: Grid,
    pub policies: Vec<Policy>,
    pub jobs: usize,
    pub cold_starts: &'a [Option<SignedDuration>],
    pub quota: &'a str,
    pub json: Option<&'a std::path::Path>,
    pub page: Option<&'a std::path::Path>,
    pub progress: bool,
}

/// Runs the frontier at each cold start; its text, and the invariant violations of our
/// scaler's trials.
pub fn run(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: Trace,
    name: &str,
    options: &RunOptions,
    request: &Request,
) -> Result<(String, usize), Stop> {
    let requests = trace.requests.len();
    let trace = Arc::new(trace);
    let bar = Mutex::new(Progress::new(request.progress));
    let total = request.cold_starts.len().max(1) as f64;
    let mut frontiers = Vec::new();
    for (i, cold) in request.cold_starts.iter().enumerate() {
        let mut options = options.clone();
        if cold.is_some() {
            options.cold_start = *cold;
        }
        let case = Case {
            scaler,
            target,
            trace: trace.clone(),
            load: name,
            options: &options,
        };
        for p in &request.policies {
            frontier::check_policy(&case, p).map_err(|rule| {
                unusable(format!("--frontier: {} has no knob: {rule}", p.name()))
            })?;
        }
        let search = Search {
            tiers: request.tiers.clone(),
            grid: request.grid,
            refinements: 3,
            threads: request.jobs,
        };
        let f = frontier::frontier(&case, &request.policies, &search, &|done| {
            if let Ok(mut b) = bar.lock() {
                b.show((i as f64 + done) / total);
            }
        })
        .map_err(|e| unusable(format!("the frontier could not run: {e}")))?;
        frontiers.push(f);
    }
    if let Ok(mut b) = bar.lock() {
        b.clear();
    }
    if let Some(path) = request.json {
        let sweep = Sweep {
            load: name,
            requests,
            quota: request.quota,
            frontiers: &frontiers,
        };
        super::simulate_io::write_json(path, "the frontier", &sweep)?;
    }
    let mut out = String::new();
    for f in &frontiers {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&mds_simulate::text::frontier(
            f,
            name,
            requests,
            request.quota,
        ));
    }
    if let Some(path) = request.json {
        let _ = writeln!(out, "json: {}", path.display());
    }
    if let Some(path) = request.page {
        let page = mds_simulate::html::frontier_page(name, requests, request.quota, &frontiers);
        std::fs::write(path, page)
            .map_err(|e| unusable(format!("{}: cannot write the report: {e}", path.display())))?;
        let _ = writeln!(out, "report: {}", path.display());
    }
    let violations = frontiers
        .iter()
        .flat_map(|f| &f.policies)
        .filter(|p| p.ours)
        .flat_map(|p| &p.trials)
        .map(|t| t.violations)
        .sum();
    Ok((out, violations))
}
