//! The Kubernetes HPA (autoscaling/v2), re-implemented from `kubernetes/kubernetes`:
//! `pkg/controller/podautoscaler/replica_calculator.go` (the replica calculator for a `Pods`
//! metric with an `AverageValue` target), `horizontal.go` (stabilization and the behaviour's
//! rate limits), `config/v1alpha1/defaults.go` and `pkg/apis/autoscaling/v2/defaults.go` (the
//! defaults); BASELINES.md section 1.
//!
//! Every 15 s sync, per role, with the role's spec count as `currentReplicas`:
//!
//! 1. Replicas are classified: `Draining` ignored, `Pending` unready, `Starting` or ready
//!    without a sample missing, the rest ready. No ready sample: the count stays (HPA cannot
//!    compute the metric and changes nothing).
//! 2. `ratio = mean(ready samples) / target`. With nothing missing and not (unready replicas
//!    and `ratio > 1`): within the 0.1 tolerance the count stays, else `ceil(ratio × ready)`.
//! 3. Otherwise missing replicas count as the target when `ratio < 1` and as 0 when above;
//!    unready ones as 0 when `ratio > 1`; the new ratio over all of them keeps the count when
//!    it is within tolerance, or on the other side of 1, or its `ceil(newRatio × n)` moves the
//!    other way.
//! 4. [`Behavior`]: the stabilization windows and the rate limits, then `[min, max]`.
//!
//! The metric is running plus waiting requests per replica at the Proportional run's target,
//! read through the Prometheus adapter (one scrape late).

use std::collections::{BTreeMap, VecDeque};

use super::{Lifecycle, Peer, RoleView, Targets, View};

/// One direction's behaviour (autoscaling/v2 `HPAScalingRules`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalingRules {
    pub stabilization_seconds: f64,
    /// A `Pods` policy: at most this many replicas per period (`None`: no such policy).
    pub pods: Option<i32>,
    /// A `Percent` policy: at most this share of the period's start per period.
    pub percent: Option<f64>,
    pub period_seconds: f64,
}

/// The behaviour's defaults: up with no stabilization, 4 Pods or 100 % per 15 s (the larger);
/// down with 300 s of stabilization, 100 % per 15 s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpaBehavior {
    pub up: ScalingRules,
    pub down: ScalingRules,
}

impl Default for HpaBehavior {
    fn default() -> Self {
        HpaBehavior {
            up: ScalingRules {
                stabilization_seconds: 0.0,
                pods: Some(4),
                percent: Some(100.0),
                period_seconds: 15.0,
            },
            down: ScalingRules {
                stabilization_seconds: 300.0,
                pods: None,
                percent: Some(100.0),
                period_seconds: 15.0,
            },
        }
    }
}

/// The sync period.
pub const SYNC_SECONDS: f64 = 15.0;
/// `--horizontal-pod-autoscaler-tolerance`.
pub const TOLERANCE: f64 = 0.1;

/// HPA's stabilization and rate limits, per role: the recommendations of the windows and the
/// scale events of the policies' periods (`horizontal.go`).
#[derive(Clone, Debug, Default)]
pub struct Behavior {
    pub rules: HpaBehavior,
    recommendations: BTreeMap<String, VecDeque<(f64, i32)>>,
    /// Scale events: when, and the change.
    events: BTreeMap<String, VecDeque<(f64, i32)>>,
}

impl Behavior {
    pub fn new(rules: HpaBehavior) -> Behavior {
        Behavior {
            rules,
            ..Behavior::default()
        }
    }

    /// The count HPA writes for `role` at `t` when its calculator proposes `desired`.
    pub fn apply(
        &mut self,
        role: &str,
        t: f64,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
    ) -> i32 {
        let rules = self.rules;
        let recs = self.recommendations.entry(role.to_string()).or_default();
        recs.push_back((t, desired));
        let longest = rules
            .up
            .stabilization_seconds
            .max(rules.down.stabilization_seconds);
        while recs.front().is_some_and(|(at, _)| t - at > longest) {
            recs.pop_front();
        }
        // A recommendation counts while it is younger than the window; the newest always.
        let within = |window: f64| {
            recs.iter()
                .filter(move |(at, _)| t - at < window || *at == t)
        };
        let up_rec = within(rules.up.stabilization_seconds)
            .map(|(_, n)| *n)
            .min()
            .unwrap_or(desired);
        let down_rec = within(rules.down.stabilization_seconds)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(desired);
        let mut next = current;
        if next < up_rec {
            next = up_rec;
        }
        if next > down_rec {
            next = down_rec;
        }
        let events = self.events.entry(role.to_string()).or_default();
        let period = rules.up.period_seconds.max(rules.down.period_seconds);
        while events.front().is_some_and(|(at, _)| t - at > period) {
            events.pop_front();
        }
        let start_of = |rules: &ScalingRules| {
            let (mut added, mut removed) = (0, 0);
            for (_, change) in events
                .iter()
                .filter(|(at, _)| t - at < rules.period_seconds)
            {
                if *change > 0 {
                    added += change;
                } else {
                    removed -= change;
                }
            }
            current - added + removed
        };
        if next > current {
            let start = start_of(&rules.up);
            let by_pods = rules.up.pods.map(|p| start + p);
            let by_percent = rules
                .up
                .percent
                .map(|p| (f64::from(start) * (1.0 + p / 100.0)).ceil() as i32);
            // selectPolicy Max: the policy that allows the most.
            let limit = by_pods.into_iter().chain(by_percent).max().unwrap_or(next);
            next = next.min(limit.max(current));
        } else if next < current {
            let start = start_of(&rules.down);
            let by_pods = rules.down.pods.map(|p| start - p);
            let by_percent = rules
                .down
                .percent
                .map(|p| (f64::from(start) * (1.0 - p / 100.0)) as i32);
            let limit = by_pods.into_iter().chain(by_percent).min().unwrap_or(next);
            next = next.max(limit.min(current));
        }
        next = next.max(min).min(max.max(min));
        if next != current {
            events.push_back((t, next - current));
        }
        next
    }
}

/// The replica calculator's proposal for one role (module documentation, steps 1 to 3);
/// `None` when no ready replica has a sample.
pub fn calculate(role: &RoleView, target: f64) -> Option<i32> {
    let current = role.desired;
    // Metric values are whole milli-units and their mean an integer division, as upstream's
    // `GetMetricUsageRatio` computes it (so 20, 20 and 0 against 5 is 1.3332, not 1.3333…).
    let milli = |v: f64| (v * 1000.0).round() as i64;
    let target = milli(target);
    let ready: Vec<i64> = role
        .ready_samples()
        .map(|s| milli(s.queue_depth()))
        .collect();
    if ready.is_empty() || target <= 0 {
        return None;
    }
    let usage_ratio =
        |values: &[i64]| (values.iter().sum::<i64>() / values.len() as i64) as f64 / target as f64;
    let missing = role
        .replicas
        .iter()
        .filter(|r| {
            r.state == Lifecycle::Starting || (r.state == Lifecycle::Ready && r.sample.is_none())
        })
        .count();
    let unready = role.count(Lifecycle::Pending) as usize;
    let ratio = usage_ratio(&ready);
    let up_with_unready = unready > 0 && ratio > 1.0;
    if !up_with_unready && missing == 0 {
        if (1.0 - ratio).abs() <= TOLERANCE {
            return Some(current);
        }
        return Some((ratio * ready.len() as f64).ceil() as i32);
    }
    let mut filled = ready.clone();
    let fill = if ratio < 1.0 { target } else { 0 };
    filled.extend(std::iter::repeat_n(fill, missing));
    if up_with_unready {
        filled.extend(std::iter::repeat_n(0, unready));
    }
    let new_ratio = usage_ratio(&filled);
    if (1.0 - new_ratio).abs() <= TOLERANCE
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Some(current);
    }
    let proposed = (new_ratio * filled.len() as f64).ceil() as i32;
    if (new_ratio < 1.0 && proposed > current) || (new_ratio > 1.0 && proposed < current) {
        return Some(current);
    }
    Some(proposed)
}

/// HPA on running plus waiting requests per replica.
pub struct Hpa {
    targets: BTreeMap<String, f64>,
    behavior: Behavior,
}

impl Hpa {
    /// `AverageValue` targets per role (the Proportional run's request targets).
    pub fn new(targets: &Targets, behavior: HpaBehavior) -> Hpa {
        Hpa {
            targets: targets.queue_depth.clone(),
            behavior: Behavior::new(behavior),
        }
    }
}

impl Peer for Hpa {
    fn name(&self) -> String {
        "hpa".into()
    }

    fn interval(&self) -> f64 {
        SYNC_SECONDS
    }

    fn through_prometheus(&self) -> bool {
        true
    }

    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        let mut out = BTreeMap::new();
        for role in &view.roles {
            let Some(&target) = self.targets.get(&role.name) else {
                continue;
            };
            let Some(desired) = calculate(role, target) else {
                continue;
            };
            let n = self.behavior.apply(
                &role.name,
                view.t,
                role.desired,
                desired,
                role.min,
                role.max,
            );
            out.insert(role.name.clone(), n);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::testing::{ready, replica, view};

    fn role(desired: i32, replicas: Vec<crate::peers::Replica>) -> RoleView {
        view(0.0, desired, 1, 100, replicas).roles.remove(0)
    }

    /// Shapes of `pkg/controller/podautoscaler/replica_calculator_test.go`
    /// (`TestReplicaCalcScaleUpCM`, `...ScaleDownCM`, `...ToleranceCM`,
    /// `...MissingMetricsNoChangeEq`, `...ScaleUpPending`, `...MissingMetricsScaleUp` and
    /// `...ScaleDown`): per-Pod values of a Pods metric against an AverageValue target.
    #[test]
    fn the_replica_calculator_table() {
        use Lifecycle::{Pending, Starting};
        struct Case {
            name: &'static str,
            desired: i32,
            replicas: Vec<crate::peers::Replica>,
            target: f64,
            expected: Option<i32>,
        }
        let cases = [
            Case {
                // 20 000, 10 000 and 30 000 milli against 15 000: ratio 4/3 over 3 ready → 4.
                name: "scale up",
                desired: 3,
                replicas: vec![
                    ready(0, 20.0, 0.0),
                    ready(1, 10.0, 0.0),
                    ready(2, 30.0, 0.0),
                ],
                target: 15.0,
                expected: Some(4),
            },
            Case {
                // 12, 12, 12, 10, 10 against 20: ratio 0.56 over 5 → 3.
                name: "scale down",
                desired: 5,
                replicas: (0..5)
                    .map(|i| ready(i, if i < 3 { 12.0 } else { 10.0 }, 0.0))
                    .collect(),
                target: 20.0,
                expected: Some(3),
            },
            Case {
                // 1010, 1030, 1020 against 1000 (×0.01 here): within the 0.1 tolerance.
                name: "tolerance",
                desired: 3,
                replicas: vec![
                    ready(0, 10.1, 0.0),
                    ready(1, 10.3, 0.0),
                    ready(2, 10.2, 0.0),
                ],
                target: 10.0,
                expected: Some(3),
            },
            Case {
                // A missing Pod counts as the target below 1: 4, 5 and (5) against 5.
                name: "missing metrics, no change",
                desired: 3,
                replicas: vec![ready(0, 4.0, 0.0), ready(1, 5.0, 0.0), replica(2, Starting)],
                target: 5.0,
                expected: Some(3),
            },
            Case {
                // Above 1 a missing Pod counts as 0: 9, 9, (0) against 5 → ceil(1.2 × 3) = 4.
                name: "missing metrics, scale up",
                desired: 3,
                replicas: vec![ready(0, 9.0, 0.0), ready(1, 9.0, 0.0), replica(2, Starting)],
                target: 5.0,
                expected: Some(4),
            },
            Case {
                // Below 1 a missing Pod counts as the target: 1, 1, (5) against 5 → 0.47 × 3 → 2.
                name: "missing metrics, scale down",
                desired: 3,
                replicas: vec![ready(0, 1.0, 0.0), ready(1, 1.0, 0.0), replica(2, Starting)],
                target: 5.0,
                expected: Some(2),
            },
            Case {
                // An unready (pending) Pod counts as 0 on the way up: 10, 10, (0) against 5.
                name: "scale up with a pending pod",
                desired: 3,
                replicas: vec![
                    ready(0, 10.0, 0.0),
                    ready(1, 10.0, 0.0),
                    replica(2, Pending),
                ],
                target: 5.0,
                expected: Some(4),
            },
            Case {
                // Filling in crosses 1 (6, 6 → 12/3 = 0.8 with a pending 0): keep.
                name: "fill-in crossing 1 keeps the count",
                desired: 3,
                replicas: vec![ready(0, 6.0, 0.0), ready(1, 6.0, 0.0), replica(2, Pending)],
                target: 5.0,
                expected: Some(3),
            },
            Case {
                name: "no sample: no proposal",
                desired: 2,
                replicas: vec![replica(0, Starting), replica(1, Starting)],
                target: 5.0,
                expected: None,
            },
        ];
        for c in cases {
            assert_eq!(
                calculate(&role(c.desired, c.replicas), c.target),
                c.expected,
                "{}",
                c.name
            );
        }
    }

    /// Shapes of `pkg/controller/podautoscaler/horizontal_test.go`
    /// (`TestNormalizeDesiredReplicasWithBehavior`, `TestScalingWithRules`,
    /// `TestStabilizeRecommendationWithBehaviors`) under the default behaviour.
    #[test]
    fn the_behaviour_table() {
        // Up: from 2, 4 Pods beat 100 % (6 > 4); from 10, 100 % beats 4 Pods (20 > 14).
        let mut b = Behavior::new(HpaBehavior::default());
        assert_eq!(b.apply("a", 0.0, 2, 50, 1, 100), 6);
        assert_eq!(b.apply("b", 0.0, 10, 50, 1, 100), 20);
        // Within the same 15 s period the limit counts from the period's start: 6 already
        // added from 2, so the next sync may go to max(2 + 4, 2 × 2) = 6 only.
        assert_eq!(b.apply("a", 10.0, 6, 50, 1, 100), 6);
        // A new period starts from the current count.
        assert_eq!(b.apply("a", 16.0, 6, 50, 1, 100), 12);
        // Max bounds it.
        assert_eq!(b.apply("c", 0.0, 5, 50, 1, 8), 8);

        // Down: the 300 s window keeps the highest recommendation; 100 % per period means no
        // rate limit once it lets go.
        let mut b = Behavior::new(HpaBehavior::default());
        assert_eq!(b.apply("r", 0.0, 8, 8, 1, 100), 8);
        for t in [15.0, 60.0, 150.0, 285.0] {
            assert_eq!(b.apply("r", t, 8, 2, 1, 100), 8, "held at {t} s");
        }
        assert_eq!(
            b.apply("r", 300.0, 8, 2, 1, 100),
            2,
            "the 8 of t=0 left the window"
        );
        // Min bounds it.
        let mut b = Behavior::new(HpaBehavior::default());
        assert_eq!(b.apply("m", 0.0, 3, 0, 2, 100), 2);
        // A fresh HPA's window holds only the newest recommendation, so it scales down at
        // once; up is not stabilized, so the rise after it goes straight up.
        let mut b = Behavior::new(HpaBehavior::default());
        assert_eq!(b.apply("u", 0.0, 4, 3, 1, 100), 3);
        assert_eq!(b.apply("u", 15.0, 3, 7, 1, 100), 7);
    }

    #[test]
    fn the_peer_scales_each_role_on_running_plus_waiting() {
        let targets = Targets {
            queue_depth: BTreeMap::from([("server".to_string(), 8.0)]),
            tokens_per_second: BTreeMap::new(),
            ttft_seconds: 0.5,
            itl_seconds: 0.05,
        };
        let mut hpa = Hpa::new(&targets, HpaBehavior::default());
        // Two replicas at 16 requests each, target 8: ratio 2 → 4.
        let v = view(0.0, 2, 1, 8, vec![ready(0, 16.0, 0.0), ready(1, 16.0, 0.0)]);
        assert_eq!(hpa.decide(&v)["server"], 4);
        // Quiet: the proposal is 1, held for 300 s by the window's 4.
        let quiet = |t| view(t, 4, 1, 8, (0..4).map(|i| ready(i, 1.0, 0.0)).collect());
        assert_eq!(hpa.decide(&quiet(15.0))["server"], 4);
        assert_eq!(hpa.decide(&quiet(300.0))["server"], 1);
    }
}
