//! `mds simulate --from-prometheus` against a real Prometheus (Debian's package): a TSDB
//! backfilled with `promtool tsdb create-blocks-from openmetrics` from recorded vLLM and
//! SGLang counters (one hour at 15 s: a step in the rate and the lengths, one engine restart),
//! served by `prometheus` on a free port, read by the `mds` binary as a user runs it. The
//! windows it recovers must be within 2 % of the recording, and each refusal (no Prometheus,
//! no series, two deployments, a gap, Prometheus's own error) must name its flag and rule.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Scratch, mds, text};
use crate::monitoring::prometheus_tools;
use crate::prometheus_e2e::{Running, free_port};

/// The recording's first sample: 2025-01-01T00:00:00Z.
const T0: i64 = 1_735_689_600;
const STEP: i64 = 15;
const SAMPLES: i64 = 241;
/// The rate, the lengths and the prefix-hit share step up here (seconds from T0).
const STEP_AT: i64 = 1800;
/// The `chat` engine restarts right after its sample at this time: its counters start again
/// from 0 and hold, at the next sample, what it served since.
const RESTART_AFTER: i64 = 2685;

/// The `chat` deployment's load at `t` seconds: requests per second, prompt and output
/// tokens per request, prefix-hit share.
fn chat(t: i64) -> (f64, f64, f64, f64) {
    if t < STEP_AT {
        (4.0, 1000.0, 200.0, 0.25)
    } else {
        (8.0, 1500.0, 300.0, 0.40)
    }
}

/// What a counter of `per_request(load)` holds at `t`: the integral since the start, or since
/// the restart for `chat` after it.
fn counted(
    t: i64,
    restarts: bool,
    load: fn(i64) -> (f64, f64, f64, f64),
    per_request: &dyn Fn((f64, f64, f64, f64)) -> f64,
) -> f64 {
    let from = if restarts && t > RESTART_AFTER {
        RESTART_AFTER
    } else {
        0
    };
    (from..t).map(|s| load(s).0 * per_request(load(s))).sum()
}

/// One series' samples in OpenMetrics text, at every step (but those `skip` refuses).
fn samples(
    out: &mut String,
    name: &str,
    labels: &str,
    value: &dyn Fn(i64) -> f64,
    skip: &dyn Fn(i64) -> bool,
) {
    for i in 0..SAMPLES {
        let t = i * STEP;
        if !skip(t) {
            let _ = writeln!(out, "{name}{{{labels}}} {} {}", value(t), T0 + t);
        }
    }
}

/// The recording: vLLM `chat` (prod) with per-request histograms and prefix counters, vLLM
/// `other` (dev) and `gappy` (prod, no samples from 20 to 30 minutes) with token counters, and
/// SGLang `sg` (prod-sg).
fn recording() -> String {
    let mut out = String::new();
    let chat_labels = r#"model_name="acme/chat-8b",namespace="prod",pod="chat-0",engine="0""#;
    type PerRequest = fn((f64, f64, f64, f64)) -> f64;
    let chat_series: [(&str, PerRequest); 9] = [
        ("vllm:request_success_total", |_| 1.0),
        ("vllm:request_prompt_tokens_count", |_| 1.0),
        ("vllm:request_prompt_tokens_sum", |l| l.1),
        ("vllm:request_generation_tokens_count", |_| 1.0),
        ("vllm:request_generation_tokens_sum", |l| l.2),
        ("vllm:prompt_tokens_total", |l| l.1),
        ("vllm:generation_tokens_total", |l| l.2),
        ("vllm:prefix_cache_queries_total", |l| l.1),
        ("vllm:prefix_cache_hits_total", |l| l.1 * l.3),
    ];
    let never = |_: i64| false;
    let steady = |_: i64| (2.0, 500.0, 100.0, 0.0);
    let flat = |_: i64| (1.0, 300.0, 50.0, 0.1);
    for (name, per) in chat_series {
        samples(
            &mut out,
            name,
            chat_labels,
            &|t| counted(t, true, chat, &per),
            &never,
        );
    }
    for (labels, load, skip) in [
        (
            r#"model_name="acme/other",namespace="dev",pod="other-0""#,
            steady as fn(i64) -> (f64, f64, f64, f64),
            &never as &dyn Fn(i64) -> bool,
        ),
        (
            r#"model_name="acme/gappy",namespace="prod",pod="gappy-0""#,
            steady,
            &|t: i64| (1200..1800).contains(&t),
        ),
    ] {
        let series: [(&str, PerRequest); 3] = [
            ("vllm:request_success_total", |_| 1.0),
            ("vllm:prompt_tokens_total", |l| l.1),
            ("vllm:generation_tokens_total", |l| l.2),
        ];
        for (name, per) in series {
            samples(
                &mut out,
                name,
                labels,
                &|t| counted(t, false, load, &per),
                skip,
            );
        }
    }
    let sg_labels = r#"model_name="acme/sg",namespace="prod-sg",is_streaming="true""#;
    let sg_series: [(&str, PerRequest); 4] = [
        ("sglang:num_requests_total", |_| 1.0),
        ("sglang:prompt_tokens_total", |l| l.1),
        ("sglang:generation_tokens_total", |l| l.2),
        ("sglang:cached_tokens_total", |l| l.1 * l.3),
    ];
    for (name, per) in sg_series {
        samples(
            &mut out,
            name,
            sg_labels,
            &|t| counted(t, false, flat, &per),
            &never,
        );
    }
    out.push_str("# EOF\n");
    out
}

/// A Prometheus on a free port serving a TSDB backfilled from the recording; killed when
/// dropped.
struct Served {
    url: String,
    _prometheus: Running,
    _scratch: Scratch,
}

fn serve() -> Served {
    let (promtool, prometheus) = prometheus_tools();
    let scratch = Scratch::new("from-prometheus");
    let recording = scratch.file("recording.om", &recording());
    let tsdb = scratch.0.join("tsdb");
    let made = Command::new(&promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics", &recording])
        .arg(&tsdb)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "promtool: {}{}",
        text(&made.stdout),
        text(&made.stderr)
    );
    let config = scratch.file("prometheus.yml", "global: {}\n");
    let port = free_port();
    let running = Running::start(
        "prometheus",
        Command::new(&prometheus)
            .arg(format!("--config.file={config}"))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.console.templates=/nonexistent")
            .arg("--web.console.libraries=/nonexistent"),
    );
    // Ready when /-/ready answers 200, within a deadline.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(port) {
        assert!(
            Instant::now() < deadline,
            "prometheus is not ready within 30 s\n{}",
            running.tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Served {
        url: format!("http://127.0.0.1:{port}"),
        _prometheus: running,
        _scratch: scratch,
    }
}

fn ready(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}

/// `mds simulate --from-prometheus URL ARGS` over the recorded hour, on the fluid engine.
fn simulate(url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec![
        "simulate",
        "--from-prometheus",
        url,
        "--start",
        "2025-01-01T00:00:00Z",
        "--end",
        "2025-01-01T01:00:00Z",
        "--engine",
        "fluid",
        "--compare",
        "none",
        "--no-progress",
    ];
    all.extend_from_slice(args);
    let out = mds(&all, None);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn within(read: f64, want: f64, what: &str) {
    assert!(
        (read - want).abs() <= 0.02 * want.abs().max(1e-9),
        "{what}: read {read}, recorded {want}"
    );
}

#[test]
fn a_recorded_hour_comes_back_window_by_window_within_2_percent() {
    let served = serve();
    let dir = Scratch::new("from-prometheus-run");
    let curve = dir.0.join("curve.csv");
    let json = dir.0.join("run.json");
    let (code, stdout, stderr) = simulate(
        &served.url,
        &[
            "--match",
            "model_name=acme/chat-8b,namespace=prod",
            "--save-curve",
            curve.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // Where the load came from, and the restart as a note.
    let first = stdout.lines().next().unwrap();
    let source = format!(
        "Prometheus {} {{model_name=\"acme/chat-8b\",namespace=\"prod\"}}, 2025-01-01T00:00:00Z to 2025-01-01T01:00:00Z in 1 m windows (vLLM: requests vllm:request_success_total, prompts vllm:request_prompt_tokens_sum / vllm:request_prompt_tokens_count, outputs vllm:request_generation_tokens_sum / vllm:request_generation_tokens_count, prefix hits vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total); 60 windows, 4.00 to 8.00 req/s",
        served.url
    );
    assert!(first.contains(&source), "{first}");
    assert!(
        first.contains("1 counter reset counted across by increase()"),
        "{first}"
    );
    assert!(
        stderr.contains("mds: note: --from-prometheus: 1 counter reset of vllm:request_success_total (an engine restarted) in the window starting 2025-01-01T00:44:00Z"),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let load = report["inputs"]["load"].as_str().unwrap();
    assert!(load.starts_with(&source), "{load}");
    // Every window as recorded, the restart's included.
    let csv = std::fs::read_to_string(&curve).unwrap();
    let rows: Vec<Vec<f64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 60, "{csv}");
    for (i, row) in rows.iter().enumerate() {
        let t = i as i64 * 60;
        assert_eq!(row[0] as i64, T0 + t);
        let (rate, prompt, output, share) = chat(t);
        within(row[1], rate, &format!("window {i} rate"));
        within(row[2], prompt, &format!("window {i} prompt"));
        within(row[3], output, &format!("window {i} output"));
        within(row[4], share, &format!("window {i} prefix-hit share"));
    }
    // The saved curve reads back as a --load curve.
    let again = mds(
        &[
            "simulate",
            "--load",
            &format!("curve:file={},scale=1", curve.display()),
            "--engine",
            "fluid",
            "--compare",
            "none",
            "--no-report",
            "--until",
            "5m",
        ],
        None,
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));

    // SGLang: requests and lengths from the tokenizer's counters, hits from cached tokens.
    let (code, stdout, stderr) = simulate(
        &served.url,
        &[
            "--match",
            "model_name=acme/sg",
            "--no-report",
            "--until",
            "10m",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let first = stdout.lines().next().unwrap();
    assert!(
        first.contains("(SGLang: requests sglang:num_requests_total, prompts sglang:prompt_tokens_total per request, outputs sglang:generation_tokens_total per request, prefix hits sglang:cached_tokens_total / sglang:prompt_tokens_total); 60 windows, 1.00 to 1.00 req/s (3600 requests), prompts ~300 tokens, outputs ~50 tokens, 10.0 % prefix hits"),
        "{first}"
    );
    assert!(first.contains(", 0 s to 600 s"), "--until applies: {first}");
}

#[test]
fn every_refusal_names_its_flag_and_rule() {
    let served = serve();
    let refused = |url: &str, args: &[&str], wants: &[&str]| {
        let (code, stdout, stderr) = simulate(url, args);
        assert_eq!(code, Some(2), "{args:?}\n{stdout}{stderr}");
        for want in wants {
            assert!(stderr.contains(want), "{args:?}: {want:?} not in\n{stderr}");
        }
        assert!(stderr.starts_with("mds: error: "), "{stderr}");
    };
    // No Prometheus there.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    refused(
        &nobody,
        &[],
        &[
            &format!("mds: error: --from-prometheus {nobody}: cannot connect: "),
            "Connection refused",
        ],
    );
    // No such series: what was looked for, and what exists.
    refused(
        &served.url,
        &["--match", "model_name=acme/none"],
        &[
            "--match '{model_name=\"acme/none\"}': no vLLM or SGLang series match between 2025-01-01T00:00:00Z and 2025-01-01T01:00:00Z (looked for sglang:cache_hit_rate, ",
            "this Prometheus has them for model_name=\"acme/chat-8b\",namespace=\"prod\" (vLLM), model_name=\"acme/gappy\",namespace=\"prod\" (vLLM), model_name=\"acme/other\",namespace=\"dev\" (vLLM), model_name=\"acme/sg\",namespace=\"prod-sg\" (SGLang)",
        ],
    );
    // Two deployments: listed, and how to pick one.
    refused(
        &served.url,
        &["--match", "namespace=prod"],
        &[
            "--match '{namespace=\"prod\"}': the engine series of 2 deployments match",
            "model_name=\"acme/chat-8b\",namespace=\"prod\" (vLLM, 9 series), model_name=\"acme/gappy\",namespace=\"prod\" (vLLM, 3 series)",
            "add the labels of one to --match, such as --match 'model_name=acme/chat-8b,namespace=prod'",
        ],
    );
    // A gap: its span, and --fill-gaps.
    refused(
        &served.url,
        &["--match", "model_name=acme/gappy"],
        &[
            "--from-prometheus: 10 of 60 windows have no samples of vllm:generation_tokens_total, vllm:prompt_tokens_total, vllm:request_success_total (1 gap: 2025-01-01T00:20:00Z to 2025-01-01T00:30:00Z (10 m))",
            "or add --fill-gaps",
        ],
    );
    let (code, stdout, stderr) = simulate(
        &served.url,
        &[
            "--match",
            "model_name=acme/gappy",
            "--fill-gaps",
            "--no-report",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("mds: note: --fill-gaps: filled from the window before: 2025-01-01T00:20:00Z to 2025-01-01T00:30:00Z (10 m)"),
        "{stderr}"
    );
    assert!(stdout.contains("2.00 to 2.00 req/s"), "{stdout}");
    // Prometheus's own error, in its words.
    refused(
        &served.url,
        &["--match", "model_name=~\"(\""],
        &[
            "Prometheus refused the series lookup {__name__=~<the 19 series looked for>,model_name=~\"(\"}: bad_data: ",
            "missing closing )",
            "(HTTP 400)",
        ],
    );
    // Not Prometheus's API at that path.
    refused(
        &format!("{}/elsewhere", served.url),
        &[],
        &["/api/v1/series answered HTTP 404 Not Found with no Prometheus JSON"],
    );
    // A bad flag never reaches Prometheus.
    refused(
        &served.url,
        &["--window", "5s"],
        &["--window \"5s\": it must be at least 15 s"],
    );
    // The load flags are one or the other.
    let both = mds(
        &[
            "simulate",
            "--from-prometheus",
            &served.url,
            "--load",
            "constant:rate=1",
        ],
        None,
    );
    assert_eq!(both.status.code(), Some(2));
    assert!(text(&both.stderr).contains("cannot be used with"));
}
