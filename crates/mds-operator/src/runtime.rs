//! The controller runtime: watch caches for scalers, their targets, the targets' Pods and
//! Workloads; one task per scaler that runs its worker on the schedule; a supervisor that
//! starts tasks for new scalers and wakes them when their spec, target or binding changes.
//! Passes run only while this controller is the leader; a change of leader resets every
//! worker's memory, so the next pass restores it from status.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::resources::TargetApiVersion;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::api_client::ApiClients;
use crate::http_source::{HttpSource, ScrapeConfig};
use crate::kube_cluster::{Caches, KubeCluster};
use crate::ports::{ScalerKey, WriteError};
use crate::schedule::{Clock, Fingerprint, Next, Schedule, TokioClock, convert, offset};
use crate::telemetry::Telemetry;
use crate::worker::Worker;

mod watches;

pub use watches::{WORKLOAD_DISCOVERY_EVERY, discover_workloads};
use watches::{start_watches, workloads_served};

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
    /// Run the scaler's worker now, if it has one (its scaler no longer decodes).
    Wake(ScalerKey),
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

/// Runs the controller until `shutdown` turns true; passes run while `leader` is true. Watches
/// and discovery go through `clients.watch`, every write through `clients.write` under
/// `clients.write_deadline` (`api_client`). Started by [`crate::Operator::start`].
pub(crate) async fn run_with(
    clients: ApiClients,
    config: ControllerConfig,
    telemetry: Arc<Telemetry>,
    leader: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RuntimeError> {
    let client = clients.watch;
    let caches = Arc::new(
        Caches::new(workloads_served(&client).await?)
            .with_undecodable(telemetry.undecodable.clone()),
    );
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
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let watches = start_watches(&client, &config, &caches, &tx);
    // Aborted at shutdown: its receiver would otherwise keep the lease manager from releasing
    // the lease.
    let mirror = mirror_leader(leader, leader_flag, telemetry.clone());
    let mut supervisor = Supervisor {
        shared,
        tx,
        workers: HashMap::new(),
        tasks: tokio::task::JoinSet::new(),
        task_keys: HashMap::new(),
        by_target: HashMap::new(),
    };
    supervisor.run(rx, shutdown).await;
    for w in watches {
        w.abort();
    }
    supervisor.finish().await;
    mirror.abort();
    let _ = mirror.await;
    Ok(())
}

/// Mirrors the leader state into the writers' gate and `mds_leader` until the election ends
/// (then neither leads).
fn mirror_leader(
    mut leader: watch::Receiver<bool>,
    flag: Arc<AtomicBool>,
    telemetry: Arc<Telemetry>,
) -> tokio::task::JoinHandle<()> {
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
}

/// One task per scaler: started when its scaler is seen, woken when its scaler or target
/// changes, started again when it panicked outside a pass or its scaler was recreated.
struct Supervisor {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Message>,
    workers: HashMap<ScalerKey, Arc<Notify>>,
    tasks: tokio::task::JoinSet<()>,
    task_keys: HashMap<tokio::task::Id, ScalerKey>,
    by_target: HashMap<(String, String), BTreeSet<ScalerKey>>,
}

impl Supervisor {
    /// Until `shutdown` turns true: messages, ended tasks, and readiness every 200 ms.
    async fn run(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Message>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let telemetry = self.shared.telemetry.clone();
        let mut ready_tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => break,
                _ = ready_tick.tick() => {
                    // Ready while every cache keeps up and the lease, when held, is confirmed.
                    let ready = self.shared.caches.current(Instant::now())
                        && telemetry.lease_healthy.load(Ordering::Acquire);
                    telemetry.ready.store(ready, Ordering::Release);
                }
                Some(ended) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    if let Some(key) = ended_worker(ended, &mut self.task_keys, &telemetry) {
                        // A worker that panicked outside its caught pass: start it again,
                        // from status, as its scaler is still there.
                        let _ = self.tx.send(Message::Done(key));
                    }
                }
                Some(message) = rx.recv() => self.on_message(message),
            }
        }
    }

    fn on_message(&mut self, message: Message) {
        match message {
            Message::Scaler { key, uid, target } => {
                self.by_target
                    .entry((key.namespace.clone(), target))
                    .or_default()
                    .insert(key.clone());
                let (shared, tx) = (&self.shared, &self.tx);
                let (tasks, task_keys) = (&mut self.tasks, &mut self.task_keys);
                let notify = self.workers.entry(key.clone()).or_insert_with(|| {
                    let notify = Arc::new(Notify::new());
                    let task = tasks.spawn(worker_task(
                        key.clone(),
                        uid,
                        shared.clone(),
                        notify.clone(),
                        tx.clone(),
                    ));
                    task_keys.insert(task.id(), key.clone());
                    notify
                });
                notify.notify_one();
                self.shared.telemetry.scalers.set(self.workers.len() as i64);
            }
            Message::Target { namespace, name } => {
                for key in self.by_target.get(&(namespace, name)).into_iter().flatten() {
                    if let Some(n) = self.workers.get(key) {
                        n.notify_one();
                    }
                }
            }
            Message::Wake(key) => {
                if let Some(n) = self.workers.get(&key) {
                    n.notify_one();
                }
            }
            Message::Done(key) => {
                self.workers.remove(&key);
                for keys in self.by_target.values_mut() {
                    keys.remove(&key);
                }
                // Recreated under the same name while the old worker ended: start anew.
                if let Some(s) = self.shared.caches.scalers.get(&key.namespace, &key.name) {
                    let _ = self.tx.send(Message::Scaler {
                        key: key.clone(),
                        uid: s.metadata.uid.clone().unwrap_or_default(),
                        target: s.spec.target_ref.name.clone(),
                    });
                }
                self.shared.telemetry.scalers.set(self.workers.len() as i64);
            }
        }
    }

    /// Passes in flight finish (a pass is never cut between its writes); then the caller may
    /// release the lease.
    async fn finish(self) {
        let Supervisor {
            shared, mut tasks, ..
        } = self;
        drop(shared);
        while tasks.join_next().await.is_some() {}
    }
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
    // The scaler's per-role series live as long as this task (a panic drops them too).
    let series = shared.telemetry.scalers_series.keep(&key);
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
                        _ = leader.wait_for(|l| !*l) => {
                            shared.telemetry.scalers_series.forget(&key);
                            continue 'leadership;
                        }
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
                    if report.gone {
                        break 'leadership;
                    }
                }
            }
        }
    }
    // Gone before the supervisor may start a worker for a recreated scaler of this name.
    drop(series);
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
