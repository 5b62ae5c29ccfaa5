//! The per-scaler worker: one pass is snapshot → scrape → signals → core → effects. It holds
//! no decision logic; it gathers the core's inputs, runs `mds_core::reconcile`, and executes
//! what comes out: the target write first (never half-applied; one that does not land leaves
//! no status and no memory of its plan), then the status only when the core asks for it
//! (D23), then the events. A write that did not land for a reason other than a conflict is
//! reported on its condition and retried with backoff (`failures.rs`). The finalizer makes a
//! deleted scaler release its binding before it goes.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::{Input, Memory, Outcome, Scaler, Target, WriteKind, reconcile};
use mds_planner::Plan;
use mds_signals::{RoleObservation, SampleStore};

use crate::facts::instance_facts;
use crate::failures::{Failure, TargetMark};
use crate::ports::{Cluster, MetricsSource, ScalerKey, WriteError};
use crate::sampler::{ScrapeResult, sample};

mod writes;

/// The finalizer that makes a deleted scaler release its binding first (spec, *Binding fence*).
pub const FINALIZER: &str = "worker.gpustack.ai/release-binding";

/// What one pass did, for logs and metrics.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    /// The scaler no longer exists: the worker can stop.
    pub gone: bool,
    pub target: Option<String>,
    pub plan: Option<Plan>,
    pub decision_id: Option<String>,
    /// The target write and how it went.
    pub write: Option<(WriteKind, Result<(), WriteError>)>,
    /// A target write not tried this pass: its backoff after failing has not run out.
    pub held: Option<WriteKind>,
    /// The status write, when the core asked for one or a failing write was reported.
    pub status: Option<Result<(), WriteError>>,
    /// The finalizer's removal from a deleted scaler, when tried.
    pub finalizer: Option<Result<(), WriteError>>,
    /// This pass's scrapes (none when the last sampling was reused).
    pub scrapes: Vec<ScrapeResult>,
    /// A problem that stopped the pass before the core, or the target's engine problem.
    pub problem: Option<String>,
    /// The core's next edge (`Outcome::wake_at`), on this pass's clock: the next pass runs
    /// no later than it.
    pub wake_at: Option<Timestamp>,
    /// The core's outcome, when the core ran (its status and events, for reports).
    pub outcome: Option<Outcome>,
}

/// Where a pass's readings come from: scraped from the engines, or given by the caller.
enum Readings<'m, M> {
    Scrape(&'m M),
    Given(BTreeMap<String, RoleObservation>),
}

/// The source of a pass on given readings: it is never asked for a page.
struct NoSource;

impl MetricsSource for NoSource {
    async fn fetch(&self, url: &str) -> Result<String, crate::ports::ScrapeError> {
        Err(crate::ports::ScrapeError::Other(format!(
            "no source: {url} is not read on given readings"
        )))
    }
}

/// An object this worker wrote, and the resource version it replaced: while the watch cache
/// still shows that version, the written object is the truth.
#[derive(Debug)]
struct Written<K> {
    replaced: Option<String>,
    object: Arc<K>,
}

/// The object to plan from, and the version the cache shows when it is our own write the
/// cache has not seen yet.
/// Shared, not copied: a pass reads the scaler and its target many times and changes neither.
fn newest<K: Versioned>(
    cached: &Arc<K>,
    written: &Option<Written<K>>,
) -> (Arc<K>, Option<Option<String>>) {
    match written {
        Some(w) if &w.replaced == cached.resource_version() => {
            (Arc::clone(&w.object), Some(w.replaced.clone()))
        }
        _ => (Arc::clone(cached), None),
    }
}

/// An object with a resource version: the scaler and its target.
trait Versioned {
    fn resource_version(&self) -> &Option<String>;
}

impl Versioned for ModelDeploymentScaler {
    fn resource_version(&self) -> &Option<String> {
        &self.metadata.resource_version
    }
}

impl Versioned for ModelDeployment {
    fn resource_version(&self) -> &Option<String> {
        &self.metadata.resource_version
    }
}

/// The last sampling, reused by passes that come before the interval is over (the spec: the
/// sampler does not scrape a target again before the interval has passed).
#[derive(Debug)]
struct LastSampling {
    at: Timestamp,
    observations: BTreeMap<String, RoleObservation>,
    problem: Option<String>,
}

/// What a pass read: the scaler and target it plans on, the version of the scaler the cache
/// still shows when our own write is newer, and the snapshot (Pods, Workloads).
struct PassRead {
    scaler: Arc<ModelDeploymentScaler>,
    cache_behind: Option<Option<String>>,
    target: Option<Arc<ModelDeployment>>,
    snapshot: crate::ports::Snapshot,
}

/// The readings a pass plans on, when they were taken and what stopped sampling.
struct Observed {
    observations: BTreeMap<String, RoleObservation>,
    at: Timestamp,
    problem: Option<String>,
}

/// One scaler's worker and its memory between passes.
#[derive(Debug)]
pub struct Worker {
    pub key: ScalerKey,
    /// The scaler object the memory belongs to: a scaler recreated under the same name
    /// starts fresh.
    uid: Option<String>,
    memory: Memory,
    samples: SampleStore,
    sampling: Option<LastSampling>,
    scaler_written: Option<Written<ModelDeploymentScaler>>,
    target_written: Option<Written<ModelDeployment>>,
    /// The last target write that failed other than by a conflict, until one lands or the
    /// scaler spec or the target changes.
    failure: Option<Failure>,
}

fn has_finalizer(scaler: &ModelDeploymentScaler) -> bool {
    scaler
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

impl Worker {
    pub fn new(key: ScalerKey) -> Worker {
        Worker {
            key,
            uid: None,
            memory: Memory::default(),
            samples: SampleStore::default(),
            sampling: None,
            scaler_written: None,
            target_written: None,
            failure: None,
        }
    }

    /// Forgets everything held in memory: after a change of leader the status may have moved
    /// on, so the next pass restores from it.
    pub fn reset(&mut self) {
        *self = Worker::new(self.key.clone());
    }

    /// Runs one pass at `now`.
    pub async fn pass<C: Cluster, M: MetricsSource>(
        &mut self,
        cluster: &C,
        metrics: &M,
        now: Timestamp,
    ) -> PassReport {
        self.pass_bounded(cluster, metrics, now, None::<std::future::Ready<()>>)
            .await
    }

    /// Runs one pass at `now`, its planning and writes under the permit `permit` yields,
    /// awaited once the pass has sampled: scrapes are bounded by the source alone, so a slow
    /// engine delays its own scaler's pass and holds no permit another scaler waits for. The
    /// permit (whatever `permit` resolves to, e.g. a semaphore's guard) is held until the pass
    /// ends and dropped then, on every path; the shell's closed semaphore yields an error,
    /// which bounds nothing. `permit` is not polled before sampling is over.
    pub async fn pass_bounded<C: Cluster, M: MetricsSource, P: Future>(
        &mut self,
        cluster: &C,
        metrics: &M,
        now: Timestamp,
        permit: Option<P>,
    ) -> PassReport {
        self.run(cluster, Readings::Scrape(metrics), now, permit)
            .await
    }

    /// Runs one pass at `now` on readings the caller already has (a recorded timeline,
    /// `mds replay`): they count as sampled at `now`, and nothing is scraped.
    pub async fn pass_on_readings<C: Cluster>(
        &mut self,
        cluster: &C,
        observations: BTreeMap<String, RoleObservation>,
        now: Timestamp,
    ) -> PassReport {
        let readings = Readings::<NoSource>::Given(observations);
        self.run(cluster, readings, now, None::<std::future::Ready<()>>)
            .await
    }

    /// One pass: [`Worker::read`], [`Worker::ensure_finalizer`], [`Worker::observe`], the
    /// core, then [`Worker::execute`] (spec, *Binding fence* and *Pacing and guards*: the
    /// target write first, the status after it, the finalizer's release last).
    async fn run<C: Cluster, M: MetricsSource, P: Future>(
        &mut self,
        cluster: &C,
        readings: Readings<'_, M>,
        now: Timestamp,
        permit: Option<P>,
    ) -> PassReport {
        let mut report = PassReport::default();
        let Some(mut read) = self.read(cluster).await else {
            report.gone = true;
            return report;
        };
        if let Err(problem) = self.ensure_finalizer(cluster, &mut read).await {
            report.problem = Some(problem);
            return report;
        }
        let scaler = &read.scaler;
        let deleting = scaler.metadata.deletion_timestamp.is_some();
        let mut spec = scaler.spec.clone();
        default_spec(&mut spec);
        let no_status = ModelDeploymentScalerStatus::default();
        let status = scaler.status.as_ref().unwrap_or(&no_status);
        let md = read.target.as_deref();
        report.target = md.and_then(|m| m.metadata.name.clone());
        let planning = !deleting && !spec.suspend.unwrap_or(false);
        let interval = spec.interval_seconds();
        let observed = self
            .observe(
                md,
                &read.snapshot,
                planning,
                readings,
                interval,
                now,
                &mut report,
            )
            .await;
        let _permit = match permit {
            Some(permit) => Some(permit.await),
            None => None,
        };
        if self
            .failure
            .as_ref()
            .is_some_and(|f| f.released_by(scaler.metadata.generation, &TargetMark::of(md)))
        {
            self.failure = None;
        }
        let refused = self.failure.as_ref().and_then(Failure::refused_commit);
        let snapshot = &read.snapshot;
        let facts = md.map(|md| instance_facts(md, &snapshot.pods, snapshot.workloads.as_deref()));
        let uid = scaler.metadata.uid.clone().unwrap_or_default();
        let name = scaler
            .metadata
            .name
            .clone()
            .unwrap_or(self.key.name.clone());
        let input = Input {
            scaler: Scaler {
                name: &name,
                uid: &uid,
                generation: scaler.metadata.generation.unwrap_or(0),
                spec: &spec,
                status,
                deleting,
            },
            target: md.zip(facts).map(|(deployment, facts)| Target {
                deployment,
                admission: facts.admission,
                ordinals_with_pods: facts.ordinals_with_pods,
                pod_names: facts.pod_names,
                workloads: facts.workloads,
                ready_ordinals: facts.ready_ordinals,
            }),
            observations: &observed.observations,
            observed_at: observed.at,
            sampling_problem: observed.problem.as_deref(),
            target_problem: snapshot.target_problem.as_deref(),
            now,
            refused: refused.as_ref(),
        };
        // A write that does not land leaves no trace in memory: the pass is planned again.
        let before = self.memory.clone();
        let outcome = reconcile(&input, &mut self.memory);
        report.plan = outcome.plan.clone();
        report.wake_at = outcome.wake_at;
        let interval = SignedDuration::from_secs(interval);
        self.execute(
            cluster,
            &read,
            &input.scaler,
            &outcome,
            before,
            now,
            interval,
            &mut report,
        )
        .await;
        report.outcome = Some(outcome);
        report
    }

    /// The scaler and its target as this pass sees them: the cluster's snapshot, or our own
    /// newer write where the cache has not caught up. `None` when the scaler is gone. A
    /// scaler recreated under the same name starts with empty memory.
    async fn read<C: Cluster>(&mut self, cluster: &C) -> Option<PassRead> {
        let snapshot = cluster.snapshot(&self.key).await?;
        if self.uid.is_some() && self.uid != snapshot.scaler.metadata.uid {
            self.reset();
        }
        self.uid = snapshot.scaler.metadata.uid.clone();
        let (scaler, cache_behind) = newest(&snapshot.scaler, &self.scaler_written);
        let target = snapshot
            .target
            .as_ref()
            .map(|t| newest(t, &self.target_written).0);
        Some(PassRead {
            scaler,
            cache_behind,
            target,
            snapshot,
        })
    }

    /// Adds the finalizer to a scaler that is not being deleted and lacks it; the pass goes
    /// on with the object as written, so the status write is guarded by its version. The
    /// error stops the pass.
    async fn ensure_finalizer<C: Cluster>(
        &mut self,
        cluster: &C,
        read: &mut PassRead,
    ) -> Result<(), String> {
        if read.scaler.metadata.deletion_timestamp.is_some() || has_finalizer(&read.scaler) {
            return Ok(());
        }
        let written = cluster
            .set_finalizer(&read.scaler, true)
            .await
            .map_err(|e| format!("adding the finalizer failed: {e}"))?;
        let written = Arc::new(written);
        read.cache_behind = Some(self.remember_scaler(
            &read.scaler,
            read.cache_behind.clone(),
            Arc::clone(&written),
        ));
        read.scaler = written;
        Ok(())
    }

    /// The readings this pass plans on: given ones, or the engines sampled at most once an
    /// interval (a pass before the interval is over reuses the last sampling, its time and
    /// problem). A pass that does not plan (suspended, deleting) drops every baseline (D8).
    #[allow(clippy::too_many_arguments)]
    async fn observe<M: MetricsSource>(
        &mut self,
        md: Option<&ModelDeployment>,
        snapshot: &crate::ports::Snapshot,
        planning: bool,
        readings: Readings<'_, M>,
        interval: i64,
        now: Timestamp,
        report: &mut PassReport,
    ) -> Observed {
        let mut observed = Observed {
            observations: BTreeMap::new(),
            at: now,
            problem: None,
        };
        if !planning {
            // Baselines taken before a suspension describe nothing after it: the first
            // sampling when planning resumes is a baseline only (D8), never a rate over the
            // whole suspension.
            self.samples = SampleStore::default();
            self.sampling = None;
        }
        let Some(md) = md.filter(|_| planning) else {
            return observed;
        };
        match readings {
            Readings::Given(given) => observed.observations = given,
            Readings::Scrape(metrics) => {
                let fresh = self
                    .sampling
                    .as_ref()
                    .is_some_and(|s| now < s.at + SignedDuration::from_secs(interval));
                if !fresh {
                    let sampling = sample(
                        metrics,
                        &mut self.samples,
                        md,
                        &snapshot.pods,
                        interval as u32,
                        now,
                    )
                    .await;
                    report.scrapes = sampling.scrapes;
                    self.sampling = Some(LastSampling {
                        at: now,
                        observations: sampling.observations,
                        problem: sampling.problem,
                    });
                }
                if let Some(last) = &self.sampling {
                    observed.observations = last.observations.clone();
                    observed.at = last.at;
                    observed.problem = last.problem.clone();
                    report.problem = last.problem.clone();
                }
            }
        }
        observed
    }

    /// Records our write of the scaler; returns the version the cache still shows. When the
    /// object written over was itself our unseen write, the cache still shows the version
    /// before that one.
    fn remember_scaler(
        &mut self,
        before: &ModelDeploymentScaler,
        cache_behind: Option<Option<String>>,
        written: Arc<ModelDeploymentScaler>,
    ) -> Option<String> {
        let replaced = cache_behind.unwrap_or_else(|| before.metadata.resource_version.clone());
        self.scaler_written = Some(Written {
            replaced: replaced.clone(),
            object: written,
        });
        replaced
    }
}
