//! One measurement window: a snapshot at each end (CPU times, the controller's metrics, the API
//! server's request counters), resident memory sampled in between, and what follows from them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::probe::{self, Series};

/// Process ids whose CPU time the bench follows besides the controller's.
#[derive(Clone, Copy, Debug)]
pub struct Others {
    pub api_server: u32,
    pub etcd: u32,
}

/// The state of everything at one instant.
pub struct Snapshot {
    at: Instant,
    controller_cpu: f64,
    controller: Vec<Series>,
    api: Vec<Series>,
    /// The bench process (the stand-in and its engine pages), kube-apiserver, etcd.
    others_cpu: [f64; 3],
}

pub async fn snapshot(
    client: &kube::Client,
    controller: Option<&crate::process::Controller>,
    others: Others,
) -> Result<Snapshot, String> {
    let (controller_cpu, metrics) = match controller {
        Some(c) => (probe::cpu_seconds(c.pid())?, c.metrics().await?),
        None => (0.0, Vec::new()),
    };
    let api = probe::api_server_metrics(client).await?;
    Ok(Snapshot {
        at: Instant::now(),
        controller_cpu,
        controller: metrics,
        api,
        others_cpu: [
            probe::cpu_seconds(std::process::id())?,
            probe::cpu_seconds(others.api_server)?,
            probe::cpu_seconds(others.etcd)?,
        ],
    })
}

/// API requests in a window by "VERB resource[/subresource]" (group-qualified outside core).
fn requests(start: &[Series], end: &[Series]) -> BTreeMap<String, f64> {
    let key = |s: &Series| {
        let l = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let mut resource = l("resource");
        if resource.is_empty() {
            resource = "(non-resource)".into();
        }
        if !l("group").is_empty() {
            resource = format!("{}.{}", resource, l("group"));
        }
        if !l("subresource").is_empty() {
            resource = format!("{resource}/{}", l("subresource"));
        }
        format!("{} {resource}", l("verb"))
    };
    let total = |page: &[Series]| {
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for s in page.iter().filter(|s| s.name == "apiserver_request_total") {
            *out.entry(key(s)).or_default() += s.value;
        }
        out
    };
    let before = total(start);
    let mut out = total(end);
    for (k, v) in out.iter_mut() {
        *v -= before.get(k).copied().unwrap_or(0.0);
    }
    out.retain(|_, v| *v != 0.0);
    out
}

/// Growth of a counter family over a window by one label's values (zeros left out).
fn by_label(start: &[Series], end: &[Series], name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (page, sign) in [(end, 1.0), (start, -1.0)] {
        for s in page.iter().filter(|s| s.name == name) {
            let value = s.labels.get(label).cloned().unwrap_or_default();
            *out.entry(value).or_default() += sign * s.value;
        }
    }
    out.retain(|_, v| *v != 0.0);
    out
}

/// What a window measured.
#[derive(Clone, Debug)]
pub struct Measured {
    pub seconds: f64,
    pub controller_cpu: f64,
    pub passes: f64,
    pub scrapes: f64,
    pub scrape_errors: f64,
    pub scrape_errors_by_reason: BTreeMap<String, f64>,
    pub target_writes_by_kind: BTreeMap<String, f64>,
    pub scrape_buckets: Vec<(f64, f64)>,
    pub pass_buckets: Vec<(f64, f64)>,
    pub target_writes: f64,
    pub target_write_failures: f64,
    pub status_writes: f64,
    pub rss_mean: f64,
    pub rss_max: u64,
    pub requests: BTreeMap<String, f64>,
    pub others_cpu: [f64; 3],
}

impl Measured {
    pub fn between(start: &Snapshot, end: &Snapshot, rss: &[u64]) -> Measured {
        let delta = |name: &str| {
            probe::sum(&end.controller, name, &[]) - probe::sum(&start.controller, name, &[])
        };
        let histogram = |name: &str| {
            probe::bucket_delta(
                &probe::buckets(&start.controller, name),
                &probe::buckets(&end.controller, name),
            )
        };
        Measured {
            seconds: end.at.duration_since(start.at).as_secs_f64(),
            controller_cpu: end.controller_cpu - start.controller_cpu,
            passes: delta("mds_passes_total"),
            scrapes: delta("mds_scrape_duration_seconds_count"),
            scrape_errors: delta("mds_scrape_errors_total"),
            scrape_errors_by_reason: by_label(
                &start.controller,
                &end.controller,
                "mds_scrape_errors_total",
                "reason",
            ),
            target_writes_by_kind: by_label(
                &start.controller,
                &end.controller,
                "mds_decisions_total",
                "kind",
            ),
            scrape_buckets: histogram("mds_scrape_duration_seconds"),
            pass_buckets: histogram("mds_pass_duration_seconds"),
            target_writes: delta("mds_decisions_total"),
            target_write_failures: delta("mds_write_failures_total"),
            status_writes: delta("mds_status_writes_total"),
            rss_mean: rss.iter().sum::<u64>() as f64 / rss.len().max(1) as f64,
            rss_max: rss.iter().copied().max().unwrap_or(0),
            requests: requests(&start.api, &end.api),
            others_cpu: [0, 1, 2].map(|i| end.others_cpu[i] - start.others_cpu[i]),
        }
    }

    /// Requests per pass net of the baseline's rate (the stand-in's own traffic), by kind.
    pub fn requests_per_pass(&self, baseline: &Measured) -> BTreeMap<String, f64> {
        let mut kinds: Vec<&String> = self.requests.keys().collect();
        kinds.extend(baseline.requests.keys());
        kinds
            .into_iter()
            .map(|k| {
                let here = self.requests.get(k).copied().unwrap_or(0.0);
                let rate = baseline.requests.get(k).copied().unwrap_or(0.0) / baseline.seconds;
                (
                    k.clone(),
                    (here - rate * self.seconds) / self.passes.max(1.0),
                )
            })
            .collect()
    }

    pub fn to_json(&self, scalers: usize, idle_rss: u64, baseline: Option<&Measured>) -> Value {
        let q = |q: f64, b: &[(f64, f64)]| probe::quantile(q, b).map(|s| s * 1000.0);
        let per_pass = baseline.map(|b| self.requests_per_pass(b));
        json!({
            "seconds": self.seconds,
            "passes": self.passes,
            "passes_per_second": self.passes / self.seconds,
            "controller_cores": self.controller_cpu / self.seconds,
            "cpu_ms_per_pass": self.controller_cpu * 1000.0 / self.passes.max(1.0),
            "rss_mean_mib": self.rss_mean / 1048576.0,
            "rss_max_mib": self.rss_max as f64 / 1048576.0,
            "rss_kib_per_scaler": (self.rss_mean - idle_rss as f64) / 1024.0 / scalers as f64,
            "scrapes": self.scrapes,
            "scrape_errors": self.scrape_errors,
            "scrape_errors_by_reason": self.scrape_errors_by_reason,
            "target_writes_by_kind": self.target_writes_by_kind,
            "scrape_ms_p50": q(0.5, &self.scrape_buckets),
            "scrape_ms_p99": q(0.99, &self.scrape_buckets),
            "pass_ms_p50": q(0.5, &self.pass_buckets),
            "pass_ms_p99": q(0.99, &self.pass_buckets),
            "target_writes": self.target_writes,
            "target_write_failures": self.target_write_failures,
            "status_writes": self.status_writes,
            "requests": self.requests,
            "requests_per_pass": per_pass,
            "requests_per_pass_total": per_pass.as_ref().map(|p| p.values().sum::<f64>()),
            "bench_process_cores": self.others_cpu[0] / self.seconds,
            "api_server_cores": self.others_cpu[1] / self.seconds,
            "etcd_cores": self.others_cpu[2] / self.seconds,
        })
    }
}

/// Measures for `length`: a snapshot, resident memory every `every`, a snapshot.
pub async fn measure(
    client: &kube::Client,
    controller: Option<&crate::process::Controller>,
    others: Others,
    length: Duration,
) -> Result<Measured, String> {
    let every = Duration::from_secs(5);
    let start = snapshot(client, controller, others).await?;
    let mut rss = Vec::new();
    let end_at = start.at + length;
    while Instant::now() < end_at {
        if let Some(c) = controller {
            rss.push(probe::rss_bytes(c.pid())?);
        }
        let left = end_at.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(every)).await;
    }
    let end = snapshot(client, controller, others).await?;
    Ok(Measured::between(&start, &end, &rss))
}
