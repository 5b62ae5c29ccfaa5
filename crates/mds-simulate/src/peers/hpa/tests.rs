use super::*;
use crate::peers::testing::{ready, replica, view};
use crate::peers::{Replica, Sample};
use Lifecycle::{Draining, Pending, Starting};

fn role(desired: i32, replicas: Vec<Replica>) -> RoleView {
    view(0.0, desired, 1, 100, replicas).roles.remove(0)
}

/// Ready replicas with these queue depths, numbered from 0.
fn loaded(queues: &[f64]) -> Vec<Replica> {
    queues
        .iter()
        .enumerate()
        .map(|(i, &q)| ready(i as u32, q, 0.0))
        .collect()
}

/// `loaded(queues)` followed by `extra` replicas in `state`.
fn with(queues: &[f64], state: Lifecycle, extra: u32) -> Vec<Replica> {
    let mut replicas = loaded(queues);
    let first = replicas.len() as u32;
    replicas.extend((first..first + extra).map(|i| replica(i, state)));
    replicas
}

// Shapes of kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator_test.go
// (TestReplicaCalcScaleUpCM, TestReplicaCalcScaleDownCM, TestReplicaCalcToleranceCM,
// TestReplicaCalcMissingMetrics*, TestReplicaCalcScaleUpCMUnready*,
// TestReplicaCalcScaleUpIgnoresDeletionPods), the Pods metric's values as queue depths.
#[test]
fn proposal_table() {
    let ready_without_sample = Replica {
        ordinal: 2,
        state: Lifecycle::Ready,
        sample: None,
    };
    let cases: Vec<(&str, RoleView, f64, Option<i32>)> = vec![
        (
            "scale up with Pods metric",
            role(3, loaded(&[20.0, 10.0, 30.0])),
            15.0,
            Some(4),
        ),
        ("scale down", role(5, loaded(&[12.0; 5])), 20.0, Some(3)),
        // ceil(1.033 × 3) = 4 without the tolerance.
        (
            "tolerance keeps the count",
            role(3, loaded(&[20.0, 21.0, 21.0])),
            20.0,
            Some(3),
        ),
        (
            "just outside the tolerance",
            role(3, loaded(&[22.5, 22.5, 22.5])),
            20.0,
            Some(4),
        ),
        // Filled in as the target it would be ceil(75 / 15) = 5.
        (
            "missing on scale up counts as 0",
            role(2, with(&[60.0], Starting, 1)),
            15.0,
            Some(4),
        ),
        // Filled in as 0 (60 / 5 / 15 = 0.8) the ratio turns below 1: keep; ready alone
        // would scale down to 4, filled in as the target up to 7.
        (
            "missing on scale up, new ratio on the other side of 1",
            role(5, with(&[30.0, 30.0], Starting, 3)),
            15.0,
            Some(5),
        ),
        // (5 + 5 + 20 + 20) / 4 / 20 = 0.625 → ceil(2.5) = 3; as 0 it would be 1.
        (
            "missing on scale down counts as the target",
            role(4, with(&[5.0, 5.0], Starting, 2)),
            20.0,
            Some(3),
        ),
        (
            "a ready replica without a sample is missing",
            role(4, {
                let mut r = loaded(&[5.0, 5.0]);
                r.push(ready_without_sample);
                r.push(replica(3, Starting));
                r
            }),
            20.0,
            Some(3),
        ),
        // Ignoring the pending ones gives ceil(1.2 × 2) = 3, a scale-down under load.
        (
            "unready on scale up counts as 0",
            role(4, with(&[18.0, 18.0], Pending, 2)),
            15.0,
            Some(4),
        ),
        (
            "unready ignored on scale down",
            role(4, with(&[5.0, 5.0], Pending, 2)),
            20.0,
            Some(1),
        ),
        // 60 / 3 / 15 = 1.33 → ceil(4) = 4, below the current 6: keep.
        (
            "a proposal against the ratio's direction keeps the count",
            role(6, with(&[30.0, 30.0], Pending, 1)),
            15.0,
            Some(6),
        ),
        // As missing they would fill the ratio down to 1: keep 2.
        (
            "draining replicas are ignored",
            role(2, with(&[30.0, 30.0], Draining, 2)),
            15.0,
            Some(4),
        ),
        (
            "no samples: no proposal",
            role(2, with(&[], Starting, 2)),
            15.0,
            None,
        ),
        (
            "no positive target: no proposal",
            role(2, loaded(&[3.0])),
            0.0,
            None,
        ),
    ];
    for (name, role, target, expected) in cases {
        assert_eq!(proposal(&role, target, 0.1), expected, "{name}");
    }
}

#[test]
fn running_and_waiting_both_count() {
    let replica = Replica {
        ordinal: 0,
        state: Lifecycle::Ready,
        sample: Some(Sample {
            running: 10.0,
            waiting: 20.0,
            ..Sample::default()
        }),
    };
    assert_eq!(proposal(&role(1, vec![replica]), 15.0, 0.1), Some(2));
}

/// A behaviour whose role `r` has these recommendations and scale-ups.
fn seeded(rules: HpaBehavior, recommendations: &[(f64, i32)], added: &[(f64, i32)]) -> Behavior {
    let mut behavior = Behavior::new(rules);
    behavior.roles.insert(
        "r".into(),
        History {
            recommendations: recommendations.to_vec(),
            added: added.to_vec(),
            removed: Vec::new(),
        },
    );
    behavior
}

fn rules(up: Vec<ScalingPolicy>, down: Vec<ScalingPolicy>, down_window: f64) -> HpaBehavior {
    HpaBehavior {
        scale_up: ScalingRules {
            stabilization_seconds: 0.0,
            select: SelectPolicy::Max,
            policies: up,
        },
        scale_down: ScalingRules {
            stabilization_seconds: down_window,
            select: SelectPolicy::Max,
            policies: down,
        },
        ..HpaBehavior::default()
    }
}

fn pods(value: i32, period_seconds: f64) -> ScalingPolicy {
    ScalingPolicy::Pods {
        value,
        period_seconds,
    }
}

fn percent(value: i32, period_seconds: f64) -> ScalingPolicy {
    ScalingPolicy::Percent {
        value,
        period_seconds,
    }
}

// Shapes of kubernetes/kubernetes pkg/controller/podautoscaler/horizontal_test.go
// (TestScalingWithRules; the events spread as generateEventsUniformDistribution spreads
// 1, 5 and 9 over the last 120 s). Columns: rules, scale-ups, min, max, current, desired,
// expected. The history starts a long time before, so no initial recommendation counts.
#[test]
fn rate_limit_table() {
    let defaults = HpaBehavior::default;
    const SPREAD: &[(f64, i32)] = &[(900.0, 1), (940.0, 5), (980.0, 9)];
    type Case = (
        &'static str,
        HpaBehavior,
        &'static [(f64, i32)],
        i32,
        i32,
        i32,
        i32,
        i32,
    );
    let cases: Vec<Case> = vec![
        ("desired within range", defaults(), &[], 3, 8, 5, 7, 7),
        ("desired below min", defaults(), &[], 2, 8, 3, 1, 2),
        ("max is the limit", defaults(), &[], 1, 10, 20, 1000, 10),
        (
            "default: 100 % beats 4 Pods",
            defaults(),
            &[],
            1,
            1000,
            10,
            50,
            20,
        ),
        (
            "default: 4 Pods beat 100 %",
            defaults(),
            &[],
            1,
            1000,
            3,
            1000,
            7,
        ),
        (
            "default: scale-down unlimited",
            defaults(),
            &[],
            1,
            1000,
            10,
            2,
            2,
        ),
        (
            "pods policy larger than percent",
            rules(vec![pods(100, 60.0), percent(100, 60.0)], vec![], 0.0),
            &[],
            1,
            1000,
            10,
            500,
            110,
        ),
        (
            "scale-down: percent larger than pods",
            rules(vec![], vec![pods(20, 60.0), percent(1, 60.0)], 0.0),
            &[],
            1,
            1000,
            100,
            2,
            80,
        ),
        (
            "scale-down: pods larger than percent",
            rules(vec![], vec![pods(2, 60.0), percent(1, 60.0)], 0.0),
            &[],
            1,
            1000,
            100,
            2,
            98,
        ),
        (
            "pods policy with earlier scale-ups in the period",
            rules(vec![pods(150, 120.0)], vec![], 0.0),
            SPREAD,
            1,
            1000,
            100,
            500,
            235,
        ),
        (
            "earlier scale-ups use the period up: no scale-up, no scale-down",
            rules(vec![pods(5, 120.0)], vec![], 0.0),
            SPREAD,
            1,
            1000,
            100,
            500,
            100,
        ),
        // Only the +9 at 980 s is inside the 50 s period: start 91; over 120 s it would be
        // 85 and the limit 100.
        (
            "only scale-ups inside the period count",
            rules(vec![pods(15, 50.0)], vec![], 0.0),
            SPREAD,
            1,
            1000,
            100,
            500,
            106,
        ),
    ];
    for (name, rules, added, min, max, current, desired, expected) in cases {
        let mut behavior = seeded(rules, &[(0.0, current)], added);
        let n = behavior.stabilize_and_limit("r", 1000.0, current, Some(desired), min, max);
        assert_eq!(n, expected, "{name}");
    }
}

// kubernetes/kubernetes pkg/controller/podautoscaler/horizontal_test.go
// (TestNormalizeDesiredReplicas): the scale-down window keeps the largest recommendation.
#[test]
fn stabilization_table() {
    let minute = 60.0;
    let now = 1000.0;
    type Recommendations = Vec<(f64, i32)>;
    let cases: Vec<(&str, Recommendations, i32, i32)> = vec![
        (
            "stabilize",
            vec![(now - 2.0 * minute, 4), (now - minute, 5)],
            3,
            5,
        ),
        (
            "no stabilize",
            vec![(now - 2.0 * minute, 1), (now - minute, 2)],
            3,
            3,
        ),
        (
            "no stabilize: old recommendations",
            vec![(now - 10.0 * minute, 10), (now - 9.0 * minute, 9)],
            3,
            3,
        ),
        (
            "stabilize: old recommendations",
            vec![
                (now - 10.0 * minute, 10),
                (now - minute, 4),
                (now - 2.0 * minute, 5),
                (now - 9.0 * minute, 9),
            ],
            3,
            5,
        ),
        (
            "exactly one window old no longer counts",
            vec![(now - 300.0, 9)],
            3,
            3,
        ),
    ];
    for (name, recommendations, desired, expected) in cases {
        let mut behavior = seeded(HpaBehavior::default(), &recommendations, &[]);
        let n = behavior.stabilize_and_limit("r", now, 6, Some(desired), 1, 10);
        assert_eq!(n, expected, "{name}");
    }
}

// kubernetes/kubernetes pkg/controller/podautoscaler/horizontal_test.go
// (TestScaleDownStabilizeInitialSize): a fresh HPA does not scale down on its first sync.
#[test]
fn first_sync_keeps_the_initial_size() {
    let mut behavior = Behavior::new(HpaBehavior::default());
    assert_eq!(behavior.stabilize_and_limit("r", 0.0, 5, Some(3), 2, 6), 5);
}

#[test]
fn bounds_come_first() {
    let mut behavior = Behavior::new(HpaBehavior::default());
    assert_eq!(behavior.stabilize_and_limit("a", 0.0, 12, None, 1, 10), 10);
    assert_eq!(behavior.stabilize_and_limit("b", 0.0, 0, Some(5), 1, 10), 0);
    assert_eq!(behavior.stabilize_and_limit("c", 0.0, 3, None, 1, 10), 3);
}

fn hpa(target: f64) -> Hpa {
    Hpa::new(
        [("server".to_string(), target)].into(),
        HpaBehavior::default(),
    )
}

/// Runs `hpa` every 15 s from `from` to `to` with `load` requests spread over the ready
/// replicas; the count it writes is the next view's desired count (all ready at once).
/// Returns the counts per sync.
fn run(hpa: &mut Hpa, desired: &mut i32, from: f64, to: f64, load: f64) -> Vec<i32> {
    let mut counts = Vec::new();
    let mut t = from;
    while t <= to {
        let replicas = loaded(&vec![load / f64::from(*desired); *desired as usize]);
        let counts_now = hpa.decide(&view(t, *desired, 1, 20, replicas));
        *desired = counts_now["server"];
        counts.push(*desired);
        t += 15.0;
    }
    counts
}

#[test]
fn stabilization_window_keeps_the_max_recommendation_for_300_s() {
    let mut hpa = hpa(10.0);
    let mut desired = 2;
    // 60 requests: 30 per replica on 2 → 6; then 10 on each of 6, on target.
    assert_eq!(run(&mut hpa, &mut desired, 0.0, 15.0, 60.0), vec![6, 6]);
    // 12 requests: the proposal is 2, but 6 (recommended last at t = 15) holds until the
    // window has passed.
    let counts = run(&mut hpa, &mut desired, 30.0, 330.0, 12.0);
    let drop_at = 30.0 + 15.0 * counts.iter().position(|&n| n < 6).unwrap() as f64;
    assert_eq!(drop_at, 315.0);
    assert_eq!(counts.last(), Some(&2));
}

#[test]
fn rate_limit_4_pods_vs_100_percent_over_15_s() {
    let mut behavior = Behavior::new(HpaBehavior::default());
    // 4 Pods beat 100 % of 3.
    assert_eq!(
        behavior.stabilize_and_limit("r", 0.0, 3, Some(40), 1, 100),
        7
    );
    // Inside the period the start is still 3: no more.
    assert_eq!(
        behavior.stabilize_and_limit("r", 5.0, 7, Some(40), 1, 100),
        7
    );
    // A period later the start is 7 and 100 % (14) beats 4 Pods (11).
    assert_eq!(
        behavior.stabilize_and_limit("r", 15.0, 7, Some(40), 1, 100),
        14
    );
    assert_eq!(
        behavior.stabilize_and_limit("r", 30.0, 14, Some(40), 1, 100),
        28
    );
    assert_eq!(
        behavior.stabilize_and_limit("r", 45.0, 28, Some(40), 1, 100),
        40
    );
}

#[test]
fn peer_shape() {
    let hpa = Hpa::from_targets(&Targets {
        queue_depth: [("server".to_string(), 8.0)].into(),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: 0.5,
        itl_seconds: 0.05,
    });
    assert_eq!(
        (
            hpa.name(),
            hpa.interval(),
            hpa.sample_every(),
            hpa.through_prometheus()
        ),
        ("hpa".to_string(), 15.0, None, true)
    );
}

#[test]
fn no_samples_keeps_the_count_and_roles_without_a_target_are_left_out() {
    let mut hpa = hpa(10.0);
    let starting = with(&[], Starting, 3);
    assert_eq!(hpa.decide(&view(0.0, 3, 1, 10, starting))["server"], 3);
    let mut other = Hpa::new(BTreeMap::new(), HpaBehavior::default());
    assert!(
        other
            .decide(&view(0.0, 3, 1, 10, loaded(&[50.0; 3])))
            .is_empty()
    );
}
