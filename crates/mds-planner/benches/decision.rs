//! Decision latency for one scaler: three roles (encode, prefill, decode), two ratios and full
//! 256-entry histories (issue: p99 at most 50 us).
//!
//! Run: `cargo bench -p mds-planner --bench decision`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use jiff::{SignedDuration, Timestamp};
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_planner::state::{Kalman, Noise};
use mds_planner::{Guards, PlanInput, PlannerState, Policy, RoleInput, plan};
use mds_signals::RoleObservation;

fn policy(algorithm: serde_json::Value) -> Policy {
    let spec: ModelDeploymentScalerSpec = serde_json::from_value(serde_json::json!({
        "targetRef": {"name": "md"},
        "roles": [
            {"name": "encode", "minReplicas": 1, "maxReplicas": 64},
            {"name": "prefill", "minReplicas": 2, "maxReplicas": 256},
            {"name": "decode", "minReplicas": 2, "maxReplicas": 256}
        ],
        "ratios": [
            {"numeratorRole": "prefill", "denominatorRole": "decode", "target": "1", "min": "0.5", "max": "2"},
            {"numeratorRole": "encode", "denominatorRole": "prefill", "target": "0.5", "min": "0.25"}
        ],
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 120}},
        "algorithm": algorithm
    }))
    .expect("spec");
    let kinds: BTreeMap<String, RoleKind> = [
        ("encode".to_string(), RoleKind::Encode),
        ("prefill".to_string(), RoleKind::Prefill),
        ("decode".to_string(), RoleKind::Decode),
    ]
    .into();
    Policy::from_spec(&spec, &kinds).expect("policy")
}

fn observation(prompt: f64, generation: f64) -> RoleObservation {
    RoleObservation {
        ready_replicas: 12,
        sampled_replicas: 12,
        coverage_complete: true,
        signal_state: SignalState::Fresh,
        prompt_tokens_per_second: Some(prompt),
        generation_tokens_per_second: Some(generation),
        running_requests: Some(40.0),
        waiting_requests: Some(4.0),
        kv_cache_usage: Some(0.6),
        ttft_milliseconds: Some(420.0),
        itl_milliseconds: Some(45.0),
        ttft_observations: None,
        itl_observations: None,
        prompt_paths: vec![],
    }
}

/// Memory with 256 demand samples and 256 recommendations per role, and a warm filter.
fn full_state(now: Timestamp) -> PlannerState {
    let mut state = PlannerState::default();
    let noise = Noise {
        q_level: 1.0,
        q_trend: 0.1,
        measurement: 10.0,
        horizon_seconds: 300.0,
    };
    for (name, base) in [("encode", 0.0), ("prefill", 20_000.0), ("decode", 9_000.0)] {
        let role = state.roles.entry(name.to_string()).or_default();
        for i in 0..256i64 {
            let at = now - SignedDuration::from_secs(15 * (256 - i));
            role.record_demand(at, base + (i as f64 * 7.0) % 900.0, 15 * 256);
            role.record_recommendation(at, 12 + (i % 3) as i32);
        }
        role.kalman = Some(Kalman::start(
            base,
            now - SignedDuration::from_secs(15),
            noise,
        ));
        role.kalman.as_mut().unwrap().sample_count = 100;
    }
    state
}

fn measure(label: &str, policy: &Policy) {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let mut state = full_state(now);
    let roles = [
        RoleInput {
            current: 6,
            observation: Some(observation(0.0, 0.0)),
            growth_in_flight: false,
            readings_predate_growth: false,
            growth_backoff: false,
        },
        RoleInput {
            current: 12,
            observation: Some(observation(26_000.0, 0.0)),
            growth_in_flight: false,
            readings_predate_growth: false,
            growth_backoff: false,
        },
        RoleInput {
            current: 12,
            observation: Some(observation(0.0, 11_500.0)),
            growth_in_flight: false,
            readings_predate_growth: false,
            growth_backoff: false,
        },
    ];
    let guards = Guards::default();
    let input = PlanInput {
        policy,
        roles: &roles,
        guards: &guards,
        now,
        observed_at: now,
    };
    if std::env::var_os("MDS_BENCH_PROFILE").is_some() {
        // A short run for `valgrind --tool=callgrind`.
        for _ in 0..1_000 {
            black_box(plan(black_box(&input), black_box(&mut state)));
        }
        println!("{label}: 1,000 decisions");
        return;
    }
    for _ in 0..2_000 {
        black_box(plan(black_box(&input), black_box(&mut state)));
    }
    let mut samples: Vec<u128> = (0..50_000)
        .map(|_| {
            let start = Instant::now();
            black_box(plan(black_box(&input), black_box(&mut state)));
            start.elapsed().as_nanos()
        })
        .collect();
    samples.sort_unstable();
    let pct = |p: f64| {
        samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)] as f64 / 1000.0
    };
    let plan = plan(&input, &mut state);
    println!(
        "{label:<16} p50 {:6.1} us  p99 {:6.1} us  p99.9 {:6.1} us  (50,000 decisions; result {:?})",
        pct(0.50),
        pct(0.99),
        pct(0.999),
        plan.vector()
    );
}

/// The solver's worst case: four connected roles with full boxes (1..=1024), tight bands and
/// recommendations pulling apart, so the nearest feasible vector is far from all of them.
fn solver_worst_case() {
    use mds_api::quantity::parse_decimal;
    use mds_api::ratio_feasibility::Band;
    use mds_planner::solver::{SolverBand, SolverRole, WORK_LIMIT, solve};
    let tight = |n: usize, d: usize| SolverBand {
        band: Band {
            numerator: n,
            denominator: d,
            min: Some(parse_decimal("1").unwrap()),
            max: Some(parse_decimal("1.01").unwrap()),
        },
        target: Some(parse_decimal("1").unwrap()),
    };
    let bands = [tight(0, 1), tight(1, 2), tight(2, 3)];
    let cases: [(&str, [i32; 4]); 3] = [
        ("alternating", [1024, 1, 1024, 1]),
        ("descending", [1024, 700, 300, 1]),
        ("feasible", [500, 500, 500, 500]),
    ];
    for (name, recs) in cases {
        let roles: Vec<SolverRole> = recs
            .iter()
            .map(|&r| SolverRole {
                lo: 1,
                hi: 1024,
                recommendation: r,
            })
            .collect();
        let mut times: Vec<u128> = (0..20)
            .map(|_| {
                let start = Instant::now();
                black_box(solve(black_box(&roles), black_box(&bands), WORK_LIMIT));
                start.elapsed().as_nanos()
            })
            .collect();
        times.sort_unstable();
        let result = solve(&roles, &bands, WORK_LIMIT);
        println!(
            "solver {name:<12} median {:8.1} us  max {:8.1} us  (4 roles, boxes 1..=1024, work limit {WORK_LIMIT}; result {result:?})",
            times[times.len() / 2] as f64 / 1000.0,
            times[times.len() - 1] as f64 / 1000.0
        );
    }
}

fn main() {
    let token = serde_json::json!({"tokenThroughput": {
        "prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800"
    }});
    let predictive = serde_json::json!({"predictive": {
        "tokenThroughput": {"prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800"},
        "prefillTokenCapacityPerReplica": "2000", "decodeTokenCapacityPerReplica": "800"
    }});
    measure("TokenThroughput", &policy(token));
    measure("Predictive", &policy(predictive));
    if std::env::var_os("MDS_BENCH_PROFILE").is_none() {
        solver_worst_case();
    }
}
