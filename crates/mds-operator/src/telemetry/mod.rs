//! The operator's own metrics (prometheus-client) and the `/metrics`, `/healthz` and
//! `/readyz` endpoints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod scalers;

pub use scalers::{KeptSeries, RoleSeries, ScalerSeries, ScalerState};

use crate::ports::ScalerKey;
use crate::worker::PassReport;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub kind: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

/// Every metric the controller exports.
pub struct Telemetry {
    registry: Registry,
    pub passes: Counter,
    pub pass_seconds: Histogram,
    /// Target writes that landed, by kind (bind, commit, rollback, restore, release).
    pub decisions: Family<KindLabels, Counter>,
    pub commits: Counter,
    pub rollbacks: Counter,
    pub restores: Counter,
    pub write_failures: Family<FailureLabels, Counter>,
    /// Target writes not tried in a pass because their backoff after failing had not run out.
    pub writes_held: Family<KindLabels, Counter>,
    /// Writes of the scaler itself (status, finalizer) that did not land.
    pub scaler_write_failures: Family<FailureLabels, Counter>,
    pub status_writes: Counter,
    pub scrape_errors: Family<ReasonLabels, Counter>,
    pub scrape_seconds: Histogram,
    /// Each scaler's series (per role and per scaler), read at scrape time.
    pub scalers_series: Arc<ScalerSeries>,
    /// Watched objects that do not decode (`mds_undecodable_objects`).
    pub undecodable: Arc<crate::undecodable::Undecodable>,
    pub leader: Gauge,
    pub scalers: Gauge,
    /// Watch caches hold their first complete lists.
    pub ready: AtomicBool,
    /// False while the lease this replica holds cannot be confirmed (leader.rs): `/readyz`
    /// follows it.
    pub lease_healthy: AtomicBool,
    /// Worker tasks that panicked outside a pass and were started again.
    pub worker_restarts: Counter,
    /// Retirements reported stuck in one phase (D36), once each.
    pub stuck_retirements: Counter,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

impl Telemetry {
    pub fn new() -> Telemetry {
        let mut registry = Registry::with_prefix("mds");
        let t = Telemetry {
            passes: Counter::default(),
            pass_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            decisions: Family::default(),
            commits: Counter::default(),
            rollbacks: Counter::default(),
            restores: Counter::default(),
            write_failures: Family::default(),
            writes_held: Family::default(),
            scaler_write_failures: Family::default(),
            status_writes: Counter::default(),
            scrape_errors: Family::default(),
            scrape_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            scalers_series: Arc::default(),
            undecodable: Arc::default(),
            leader: Gauge::default(),
            scalers: Gauge::default(),
            ready: AtomicBool::new(false),
            lease_healthy: AtomicBool::new(true),
            worker_restarts: Counter::default(),
            stuck_retirements: Counter::default(),
            registry: Registry::default(),
        };
        registry.register("passes", "Scaler passes run", t.passes.clone());
        registry.register(
            "pass_duration_seconds",
            "Duration of one scaler pass (snapshot, scrape, plan, writes)",
            t.pass_seconds.clone(),
        );
        registry.register(
            "decisions",
            "Target writes that landed, by kind",
            t.decisions.clone(),
        );
        registry.register("commits", "Planned vectors committed", t.commits.clone());
        registry.register(
            "rollbacks",
            "Pending cohorts rolled back after an admission timeout",
            t.rollbacks.clone(),
        );
        registry.register(
            "restores",
            "Pre-scale-down vectors restored after an aborted retirement",
            t.restores.clone(),
        );
        registry.register(
            "write_failures",
            "Target writes that did not land, by kind and reason (conflict: re-planned next pass; refused, unavailable: reported and retried with backoff)",
            t.write_failures.clone(),
        );
        registry.register(
            "writes_held",
            "Target writes not tried in a pass: the backoff after their failure had not run out",
            t.writes_held.clone(),
        );
        registry.register(
            "scaler_write_failures",
            "Writes of the scaler (status, finalizer) that did not land, by kind and reason",
            t.scaler_write_failures.clone(),
        );
        registry.register("status_writes", "Status writes", t.status_writes.clone());
        registry.register(
            "scrape_errors",
            "Engine pages that could not be read, by reason",
            t.scrape_errors.clone(),
        );
        registry.register(
            "scrape_duration_seconds",
            "Time to read one engine page",
            t.scrape_seconds.clone(),
        );
        registry.register(
            "leader",
            "1 while this controller holds the lease",
            t.leader.clone(),
        );
        registry.register("scalers", "Scalers with a worker", t.scalers.clone());
        registry.register(
            "worker_restarts",
            "Worker tasks that panicked outside a pass and were started again",
            t.worker_restarts.clone(),
        );
        registry.register(
            "stuck_retirements",
            "Retirements found standing in one phase past its budget and pendingTimeoutSeconds (event RetirementStuck), once each",
            t.stuck_retirements.clone(),
        );
        registry.register_collector(Box::new(t.scalers_series.clone()));
        registry.register_collector(Box::new(t.undecodable.clone()));
        Telemetry { registry, ..t }
    }

    /// Records a pass.
    pub fn observe(&self, key: &ScalerKey, report: &PassReport, seconds: f64) {
        self.passes.inc();
        self.pass_seconds.observe(seconds);
        for s in &report.scrapes {
            self.scrape_seconds.observe(s.seconds);
            if let Some(e) = &s.error {
                self.scrape_errors
                    .get_or_create(&ReasonLabels {
                        reason: e.reason().into(),
                    })
                    .inc();
            }
        }
        if let Some((kind, result)) = &report.write {
            match result {
                Ok(()) => {
                    self.decisions
                        .get_or_create(&KindLabels {
                            kind: kind.as_str().into(),
                        })
                        .inc();
                    match kind {
                        mds_core::WriteKind::Commit => self.commits.inc(),
                        mds_core::WriteKind::Rollback => self.rollbacks.inc(),
                        mds_core::WriteKind::Restore => self.restores.inc(),
                        _ => 0,
                    };
                }
                Err(e) => {
                    self.write_failures
                        .get_or_create(&FailureLabels {
                            kind: kind.as_str().into(),
                            reason: e.kind().into(),
                        })
                        .inc();
                }
            }
        }
        let events = report.outcome.iter().flat_map(|o| &o.events);
        let stuck = events.filter(|e| e.reason == "RetirementStuck").count();
        self.stuck_retirements.inc_by(stuck as u64);
        if let Some(kind) = report.held {
            self.writes_held
                .get_or_create(&KindLabels {
                    kind: kind.as_str().into(),
                })
                .inc();
        }
        for (kind, result) in [("status", &report.status), ("finalizer", &report.finalizer)] {
            if let Some(Err(e)) = result {
                self.scaler_write_failures
                    .get_or_create(&FailureLabels {
                        kind: kind.into(),
                        reason: e.kind().into(),
                    })
                    .inc();
            }
        }
        if matches!(report.status, Some(Ok(()))) {
            self.status_writes.inc();
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.scalers_series.observe(key, report, at);
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

async fn metrics(State(t): State<Arc<Telemetry>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        t.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(t): State<Arc<Telemetry>>) -> impl IntoResponse {
    if t.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "watch caches are not synced yet",
        )
    }
}

/// Which endpoints a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub metrics: bool,
    pub probes: bool,
}

/// The router of the chosen endpoints.
pub fn router(telemetry: Arc<Telemetry>, endpoints: Endpoints) -> Router {
    let mut router = Router::new();
    if endpoints.metrics {
        router = router.route("/metrics", get(metrics));
    }
    if endpoints.probes {
        router = router
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz));
    }
    router.with_state(telemetry)
}

/// Binds `addr` (so a taken port fails at start, not later).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves the chosen endpoints until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    telemetry: Arc<Telemetry>,
    endpoints: Endpoints,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(telemetry, endpoints))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::WriteError;
    use mds_core::WriteKind;

    #[test]
    fn failed_and_held_writes_are_counted_by_kind_and_reason() {
        let t = Telemetry::new();
        let key = ScalerKey {
            namespace: "ns".into(),
            name: "llm".into(),
        };
        let report = PassReport {
            write: Some((WriteKind::Bind, Err(WriteError::Refused("denied".into())))),
            status: Some(Err(WriteError::Conflict("stale".into()))),
            finalizer: Some(Err(WriteError::Unavailable("503".into()))),
            ..PassReport::default()
        };
        t.observe(&key, &report, 0.1);
        let held = PassReport {
            held: Some(WriteKind::Commit),
            ..PassReport::default()
        };
        t.observe(&key, &held, 0.1);
        let text = t.encode();
        for line in [
            "mds_write_failures_total{kind=\"bind\",reason=\"refused\"} 1",
            "mds_writes_held_total{kind=\"commit\"} 1",
            "mds_scaler_write_failures_total{kind=\"status\",reason=\"conflict\"} 1",
            "mds_scaler_write_failures_total{kind=\"finalizer\",reason=\"unavailable\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn a_stuck_retirement_is_counted_once_per_event() {
        let t = Telemetry::new();
        let key = ScalerKey {
            namespace: "ns".into(),
            name: "llm".into(),
        };
        let event = |reason| mds_core::Event {
            warning: true,
            reason,
            action: "Plan",
            message: String::new(),
        };
        let report = |events| PassReport {
            outcome: Some(mds_core::Outcome {
                write: None,
                status: Default::default(),
                write_status: false,
                events,
                plan: None,
                policy: None,
                holds_refused_commit: false,
                wake_at: None,
            }),
            ..PassReport::default()
        };
        t.observe(&key, &report(vec![event("RetirementStuck")]), 0.1);
        t.observe(&key, &report(vec![event("ScaleDownAborted")]), 0.1);
        t.observe(&key, &report(vec![]), 0.1);
        let text = t.encode();
        assert!(text.contains("mds_stuck_retirements_total 1"), "{text}");
    }
}
