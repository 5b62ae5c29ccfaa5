use super::*;
use crate::peers::testing::{replica, view};
use crate::peers::{Replica, Sample};

/// A ready replica with KV usage `kv` and `waiting` requests in its queue.
fn engine(ordinal: u32, kv: f64, waiting: f64) -> Replica {
    Replica {
        ordinal,
        state: Lifecycle::Ready,
        sample: Some(Sample {
            kv_usage: kv,
            waiting,
            ..Sample::default()
        }),
    }
}

/// Ready replicas with these (KV, queue) samples, numbered from 0.
fn engines(loads: &[(f64, f64)]) -> Vec<Replica> {
    loads
        .iter()
        .enumerate()
        .map(|(i, &(kv, q))| engine(i as u32, kv, q))
        .collect()
}

/// One direct cycle at t = 0 on a fresh WVA.
fn cycle(desired: i32, replicas: Vec<Replica>) -> i32 {
    Wva::direct().decide(&view(0.0, desired, 1, 10, replicas))["server"]
}

// llm-d/llm-d-workload-variant-autoscaler docs/saturation-analyzer.md (analysis steps,
// scale-down safety simulation) and docs/saturation-scaling-config.md (its KV example:
// 65 % and 72 % average a 0.115 spare, no scale-up).
#[test]
fn saturation_table() {
    /// (KV usage, queue) per replica.
    type Loads = Vec<(f64, f64)>;
    let cases: Vec<(&str, i32, Loads, i32)> = vec![
        (
            "the docs' example: spare KV 0.115 holds",
            2,
            vec![(0.65, 0.0), (0.72, 0.0)],
            2,
        ),
        (
            "scale up on KV spare (0.065 < 0.10)",
            2,
            vec![(0.72, 0.0), (0.75, 0.0)],
            3,
        ),
        (
            "scale up on queue spare (2.5 < 3)",
            2,
            vec![(0.2, 3.0), (0.2, 2.0)],
            3,
        ),
        // Counting the saturated queue of 6 the spread queue spare would be 2 < 3.
        (
            "saturated replicas are left out of the spares",
            3,
            vec![(0.1, 6.0), (0.1, 0.0), (0.1, 0.0)],
            2,
        ),
        (
            "queue at the threshold saturates",
            2,
            vec![(0.1, 5.0), (0.1, 0.0)],
            2,
        ),
        (
            "every replica saturated scales up",
            2,
            vec![(0.85, 0.0), (0.3, 6.0)],
            3,
        ),
        // One non-saturated replica: no scale-down (spreading over all reporting replicas
        // instead would allow it).
        (
            "no scale-down with one non-saturated replica",
            2,
            vec![(0.95, 0.0), (0.0, 0.0)],
            2,
        ),
        // KV 0.3 / 2 → spare 0.65; queue 1 / 2 → spare 4.5.
        (
            "scale down when the spread spares stay above the triggers",
            3,
            vec![(0.1, 0.0), (0.1, 0.0), (0.1, 1.0)],
            2,
        ),
        // Queue 4 / 2 = 2 → spare exactly 3.
        (
            "spread spare at the trigger still allows",
            3,
            vec![(0.1, 1.0), (0.1, 1.0), (0.1, 2.0)],
            2,
        ),
        // Queue 5 / 2 = 2.5 → spare 2.5 < 3 (its average spare 3.33 does not scale up).
        (
            "refused on the spread queue",
            3,
            vec![(0.1, 2.0), (0.1, 2.0), (0.1, 1.0)],
            3,
        ),
        // KV 1.5 / 2 = 0.75 → spare 0.05 < 0.10 (average spare 0.30).
        (
            "refused on the spread KV",
            3,
            vec![(0.5, 0.0), (0.5, 0.0), (0.5, 0.0)],
            3,
        ),
    ];
    for (name, desired, loads, expected) in cases {
        assert_eq!(cycle(desired, engines(&loads)), expected, "{name}");
    }
}

#[test]
fn bounds_and_silence() {
    let busy = || engines(&[(0.79, 0.0), (0.79, 0.0)]);
    assert_eq!(
        Wva::direct().decide(&view(0.0, 2, 1, 2, busy()))["server"],
        2
    );
    let idle = || engines(&[(0.0, 0.0), (0.0, 0.0), (0.0, 0.0)]);
    assert_eq!(
        Wva::direct().decide(&view(0.0, 3, 3, 5, idle()))["server"],
        3
    );
    // Never below one replica, even with a minimum of 0.
    let two_idle = engines(&[(0.0, 0.0), (0.0, 0.0)]);
    assert_eq!(
        Wva::direct().decide(&view(0.0, 1, 0, 10, two_idle))["server"],
        1
    );
    // Nothing reports: no decision, even while saturated replicas would call for one.
    let starting = vec![replica(0, Lifecycle::Starting)];
    assert_eq!(cycle(1, starting), 1);
}

// docs/saturation-analyzer.md, docs/saturation-scaling-config.md: "Variants with pending
// replicas (pods that exist but aren't ready yet) are skipped during scale-up".
#[test]
fn no_repeated_scale_up_while_a_replica_starts() {
    let hot = [(0.78, 0.0), (0.78, 0.0)];
    for waiting in [Lifecycle::Starting, Lifecycle::Pending] {
        let mut replicas = engines(&hot);
        replicas.push(replica(2, waiting));
        assert_eq!(cycle(3, replicas), 3, "{waiting:?}");
    }
    // The spec counts one more than report (a ready replica not scraped yet).
    assert_eq!(cycle(3, engines(&hot)), 3);
    // Once it reports, the next scale-up goes through.
    assert_eq!(cycle(2, engines(&hot)), 3);
    // A scale-down is not held by a starting replica.
    let mut replicas = engines(&[(0.0, 0.0), (0.0, 0.0)]);
    replicas.push(replica(2, Lifecycle::Starting));
    assert_eq!(cycle(3, replicas), 2);
}

// docs/saturation-analyzer.md: "Uses peak capacity usage in the last minute".
#[test]
fn max_over_time_keeps_a_spike_for_60_s() {
    let mut wva = Wva::direct();
    let calm = || engines(&[(0.1, 0.0), (0.1, 0.0)]);
    let spike = || engines(&[(0.85, 0.0), (0.1, 0.0)]);
    wva.observe(&view(0.0, 2, 1, 10, calm()));
    wva.observe(&view(15.0, 2, 1, 10, spike()));
    for t in [30.0, 45.0] {
        wva.observe(&view(t, 2, 1, 10, calm()));
    }
    // 45 s after the spike it still saturates replica 0: one non-saturated, no scale-down
    // (the calm view alone would scale down).
    assert_eq!(wva.decide(&view(60.0, 2, 1, 10, calm()))["server"], 2);
    // A minute after it, it is out of the range.
    assert_eq!(wva.decide(&view(75.0, 2, 1, 10, calm()))["server"], 1);
}

/// Drives `wva` as the harness would: observe and decide every 15 s (`decide` only at
/// its interval), the written count becoming the spec; all replicas ready and idle.
/// Returns the first instant the count changed.
fn first_change(mut wva: Wva, until: f64) -> Option<f64> {
    let mut desired = 3;
    let mut next_decision = 0.0;
    let mut t = 0.0;
    while t <= until {
        let v = view(
            t,
            desired,
            1,
            10,
            engines(&vec![(0.05, 0.0); desired as usize]),
        );
        wva.observe(&v);
        if t >= next_decision {
            next_decision = t + wva.interval();
            let n = wva.decide(&v)["server"];
            if n != desired {
                return Some(t);
            }
            desired = n;
        }
        t += 15.0;
    }
    None
}

// llm-d/llm-d-autoscaling#777: HPA's 300 s scale-down stabilization reshapes WVA's
// ramps. The HPA's first sync records the current 3, so the published 2 waits out the
// window.
#[test]
fn behind_hpa_delays_the_scale_down_by_300_s() {
    assert_eq!(first_change(Wva::direct(), 600.0), Some(0.0));
    assert_eq!(first_change(Wva::behind_hpa(), 600.0), Some(300.0));
}

#[test]
fn behind_hpa_reads_the_published_count_a_scrape_late() {
    let mut wva = Wva::behind_hpa();
    let hot = || engines(&[(0.78, 0.0), (0.78, 0.0)]);
    // t = 0: the cycle publishes 3, the HPA has nothing to read yet.
    assert_eq!(wva.decide(&view(0.0, 2, 1, 10, hot()))["server"], 2);
    // t = 15: it reads 3 (no scale-up stabilization).
    assert_eq!(wva.decide(&view(15.0, 2, 1, 10, hot()))["server"], 3);
    // t = 30: no cycle before t = 60; the published 3 holds.
    assert_eq!(wva.decide(&view(30.0, 3, 1, 10, hot()))["server"], 3);
}

#[test]
fn peer_shapes() {
    let shape = |w: Wva| {
        (
            w.name(),
            w.interval(),
            w.sample_every(),
            w.through_prometheus(),
        )
    };
    assert_eq!(shape(Wva::direct()), ("wva".into(), 60.0, Some(15.0), true));
    assert_eq!(
        shape(Wva::behind_hpa()),
        ("wva-hpa".into(), 15.0, Some(15.0), true)
    );
    let strict = SaturationConfig {
        kv_cache_threshold: 0.5,
        ..SaturationConfig::default()
    };
    let mut wva = Wva::direct().with_config(strict);
    // 0.6 is saturated at 0.5: every replica saturated.
    assert_eq!(
        wva.decide(&view(0.0, 1, 1, 10, engines(&[(0.6, 0.0)])))["server"],
        2
    );
}
