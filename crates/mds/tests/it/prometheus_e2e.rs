//! The alerts and the dashboard against a real Prometheus (Debian's package), as a team would
//! wire them: `mds lab up`, two targets and scalers applied with kubectl, `mds controller`, and
//! a Prometheus on 127.0.0.1 scraping the controller and the lab's engines every second with
//! the chart's rules (short thresholds) loaded. A load that steps up and down makes one scaler
//! reverse its counts until `MdsScalerFlapping` fires, and it resolves once the load settles;
//! the other scaler's engines stop answering (their Pods' scrape port is annotated away) until
//! `MdsSignalsLost` fires, and it resolves once they answer again. Every dashboard panel's
//! queries then run over the whole run and each panel must return data.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::repo;
use crate::monitoring::{prometheus_tools, rule_groups};
use mds_testkit::{START_TIMEOUT, eventually};

/// Two Server targets with routers (retirements complete) and their scalers: `thrash` follows
/// tokens quickly (30 s window, 15 s scale-down window), `steady` is Predictive at fixed bounds.
const MANIFEST: &str = r#"
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: thrash, namespace: default}
spec:
  engine: {name: vLLM}
  router: {name: vllm-router}
  roles: [{name: server, kind: Server, replicas: 1, instanceType: h100-80g}]
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: steady, namespace: default}
spec:
  engine: {name: vLLM}
  router: {name: vllm-router}
  roles: [{name: server, kind: Server, replicas: 2, instanceType: h100-80g}]
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata: {name: thrash, namespace: default}
spec:
  targetRef: {name: thrash}
  mode: Active
  sampling: {intervalSeconds: 5}
  roles: [{name: server, minReplicas: 1, maxReplicas: 6}]
  algorithm:
    type: TokenThroughput
    tokenThroughput:
      serverTargetTokensPerSecond: "2000"
      stableWindowSeconds: 30
      panicWindowSeconds: 10
  behavior:
    scaleDown: {stabilizationWindowSeconds: 15}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata: {name: steady, namespace: default}
spec:
  targetRef: {name: steady}
  mode: Active
  sampling: {intervalSeconds: 5}
  roles: [{name: server, minReplicas: 2, maxReplicas: 2}]
  algorithm:
    type: Predictive
    predictive:
      tokenThroughput: {serverTargetTokensPerSecond: "2000"}
      serverTokenCapacityPerReplica: "2000"
      horizonSeconds: 30
      minPoints: 2
"#;

/// Up, down, up, down within four minutes of the target's creation, then quiet.
const THRASH_LOAD: &str =
    "default/thrash=steps:0=1,20s=10,80s=1,140s=10,200s=1,prompt=512,output=128";
const STEADY_LOAD: &str = "default/steady=constant:rps=2,prompt=512,output=128";

/// Writes `value` to `path` whole (Prometheus reads the file while it may be written).
pub(crate) fn write_atomically(path: &Path, value: &Value) {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, value.to_string()).unwrap();
    std::fs::rename(&partial, path).unwrap();
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child and its output lines, killed when dropped.
pub(crate) struct Running {
    name: &'static str,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub(crate) fn start(name: &'static str, command: &mut Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
        }
        Running { name, child, lines }
    }

    pub(crate) fn tail(&self) -> String {
        let lines = self.lines.lock().unwrap();
        let from = lines.len().saturating_sub(40);
        format!(
            "--- {} (last lines)\n{}",
            self.name,
            lines[from..].join("\n")
        )
    }

    pub(crate) fn stop(mut self) {
        // SAFETY: a plain signal to our own child; SIGTERM lets the lab remove its folder.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn kubectl(
    kubeconfig: &Path,
    args: &[&str],
    input: Option<&str>,
) -> std::process::Output {
    let mut command = Command::new(mds_testkit::kubectl_path().unwrap());
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    crate::deploy_support::run(command, input)
}

/// The lab's engines as Prometheus file_sd targets (address, namespace, pod, target).
pub(crate) fn engine_targets(kubeconfig: &Path) -> Value {
    let out = kubectl(kubeconfig, &["get", "pods", "-A", "-o", "json"], None);
    let pods: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!({"items": []}));
    let targets: Vec<Value> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let ip = p["status"]["podIP"].as_str()?;
            let port = p["metadata"]["annotations"]["prometheus.io/port"].as_str()?;
            Some(json!({
                "targets": [format!("{ip}:{port}")],
                "labels": {
                    "namespace": p["metadata"]["namespace"],
                    "pod": p["metadata"]["name"],
                    "deployment": p["metadata"]["labels"]["app.kubernetes.io/instance"],
                }
            }))
        })
        .collect();
    Value::Array(targets)
}

pub(crate) struct Prometheus {
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Prometheus {
    async fn get(&self, path: &str, query: &[(&str, String)]) -> Option<Value> {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .query(query)
            .send()
            .await
            .ok()?;
        response.json::<Value>().await.ok()
    }

    /// The alerts firing now, as (alertname, scaler) pairs.
    async fn firing(&self) -> Vec<(String, String)> {
        let Some(body) = self.get("/api/v1/alerts", &[]).await else {
            return vec![];
        };
        body["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing")
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap_or("").to_string(),
                    a["labels"]["scaler"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    pub(crate) async fn query(&self, expr: &str) -> Vec<Value> {
        let body = self
            .get("/api/v1/query", &[("query", expr.to_string())])
            .await;
        body.and_then(|b| b["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }

    async fn query_range(&self, expr: &str, start: f64, end: f64) -> Result<Vec<Value>, String> {
        let body = self
            .get(
                "/api/v1/query_range",
                &[
                    ("query", expr.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                    ("step", "5".to_string()),
                ],
            )
            .await
            .ok_or("no answer")?;
        if body["status"] != "success" {
            return Err(body.to_string());
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The dashboard's panels: title and target expressions, with the variables of a Grafana
/// range of `range` put in.
fn dashboard_panels(range: &str) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(repo().join("deploy/helm/mds/dashboards/mds.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let exprs = p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    t["expr"]
                        .as_str()
                        .unwrap()
                        .replace("$namespace", ".*")
                        .replace("$scaler", ".*")
                        .replace("$__rate_interval", "1m")
                        .replace("$__range", range)
                        .replace("$gpus_per_replica", "1")
                })
                .collect();
            (p["title"].as_str().unwrap().to_string(), exprs)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_fire_and_resolve_on_a_real_prometheus_and_every_panel_returns_data() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let (_, prometheus_bin) = prometheus_tools();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let kubeconfig = dir.join("lab.kubeconfig");
    let lab = Running::start(
        "mds lab up",
        Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(["lab", "up", "--cold-start", "1"])
            .args(["--load", THRASH_LOAD, "--load", STEADY_LOAD])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .current_dir(dir),
    );
    eventually("the lab's kubeconfig", START_TIMEOUT, || {
        let written = kubeconfig.exists();
        async move { written.then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", lab.tail()));
    let applied = kubectl(&kubeconfig, &["apply", "-f", "-"], Some(MANIFEST));
    assert!(applied.status.success(), "{applied:?}");

    let (metrics_port, probe_port, prometheus_port) = (free_port(), free_port(), free_port());
    let controller = Running::start(
        "mds controller",
        Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(["controller", "--leader-elect=false", "--log-format", "text"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{probe_port}"
            )),
    );

    // The chart's rules with thresholds a test can wait for.
    let groups = rule_groups(&[
        "--set",
        "monitoring.rules.flapping.reversals=1",
        "--set",
        "monitoring.rules.flapping.window=2m",
        "--set",
        "monitoring.rules.signalsLost.intervals=2",
    ]);
    std::fs::write(
        dir.join("rules.yaml"),
        serde_yaml_ng::to_string(&groups).unwrap(),
    )
    .unwrap();
    let engines = dir.join("engines.json");
    write_atomically(&engines, &engine_targets(&kubeconfig));
    let config = json!({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [dir.join("rules.yaml")],
        "scrape_configs": [
            {"job_name": "mds", "static_configs": [{"targets": [format!("127.0.0.1:{metrics_port}")]}]},
            {"job_name": "engines", "file_sd_configs": [{"files": [&engines], "refresh_interval": "5s"}]}
        ]
    });
    std::fs::write(
        dir.join("prometheus.yml"),
        serde_yaml_ng::to_string(&config).unwrap(),
    )
    .unwrap();
    let prometheus = Running::start(
        "prometheus",
        Command::new(&prometheus_bin)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .arg("--web.console.templates=/nonexistent")
            .arg("--web.console.libraries=/nonexistent"),
    );
    let prom = Prometheus {
        base: format!("http://127.0.0.1:{prometheus_port}"),
        http: reqwest::Client::new(),
    };
    let started = now();
    let logs = || {
        format!(
            "{}\n{}\n{}",
            lab.tail(),
            controller.tail(),
            prometheus.tail()
        )
    };
    // Keep the engines' targets current as Pods come and go.
    let refresher = {
        let (kubeconfig, engines) = (kubeconfig.clone(), engines.clone());
        tokio::spawn(async move {
            loop {
                write_atomically(&engines, &engine_targets(&kubeconfig));
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
        })
    };
    eventually(
        "Prometheus scrapes the controller",
        Duration::from_secs(60),
        || async {
            let up = prom.query("up{job=\"mds\"} == 1").await;
            (!up.is_empty()).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));

    // Stale signals: once `steady` reads its engines, its Pods' scrape port points nowhere.
    eventually(
        "steady's signals Fresh",
        Duration::from_secs(120),
        || async {
            let fresh = prom
                .query("mds_role_signal_state{scaler=\"steady\",state=\"Fresh\"} == 1")
                .await;
            (!fresh.is_empty()).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    let annotate = |port: &str| {
        let out = kubectl(
            &kubeconfig,
            &[
                "annotate",
                "pods",
                "-n",
                "default",
                "-l",
                "app.kubernetes.io/instance=steady",
                &format!("prometheus.io/port={port}"),
                "--overwrite",
            ],
            None,
        );
        assert!(out.status.success(), "{out:?}");
    };
    annotate("1");
    let firing = |name: &'static str, scaler: &'static str| {
        let prom = &prom;
        move || async move {
            prom.firing()
                .await
                .contains(&(name.to_string(), scaler.to_string()))
                .then_some(())
        }
    };
    let resolved = |name: &'static str, scaler: &'static str| {
        let prom = &prom;
        move || async move {
            (!prom
                .firing()
                .await
                .contains(&(name.to_string(), scaler.to_string())))
            .then_some(())
        }
    };
    eventually(
        "MdsSignalsLost fires for steady",
        Duration::from_secs(90),
        firing("MdsSignalsLost", "steady"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    eprintln!("MdsSignalsLost fired {:.0} s into the run", now() - started);
    annotate("8000");
    eventually(
        "MdsSignalsLost resolves",
        Duration::from_secs(90),
        resolved("MdsSignalsLost", "steady"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    eprintln!(
        "MdsSignalsLost resolved {:.0} s into the run",
        now() - started
    );

    // Thrash: the steps turn `thrash` up, down and up again.
    eventually(
        "MdsScalerFlapping fires for thrash",
        Duration::from_secs(420),
        firing("MdsScalerFlapping", "thrash"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    eprintln!(
        "MdsScalerFlapping fired {:.0} s into the run",
        now() - started
    );
    eventually(
        "MdsScalerFlapping resolves",
        Duration::from_secs(420),
        resolved("MdsScalerFlapping", "thrash"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    eprintln!(
        "MdsScalerFlapping resolved {:.0} s into the run",
        now() - started
    );

    // Every panel returns data over the run.
    let end = now();
    let range = format!("{}s", (end - started).ceil() as i64);
    let mut report = BTreeMap::new();
    for (title, exprs) in dashboard_panels(&range) {
        let mut series = 0;
        for expr in &exprs {
            let result = prom
                .query_range(expr, started, end)
                .await
                .unwrap_or_else(|e| panic!("panel {title:?}: {expr}: {e}"));
            eprintln!("panel {title:?}: {} series from {expr}", result.len());
            series += result.len();
        }
        report.insert(title.clone(), series);
        assert!(
            series > 0,
            "panel {title:?} returned no data: {exprs:?}\n{}",
            logs()
        );
    }
    refresher.abort();
    prometheus.stop();
    controller.stop();
    lab.stop();
}
