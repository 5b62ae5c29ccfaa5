use super::super::testing::{ready, replica, view};
use super::*;

/// Knative's unit-test spec: rates 10, threshold 2, a 60 s stable window.
fn test_config() -> KnativeConfig {
    KnativeConfig {
        max_scale_up_rate: 10.0,
        max_scale_down_rate: 10.0,
        ..KnativeConfig::default()
    }
}

/// One call of the decider: (seconds after the start, ready count, stable, panic, want).
type Step = (f64, i32, f64, f64, i32);

/// Runs `steps` of case `name` on a decider made at time 0 with `ready_at_start` pods.
fn run(name: &str, config: &KnativeConfig, target: f64, ready_at_start: i32, steps: &[Step]) {
    let mut decider = Decider::new(ready_at_start, 0.0);
    for (n, &(t, ready, stable, panic, want)) in steps.iter().enumerate() {
        let got = decider.scale(config, target, ready, stable, panic, t);
        assert_eq!(
            got, want,
            "{name}, step {n}: t {t}, ready {ready}, {stable}/{panic}"
        );
    }
}

// Shapes of knative/serving pkg/autoscaler/scaling/autoscaler_test.go (knative-v1.23.0),
// each (test name, target value, ready at start, steps).
#[test]
fn decider_reproduces_knatives_own_cases() {
    let cases: &[(&str, f64, i32, &[Step])] = &[
        (
            "StableModeIncreaseWithConcurrencyDefault",
            10.0,
            1,
            &[(0.0, 1, 50.0, 10.0, 5), (0.0, 1, 100.0, 10.0, 10)],
        ),
        (
            "StableModeDecrease",
            10.0,
            1,
            &[(0.0, 8, 100.0, 100.0, 10), (0.0, 8, 50.0, 50.0, 5)],
        ),
        (
            "PanicModeDoublePodCount",
            10.0,
            1,
            &[(0.0, 1, 50.0, 100.0, 10)],
        ),
        (
            "RateLimitScaleUp: need 100 but only x10 per tick",
            10.0,
            1,
            &[(0.0, 1, 1000.0, 1001.0, 10), (0.0, 10, 1000.0, 1001.0, 100)],
        ),
        (
            "RateLimitScaleDown: need 1 but only ÷10 per tick",
            10.0,
            1,
            &[(0.0, 100, 1.0, 1.0, 10), (0.0, 10, 1.0, 1.0, 1)],
        ),
        (
            "PanicThenUnPanicScaleDown: held through the stable window",
            10.0,
            1,
            &[
                (0.0, 1, 100.0, 100.0, 10),
                (0.0, 10, 100.0, 1000.0, 100),
                (30.0, 10, 1.0, 1.0, 100),
                (61.0, 10, 1.0, 1.0, 1),
            ],
        ),
        (
            "UnpanicAfterSlowIncrease: panic ends a stable window after the last surge",
            1.0,
            1,
            &[
                (0.0, 10, 11.0, 25.0, 25),
                (30.0, 40, 30.0, 41.0, 41),
                (62.0, 55, 50.0, 56.0, 50),
            ],
        ),
        (
            "ExtendPanicWindow: still over the threshold at 30 s",
            1.0,
            1,
            &[
                (0.0, 10, 11.0, 25.0, 25),
                (30.0, 40, 30.0, 80.0, 80),
                (62.0, 40, 30.0, 30.0, 80),
                (91.0, 40, 30.0, 30.0, 30),
            ],
        ),
        (
            "PanicModeExponentialTrackAndStabilize",
            1.0,
            1,
            &[
                (0.0, 1, 6.0, 6.0, 6),
                (0.0, 6, 36.0, 36.0, 36),
                (1.0, 36, 216.0, 216.0, 216),
                (1.0, 216, 1296.0, 1296.0, 1296),
                (2.0, 1296, 1296.0, 1296.0, 1296),
            ],
        ),
        (
            "UseOnePodAsMinimumIfEndpointsNotFound",
            10.0,
            1,
            &[(0.0, 0, 1000.0, 888.0, 10)],
        ),
        (
            "StartInPanicMode: ready 2 at start holds 2 for a stable window",
            10.0,
            2,
            &[
                (0.0, 2, 0.0, 0.0, 2),
                (60.0, 2, 0.0, 0.0, 2),
                (62.0, 2, 0.0, 0.0, 0),
            ],
        ),
    ];
    for &(name, target, ready_at_start, steps) in cases {
        run(name, &test_config(), target, ready_at_start, steps);
    }
}

// TestAutoscalerScale's panic rows and the small-rate rows
// (pkg/autoscaler/scaling/autoscaler_test.go): a decider already 5 s into a panic with
// maxPanicPods 5, or a custom rate.
#[test]
fn decider_in_panic_picks_the_larger_window_and_small_rates_still_move_one_pod() {
    let in_panic = || Decider {
        panic_time: Some(-5.0),
        max_panic_pods: 5,
        delayed: VecDeque::new(),
    };
    let config = test_config();
    assert_eq!(in_panic().scale(&config, 1.0, 5, 50.0, 30.0, 0.0), 50);
    assert_eq!(in_panic().scale(&config, 1.0, 5, 20.0, 30.0, 0.0), 30);

    let slow_up = KnativeConfig {
        max_scale_up_rate: 1.1,
        ..test_config()
    };
    assert_eq!(
        Decider::new(1, 0.0).scale(&slow_up, 1.0, 2, 3.0, 3.1, 0.0),
        3
    );
    let slow_down = KnativeConfig {
        max_scale_down_rate: 1.1,
        ..test_config()
    };
    assert_eq!(
        Decider::new(1, 0.0).scale(&slow_down, 10.0, 100, 1.0, 1.0, 0.0),
        90
    );
}

// TestStartInPanicMode (pkg/autoscaler/scaling/autoscaler_test.go).
#[test]
fn a_fresh_decider_panics_only_above_one_ready_pod() {
    for ready in 0..2 {
        let d = Decider::new(ready, 0.0);
        assert_eq!((d.panic_time, d.max_panic_pods), (None, ready));
    }
    let d = Decider::new(2, 0.0);
    assert_eq!((d.panic_time, d.max_panic_pods), (Some(0.0), 2));
}

// TestAutoscalerScaleDownDelay and TestAutoscalerScaleDownDelayZero
// (pkg/autoscaler/scaling/autoscaler_test.go): target 10, rates 10, threshold 100.
#[test]
fn scale_down_delay_holds_the_highest_count_of_the_delay() {
    let config = |delay| KnativeConfig {
        panic_threshold: 100.0,
        scale_down_delay_seconds: delay,
        ..test_config()
    };
    let delayed = config(300.0);
    let mut d = Decider::new(0, 0.0);
    // (t, concurrency, want)
    for (t, c, want) in [
        (2.0, 40.0, 4),
        (300.0, 0.0, 4),
        (302.0, 0.0, 0),
        (540.0, 40.0, 4),
        (600.0, 30.0, 4),
        (660.0, 0.0, 4),
        (840.0, 0.0, 3),
        (900.0, 0.0, 0),
    ] {
        assert_eq!(d.scale(&delayed, 10.0, 0, c, c, t), want, "t {t}");
    }
    let mut d = Decider::new(0, 0.0);
    let none = config(0.0);
    assert_eq!(d.scale(&none, 10.0, 0, 40.0, 40.0, 0.0), 4);
    assert_eq!(d.scale(&none, 10.0, 0, 20.0, 20.0, 0.5), 2);
}

// TestTimedFloat64BucketsWindowAverage (pkg/autoscaler/aggregation/bucketing_test.go):
// a 5 s window of 1 s buckets; (record at, value) or read at, want.
#[test]
fn buckets_average_over_the_buckets_since_the_first_write() {
    let mut b = Buckets::new(5.0, 1.0);
    let t0 = 100.0;
    b.record(t0, 1.0);
    assert_eq!(
        b.average(t0),
        1.0,
        "a young window is not diluted by its length"
    );
    for i in 1..5 {
        b.record(t0 + f64::from(i), f64::from(i + 1));
    }
    assert_eq!(b.average(t0 + 4.0), 15.0 / 5.0);
    assert_eq!(b.average(t0 + 3.6), 15.0 / 5.0, "now lagging behind");
    assert_eq!(b.average(t0 + 6.0), (15.0 - 1.0 - 2.0) / 3.0, "short hole");
    assert_eq!(b.average(t0 + 10.0), 0.0, "long hole");
    b.record(t0 + 6.0, 91.0);
    assert_eq!(b.average(t0 + 6.0), (15.0 - 1.0 - 2.0 + 91.0) / 5.0);

    let t1 = t0 + 60.0;
    b.record(t1, 1984.0);
    assert_eq!(b.average(t1), 1984.0, "a window without writes starts over");
    b.record(t1 - 3.0, 4.0);
    assert_eq!(b.average(t1), (4.0 + 1984.0) / 4.0, "an earlier write");
    let t2 = t1 + 1.0;
    b.record(t2, 5.0);
    assert_eq!(b.average(t2), (4.0 + 1984.0 + 5.0) / 5.0);
    b.record(t2 - 3.0, 10.0);
    assert_eq!(b.average(t2), (4.0 + 10.0 + 1984.0 + 5.0) / 5.0);
    b.record(t2 - 6.0, 10.0);
    b.record(t2 - 5.0, 10.0);
    assert_eq!(
        b.average(t2),
        (4.0 + 10.0 + 1984.0 + 5.0) / 5.0,
        "writes a window before the newest are ignored"
    );
    b.record(t2 + 5.0, 10.0);
    assert_eq!(b.average(t2 + 5.0), 10.0, "exactly a window without writes");
}

fn targets(queue_depth: f64) -> Targets {
    Targets {
        queue_depth: BTreeMap::from([("server".to_string(), queue_depth)]),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: 0.5,
        itl_seconds: 0.05,
    }
}

/// `n` ready replicas with `queue` requests each.
fn replicas(n: u32, queue: f64) -> Vec<super::super::Replica> {
    (0..n).map(|i| ready(i, queue, 0.0)).collect()
}

/// Observes every second and decides every 2 s from `from` to `to` (inclusive), the
/// harness's order, with `n` replicas of `queue` requests each; the last decision.
fn drive(
    kpa: &mut KnativeKpa,
    from: u32,
    to: u32,
    desired: i32,
    n: u32,
    queue: f64,
) -> Option<i32> {
    let mut last = None;
    for s in from..=to {
        let v = view(f64::from(s), desired, 1, 100, replicas(n, queue));
        kpa.observe(&v);
        if s % 2 == 0 {
            last = kpa.decide(&v).get("server").copied();
        }
    }
    last
}

#[test]
fn scales_up_when_stable_concurrency_exceeds_the_target() {
    // Target 10 → TV 7; one replica with 20 in flight: ceil(20 / 7) = 3 (also a panic,
    // 3 ≥ 2 × 1, which agrees on 3).
    let mut kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(drive(&mut kpa, 0, 0, 1, 1, 20.0), Some(3));
    // Two replicas at 10 each: ceil(20 / 7) = 3, below 2 × 2: stable mode after the
    // start-up panic (which holds 2, less than 3), 3.
    let mut kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(drive(&mut kpa, 0, 120, 2, 2, 10.0), Some(3));
}

#[test]
fn scale_down_is_limited_to_half_the_ready_count() {
    // Eight replicas at TV for two minutes (the start-up panic is long over): 8.
    let mut kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(drive(&mut kpa, 0, 120, 8, 8, 7.0), Some(8));
    // Idle: the stable mean falls a bucket at a time (58 of 60 buckets still at 56)...
    assert_eq!(drive(&mut kpa, 121, 122, 8, 8, 0.0), Some(8));
    // ...and after a stable window of idleness asks for 0; the rate allows floor(8 / 2).
    assert_eq!(drive(&mut kpa, 123, 190, 8, 8, 0.0), Some(4));
}

#[test]
fn panic_enters_at_twice_the_ready_count_holds_a_stable_window_and_never_lowers() {
    let mut kpa = KnativeKpa::new(&targets(10.0));
    // One replica at 7 (exactly TV) for two minutes: 1.
    assert_eq!(drive(&mut kpa, 0, 120, 1, 1, 7.0), Some(1));
    // A burst of 28 on it: the 6 s panic window reaches 2 × TV within three seconds.
    let entered = (121..=130)
        .find(|&s| drive(&mut kpa, s, s, 1, 1, 28.0).is_some_and(|n| n >= 2))
        .expect("panics");
    assert!(entered <= 124, "panicked at {entered}");
    let peak = drive(&mut kpa, entered + 1, 130, 1, 1, 28.0).unwrap();
    assert_eq!(peak, 4, "ceil(28 / 7)");
    // Load back to normal on 4 replicas: panic keeps 4 for a stable window after the
    // last over-threshold tick, although the panic window asks for 1.
    assert_eq!(drive(&mut kpa, 131, 180, 4, 4, 7.0 / 4.0), Some(4));
    assert_eq!(
        drive(&mut kpa, 181, 260, 4, 4, 7.0 / 4.0),
        Some(2),
        "halved"
    );
}

#[test]
fn starts_in_panic_with_more_than_one_ready_replica() {
    // Three idle replicas at the first decision: held at 3 for a stable window.
    let mut kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(drive(&mut kpa, 0, 60, 3, 3, 0.0), Some(3));
    assert_eq!(
        drive(&mut kpa, 61, 62, 3, 3, 0.0),
        Some(1),
        "floor(3 / 2) = 1"
    );
    // One replica: no start-up panic.
    let mut kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(drive(&mut kpa, 0, 0, 1, 1, 0.0), Some(1));
}

// TestAutoscalerNoDataNoAutoscale (pkg/autoscaler/scaling/autoscaler_test.go).
#[test]
fn no_data_keeps_the_count_and_untargeted_roles_are_left_alone() {
    let mut kpa = KnativeKpa::new(&targets(10.0));
    let starting = vec![
        replica(0, Lifecycle::Starting),
        replica(1, Lifecycle::Starting),
    ];
    let v = view(0.0, 2, 1, 4, starting);
    kpa.observe(&v);
    assert!(kpa.decide(&v).is_empty());
    let mut other = KnativeKpa::new(&Targets {
        queue_depth: BTreeMap::from([("decode".to_string(), 10.0)]),
        ..targets(10.0)
    });
    let v = view(0.0, 1, 1, 4, replicas(1, 50.0));
    other.observe(&v);
    assert!(other.decide(&v).is_empty());
}

#[test]
fn the_answer_is_clamped_to_the_role_bounds() {
    let mut kpa = KnativeKpa::new(&targets(10.0));
    let v = view(0.0, 1, 2, 3, replicas(1, 700.0));
    kpa.observe(&v);
    assert_eq!(kpa.decide(&v)["server"], 3);
    let v = view(2.0, 3, 2, 3, replicas(3, 0.0));
    kpa.observe(&v);
    assert_eq!(kpa.decide(&v)["server"], 3, "still panicking at 3");
}

#[test]
fn peer_identity() {
    let kpa = KnativeKpa::new(&targets(10.0));
    assert_eq!(kpa.name(), "knative-kpa");
    assert_eq!(kpa.interval(), 2.0);
    assert_eq!(kpa.sample_every(), Some(1.0));
    assert!(!kpa.through_prometheus());
}
