//! `mds inspect-metrics`: what the scaler reads from an engine's /metrics page, and the rates
//! and p95 latencies it would compute from two successive pages.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use jiff::{SignedDuration, Timestamp};
use mds_api::quantity::Quantity;
use mds_api::status::RoleStatus;
use mds_api::target::RoleKind;
use mds_signals::engine::{EngineKind, EngineSample, read, reading};
use mds_signals::exposition::{Page, parse};
use mds_signals::observation::{RoleInputs, RoleObservation, observe_role};
use mds_signals::samples::SampleStore;
use mds_signals::scrape::MAX_PAGE_BYTES;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    Vllm,
    Sglang,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleKindArg {
    Server,
    Prefill,
    Decode,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The engine that served the page (the target's spec.engine.name, in any case:
    /// vLLM, SGLang).
    #[arg(long, value_enum, ignore_case = true)]
    pub engine: EngineArg,
    /// The role kind: Decode roles add SGLang's KV transfer queue to waiting requests.
    #[arg(long, value_enum, ignore_case = true, default_value = "server")]
    pub role_kind: RoleKindArg,
    /// A saved /metrics page ('-' reads standard input), e.g. from
    /// `kubectl exec POD -c main -- curl -s localhost:8000/metrics > page.txt`.
    pub page: PathBuf,
    /// A second page scraped later from the same Pod: rates and p95 latencies are computed
    /// from the counter and histogram deltas between the two.
    #[arg(requires = "interval")]
    pub next_page: Option<PathBuf>,
    /// Seconds between the two scrapes.
    #[arg(long, value_name = "SECONDS", requires = "next_page")]
    pub interval: Option<f64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The range `--interval` accepts: a millisecond to a day (beyond, timestamps and window
/// arithmetic stop meaning anything).
const INTERVAL_SECONDS: std::ops::RangeInclusive<f64> = 0.001..=86_400.0;

pub fn run(args: &Args) -> ExitCode {
    let mut out = String::new();
    let mut err = String::new();
    let code = inspect(args, &mut out, &mut err);
    super::emit(&out, &err);
    ExitCode::from(code)
}

/// The command without terminal I/O; returns the exit code.
pub fn inspect(args: &Args, out: &mut String, err: &mut String) -> u8 {
    let engine = match args.engine {
        EngineArg::Vllm => EngineKind::Vllm,
        EngineArg::Sglang => EngineKind::Sglang,
    };
    let kind = match args.role_kind {
        RoleKindArg::Server => RoleKind::Server,
        RoleKindArg::Prefill => RoleKind::Prefill,
        RoleKindArg::Decode => RoleKind::Decode,
    };
    let mut texts = Vec::new();
    for path in std::iter::once(&args.page).chain(args.next_page.as_ref()) {
        // The scaler refuses pages over MAX_PAGE_BYTES; so does the inspection.
        match super::read_text(path, MAX_PAGE_BYTES) {
            Ok(text) => texts.push((path.display().to_string(), text)),
            Err(reason) => {
                err.push_str(&super::error_line(&format!(
                    "{}: cannot read: {reason}",
                    path.display()
                )));
                return 2;
            }
        }
    }
    let pages: Vec<(String, Page)> = texts
        .iter()
        .map(|(name, text)| (name.clone(), parse(text)))
        .collect();
    for (name, page) in &pages {
        for skipped in &page.skipped {
            err.push_str(&super::note_line(&format!(
                "{name}:{}: skipped: {}",
                skipped.line, skipped.reason
            )));
        }
        if page.samples.is_empty() {
            err.push_str(&super::error_line(&format!(
                "{name}: no metric samples found; is this a Prometheus /metrics page?"
            )));
            return 2;
        }
        if let Some(problem) = engine_mismatch(engine, page) {
            err.push_str(&super::error_line(&format!("{name}: {problem}")));
            return 1;
        }
    }
    let samples: Vec<EngineSample> = pages.iter().map(|(_, page)| read(engine, page)).collect();
    let observation = match (samples.get(1), args.interval) {
        (Some(next), Some(interval)) => {
            if !INTERVAL_SECONDS.contains(&interval) {
                err.push_str(&super::error_line(&format!(
                    "--interval must be between 0.001 and 86400 seconds, got {interval}"
                )));
                return 2;
            }
            Some(window(engine, &kind, &samples[0], next, interval))
        }
        _ => None,
    };
    if args.json {
        let value = json!({
            "engine": format!("{engine:?}"),
            "sample": sample_json(&samples[0]),
            "window": observation.as_ref().map(|(o, reset)| {
                observation_json(o, *reset, &|row: &str| why_missing(row, *reset, &samples))
            }),
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).expect("JSON")
        );
    } else {
        write_sample(out, &pages[0].0, &pages[0].1, &samples[0]);
        if let Some((o, reset)) = &observation {
            let why = |row: &str| why_missing(row, *reset, &samples);
            write_observation(out, o, *reset, args.interval.unwrap_or_default(), &why);
        }
    }
    0
}

/// Records the two samples `interval` seconds apart and observes the role as the scaler would.
fn window(
    engine: EngineKind,
    kind: &RoleKind,
    first: &EngineSample,
    second: &EngineSample,
    interval: f64,
) -> (RoleObservation, Option<&'static str>) {
    let start = Timestamp::UNIX_EPOCH;
    let later = start + SignedDuration::from_secs_f64(interval);
    let mut store = SampleStore::default();
    store.record(engine, "pod", None, first.clone(), start);
    let reading = store.record(engine, "pod", None, second.clone(), later);
    let reset = reading.reset;
    let observation = observe_role(&RoleInputs {
        kind,
        ready_replicas: 1,
        readings: &[reading],
        interval_seconds: interval.ceil() as u32,
        now: later,
    });
    (observation, reset)
}

/// The prefix every series of an engine carries.
fn prefix(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Vllm => "vllm:",
        EngineKind::Sglang => "sglang:",
    }
}

fn engine_name(engine: EngineKind) -> (&'static str, &'static str) {
    match engine {
        EngineKind::Vllm => ("vLLM", "vllm"),
        EngineKind::Sglang => ("SGLang", "sglang"),
    }
}

/// Why a page cannot be read as `engine`'s: it holds the other engine's series, or none.
fn engine_mismatch(engine: EngineKind, page: &Page) -> Option<String> {
    let count = |e: EngineKind| {
        page.samples
            .iter()
            .filter(|s| s.name.starts_with(prefix(e)))
            .count()
    };
    if count(engine) > 0 {
        return None;
    }
    let (wanted, _) = engine_name(engine);
    let other = match engine {
        EngineKind::Vllm => EngineKind::Sglang,
        EngineKind::Sglang => EngineKind::Vllm,
    };
    let (other_name, other_flag) = engine_name(other);
    if count(other) > 0 {
        return Some(format!(
            "this page holds {other_name} series ({}…), not {wanted} ones; run with --engine {other_flag}",
            prefix(other)
        ));
    }
    let example = page.samples.first().map_or("", |s| s.name);
    Some(format!(
        "this page holds no vLLM or SGLang series ({} samples of other metrics, such as {example}); is it a serving engine's /metrics page?",
        page.samples.len()
    ))
}

/// Why a window row has no value: a dropped baseline, a series missing from either page, or
/// nothing that moved between the pages.
fn why_missing(row: &str, reset: Option<&str>, samples: &[EngineSample]) -> String {
    let series = match row {
        "running" => reading::RUNNING,
        "waiting" => reading::WAITING,
        "kv" => reading::KV_USAGE,
        "prompt" => reading::PROMPT,
        "generation" => reading::GENERATION,
        "ttft" => reading::TTFT,
        _ => reading::ITL,
    };
    let gauge = matches!(row, "running" | "waiting" | "kv");
    // Gauges are read from the later page; rates and latencies need both.
    let pages = if gauge {
        &samples[samples.len() - 1..]
    } else {
        samples
    };
    if let Some(why) = pages.iter().find_map(|s| s.missing.get(series)) {
        return why.clone();
    }
    if let (Some(reason), false) = (reset, gauge) {
        return format!("the baseline was dropped because {reason}");
    }
    match row {
        "ttft" | "itl" => {
            "no request finished between the pages (the histogram count did not move)".into()
        }
        _ => "the counter is not on both pages".into(),
    }
}

fn fmt_opt(value: Option<f64>) -> String {
    value.map_or_else(
        || "missing".to_string(),
        |v| format!("{}", (v * 1000.0).round() / 1000.0),
    )
}

fn write_sample(out: &mut String, name: &str, page: &Page, sample: &EngineSample) {
    let _ = writeln!(
        out,
        "{name}: {} samples, {} skipped lines",
        page.samples.len(),
        page.skipped.len()
    );
    // A missing reading says why, in the words the adapter recorded.
    let shown = |value: Option<f64>, series: &str| match value {
        Some(v) => fmt_opt(Some(v)),
        None => missing(sample.missing.get(series).map(String::as_str)),
    };
    let _ = writeln!(out, "gauges (after the rank rule)");
    let _ = writeln!(
        out,
        "  running requests       {}",
        shown(sample.running, reading::RUNNING)
    );
    let _ = writeln!(
        out,
        "  waiting requests       {}",
        shown(sample.waiting, reading::WAITING)
    );
    if sample.decode_transfer.is_some() {
        let _ = writeln!(
            out,
            "  decode transfer queue  {}",
            fmt_opt(sample.decode_transfer)
        );
    }
    let kv: Vec<String> = sample.kv_usage.iter().map(|v| v.to_string()).collect();
    let _ = writeln!(
        out,
        "  KV cache usage         {}",
        if kv.is_empty() {
            missing(sample.missing.get(reading::KV_USAGE).map(String::as_str))
        } else {
            kv.join(", ") + " (per scheduler)"
        }
    );
    let _ = writeln!(out, "counters");
    for series in [reading::PROMPT, reading::GENERATION] {
        if let Some(why) = sample.missing.get(series) {
            let _ = writeln!(out, "  {series:<15} {}", missing(Some(why)));
        }
    }
    for ((counter, key), value) in &sample.counters {
        let _ = writeln!(
            out,
            "  {:<15} {:<50} {value}",
            format!("{counter:?}"),
            braces(key)
        );
    }
    let _ = writeln!(out, "histograms");
    for series in [reading::TTFT, reading::ITL] {
        if let Some(why) = sample.missing.get(series) {
            let _ = writeln!(out, "  {series:<15} {}", missing(Some(why)));
        }
    }
    for ((latency, key), h) in &sample.histograms {
        let finite: Vec<f64> = h
            .buckets
            .iter()
            .map(|(le, _)| *le)
            .filter(|le| le.is_finite())
            .collect();
        let range = match (finite.first(), finite.last()) {
            (Some(lo), Some(hi)) => format!("{} buckets, le {lo} .. {hi}", finite.len()),
            _ => "no finite buckets".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<15} {:<50} count {} sum {} ({range})",
            format!("{latency:?}"),
            braces(key),
            fmt_opt(h.count),
            fmt_opt(h.sum)
        );
    }
    let _ = writeln!(out, "series");
    for series in &sample.series {
        let _ = writeln!(
            out,
            "  {:<8} {:<45} {}",
            if series.used { "used" } else { "ignored" },
            series.name,
            series.note
        );
    }
}

/// `missing: WHY`, or `missing` alone when nothing more is known.
fn missing(why: Option<&str>) -> String {
    match why {
        Some(why) => format!("missing: {why}"),
        None => "missing".to_string(),
    }
}

fn braces(key: &str) -> String {
    format!("{{{key}}}")
}

fn write_observation(
    out: &mut String,
    o: &RoleObservation,
    reset: Option<&str>,
    interval: f64,
    why: &dyn Fn(&str) -> String,
) {
    let _ = writeln!(
        out,
        "window of {interval} s, as the scaler computes it and its status shows it"
    );
    if let Some(reason) = reset {
        let _ = writeln!(out, "  no rate: the baseline was dropped because {reason}");
    }
    // The status's own rounding, so the numbers match `kubectl get mds -o yaml`.
    let mut status = RoleStatus::default();
    o.write_status(&mut status);
    let show = |v: Option<String>, row: &str| v.unwrap_or_else(|| missing(Some(&why(row))));
    let quantity = |q: &Option<Quantity>, row| show(q.as_ref().map(Quantity::to_string), row);
    let count = |c: Option<i64>, row| show(c.map(|c| c.to_string()), row);
    let paths: Vec<String> = o.prompt_paths.iter().map(|p| format!("{p:?}")).collect();
    let rows = [
        ("signal state", format!("{:?}", o.signal_state)),
        (
            "running requests",
            count(status.running_requests, "running"),
        ),
        (
            "waiting requests",
            count(status.waiting_requests, "waiting"),
        ),
        (
            "KV cache usage (mean)",
            quantity(&status.kv_cache_usage, "kv"),
        ),
        (
            "prompt tokens/s (cache-missed)",
            quantity(&status.prompt_tokens_per_second, "prompt"),
        ),
        (
            "prompt demand formula",
            if paths.is_empty() {
                "-".into()
            } else {
                paths.join(", ")
            },
        ),
        (
            "generation tokens/s",
            quantity(&status.generation_tokens_per_second, "generation"),
        ),
        ("TTFT p95 (ms)", quantity(&status.ttft_milliseconds, "ttft")),
        ("ITL p95 (ms)", quantity(&status.itl_milliseconds, "itl")),
    ];
    for (label, value) in rows {
        let _ = writeln!(out, "  {label:<31} {value}");
    }
}

fn sample_json(sample: &EngineSample) -> Value {
    let counters: Vec<Value> = sample
        .counters
        .iter()
        .map(|((c, key), v)| json!({"counter": format!("{c:?}"), "labels": key, "value": v}))
        .collect();
    let histograms: Vec<Value> = sample
        .histograms
        .iter()
        .map(|((l, key), h)| {
            json!({
                "latency": format!("{l:?}"),
                "labels": key,
                "buckets": h.buckets.iter().map(|(le, c)| json!([if le.is_finite() { json!(le) } else { json!("+Inf") }, c])).collect::<Vec<_>>(),
                "sum": h.sum,
                "count": h.count,
            })
        })
        .collect();
    let series: Vec<Value> = sample
        .series
        .iter()
        .map(|s| json!({"name": s.name, "used": s.used, "note": s.note}))
        .collect();
    json!({
        "runningRequests": sample.running,
        "waitingRequests": sample.waiting,
        "decodeTransferQueue": sample.decode_transfer,
        "kvCacheUsage": sample.kv_usage,
        "counters": counters,
        "histograms": histograms,
        "series": series,
        "missing": sample.missing,
    })
}

fn observation_json(
    o: &RoleObservation,
    reset: Option<&str>,
    why: &dyn Fn(&str) -> String,
) -> Value {
    let rows = [
        ("runningRequests", "running", o.running_requests),
        ("waitingRequests", "waiting", o.waiting_requests),
        ("kvCacheUsage", "kv", o.kv_cache_usage),
        (
            "promptTokensPerSecond",
            "prompt",
            o.prompt_tokens_per_second,
        ),
        (
            "generationTokensPerSecond",
            "generation",
            o.generation_tokens_per_second,
        ),
        ("ttftMilliseconds", "ttft", o.ttft_milliseconds),
        ("itlMilliseconds", "itl", o.itl_milliseconds),
    ];
    let missing: serde_json::Map<String, Value> = rows
        .iter()
        .filter(|(_, _, v)| v.is_none())
        .map(|(field, row, _)| (field.to_string(), json!(why(row))))
        .collect();
    json!({
        "missing": missing,
        "signalState": format!("{:?}", o.signal_state),
        "baselineDropped": reset,
        "runningRequests": o.running_requests,
        "waitingRequests": o.waiting_requests,
        "kvCacheUsage": o.kv_cache_usage,
        "promptTokensPerSecond": o.prompt_tokens_per_second,
        "promptDemandFormula": o.prompt_paths.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>(),
        "generationTokensPerSecond": o.generation_tokens_per_second,
        "ttftMilliseconds": o.ttft_milliseconds,
        "itlMilliseconds": o.itl_milliseconds,
    })
}
