//! `cargo bench -p mds-simulate --bench simulate`: one hour of the bundled Azure conversation
//! trace through one TokenThroughput scaler (the `mds simulate` example), request-level and
//! fluid, the fluid world alone without the scaler, the whole comparison (our three
//! algorithms and every peer, on every core; `MDS_BENCH_CASE=compare`), the frontier of the
//! bundled example (every default policy's knob swept, three tiers, on every core;
//! `MDS_BENCH_CASE=frontier`) and one simulated day of a request-level load at one setting
//! (`MDS_BENCH_CASE=day`). Prints the median and best wall time of several rounds, the
//! real-time factor and the process's peak resident memory.
//! docs/PERFORMANCE.md records the results.

use std::sync::Arc;
use std::time::Instant;

use mds_sim::load::{Synthetic, Trace};
use mds_simulate::ScaledBy;
use mds_simulate::compare::{self, Contender};
use mds_simulate::frontier::{self, DEFAULT_PEERS, Grid, Policy, Search};
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::roster::PeerName;
use mds_simulate::run::{EngineModel, RunOptions, run, run_with};
use mds_testdata::{mk_role, mk_scaler, mk_target};
use serde_json::json;

/// The allocator the `mds` binary runs with, so the bench times what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TRACE: &str = include_str!("../../../data/traces/azure-2023-conv.csv");

fn scaler() -> mds_api::ModelDeploymentScaler {
    mk_scaler("chat")
        .namespace("default")
        .role_bounds("server", 1, 8)
        .algorithm(json!({"type": "TokenThroughput", "tokenThroughput": {
            "serverTargetTokensPerSecond": "4000",
            "ttftTargetMilliseconds": "500", "itlTargetMilliseconds": "50"}}))
        .typed()
}

fn target() -> mds_api::target::ModelDeployment {
    let server = mk_role("server")
        .kind("Server")
        .replicas(2)
        .instance_type("h100-pcie");
    mk_target("chat").namespace("default").role(server).typed()
}

/// Seconds per run: median and best of `rounds`, and the simulated seconds of one run.
fn time(rounds: usize, mut once: impl FnMut() -> f64) -> (f64, f64, f64) {
    let mut times = Vec::new();
    let mut simulated = 0.0;
    for _ in 0..rounds {
        let started = Instant::now();
        simulated = once();
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0], simulated)
}

fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn report(case: &str, (median, best, simulated): (f64, f64, f64)) {
    println!(
        "{case:<34} median {median:>8.4} s  best {best:>8.4} s  {:>9.0}x real time (median)",
        simulated / median
    );
}

fn main() {
    let rounds: usize = std::env::var("MDS_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let trace = Arc::new(Trace::parse_azure_csv(TRACE).expect("the bundled trace"));
    let profile = profile(DEFAULT_PROFILE).expect("the default profile");
    let only = std::env::var("MDS_BENCH_CASE").ok();
    for engine in [EngineModel::Request, EngineModel::Fluid] {
        if only.as_deref().is_some_and(|c| c != engine.as_str()) {
            continue;
        }
        let mut options = RunOptions::new(profile);
        options.engine = engine;
        // The run alone (the engine's curves and the bounds are timed by the day case).
        let timing = time(rounds, || {
            let report = run_with(
                scaler(),
                target(),
                trace.clone(),
                "azure-2023-conv",
                &options,
                ScaledBy::Mds,
                &mut |_| {},
            )
            .expect("the run");
            assert!(report.violations.is_empty());
            report.inputs.duration_seconds
        });
        report(
            &format!("1 h azure conv, {} engine", engine.as_str()),
            timing,
        );
    }
    if only.as_deref().is_none_or(|c| c == "compare") {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let options = RunOptions::new(profile);
        let targets =
            compare::targets_for(&scaler(), &target(), &trace, &options).expect("targets");
        let contenders: Vec<Contender> = compare::algorithms(&scaler(), &target(), &targets)
            .expect("our algorithms")
            .into_iter()
            .chain(PeerName::ALL.into_iter().map(Contender::peer))
            .collect();
        let timing = time(rounds.min(3), || {
            let (scaler, target) = (scaler(), target());
            let case = compare::Case {
                scaler: &scaler,
                target: &target,
                trace: trace.clone(),
                load: "azure-2023-conv",
                options: &options,
            };
            let c = compare::compare(&case, &contenders, threads, &|_| {}).expect("the comparison");
            assert_eq!(c.rows.len(), contenders.len());
            c.runs[0].inputs.duration_seconds
        });
        report(
            &format!(
                "1 h azure conv, all {} policies, {threads} threads",
                contenders.len()
            ),
            timing,
        );
    }
    if only.as_deref().is_none_or(|c| c == "frontier") {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let options = RunOptions::new(profile);
        let policies: Vec<Policy> = ["mds-proportional", "mds-tokenthroughput", "mds-predictive"]
            .into_iter()
            .map(|n| Policy::Ours(n.to_string()))
            .chain([Policy::Tuned])
            .chain(DEFAULT_PEERS.map(Policy::Peer))
            .collect();
        let search = Search {
            tiers: vec![0.90, 0.95, 0.99],
            grid: Grid::default(),
            refinements: 3,
            threads,
        };
        let timing = time(rounds.min(3), || {
            let (scaler, target) = (scaler(), target());
            let case = compare::Case {
                scaler: &scaler,
                target: &target,
                trace: trace.clone(),
                load: "azure-2023-conv",
                options: &options,
            };
            let f = frontier::frontier(&case, &policies, &search, &|_| {}).expect("the frontier");
            f.inputs.duration_seconds
        });
        report(
            &format!("1 h azure conv frontier, {threads} threads"),
            timing,
        );
    }
    if only.as_deref().is_none_or(|c| c == "day") {
        let options = RunOptions::new(profile);
        let day = Arc::new(
            Synthetic::parse("sinusoid:mean=4,amplitude=3,period=86400,duration=86400")
                .expect("a day")
                .generate(1),
        );
        let timing = time(rounds.min(3), || {
            let report = run(
                scaler(),
                target(),
                day.clone(),
                "day",
                &options,
                &mut |_| {},
            )
            .expect("the day");
            report.inputs.duration_seconds
        });
        report("1 day sinusoid 1-7 req/s, request engine", timing);
    }
    if only.as_deref().is_none_or(|c| c == "world") {
        let load = trace.to_profile(10.0).expect("a profile");
        let timing = time(rounds, || world_only(&load));
        report("1 h azure conv, fluid world alone", timing);
    }
    if let Some(kib) = peak_kib() {
        println!(
            "peak resident memory of the bench process: {:.1} MiB",
            kib as f64 / 1024.0
        );
    }
}

/// The fluid world serving the trace on three replicas for an hour, no scaler.
fn world_only(load: &mds_sim::LoadProfile) -> f64 {
    use jiff::{SignedDuration, Timestamp};
    let start = Timestamp::from_second(1_767_225_600).expect("an instant");
    let mut world = mds_sim::World::new(mds_sim::WorldConfig::default(), start).expect("a world");
    let mut md = target();
    md.spec.roles[0].replicas = Some(3);
    let key = world.apply_deployment(md).expect("the target");
    world
        .set_load(&key, "server", load.clone())
        .expect("the load");
    let end = start + SignedDuration::from_secs(3600);
    world.advance_to(end).expect("an hour");
    3600.0
}
