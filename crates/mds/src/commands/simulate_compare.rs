//! `mds simulate --compare` and the cold-start sweep: every policy on the same world, one
//! table per cold start (docs/simulator.md, "Comparing policies").

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use jiff::SignedDuration;
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_simulate::compare::{self, Comparison, Contender};
use mds_simulate::roster::PeerName;
use mds_simulate::run::RunOptions;
use serde::Serialize;

use super::inputs::{Stop, unusable};
use super::simulate_io::Progress;

/// The policies `--compare` names, or a listing.
pub enum Selection {
    Run(Vec<Contender>),
    List(String),
}

/// One policy `--compare` names.
pub enum Named {
    /// The scaler as given.
    Mds,
    /// One of our algorithms configured from its capacity (`mds-tokenthroughput`, ...).
    Ours(String),
    Peer(PeerName),
}

/// Our algorithms by the names `--compare` takes.
pub const OURS: [&str; 3] = ["mds-proportional", "mds-tokenthroughput", "mds-predictive"];

/// `--compare NAME,NAME,...`: each name, or an error naming the one no policy has.
pub fn names(value: &str) -> Result<Vec<Named>, Stop> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        out.push(if name == "mds" {
            Named::Mds
        } else if OURS.contains(&name) {
            Named::Ours(name.to_string())
        } else if let Some(peer) = PeerName::parse(name) {
            Named::Peer(peer)
        } else {
            let known = std::iter::once("mds")
                .chain(OURS)
                .chain(PeerName::ALL.iter().map(|p| p.as_str()));
            let hint = if name.eq_ignore_ascii_case("keda") {
                " (KEDA scales through an HPA on its metric, so `hpa` stands for it; --peer FILE runs your own ScaledObject)".to_string()
            } else {
                mds_api::suggest::closest(name, known)
                    .map(|near| format!(" (did you mean {near}?)"))
                    .unwrap_or_default()
            };
            return Err(unusable(format!(
                "--compare {value:?}: no policy {name:?}{hint}; `--compare list` lists them"
            )));
        });
    }
    if out.is_empty() {
        return Err(unusable(format!("--compare {value:?}: names no policy")));
    }
    Ok(out)
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
    let peers = || PeerName::ALL.into_iter().map(Contender::peer);
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
        list => {
            let mut out = Vec::new();
            for named in names(list)? {
                out.push(match named {
                    Named::Mds => ours(),
                    Named::Peer(peer) => Contender::peer(peer),
                    Named::Ours(name) => algorithms()?
                        .into_iter()
                        .find(|c| c.name() == name)
                        .ok_or_else(|| unusable(format!("--compare: no algorithm {name}")))?,
                });
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
    out.push_str("KEDA scales through an HPA on its metric: `hpa` stands for it.\n");
    out.push_str("Your own HPA, ScaledObject, Knative Service or AIBrix PodAutoscaler: --peer FILE (named after the file).\n");
    out
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
        super::simulate_io::write_json(path, "the comparison", &sweep)?;
    }
    let mut out = String::new();
    let mut violations = 0;
    for c in &comparisons {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&mds_simulate::text::comparison(
            c, name, requests, quota_note,
        ));
        violations += c.rows.iter().map(|r| r.violations).sum::<usize>();
    }
    if let Some(path) = json {
        let _ = writeln!(out, "json: {}", path.display());
    }
    if let Some(path) = page {
        super::simulate_io::write_page(
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
