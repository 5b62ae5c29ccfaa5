//! The watches that fill the controller's caches, and the discovery of Kueue's Workload API
//! (watched once it is served).

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use mds_api::ModelDeploymentScaler;
use mds_api::resources::{WORKLOAD_GROUP, WORKLOAD_VERSION};
use mds_api::target::{ModelDeployment, Workload};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{ControllerConfig, Message, RuntimeError};
use crate::cache::{Cache, trim_managed_fields, trim_pod};
use crate::kube_cluster::Caches;
use crate::ports::ScalerKey;
use crate::undecodable::Gone;

/// Whether the Kueue Workload API is served (D4 falls back to `PodScheduled` without it).
pub(super) async fn workloads_served(client: &Client) -> Result<bool, RuntimeError> {
    match client
        .list_api_group_resources(&format!("{WORKLOAD_GROUP}/{WORKLOAD_VERSION}"))
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "workloads")),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(RuntimeError::Discovery(e)),
    }
}

pub(super) fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// An untyped API of `resource` (every object decodes as JSON; see [`watch_decoded`]).
fn dynamic_api(
    client: &Client,
    namespace: Option<&str>,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Feeds a watch into a cache and hands what each event touched to `touched`.
pub(super) fn feed<K, T>(
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    cache: impl Fn(Event<K>) -> Vec<T> + Send + 'static,
    failed: impl Fn() + Send + 'static,
    touched: impl Fn(T) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream.default_backoff());
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    for object in cache(event) {
                        touched(object);
                    }
                }
                Err(e) => {
                    // The cache falls behind: /readyz says so until the watch flows again.
                    failed();
                    tracing::warn!(error = %e, "watch failed; retrying");
                }
            }
        }
    })
}

pub(super) fn watch_into<K>(
    api: Api<K>,
    config: watcher::Config,
    caches: &Arc<Caches>,
    pick: fn(&Caches) -> &Cache<K>,
    trim: fn(&mut K),
    touched: impl Fn(K) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (caches, failing) = (caches.clone(), caches.clone());
    feed(
        watcher::watcher(api, config).modify(trim),
        move |event| pick(&caches).apply(event),
        move || pick(&failing).watch_failed(Instant::now()),
        touched,
    )
}

/// What one event of a decoding watch touched.
pub(super) enum Touched<K> {
    /// An object that decoded (applied or deleted).
    Object(K),
    /// An object that does not decode, or a deleted one that did not: left out of the cache.
    Gone(Gone),
}

/// A watch that decodes each object on its own ([`crate::undecodable`]): an object that does
/// not decode is left out of the cache and recorded, and the watch goes on.
pub(super) fn watch_decoded<K>(
    api: Api<DynamicObject>,
    kind: &'static str,
    caches: &Arc<Caches>,
    pick: fn(&Caches) -> &Cache<K>,
    trim: fn(&mut K),
    touched: impl Fn(Touched<K>) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (caches, failing) = (caches.clone(), caches.clone());
    feed(
        watcher::watcher(api, watcher::Config::default()),
        move |event| {
            let decoded = caches.undecodable.decode::<K>(kind, event);
            let cache = pick(&caches);
            let mut out = Vec::new();
            if let Some(mut event) = decoded.event {
                match &mut event {
                    Event::Apply(o) | Event::InitApply(o) | Event::Delete(o) => trim(o),
                    Event::Init | Event::InitDone => {}
                }
                out.extend(cache.apply(event).into_iter().map(Touched::Object));
            }
            caches.undecodable.settle(decoded.forget);
            for gone in decoded.gone {
                cache.remove(&gone.namespace, &gone.name);
                out.push(Touched::Gone(gone));
            }
            out
        },
        move || pick(&failing).watch_failed(Instant::now()),
        touched,
    )
}

/// How often a controller without the Kueue Workload API looks for it again.
pub const WORKLOAD_DISCOVERY_EVERY: Duration = Duration::from_secs(60);

/// Asks `discover` every [`WORKLOAD_DISCOVERY_EVERY`] whether the Workload API is served, and
/// once it is, marks it served and runs `start` (the Workload watch). Kueue installed after the
/// controller then takes over admission (D4) without a restart.
pub async fn discover_workloads<D, F, S>(discover: D, start: S)
where
    D: Fn() -> F,
    F: std::future::Future<Output = Result<bool, RuntimeError>>,
    S: FnOnce(),
{
    let mut ticks = tokio::time::interval(WORKLOAD_DISCOVERY_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match discover().await {
            Ok(true) => {
                tracing::info!(
                    "the Kueue Workload API is served now: admission follows Workloads (D4)"
                );
                start();
                return;
            }
            Ok(false) => {}
            Err(e) => tracing::debug!(error = %e, "looking for the Kueue Workload API failed"),
        }
    }
}

/// The watches that fill the caches: scalers and targets (each change sends the supervisor a
/// message), the targets' Pods, and Kueue's Workloads once their API is served (looked for
/// again until it is, when it is not yet).
pub(super) fn start_watches(
    client: &Client,
    config: &ControllerConfig,
    caches: &Arc<Caches>,
    tx: &mpsc::UnboundedSender<Message>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let ns = config.namespace.as_deref();
    let mut watches = Vec::new();
    let scaler_tx = tx.clone();
    let scalers = ApiResource::erase::<ModelDeploymentScaler>(&());
    watches.push(watch_decoded(
        dynamic_api(client, ns, &scalers),
        "ModelDeploymentScaler",
        caches,
        |c| &c.scalers,
        trim_managed_fields,
        move |touched| {
            let message = match touched {
                Touched::Object(s) => Message::Scaler {
                    key: ScalerKey {
                        namespace: s.metadata.namespace.clone().unwrap_or_default(),
                        name: s.metadata.name.clone().unwrap_or_default(),
                    },
                    uid: s.metadata.uid.clone().unwrap_or_default(),
                    target: s.spec.target_ref.name.clone(),
                },
                // Its worker finds it gone and stops; a version that decodes starts it again.
                Touched::Gone(g) => Message::Wake(ScalerKey {
                    namespace: g.namespace,
                    name: g.name,
                }),
            };
            let _ = scaler_tx.send(message);
        },
    ));
    let target_tx = tx.clone();
    let targets = ApiResource::erase::<ModelDeployment>(&config.target_version);
    watches.push(watch_decoded(
        dynamic_api(client, ns, &targets),
        "ModelDeployment",
        caches,
        |c| &c.targets,
        trim_managed_fields,
        move |touched| {
            let (namespace, name) = match touched {
                Touched::Object(md) => (
                    md.metadata.namespace.clone().unwrap_or_default(),
                    md.metadata.name.clone().unwrap_or_default(),
                ),
                Touched::Gone(g) => (g.namespace, g.name),
            };
            let _ = target_tx.send(Message::Target { namespace, name });
        },
    ));
    watches.push(watch_into(
        api::<Pod>(client, ns),
        watcher::Config::default().labels("app.kubernetes.io/name=model-deployment"),
        caches,
        |c| &c.pods,
        trim_pod,
        |_| {},
    ));
    let workload_watch = {
        let (client, caches) = (client.clone(), caches.clone());
        let ns = ns.map(str::to_string);
        move || {
            let workloads = ApiResource::erase::<Workload>(&());
            watch_decoded(
                dynamic_api(&client, ns.as_deref(), &workloads),
                "Workload",
                &caches,
                |c| c.workload_cache(),
                trim_managed_fields,
                |_| {},
            )
        }
    };
    if caches.workloads().is_some() {
        watches.push(workload_watch());
    } else {
        let (client, caches) = (client.clone(), caches.clone());
        watches.push(tokio::spawn(async move {
            let (started_tx, started_rx) = tokio::sync::oneshot::channel();
            discover_workloads(
                || workloads_served(&client),
                || {
                    caches.serve_workloads();
                    let _ = started_tx.send(workload_watch());
                },
            )
            .await;
            // Keeps the watch for as long as this task lives (aborted at shutdown).
            if let Ok(watch) = started_rx.await {
                let _ = watch.await;
            }
        }));
    }
    watches
}
