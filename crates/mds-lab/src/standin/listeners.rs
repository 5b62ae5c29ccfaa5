//! Engine pages over HTTP: one listener per running Pod, bound to the Pod's own loopback
//! address and annotated port, answering `GET /metrics` with the page the world renders at that
//! moment (503 while the engine is not serving).
//!
//! Each listener knows its Pod's deployment (a slot belongs to one Pod for good), so a scrape
//! brings only that deployment to now and takes its engine's state out of the world under the
//! lock; the page is rendered after the lock is released. At 16,000 Pods a page that scanned the
//! world and rendered under the lock held every other scrape and the mirror behind it.
//!
//! Why a listener per Pod rather than one per port that routes by the connection's local
//! address: a port-wide listener would have to bind `0.0.0.0` (Linux cannot bind all of
//! 127.0.0.0/8 at once), which would expose the pages beyond the machine and clash with
//! anything else on the port; per-address binds stay on loopback, and a clash costs one Pod its
//! page, not the lab.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use jiff::Timestamp;
use mds_sim::{DeploymentKey, PodView};
use tokio::task::JoinHandle;

use super::Shared;

/// The listeners of one stand-in, by address slot; dropped with it.
#[derive(Default)]
pub(crate) struct Listeners {
    serving: BTreeMap<u32, (SocketAddr, JoinHandle<()>)>,
    /// Addresses that would not bind, so each failure is reported once.
    failed: BTreeMap<u32, SocketAddr>,
}

impl Listeners {
    /// Listens for every running Pod, stops listening for Pods that are gone or stopped.
    pub fn reconcile(&mut self, pods: &[PodView], shared: &Arc<Shared>) {
        let mut wanted: BTreeMap<u32, SocketAddr> = BTreeMap::new();
        let mut deployments: BTreeMap<u32, &DeploymentKey> = BTreeMap::new();
        for pod in pods {
            let Some(ip) = pod
                .pod_ip
                .as_deref()
                .and_then(|ip| ip.parse::<IpAddr>().ok())
            else {
                continue;
            };
            wanted.insert(pod.ip_slot, SocketAddr::new(ip, pod.metrics_port));
            deployments.insert(pod.ip_slot, &pod.deployment);
        }
        self.serving.retain(|slot, (address, task)| {
            let keep = wanted.get(slot) == Some(address);
            if !keep {
                task.abort();
            }
            keep
        });
        self.failed
            .retain(|slot, address| wanted.get(slot) == Some(address));
        for (slot, address) in wanted {
            if self.serving.contains_key(&slot) || self.failed.contains_key(&slot) {
                continue;
            }
            let page = Page {
                shared: shared.clone(),
                slot,
                deployment: deployments[&slot].clone(),
            };
            match listen(address, page) {
                Ok(task) => {
                    self.serving.insert(slot, (address, task));
                }
                Err(e) => {
                    shared
                        .lock()
                        .error(format!("serving engine metrics on {address}: {e}"));
                    self.failed.insert(slot, address);
                }
            }
        }
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for (_, task) in self.serving.values() {
            task.abort();
        }
    }
}

#[derive(Clone)]
struct Page {
    shared: Arc<Shared>,
    slot: u32,
    /// The deployment of the Pod at `slot`.
    deployment: DeploymentKey,
}

fn listen(address: SocketAddr, page: Page) -> std::io::Result<JoinHandle<()>> {
    let listener = std::net::TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(page);
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }))
}

async fn metrics(State(page): State<Page>) -> Response {
    let source = {
        let mut state = page.shared.lock();
        // The page as of now, not of the last tick, so two scrapes give exact rates; only
        // this Pod's deployment is brought to now, which keeps a scrape's cost independent of
        // the size of the world.
        let now = Timestamp::now().max(state.world.now());
        state
            .world
            .page_source_as_of(&page.deployment, page.slot, now)
    };
    // Rendered without the world: other scrapes and the mirror go on meanwhile.
    let rendered = source.map(|s| s.render());
    // vLLM and SGLang (uvicorn) close a connection idle for 5 s, less than any scrape interval
    // (5 s at least), so a scraper opens a new connection for every scrape; closing at once
    // does the same and keeps the stand-in at one descriptor per Pod.
    let close = (header::CONNECTION, "close");
    match rendered {
        Some(text) => (
            [
                (
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                ),
                close,
            ],
            text,
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [close],
            "the engine is not serving yet\n",
        )
            .into_response(),
    }
}
