//! The fluid engine grades as the request engine does: the same worlds on both engines, at
//! fixed counts around the knee and with our scaler, agree on attainment within 3 points (at
//! the p95 and at the mean ITL reading) and on GPU-hours within 5 %. Known gaps (issue 45, open) are held to their size today so they
//! cannot grow unseen: long-tailed traces on overloaded replicas, and prompts near half the
//! step budget at two replicas.

use crate::common;

use std::sync::Arc;

use mds_sim::load::{Synthetic, Trace};
use mds_simulate::ScaledBy;
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::{EngineModel, RunOptions, run_with};

const CHAT: &str = include_str!("../../../../examples/simulate/chat.yaml");
const CONV: &str = include_str!("../../../../data/traces/azure-2023-conv.csv");
const CODE: &str = include_str!("../../../../data/traces/azure-2023-code.csv");

/// The chat example held at `replicas` (`None`: scaled between 1 and 8 as written).
fn chat(replicas: Option<u32>) -> String {
    match replicas {
        Some(n) => CHAT
            .replace("replicas: 2", &format!("replicas: {n}"))
            .replace("minReplicas: 1", &format!("minReplicas: {n}"))
            .replace("maxReplicas: 8", &format!("maxReplicas: {n}")),
        None => CHAT.to_string(),
    }
}

/// Attainment (p95 and mean readings) and GPU-hours of `trace` on `engine`.
fn graded(example: &str, trace: &Arc<Trace>, engine: EngineModel) -> (f64, f64, f64) {
    let (scaler, target) = common::manifests(example);
    let mut options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    options.engine = engine;
    let report = run_with(
        scaler,
        target,
        Arc::clone(trace),
        "test",
        &options,
        ScaledBy::Mds,
        &mut |_| {},
    )
    .unwrap();
    let totals = &report.summary.totals;
    (
        totals.attainment.unwrap_or(0.0),
        totals.attainment_mean_itl.unwrap_or(0.0),
        totals.gpu_hours,
    )
}

fn synthetic(spec: &str) -> Arc<Trace> {
    Arc::new(Synthetic::parse(spec).unwrap().generate(1))
}

#[test]
fn both_engines_grade_the_same_worlds_alike() {
    let conv = Arc::new(Trace::parse_azure_csv(CONV).unwrap());
    let code = Arc::new(Trace::parse_azure_csv(CODE).unwrap());
    let cases: Vec<(&str, Option<u32>, Arc<Trace>)> = vec![
        (
            "prefill-heavy scaled",
            None,
            synthetic("constant:rate=5,prompt=4000,output=50,duration=1800"),
        ),
        (
            "decode-heavy at 1",
            Some(1),
            synthetic("constant:rate=6,prompt=200,output=800,duration=1200"),
        ),
        (
            "on-off at 2",
            Some(2),
            synthetic("on-off:rate=8,on=300,off=300,duration=1800"),
        ),
        (
            "on-off scaled",
            None,
            synthetic("on-off:rate=8,on=300,off=300,duration=1800"),
        ),
        ("conversation at 2", Some(2), Arc::clone(&conv)),
        ("conversation scaled", None, Arc::clone(&conv)),
    ];
    let known_gaps: Vec<(&str, Option<u32>, Arc<Trace>, f64)> = vec![
        (
            "prefill-heavy at 2",
            Some(2),
            synthetic("constant:rate=5,prompt=4000,output=50,duration=1200"),
            5.0,
        ),
        ("conversation at 1", Some(1), Arc::clone(&conv), 14.0),
        // 9 points at the p95 reading, 14 at the mean one (65.5 % against 79.1 %); 14 and 23
        // before the prompt queue counted the trace's clustered arrivals.
        ("code at 2", Some(2), Arc::clone(&code), 14.0),
        // 6 points at the p95 reading (10 before).
        ("code at 4", Some(4), Arc::clone(&code), 7.0),
        ("code scaled", None, Arc::clone(&code), 7.0),
    ];
    let cases = cases
        .into_iter()
        .map(|(name, replicas, trace)| (name, replicas, trace, 3.0))
        .chain(known_gaps);
    let mut misses = Vec::new();
    for (name, replicas, trace, within) in cases {
        let example = chat(replicas);
        let (req_att, req_mean, req_gpu) = graded(&example, &trace, EngineModel::Request);
        let (fl_att, fl_mean, fl_gpu) = graded(&example, &trace, EngineModel::Fluid);
        let points = (fl_att - req_att).abs().max((fl_mean - req_mean).abs()) * 100.0;
        let cost = (fl_gpu / req_gpu - 1.0).abs();
        let said = format!(
            "{name}: request {:.1} % (mean {:.1} %) on {req_gpu:.2} GPU-h, fluid {:.1} % (mean \
             {:.1} %) on {fl_gpu:.2}",
            req_att * 100.0,
            req_mean * 100.0,
            fl_att * 100.0,
            fl_mean * 100.0
        );
        if std::env::var_os("MDS_ENGINES_TABLE").is_some() {
            eprintln!("{said}");
        }
        if points > within || cost > 0.05 {
            misses.push(said);
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
