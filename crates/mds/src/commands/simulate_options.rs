//! `mds simulate`'s flags read into what a run needs: the trace (bundled, a file, a synthetic
//! load or a rate curve) and its shape, the run's options, and the checks that refuse a run
//! which could answer nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use jiff::SignedDuration;
use mds_api::target::ModelDeployment;
use mds_sim::Router;
use mds_sim::load::{Synthetic, Trace, parse_seconds};
use mds_simulate::profile::{DEFAULT_PROFILE, profile, profiles};
use mds_simulate::run::{EngineModel, PdRetirements, RunOptions};
use mds_simulate::slo::{ItlReading, Slo};

use super::inputs::{Stop, unusable};
use super::simulate::Args;

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

pub(super) fn bad_flag(flag: &str, value: &str, rule: &str) -> Stop {
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
pub(super) fn load(args: &Args, notes: &mut String) -> Result<(Trace, String), Stop> {
    if args.from_prometheus.is_some() {
        return super::simulate_prometheus::load(args, notes);
    }
    if let Some(spec) = &args.load {
        if let Some(rest) = spec.trim().strip_prefix("curve:") {
            return rate_curve(rest, args);
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
    if jsonl
        && args.time_scale.is_none()
        && let Some(note) = mds_sim::load::seconds_not_milliseconds(&trace.requests)
    {
        notes.push_str(&super::warning_line(&format!("{name}: {note}")));
    }
    Ok((trace, name))
}

/// What a default report is named after: the bundled trace's name, the trace file's stem, or
/// the synthetic load's kind (`prometheus` for `--from-prometheus`).
pub(super) fn load_stem(args: &Args) -> String {
    if args.from_prometheus.is_some() {
        return "prometheus".to_string();
    }
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

/// The rate curves in data/traces, by the name `curve:file=bundled:NAME` takes.
const BUNDLED_CURVES: &[(&str, &str)] = &[(
    "servegen-m-large",
    include_str!("../../../../data/traces/servegen-m-large.per-10min.csv"),
)];

/// `--load curve:file=FILE,scale=F`: only the `--from`/`--until` window is generated.
fn rate_curve(rest: &str, args: &Args) -> Result<(Trace, String), Stop> {
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
    let text = match file.strip_prefix("bundled:") {
        Some(name) => match BUNDLED_CURVES.iter().find(|(n, _)| *n == name) {
            Some((_, text)) => (*text).to_string(),
            None => {
                let known: Vec<String> = BUNDLED_CURVES
                    .iter()
                    .map(|(n, _)| format!("bundled:{n}"))
                    .collect();
                return Err(unusable(format!(
                    "--load: curve: no bundled curve {name:?}; bundled: {}",
                    known.join(", ")
                )));
            }
        },
        None => super::read_text(std::path::Path::new(file), super::MAX_INPUT_BYTES)
            .map_err(|e| unusable(format!("{file}: cannot read: {e}")))?,
    };
    let curve = mds_sim::load::RateCurve::parse_csv(&text, scale)
        .map_err(|e| unusable(format!("{file}: {e}")))?;
    let (from, until) = window_flags(args)?;
    let trace = curve
        .generate_within(args.seed, from, until)
        .map_err(|e| unusable(format!("{file}: {e}")))?;
    Ok((trace, curve.describe(file)))
}

/// `--from` (0 when unset) and `--until` (`None`: the load's end) in seconds.
pub(super) fn window_flags(args: &Args) -> Result<(f64, Option<f64>), Stop> {
    let from = match &args.from {
        Some(v) => seconds_flag("from", v)?,
        None => 0.0,
    };
    let until = match &args.until {
        Some(v) => Some(seconds_flag("until", v)?),
        None => None,
    };
    Ok((from, until))
}

/// The trace after --from/--until, --time-scale and --rate, and its description.
pub(super) fn shaped(args: &Args, trace: Trace, mut name: String) -> Result<(Trace, String), Stop> {
    let mut trace = trace;
    if args.from.is_some() || args.until.is_some() {
        let (from, until) = window_flags(args)?;
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

pub(super) fn options(args: &Args) -> Result<RunOptions, Stop> {
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
    let ((ttft, allowance), ttft_classes) = Slo::parse_ttft_classes(&args.slo_ttft)
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
        ttft_classes,
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
pub(super) fn check_something_fits(options: &RunOptions, trace: &Trace) -> Result<(), Stop> {
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
pub(super) fn check_quota_types(
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

/// The fluid engine grades a request where its output is made: with prefill and decode on
/// separate roles its TTFT (a prefill engine's prompt, the hand-off, a decode step) is not
/// one engine's to give, so such a run is refused rather than graded kindly.
pub(super) fn check_fluid_reading(
    options: &RunOptions,
    target: &ModelDeployment,
) -> Result<(), Stop> {
    use mds_api::target::RoleKind;
    let has = |kind: RoleKind| target.spec.roles.iter().any(|r| r.kind() == kind);
    if options.engine == EngineModel::Fluid && has(RoleKind::Prefill) && has(RoleKind::Decode) {
        return Err(bad_flag(
            "engine",
            "fluid",
            "the fluid engine cannot grade a disaggregated target's TTFT (the prompt on a Prefill role, the first token after the hand-off on a Decode role); use --engine request",
        ));
    }
    Ok(())
}

/// `--jobs`, or the machine's cores.
pub(super) fn jobs(args: &Args) -> Result<usize, Stop> {
    match args.jobs {
        Some(0) => Err(bad_flag("jobs", "0", "it must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `--cold-start`: one value, or a comma list to sweep (`[None]` without the flag).
pub(super) fn cold_starts(args: &Args) -> Result<Vec<Option<SignedDuration>>, Stop> {
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

pub(super) fn list_profiles() -> String {
    let mut out = String::new();
    let all = profiles();
    let width = all.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in all {
        let _ = writeln!(
            out,
            "{:<width$} {} (cold start {} s ± {:.0} %, {} GPU per Pod)",
            p.name,
            p.summary,
            p.cold_start.as_secs(),
            p.cold_start_spread * 100.0,
            p.gpus_per_pod
        );
    }
    out
}
