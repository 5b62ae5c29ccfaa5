//! The controller runtime: watch caches for scalers, their targets, the targets' Pods and
//! Workloads; one task per scaler that runs its worker on the schedule; a supervisor that
//! starts tasks for new scalers and wakes them when their spec, target or binding changes.
//! Passes run only while this controller is the leader; a change of leader resets every
//! worker's memory, so the next pass restores it from status.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::resources::{TargetApiVersion, WORKLOAD_GROUP, WORKLOAD_VERSION};
use mds_api::target::{ModelDeployment, Workload};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::api_client::ApiClients;
use crate::cache::{Cache, trim_managed_fields, trim_pod};
use crate::http_source::{HttpSource, ScrapeConfig};
use crate::kube_cluster::{Caches, KubeCluster};
use crate::ports::{ScalerKey, WriteError};
use crate::schedule::{Clock, Fingerprint, Next, Schedule, TokioClock, convert, offset};
use crate::telemetry::Telemetry;
use crate::worker::Worker;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Watch and manage scalers in this namespace only; all namespaces when `None`.
    pub namespace: Option<String>,
    pub target_version: TargetApiVersion,
    pub scrape: ScrapeConfig,
    /// Passes planning and writing at once across all scalers (their scrapes are bounded by
    /// `scrape.concurrency` and `scrape.max_bytes_in_flight` instead).
    pub max_concurrent_passes: usize,
    /// This controller's identity (events' reporting instance, the lease holder).
    pub instance: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("the scrape client could not be built: {0}")]
    Scraper(#[from] reqwest::Error),
    #[error("discovering the Kueue Workload API failed: {0}")]
    Discovery(kube::Error),
}

enum Message {
    Scaler {
        key: ScalerKey,
        uid: String,
        target: String,
    },
    Target {
        namespace: String,
        name: String,
    },
    Done(ScalerKey),
}

/// Everything the worker tasks share.
struct Shared {
    caches: Arc<Caches>,
    cluster: KubeCluster,
    source: HttpSource,
    passes: Semaphore,
    telemetry: Arc<Telemetry>,
    leader: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
}

/// Whether the Kueue Workload API is served (D4 falls back to `PodScheduled` without it).
async fn workloads_served(client: &Client) -> Result<bool, RuntimeError> {
    match client
        .list_api_group_resources(&format!("{WORKLOAD_GROUP}/{WORKLOAD_VERSION}"))
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "workloads")),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(RuntimeError::Discovery(e)),
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn target_api(
    client: &Client,
    namespace: Option<&str>,
    version: &TargetApiVersion,
) -> Api<ModelDeployment> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, version),
        None => Api::all_with(client.clone(), version),
    }
}

/// Feeds a watch into a cache and hands touched objects to `touched`.
fn feed<K>(
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    cache: impl Fn(Event<K>) -> Vec<K> + Send + 'static,
    failed: impl Fn() + Send + 'static,
    touched: impl Fn(K) + Send + 'static,
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

fn watch_into<K>(
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

/// Runs the controller until `shutdown` turns true. Passes run while `leader` is true. One
/// client for watches and writes, as the caller built it; see [`run_with`].
pub async fn run(
    client: Client,
    config: ControllerConfig,
    telemetry: Arc<Telemetry>,
    leader: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RuntimeError> {
    run_with(
        ApiClients::shared(client),
        config,
        telemetry,
        leader,
        shutdown,
    )
    .await
}

/// Runs the controller with its watch and write clients (`api_client`): watches and discovery
/// through `clients.watch`, every write through `clients.write` under `clients.write_deadline`.
pub async fn run_with(
    clients: ApiClients,
    config: ControllerConfig,
    telemetry: Arc<Telemetry>,
    leader: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RuntimeError> {
    let client = clients.watch;
    let caches = Arc::new(Caches::new(workloads_served(&client).await?));
    let leader_flag = Arc::new(AtomicBool::new(*leader.borrow()));
    let shared = Arc::new(Shared {
        caches: caches.clone(),
        cluster: KubeCluster::new(
            clients.write,
            caches.clone(),
            config.target_version,
            config.instance.clone(),
            leader_flag.clone(),
        )
        .with_write_deadline(clients.write_deadline),
        source: HttpSource::new(config.scrape.clone())?,
        passes: Semaphore::new(config.max_concurrent_passes.max(1)),
        telemetry: telemetry.clone(),
        leader: leader.clone(),
        shutdown: shutdown.clone(),
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let ns = config.namespace.as_deref();
    let mut watches = Vec::new();
    let scaler_tx = tx.clone();
    watches.push(watch_into(
        api::<ModelDeploymentScaler>(&client, ns),
        watcher::Config::default(),
        &caches,
        |c| &c.scalers,
        trim_managed_fields,
        move |s: ModelDeploymentScaler| {
            let _ = scaler_tx.send(Message::Scaler {
                key: ScalerKey {
                    namespace: s.metadata.namespace.clone().unwrap_or_default(),
                    name: s.metadata.name.clone().unwrap_or_default(),
                },
                uid: s.metadata.uid.clone().unwrap_or_default(),
                target: s.spec.target_ref.name.clone(),
            });
        },
    ));
    let target_tx = tx.clone();
    watches.push(watch_into(
        target_api(&client, ns, &config.target_version),
        watcher::Config::default(),
        &caches,
        |c| &c.targets,
        trim_managed_fields,
        move |md| {
            let _ = target_tx.send(Message::Target {
                namespace: md.metadata.namespace.clone().unwrap_or_default(),
                name: md.metadata.name.clone().unwrap_or_default(),
            });
        },
    ));
    watches.push(watch_into(
        api::<Pod>(&client, ns),
        watcher::Config::default().labels("app.kubernetes.io/name=model-deployment"),
        &caches,
        |c| &c.pods,
        trim_pod,
        |_| {},
    ));
    let workload_watch = {
        let (client, caches) = (client.clone(), caches.clone());
        let ns = ns.map(str::to_string);
        move || {
            watch_into(
                api::<Workload>(&client, ns.as_deref()),
                watcher::Config::default(),
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
    // Mirror the leader state for the writers' gate. Aborted at shutdown: its receiver
    // would otherwise keep the lease manager from releasing the lease.
    let mirror = {
        let mut leader = leader.clone();
        let flag = leader_flag.clone();
        let telemetry = telemetry.clone();
        tokio::spawn(async move {
            loop {
                let now = *leader.borrow_and_update();
                flag.store(now, Ordering::Release);
                telemetry.leader.set(now as i64);
                if leader.changed().await.is_err() {
                    flag.store(false, Ordering::Release);
                    telemetry.leader.set(0);
                    return;
                }
            }
        })
    };
    let mut workers: HashMap<ScalerKey, Arc<Notify>> = HashMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut task_keys: HashMap<tokio::task::Id, ScalerKey> = HashMap::new();
    let mut by_target: HashMap<(String, String), BTreeSet<ScalerKey>> = HashMap::new();
    let mut shutdown_rx = shutdown.clone();
    let mut ready_tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = shutdown_rx.wait_for(|s| *s) => break,
            _ = ready_tick.tick() => {
                // Ready while every cache keeps up and the lease, when held, is confirmed.
                let ready = caches.current(Instant::now())
                    && telemetry.lease_healthy.load(Ordering::Acquire);
                telemetry.ready.store(ready, Ordering::Release);
            }
            Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                if let Some(key) = ended_worker(ended, &mut task_keys, &telemetry) {
                    // A worker that panicked outside its caught pass: start it again, from
                    // status, as its scaler is still there.
                    let _ = tx.send(Message::Done(key));
                }
            }
            Some(message) = rx.recv() => match message {
                Message::Scaler { key, uid, target } => {
                    by_target
                        .entry((key.namespace.clone(), target))
                        .or_default()
                        .insert(key.clone());
                    let notify = workers.entry(key.clone()).or_insert_with(|| {
                        let notify = Arc::new(Notify::new());
                        let task = tasks.spawn(worker_task(key.clone(), uid, shared.clone(), notify.clone(), tx.clone()));
                        task_keys.insert(task.id(), key.clone());
                        notify
                    });
                    notify.notify_one();
                    telemetry.scalers.set(workers.len() as i64);
                }
                Message::Target { namespace, name } => {
                    for key in by_target.get(&(namespace, name)).into_iter().flatten() {
                        if let Some(n) = workers.get(key) {
                            n.notify_one();
                        }
                    }
                }
                Message::Done(key) => {
                    workers.remove(&key);
                    for keys in by_target.values_mut() {
                        keys.remove(&key);
                    }
                    // Recreated under the same name while the old worker ended: start anew.
                    if let Some(s) = caches.scalers.get(&key.namespace, &key.name) {
                        let _ = tx.send(Message::Scaler {
                            key: key.clone(),
                            uid: s.metadata.uid.clone().unwrap_or_default(),
                            target: s.spec.target_ref.name.clone(),
                        });
                    }
                    telemetry.scalers.set(workers.len() as i64);
                }
            }
        }
    }
    for w in watches {
        w.abort();
    }
    // Passes in flight finish (a pass is never cut between its writes); then the caller may
    // release the lease.
    drop(shared);
    while tasks.join_next().await.is_some() {}
    mirror.abort();
    let _ = mirror.await;
    Ok(())
}

/// Files a worker task's end: `Some(key)` when it panicked (counted in
/// `mds_worker_restarts_total`), to be started again; a worker that returns has sent `Done`.
fn ended_worker(
    ended: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
    task_keys: &mut HashMap<tokio::task::Id, ScalerKey>,
    telemetry: &Telemetry,
) -> Option<ScalerKey> {
    match ended {
        Ok((id, ())) => {
            task_keys.remove(&id);
            None
        }
        Err(e) => {
            let key = task_keys.remove(&e.id())?;
            if e.is_panic() {
                telemetry.worker_restarts.inc();
                tracing::error!(scaler = %key, "the worker task panicked; it starts again from status");
                Some(key)
            } else {
                None
            }
        }
    }
}

/// What may bring a pass forward, read from the caches.
fn fingerprint(caches: &Caches, key: &ScalerKey) -> Fingerprint {
    let Some(scaler) = caches.scalers.get(&key.namespace, &key.name) else {
        return Fingerprint::default();
    };
    let target = caches
        .targets
        .get(&key.namespace, &scaler.spec.target_ref.name);
    Fingerprint {
        scaler_generation: scaler.metadata.generation.unwrap_or(0),
        scaler_deleting: scaler.metadata.deletion_timestamp.is_some(),
        target_uid: target.as_ref().and_then(|t| t.metadata.uid.clone()),
        target_generation: target.as_ref().and_then(|t| t.metadata.generation),
        binding: target.as_ref().and_then(|t| {
            t.metadata
                .annotations
                .as_ref()?
                .get(BINDING_ANNOTATION)
                .cloned()
        }),
    }
}

fn interval_of(caches: &Caches, key: &ScalerKey) -> Duration {
    let seconds = caches
        .scalers
        .get(&key.namespace, &key.name)
        .map_or(15, |s| s.spec.interval_seconds());
    Duration::from_secs(seconds.max(1) as u64)
}

async fn worker_task(
    key: ScalerKey,
    uid: String,
    shared: Arc<Shared>,
    wake: Arc<Notify>,
    done: mpsc::UnboundedSender<Message>,
) {
    let mut worker = Worker::new(key.clone());
    let mut leader = shared.leader.clone();
    let mut shutdown = shared.shutdown.clone();
    let mut roles: Vec<String> = Vec::new();
    'leadership: loop {
        // Wait to lead; a new term starts from status, spread over the interval.
        tokio::select! {
            _ = leader.wait_for(|l| *l) => {}
            _ = shutdown.wait_for(|s| *s) => break 'leadership,
        }
        worker.reset();
        let interval = interval_of(&shared.caches, &key);
        // The schedule runs on a monotonic clock; a pass's wake_at is converted to it.
        let clock = TokioClock::new(jiff::Timestamp::now());
        let first = clock.now() + offset(&uid, interval);
        let mut schedule = Schedule::new(first);
        loop {
            let interval = interval_of(&shared.caches, &key);
            let current = fingerprint(&shared.caches, &key);
            match schedule.next(clock.now(), interval, &current) {
                Next::Sleep(until) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(clock.instant(until)) => {}
                        _ = wake.notified() => {}
                        _ = leader.wait_for(|l| !*l) => continue 'leadership,
                        _ = shutdown.wait_for(|s| *s) => break 'leadership,
                    }
                }
                Next::Run { forward } => {
                    let started = Instant::now();
                    let at = clock.now();
                    let stamped = jiff::Timestamp::now();
                    schedule.ran(at, forward, current);
                    let span = tracing::info_span!("pass", scaler = %key, forward);
                    // Scrapes are bounded by the source; the pass permit covers planning and
                    // writes only, so a slow engine never holds one.
                    let pass = std::panic::AssertUnwindSafe(worker.pass_bounded(
                        &shared.cluster,
                        &shared.source,
                        stamped,
                        Some(shared.passes.acquire()),
                    ))
                    .catch_unwind()
                    .instrument(span.clone())
                    .await;
                    let Ok(report) = pass else {
                        // A bug in one pass must not stop a scaler for good: start again from
                        // status at the next pass.
                        tracing::error!(scaler = %key, "a pass panicked; the worker starts again from status");
                        worker.reset();
                        continue;
                    };
                    // The next pass comes no later than the core's next edge.
                    schedule.wake(report.wake_at.map(|w| convert(w, stamped, at)));
                    let seconds = started.elapsed().as_secs_f64();
                    shared.telemetry.observe(&key, &report, seconds);
                    log_pass(&span, &key, &report);
                    if let Some(plan) = &report.plan {
                        let now: Vec<String> = plan.roles.iter().map(|r| r.name.clone()).collect();
                        // Series of roles that left the spec go with them.
                        let gone: Vec<String> =
                            roles.iter().filter(|r| !now.contains(r)).cloned().collect();
                        shared.telemetry.forget(&key, &gone);
                        roles = now;
                    }
                    if report.gone {
                        break 'leadership;
                    }
                }
            }
        }
    }
    shared.telemetry.forget(&key, &roles);
    let _ = done.send(Message::Done(key));
}

fn log_pass(span: &tracing::Span, key: &ScalerKey, report: &crate::worker::PassReport) {
    let _entered = span.enter();
    let target = report.target.as_deref().unwrap_or("");
    let decision = report.decision_id.as_deref().unwrap_or("");
    if let Some((kind, result)) = &report.write {
        match result {
            Ok(()) => {
                tracing::info!(scaler = %key, target, decision_id = decision, kind = kind.as_str(), "target written")
            }
            Err(e @ WriteError::Conflict(_)) | Err(e @ WriteError::NotFound(_)) => {
                tracing::warn!(scaler = %key, target, decision_id = decision, kind = kind.as_str(), error = %e, "target write did not land; re-planned next pass")
            }
            Err(e) => {
                tracing::warn!(scaler = %key, target, decision_id = decision, kind = kind.as_str(), error = %e, "target write did not land; reported and retried with backoff")
            }
        }
    }
    if let Some(kind) = report.held {
        tracing::debug!(scaler = %key, target, kind = kind.as_str(), "target write held: its backoff after failing has not run out");
    }
    if let Some(Err(e)) = &report.status {
        tracing::warn!(scaler = %key, target, error = %e, "status write did not land");
    }
    if let Some(problem) = &report.problem {
        tracing::warn!(scaler = %key, target, problem = problem.as_str(), "pass problem");
    }
    let failed = report.scrapes.iter().filter(|s| s.error.is_some()).count();
    if failed > 0 {
        tracing::debug!(scaler = %key, target, failed, total = report.scrapes.len(), "scrapes failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[tokio::test(start_paused = true)]
    async fn a_workload_api_that_appears_later_is_found_and_watched_once() {
        let asked = Arc::new(AtomicU32::new(0));
        let started = Arc::new(AtomicU32::new(0));
        let (a, s) = (asked.clone(), started.clone());
        let discovery = tokio::spawn(discover_workloads(
            move || {
                let n = a.fetch_add(1, Ordering::SeqCst);
                async move { Ok(n >= 2) }
            },
            move || {
                s.fetch_add(1, Ordering::SeqCst);
            },
        ));
        tokio::time::sleep(WORKLOAD_DISCOVERY_EVERY * 2 + Duration::from_secs(1)).await;
        assert_eq!(started.load(Ordering::SeqCst), 0, "not served yet");
        tokio::time::sleep(WORKLOAD_DISCOVERY_EVERY).await;
        discovery.await.unwrap();
        assert_eq!(started.load(Ordering::SeqCst), 1);
        assert_eq!(
            asked.load(Ordering::SeqCst),
            3,
            "no more lookups once found"
        );
    }

    #[test]
    fn caches_follow_workloads_once_the_api_is_served() {
        let caches = Caches::new(false);
        assert!(caches.workloads().is_none());
        caches.serve_workloads();
        assert!(caches.workloads().is_some());
        assert!(!caches.synced(), "the Workload cache must sync too");
    }

    #[tokio::test]
    async fn a_worker_task_that_panics_is_started_again_and_counted() {
        let telemetry = Telemetry::new();
        let mut tasks = tokio::task::JoinSet::new();
        let mut task_keys = HashMap::new();
        let key = ScalerKey {
            namespace: "ns".into(),
            name: "llm".into(),
        };
        let task = tasks.spawn(async { panic!("a bug outside the pass") });
        task_keys.insert(task.id(), key.clone());
        let ended = tasks.join_next_with_id().await.unwrap();
        assert_eq!(
            ended_worker(ended, &mut task_keys, &telemetry),
            Some(key.clone())
        );
        assert_eq!(telemetry.worker_restarts.get(), 1);
        assert!(task_keys.is_empty());
        // A worker that returns has said Done itself: nothing to restart.
        let task = tasks.spawn(async {});
        task_keys.insert(task.id(), key);
        let ended = tasks.join_next_with_id().await.unwrap();
        assert_eq!(ended_worker(ended, &mut task_keys, &telemetry), None);
        assert_eq!(telemetry.worker_restarts.get(), 1);
    }
}
