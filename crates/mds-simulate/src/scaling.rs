//! Who scales the target in a run, behind one trait: the operator's own worker on its own
//! schedule ([`Operator`]), or a peer autoscaler (`peer_drive`). The driver (module `driver`)
//! runs the world to each pass that is due, calls the one due, and does the rest the same way
//! for both: faults around the pass, the world taking the written spec, the recording and,
//! for a scaler bound by our spec, the invariants.

use std::collections::BTreeMap;

use futures::executor::block_on;
use jiff::Timestamp;
use mds_api::defaults::values;
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_sim::{DeploymentKey, World};
use mds_worker::memory_cluster::{Kind, MemoryCluster};
use mds_worker::schedule::{Fingerprint, Next, Schedule};
use mds_worker::{ScalerKey, Worker};
use serde::Deserialize;

use crate::SimError;
use crate::faults::{FaultyPages, Injector};
use crate::source::Pages;

/// What a pass may read and write.
pub(crate) struct Ctx<'a> {
    pub world: &'a World,
    pub cluster: &'a MemoryCluster,
    pub deployment: &'a DeploymentKey,
    pub faults: &'a Injector,
    pub start: Timestamp,
}

impl Ctx<'_> {
    pub fn seconds(&self, t: Timestamp) -> f64 {
        t.duration_since(self.start).as_secs_f64()
    }
}

/// What a pass did.
#[derive(Clone, Debug, Default)]
pub(crate) struct Passed {
    /// The target write (`commit`, `bind`, `scale`, ...) and whether it landed.
    pub write: Option<(String, bool)>,
    /// The write was a pending cohort's rollback.
    pub rollback: bool,
    /// Each planned role's raw recommendation and reason.
    pub plan: BTreeMap<String, (i32, String)>,
    /// What decided a role's count when the algorithm did not (module `decided`).
    pub decided: BTreeMap<String, crate::decided::Decider>,
    /// Predictive's forecasts.
    pub forecasts: BTreeMap<String, crate::Forecast>,
}

/// A writer of the target's counts.
pub(crate) trait Scaling {
    /// When it next has something to do.
    fn next_due(&self) -> Timestamp;
    /// Its work due at `now`: `None` when that was only a sample or a scrape, not a pass.
    fn pass(&mut self, ctx: &Ctx, now: Timestamp) -> Result<Option<Passed>, SimError>;
    /// It reads the cluster's Pods, Workloads and target status, so the world is mirrored
    /// into the cluster before each of its passes.
    fn reads_cluster(&self) -> bool;
    /// Our spec binds it: its passes are checked against the invariants.
    fn bound_by_spec(&self) -> bool;
    /// Its process is replaced at `first` by one with only what the cluster holds (a restart
    /// or a change of leader). `false`: it cannot restart.
    fn restart(&mut self, first: Timestamp) -> bool;
}

/// The operator's worker, on the operator's schedule.
pub(crate) struct Operator {
    key: ScalerKey,
    worker: Box<Worker>,
    schedule: Schedule,
    next: Timestamp,
}

impl Operator {
    pub fn new(key: ScalerKey, start: Timestamp) -> Operator {
        Operator {
            worker: Box::new(Worker::new(key.clone())),
            schedule: Schedule::new(start),
            key,
            next: start,
        }
    }

    /// The scaler's interval as the cluster holds it (a pass writes status, not spec).
    fn interval(&self, cluster: &MemoryCluster) -> std::time::Duration {
        // The spec alone: its status (histories, predictor state) is most of the object.
        let seconds = cluster
            .read(Kind::Scaler, &self.key.namespace, &self.key.name, |doc| {
                ModelDeploymentScalerSpec::deserialize(&doc["spec"]).ok()
            })
            .flatten()
            .map_or(values::INTERVAL_SECONDS as i64, |spec| {
                spec.interval_seconds()
            });
        std::time::Duration::from_secs(seconds.max(1) as u64)
    }
}

impl Scaling for Operator {
    fn next_due(&self) -> Timestamp {
        self.next
    }

    fn pass(&mut self, ctx: &Ctx, now: Timestamp) -> Result<Option<Passed>, SimError> {
        let t = ctx.seconds(now);
        let pages = FaultyPages::new(Pages::of(ctx.world, ctx.deployment), ctx.faults, t);
        let report = block_on(self.worker.pass(ctx.cluster, &pages, now));
        // The operator's own schedule decides when the next pass is due: the interval,
        // brought forward to the core's `wake_at` but not within its floor. A change seen
        // between passes does not bring one forward here (every fingerprint is the same).
        let interval = self.interval(ctx.cluster);
        self.schedule.ran(now, false, Fingerprint::default());
        self.schedule.wake(report.wake_at);
        self.next = match self.schedule.next(now, interval, &Fingerprint::default()) {
            Next::Sleep(due) => due,
            Next::Run { .. } => now + interval,
        };
        Ok(Some(Passed {
            rollback: report
                .write
                .as_ref()
                .is_some_and(|(kind, _)| *kind == mds_core::WriteKind::Rollback),
            write: report
                .write
                .as_ref()
                .map(|(kind, result)| (kind.as_str().to_string(), result.is_ok())),
            plan: report
                .plan
                .iter()
                .flat_map(|p| &p.roles)
                .map(|r| (r.name.clone(), (r.raw, r.reason.as_str().to_string())))
                .collect(),
            decided: report
                .plan
                .iter()
                .flat_map(|p| &p.roles)
                .filter_map(|r| Some((r.name.clone(), crate::decided::decider(r)?)))
                .collect(),
            forecasts: report
                .plan
                .iter()
                .flat_map(|p| &p.roles)
                .filter_map(|r| {
                    let f = r.forecast?;
                    Some((
                        r.name.clone(),
                        crate::Forecast {
                            demand: f.demand,
                            value: f.value,
                            horizon_seconds: f.horizon_seconds,
                        },
                    ))
                })
                .collect(),
        }))
    }

    fn reads_cluster(&self) -> bool {
        true
    }

    fn bound_by_spec(&self) -> bool {
        true
    }

    fn restart(&mut self, first: Timestamp) -> bool {
        *self = Operator {
            worker: Box::new(Worker::new(self.key.clone())),
            schedule: Schedule::new(first),
            key: self.key.clone(),
            next: first,
        };
        true
    }
}
