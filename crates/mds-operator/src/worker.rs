//! The per-scaler worker: one pass is snapshot → scrape → signals → core → effects. It holds
//! no decision logic; it gathers the core's inputs, runs `mds_core::reconcile`, and executes
//! what comes out: the target write first (a failed write is re-planned next pass, never
//! retried and never half-applied), then the status only when the core asks for it (D23), then
//! the events. The finalizer makes a deleted scaler release its binding before it goes.

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_core::{Input, Memory, Scaler, Target, WriteKind, reconcile};
use mds_planner::Plan;
use mds_signals::SampleStore;

use crate::facts::instance_facts;
use crate::ports::{Cluster, MetricsSource, ScalerKey, WriteError};
use crate::sampler::{ScrapeResult, sample};

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
    /// The status write, when the core asked for one.
    pub status: Option<Result<(), WriteError>>,
    pub scrapes: Vec<ScrapeResult>,
    /// A problem that stopped the pass before the core, or the target's engine problem.
    pub problem: Option<String>,
}

/// One scaler's worker and its memory between passes.
#[derive(Debug)]
pub struct Worker {
    pub key: ScalerKey,
    memory: Memory,
    samples: SampleStore,
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
            memory: Memory::default(),
            samples: SampleStore::default(),
        }
    }

    /// Forgets everything held in memory: after a change of leader the status may have moved
    /// on, so the next pass restores from it.
    pub fn reset(&mut self) {
        self.memory = Memory::default();
        self.samples = SampleStore::default();
    }

    /// Runs one pass at `now`.
    pub async fn pass<C: Cluster, M: MetricsSource>(
        &mut self,
        cluster: &C,
        metrics: &M,
        now: Timestamp,
    ) -> PassReport {
        let mut report = PassReport::default();
        let Some(snapshot) = cluster.snapshot(&self.key).await else {
            report.gone = true;
            return report;
        };
        let mut scaler: ModelDeploymentScaler = (*snapshot.scaler).clone();
        let deleting = scaler.metadata.deletion_timestamp.is_some();
        if !deleting && !has_finalizer(&scaler) {
            match cluster.set_finalizer(&scaler, true).await {
                // The write moved the resource version: go on with the object as written, so
                // the status write below is guarded by it.
                Ok(written) => scaler = written,
                Err(e) => {
                    report.problem = Some(format!("adding the finalizer failed: {e}"));
                    return report;
                }
            }
        }
        let mut spec = scaler.spec.clone();
        default_spec(&mut spec);
        let status: ModelDeploymentScalerStatus = scaler.status.clone().unwrap_or_default();
        let md = snapshot.target.as_deref();
        report.target = md.and_then(|m| m.metadata.name.clone());
        let planning = !deleting && !spec.suspend.unwrap_or(false);
        let mut observations = Default::default();
        if let (Some(md), true) = (md, planning) {
            let sampling = sample(
                metrics,
                &mut self.samples,
                md,
                &snapshot.pods,
                spec.interval_seconds() as u32,
                now,
            )
            .await;
            observations = sampling.observations;
            report.scrapes = sampling.scrapes;
            report.problem = sampling.problem;
        }
        let facts = md.map(|md| instance_facts(md, &snapshot.pods, snapshot.workloads.as_deref()));
        let uid = scaler.metadata.uid.clone().unwrap_or_default();
        let input = Input {
            scaler: Scaler {
                name: scaler.metadata.name.as_deref().unwrap_or(&self.key.name),
                uid: &uid,
                generation: scaler.metadata.generation.unwrap_or(0),
                spec: &spec,
                status: &status,
                deleting,
            },
            target: md.zip(facts).map(|(deployment, facts)| Target {
                deployment,
                admission: facts.admission,
                ordinals_with_pods: facts.ordinals_with_pods,
                ready_ordinals: facts.ready_ordinals,
            }),
            observations: &observations,
            now,
        };
        // A write that does not land leaves no trace in memory: the pass is planned again.
        let before = self.memory.clone();
        let outcome = reconcile(&input, &mut self.memory);
        report.plan = outcome.plan.clone();
        let mut write_ok = true;
        if let Some(write) = &outcome.write {
            report.decision_id = write.decision_id.clone();
            let target = report.target.clone().unwrap_or_default();
            let result = cluster
                .patch_target(&self.key.namespace, &target, &write.ops)
                .await;
            write_ok = result.is_ok();
            if !write_ok {
                self.memory = before;
            }
            report.write = Some((write.kind, result));
        }
        if write_ok && outcome.write_status {
            report.status = Some(cluster.write_status(&scaler, &outcome.status).await);
        }
        if write_ok {
            for event in &outcome.events {
                cluster.emit(&scaler, event).await;
            }
        }
        if deleting && write_ok && has_finalizer(&scaler) {
            // Released (or nothing to release): the scaler may go.
            if let Err(e) = cluster.set_finalizer(&scaler, false).await {
                report.problem = Some(format!("removing the finalizer failed: {e}"));
            }
        }
        report
    }
}
