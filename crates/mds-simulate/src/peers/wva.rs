//! The llm-d Workload Variant Autoscaler in saturation mode, re-implemented from
//! `llm-d/llm-d-workload-variant-autoscaler` `docs/saturation-analyzer.md` and
//! `docs/saturation-scaling-config.md` as BASELINES.md section 5 pins them. One variant per
//! role.
//!
//! Inputs are each ready replica's KV-cache usage and queue length (the engine's waiting
//! gauge) as `max_over_time[1m]` through Prometheus: the peer samples at the 15 s scrape and
//! keeps per replica the maximum of the samples of the last minute (open at its old end, as
//! Prometheus 3 ranges are). Only ready replicas with a sample in that minute report.
//!
//! Every 60 s cycle, per role: a replica is saturated when its KV usage is at least 0.80 or its
//! queue at least 5. Over the non-saturated ones, the average spare KV (`0.80 − kv`) and spare
//! queue (`5 − queue`); +1 if the spare KV is below 0.10 or the spare queue below 3, and +1
//! when every reporting replica is saturated (unverified in the docs, our choice; upstream's
//! code reaches the same, its averages staying 0 without a non-saturated replica). Otherwise
//! −1 only if at least 2 replicas are non-saturated and, with their total KV and queue spread
//! over one replica fewer, both spares stay at or above the triggers. Never below 1 replica,
//! then the role's bounds. No replica reporting: no decision.
//!
//! Pending replicas (the docs' cascade-scaling prevention; the exact rule is unverified, this
//! is our reading): while any replica of the role is pending or starting, or the spec counts
//! more replicas than report, a scale-up is not repeated (the count is held); a scale-down
//! still may be.
//!
//! WVA only publishes a desired count; an HPA or KEDA actuates it. [`Wva::direct`] writes it
//! itself. [`Wva::behind_hpa`] hands it to the default HPA behaviour of [`super::hpa`]
//! (stabilization and rate limits, every 15 s sync) as WVA's users run it, because HPA
//! stabilization visibly reshapes WVA ramps (llm-d/llm-d-autoscaling#777); the HPA reads the
//! published count through Prometheus, one 15 s scrape late.

use std::collections::BTreeMap;

use super::hpa::{Behavior, HpaBehavior};
use super::{Lifecycle, Peer, RoleView, View};

/// `GLOBAL_OPT_INTERVAL`.
pub const CYCLE_SECONDS: f64 = 60.0;
/// The range of `max_over_time`.
const WINDOW_SECONDS: f64 = 60.0;
use crate::peer_drive::SCRAPE_SECONDS;
/// Slack for comparing instants computed in floating point.
const EPSILON: f64 = 1e-6;

/// The saturation thresholds and triggers (`capacity-scaling-config`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SaturationConfig {
    pub kv_cache_threshold: f64,
    pub queue_length_threshold: f64,
    pub kv_spare_trigger: f64,
    pub queue_spare_trigger: f64,
}

impl Default for SaturationConfig {
    fn default() -> SaturationConfig {
        SaturationConfig {
            kv_cache_threshold: 0.80,
            queue_length_threshold: 5.0,
            kv_spare_trigger: 0.10,
            queue_spare_trigger: 3.0,
        }
    }
}

/// One replica's inputs to a cycle: its peak KV usage and queue length over the last minute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    pub kv_usage: f64,
    pub queue: f64,
}

/// What the saturation analysis of a role allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    ScaleUp,
    ScaleDown,
    Hold,
}

/// The saturation analysis of the reporting replicas' peaks (module documentation).
pub fn analyse(peaks: &[Peak], config: &SaturationConfig) -> Verdict {
    if peaks.is_empty() {
        return Verdict::Hold;
    }
    let free: Vec<&Peak> = peaks
        .iter()
        .filter(|p| {
            p.kv_usage < config.kv_cache_threshold && p.queue < config.queue_length_threshold
        })
        .collect();
    if free.is_empty() {
        return Verdict::ScaleUp;
    }
    let n = free.len() as f64;
    let kv: f64 = free.iter().map(|p| p.kv_usage).sum();
    let queue: f64 = free.iter().map(|p| p.queue).sum();
    let spare_kv = config.kv_cache_threshold - kv / n;
    let spare_queue = config.queue_length_threshold - queue / n;
    if spare_kv < config.kv_spare_trigger || spare_queue < config.queue_spare_trigger {
        return Verdict::ScaleUp;
    }
    if free.len() >= 2 {
        let spread_kv = config.kv_cache_threshold - kv / (n - 1.0);
        let spread_queue = config.queue_length_threshold - queue / (n - 1.0);
        if spread_kv >= config.kv_spare_trigger && spread_queue >= config.queue_spare_trigger {
            return Verdict::ScaleDown;
        }
    }
    Verdict::Hold
}

/// How the desired count reaches the target.
#[derive(Clone, Debug)]
enum Actuation {
    Direct,
    BehindHpa {
        behavior: Behavior,
        /// When the next cycle is due (the HPA syncs more often).
        next_cycle: f64,
        /// Per role, the published desired counts `(seconds, count)`, oldest first.
        published: BTreeMap<String, Vec<(f64, i32)>>,
    },
}

/// llm-d WVA saturation scaler.
#[derive(Clone, Debug)]
pub struct Wva {
    config: SaturationConfig,
    /// Per role and ordinal, the last minute's samples `(seconds, peak)`.
    samples: BTreeMap<(String, u32), Vec<(f64, Peak)>>,
    last_observed: Option<f64>,
    actuation: Actuation,
}

impl Wva {
    fn new(config: SaturationConfig, actuation: Actuation) -> Wva {
        Wva {
            config,
            samples: BTreeMap::new(),
            last_observed: None,
            actuation,
        }
    }

    /// WVA writing its desired count itself, upstream's thresholds.
    pub fn direct() -> Wva {
        Wva::new(SaturationConfig::default(), Actuation::Direct)
    }

    /// WVA behind the default HPA behaviour, upstream's thresholds.
    pub fn behind_hpa() -> Wva {
        Wva::new(
            SaturationConfig::default(),
            Actuation::BehindHpa {
                behavior: Behavior::new(HpaBehavior::default()),
                next_cycle: f64::NEG_INFINITY,
                published: BTreeMap::new(),
            },
        )
    }

    /// The same variant with other thresholds and triggers (a per-model override).
    pub fn with_config(mut self, config: SaturationConfig) -> Wva {
        self.config = config;
        self
    }

    /// The reporting replicas' peaks over the minute up to `now`.
    fn peaks(&self, role: &RoleView, now: f64) -> Vec<Peak> {
        role.replicas
            .iter()
            .filter(|r| r.state == Lifecycle::Ready)
            .filter_map(|r| {
                let samples = self.samples.get(&(role.name.clone(), r.ordinal))?;
                samples
                    .iter()
                    .filter(|(t, _)| *t > now - WINDOW_SECONDS && *t <= now + EPSILON)
                    .map(|(_, p)| *p)
                    .reduce(|a, b| Peak {
                        kv_usage: a.kv_usage.max(b.kv_usage),
                        queue: a.queue.max(b.queue),
                    })
            })
            .collect()
    }

    /// One cycle's desired count for `role`.
    fn target(&self, role: &RoleView, now: f64) -> i32 {
        let current = role.desired;
        let peaks = self.peaks(role, now);
        let pending = role
            .replicas
            .iter()
            .any(|r| matches!(r.state, Lifecycle::Pending | Lifecycle::Starting))
            || current > peaks.len() as i32;
        let n = match analyse(&peaks, &self.config) {
            Verdict::ScaleUp if !pending => current + 1,
            Verdict::ScaleDown if current > 1 => current - 1,
            _ => current,
        };
        role.clamp(n)
    }
}

impl Peer for Wva {
    fn name(&self) -> String {
        match self.actuation {
            Actuation::Direct => "wva".into(),
            Actuation::BehindHpa { .. } => "wva-hpa".into(),
        }
    }

    /// The cycle, or the HPA's sync when it actuates.
    fn interval(&self) -> f64 {
        match &self.actuation {
            Actuation::Direct => CYCLE_SECONDS,
            Actuation::BehindHpa { behavior, .. } => behavior.rules().sync_seconds,
        }
    }

    /// The Prometheus scrape, which `max_over_time` runs over.
    fn sample_every(&self) -> Option<f64> {
        Some(SCRAPE_SECONDS)
    }

    fn through_prometheus(&self) -> bool {
        true
    }

    fn observe(&mut self, view: &View) {
        for role in &view.roles {
            for replica in role.replicas.iter().filter(|r| r.state == Lifecycle::Ready) {
                if let Some(sample) = &replica.sample {
                    let peak = Peak {
                        kv_usage: sample.kv_usage,
                        queue: sample.waiting,
                    };
                    self.samples
                        .entry((role.name.clone(), replica.ordinal))
                        .or_default()
                        .push((view.t, peak));
                }
            }
        }
        let keep_after = view.t - WINDOW_SECONDS;
        self.samples.retain(|_, samples| {
            samples.retain(|(t, _)| *t > keep_after);
            !samples.is_empty()
        });
        self.last_observed = Some(view.t);
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        // The decision's own view is the scrape at its instant, when the harness has not
        // handed it to `observe` already.
        if self.last_observed != Some(view.t) {
            self.observe(view);
        }
        let cycle = match &self.actuation {
            Actuation::Direct => true,
            Actuation::BehindHpa { next_cycle, .. } => view.t >= next_cycle - EPSILON,
        };
        let targets: BTreeMap<String, i32> = if cycle {
            view.roles
                .iter()
                .map(|role| (role.name.clone(), self.target(role, view.t)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let Actuation::BehindHpa {
            behavior,
            next_cycle,
            published,
        } = &mut self.actuation
        else {
            return targets;
        };
        if cycle {
            *next_cycle = view.t + CYCLE_SECONDS;
        }
        for (role, n) in targets {
            published.entry(role).or_default().push((view.t, n));
        }
        let mut counts = BTreeMap::new();
        for role in &view.roles {
            let visible = view.t - SCRAPE_SECONDS + EPSILON;
            let history = published.entry(role.name.clone()).or_default();
            // Keep the newest count the HPA can see and every newer one.
            let seen = history.iter().rposition(|(t, _)| *t <= visible);
            if let Some(i) = seen {
                history.drain(..i);
            }
            let desired = seen.map(|_| history[0].1);
            let n = behavior.stabilize_and_limit(
                &role.name,
                view.t,
                role.desired,
                desired,
                role.min,
                role.max,
            );
            counts.insert(role.name.clone(), n);
        }
        counts
    }
}

#[cfg(test)]
mod tests;
