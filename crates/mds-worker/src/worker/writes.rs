//! A pass's writes, carried out in the one order ([`carry_out`]): the target write under its
//! failure backoff, then the status and events, the failed write's report on its condition,
//! and a deleted scaler's finalizer last.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::ModelDeployment;
use mds_core::{Event, Memory, Outcome, Scaler, Write, report_failed_write};

use super::{PassRead, PassReport, Worker, Written, has_finalizer};
use crate::carry_out::{Effects, carry_out};
use crate::failures::{Failure, TargetMark};
use crate::ports::{Cluster, WriteError};

impl Worker {
    /// Carries out the core's outcome in the one order ([`carry_out`]): the target write
    /// first; only once it landed (or none was due) the status and the events. A write that
    /// does not land puts the memory back as it was before the pass (`before`) and may report
    /// the failure on its condition. A deleted scaler whose release landed loses its
    /// finalizer, guarded by the newest version we wrote.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn execute<C: Cluster>(
        &mut self,
        cluster: &C,
        read: &PassRead,
        core: &Scaler<'_>,
        outcome: &Outcome,
        before: Memory,
        now: Timestamp,
        interval: SignedDuration,
        report: &mut PassReport,
    ) {
        let mut memory = std::mem::take(&mut self.memory);
        let mut effects = PassEffects {
            latest: Arc::clone(&read.scaler),
            worker: self,
            cluster,
            read,
            core,
            now,
            interval,
            report,
        };
        let landed = carry_out(&mut effects, outcome, &mut memory, before).await;
        let latest = effects.latest;
        self.memory = memory;
        if core.deleting && landed && has_finalizer(&latest) {
            // Released (or nothing to release): the scaler may go.
            let result = cluster.set_finalizer(&latest, false).await;
            if let Err(e) = &result {
                report.problem = Some(format!("removing the finalizer failed: {e}"));
            }
            report.finalizer = Some(result.map(|_| ()));
        }
    }

    /// Makes the pass's target write unless its backoff holds it; `true` when it landed. A
    /// failure other than a conflict is kept (`failures.rs`), so it is reported and retried.
    #[allow(clippy::too_many_arguments)]
    async fn write_target<C: Cluster>(
        &mut self,
        cluster: &C,
        md: &ModelDeployment,
        write: &Write,
        scaler_generation: Option<i64>,
        now: Timestamp,
        interval: SignedDuration,
        report: &mut PassReport,
    ) -> bool {
        if self
            .failure
            .as_ref()
            .is_some_and(|f| f.holds(write.kind, now, interval))
        {
            report.held = Some(write.kind);
            return false;
        }
        report.decision_id = write.decision_id.clone();
        let name = md.metadata.name.clone().unwrap_or_default();
        let result = cluster
            .patch_target(&self.key.namespace, &name, &write.ops)
            .await;
        let landed = result.is_ok();
        let result = match result {
            Ok(written) => {
                self.target_written = Some(Written {
                    replaced: md.metadata.resource_version.clone(),
                    object: Arc::new(written),
                });
                self.failure = None;
                Ok(())
            }
            Err(e) => {
                self.failure = Failure::after(
                    self.failure.as_ref(),
                    write.kind,
                    &e,
                    write.vector.as_ref(),
                    now,
                    interval,
                    scaler_generation,
                    TargetMark::of(Some(md)),
                );
                Err(e)
            }
        };
        report.write = Some((write.kind, result));
        landed
    }

    /// Shows the failing write on the condition that owns it, with a Warning event, once it
    /// is to be reported and the stored status does not say so yet; returns the status write
    /// and the scaler it wrote.
    async fn report_failure<C: Cluster>(
        &mut self,
        cluster: &C,
        core: &Scaler<'_>,
        scaler: &ModelDeploymentScaler,
        cache_behind: Option<Option<String>>,
        now: Timestamp,
        interval: SignedDuration,
    ) -> Option<Result<Arc<ModelDeploymentScaler>, WriteError>> {
        let failure = self
            .failure
            .as_ref()
            .filter(|f| f.reportable(now, interval))?;
        let (status, event) = report_failed_write(core, &failure.write, now);
        if status.conditions == core.status.conditions {
            return None;
        }
        let result = cluster.write_status(scaler, &status).await.map(Arc::new);
        if let Ok(written) = &result {
            self.remember_scaler(scaler, cache_behind, Arc::clone(written));
            cluster.emit(scaler, &event).await;
        }
        Some(result)
    }
}

/// The worker's side of carrying out a pass: its target write under the failure backoff,
/// the status write it remembers (the cache may lag it), the events, and the report of a
/// failed write on its condition. `latest` is the newest scaler version it wrote.
struct PassEffects<'a, 'b, C> {
    worker: &'a mut Worker,
    cluster: &'a C,
    read: &'a PassRead,
    core: &'a Scaler<'b>,
    now: Timestamp,
    interval: SignedDuration,
    report: &'a mut PassReport,
    latest: Arc<ModelDeploymentScaler>,
}

impl<C: Cluster> Effects for PassEffects<'_, '_, C> {
    async fn write_target(&mut self, write: &Write) -> bool {
        let Some(md) = self.read.target.as_ref() else {
            return true;
        };
        let generation = self.read.scaler.metadata.generation;
        let (now, interval) = (self.now, self.interval);
        self.worker
            .write_target(
                self.cluster,
                md,
                write,
                generation,
                now,
                interval,
                self.report,
            )
            .await
    }

    async fn write_status(&mut self, status: &ModelDeploymentScalerStatus) {
        let scaler = &self.read.scaler;
        let result = self
            .cluster
            .write_status(scaler, status)
            .await
            .map(Arc::new);
        if let Ok(written) = &result {
            let cache_behind = self.read.cache_behind.clone();
            self.worker
                .remember_scaler(scaler, cache_behind, Arc::clone(written));
            self.latest = Arc::clone(written);
        }
        self.report.status = Some(result.map(|_| ()));
    }

    async fn emit(&mut self, event: &Event) {
        self.cluster.emit(&self.read.scaler, event).await;
    }

    async fn not_landed(&mut self) {
        let (scaler, cache_behind) = (&self.read.scaler, self.read.cache_behind.clone());
        let (now, interval) = (self.now, self.interval);
        let reported = self
            .worker
            .report_failure(self.cluster, self.core, scaler, cache_behind, now, interval)
            .await;
        if let Some(written) = reported {
            self.report.status = Some(written.map(|w| self.latest = w));
        }
    }
}
