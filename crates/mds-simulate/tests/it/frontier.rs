//! The frontier: every policy's one knob swept on the same world, against a bound nobody
//! beats, with the same result whatever the number of jobs.

use crate::common;

use std::sync::Arc;

use mds_sim::load::Trace;
use mds_simulate::compare::Case;
use mds_simulate::frontier::{self, DEFAULT_PEERS, Frontier, Grid, Policy, Search};
use mds_simulate::profile::{DEFAULT_PROFILE, profile};
use mds_simulate::run::RunOptions;
use mds_simulate::slo::Slo;

const CHAT: &str = include_str!("../../../../examples/simulate/chat.yaml");
const PD: &str = include_str!("../../../../examples/simulate/pd.yaml");
const CONV: &str = include_str!("../../../../data/traces/azure-2023-conv.csv");
const CODE: &str = include_str!("../../../../data/traces/azure-2023-code.csv");
const MOONCAKE: &str = include_str!("../../../../data/traces/mooncake-synthetic.jsonl");

fn policies() -> Vec<Policy> {
    ["mds-proportional", "mds-tokenthroughput", "mds-predictive"]
        .into_iter()
        .map(|n| Policy::Ours(n.to_string()))
        .chain([Policy::Tuned])
        .chain(DEFAULT_PEERS.map(Policy::Peer))
        .collect()
}

fn frontier_of(trace: Trace, options: &RunOptions, search: &Search) -> Frontier {
    frontier_of_example(CHAT, trace, options, search)
}

fn frontier_of_example(
    example: &str,
    trace: Trace,
    options: &RunOptions,
    search: &Search,
) -> Frontier {
    let (scaler, target) = common::manifests(example);
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(trace),
        load: "test",
        options,
    };
    frontier::frontier(&case, &policies(), search, &|_| {}).unwrap()
}

/// Every trial that reaches a tier costs at least the tier's Oracle A; where no vector reaches
/// the tier, no trial does.
fn assert_unbeaten(name: &str, f: &Frontier) {
    if let Some(broken) = beaten(name, f) {
        panic!("{broken}");
    }
}

/// The first trial that beats its tier's Oracle A, said.
fn beaten(name: &str, f: &Frontier) -> Option<String> {
    for tier in &f.tiers {
        let a = tier.bounds.as_ref().and_then(|b| b.oracle_a_gpu_hours);
        for p in &f.policies {
            for t in p.trials.iter().filter(|t| t.attainment >= Some(tier.tier)) {
                let said = match a {
                    // The same footprint for the same seconds may differ in the last digit.
                    Some(a) if t.gpu_hours >= a - 1e-9 => continue,
                    Some(a) => format!(
                        "reaches {} % on {:.6} GPU-h, under Oracle A's {a:.6}",
                        tier.tier * 100.0,
                        t.gpu_hours
                    ),
                    None => format!(
                        "reaches {} %, which the oracle says nothing reaches",
                        tier.tier * 100.0
                    ),
                };
                return Some(format!("{name}: {} at {} {said}", p.policy, t.knob));
            }
        }
    }
    None
}

#[test]
fn no_policy_reaches_a_tier_below_oracle_a_on_any_bundled_trace() {
    let search = Search {
        tiers: vec![0.9, 0.95, 0.99],
        grid: Grid {
            min: 0.25,
            max: 8.0,
            points: 6,
        },
        refinements: 0,
        threads: 2,
    };
    let default = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    // Mooncake's prompts need the 128k context, and a TTFT objective that grows with them.
    // Its prompts average 15k tokens and reach 120k: a chunk of one stalls every request
    // beside it, and a replica attains 95 % only nearly idle, so eight replicas (the
    // example's maxReplicas) reach about 80 %: its tiers are lower.
    let mut long = RunOptions::new(profile("llama3.1-8b-h100-vllm").unwrap());
    long.slo = Slo {
        ttft_per_1k_prompt_seconds: 0.1,
        ..Slo::default()
    };
    let low = Search {
        tiers: vec![0.5, 0.7, 0.9],
        ..search.clone()
    };
    for (name, trace, options, search) in [
        (
            "azure-2023-conv",
            Trace::parse_azure_csv(CONV).unwrap(),
            &default,
            &search,
        ),
        (
            "azure-2023-code",
            Trace::parse_azure_csv(CODE).unwrap(),
            &default,
            &search,
        ),
        (
            "mooncake-synthetic",
            Trace::parse_mooncake_jsonl(MOONCAKE).unwrap(),
            &long,
            &low,
        ),
    ] {
        let f = frontier_of(trace, options, search);
        // Six factors each; the tuned row is --suggest's own search (its eleven factors and
        // three halvings at or below the knee, and the tuned trial).
        assert!(
            f.policies.iter().all(|p| if p.policy == "mds --suggest" {
                p.trials.len() <= 15
            } else {
                p.trials.len() == 6
            }),
            "{name}"
        );
        assert!(
            f.tiers.iter().any(|t| t
                .bounds
                .as_ref()
                .is_some_and(|b| b.oracle_a_gpu_hours.is_some())),
            "{name}: some tier has an oracle"
        );
        assert_unbeaten(name, &f);
    }
    // Disaggregated, its ratio band and a quota at 80 % of static peak's GPUs.
    let trace = Trace::parse_azure_csv(CONV).unwrap();
    let (scaler, target) = common::manifests(PD);
    let mut options = default.clone();
    mds_simulate::compare::auto_quota(&scaler, &target, &trace, &mut options).unwrap();
    let f = frontier_of_example(PD, trace, &options, &search);
    assert_unbeaten("pd on azure-2023-conv", &f);
}

#[test]
fn the_frontier_is_the_same_whatever_the_jobs_and_refines_toward_each_tier() {
    let trace = Trace::parse_azure_csv(CONV)
        .unwrap()
        .window(0.0, Some(900.0))
        .unwrap();
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let search = |threads| Search {
        tiers: vec![0.95, 0.99],
        grid: Grid {
            min: 0.5,
            max: 4.0,
            points: 4,
        },
        refinements: 2,
        threads,
    };
    let one = frontier_of(trace.clone(), &options, &search(1));
    let two = frontier_of(trace, &options, &search(3));
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
    // Refinement adds factors between the grid's where a tier's bracket was (the tuned row
    // is --suggest's search, on its own grid: the_pasted_suggestion_reproduces_... below).
    for p in one.policies.iter().filter(|p| p.policy != "mds --suggest") {
        let grid = [0.5, 1.0, 2.0, 4.0];
        for (tier, point) in one.tiers.iter().zip(&p.tiers) {
            let Some(point) = point else { continue };
            let cheaper = p.trials.iter().find(|t| t.factor > point.trial.factor);
            if let Some(next) = cheaper {
                assert!(
                    next.attainment < Some(tier.tier) || next.gpu_hours >= point.trial.gpu_hours,
                    "{}: the cheapest reaching {} is the cheapest tried",
                    p.policy,
                    tier.tier
                );
            }
            let refined = p.trials.iter().any(|t| !grid.contains(&t.factor));
            let bracketed = cheaper.is_some_and(|n| n.attainment < Some(tier.tier));
            assert!(
                !bracketed || refined,
                "{}: refined toward {}",
                p.policy,
                tier.tier
            );
        }
    }
}

/// Issue 45: a team's trace of chat by day (about 1,000-token prompts) and 4-16k-token
/// prompts by night, TokenThroughput between 2 and 10 replicas, TTFT 500 ms plus 100 ms per
/// 1k prompt tokens. Every policy's floor of two replicas attains all of it, yet Oracle A,
/// whose curves were measured on the whole load's mix, read the night's load per replica on
/// curves mostly of chat requests and said 99 % needed more than the floor (3.66 GPU-h
/// against 3.39 paid by every policy; at three times the rate 5.56 against 5.01). Each
/// ten-minute window is now read on curves of its own mix (module `mix`).
#[test]
fn a_mix_that_shifts_inside_the_load_does_not_lift_oracle_a_over_the_floor() {
    use mds_sim::load::{Synthetic, TraceRequest};
    use mds_simulate::roster::PeerName;
    let segment = |spec: &str, from: f64, seed: u64| -> Vec<TraceRequest> {
        let mut t = Synthetic::parse(spec).unwrap().generate(seed);
        for r in &mut t.requests {
            r.at_seconds += from;
        }
        t.requests
    };
    let mut requests = segment(
        "constant:rate=2.5,duration=1200,prompt=1000,output=200",
        0.0,
        1,
    );
    requests.extend(segment(
        "constant:rate=0.35,duration=1200,prompt=10000,output=120",
        1200.0,
        2,
    ));
    let trace = Trace { requests };
    let (mut scaler, target) = common::manifests(CHAT);
    scaler.spec.roles[0].min_replicas = Some(2);
    scaler.spec.roles[0].max_replicas = 10;
    let mut options = RunOptions::new(profile("llama3.1-8b-h100-vllm").unwrap());
    options.slo = Slo {
        ttft_per_1k_prompt_seconds: 0.1,
        ..Slo::default()
    };
    let search = three_tiers(8.0, 5);
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(trace),
        load: "day and night",
        options: &options,
    };
    let policies = [
        Policy::Ours("mds-tokenthroughput".to_string()),
        Policy::Peer(PeerName::StaticPeak),
        Policy::Peer(PeerName::Hpa),
    ];
    let f = frontier::frontier(&case, &policies, &search, &|_| {}).unwrap();
    assert_eq!(f.mix_groups.len(), 2, "{:?}", f.mix_groups);
    assert_unbeaten("day and night", &f);
    // The floor reaches every tier, and Oracle A says so.
    let floor = f
        .policies
        .iter()
        .flat_map(|p| &p.trials)
        .filter(|t| t.attainment >= Some(0.99))
        .map(|t| t.gpu_hours)
        .fold(f64::INFINITY, f64::min);
    let a = f.tiers[2]
        .bounds
        .as_ref()
        .unwrap()
        .oracle_a_gpu_hours
        .unwrap();
    assert!(
        a <= floor + 1e-9,
        "Oracle A {a:.3} over the floor's {floor:.3}"
    );
}

/// The 90, 95 and 99 % tiers over `points` settings from 0.5 to `max` times the knee, unrefined.
fn three_tiers(max: f64, points: usize) -> Search {
    Search {
        tiers: vec![0.9, 0.95, 0.99],
        grid: Grid {
            min: 0.5,
            max,
            points,
        },
        refinements: 0,
        threads: 2,
    }
}

/// One random world for the property below: a load of one to three segments (a steady rate or
/// a flash crowd, each with its own prompt and output lengths, so the mix shifts and spikes
/// inside the load), an SLO form, an ITL reading, a floor, perhaps a quota, a P/D target, the
/// fluid engine (on a server: `mds simulate` refuses it on P/D).
#[derive(Debug, Clone)]
struct World {
    segments: Vec<(bool, f64, u32, u32)>,
    slo: u8,
    mean_itl: bool,
    floor: i32,
    quota: bool,
    pd: bool,
    fluid: bool,
}

fn world() -> impl proptest::strategy::Strategy<Value = World> {
    use proptest::prelude::*;
    let segment = (
        any::<bool>(),
        0.5f64..6.0,
        prop::sample::select(vec![200u32, 1000, 4000, 12000]),
        prop::sample::select(vec![20u32, 120, 400]),
    );
    (
        prop::collection::vec(segment, 1..=3),
        0u8..4,
        any::<bool>(),
        1i32..=3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        // `mds simulate` refuses the fluid engine on a disaggregated target.
        .prop_map(|(segments, slo, mean_itl, floor, quota, pd, fluid)| World {
            segments,
            slo,
            mean_itl,
            floor,
            quota,
            pd,
            fluid: fluid && !pd,
        })
}

/// The frontier of `w`: our two token algorithms and two peers over four settings.
fn frontier_of_world(w: &World) -> Frontier {
    use mds_sim::load::Synthetic;
    use mds_simulate::slo::ItlReading;
    const SEGMENT: f64 = 600.0;
    let mut requests = Vec::new();
    for (i, &(crowd, rate, prompt, output)) in w.segments.iter().enumerate() {
        let shape = if crowd {
            format!(
                "flash-crowd:base={:.2},peak={:.2},at=120,rise=30,hold=120,decay=60",
                rate / 2.0,
                rate * 2.0
            )
        } else {
            format!("constant:rate={rate:.2}")
        };
        let spec = format!("{shape},duration={SEGMENT},prompt={prompt},output={output}");
        let mut t = Synthetic::parse(&spec).unwrap().generate(i as u64 + 1);
        for r in &mut t.requests {
            r.at_seconds += i as f64 * SEGMENT;
        }
        requests.extend(t.requests);
    }
    let trace = Trace { requests };
    let example = if w.pd { PD } else { CHAT };
    let (mut scaler, target) = common::manifests(example);
    for role in &mut scaler.spec.roles {
        role.min_replicas = Some(w.floor.min(role.max_replicas));
    }
    let mut options = RunOptions::new(profile("llama3.1-8b-h100-vllm").unwrap());
    options.slo = match w.slo {
        0 => Slo::default(),
        1 => Slo {
            ttft_per_1k_prompt_seconds: 0.1,
            ..Slo::default()
        },
        2 => Slo {
            ttft_scale: Some(3.0),
            ..Slo::default()
        },
        _ => {
            let ((base, per_1k), classes) =
                Slo::parse_ttft_classes("300ms,1k=800ms,4k=2s+50ms/1k").unwrap();
            Slo {
                ttft_seconds: base,
                ttft_per_1k_prompt_seconds: per_1k,
                ttft_classes: classes,
                ..Slo::default()
            }
        }
    };
    if w.mean_itl {
        options.slo.itl_reading = ItlReading::Mean;
    }
    if w.fluid {
        options.engine = mds_simulate::run::EngineModel::Fluid;
    }
    if w.quota {
        mds_simulate::compare::auto_quota(&scaler, &target, &trace, &mut options).unwrap();
    }
    let search = three_tiers(4.0, 4);
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(trace),
        load: "random world",
        options: &options,
    };
    use mds_simulate::roster::PeerName;
    let policies = [
        Policy::Ours("mds-tokenthroughput".to_string()),
        Policy::Ours("mds-proportional".to_string()),
        Policy::Peer(PeerName::StaticPeak),
        Policy::Peer(PeerName::Hpa),
    ];
    frontier::frontier(&case, &policies, &search, &|_| {}).unwrap()
}

proptest::proptest! {
    // Each case is a whole frontier; a few cases a run, new ones each run.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// Issue 45: Oracle A is a bound on every SLO form, reading, floor (a target starting
    /// below it included), engine, quota, P/D target and a mix that shifts inside the load.
    #[test]
    fn no_policy_beats_oracle_a_in_any_world(w in world()) {
        assert_unbeaten(&format!("{w:?}"), &frontier_of_world(&w));
    }
}

/// Worlds random runs found the oracle beaten in, each named with what it caught, kept so
/// every run checks them (proptest's regression file replays seeds, which a changed strategy
/// no longer maps to the same world).
fn found_worlds() -> Vec<(&'static str, World)> {
    let plain = |segments: Vec<(bool, f64, u32, u32)>, slo: u8, floor: i32| World {
        segments,
        slo,
        mean_itl: false,
        floor,
        quota: false,
        pd: false,
        fluid: false,
    };
    let crowd = vec![(true, 1.1709790415319012, 4000, 20)];
    vec![
        (
            "4k-token prompts then chat, floor 2 (the chat group's curves on two and four \
             replicas started past its light loads)",
            plain(vec![(false, 0.5, 4000, 20), (false, 0.5, 200, 120)], 0, 2),
        ),
        (
            "a 4k-token crowd then 1k-token prompts, TTFT per 1k, floor 2 (the same)",
            plain(
                vec![
                    (true, 3.0525040207944376, 4000, 400),
                    (false, 0.6080949377318938, 1000, 400),
                ],
                1,
                2,
            ),
        ),
        (
            "4k-token prompts at 0.66 req/s (420 requests: a run's lucky draw at 99 %)",
            plain(vec![(false, 0.6590519259720976, 4000, 20)], 0, 1),
        ),
        (
            "P/D: a chat crowd then 12k-token prompts at 5 req/s, TTFT per 1k (decode saturating \
             at two replicas kept prefill at four through the band)",
            World {
                pd: true,
                ..plain(
                    vec![(true, 0.5, 200, 20), (false, 5.14305026934197, 12000, 20)],
                    1,
                    1,
                )
            },
        ),
        (
            "P/D: a 12k-token crowd, --slo-scale 3",
            World {
                pd: true,
                ..plain(vec![(true, 0.5, 12000, 20)], 2, 1)
            },
        ),
        (
            "P/D, quota: a 4k-token crowd, --slo-scale 3",
            World {
                pd: true,
                quota: true,
                ..plain(crowd.clone(), 2, 1)
            },
        ),
        (
            "quota: a 4k-token crowd",
            World {
                quota: true,
                ..plain(vec![(true, 0.5, 4000, 20)], 0, 1)
            },
        ),
        (
            "fluid: a 4k-token crowd, --slo-scale 3 (the oracle read the request engine's \
             curves)",
            World {
                fluid: true,
                ..plain(crowd, 2, 1)
            },
        ),
        (
            "fluid: 4k-token prompts at 5 req/s",
            World {
                fluid: true,
                ..plain(vec![(false, 5.116794787852422, 4000, 20)], 0, 1)
            },
        ),
        (
            "fluid: chat crowds then 12k-token prompts at 2.4 req/s, mean reading, floor 3",
            World {
                fluid: true,
                mean_itl: true,
                ..plain(vec![(true, 2.0, 1000, 120), (false, 2.4, 12000, 120)], 0, 3)
            },
        ),
    ]
}

/// Issue 45: the worlds above, each once per run.
#[test]
fn no_policy_beats_oracle_a_in_the_worlds_random_runs_found() {
    let broken: Vec<String> = found_worlds()
        .iter()
        .filter_map(|(name, w)| beaten(name, &frontier_of_world(w)))
        .collect();
    assert!(broken.is_empty(), "{broken:#?}");
}

/// `--suggest` and the frontier's `mds --suggest` row are one answer: the fragment
/// `--suggest` pastes, merged into the scaler and run as given, costs exactly the row's
/// GPU-hours and reaches exactly its attainment.
#[test]
fn the_pasted_suggestion_reproduces_the_frontiers_suggest_row() {
    let (scaler, target) = common::manifests(CHAT);
    let trace = Trace::parse_azure_csv(CONV)
        .unwrap()
        .window(0.0, Some(900.0))
        .unwrap()
        .rate_multiplied(2.0, 1)
        .unwrap();
    let options = RunOptions::new(profile(DEFAULT_PROFILE).unwrap());
    let case = Case {
        scaler: &scaler,
        target: &target,
        trace: Arc::new(trace),
        load: "test",
        options: &options,
    };
    let search = Search {
        tiers: vec![0.9, 0.95],
        grid: Grid::default(),
        refinements: 1,
        threads: 2,
    };
    let f = frontier::frontier(&case, &[Policy::Tuned], &search, &|_| {}).unwrap();
    let found = mds_simulate::suggest::suggest(&case, options.goal, &[], 2).unwrap();
    let chosen = found.chosen.as_ref().expect("a setting meets the goal");
    let row = &f.policies[0];
    // The row's answer: its tuned trial, else its trial at the chosen factor.
    let answer = row
        .trials
        .iter()
        .find(|t| t.knob.contains("tuned:"))
        .or_else(|| row.trials.iter().find(|t| t.factor == chosen.factor))
        .expect("the row holds the suggestion");
    // The fragment, pasted into the scaler's spec.
    let fragment: serde_json::Value =
        serde_yaml_ng::from_str(found.fragment.as_deref().unwrap()).unwrap();
    let mut doc = serde_json::to_value(&scaler).unwrap();
    for (block, value) in fragment.as_object().unwrap() {
        doc["spec"][block] = value.clone();
    }
    let pasted: mds_api::ModelDeploymentScaler = serde_json::from_value(doc).unwrap();
    let report = mds_simulate::run::run(
        pasted,
        target.clone(),
        case.trace.clone(),
        "test",
        &options,
        &mut |_| {},
    )
    .unwrap();
    let totals = &report.summary.totals;
    assert_eq!(
        (totals.gpu_hours, totals.attainment),
        (answer.gpu_hours, answer.attainment),
        "the pasted fragment runs as the row says ({})",
        answer.knob
    );
    let said = found
        .tuned
        .as_ref()
        .map_or((chosen.gpu_hours, chosen.attainment), |t| {
            (t.gpu_hours, Some(t.attainment))
        });
    assert_eq!(
        said,
        (answer.gpu_hours, answer.attainment),
        "and as --suggest says"
    );
}
