//! `mds simulate`: what would this scaler have done on this traffic, and what would it have
//! cost? The operator's own worker and decision core run at virtual time against the
//! simulated GPUStack target, Kueue and engines (docs/simulator.md).

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use jiff::SignedDuration;
use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;
use mds_simulate::compare::Contender;
use mds_simulate::frontier::Policy;
use mds_simulate::run::{RunOptions, run};

use super::inputs::{Admitted, Stop, UNUSABLE, admitted, documents, unusable};
use super::simulate_compare as compare;
use super::simulate_io::{Progress, report_name, report_path, write_json, write_page};
use super::simulate_options::{
    bad_flag, check_fluid_reading, check_quota_types, check_something_fits, cold_starts, jobs,
    list_profiles, load, load_stem, options, shaped,
};
use crate::manifest::parse_documents;

/// The example run with no arguments: a TokenThroughput scaler and its target.
const EXAMPLE: &str = include_str!("../../../../examples/simulate/chat.yaml");
const EXAMPLE_NAME: &str = "examples/simulate/chat.yaml (bundled)";

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
    /// around its means; zero-rate windows are gaps, filled from the window before; only the
    /// --from/--until window is generated); FILE bundled:servegen-m-large is a 14-day curve
    /// of a large language service (about 200 req/s at scale 1).
    #[arg(long, value_name = "SPEC")]
    pub load: Option<String>,
    /// The load of your own engines, read from your Prometheus at URL (its HTTP API; a
    /// user:password@ in the URL is sent as basic auth): per window, the request rate, mean
    /// prompt and output lengths and prefix-hit share of the vLLM or SGLang series --match
    /// selects, over --since or --start/--end, with increase() at step = --window. Offered as a
    /// rate curve (seeded Poisson arrivals, lengths around each window's means), cut by
    /// --from/--until like one. docs/simulator.md, "Load from your Prometheus".
    #[arg(long, value_name = "URL", conflicts_with_all = ["trace", "load"])]
    pub from_prometheus: Option<String>,
    /// With --from-prometheus: label matchers picking one deployment's engine series, PromQL
    /// style, comma-separated: model_name=NAME,namespace=NS (also !=, =~ and !~; quote a value
    /// holding a comma). Repeatable. Without it every engine series, refused when they are
    /// several deployments' (the error lists them).
    #[arg(
        long = "match",
        value_name = "LABEL=VALUE,...",
        requires = "from_prometheus"
    )]
    pub matchers: Vec<String>,
    /// With --from-prometheus: read the last DURATION (90m, 6h, 7d, 1h30m) up to --end or now;
    /// up to now, windows are whole windows of the clock.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "from_prometheus",
        conflicts_with = "start"
    )]
    pub since: Option<String>,
    /// With --from-prometheus: read from this time on, RFC 3339 with its offset
    /// (2025-06-01T00:00:00Z); a rest of the range short of a window is left out at the end.
    #[arg(long, value_name = "TIME", requires = "from_prometheus")]
    pub start: Option<String>,
    /// With --from-prometheus: read up to this time, RFC 3339 (default: now).
    #[arg(long, value_name = "TIME", requires = "from_prometheus")]
    pub end: Option<String>,
    /// With --from-prometheus: the window length, the query's step and increase()'s range; at
    /// least 15 s and twice the scrape interval. Default from the range: 1m up to 6 h, 5m up
    /// to 2 days, 10m up to 14 days, 30m up to 60 days, 1h beyond.
    #[arg(long, value_name = "DURATION", requires = "from_prometheus")]
    pub window: Option<String>,
    /// With --from-prometheus: fill windows without samples from the window before (leading
    /// ones from the first with samples) instead of refusing the range.
    #[arg(long, requires = "from_prometheus")]
    pub fill_gaps: bool,
    /// With --from-prometheus: also write the windows as a rate-curve CSV that
    /// --load curve:file=FILE,scale=1 reads back (a window with no request reads back as a
    /// gap).
    #[arg(long, value_name = "FILE", requires = "from_prometheus")]
    pub save_curve: Option<PathBuf>,
    /// With --from-prometheus: a file holding a bearer token to send (Authorization: Bearer).
    #[arg(long, value_name = "FILE", requires = "from_prometheus")]
    pub prometheus_token_file: Option<PathBuf>,
    /// With --from-prometheus: each request's budget, connecting included (default 60s, at
    /// most 1h).
    #[arg(long, value_name = "TIME", requires = "from_prometheus")]
    pub prometheus_timeout: Option<String>,
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
    /// Your own autoscaler as a peer, read as written (repeatable): an autoscaling/v2
    /// HorizontalPodAutoscaler, a KEDA ScaledObject (prometheus triggers), a Knative Service,
    /// Configuration or Revision (its autoscaling annotations) or an AIBrix PodAutoscaler.
    /// Its metric, target, min/max, behaviour and windows are simulated; the row is named
    /// after the file. Joins --compare and --frontier (swept over its targets, and as
    /// written), prices --suggest's peer lines, and alone compares it with the scaler.
    #[arg(long, value_name = "FILE")]
    pub peer: Vec<PathBuf>,
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
    /// long-prompt traces (500ms+100ms/1k); then, comma-separated, prompt classes with their
    /// own objective, TOKENS=TIME (500ms,4k=2s: 2 s for prompts of 4,000 tokens and more).
    #[arg(
        long,
        value_name = "TIME[+TIME/1k][,TOKENS=TIME...]",
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
    /// Simulate `spec.mode` and `spec.suspend` as written. Without it, a Shadow or suspended
    /// scaler (which only reports, so never scales) is simulated as Active, answering "what
    /// would it do if it wrote the counts", and the output's first line says so.
    #[arg(long)]
    pub as_written: bool,
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

fn run_inner(args: &Args, notes: &mut String) -> Result<(String, u8), Stop> {
    if args.profile.as_deref() == Some("list") {
        return Ok((list_profiles(), 0));
    }
    let case = prepare(args, notes)?;
    // What was said about the inputs is read before the results (and before a long run).
    super::emit("", notes);
    notes.clear();
    // The output starts with the headline `prepare` wrote.
    let headline = case.headline.clone();
    let (out, code) = run_case(args, case, notes)?;
    Ok((headline + &out, code))
}

fn run_case(args: &Args, case: Prepared, notes: &mut String) -> Result<(String, u8), Stop> {
    if let (true, Some(path)) = (args.suggest, &args.metrics) {
        if !case.peers.is_empty() {
            return Err(unusable(
                "--peer with --metrics: recorded metrics price no policy; drop --metrics to price your autoscalers on a simulation",
            ));
        }
        return super::simulate_suggest::from_metrics(
            path,
            &case.scaler,
            &case.target,
            case.options.slo,
        );
    }
    if args.suggest {
        return suggest(args, case);
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
    // The scaler's own targets drive its guards; the SLO only grades: say when they differ,
    // before the results. A scaler without token targets has no guard targets of its own;
    // then only the token rows derived from it have any, and only when they run.
    if let Some(g) = mds_simulate::guards::of(&case.scaler, &case.target).ok()
        && (g.in_spec || derived_token_rows_run(frontier.is_some(), args.compare.as_deref()))
        && let Some(note) = mds_simulate::guards::differ_note(g, &case.options.slo)
    {
        super::emit("", &super::note_line(&note));
    }
    if let Some(tiers) = &frontier {
        return frontier_run(args, case, tiers, notes);
    }
    let selection = match args.compare.as_deref() {
        Some("none") => None,
        Some(value) => Some(value),
        None if args.scaler.is_none() && !args.fault.is_empty() => None,
        None if case.cold_starts.len() > 1 || !case.peers.is_empty() => Some("mds"),
        None => None,
    };
    super::simulate_faults::alone(&case.options, selection.is_some())?;
    match selection {
        Some(value) => compare_run(args, case, value, notes),
        None => single_run(args, case, notes),
    }
}

/// Whether our token algorithms run with targets derived from the scaler's capacity: the
/// frontier's default policies, `--compare all`, or a list naming them.
fn derived_token_rows_run(frontier: bool, compare: Option<&str>) -> bool {
    match compare {
        None => frontier,
        Some(list) => list.split(',').any(|name| {
            matches!(
                name.trim(),
                "all" | "mds-tokenthroughput" | "mds-predictive"
            )
        }),
    }
}

/// Everything a run needs, read from the flags and the manifests and checked.
struct Prepared {
    scaler: ModelDeploymentScaler,
    target: ModelDeployment,
    trace: Trace,
    /// The trace's description.
    name: String,
    options: RunOptions,
    cold_starts: Vec<Option<SignedDuration>>,
    /// The quotas as the report shows them.
    quota_note: String,
    /// Lines the output starts with: how the scaler as written was changed to be simulated,
    /// and what holds its counts whatever the load.
    headline: String,
    /// The team's own autoscalers (`--peer`).
    peers: Vec<Arc<mds_simulate::peers::file::PeerFile>>,
}

/// The scaler and its target as admission would take them (the target in its own file, in the
/// scaler's, or a stand-in), the profile the target's model picks unless `--profile` names
/// one, the shaped trace and the quotas; refused when no quota type is used or nothing fits.
fn prepare(args: &Args, notes: &mut String) -> Result<Prepared, Stop> {
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
    let Admitted { mut scaler, target } = admitted(
        (&scaler_docs, &scaler_name),
        target_docs,
        "simulated",
        notes,
    )?;
    let mut headline = if args.as_written {
        String::new()
    } else {
        super::simulate_scaler::simulated_as_active(&mut scaler)
    };
    let model = target
        .pointer("/spec/model/name")
        .and_then(|m| m.as_str())
        .map(str::to_string);
    let target: ModelDeployment = serde_json::from_value(target)
        .map_err(|e| unusable(format!("the target cannot be read: {e}")))?;
    if target
        .spec
        .engine
        .as_ref()
        .is_some_and(|e| !e.name.is_empty())
        && let Err(unknown) = target.engine_kind()
    {
        return Err(unusable(format!(
            "ModelDeployment {:?} spec.engine.name: {unknown}; no engine serves it in the simulation",
            target.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    if args.profile.is_none() {
        let chosen = mds_sim::profile::for_target(
            model.as_deref(),
            target.spec.engine.as_ref(),
            &target.spec.roles,
        )
        .map_err(|e| unusable(e.to_string()))?;
        options.profile = chosen.profile;
        options.profile_why = chosen.why;
    }
    let (trace, name) = load(args, notes)?;
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
    for warning in super::simulate_scaler::quota_below_floor(
        &options.quota,
        &scaler,
        &target,
        options.profile.gpus_per_pod,
    ) {
        notes.push_str(&super::warning_line(&warning));
    }
    check_fluid_reading(&options, &target)?;
    check_something_fits(&options, &trace)?;
    headline.push_str(&super::simulate_scaler::held_by_target(&scaler, &target));
    let peers = super::simulate_peers::read(&args.peer, &target, notes)?;
    Ok(Prepared {
        scaler,
        target,
        trace,
        name,
        options,
        cold_starts,
        quota_note,
        headline,
        peers,
    })
}

/// Whether to draw a progress bar: asked for and on a terminal.
fn progress(args: &Args) -> bool {
    !args.no_progress && std::io::stderr().is_terminal()
}

/// `--suggest`: the cheapest settings that meet the goal, at one cold start.
fn suggest(args: &Args, mut case: Prepared) -> Result<(String, u8), Stop> {
    // One search answers for one world: a sweep of cold starts would need one answer each.
    if case.cold_starts.len() > 1 {
        return Err(bad_flag(
            "cold-start",
            args.cold_start.as_deref().unwrap_or_default(),
            "--suggest searches at one cold start; give one value and run it once per cold start",
        ));
    }
    if let Some(cold_start) = case.cold_starts[0] {
        case.options.cold_start = Some(cold_start);
    }
    let run = mds_simulate::compare::Case {
        scaler: &case.scaler,
        target: &case.target,
        trace: Arc::new(case.trace),
        load: &case.name,
        options: &case.options,
    };
    super::simulate_suggest::run(&run, args.goal, &case.peers)
}

/// `--frontier` (and the first screen): every policy's cost at each tier of attainment.
fn frontier_run(
    args: &Args,
    case: Prepared,
    tiers: &str,
    notes: &mut String,
) -> Result<(String, u8), Stop> {
    super::simulate_faults::alone(&case.options, true)?;
    let page = report_path(
        args.no_report,
        args.report.as_deref(),
        args.json.as_deref(),
        &report_name(&load_stem(args), "frontier"),
    )?;
    let request = super::simulate_frontier::Request {
        tiers: super::simulate_frontier::tiers(tiers)?,
        grid: super::simulate_frontier::grid(args.frontier_grid.as_deref())?,
        policies: super::simulate_frontier::policies(args.compare.as_deref())?
            .into_iter()
            .chain(case.peers.iter().cloned().map(Policy::File))
            .collect(),
        jobs: jobs(args)?,
        cold_starts: &case.cold_starts,
        quota: &case.quota_note,
        json: args.json.as_deref(),
        page: page.as_deref(),
        progress: progress(args),
    };
    let (out, violations) = super::simulate_frontier::run(
        &case.scaler,
        &case.target,
        case.trace,
        &case.name,
        &case.options,
        &request,
    )?;
    if violations > 0 {
        notes.push_str(&super::error_line(&format!(
            "{violations} invariant violation(s) by our scaler's trials (they reach no tier): run one with --compare none to list them"
        )));
        return Ok((out, VIOLATED));
    }
    Ok((out, 0))
}

/// `--compare`: our scaler beside the policies selected, on the same trace and world.
fn compare_run(
    args: &Args,
    case: Prepared,
    selection: &str,
    notes: &mut String,
) -> Result<(String, u8), Stop> {
    let contenders = match compare::selection(
        selection,
        &case.scaler,
        &case.target,
        &case.trace,
        &case.options,
    )? {
        compare::Selection::List(text) => return Ok((text, 0)),
        compare::Selection::Run(c) => c
            .into_iter()
            .chain(case.peers.iter().map(|peer| Contender::File {
                peer: peer.clone(),
                factor: 1.0,
            }))
            .collect::<Vec<_>>(),
    };
    let page = report_path(
        args.no_report,
        args.report.as_deref(),
        args.json.as_deref(),
        &report_name(&load_stem(args), "compare"),
    )?;
    let (out, violations) = compare::run(
        &case.scaler,
        &case.target,
        case.trace,
        &case.name,
        &case.options,
        &case.cold_starts,
        &contenders,
        &case.quota_note,
        args.json.as_deref(),
        page.as_deref(),
        progress(args),
    )?;
    if violations > 0 {
        notes.push_str(&super::error_line(&format!(
            "{violations} invariant violation(s) by our scaler: run it alone (--compare none) to list them"
        )));
        return Ok((out, VIOLATED));
    }
    Ok((out, 0))
}

/// Our scaler alone: the summary, the JSON and page when asked for, and the exit status (an
/// invariant broken, or nothing served).
fn single_run(args: &Args, case: Prepared, notes: &mut String) -> Result<(String, u8), Stop> {
    let Prepared {
        scaler,
        target,
        trace,
        name,
        options,
        quota_note,
        ..
    } = case;
    let requests = trace.requests.len();
    let mut bar = Progress::new(progress(args));
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
        let code = if served_nothing.is_some() {
            NOTHING_SERVED
        } else {
            0
        };
        return Ok((out, code));
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
