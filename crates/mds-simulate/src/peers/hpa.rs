//! Kubernetes HPA (autoscaling/v2) with a `Pods` metric, re-implemented from
//! `kubernetes/kubernetes` `pkg/controller/podautoscaler/horizontal.go` and
//! `replica_calculator.go` as BASELINES.md section 1 pins them. Every 15 s sync, per role: the
//! replica calculator's proposal from the role's Pods against an `AverageValue` target of
//! running + waiting requests per replica, then the behaviour (stabilization windows and rate
//! limits), then the role's bounds.
//!
//! The proposal ([`proposal`]): draining replicas are ignored, pending ones are unready, a
//! starting replica or a ready one without a sample is missing. `ratio = mean(ready samples) /
//! target`. With nothing missing and no unready Pod behind a scale-up, the count is kept inside
//! the tolerance and is `ceil(ratio × ready)` outside it. Otherwise missing Pods count as the
//! target on a scale-down and as 0 on a scale-up, unready ones as 0 on a scale-up, and the
//! count is kept when the new ratio is within tolerance, lies on the other side of 1, or would
//! move the count against the first ratio's direction. Values are averaged in milli-units with
//! integer division, as upstream does. Without any sample the metric cannot be computed and
//! the count is kept.
//!
//! The behaviour ([`Behavior`], also the actuator of the WVA's HPA variant): a role's first
//! sync records the current count as a recommendation (upstream's
//! `recordInitialRecommendation`, so a fresh HPA does not scale down at once). Each sync
//! records the proposal; the count is raised to the minimum of the recommendations inside the
//! scale-up window and lowered to the maximum inside the scale-down window (both include the
//! newest). Then each policy limits the change against the count at the start of its period,
//! `current − added + removed` over this HPA's own writes inside it, the most permissive
//! policy winning under `selectPolicy: Max` (the least under `Min`; `Disabled` has no
//! policy, so the count never moves that way). A count outside the bounds is brought to the nearest
//! bound before anything else, and a target scaled to 0 with a non-zero minimum is left alone
//! (upstream treats it as autoscaling disabled). Windows are open at their old end, as
//! upstream's `After(cutoff)`: an entry exactly one window old no longer counts.

use std::collections::BTreeMap;

use super::metric::{PodMetric, PodReader};
use super::{Lifecycle, Peer, RoleTargets, RoleView, Targets, View};

/// One rate-limit policy of a scaling direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalingPolicy {
    /// At most `value` replicas added (or removed) over `period_seconds`.
    Pods { value: i32, period_seconds: f64 },
    /// At most `value` % of the count at the start of `period_seconds`.
    Percent { value: i32, period_seconds: f64 },
}

impl ScalingPolicy {
    fn period_seconds(&self) -> f64 {
        match *self {
            ScalingPolicy::Pods { period_seconds, .. }
            | ScalingPolicy::Percent { period_seconds, .. } => period_seconds,
        }
    }

    fn up_limit(&self, start: i32) -> i32 {
        match *self {
            ScalingPolicy::Pods { value, .. } => start + value,
            // Rounded up so that a small count can always grow.
            ScalingPolicy::Percent { value, .. } => {
                (f64::from(start) * (1.0 + f64::from(value) / 100.0)).ceil() as i32
            }
        }
    }

    fn down_limit(&self, start: i32) -> i32 {
        match *self {
            ScalingPolicy::Pods { value, .. } => start - value,
            // Truncated, as upstream's conversion to int32.
            ScalingPolicy::Percent { value, .. } => {
                (f64::from(start) * (1.0 - f64::from(value) / 100.0)) as i32
            }
        }
    }
}

/// Which policy wins when several limit a direction (`selectPolicy`; `Disabled` is a
/// direction without policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SelectPolicy {
    /// The policy allowing the largest change (upstream's default).
    #[default]
    Max,
    /// The policy allowing the smallest change.
    Min,
}

/// One direction's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingRules {
    pub stabilization_seconds: f64,
    pub select: SelectPolicy,
    /// No policy: the direction is disabled (the count never moves that way).
    pub policies: Vec<ScalingPolicy>,
}

impl ScalingRules {
    fn longest_period(&self) -> f64 {
        self.policies
            .iter()
            .map(ScalingPolicy::period_seconds)
            .fold(0.0, f64::max)
    }
}

/// The HPA's configuration: the controller's sync period and tolerance (flags) and the
/// object's `behavior`.
#[derive(Clone, Debug, PartialEq)]
pub struct HpaBehavior {
    pub sync_seconds: f64,
    pub tolerance: f64,
    pub scale_up: ScalingRules,
    pub scale_down: ScalingRules,
}

impl Default for HpaBehavior {
    /// Upstream's defaults (BASELINES.md section 1).
    fn default() -> HpaBehavior {
        HpaBehavior {
            sync_seconds: 15.0,
            tolerance: 0.1,
            scale_up: ScalingRules {
                stabilization_seconds: 0.0,
                select: SelectPolicy::Max,
                policies: vec![
                    ScalingPolicy::Pods {
                        value: 4,
                        period_seconds: 15.0,
                    },
                    ScalingPolicy::Percent {
                        value: 100,
                        period_seconds: 15.0,
                    },
                ],
            },
            scale_down: ScalingRules {
                stabilization_seconds: 300.0,
                select: SelectPolicy::Max,
                policies: vec![ScalingPolicy::Percent {
                    value: 100,
                    period_seconds: 15.0,
                }],
            },
        }
    }
}

/// One role's history: `(seconds, replicas)` entries.
#[derive(Clone, Debug, Default)]
struct History {
    /// Unstabilized recommendations.
    recommendations: Vec<(f64, i32)>,
    /// Replicas this HPA added and removed with its own writes.
    added: Vec<(f64, i32)>,
    removed: Vec<(f64, i32)>,
}

fn changed_since(events: &[(f64, i32)], cutoff: f64) -> i32 {
    events
        .iter()
        .filter(|(t, _)| *t > cutoff)
        .map(|(_, n)| n)
        .sum()
}

/// The HPA's behaviour step, per role: stabilization, rate limits and bounds (module
/// documentation).
#[derive(Clone, Debug)]
pub struct Behavior {
    rules: HpaBehavior,
    roles: BTreeMap<String, History>,
}

impl Behavior {
    pub fn new(rules: HpaBehavior) -> Behavior {
        Behavior {
            rules,
            roles: BTreeMap::new(),
        }
    }

    pub fn rules(&self) -> &HpaBehavior {
        &self.rules
    }

    /// A role's first sync records `current` as a recommendation at `now`.
    pub fn record_initial(&mut self, role: &str, now: f64, current: i32) {
        self.roles
            .entry(role.to_string())
            .or_insert_with(|| History {
                recommendations: vec![(now, current)],
                ..History::default()
            });
    }

    /// One sync of `role` at `now`: the count to write, given the spec's `current` count and
    /// the metric's proposal `desired` (`None`: the metric could not be computed). Records the
    /// recommendation and, when the count changes, the scale event (the write is assumed to
    /// succeed).
    pub fn stabilize_and_limit(
        &mut self,
        role: &str,
        now: f64,
        current: i32,
        desired: Option<i32>,
        min: i32,
        max: i32,
    ) -> i32 {
        self.record_initial(role, now, current);
        let max = max.max(min);
        let next = if current == 0 && min != 0 {
            current
        } else if current > max {
            max
        } else if current < min {
            min
        } else if let Some(desired) = desired {
            let stabilized = self.stabilize(role, now, current, desired);
            self.limit(role, now, current, stabilized, min, max)
        } else {
            current
        };
        self.record_scale(role, now, current, next);
        next
    }

    fn stabilize(&mut self, role: &str, now: f64, current: i32, desired: i32) -> i32 {
        let up_window = self.rules.scale_up.stabilization_seconds;
        let down_window = self.rules.scale_down.stabilization_seconds;
        let history = self.roles.entry(role.to_string()).or_default();
        let (mut up, mut down) = (desired, desired);
        for &(t, n) in &history.recommendations {
            if t > now - up_window {
                up = up.min(n);
            }
            if t > now - down_window {
                down = down.max(n);
            }
        }
        let keep_after = now - up_window.max(down_window);
        history.recommendations.retain(|(t, _)| *t > keep_after);
        history.recommendations.push((now, desired));
        current.max(up).min(down)
    }

    fn limit(&self, role: &str, now: f64, current: i32, desired: i32, min: i32, max: i32) -> i32 {
        let empty = History::default();
        let history = self.roles.get(role).unwrap_or(&empty);
        let start_of = |period: f64| {
            current - changed_since(&history.added, now - period)
                + changed_since(&history.removed, now - period)
        };
        if desired > current {
            let up = &self.rules.scale_up;
            let limits = up
                .policies
                .iter()
                .map(|p| p.up_limit(start_of(p.period_seconds())));
            let limit = match up.select {
                SelectPolicy::Max => limits.max(),
                SelectPolicy::Min => limits.min(),
            }
            .unwrap_or(current)
            // Earlier scale-ups in the period never force a scale-down.
            .max(current);
            desired.min(limit.min(max))
        } else if desired < current {
            let down = &self.rules.scale_down;
            let limits = down
                .policies
                .iter()
                .map(|p| p.down_limit(start_of(p.period_seconds())));
            let limit = match down.select {
                SelectPolicy::Max => limits.min(),
                SelectPolicy::Min => limits.max(),
            }
            .unwrap_or(current)
            .min(current);
            desired.max(limit.max(min))
        } else {
            desired
        }
        .max(min)
        .min(max)
    }

    fn record_scale(&mut self, role: &str, now: f64, from: i32, to: i32) {
        if from == to {
            return;
        }
        let up_period = self.rules.scale_up.longest_period();
        let down_period = self.rules.scale_down.longest_period();
        let history = self.roles.entry(role.to_string()).or_default();
        history.added.retain(|(t, _)| *t > now - up_period);
        history.removed.retain(|(t, _)| *t > now - down_period);
        if to > from {
            history.added.push((now, to - from));
        } else {
            history.removed.push((now, from - to));
        }
    }
}

/// Milli-units, as the custom metrics API hands values to the HPA.
fn milli(value: f64) -> i64 {
    (value * 1000.0) as i64
}

/// The replica calculator's proposal for `role` against `target` requests per replica
/// (module documentation); `None` when no ready Pod has a sample or the target is not
/// positive.
pub fn proposal(role: &RoleView, target: f64, tolerance: f64) -> Option<i32> {
    let values = role
        .replicas
        .iter()
        .filter(|r| r.state == Lifecycle::Ready)
        .filter_map(|r| Some((r.ordinal, r.sample?.queue_depth())))
        .collect();
    pods_proposal(role, &values, target, tolerance)
}

/// The replica calculator's `Pods` proposal for `role` from each ready replica's value (by
/// ordinal; a ready replica without one is missing) against an `AverageValue` `target`.
pub fn pods_proposal(
    role: &RoleView,
    values: &BTreeMap<u32, f64>,
    target: f64,
    tolerance: f64,
) -> Option<i32> {
    let target = milli(target);
    if target <= 0 {
        return None;
    }
    let mut ready: Vec<i64> = Vec::new();
    let (mut missing, mut unready) = (0_i64, 0_i64);
    for replica in &role.replicas {
        match (replica.state, values.get(&replica.ordinal)) {
            (Lifecycle::Draining, _) => {}
            (Lifecycle::Pending, _) => unready += 1,
            (Lifecycle::Ready, Some(value)) => ready.push(milli(*value)),
            _ => missing += 1,
        }
    }
    if ready.is_empty() {
        return None;
    }
    let ratio_of = |total: i64, count: i64| (total / count) as f64 / target as f64;
    let within = |ratio: f64| 1.0 - tolerance <= ratio && ratio <= 1.0 + tolerance;
    let current = role.desired;
    let total: i64 = ready.iter().sum();
    let count = ready.len() as i64;
    let ratio = ratio_of(total, count);
    let up_with_unready = unready > 0 && ratio > 1.0;
    if !up_with_unready && missing == 0 {
        if within(ratio) {
            return Some(current);
        }
        return Some((ratio * count as f64).ceil() as i32);
    }
    let (mut total, mut count) = (total, count);
    // A ratio of exactly 1 fills nothing in; the count is kept below either way.
    if ratio < 1.0 {
        total += target * missing;
        count += missing;
    } else if ratio > 1.0 {
        count += missing;
    }
    if up_with_unready {
        count += unready;
    }
    let new_ratio = ratio_of(total, count);
    if within(new_ratio) || (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0) {
        return Some(current);
    }
    let proposed = (new_ratio * count as f64).ceil() as i32;
    if (new_ratio < 1.0 && proposed > current) || (new_ratio > 1.0 && proposed < current) {
        return Some(current);
    }
    Some(proposed)
}

/// How the values of a role's replicas make one number (a query's aggregation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Avg,
    Max,
    Min,
}

impl Aggregate {
    fn of(self, values: &BTreeMap<u32, f64>) -> Option<f64> {
        let mut it = values.values().copied();
        let first = it.next()?;
        Some(match self {
            Aggregate::Sum => first + it.sum::<f64>(),
            Aggregate::Avg => (first + it.sum::<f64>()) / values.len() as f64,
            Aggregate::Max => it.fold(first, f64::max),
            Aggregate::Min => it.fold(first, f64::min),
        })
    }
}

/// Where one of the HPA's metrics comes from and what its target means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricSource {
    /// A `Pods` metric: the mean over the role's Pods against an `AverageValue`.
    Pods,
    /// An `External` (or `Object`) metric, one number for the role (KEDA's triggers are
    /// these): against an `AverageValue` it is divided by the target per replica; against a
    /// `Value` the ratio multiplies the ready replicas.
    External {
        aggregate: Aggregate,
        average_value: bool,
    },
}

/// One entry of the HPA's `spec.metrics`.
#[derive(Clone, Debug)]
pub struct HpaMetric {
    pub source: MetricSource,
    pub targets: RoleTargets,
    reader: PodReader,
}

impl HpaMetric {
    pub fn new(source: MetricSource, reader: PodReader, targets: RoleTargets) -> HpaMetric {
        HpaMetric {
            source,
            targets,
            reader,
        }
    }

    /// This metric's proposal for `role` at `t` (`None`: no target for the role, or the
    /// metric cannot be computed).
    fn proposal(&mut self, t: f64, role: &RoleView, tolerance: f64) -> Option<i32> {
        let values = self.reader.values(t, role);
        let target = self.targets.get(&role.name)?;
        match self.source {
            MetricSource::Pods => pods_proposal(role, &values, target, tolerance),
            MetricSource::External {
                aggregate,
                average_value,
            } => {
                let usage = milli(aggregate.of(&values)?) as f64;
                let target = milli(target) as f64;
                if target <= 0.0 {
                    return None;
                }
                let current = role.desired;
                let per_replica = if average_value {
                    f64::from(current)
                } else {
                    1.0
                };
                if current == 0 {
                    return Some((usage / target).ceil() as i32);
                }
                let ratio = usage / (target * per_replica);
                if (1.0 - ratio).abs() <= tolerance {
                    return Some(current);
                }
                Some(if average_value {
                    (usage / target).ceil() as i32
                } else {
                    (ratio * f64::from(role.count(Lifecycle::Ready))).ceil() as i32
                })
            }
        }
    }
}

/// Kubernetes HPA: every 15 s sync, per role, the largest proposal of its metrics (by
/// default one `Pods` metric, running + waiting requests), then the behaviour.
#[derive(Clone, Debug)]
pub struct Hpa {
    metrics: Vec<HpaMetric>,
    behavior: Behavior,
}

impl Hpa {
    /// One `Pods` metric of running + waiting requests at an `AverageValue` per role.
    pub fn new(average_value: BTreeMap<String, f64>, behavior: HpaBehavior) -> Hpa {
        let queue = PodReader::new(PodMetric::QueueDepth, behavior.sync_seconds);
        Hpa::with_metrics(
            vec![HpaMetric::new(
                MetricSource::Pods,
                queue,
                RoleTargets::PerRole(average_value),
            )],
            behavior,
        )
    }

    pub fn with_metrics(metrics: Vec<HpaMetric>, behavior: HpaBehavior) -> Hpa {
        Hpa {
            metrics,
            behavior: Behavior::new(behavior),
        }
    }

    /// The QueueDepth targets with upstream's default behaviour.
    pub fn from_targets(targets: &Targets) -> Hpa {
        Hpa::new(targets.queue_depth.clone(), HpaBehavior::default())
    }
}

impl Peer for Hpa {
    fn name(&self) -> String {
        "hpa".into()
    }

    fn interval(&self) -> f64 {
        self.behavior.rules().sync_seconds
    }

    /// The Pods metric comes through the Prometheus adapter.
    fn through_prometheus(&self) -> bool {
        true
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        let tolerance = self.behavior.rules().tolerance;
        let mut counts = BTreeMap::new();
        for role in &view.roles {
            if !self
                .metrics
                .iter()
                .any(|m| m.targets.get(&role.name).is_some())
            {
                continue;
            }
            // Upstream takes the largest proposal over the metrics it could compute.
            let desired = self
                .metrics
                .iter_mut()
                .filter_map(|m| m.proposal(view.t, role, tolerance))
                .max();
            let n = self.behavior.stabilize_and_limit(
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
