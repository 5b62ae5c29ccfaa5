//! Reach and speed of one controller replica: N targets of one Server role with `--pods`
//! engines each, N TokenThroughput scalers at `--interval`, a constant load whose right size is
//! the current count, so a steady pass reads every engine, plans, and writes nothing.
//!
//! The lab (kube-apiserver, etcd, the GPUStack stand-in with its engine pages on loopback) runs
//! in and under this process; the release `mds controller` runs as a process of its own, so
//! its CPU time and memory are its alone. See docs/PERFORMANCE.md for what it reports.
//!
//! ```text
//! cargo build --release -p mds
//! cargo bench -p mds-lab --bench controller -- --scalers 100 [--json]
//! ```

mod args;
mod objects;
mod probe;
mod process;
mod report;
mod window;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use mds_lab::load_syntax::Selector;
use mds_lab::{Lab, LabOptions, Load, LoadProfile, LoadRule, PlaneOptions, StandInOptions};
use mds_lab::{RoleSettings, WorldConfig};

use crate::args::Args;
use crate::objects::Shape;
use crate::window::Others;

const NAMESPACE: &str = "bench";
/// Tokens per second one Server replica is rated for in the scalers.
const CAPACITY: u32 = 1000;
/// Prompt and output tokens of every request.
const PROMPT: f64 = 1000.0;
const OUTPUT: f64 = 200.0;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    probe::self_check();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: a Tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Requests per second that ask for `pods - 0.5` replicas' worth of tokens: the ceiling is
/// exactly `pods`, with half a replica of margin either side.
fn requests_per_second(pods: u32) -> f64 {
    (f64::from(pods) - 0.5) * f64::from(CAPACITY) / (PROMPT + OUTPUT)
}

fn lab_options(args: &Args) -> Result<LabOptions, String> {
    let load = Load::new(requests_per_second(args.pods), PROMPT, OUTPUT, 0.0)
        .and_then(LoadProfile::constant)
        .map_err(|e| format!("the bench's load: {e}"))?;
    let world = WorldConfig {
        default_role: RoleSettings {
            cold_start: jiff::SignedDuration::from_secs(1),
            ..RoleSettings::default()
        },
        ..WorldConfig::default()
    };
    Ok(LabOptions {
        plane: PlaneOptions::named("mds-bench"),
        standin: StandInOptions {
            world,
            tick: args.tick,
            // Every audit lists all Pods and Workloads; nothing is deleted from outside here.
            audit_every: Duration::from_secs(300),
            loads: vec![LoadRule {
                selector: Selector {
                    namespace: Some(NAMESPACE.into()),
                    ..Selector::default()
                },
                profile: load,
            }],
            ..StandInOptions::default()
        },
        namespaces: vec!["mds-system".into(), NAMESPACE.into()],
    })
}

/// Setup waits grow with the number of objects.
fn setup_timeout(shape: &Shape, base_seconds: u64) -> Duration {
    let objects = (shape.targets as u64) * u64::from(shape.pods);
    Duration::from_secs(base_seconds + objects / 10)
}

async fn run(args: &Args) -> Result<(), String> {
    let binary = args.mds.clone().unwrap_or_else(process::default_binary);
    if !binary.is_file() {
        return Err(format!(
            "no mds binary at {}; build it with `cargo build --release -p mds` or pass --mds PATH",
            binary.display()
        ));
    }
    let shape = Shape {
        namespace: NAMESPACE.into(),
        targets: args.scalers,
        pods: args.pods,
        interval_seconds: args.interval,
        capacity: CAPACITY,
    };
    let machine = report::Machine::read();
    eprintln!(
        "controller bench: {} scalers × {} Pods, interval {} s; {}",
        shape.targets, shape.pods, shape.interval_seconds, machine
    );
    let began = Instant::now();
    eprintln!("starting the lab");
    let lab = Lab::start(lab_options(args)?)
        .await
        .map_err(|e| format!("starting the lab: {e}"))?;
    let client = lab.plane.client();
    let [api_server, etcd] = lab.plane.pids();
    let others = Others { api_server, etcd };

    eprintln!("creating targets");
    objects::create_targets(&client, &shape, args.create_rate).await?;
    let every = Duration::from_secs(2);
    objects::wait_for("targets ready", setup_timeout(&shape, 120), every, || {
        objects::targets_ready(&client, &shape)
    })
    .await?;
    objects::wait_for("Pods ready", setup_timeout(&shape, 60), every, || {
        objects::pods_ready(&client, &shape)
    })
    .await?;
    check_standin(&lab)?;

    // The stand-in's own traffic, to take off the controller's window.
    let baseline_length = Duration::from_secs(u64::from(args.interval) * 2);
    eprintln!(
        "baseline without a controller ({} s)",
        baseline_length.as_secs()
    );
    let baseline = window::measure(&client, None, others, baseline_length).await?;

    eprintln!("starting {}", binary.display());
    // Outside the lab's folder, which goes with the lab.
    let log = std::env::temp_dir().join(format!("mds-bench-controller-{}.log", std::process::id()));
    eprintln!("  its log: {}", log.display());
    let mut controller = process::Controller::start(
        &binary,
        &lab.plane.kubeconfig_path(),
        log.clone(),
        &args.controller_args,
    )?;
    let ready_in = controller.wait_ready(setup_timeout(&shape, 60)).await?;
    eprintln!("  ready in {:.1} s", ready_in.as_secs_f64());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_rss = probe::rss_bytes(controller.pid())?;

    eprintln!("creating scalers");
    objects::create_scalers(&client, &shape, args.create_rate).await?;
    objects::wait_for(
        "scalers observing",
        setup_timeout(&shape, 120) + Duration::from_secs(u64::from(args.interval) * 4),
        every,
        || objects::scalers_observing(&client, &shape),
    )
    .await?;
    let settled = wait_steady(&controller, &shape).await?;
    eprintln!("  steady (a pass of every scaler without a target write) after {settled:.0} s");
    // Once everything is up, a stand-in error (an audit list cut short by a busy API server)
    // is reported with the result rather than ending the run.
    let mut standin_errors = lab.standin.take_errors();

    let length = Duration::from_secs(u64::from(args.interval) * u64::from(args.window_passes));
    eprintln!("measuring {} s", length.as_secs());
    let measured = window::measure(&client, Some(&controller), others, length).await?;
    let moved = objects::targets_moved(&client, &shape).await?;
    standin_errors.extend(lab.standin.take_errors());
    for e in &standin_errors {
        eprintln!("warning: stand-in: {e}");
    }
    let result = report::Report {
        shape: &shape,
        machine,
        setup_seconds: began.elapsed().as_secs_f64(),
        idle_rss,
        measured: &measured,
        baseline: &baseline,
        moved: &moved,
        standin_errors: standin_errors.len(),
    };
    if args.json {
        println!("{}", result.to_json());
    } else {
        print!("{}", result.table());
    }
    if let Err(e) = controller.stop(Duration::from_secs(30)).await {
        eprintln!("warning: {e}; log in {}", log.display());
    }
    lab.stop();
    Ok(())
}

/// Waits until every scaler has had a pass (as many passes as scalers) with no target write
/// in between: the binds and first plans are done and load is steady. Returns the seconds
/// that took.
async fn wait_steady(controller: &process::Controller, shape: &Shape) -> Result<f64, String> {
    let interval = Duration::from_secs(u64::from(shape.interval_seconds));
    let started = Instant::now();
    let deadline = started + interval * 20;
    let writes = |page: &[probe::Series]| probe::sum(page, "mds_decisions_total", &[]);
    let passes = |page: &[probe::Series]| probe::sum(page, "mds_passes_total", &[]);
    let mut mark = controller.metrics().await?;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = controller.metrics().await?;
        let total = writes(&now);
        if total != writes(&mark) {
            mark = now;
        } else if passes(&now) - passes(&mark) >= shape.targets as f64 {
            return Ok(started.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the controller never ran a pass of every scaler without a target write in {} s \
                 ({} target writes in all)",
                (interval * 20).as_secs(),
                total
            ));
        }
    }
}

/// The stand-in's errors so far, as a setup failure.
fn check_standin(lab: &Lab) -> Result<(), String> {
    let errors = lab.standin.take_errors();
    if errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = errors.iter().take(5).map(String::as_str).collect();
    Err(format!(
        "the stand-in reported {} errors, first: {}",
        errors.len(),
        shown.join("; ")
    ))
}
