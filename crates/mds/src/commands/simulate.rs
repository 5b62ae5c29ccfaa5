//! `mds simulate`: what would this scaler have done on this traffic, and what would it have
//! cost? The operator's own worker and decision core run at virtual time against the
//! simulated GPUStack target, Kueue and engines (docs/simulator.md).

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use jiff::SignedDuration;
use mds_api::target::ModelDeployment;
use mds_sim::Router;
use mds_sim::load::{Synthetic, Trace, parse_seconds};
use mds_simulate::profile::{DEFAULT_PROFILE, profile, profiles};
use mds_simulate::run::{EngineModel, PdRetirements, RunOptions, run};
use mds_simulate::slo::{ItlReading, Slo};

use super::inputs::{Admitted, Stop, UNUSABLE, admitted, documents, unusable};
use super::simulate_compare as compare;
use super::simulate_io::{Progress, report_name, report_path, write_json, write_page};
use crate::manifest::parse_documents;

/// The example run with no arguments: a TokenThroughput scaler and its target.
const EXAMPLE: &str = include_str!("../../../../examples/simulate/chat.yaml");
const EXAMPLE_NAME: &str = "examples/simulate/chat.yaml (bundled)";

/// The traces in data/traces, by the name `--trace bundled:NAME` takes.
const BUNDLED: &[(&str, &str)] = &[
    (
        "azure-2023-conv",
        include_str!("../../../../data/traces/azure-2023-conv.csv"),
    ),
    (
        "azure-2023-code",
        include_str!("../../../../data/traces/azure-2023-code.csv"),
    ),
    (
        "mooncake-synthetic",
        include_str!("../../../../data/traces/mooncake-synthetic.jsonl"),
    ),
];
const DEFAULT_TRACE: &str = "azure-2023-conv";

/// Exit status when the run broke one of the spec's invariants.
const VIOLATED: u8 = 1;
/// A run that finished no request (every one rejected, unrouted or unfinished).
const NOTHING_SERVED: u8 = 3;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ModelDeploymentScaler manifest (YAML), with its ModelDeployment in the same file or
    /// in --target. Without it, the bundled example's scaler: TokenThroughput on one vLLM
    /// Server role (examples/simulate/chat.yaml), drawn as a frontier against every policy.
    #[arg(long, value_name = "FILE")]
    pub scaler: Option<PathBuf>,
    /// The target ModelDeployment manifest (YAML). Without it, the ModelDeployment in the
    /// scaler's file that its targetRef names, else a stand-in where every scaler role is a
    /// Server role at its minReplicas.
    #[arg(long, value_name = "FILE")]
    pub target: Option<PathBuf>,
    /// A request trace: an Azure LLM inference CSV (.csv) or a Mooncake JSONL (.jsonl), or
    /// `bundled:NAME` for a trace in data/traces (azure-2023-conv, azure-2023-code,
    /// mooncake-synthetic). Default: bundled:azure-2023-conv.
    #[arg(long, value_name = "FILE", conflicts_with = "load")]
    pub trace: Option<String>,
    /// A synthetic load instead of a trace, `SHAPE:key=value,...`: constant:rate=4,
    /// step:from=2,to=8,at=600, ramp:from=1,to=10,start=300,over=1200,
    /// sinusoid:mean=4,amplitude=3,period=1800, flash-crowd:base=2,peak=20,at=900,rise=30,
    /// hold=300,decay=120, on-off:rate=6,on=300,off=600; common keys duration (3600 s),
    /// prompt (1024) and output (256) tokens. Or a rate curve from a CSV of windows,
    /// curve:file=FILE,scale=F (seeded Poisson arrivals at F times each window's rate, lengths
    /// around its means; zero-rate windows are gaps, filled from the window before).
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// Keep the trace's requests from this time on (seconds, or 90s, 15m, 1h).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Keep the trace's requests before this time.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Multiplies the trace's times: 0.5 plays it twice as fast.
    #[arg(long, value_name = "FACTOR")]
    pub time_scale: Option<f64>,
    /// Multiplies the request rate, keeping the duration (copies or thins requests).
    #[arg(long, value_name = "FACTOR")]
    pub rate: Option<f64>,
    /// Mean cold start of a replica, admission to Ready (default: the profile's); each start
    /// draws within the profile's spread. A comma list (0,30,60,120,300) sweeps: one
    /// comparison table per cold start.
    #[arg(long, value_name = "TIME[,TIME...]")]
    pub cold_start: Option<String>,
    /// Compare policies on the same world, trace, seed and actuator. No value: this scaler
    /// and every peer (HPA, Knative KPA, AIBrix KPA/APA, Dynamo-like, WVA, static peak);
    /// `all`: our three algorithms, with targets derived from the scaler's one capacity, and
    /// every peer; or a comma list of names (`--compare list` lists them); `none`: this
    /// scaler alone. Default: `all` when no --scaler is given, else `none`.
    #[arg(long, value_name = "POLICIES", num_args = 0..=1, default_missing_value = "peers")]
    pub compare: Option<String>,
    /// Every policy at its best: sweep each selected policy's one sizing knob (our capacity,
    /// a request target, a KV-usage target or threshold, the SLA targets) and print, per
    /// attainment tier (percent, default 90,95,99), the cheapest GPU-hours that reaches it,
    /// against Oracle B sized from the engine's knee at the tier. Policies: --compare (all,
    /// peers or names); without it, our three algorithms, the --suggest row and one of each
    /// peer.
    #[arg(long, value_name = "TIERS", num_args = 0..=1, default_missing_value = "90,95,99", conflicts_with = "suggest")]
    pub frontier: Option<String>,
    /// The factors --frontier tries first on every knob, MIN..MAX[:POINTS], geometric
    /// (default 0.25..8:6, doubling); each tier's bracket is then halved three times.
    #[arg(long, value_name = "MIN..MAX[:POINTS]", requires = "frontier")]
    pub frontier_grid: Option<String>,
    /// Runs side by side (default: the machine's cores); the output is the same whatever
    /// the number.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Search the scaler's per-replica targets (token capacities, or Proportional's request
    /// targets) for the cheapest setting whose SLO attainment meets --goal, and print it as a
    /// fragment to paste into the scaler.
    #[arg(long, conflicts_with = "compare")]
    pub suggest: bool,
    /// With --suggest: recorded metrics instead of a simulation, a timeline in the `mds
    /// replay` format (JSON Lines of per-role load and p95 latency); suggests each role's
    /// target from the load at which its latency left the SLO.
    #[arg(long, value_name = "FILE", requires = "suggest")]
    pub metrics: Option<PathBuf>,
    /// The SLO attainment, in percent, that --suggest must meet and that the knee (what one
    /// replica serves, which sizes the oracles) is found at.
    #[arg(long, value_name = "PERCENT", default_value_t = 95.0)]
    pub goal: f64,
    /// The engine profile (model, GPU, engine version); `--profile list` lists them. Default:
    /// the profile of the target's `spec.model` on its engine, else llama3-8b-h100-vllm.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// The engine model: request (request by request, as vLLM schedules) or fluid (fluid
    /// queues, for long traces).
    #[arg(long, value_name = "MODEL", default_value = "request")]
    pub engine: String,
    /// How the target's router picks an instance: least-outstanding, round-robin or
    /// prefix-aware.
    #[arg(long, value_name = "POLICY", default_value = "least-outstanding")]
    pub router: String,
    /// Seeds every draw (synthetic arrivals, rate copies, cold starts): the same inputs and
    /// seed give the same output, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The TTFT objective: a time, or a time plus an allowance per 1,000 prompt tokens for
    /// long-prompt traces (500ms+100ms/1k).
    #[arg(
        long,
        value_name = "TIME[+TIME/1k]",
        default_value = "500ms",
        allow_hyphen_values = true
    )]
    pub slo_ttft: String,
    /// The TTFT objective as K times each request's TTFT on an idle replica of the profile
    /// (DistServe's "SLO scale"), instead of --slo-ttft.
    #[arg(long, value_name = "K")]
    pub slo_scale: Option<f64>,
    /// The inter-token latency objective.
    #[arg(
        long,
        value_name = "TIME",
        default_value = "50ms",
        allow_hyphen_values = true
    )]
    pub slo_itl: String,
    /// How a request's inter-token latency is read against --slo-itl: p95 (its own p95 gap
    /// between output tokens, as the engine's histogram and the scaler's guard read it) or
    /// mean (its mean gap, the lenient reading that hides stalls).
    #[arg(long, value_name = "p95|mean", default_value = "p95")]
    pub slo_itl_mode: String,
    /// GPU quota of an instance type, `TYPE=GPUS` (repeatable; default unlimited), or `auto`:
    /// each instance type at 80 % of the GPUs static peak would hold.
    #[arg(long, value_name = "TYPE=GPUS")]
    pub quota: Vec<String>,
    /// What the stand-in GPUStack does with a Prefill/Decode retirement: abort (the GPUStack
    /// revisions examined refuse them outright) or complete (as the spec describes).
    #[arg(long, value_name = "abort|complete", default_value = "abort")]
    pub pd_retirements: String,
    /// Inject a fault into our scaler's run, `KIND:key=value,...` (repeatable; not with a
    /// comparison). Windows take from=TIME,until=TIME (default: the whole run), shares
    /// rate=0.1 (default 1), draws follow --seed. Kinds: api-conflict, api-unavailable
    /// (writes answered 409 / 503; writes=target+status), webhook-outage (target and
    /// finalizer writes fail as a webhook that cannot be called fails them), scrape-timeout,
    /// scrape-garbage (pages; ordinals=0+2, role=NAME), counter-reset (at=TIME; the counters of
    /// chosen Pods restart from 0), quota-never-admits (the quota frozen at what is held;
    /// type=INSTANCE_TYPE), retirement-abort, operator-restart (at=TIME, down=TIME),
    /// leader-change (at=TIME, lease=TIME, default 15s).
    #[arg(long, value_name = "SPEC")]
    pub fault: Vec<String>,
    /// Write everything (inputs, summary, one-minute bins, passes, violations) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report, one self-contained HTML page with the plots, the summary table and
    /// the inputs. Default: next to --json (its name with .html), else
    /// mds-TRACE-frontier.html, mds-TRACE-compare.html or mds-TRACE-run.html (TRACE: the
    /// trace's name or the load's kind) in $MDS_REPORT_DIR or the current directory.
    #[arg(long, value_name = "FILE", conflicts_with = "no_report")]
    pub report: Option<PathBuf>,
    /// Write no HTML report.
    #[arg(long)]
    pub no_report: bool,
    /// Also print the one-minute bins.
    #[arg(long)]
    pub minutes: bool,
    /// No progress bar, even on a terminal.
    #[arg(long)]
    pub no_progress: bool,
}

pub fn run_command(args: &Args) -> ExitCode {
    let mut notes = String::new();
    match run_inner(args, &mut notes) {
        Ok((out, code)) => {
            super::emit(&out, &notes);
            ExitCode::from(code)
        }
        Err(stop) => {
            super::emit("", &(notes + &stop.text));
            ExitCode::from(stop.code)
        }
    }
}

fn bad_flag(flag: &str, value: &str, rule: &str) -> Stop {
    unusable(format!("--{flag} {value:?}: {rule}"))
}

fn seconds_flag(flag: &str, value: &str) -> Result<f64, Stop> {
    parse_seconds(value).map_err(|rule| bad_flag(flag, value, &rule))
}

fn factor_flag(flag: &str, value: f64) -> Result<f64, Stop> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(bad_flag(
            flag,
            &value.to_string(),
            "it must be a positive number",
        ))
    }
}

/// The trace to offer and its description.
fn load(args: &Args) -> Result<(Trace, String), Stop> {
    if let Some(spec) = &args.load {
        if let Some(rest) = spec.trim().strip_prefix("curve:") {
            return rate_curve(rest, args.seed);
        }
        let synthetic = Synthetic::parse(spec).map_err(|e| unusable(format!("--load: {e}")))?;
        return Ok((synthetic.generate(args.seed), synthetic.describe()));
    }
    let source = args
        .trace
        .clone()
        .unwrap_or_else(|| format!("bundled:{DEFAULT_TRACE}"));
    let (text, name, jsonl) = match source.strip_prefix("bundled:") {
        Some(name) => {
            let Some((_, text)) = BUNDLED.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = BUNDLED.iter().map(|(n, _)| *n).collect();
                return Err(bad_flag(
                    "trace",
                    &source,
                    &format!("no bundled trace of that name; known: {}", known.join(", ")),
                ));
            };
            (
                text.to_string(),
                name.to_string(),
                name.starts_with("mooncake"),
            )
        }
        None => {
            let path = PathBuf::from(&source);
            let text = super::read_text(&path, super::MAX_INPUT_BYTES).map_err(|e| {
                // A bundled trace's name given as a path.
                let hint = BUNDLED
                    .iter()
                    .find(|(n, _)| *n == source.trim_end_matches(".csv").trim_end_matches(".jsonl"))
                    .map(|(n, _)| format!("; did you mean bundled:{n}?"))
                    .unwrap_or_default();
                unusable(format!("{source}: cannot read: {e}{hint}"))
            })?;
            let jsonl = source.ends_with(".jsonl") || source.ends_with(".json");
            (text, source.clone(), jsonl)
        }
    };
    let parsed = if jsonl {
        Trace::parse_mooncake_jsonl(&text)
    } else {
        Trace::parse_azure_csv(&text)
    };
    let trace = parsed.map_err(|e| unusable(format!("{name}: {e}")))?;
    if trace.requests.is_empty() {
        return Err(unusable(format!("{name}: holds no request")));
    }
    Ok((trace, name))
}

/// What a default report is named after: the bundled trace's name, the trace file's stem, or
/// the synthetic load's kind.
fn load_stem(args: &Args) -> String {
    if let Some(spec) = &args.load {
        return spec.trim().split(':').next().unwrap_or("load").to_string();
    }
    match &args.trace {
        None => DEFAULT_TRACE.to_string(),
        Some(source) => match source.strip_prefix("bundled:") {
            Some(name) => name.to_string(),
            None => Path::new(source)
                .file_stem()
                .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned()),
        },
    }
}

/// `--load curve:file=FILE,scale=F`.
fn rate_curve(rest: &str, seed: u64) -> Result<(Trace, String), Stop> {
    let given = mds_sim::load::key_values("curve", rest, &["file", "scale"])
        .map_err(|e| unusable(format!("--load: {e}")))?;
    let find = |key: &str| given.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let Some(file) = find("file") else {
        return Err(unusable(
            "--load: curve: missing required key file; curve needs file and scale",
        ));
    };
    let scale = match find("scale").map(str::parse::<f64>) {
        Some(Ok(f)) => f,
        Some(Err(_)) | None => {
            return Err(unusable(
                "--load: curve: scale must be a positive number (the share of the curve's rate one deployment gets)",
            ));
        }
    };
    let text = super::read_text(std::path::Path::new(file), super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{file}: cannot read: {e}")))?;
    let curve = mds_sim::load::RateCurve::parse_csv(&text, scale)
        .map_err(|e| unusable(format!("{file}: {e}")))?;
    Ok((curve.generate(seed), curve.describe(file)))
}

/// The trace after --from/--until, --time-scale and --rate, and its description.
fn shaped(args: &Args, trace: Trace, mut name: String) -> Result<(Trace, String), Stop> {
    let mut trace = trace;
    if args.from.is_some() || args.until.is_some() {
        let from = match &args.from {
            Some(v) => seconds_flag("from", v)?,
            None => 0.0,
        };
        let until = match &args.until {
            Some(v) => Some(seconds_flag("until", v)?),
            None => None,
        };
        trace = trace.window(from, until).map_err(unusable)?;
        let _ = write!(
            name,
            ", {from} s to {}",
            until.map_or("the end".into(), |u| format!("{u} s"))
        );
    }
    if let Some(f) = args.time_scale {
        trace = trace
            .time_scaled(factor_flag("time-scale", f)?)
            .map_err(unusable)?;
        let _ = write!(name, ", time x{f}");
    }
    if let Some(f) = args.rate {
        trace = trace
            .rate_multiplied(factor_flag("rate", f)?, args.seed)
            .map_err(unusable)?;
        let _ = write!(name, ", rate x{f}");
    }
    if trace.requests.is_empty() {
        return Err(unusable(format!("{name}: no request is left to offer")));
    }
    Ok((trace, name))
}

fn options(args: &Args) -> Result<RunOptions, Stop> {
    let name = args.profile.as_deref().unwrap_or(DEFAULT_PROFILE);
    let profile = profile(name).map_err(|e| bad_flag("profile", name, &e))?;
    let mut options = RunOptions::new(profile);
    options.engine = match args.engine.as_str() {
        "request" => EngineModel::Request,
        "fluid" => EngineModel::Fluid,
        other => return Err(bad_flag("engine", other, "it must be request or fluid")),
    };
    options.router = Router::parse(&args.router).ok_or_else(|| {
        bad_flag(
            "router",
            &args.router,
            &format!("it must be one of {}", Router::NAMES.join(", ")),
        )
    })?;
    options.seed = args.seed;
    if let [one] = cold_starts(args)?.as_slice() {
        options.cold_start = *one;
    }
    let (ttft, allowance) = Slo::parse_ttft(&args.slo_ttft)
        .map_err(|rule| bad_flag("slo-ttft", &args.slo_ttft, &rule))?;
    let itl = mds_simulate::slo::latency(&args.slo_itl)
        .map_err(|rule| bad_flag("slo-itl", &args.slo_itl, &rule))?;
    if itl <= 0.0 {
        return Err(bad_flag("slo-itl", &args.slo_itl, "it must be positive"));
    }
    if let Some(k) = args.slo_scale
        && !(k.is_finite() && k > 0.0)
    {
        return Err(bad_flag(
            "slo-scale",
            &k.to_string(),
            "it must be a positive number",
        ));
    }
    let itl_reading = ItlReading::parse(&args.slo_itl_mode)
        .ok_or_else(|| bad_flag("slo-itl-mode", &args.slo_itl_mode, "it must be p95 or mean"))?;
    options.slo = Slo {
        ttft_seconds: ttft,
        ttft_per_1k_prompt_seconds: allowance,
        ttft_scale: args.slo_scale,
        itl_seconds: itl,
        itl_reading,
    };
    for q in args.quota.iter().filter(|q| *q != "auto") {
        let parsed = q
            .split_once('=')
            .and_then(|(t, g)| Some((t.trim(), g.trim().parse::<u32>().ok()?)))
            .filter(|(t, _)| !t.is_empty());
        let Some((instance_type, gpus)) = parsed else {
            return Err(bad_flag(
                "quota",
                q,
                "it must be TYPE=GPUS, an instance type and a whole number of GPUs",
            ));
        };
        options.quota.insert(instance_type.to_string(), Some(gpus));
    }
    options.pd_retirements = PdRetirements::parse(&args.pd_retirements).ok_or_else(|| {
        bad_flag(
            "pd-retirements",
            &args.pd_retirements,
            "it must be abort or complete",
        )
    })?;
    options.faults = super::simulate_faults::parse(&args.fault)?;
    if !(args.goal.is_finite() && args.goal > 0.0 && args.goal <= 100.0) {
        return Err(bad_flag(
            "goal",
            &args.goal.to_string(),
            "it must be a percentage above 0 and at most 100",
        ));
    }
    if args.goal <= 1.0 {
        // A fraction where a percentage belongs would grade against almost nothing.
        return Err(bad_flag(
            "goal",
            &args.goal.to_string(),
            &format!(
                "a goal is a percentage, and one at or below 1 % is almost surely a fraction: did you mean {}?",
                args.goal * 100.0
            ),
        ));
    }
    options.goal = args.goal / 100.0;
    options.jobs = jobs(args)?;
    Ok(options)
}

/// A trace of which the profile refuses every request answers nothing: say so before a run.
fn check_something_fits(options: &RunOptions, trace: &Trace) -> Result<(), Stop> {
    match mds_simulate::slo::Refusals::of(trace, &options.profile) {
        Some(r) if r.requests as usize == trace.requests.len() => Err(unusable(format!(
            "nothing could be served: {}",
            r.describe(options.profile.name)
        ))),
        _ => Ok(()),
    }
}

/// Every `--quota TYPE` must be an instance type a role of the target uses: a quota on any
/// other type limits nothing, silently.
/// `stand_in`: the target is the one made without `--target`, whose roles use the type
/// `replay`.
fn check_quota_types(
    options: &RunOptions,
    target: &ModelDeployment,
    stand_in: bool,
) -> Result<(), Stop> {
    let used: Vec<&str> = target
        .spec
        .roles
        .iter()
        .filter_map(|r| r.instance_type.as_deref())
        .collect();
    for (kind, gpus) in &options.quota {
        if !used.contains(&kind.as_str()) {
            let mut types = used.clone();
            types.sort();
            types.dedup();
            let value = format!("{kind}={}", gpus.map_or("auto".into(), |g| g.to_string()));
            return Err(bad_flag(
                "quota",
                &value,
                &format!(
                    "no role of the target uses instance type {kind:?}, so it would limit nothing; the target's roles use {}{}",
                    if types.is_empty() {
                        "no instanceType".to_string()
                    } else {
                        types.join(", ")
                    },
                    if stand_in {
                        " (the stand-in target made without --target; pass your ModelDeployment with --target FILE to quota its types)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// `--jobs`, or the machine's cores.
fn jobs(args: &Args) -> Result<usize, Stop> {
    match args.jobs {
        Some(0) => Err(bad_flag("jobs", "0", "it must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `--cold-start`: one value, or a comma list to sweep (`[None]` without the flag).
fn cold_starts(args: &Args) -> Result<Vec<Option<SignedDuration>>, Stop> {
    let Some(list) = &args.cold_start else {
        return Ok(vec![None]);
    };
    let mut out = Vec::new();
    for v in list.split(',').map(str::trim) {
        let seconds = seconds_flag("cold-start", v)?;
        if seconds > mds_simulate::run::MAX_COLD_START_SECONDS {
            return Err(bad_flag("cold-start", v, "it must be at most one day"));
        }
        out.push(Some(SignedDuration::from_secs_f64(seconds)));
    }
    Ok(out)
}

fn list_profiles() -> String {
    let mut out = String::new();
    for p in profiles() {
        let _ = writeln!(
            out,
            "{:<24} {} (cold start {} s ± {:.0} %, {} GPU per Pod)",
            p.name,
            p.summary,
            p.cold_start.as_secs(),
            p.cold_start_spread * 100.0,
            p.gpus_per_pod
        );
    }
    out
}

fn run_inner(args: &Args, notes: &mut String) -> Result<(String, u8), Stop> {
    if args.profile.as_deref() == Some("list") {
        return Ok((list_profiles(), 0));
    }
    let mut options = options(args)?;
    let (scaler_docs, scaler_name) = match &args.scaler {
        Some(path) => (documents(path)?, path.display().to_string()),
        None => (
            parse_documents(EXAMPLE_NAME, EXAMPLE.as_bytes()).map_err(unusable)?,
            EXAMPLE_NAME.to_string(),
        ),
    };
    let given_target = match &args.target {
        Some(path) => Some((documents(path)?, path.display().to_string())),
        None => None,
    };
    let target_docs: Option<(&[_], &str)> = match &given_target {
        Some((docs, name)) => Some((docs.as_slice(), name.as_str())),
        None if scaler_docs.iter().any(|d| d.is("ModelDeployment")) => {
            Some((scaler_docs.as_slice(), scaler_name.as_str()))
        }
        None => None,
    };
    let stand_in = target_docs.is_none();
    let Admitted { scaler, target } = admitted(
        (&scaler_docs, &scaler_name),
        target_docs,
        "simulated",
        notes,
    )?;
    let model = target
        .pointer("/spec/model/name")
        .and_then(|m| m.as_str())
        .map(str::to_string);
    let target: ModelDeployment = serde_json::from_value(target)
        .map_err(|e| unusable(format!("the target cannot be read: {e}")))?;
    if args.profile.is_none() {
        let chosen = mds_sim::profile::for_target(model.as_deref(), target.spec.engine.as_ref());
        options.profile = chosen.profile;
        options.profile_why = chosen.why;
    }
    let (trace, name) = load(args)?;
    let (trace, name) = shaped(args, trace, name)?;
    let quota_note = if args.quota.iter().any(|q| q == "auto") {
        mds_simulate::compare::auto_quota(&scaler, &target, &trace, &mut options)
            .map_err(|e| unusable(format!("--quota auto: {e}")))?
    } else {
        options
            .quota
            .iter()
            .filter_map(|(t, g)| Some(format!("{t}={}", (*g)?)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let cold_starts = cold_starts(args)?;
    check_quota_types(&options, &target, stand_in)?;
    check_something_fits(&options, &trace)?;
    if let (true, Some(path)) = (args.suggest, &args.metrics) {
        return super::simulate_suggest::from_metrics(path, &scaler, &target, options.slo);
    }
    if args.suggest {
        // One search answers for one world: a sweep of cold starts would need one answer each.
        if cold_starts.len() > 1 {
            return Err(bad_flag(
                "cold-start",
                args.cold_start.as_deref().unwrap_or_default(),
                "--suggest searches at one cold start; give one value and run it once per cold start",
            ));
        }
        if let Some(cold_start) = cold_starts[0] {
            options.cold_start = Some(cold_start);
        }
        let case = mds_simulate::compare::Case {
            scaler: &scaler,
            target: &target,
            trace: Arc::new(trace),
            load: &name,
            options: &options,
        };
        return super::simulate_suggest::run(&case, args.goal);
    }
    // The scaler's own targets drive its guards; the SLO only grades: say when they differ.
    if let Some(note) = mds_simulate::guards::of(&scaler, &target)
        .ok()
        .and_then(|g| mds_simulate::guards::differ_note(g, &options.slo))
    {
        notes.push_str(&super::note_line(&note));
    }
    // Without a scaler of one's own, or a comparison or a suggestion asked for, the first
    // screen is the frontier of the bundled example.
    let frontier = match &args.frontier {
        Some(tiers) => Some(tiers.clone()),
        None if args.scaler.is_none() && args.compare.is_none() && args.fault.is_empty() => {
            Some(super::simulate_frontier::DEFAULT_TIERS.to_string())
        }
        None => None,
    };
    if let Some(tiers) = &frontier {
        super::simulate_faults::alone(&options, true)?;
        let page = report_path(
            args.no_report,
            args.report.as_deref(),
            args.json.as_deref(),
            &report_name(&load_stem(args), "frontier"),
        )?;
        let request = super::simulate_frontier::Request {
            tiers: super::simulate_frontier::tiers(tiers)?,
            grid: super::simulate_frontier::grid(args.frontier_grid.as_deref())?,
            policies: super::simulate_frontier::policies(args.compare.as_deref())?,
            jobs: jobs(args)?,
            cold_starts: &cold_starts,
            quota: &quota_note,
            json: args.json.as_deref(),
            page: page.as_deref(),
            progress: !args.no_progress && std::io::stderr().is_terminal(),
        };
        let (out, violations) =
            super::simulate_frontier::run(&scaler, &target, trace, &name, &options, &request)?;
        if violations > 0 {
            notes.push_str(&super::error_line(&format!(
                "{violations} invariant violation(s) by our scaler's trials (they reach no tier): run one with --compare none to list them"
            )));
            return Ok((out, VIOLATED));
        }
        return Ok((out, 0));
    }
    let selection = match args.compare.as_deref() {
        Some("none") => None,
        Some(value) => Some(value),
        None if args.scaler.is_none() && !args.fault.is_empty() => None,
        None if cold_starts.len() > 1 => Some("mds"),
        None => None,
    };
    super::simulate_faults::alone(&options, selection.is_some())?;
    if let Some(value) = selection {
        let contenders = match compare::selection(value, &scaler, &target, &trace, &options)? {
            compare::Selection::List(text) => return Ok((text, 0)),
            compare::Selection::Run(c) => c,
        };
        let (out, violations) = compare::run(
            &scaler,
            &target,
            trace,
            &name,
            &options,
            &cold_starts,
            &contenders,
            &quota_note,
            args.json.as_deref(),
            report_path(
                args.no_report,
                args.report.as_deref(),
                args.json.as_deref(),
                &report_name(&load_stem(args), "compare"),
            )?
            .as_deref(),
            !args.no_progress && std::io::stderr().is_terminal(),
        )?;
        if violations > 0 {
            notes.push_str(&super::error_line(&format!(
                "{violations} invariant violation(s) by our scaler: run it alone (--compare none) to list them"
            )));
            return Ok((out, VIOLATED));
        }
        return Ok((out, 0));
    }
    let requests = trace.requests.len();
    let mut bar = Progress::new(!args.no_progress && std::io::stderr().is_terminal());
    let trace = Arc::new(trace);
    let report = run(
        scaler.clone(),
        target.clone(),
        trace.clone(),
        &name,
        &options,
        &mut |done| bar.show(done),
    )
    .map_err(|e| Stop {
        code: UNUSABLE,
        text: super::error_line(&format!("the simulation could not run: {e}")),
    })?;
    bar.clear();
    if let Some(path) = &args.json {
        write_json(path, "the report", &report)?;
    }
    let mut out = mds_simulate::text::summary(&report, requests);
    if args.minutes {
        out.push_str(&mds_simulate::text::minutes(&report));
    }
    if let Some(path) = &args.json {
        let _ = writeln!(out, "json: {}", path.display());
    }
    if let Some(path) = report_path(
        args.no_report,
        args.report.as_deref(),
        args.json.as_deref(),
        &report_name(&load_stem(args), "run"),
    )? {
        let case = mds_simulate::compare::Case {
            scaler: &scaler,
            target: &target,
            trace,
            load: &name,
            options: &options,
        };
        let comparisons = [mds_simulate::compare::single(&case, report.clone())];
        write_page(&path, &name, requests, &quota_note, &comparisons, None)?;
        let _ = writeln!(out, "report: {}", path.display());
    }
    let served_nothing = mds_simulate::text::nothing_served(&report);
    if let Some(why) = &served_nothing {
        notes.push_str(&super::error_line(why));
    }
    if report.violations.is_empty() {
        return Ok((
            out,
            if served_nothing.is_some() {
                NOTHING_SERVED
            } else {
                0
            },
        ));
    }
    let mut lines = String::new();
    for v in &report.violations {
        let _ = writeln!(lines, "t={:.0}s: {}: {}", v.t, v.rule, v.detail);
    }
    notes.push_str(&super::error_line(&format!(
        "{} invariant violation(s):\n{}",
        report.violations.len(),
        lines.trim_end()
    )));
    Ok((out, VIOLATED))
}
