//! The bench's result: a table for people, one JSON object for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::objects::Shape;
use crate::window::Measured;

/// What the machine is and how busy it was when the bench started.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub load: String,
    pub memory_gib: f64,
}

impl Machine {
    pub fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or("unknown CPU".into(), |(_, v)| v.trim().to_string());
        let load = std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        let memory_kib: f64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu,
            load,
            memory_gib: memory_kib / 1024.0 / 1024.0,
        }
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cores ({}), {:.0} GiB, load average {}",
            self.cores, self.cpu, self.memory_gib, self.load
        )
    }
}

/// Which kind of API traffic a "VERB resource[.group][/subresource]" key is.
fn request_kind(key: &str) -> &'static str {
    let (verb, resource) = key.split_once(' ').unwrap_or((key, ""));
    match verb {
        "GET" | "LIST" => "reads",
        "WATCH" | "WATCHLIST" => "watches",
        _ if resource == "modeldeployments.worker.gpustack.ai" => "target writes",
        _ if resource == "modeldeploymentscalers.worker.gpustack.ai/status" => "status writes",
        _ => "other writes",
    }
}

pub struct Report<'a> {
    pub shape: &'a Shape,
    pub machine: Machine,
    pub setup_seconds: f64,
    pub idle_rss: u64,
    pub measured: &'a Measured,
    pub baseline: &'a Measured,
    pub moved: &'a [String],
    /// Stand-in errors after setup (printed as warnings).
    pub standin_errors: usize,
}

impl Report<'_> {
    /// API requests per pass by kind, net of the stand-in's own rate.
    fn requests_by_kind(&self) -> BTreeMap<&'static str, f64> {
        let mut out = BTreeMap::new();
        for (key, n) in self.measured.requests_per_pass(self.baseline) {
            *out.entry(request_kind(&key)).or_insert(0.0) += n;
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let mut window =
            self.measured
                .to_json(self.shape.targets, self.idle_rss, Some(self.baseline));
        window["requests_per_pass_by_kind"] = json!(self.requests_by_kind());
        json!({
            "scalers": self.shape.targets,
            "pods_per_target": self.shape.pods,
            "interval_seconds": self.shape.interval_seconds,
            "machine": {"cores": self.machine.cores, "cpu": self.machine.cpu,
                "load_average_at_start": self.machine.load, "memory_gib": self.machine.memory_gib},
            "setup_seconds": self.setup_seconds,
            "controller_idle_rss_mib": self.idle_rss as f64 / 1048576.0,
            "window": window,
            "baseline_requests": self.baseline.requests,
            "baseline_seconds": self.baseline.seconds,
            "targets_not_at_pods": self.moved,
            "standin_errors_after_setup": self.standin_errors,
        })
    }

    pub fn table(&self) -> String {
        let m = self.measured;
        let j = m.to_json(self.shape.targets, self.idle_rss, Some(self.baseline));
        let f = |k: &str| j[k].as_f64().unwrap_or(f64::NAN);
        let mut out = String::new();
        let mut row = |name: &str, value: String| {
            let _ = writeln!(out, "  {name:<38} {value}");
        };
        row(
            "scalers × Pods, interval",
            format!(
                "{} × {}, {} s",
                self.shape.targets, self.shape.pods, self.shape.interval_seconds
            ),
        );
        row("machine", self.machine.to_string());
        row(
            "setup (lab, objects, steady)",
            format!("{:.0} s", self.setup_seconds),
        );
        row(
            "window",
            format!(
                "{:.0} s, {:.0} passes ({:.2} per scaler)",
                m.seconds,
                m.passes,
                m.passes / self.shape.targets as f64
            ),
        );
        row(
            "controller CPU",
            format!(
                "{:.3} cores, {:.2} ms per pass",
                f("controller_cores"),
                f("cpu_ms_per_pass")
            ),
        );
        row(
            "controller resident memory",
            format!(
                "{:.1} MiB mean, {:.1} MiB max; {:.1} MiB before any scaler",
                f("rss_mean_mib"),
                f("rss_max_mib"),
                self.idle_rss as f64 / 1048576.0
            ),
        );
        row(
            "memory per scaler",
            format!(
                "{:.1} KiB over the idle controller, {:.1} KiB all in",
                f("rss_kib_per_scaler"),
                m.rss_mean / 1024.0 / self.shape.targets as f64
            ),
        );
        row(
            "scrapes",
            format!(
                "{:.0} ({:.1} per pass), {:.0} errors",
                m.scrapes,
                m.scrapes / m.passes.max(1.0),
                m.scrape_errors
            ),
        );
        row(
            "scrape latency p50 / p99",
            format!("{:.2} / {:.2} ms", f("scrape_ms_p50"), f("scrape_ms_p99")),
        );
        row(
            "pass duration p50 / p99",
            format!("{:.1} / {:.1} ms", f("pass_ms_p50"), f("pass_ms_p99")),
        );
        row(
            "target / status writes (controller)",
            format!(
                "{:.0} / {:.0} in the window ({:.0} failed target writes)",
                m.target_writes, m.status_writes, m.target_write_failures
            ),
        );
        let kinds = self.requests_by_kind();
        let total: f64 = kinds.values().sum();
        row(
            "API requests per pass",
            format!("{total:.3} (net of the stand-in's own rate)"),
        );
        for (kind, n) in &kinds {
            row(&format!("  {kind}"), format!("{n:.3}"));
        }
        row(
            "other processes' CPU",
            format!(
                "stand-in and bench {:.2}, kube-apiserver {:.2}, etcd {:.2} cores",
                f("bench_process_cores"),
                f("api_server_cores"),
                f("etcd_cores")
            ),
        );
        if self.standin_errors > 0 {
            row(
                "stand-in errors after setup",
                format!("{} (printed above)", self.standin_errors),
            );
        }
        if !self.moved.is_empty() {
            row(
                "targets not at their Pod count",
                format!("{} (first: {})", self.moved.len(), self.moved[0]),
            );
        }
        out
    }
}
