//! The faults of a run as they strike: armed on the in-memory cluster around each pass, on
//! the pages as the worker fetches them, on the world after each tick, and on the worker
//! itself (replaced by a new one) at a restart or a change of leader.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::{SignedDuration, Timestamp};
use mds_api::defaults::values;
use mds_worker::WriteError;
use mds_worker::memory_cluster::{Fault, WriteKind};
use mds_worker::schedule::offset;

use super::pages::{Strike, counters, restarted};
use super::{AppliedFault, FaultKind, FaultSpec};
use crate::source::PagePod;
use crate::{SimError, Simulation};

/// How a failing-closed admission webhook that cannot be called answers (the API server's
/// 500; the lab's `with_the_webhook_down_...` test reads the same text from a real one). The
/// production port classes it as unavailable, so the write is retried with backoff.
const WEBHOOK_DOWN: &str = "Internal error occurred: failed calling webhook \"fence.modeldeployments.worker.gpustack.ai\": failed to call webhook: Post \"https://mds-webhook.mds-system.svc:443/validate/modeldeployments?timeout=10s\": dial tcp 10.96.0.42:443: connect: connection refused (HTTP 500)";

/// Why the stand-in aborts a retirement under `retirement-abort` (TARGET.md section 5 lists
/// an exec failure among the causes).
const ABORT_REASON: &str = "a drain read of a target member failed: exec failed (fault injected)";

/// The run's faults and what they did so far.
#[derive(Default)]
pub(crate) struct Injector {
    seed: u64,
    faults: Vec<Active>,
    /// Writes failed for the pass under way: the fault, the kind, attempts before the pass.
    armed: Vec<(usize, WriteKind, usize)>,
}

/// One fault and its state.
struct Active {
    spec: FaultSpec,
    /// Pages are struck while the worker holds the injector only by reference.
    events: AtomicU64,
    note: Option<String>,
    /// Counter resets: what was reset, and when.
    reset: Mutex<Reset>,
    /// A frozen quota: each instance type's quota before.
    saved_quota: Option<BTreeMap<String, Option<u32>>>,
    quota_restored: bool,
    /// Refused writes by kind (target, status, finalizer).
    refused: BTreeMap<&'static str, u64>,
    /// A restart: the new worker's first pass (seconds).
    first_pass: Option<f64>,
}

/// A counter reset's state.
#[derive(Default)]
struct Reset {
    /// The pass that reset (seconds).
    pass: Option<f64>,
    /// Each reset Pod's cumulative series and their values at the reset.
    offsets: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Active {
    fn strike(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }
}

/// A uniform draw in [0, 1) from `seed`, the fault's place in the list and `parts`: the same
/// operation draws the same wherever it comes in the run.
fn draw(seed: u64, index: usize, parts: &[&[u8]]) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    };
    eat(&seed.to_le_bytes());
    eat(&(index as u64).to_le_bytes());
    for p in parts {
        eat(p);
    }
    // splitmix64's finaliser spreads FNV's low-entropy high bits.
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn millis(t: f64) -> [u8; 8] {
    ((t * 1000.0).round() as i64).to_le_bytes()
}

fn write_name(kind: WriteKind) -> &'static str {
    match kind {
        WriteKind::PatchTarget => "target",
        WriteKind::Status => "status",
        WriteKind::Finalizer => "finalizer",
    }
}

impl Injector {
    fn new(faults: &[FaultSpec], seed: u64) -> Injector {
        Injector {
            seed,
            faults: faults
                .iter()
                .map(|spec| Active {
                    spec: spec.clone(),
                    events: AtomicU64::new(0),
                    note: None,
                    reset: Mutex::new(Reset::default()),
                    saved_quota: None,
                    quota_restored: false,
                    refused: BTreeMap::new(),
                    first_pass: None,
                })
                .collect(),
            armed: Vec::new(),
        }
    }

    /// Whether the fault at `index` strikes `pod`'s page: its role and ordinals, and its rate
    /// drawn on the Pod (and on the moment, when `at` is given).
    fn selects(&self, index: usize, pod: &PagePod, at: Option<f64>) -> bool {
        let spec = &self.faults[index].spec;
        if spec.role.as_ref().is_some_and(|r| *r != pod.role) {
            return false;
        }
        if spec
            .ordinals
            .as_ref()
            .is_some_and(|o| !o.contains(&pod.ordinal))
        {
            return false;
        }
        if spec.rate >= 1.0 {
            return true;
        }
        let when = at.map(millis).unwrap_or_default();
        draw(self.seed, index, &[pod.name.as_bytes(), &when]) < spec.rate
    }

    /// What a scrape fault does to `pod`'s page at `t`, if any (the first fault that strikes).
    pub(crate) fn page_strike(&self, pod: &PagePod, t: f64) -> Option<Strike> {
        for (i, a) in self.faults.iter().enumerate() {
            let strike = match a.spec.kind {
                FaultKind::ScrapeTimeout => Strike::Timeout,
                FaultKind::ScrapeGarbage => {
                    let shape = draw(self.seed, i, &[b"shape", pod.name.as_bytes(), &millis(t)]);
                    if shape < 0.5 {
                        Strike::ErrorPage
                    } else {
                        Strike::Mangled
                    }
                }
                _ => continue,
            };
            if a.spec.holds(t) && self.selects(i, pod, Some(t)) {
                a.strike();
                return Some(strike);
            }
        }
        None
    }

    /// `page` as `pod` shows it at `t`: counted from the values it had at its reset, for a
    /// Pod a counter reset chose in the first pass at or after its `at`.
    pub(crate) fn reset_counters(&self, pod: &PagePod, t: f64, mut page: String) -> String {
        for (i, a) in self.faults.iter().enumerate() {
            if a.spec.kind != FaultKind::CounterReset || t < a.spec.from {
                continue;
            }
            let mut reset = a.reset.lock().unwrap_or_else(|e| e.into_inner());
            let pass = *reset.pass.get_or_insert(t);
            if !reset.offsets.contains_key(&pod.name) {
                if pass != t || !self.selects(i, pod, None) {
                    continue;
                }
                reset.offsets.insert(pod.name.clone(), counters(&page));
                a.strike();
            }
            page = restarted(&page, &reset.offsets[&pod.name]);
        }
        page
    }
}

impl Simulation {
    /// Injects `faults` into the run, their draws seeded by `seed`. Only the operator's
    /// worker meets them: a peer writes the target directly and reads the world, not the
    /// cluster or the pages.
    pub fn inject_faults(&mut self, faults: &[FaultSpec], seed: u64) -> Result<(), SimError> {
        if faults.is_empty() {
            self.faults = Injector::default();
            return Ok(());
        }
        if !self.scaling.bound_by_spec() {
            return Err(SimError::Input(
                "faults are injected into our scaler's runs only; a peer writes the target directly"
                    .into(),
            ));
        }
        let md = self
            .target_now()
            .ok_or_else(|| SimError::Input("the target is gone".into()))?;
        let types: Vec<String> = md
            .spec
            .roles
            .iter()
            .filter_map(|r| r.instance_type.clone())
            .collect();
        for f in faults {
            if let Some(role) = &f.role
                && !md.spec.roles.iter().any(|r| r.name == *role)
            {
                let roles: Vec<&str> = md.spec.roles.iter().map(|r| r.name.as_str()).collect();
                return Err(SimError::Input(format!(
                    "--fault {:?}: the target has no role {role:?} (its roles: {})",
                    f.text,
                    roles.join(", ")
                )));
            }
            if f.kind == FaultKind::QuotaNeverAdmits {
                match &f.instance_type {
                    Some(t) if !types.contains(t) => {
                        return Err(SimError::Input(format!(
                            "--fault {:?}: no role of the target runs on instance type {t:?} (they run on: {})",
                            f.text,
                            types.join(", ")
                        )));
                    }
                    None if types.is_empty() => {
                        return Err(SimError::Input(format!(
                            "--fault {:?}: no role of the target names an instanceType, so no quota applies",
                            f.text
                        )));
                    }
                    _ => {}
                }
            }
        }
        self.faults = Injector::new(faults, seed);
        Ok(())
    }

    /// The faults as they were applied by `end`.
    pub fn faults_applied(&self, end: Timestamp) -> Vec<AppliedFault> {
        let end = self.seconds(end);
        self.faults
            .faults
            .iter()
            .map(|a| {
                let spec = &a.spec;
                let until = match spec.kind {
                    FaultKind::OperatorRestart | FaultKind::LeaderChange => {
                        a.first_pass.unwrap_or(end)
                    }
                    FaultKind::CounterReset => spec.from,
                    _ => spec.until.unwrap_or(end).min(end),
                };
                let mut note = a.note.clone();
                if !a.refused.is_empty() {
                    let by: Vec<String> =
                        a.refused.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    note = Some(by.join(", "));
                }
                AppliedFault {
                    kind: spec.kind,
                    spec: spec.text.clone(),
                    from: spec.from,
                    until,
                    rate: spec.rated().then_some(spec.rate),
                    events: a.events.load(Ordering::Relaxed),
                    unit: spec.kind.unit(),
                    note,
                }
            })
            .collect()
    }

    /// After each world tick: a quota freezes or thaws, a retirement aborts.
    pub(crate) fn fault_tick(&mut self) -> Result<(), SimError> {
        if self.faults.faults.is_empty() {
            return Ok(());
        }
        let t = self.seconds(self.world.now());
        for i in 0..self.faults.faults.len() {
            match self.faults.faults[i].spec.kind {
                FaultKind::QuotaNeverAdmits => self.quota_fault(i, t),
                FaultKind::RetirementAbort if self.faults.faults[i].spec.holds(t) => {
                    self.retirement_fault(i)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Freezes each instance type's quota at what it holds when the window opens; gives the
    /// quota back when it closes.
    fn quota_fault(&mut self, i: usize, t: f64) {
        let a = &self.faults.faults[i];
        if a.saved_quota.is_none() && a.spec.holds(t) {
            let types: Vec<String> = match &a.spec.instance_type {
                Some(t) => vec![t.clone()],
                None => self
                    .world
                    .deployment(&self.deployment)
                    .map(|md| {
                        let mut types: Vec<String> = md
                            .spec
                            .roles
                            .iter()
                            .filter_map(|r| r.instance_type.clone())
                            .collect();
                        types.sort();
                        types.dedup();
                        types
                    })
                    .unwrap_or_default(),
            };
            let usage = self.world.quota_usage();
            let mut saved = BTreeMap::new();
            let mut frozen = Vec::new();
            for ty in types {
                let used = usage.get(&ty);
                let held = used.map_or(0, |u| u.reserved);
                saved.insert(ty.clone(), used.and_then(|u| u.quota));
                self.world.set_quota(&ty, Some(held));
                frozen.push(format!("{ty}={held}"));
            }
            let a = &mut self.faults.faults[i];
            a.note = Some(format!("quota frozen at {}", frozen.join(", ")));
            a.saved_quota = Some(saved);
        } else if !a.quota_restored && a.spec.until.is_some_and(|u| t >= u) {
            if let Some(saved) = a.saved_quota.clone() {
                for (ty, quota) in saved {
                    self.world.set_quota(&ty, quota);
                }
            }
            self.faults.faults[i].quota_restored = true;
        }
    }

    /// Aborts the target's running retirement, if the fault's rate (drawn on the retirement)
    /// picks it.
    fn retirement_fault(&mut self, i: usize) -> Result<(), SimError> {
        let Some(r) = self
            .world
            .deployment(&self.deployment)
            .and_then(|md| md.status.as_ref())
            .and_then(|s| s.retirement.clone())
        else {
            return Ok(());
        };
        if matches!(r.state.as_str(), "Aborted" | "Deleting" | "Settling") {
            return Ok(());
        }
        let started = r.started_at.as_ref().map(|s| s.0.to_string());
        let identity = format!(
            "{}/{}/{}",
            r.role_name,
            r.replica_ordinal,
            started.unwrap_or_default()
        );
        let spec = &self.faults.faults[i].spec;
        if spec.rate < 1.0 && draw(self.faults.seed, i, &[identity.as_bytes()]) >= spec.rate {
            return Ok(());
        }
        if self
            .world
            .abort_retirement(&self.deployment, ABORT_REASON)?
            .is_some()
        {
            self.faults.faults[i].strike();
        }
        Ok(())
    }

    /// Before a pass at `t`: the writes this pass's faults answer are armed on the cluster.
    pub(crate) fn fault_before_pass(&mut self, t: f64) {
        for (i, a) in self.faults.faults.iter().enumerate() {
            if !a.spec.holds(t) {
                continue;
            }
            let (kinds, fault): (Vec<WriteKind>, WriteError) = match a.spec.kind {
                FaultKind::ApiConflict | FaultKind::ApiUnavailable => {
                    let mut kinds = Vec::new();
                    if a.spec.target_writes {
                        kinds.push(WriteKind::PatchTarget);
                    }
                    if a.spec.status_writes {
                        kinds.push(WriteKind::Status);
                    }
                    let fault = if a.spec.kind == FaultKind::ApiConflict {
                        Fault::Conflict
                    } else {
                        Fault::Unavailable
                    };
                    (kinds, fault.error())
                }
                // The webhooks see creates and updates of the target and the scaler (the
                // finalizer is an update), never the status subresource (mds-webhook's
                // configuration).
                FaultKind::WebhookOutage => (
                    vec![WriteKind::PatchTarget, WriteKind::Finalizer],
                    WriteError::Unavailable(WEBHOOK_DOWN.into()),
                ),
                _ => continue,
            };
            for kind in kinds {
                if self.faults.armed.iter().any(|(_, k, _)| *k == kind) {
                    continue;
                }
                let name = write_name(kind);
                if a.spec.rate < 1.0
                    && draw(self.faults.seed, i, &[name.as_bytes(), &millis(t)]) >= a.spec.rate
                {
                    continue;
                }
                self.cluster.fail_every(kind, Some(fault.clone()));
                let before = self.cluster.attempts(kind);
                self.faults.armed.push((i, kind, before));
            }
        }
    }

    /// After a pass at `t`: the armed writes the pass tried are counted and disarmed; a
    /// rollback while the quota is frozen is counted.
    pub(crate) fn fault_after_pass(&mut self, t: f64, rolled_back: bool) {
        for (i, kind, before) in std::mem::take(&mut self.faults.armed) {
            let tried = self.cluster.attempts(kind).saturating_sub(before) as u64;
            self.cluster.fail_every(kind, None);
            let a = &mut self.faults.faults[i];
            if tried > 0 {
                a.events.fetch_add(tried, Ordering::Relaxed);
                *a.refused.entry(write_name(kind)).or_default() += tried;
            }
        }
        for a in &self.faults.faults {
            if rolled_back && a.spec.kind == FaultKind::QuotaNeverAdmits && a.spec.holds(t) {
                a.strike();
            }
        }
    }

    /// Before the pass due at `now`: a restart or change of leader due by then replaces the
    /// worker. The old one stops at `at`; the new one has only what the cluster holds, takes
    /// over `gap` later and, as the controller's runtime does for every term, runs its first
    /// pass at the scaler's offset into the interval. Whether it did.
    pub(crate) fn fault_restart(&mut self, now: Timestamp) -> bool {
        let t = self.seconds(now);
        let i = self.faults.faults.iter().position(|a| {
            matches!(
                a.spec.kind,
                FaultKind::OperatorRestart | FaultKind::LeaderChange
            ) && a.first_pass.is_none()
                && a.spec.from <= t
        });
        let Some(i) = i else {
            return false;
        };
        let spec = &self.faults.faults[i].spec;
        let takeover = self.start + SignedDuration::from_secs_f64(spec.from + spec.gap.max(0.0));
        let scaler = self.scaler();
        let uid = scaler
            .as_ref()
            .and_then(|s| s.metadata.uid.clone())
            .unwrap_or_default();
        let interval = scaler
            .as_ref()
            .map_or(values::INTERVAL_SECONDS as i64, |s| {
                s.spec.interval_seconds()
            });
        let interval = std::time::Duration::from_secs(interval.max(1) as u64);
        let first = takeover + offset(&uid, interval);
        let status = scaler.and_then(|s| s.status.clone()).unwrap_or_default();
        let mut held = Vec::new();
        if status.pending_cohort.is_some() {
            held.push("pendingCohort");
        }
        if status.rebalance.is_some() {
            held.push("rebalance");
        }
        if status.last_scale_down.is_some() {
            held.push("lastScaleDown");
        }
        if !self.scaling.restart(first) {
            return false;
        }
        let first_t = self.seconds(first);
        let a = &mut self.faults.faults[i];
        a.first_pass = Some(first_t);
        a.note = Some(if held.is_empty() {
            "status held no pendingCohort, rebalance or lastScaleDown".into()
        } else {
            format!("status held {}", held.join(", "))
        });
        a.strike();
        true
    }
}
