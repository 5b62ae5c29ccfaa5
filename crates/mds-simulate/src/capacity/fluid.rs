//! The fluid engine's attainment curve, so a fluid run is held to bounds read on the engine it
//! runs (the request engine's curves grade the same load differently).
//!
//! The fluid world feeds a role the trace's requests as ten-second bins of load and splits
//! each bin evenly over its routed replicas, so a trial does the same: the sample's requests
//! arrive as a Poisson stream at the replicas' total rate, are binned as the world bins them,
//! and one engine is offered its share of each bin, each second's step graded as the run
//! grades it (module `slo::fluid`), weighted by the requests it served, until it drains. The
//! bins' spread matters: a request's p95 gap misses as soon as one of its gaps carries a
//! prompt chunk, about `exp(-gaps × chunks per step)`, which is convex in the load, so a load
//! that varies from bin to bin attains more than its mean would; and it varies less on more
//! replicas. A prefill replica is graded on TTFT; a server or decode replica on the whole SLO.

use jiff::Timestamp;
use mds_api::target::RoleKind;
use mds_sim::engine::{EngineFlavor, EngineProfile, EngineState, WorkKind};
use mds_sim::load::{Arrivals, Trace, TraceRequest};
use mds_sim::rng::Rng;

use super::{Curve, curve_of, sample, serves, tokens_per_request};
use crate::slo::{Grader, LOAD_BIN_SECONDS};

/// Seconds an engine may take to drain after the last bin.
const DRAIN_SECONDS: u32 = 3600;

/// The fluid curve of `replicas` replicas of `kind` on `trace`'s mix (of `subset`, when
/// given), graded as `grader` grades a fluid run (`None`: the kind serves nothing here).
pub fn curve(
    trace: &Trace,
    subset: Option<&[usize]>,
    kind: &RoleKind,
    profile: &EngineProfile,
    grader: &Grader,
    replicas: u32,
    seed: u64,
) -> Option<Curve> {
    if !serves(kind) {
        return None;
    }
    let sampled = sample(trace, kind, subset);
    let tokens = tokens_per_request(sampled.iter().map(|(_, r)| *r), kind);
    let attainment = |rate: f64| trial(&sampled, kind, profile, grader, rate, replicas, seed);
    Some(curve_of(replicas, tokens, attainment))
}

/// The share of the sample served within the SLO at `rate` requests/s per replica on
/// `replicas` replicas.
fn trial(
    sampled: &[(usize, &TraceRequest)],
    kind: &RoleKind,
    profile: &EngineProfile,
    grader: &Grader,
    rate: f64,
    replicas: u32,
    seed: u64,
) -> f64 {
    let share = 1.0 / f64::from(replicas.max(1));
    let mut rng = Rng::new(seed);
    let mut bins: Vec<Arrivals> = Vec::new();
    let mut at = 0.0;
    for (_, r) in sampled {
        at += rng.exponential(rate / share);
        let index = (at / LOAD_BIN_SECONDS) as usize;
        if index >= bins.len() {
            bins.resize(index + 1, Arrivals::default());
        }
        bins[index].add(&Arrivals {
            requests: 1.0,
            prompt_tokens: f64::from(r.prompt_tokens),
            output_tokens: f64::from(r.output_tokens),
            prefix_hit_tokens: f64::from(r.prefix_hit_tokens.min(r.prompt_tokens)),
        });
    }
    let work = WorkKind::of(kind);
    let mut engine = EngineState::new(EngineFlavor::Vllm011, work, Timestamp::UNIX_EPOCH);
    let (mut served, mut attained) = (0.0, 0.0);
    let mut step = |engine: &mut EngineState, offered: &Arrivals| {
        engine.advance(profile, offered, 1.0);
        let last = &engine.last;
        let shares = grader.slo.fluid_shares(last, &grader.prompts);
        let within = match work {
            WorkKind::Prefill => shares.ttft,
            _ => shares.attained(grader.slo.itl_reading),
        };
        served += last.served_requests_per_second;
        attained += last.served_requests_per_second * within;
    };
    for bin in &bins {
        let offered = bin.scaled(share / LOAD_BIN_SECONDS);
        for _ in 0..LOAD_BIN_SECONDS as u32 {
            step(&mut engine, &offered);
        }
    }
    for _ in 0..DRAIN_SECONDS {
        if engine.is_idle() {
            break;
        }
        step(&mut engine, &Arrivals::default());
    }
    if served > 0.0 { attained / served } else { 0.0 }
}
