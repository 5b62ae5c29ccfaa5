//! The lab's router, for real engines: `http://ROUTER/NAMESPACE/NAME/<path>` is forwarded to
//! `<path>` on a ready, routed replica of that target's first role, the one with the fewest
//! requests in flight through the router (ties: the lowest ordinal). Responses stream back as
//! they come (token streaming stays token streaming). With no ready replica the answer is 503,
//! as GPUStack's gateway gives. It listens on 127.0.0.1 only.
//!
//! A replica that refuses the connection (its engine died) is passed over for
//! [`EJECTED_FOR`] and the request goes to the next one, as a gateway's passive health checks
//! do; without that, the dead replica, always the one with nothing in flight, would take most
//! requests and fail them, and the load would vanish rather than move.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router as Routes;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::StreamExt;
use mds_sim::DeploymentKey;
use tokio::task::JoinHandle;

use super::Shared;
use super::engines::first_role;

/// A running router; dropping it stops it.
pub(crate) struct Router {
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Router {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long a replica that refused a connection is passed over.
pub const EJECTED_FOR: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct RouterState {
    shared: Arc<Shared>,
    client: reqwest::Client,
    /// Requests in flight per replica address.
    in_flight: Arc<Mutex<BTreeMap<String, usize>>>,
    /// Replicas that refused a connection, and when.
    ejected: Arc<Mutex<BTreeMap<String, Instant>>>,
}

impl Router {
    /// Listens on a free port of 127.0.0.1.
    pub async fn start(shared: Arc<Shared>) -> std::io::Result<Router> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = RouterState {
            shared,
            client: reqwest::Client::builder()
                .build()
                .map_err(std::io::Error::other)?,
            in_flight: Arc::default(),
            ejected: Arc::default(),
        };
        let app = Routes::new()
            .route("/{namespace}/{name}/{*rest}", any(forward))
            .with_state(state);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Router { address, task })
    }
}

/// Counts a request in flight on an address until dropped (the response streamed out).
struct InFlight {
    map: Arc<Mutex<BTreeMap<String, usize>>>,
    address: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.address) {
            *n = n.saturating_sub(1);
        }
    }
}

async fn forward(
    State(router): State<RouterState>,
    Path((namespace, name, rest)): Path<(String, String, String)>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = DeploymentKey::new(&namespace, &name);
    let replicas = ready_replicas(&router.shared, &key);
    if replicas.is_empty() {
        let message = format!("no ready replica of {key}\n");
        return (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    }
    let mut tried: Vec<String> = Vec::new();
    let (upstream, in_flight) = loop {
        let Some(in_flight) = router.pick(&replicas, &tried) else {
            let message = format!("{key}: no replica answered (tried {})\n", tried.join(", "));
            return (StatusCode::BAD_GATEWAY, message).into_response();
        };
        let url = format!("http://{}/{rest}", in_flight.address);
        let mut request = router
            .client
            .request(method.clone(), &url)
            .body(body.clone());
        if let Some(kind) = headers.get(header::CONTENT_TYPE) {
            request = request.header(header::CONTENT_TYPE, kind);
        }
        match request.send().await {
            Ok(upstream) => break (upstream, in_flight),
            Err(e) if e.is_connect() => {
                router.eject(&in_flight.address);
                tried.push(in_flight.address.clone());
            }
            Err(e) => {
                let message = format!("{key}: replica {} failed: {e}\n", in_flight.address);
                return (StatusCode::BAD_GATEWAY, message).into_response();
            }
        }
    };
    let status = upstream.status();
    let kind = upstream.headers().get(header::CONTENT_TYPE).cloned();
    // The in-flight count lives as long as the body streams.
    let stream = upstream.bytes_stream().map(move |chunk| {
        let _held = &in_flight;
        chunk
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = status;
    if let Some(kind) = kind {
        response.headers_mut().insert(header::CONTENT_TYPE, kind);
    }
    response
}

impl RouterState {
    /// The replica with the fewest requests in flight among those not yet tried, passing over
    /// ejected ones while any other is left; counted in flight until the guard drops.
    fn pick(&self, replicas: &[String], tried: &[String]) -> Option<InFlight> {
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let ejected = {
            let mut ejected = self.ejected.lock().unwrap_or_else(|p| p.into_inner());
            ejected.retain(|_, at| at.elapsed() < EJECTED_FOR);
            ejected.clone()
        };
        let address = choose(replicas, tried, &map, &ejected)?;
        *map.entry(address.clone()).or_default() += 1;
        Some(InFlight {
            map: self.in_flight.clone(),
            address,
        })
    }

    fn eject(&self, address: &str) {
        let mut ejected = self.ejected.lock().unwrap_or_else(|p| p.into_inner());
        ejected.insert(address.to_string(), Instant::now());
    }
}

/// The untried replica with the fewest requests in flight (ties: the first listed), passing over
/// ejected ones while any other is left.
fn choose<T>(
    replicas: &[String],
    tried: &[String],
    in_flight: &BTreeMap<String, usize>,
    ejected: &BTreeMap<String, T>,
) -> Option<String> {
    let untried: Vec<&String> = replicas.iter().filter(|a| !tried.contains(a)).collect();
    let healthy: Vec<&String> = untried
        .iter()
        .copied()
        .filter(|a| !ejected.contains_key(*a))
        .collect();
    let candidates = if healthy.is_empty() { untried } else { healthy };
    candidates
        .into_iter()
        .min_by_key(|a| in_flight.get(*a).copied().unwrap_or(0))
        .cloned()
}

/// `ip:port` of every ready, routed replica of the target's first role, by ordinal.
fn ready_replicas(shared: &Arc<Shared>, key: &DeploymentKey) -> Vec<String> {
    let state = shared.lock();
    let Some(role) = first_role(&state.world, key) else {
        return Vec::new();
    };
    let routed: Vec<u32> = state
        .world
        .instances(key)
        .iter()
        .filter(|i| i.role == role && i.routed)
        .map(|i| i.ordinal)
        .collect();
    state
        .world
        .pods(key)
        .iter()
        .filter(|p| p.role == role && p.member_index == 0 && routed.contains(&p.ordinal))
        .filter_map(|p| Some(format!("{}:{}", p.pod_ip.as_deref()?, p.metrics_port)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_replica_with_fewest_in_flight_wins_and_ties_go_to_the_first() {
        let replicas = names(&["a", "b", "c"]);
        let none: BTreeMap<String, ()> = BTreeMap::new();
        let mut in_flight = BTreeMap::new();
        assert_eq!(
            choose(&replicas, &[], &in_flight, &none).as_deref(),
            Some("a")
        );
        in_flight.insert("a".to_string(), 2);
        in_flight.insert("b".to_string(), 1);
        assert_eq!(
            choose(&replicas, &[], &in_flight, &none).as_deref(),
            Some("c")
        );
    }

    #[test]
    fn a_refusing_replica_is_passed_over_and_tried_ones_are_not_retried() {
        let replicas = names(&["dead", "b"]);
        let in_flight = BTreeMap::new();
        // The dead one has nothing in flight, so it would win every time without ejection.
        let ejected: BTreeMap<String, ()> = [("dead".to_string(), ())].into();
        assert_eq!(
            choose(&replicas, &[], &in_flight, &ejected).as_deref(),
            Some("b")
        );
        // Every replica ejected: still try one rather than refuse outright.
        let all: BTreeMap<String, ()> = [("dead".to_string(), ()), ("b".to_string(), ())].into();
        assert_eq!(
            choose(&replicas, &[], &in_flight, &all).as_deref(),
            Some("dead")
        );
        assert_eq!(
            choose(&replicas, &names(&["dead", "b"]), &in_flight, &all),
            None
        );
    }
}
