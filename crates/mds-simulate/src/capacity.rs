//! What one replica of the profile serves within the SLO: the engine's *knee* on a trace's own
//! request mix, found by the simulator on one pinned replica. The oracles are sized from it
//! (module `oracle`), never from a scaler's configured target: a bound that a one-replica
//! peer beats by 3× is not a bound.
//!
//! A trial offers one engine a steady Poisson stream at `λ` requests per second of a sample
//! of the trace's requests (every k-th, so the whole trace's mix is in it, in its order), and
//! grades each as the run does (module `slo`). Requests unattainable at any scale are offered
//! (they take their share of the engine) but not graded: the knee is about what scaling can
//! change. Nor are those that meet their TTFT objective only with a prefix cache the trace's
//! unbounded one would hold (one replica's cache holds a few hundred thousand tokens, and a
//! Mooncake prefix recurs about two hundred requests later). Trials at loads from all but idle
//! to where attainment collapses make the replica's attainment curve; the knee at a goal is the highest load whose attainment meets
//! it, as the tokens per second a role of its kind counts (`oracle::demand_of`). The oracles
//! read the whole curve (module `oracle`). A run on the fluid engine reads that engine's
//! curves instead (module `fluid`).
//!
//! - A server replica serves whole requests.
//! - A prefill replica computes prompts and their first token; it is graded on TTFT.
//! - A decode replica generates outputs from a transferred prompt (requests of one output
//!   token never reach it); it is graded on ITL and on its own wait for the first token.
//! - Any other kind (encode) serves nothing here: it has no knee.

use mds_api::target::RoleKind;
use mds_sim::engine::request::{FinishedRequest, Outcome, RequestEngine, RequestProfile};
use mds_sim::load::{Trace, TraceRequest};
use mds_sim::rng::Rng;
use serde::Serialize;

use crate::oracle::demand_of;
use crate::report::p95_within;
use crate::slo::{Grader, IdleReplica, ItlReading};

pub(crate) mod fluid;

/// Requests a trial offers (fewer when the trace has fewer).
const SAMPLE: usize = 1500;

/// One role kind's knee.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Knee {
    /// The attainment goal it was found at, 0..1.
    pub goal: f64,
    /// The steady demand one replica serves at the goal, as the role's kind counts tokens.
    pub tokens_per_second: f64,
    pub requests_per_second: f64,
    /// The attainment measured there.
    pub attainment: f64,
}

/// Runs of consecutive requests in a sample, so its mix follows the trace's hours.
const RUNS: usize = 10;
/// A trace with prefixes offers its whole self up to this many requests: requests that share
/// a prefix arrive hundreds of requests apart (Mooncake's median is about 200), and a
/// replica's prefix cache must see them as it would in the trace.
const SAMPLE_WITH_PREFIXES: usize = 4000;

/// The trace's sample a trial of `kind` offers: at most [`SAMPLE`] requests in [`RUNS`] runs
/// of consecutive ones spread evenly over the trace, or one run of up to
/// [`SAMPLE_WITH_PREFIXES`] when the trace has prefixes (for a decode replica, of the
/// requests that reach decode).
fn sample<'t>(
    trace: &'t Trace,
    kind: &RoleKind,
    subset: Option<&[usize]>,
) -> Vec<(usize, &'t TraceRequest)> {
    let all: Vec<(usize, &TraceRequest)> = match subset {
        Some(ids) => ids
            .iter()
            .filter_map(|&i| Some((i, trace.requests.get(i)?)))
            .collect(),
        None => trace.requests.iter().enumerate().collect(),
    };
    let reaching: Vec<(usize, &TraceRequest)> = all
        .into_iter()
        .filter(|(_, r)| *kind != RoleKind::Decode || r.output_tokens > 1)
        .collect();
    let prefixes = reaching.iter().any(|(_, r)| r.block_hashes.is_some());
    let (size, runs) = if prefixes {
        (SAMPLE_WITH_PREFIXES, 1)
    } else {
        (SAMPLE, RUNS)
    };
    if reaching.len() <= size {
        return reaching;
    }
    let run = size / runs;
    let stride = reaching.len() / runs;
    (0..runs)
        .flat_map(|i| reaching[i * stride..i * stride + run].iter().copied())
        .collect()
}

/// A role kind a replica of which serves requests here.
fn serves(kind: &RoleKind) -> bool {
    matches!(
        kind,
        RoleKind::Server | RoleKind::Prefill | RoleKind::Decode | RoleKind::Unknown(_)
    )
}

/// One trial: attainment among the attainable sampled requests at `rate` requests/s per
/// replica, on `replicas` replicas behind a least-outstanding router.
fn trial(
    sampled: &[(usize, &TraceRequest)],
    kind: &RoleKind,
    profile: &RequestProfile,
    grader: &Grader,
    rate: f64,
    replicas: u32,
    seed: u64,
) -> f64 {
    let Ok(engine) = RequestEngine::new(*profile) else {
        return 0.0;
    };
    let mut engines = vec![engine; replicas.max(1) as usize];
    for e in &mut engines {
        e.itl_objective_seconds = grader.slo.itl_seconds;
    }
    let total_rate = rate * engines.len() as f64;
    let mut rng = Rng::new(seed);
    let mut at = 0.0;
    for (id, r) in sampled {
        at += rng.exponential(total_rate);
        let pick = least_outstanding(&mut engines, at);
        let engine = &mut engines[pick];
        let (prompt, output) = (u64::from(r.prompt_tokens), u64::from(r.output_tokens));
        match kind {
            RoleKind::Prefill => engine.submit(*id as u64, at, prompt, 1, hashes(r)),
            RoleKind::Decode => engine.submit_prefilled(*id as u64, at, prompt, output),
            _ => engine.submit(*id as u64, at, prompt, output, hashes(r)),
        }
    }
    // Every request ends: each engine runs until idle (an overloaded one drains its queue).
    let mut finished: Vec<FinishedRequest> = Vec::new();
    for engine in &mut engines {
        let mut until = at;
        while !engine.is_idle() {
            until += 3600.0;
            engine.advance_to(until);
        }
        finished.extend(engine.take_finished());
    }
    let idle = IdleReplica {
        profile: *profile,
        handoff_seconds_per_token: None,
    };
    let (mut graded, mut attained) = (0_u32, 0_u32);
    for f in &finished {
        let cold_miss = usize::try_from(f.id)
            .ok()
            .and_then(|i| trace_request(sampled, i))
            .is_some_and(|r| idle.cold_ttft_seconds(r) > grader.ttft_objective(f.id));
        if grader.unattainable(f.id) || cold_miss {
            continue;
        }
        graded += 1;
        if f.outcome == Outcome::Finished && attains(f, kind, grader) {
            attained += 1;
        }
    }
    if graded == 0 {
        return 0.0;
    }
    f64::from(attained) / f64::from(graded)
}

/// The engine a least-outstanding router sends a request arriving at `at` to: the fewest
/// requests running and queued at that moment, the first on ties.
fn least_outstanding(engines: &mut [RequestEngine], at: f64) -> usize {
    let mut pick = 0;
    let mut fewest = usize::MAX;
    for (i, e) in engines.iter_mut().enumerate() {
        e.advance_to(at);
        if e.outstanding() < fewest {
            fewest = e.outstanding();
            pick = i;
        }
    }
    pick
}

/// The sampled request of trace index `id`.
fn trace_request<'t>(sampled: &[(usize, &'t TraceRequest)], id: usize) -> Option<&'t TraceRequest> {
    sampled
        .binary_search_by_key(&id, |(i, _)| *i)
        .ok()
        .map(|i| sampled[i].1)
}

/// The prompt's block hashes, so the replica's prefix cache hits as in the trace.
fn hashes(r: &TraceRequest) -> Option<&[u64]> {
    r.block_hashes.as_deref()
}

fn attains(f: &FinishedRequest, kind: &RoleKind, grader: &Grader) -> bool {
    let slo = grader.slo;
    let ttft = f
        .ttft_seconds
        .is_none_or(|t| t <= grader.ttft_objective(f.id));
    let itl = match slo.itl_reading {
        ItlReading::P95 => p95_within(f.gaps, f.slow_gaps),
        ItlReading::Mean => f.tpot_seconds.is_none_or(|t| t <= slo.itl_seconds),
    };
    match kind {
        RoleKind::Prefill => ttft,
        // A decode replica's wait for its first step is part of the user's TTFT too (from the
        // hand-off here: the prefill's share is not in it, so this is lenient).
        _ => ttft && itl,
    }
}

/// Replicas' attainment against their steady load per replica, measured on `replicas`
/// replicas behind a least-outstanding router: (tokens/s per replica, attainment among
/// attainable requests), loads ascending, attainment made non-increasing (a heavier load
/// never attains more; the measured noise is smoothed by a running minimum).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Curve {
    pub replicas: u32,
    pub points: Vec<(f64, f64)>,
    /// Tokens per request of the kind (load in tokens/s over this is requests/s).
    pub tokens_per_request: f64,
}

impl Curve {
    /// Attainment at `load` tokens/s per replica: interpolated between points, the first
    /// point's below them, the last's above.
    pub fn at(&self, load: f64) -> f64 {
        let Some(&(l0, a0)) = self.points.first() else {
            return 0.0;
        };
        if load <= l0 {
            return a0;
        }
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if load <= x1 {
                return y0 + (y1 - y0) * (load - x0) / (x1 - x0).max(1e-12);
            }
        }
        self.points.last().map_or(0.0, |p| p.1)
    }

    /// The load below which attainment is at its best: adding replicas beyond it gains
    /// nothing.
    pub fn saturation(&self) -> f64 {
        let best = self.points.first().map_or(0.0, |p| p.1);
        self.points
            .iter()
            .take_while(|p| p.1 >= best - 1e-12)
            .last()
            .map_or(0.0, |p| p.0)
    }

    /// The highest load that attains `goal` (`None`: not even the lightest).
    pub fn knee(&self, goal: f64) -> Option<Knee> {
        let first = *self.points.first()?;
        if first.1 < goal {
            return None;
        }
        let mut load = first.0;
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if y1 >= goal {
                load = x1;
                continue;
            }
            // Crosses between the two.
            load = x0 + (x1 - x0) * (y0 - goal) / (y0 - y1).max(1e-12);
            break;
        }
        Some(Knee {
            goal,
            tokens_per_second: load,
            requests_per_second: load / self.tokens_per_request.max(1e-9),
            attainment: self.at(load),
        })
    }
}

/// A role kind's curves, one per count of replicas measured, counts ascending. Replicas
/// behind one router pool their queues, so more of them serve a higher load each at the same
/// attainment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Curves {
    pub by_count: Vec<Curve>,
}

/// The counts of replicas whose curves are measured (those up to a role's maximum).
pub const COUNTS: [u32; 5] = [1, 2, 4, 8, 16];

impl Curves {
    /// Attainment of `replicas` replicas at `load` tokens/s each: read on the curve of the
    /// smallest count measured at or above it (pooling only helps, so this never
    /// understates), the largest beyond them.
    pub fn at(&self, replicas: i32, load: f64) -> f64 {
        let n = replicas.max(1) as u32;
        self.by_count
            .iter()
            .find(|c| c.replicas >= n)
            .or(self.by_count.last())
            .map_or(0.0, |c| c.at(load))
    }

    /// One replica's curve.
    pub fn one(&self) -> Option<&Curve> {
        self.by_count.first().filter(|c| c.replicas == 1)
    }

    /// The lowest load per replica at which attainment is at its best, over every count.
    pub fn saturation(&self) -> f64 {
        self.by_count
            .iter()
            .map(Curve::saturation)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The mean tokens of `requests` as a role of `kind` counts them (`oracle::demand_of`).
fn tokens_per_request<'t>(
    requests: impl Iterator<Item = &'t TraceRequest>,
    kind: &RoleKind,
) -> f64 {
    let (mut sum, mut count) = (0.0, 0_u32);
    for r in requests {
        let missed = f64::from(r.prompt_tokens.saturating_sub(r.prefix_hit_tokens));
        sum += demand_of(kind, missed, f64::from(r.output_tokens));
        count += 1;
    }
    sum / f64::from(count.max(1))
}

/// Points of the curve: loads from the lightest tried up past where attainment collapses.
const CURVE_POINTS: usize = 24;

/// The attainment curve of `replicas` replicas of `kind` on `trace`'s mix (of the requests
/// `subset` indexes, when given: one mix group, module `mix`), graded as `grader` grades the
/// trace (`None`: the kind serves nothing here).
pub fn curve(
    trace: &Trace,
    subset: Option<&[usize]>,
    kind: &RoleKind,
    profile: &RequestProfile,
    grader: &Grader,
    replicas: u32,
    seed: u64,
) -> Option<Curve> {
    if !serves(kind) {
        return None;
    }
    let sampled = sample(trace, kind, subset);
    let served = sampled
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| !IdleReplica::refused_by(profile, r));
    let tokens = tokens_per_request(served, kind);
    let attainment = |rate: f64| trial(&sampled, kind, profile, grader, rate, replicas, seed);
    Some(curve_of(replicas, tokens, attainment))
}

/// The curve of `replicas` replicas whose attainment at `rate` requests/s each is
/// `attainment(rate)`, their requests of `tokens` tokens each as the kind counts them.
fn curve_of(replicas: u32, tokens: f64, attainment: impl Fn(f64) -> f64) -> Curve {
    // The rate where attainment collapses, doubling from a light one: below 2 %, or settled
    // on a floor under half (the requests the first batch admits at once still attain, at any
    // rate). `onset` is the last rate still at the lightest one's attainment.
    let mut high = 0.05;
    let mut previous = f64::INFINITY;
    let (mut best, mut onset) = (None, high);
    for _ in 0..24 {
        let a = attainment(high);
        let lightest = *best.get_or_insert(a);
        if a >= lightest - 0.005 {
            onset = high;
        }
        if a < 0.02 || (a < 0.5 && (previous - a).abs() < 0.005) {
            break;
        }
        previous = a;
        high *= 2.0;
    }
    // Geometric from where a replica is all but idle, 1/64 of it, up to it. A few hundred
    // requests on several replicas stay above half long after the onset (once the sample
    // arrives as one burst its attainment only wanders), so 1/64 of it may already read far
    // under the lightest load's attainment: then the same steps go on down to a quarter of
    // the onset, so the loads a bin has stay on the curve.
    let step = 64f64.powf(1.0 / (CURVE_POINTS - 1) as f64);
    let low = high / 64.0;
    let mut measured: Vec<(f64, f64)> = (0..CURVE_POINTS)
        .map(|i| {
            let rate = low * step.powi(i as i32);
            (rate, attainment(rate))
        })
        .collect();
    if let Some(lightest) = best
        && measured[0].1 < lightest - 0.005
    {
        let mut lighter = Vec::new();
        let mut rate = low;
        while rate > onset / 4.0 && lighter.len() < 48 {
            rate /= step;
            let a = attainment(rate);
            lighter.push((rate, a));
            if a >= lightest - 0.005 {
                break;
            }
        }
        lighter.reverse();
        lighter.extend(measured);
        measured = lighter;
    }
    let mut floor = f64::INFINITY;
    let points = measured
        .into_iter()
        .map(|(rate, a)| {
            floor = floor.min(a);
            (rate * tokens, floor)
        })
        .collect();
    Curve {
        replicas,
        points,
        tokens_per_request: tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::Slo;

    fn trace(prompt: u32, output: u32, n: usize) -> Trace {
        Trace {
            requests: (0..n)
                .map(|i| TraceRequest {
                    at_seconds: i as f64,
                    prompt_tokens: prompt,
                    output_tokens: output,
                    prefix_hit_tokens: 0,
                    block_hashes: None,
                })
                .collect(),
        }
    }

    fn grader(trace: &Trace, slo: Slo) -> Grader {
        let idle = IdleReplica {
            profile: RequestProfile::llama3_8b_h100_vllm(),
            handoff_seconds_per_token: None,
        };
        Grader::new(slo, Some(trace), Some(&idle))
    }

    #[test]
    fn a_curve_falls_with_load_and_its_knee_is_where_it_crosses_the_goal() {
        let profile = RequestProfile::llama3_8b_h100_vllm();
        let t = trace(1000, 200, 2000);
        let g = grader(&t, Slo::default());
        let c = curve(&t, None, &RoleKind::Server, &profile, &g, 1, 1).unwrap();
        assert_eq!(c.points.len(), CURVE_POINTS);
        assert!(
            c.points
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1)
        );
        assert!(
            c.points[0].1 > 0.99,
            "an idle replica attains: {:?}",
            c.points[0]
        );
        assert!(c.points.last().unwrap().1 < 0.05, "{:?}", c.points.last());
        let k = c.knee(0.95).unwrap();
        // An 8B replica serves a few thousand tokens/s of these within 500 ms and a p95 gap of
        // 50 ms: each 1,000-token prefill makes the decode step it rides about 50 ms, a stall,
        // so a request tolerates only a few arrivals during its life.
        assert!((1500.0..10_000.0).contains(&k.tokens_per_second), "{k:?}");
        assert!((k.tokens_per_second - k.requests_per_second * 1200.0).abs() < 1e-6);
        // A measured trial just above the knee misses the goal, one well below meets it.
        let sampled = sample(&t, &RoleKind::Server, None);
        let rate = k.requests_per_second;
        assert!(trial(&sampled, &RoleKind::Server, &profile, &g, rate * 1.3, 1, 1) < 0.95);
        assert!(trial(&sampled, &RoleKind::Server, &profile, &g, rate * 0.7, 1, 1) >= 0.95);
        // Four replicas behind one router pool their queues: each serves more at the goal.
        let four = curve(&t, None, &RoleKind::Server, &profile, &g, 4, 1).unwrap();
        assert!(four.knee(0.95).unwrap().tokens_per_second > k.tokens_per_second);
        let both = Curves {
            by_count: vec![c.clone(), four.clone()],
        };
        let load = k.tokens_per_second * 1.1;
        assert_eq!(
            (both.at(1, load), both.at(3, load), both.at(9, load)),
            (c.at(load), four.at(load), four.at(load))
        );
        // A lower goal allows more; a tighter SLO less.
        assert!(c.knee(0.5).unwrap().tokens_per_second > k.tokens_per_second);
        let tight = grader(
            &t,
            Slo {
                ttft_seconds: 0.1,
                ..Slo::default()
            },
        );
        let ct = curve(&t, None, &RoleKind::Server, &profile, &tight, 1, 1).unwrap();
        assert!(ct.knee(0.95).unwrap().tokens_per_second < k.tokens_per_second);
        assert!(c.knee(1.01).is_none());
    }

    #[test]
    fn reading_a_curve_between_and_beyond_its_points() {
        let c = Curve {
            replicas: 1,
            points: vec![(100.0, 1.0), (200.0, 1.0), (300.0, 0.9), (400.0, 0.5)],
            tokens_per_request: 10.0,
        };
        assert_eq!(
            (c.at(0.0), c.at(250.0), c.at(350.0), c.at(1e9)),
            (1.0, 0.95, 0.7, 0.5)
        );
        assert_eq!(c.saturation(), 200.0);
        let k = c.knee(0.8).unwrap();
        assert!((k.tokens_per_second - 325.0).abs() < 1e-9, "{k:?}");
        assert!((k.requests_per_second - 32.5).abs() < 1e-9);
        assert_eq!(c.knee(0.4).unwrap().tokens_per_second, 400.0);
    }

    #[test]
    fn prefill_and_decode_replicas_have_curves_of_their_own_and_encode_none() {
        let profile = RequestProfile::llama3_8b_h100_vllm();
        let t = trace(2000, 300, 1500);
        let g = grader(&t, Slo::default());
        let p = curve(&t, None, &RoleKind::Prefill, &profile, &g, 1, 1).unwrap();
        let d = curve(&t, None, &RoleKind::Decode, &profile, &g, 1, 1).unwrap();
        // A prefill replica's tokens are prompts; a decode replica's, outputs.
        assert_eq!(
            (p.tokens_per_request, d.tokens_per_request),
            (2000.0, 300.0)
        );
        assert!(p.knee(0.95).is_some() && d.knee(0.95).is_some());
        assert!(curve(&t, None, &RoleKind::Encode, &profile, &g, 1, 1).is_none());
        // An ITL objective below one idle decode step is met by no load.
        let impossible = grader(
            &t,
            Slo {
                itl_seconds: 0.001,
                ..Slo::default()
            },
        );
        let none = curve(&t, None, &RoleKind::Decode, &profile, &impossible, 1, 1).unwrap();
        assert!(none.knee(0.95).is_none());
    }

    /// A few hundred short requests on eight replicas arrive as one burst well before
    /// attainment falls under half; the curve must still reach down to light loads, or a bin's
    /// load reads the burst's attainment (a bound that said nothing reaches 90 % where two
    /// replicas held 100 %, issue 45).
    #[test]
    fn a_small_mix_on_many_replicas_still_has_its_light_loads_on_the_curve() {
        let profile = RequestProfile::llama3_8b_h100_vllm();
        let t = trace(200, 120, 300);
        let g = grader(&t, Slo::default());
        for replicas in [2, 4, 8] {
            let c = curve(&t, None, &RoleKind::Server, &profile, &g, replicas, 1).unwrap();
            // The lightest load is still at the idle attainment (the burst's reads under half).
            let (load, attained) = c.points[0];
            assert!(
                attained > 0.99,
                "{replicas} replicas start at {:.1} req/s each attaining {attained}",
                load / c.tokens_per_request
            );
        }
    }

    /// The fluid engine's curve: all but idle attains and it falls with load, on one
    /// replica and on four.
    #[test]
    fn the_fluid_curve_falls_with_load() {
        let profile = mds_sim::engine::EngineProfile::default();
        let t = trace(1000, 200, 2000);
        let g = grader(&t, Slo::default());
        for n in [1, 4] {
            let c = fluid::curve(&t, None, &RoleKind::Server, &profile, &g, n, 1).unwrap();
            assert!(c.points[0].1 > 0.99, "{n}: {:?}", c.points[0]);
            assert!(
                c.points.last().unwrap().1 < 0.5,
                "{n}: {:?}",
                c.points.last()
            );
            assert!(c.points.windows(2).all(|w| w[0].1 >= w[1].1));
        }
        assert!(fluid::curve(&t, None, &RoleKind::Encode, &profile, &g, 1, 1).is_none());
    }
}
