use super::super::testing::{ready, view};
use super::*;

// TestTimeWindow (pkg/controller/podautoscaler/types/metrics_test.go): a 2 min window of
// 1 min buckets; (record at, value, values after).
#[test]
fn window_keeps_one_value_per_bucket_and_a_window_and_a_bucket_of_them() {
    let mut w = Window::new(120.0, 60.0);
    let start = 600.0;
    let steps: &[(f64, f64, &[f64])] = &[
        (0.0, 10.0, &[10.0]),
        (30.0, 20.0, &[20.0]),
        (60.0, 30.0, &[20.0, 30.0]),
        (90.0, 40.0, &[20.0, 40.0]),
        (120.0, 50.0, &[20.0, 40.0, 50.0]),
        (150.0, 60.0, &[20.0, 40.0, 60.0]),
        (180.0, 70.0, &[40.0, 60.0, 70.0]),
        (210.0, 80.0, &[40.0, 60.0, 80.0]),
    ];
    for &(at, value, want) in steps {
        w.record(start + at, value);
        assert_eq!(w.values(), want, "after recording {value} at {at}");
    }
    let mut w = Window::new(120.0, 60.0);
    for (i, v) in [20.0, 30.0, 40.0].into_iter().enumerate() {
        w.record(start + 60.0 * i as f64, v);
    }
    assert_eq!(w.average(), 30.0);
    assert_eq!(Window::new(180.0, 1.0).average(), 0.0);
}

/// One call of KPA's arithmetic: (case, N, S, P, T, want).
type KpaCase = (&'static str, i32, f64, f64, f64, i32);

// TestKPAAlgorithm_ComputeTargetReplicas (pkg/controller/podautoscaler/algorithm/
// kpa_test.go), with the production context: tolerance 0.1 (the mock's is 0), panic
// judged from P / S (the mock sets it), no maxPanicPods memory (the mock keeps one).
#[test]
fn kpa_reproduces_aibrixs_own_cases_under_the_production_context() {
    let cases: &[KpaCase] = &[
        ("stable_mode_basic_scaling", 2, 20.0, 20.0, 10.0, 2),
        // The mock forces panic and expects 4; 40 / 30 is no panic, so the stable 3.
        (
            "panic_mode_scaling_up, re-evaluated",
            2,
            30.0,
            40.0,
            10.0,
            3,
        ),
        (
            "panic_mode_scaling_up, a real panic",
            2,
            15.0,
            40.0,
            10.0,
            4,
        ),
        // The mock remembers maxPanicPods 5; production forgets it: floor(5 / 2) = 2.
        (
            "panic_mode_no_scale_down, no memory",
            5,
            20.0,
            20.0,
            10.0,
            2,
        ),
        ("scale_to_zero (before [min, max])", 1, 0.0, 0.0, 10.0, 0),
        ("max_scale_down_rate_limit", 4, 5.0, 5.0, 10.0, 2),
        ("up limit 2N", 2, 100.0, 100.0, 10.0, 4),
        ("up limit at least 1 from zero", 0, 50.0, 50.0, 10.0, 1),
        ("tolerance band keeps N (above T)", 3, 10.5, 10.5, 10.0, 3),
        ("tolerance band keeps N (below T)", 3, 9.5, 9.5, 10.0, 3),
        ("just outside the band: ceil(S / T)", 3, 11.5, 11.5, 10.0, 2),
        // 25 / 10 > 2: panic; the stable window is in band (N = 4), the panic one asks
        // for 3: the larger.
        ("panic picks the larger", 4, 10.0, 25.0, 10.0, 4),
    ];
    let config = AibrixConfig::default();
    for &(name, n, stable, panic, target, want) in cases {
        assert_eq!(
            kpa_desired(&config, n, stable, panic, target),
            want,
            "{name}"
        );
    }
    let slow_up = AibrixConfig {
        max_scale_up_rate: 1.5,
        ..AibrixConfig::default()
    };
    assert_eq!(
        kpa_desired(&slow_up, 2, 100.0, 100.0, 10.0),
        3,
        "max_scale_up_rate_limit"
    );
}

// TestAPAAlgorithm_ComputeTargetReplicas (pkg/controller/podautoscaler/algorithm/
// apa_test.go): (case, N, T, use per Pod, up rate, down rate, want), tolerance 0.1.
#[test]
fn apa_reproduces_aibrixs_own_cases() {
    let cases: &[(&str, i32, f64, f64, f64, f64, i32)] = &[
        ("basic_scale_up", 2, 30.0, 45.0, 2.0, 2.0, 3),
        ("scale_up_upto_ceiling", 2, 30.0, 35.0, 2.0, 2.0, 3),
        ("scale_up_upto_max_scale_up", 2, 30.0, 90.0, 2.0, 2.0, 4),
        (
            "scale_up_upto_max_scale_up_ceiling",
            2,
            30.0,
            90.0,
            2.5,
            2.0,
            5,
        ),
        ("basic_scale_down", 6, 30.0, 20.0, 2.0, 2.0, 4),
        ("scale_down_upto_ceiling", 6, 30.0, 18.0, 2.0, 2.0, 4),
        ("scale_down_upto_max_scale_down", 6, 30.0, 10.0, 2.0, 2.0, 3),
        (
            "scale_down_upto_max_scale_down_floor",
            6,
            30.0,
            5.0,
            2.0,
            2.5,
            2,
        ),
        (
            "no_scaling_as_within_up_tolerance",
            2,
            30.0,
            33.0,
            2.0,
            2.0,
            2,
        ),
        (
            "no_scaling_as_within_down_tolerance",
            2,
            30.0,
            27.0,
            2.0,
            2.0,
            2,
        ),
        ("division_by_zero", 1, 0.0, 10.0, 1000.0, 2.0, 1),
    ];
    for &(name, n, target, use_per_pod, up, down, want) in cases {
        let config = AibrixConfig {
            max_scale_up_rate: up,
            max_scale_down_rate: down,
            ..AibrixConfig::default()
        };
        assert_eq!(apa_desired(&config, n, use_per_pod, target), want, "{name}");
    }
}

// stabilizeRecommendation (pkg/controller/podautoscaler/podautoscaler_controller.go) has
// no unit test upstream; (seconds, recommendation, current, want lowest, want HPA-like).
#[test]
fn cooldown_takes_the_lowest_of_the_down_window_unless_hpa_like() {
    let config = AibrixConfig::default();
    let steps = [
        (0.0, 4, 4, 4, 4),
        // Down: the lowest lets 2 through at once; HPA-like holds the 4 of t = 0.
        (10.0, 2, 4, 2, 4),
        (290.0, 2, 4, 2, 4),
        // The 4 leaves the window (kept while newer than 300 s).
        (300.0, 2, 4, 2, 2),
        // Up: the 0 s window passes the recommendation.
        (310.0, 5, 2, 5, 5),
    ];
    let (mut lowest, mut highest) = (Cooldown::default(), Cooldown::default());
    for (t, rec, current, want_lowest, want_highest) in steps {
        assert_eq!(
            lowest.stabilize(&config, false, rec, current, t),
            want_lowest,
            "t {t}"
        );
        assert_eq!(
            highest.stabilize(&config, true, rec, current, t),
            want_highest,
            "t {t}"
        );
    }
    // The lowest can go deeper than the recommendation: a 1 of 20 s ago wins over 2.
    let mut c = Cooldown::default();
    assert_eq!(c.stabilize(&config, false, 1, 2, 0.0), 1);
    assert_eq!(c.stabilize(&config, false, 3, 1, 10.0), 3);
    assert_eq!(c.stabilize(&config, false, 2, 3, 20.0), 1);
}

/// Runs the harness's cadence from `from` to `to` seconds: `count` replicas, all ready,
/// each reporting KV usage `kv(t)`, observed every second and decided every 10 s, the
/// answer written back. The counts after each decision.
fn drive(
    peer: &mut Aibrix,
    count: &mut i32,
    from: u32,
    to: u32,
    kv: impl Fn(u32) -> f64,
) -> Vec<(u32, i32)> {
    let mut counts = Vec::new();
    for s in from..=to {
        let replicas = (0..*count as u32).map(|i| ready(i, 0.0, kv(s))).collect();
        let v = view(f64::from(s), *count, 1, 16, replicas);
        peer.observe(&v);
        if s % 10 == 0 {
            if let Some(&n) = peer.decide(&v).get("server") {
                *count = n;
            }
            counts.push((s, *count));
        }
    }
    counts
}

/// The first decision time the count is below `n`.
fn first_below(counts: &[(u32, i32)], n: i32) -> Option<u32> {
    counts.iter().find(|&&(_, c)| c < n).map(|&(t, _)| t)
}

#[test]
fn the_lowest_in_the_down_window_scales_down_at_once_and_hpa_like_waits_the_window() {
    // Four replicas at the target, then idle: the stable mean falls; once APA recommends
    // fewer, the default passes it at once, HPA-like waits until the last recommendation
    // of 4 is 300 s old (290 s after the first lower one, on a 10 s reconcile).
    let load = |s: u32| if s <= 100 { 0.5 } else { 0.0 };
    let run = |switches| {
        let mut peer = Aibrix::apa(AibrixMetric::KvUsage, switches);
        let mut count = 4;
        drive(&mut peer, &mut count, 0, 700, load)
    };
    let lowest = run(AibrixSwitches::default());
    let hpa_like = run(AibrixSwitches {
        hpa_like_cooldown: true,
        ..AibrixSwitches::default()
    });
    let at_once = first_below(&lowest, 4).expect("scales down");
    assert!(at_once > 100 && at_once < 200, "at {at_once}");
    assert_eq!(first_below(&hpa_like, 4), Some(at_once + 290));
}

#[test]
fn kpa_total_reads_the_mean_as_a_total_and_as_written_does_not() {
    let decide = |switches, n: i32, kv: f64| {
        let mut peer = Aibrix::kpa(AibrixMetric::KvUsage, switches);
        let v = view(
            0.0,
            n,
            1,
            16,
            (0..n as u32).map(|i| ready(i, 0.0, kv)).collect(),
        );
        peer.observe(&v);
        peer.decide(&v)["server"]
    };
    let as_written = AibrixSwitches {
        kpa_total: false,
        ..AibrixSwitches::default()
    };
    // Two replicas at 60 %: the total 1.2 asks for ceil(2.4) = 3; the per-Pod 0.6 is
    // just out of band and asks for ceil(1.2) = 2.
    assert_eq!(decide(AibrixSwitches::default(), 2, 0.6), 3);
    assert_eq!(decide(as_written, 2, 0.6), 2);
    // Four at 30 %: the total 1.2 asks for 3; the per-Pod 0.3 for 1, limited to 2.
    assert_eq!(decide(AibrixSwitches::default(), 4, 0.3), 3);
    assert_eq!(decide(as_written, 4, 0.3), 2);
}

#[test]
fn queue_depth_variant_and_bounds() {
    let targets = Targets {
        queue_depth: BTreeMap::from([("server".to_string(), 4.0)]),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: 0.5,
        itl_seconds: 0.05,
    };
    let mut apa = Aibrix::apa(
        AibrixMetric::queue_depth(&targets),
        AibrixSwitches::default(),
    );
    // Two replicas with 10 requests each (KV idle): r = 2.5, limited to 2N = 4.
    let v = view(
        0.0,
        2,
        1,
        16,
        vec![ready(0, 10.0, 0.0), ready(1, 10.0, 0.0)],
    );
    apa.observe(&v);
    assert_eq!(apa.decide(&v)["server"], 4);
    // Bounds: the same load capped at max 3.
    let v = view(
        10.0,
        2,
        1,
        3,
        vec![ready(0, 10.0, 0.0), ready(1, 10.0, 0.0)],
    );
    apa.observe(&v);
    assert_eq!(apa.decide(&v)["server"], 3);
    // A count above max is brought down without a pass.
    let v = view(20.0, 5, 1, 3, vec![ready(0, 0.0, 0.0)]);
    assert_eq!(apa.decide(&v)["server"], 3);
    // Roles without a target, and a role before any sample, are left alone.
    let mut other = Aibrix::apa(
        AibrixMetric::QueueDepth(BTreeMap::new()),
        AibrixSwitches::default(),
    );
    let v = view(0.0, 2, 1, 16, vec![ready(0, 10.0, 0.0)]);
    other.observe(&v);
    assert!(other.decide(&v).is_empty());
    let mut fresh = Aibrix::kpa(AibrixMetric::KvUsage, AibrixSwitches::default());
    assert!(fresh.decide(&v).is_empty());
}

#[test]
fn names_and_cadence() {
    let targets = Targets {
        queue_depth: BTreeMap::new(),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: 0.5,
        itl_seconds: 0.05,
    };
    let on = AibrixSwitches::default();
    let as_written = AibrixSwitches {
        kpa_total: false,
        ..on
    };
    let hpa = AibrixSwitches {
        hpa_like_cooldown: true,
        ..on
    };
    let queue = || AibrixMetric::queue_depth(&targets);
    let names: Vec<String> = [
        Aibrix::kpa(AibrixMetric::KvUsage, on),
        Aibrix::apa(AibrixMetric::KvUsage, on),
        Aibrix::kpa(AibrixMetric::KvUsage, as_written),
        Aibrix::kpa(AibrixMetric::KvUsage, hpa),
        Aibrix::apa(AibrixMetric::KvUsage, hpa),
        Aibrix::apa(AibrixMetric::KvUsage, as_written),
        Aibrix::kpa(queue(), on),
        Aibrix::apa(queue(), hpa),
    ]
    .iter()
    .map(Peer::name)
    .collect();
    assert_eq!(
        names,
        [
            "aibrix-kpa",
            "aibrix-apa",
            "aibrix-kpa-as-written",
            "aibrix-kpa-hpa-cooldown",
            "aibrix-apa-hpa-cooldown",
            "aibrix-apa",
            "aibrix-kpa-queue",
            "aibrix-apa-queue-hpa-cooldown",
        ]
    );
    let kpa = Aibrix::kpa(AibrixMetric::KvUsage, on);
    assert_eq!(
        (kpa.interval(), kpa.sample_every(), kpa.through_prometheus()),
        (10.0, Some(1.0), false)
    );
}
