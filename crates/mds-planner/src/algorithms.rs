//! The three algorithms (spec, *Algorithms*; D11 to D14): from a role's observation and
//! memory to its raw recommendation, the reason, and whether the algorithm holds scale-down.

use jiff::Timestamp;
use mds_api::quantity::Decimal;
use mds_api::spec::ProportionalMetric;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_signals::RoleObservation;

use crate::policy::{PredictivePolicy, TokenPolicy};
use crate::reason::Reason;
use crate::state::{GUARD_GROWTH_BREACH, GuardMemory, Kalman, Noise, RoleState, Tried};

/// An algorithm's answer for one role.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The raw recommendation (`rawRecommendedReplicas`).
    pub raw: i32,
    pub reason: Reason,
    /// The algorithm holds scale-down (panic, missing signals, latency).
    pub holds_scale_down: bool,
    /// What the algorithm saw, with the numbers.
    pub note: String,
    /// Predictive's forecast this pass, for reports of its accuracy.
    pub forecast: Option<Forecast>,
    /// The load the recommendation was sized on, when one was measured.
    pub load: Option<Load>,
}

/// The load an algorithm sized a role on, beside what the role's ready replicas serve at
/// their per-replica target: the numbers a decision record shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// What was measured: a Proportional metric's name (`QueueDepth`, ...) or
    /// `TokensPerSecond` for the token algorithms.
    pub metric: &'static str,
    /// The measured load (for Predictive, the larger of the stable window and the forecast).
    pub demand: f64,
    /// Ready replicas times the per-replica target, in the same unit.
    pub capacity: f64,
}

/// The unit the token algorithms size on.
pub const TOKENS_PER_SECOND: &str = "TokensPerSecond";

/// A forecast and what it was made from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Forecast {
    /// The demand the filter took this pass, tokens/s.
    pub demand: f64,
    /// The demand it forecasts `horizon_seconds` ahead, tokens/s.
    pub value: f64,
    pub horizon_seconds: f64,
}

impl Recommendation {
    fn hold(current: i32, reason: Reason, note: impl Into<String>) -> Recommendation {
        Recommendation {
            raw: current,
            reason,
            holds_scale_down: true,
            note: note.into(),
            forecast: None,
            load: None,
        }
    }
}

/// What an algorithm knows about one role this pass.
#[derive(Clone, Copy, Debug)]
pub struct RoleView<'a> {
    pub kind: &'a RoleKind,
    /// Desired count on the target now.
    pub current: i32,
    pub observation: Option<&'a RoleObservation>,
    /// Ordinals our last growth commit added to this role are not ready yet and that commit
    /// is younger than `pendingTimeoutSeconds` (D13).
    pub growth_in_flight: bool,
    /// The latency read now predates our last growth (see [`crate::RoleInput`]).
    pub readings_predate_growth: bool,
    /// When the observation was sampled: the pass's time, or earlier when the pass reuses
    /// the last sampling. Demand and the predictor record a sampling once, at this time.
    pub observed_at: Timestamp,
}

/// "At least one more replica" (D13, D14): current + 1, except while our own growth of this
/// role is still starting, so a cold start does not compound one more replica each pass. A
/// replica that is not ready for any other reason does not suppress it.
fn one_more_replica(role: &RoleView) -> i32 {
    if role.growth_in_flight {
        role.current
    } else {
        role.current.saturating_add(1)
    }
}

fn ceil_replicas(demand: f64, per_replica: f64) -> i32 {
    let n = (demand / per_replica).ceil();
    if n.is_finite() {
        n.clamp(1.0, 1e6) as i32
    } else {
        1
    }
}

/// `max(1, ceil(total / target))`, exactly (D11, D26).
fn proportional_count(total: Decimal, target: Decimal) -> i32 {
    let n = total.nanos().div_euclid(target.nanos())
        + i128::from(total.nanos().rem_euclid(target.nanos()) != 0);
    n.clamp(1, 1_000_000) as i32
}

/// `|total / (ready * target) - 1| <= tolerance`, compared exactly: the deadband is inclusive at
/// both edges like the HPA's (D11, D26).
fn within_tolerance(total: Decimal, ready: u32, target: Decimal, tolerance: Decimal) -> bool {
    // |total - ready * target| * 1e9 <= tolerance * ready * target, all in nano units.
    let expected = target.nanos().checked_mul(ready as i128);
    let exact = expected.and_then(|expected| {
        let distance = (total.nanos() - expected)
            .abs()
            .checked_mul(1_000_000_000)?;
        let band = tolerance.nanos().checked_mul(expected)?;
        Some(distance <= band)
    });
    // Only quantities far beyond any real load overflow i128; floats decide those.
    exact.unwrap_or_else(|| {
        let load = total.to_f64() / ready as f64;
        (load / target.to_f64() - 1.0).abs() <= tolerance.to_f64()
    })
}

/// Proportional (D11): load per ready replica against the target, with a deadband.
pub fn proportional(
    metric: ProportionalMetric,
    tolerance: Decimal,
    target: Decimal,
    role: &RoleView,
) -> Recommendation {
    let current = role.current;
    let observation = role.observation;
    if observation.is_some_and(|o| o.ready_replicas == 0) {
        return Recommendation::hold(
            current,
            Reason::NoReadyReplicas,
            "no ready replica to measure load on",
        );
    }
    let Some(o) = observation
        .filter(|o| !matches!(o.signal_state, SignalState::Missing | SignalState::Stale))
    else {
        return Recommendation::hold(current, Reason::WaitingForMetrics, "no usable observation");
    };
    let add = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
    let total = match metric {
        ProportionalMetric::QueueDepth => add(o.running_requests, o.waiting_requests),
        ProportionalMetric::RunningRequests => o.running_requests,
        ProportionalMetric::WaitingRequests => o.waiting_requests,
        ProportionalMetric::PromptTokensPerSecond => o.prompt_tokens_per_second,
        ProportionalMetric::GenerationTokensPerSecond => o.generation_tokens_per_second,
        ProportionalMetric::TotalTokensPerSecond => {
            add(o.prompt_tokens_per_second, o.generation_tokens_per_second)
        }
    };
    // A non-finite or negative total is garbage, not a load of zero or infinity. Measured
    // values are decimals on the engine's page: nano precision recovers them from the float
    // sums (0.1 + 0.2 is 0.3 again), so the comparisons below are exact.
    let Some(total) = total
        .filter(|t| t.is_finite() && *t >= 0.0)
        .and_then(|t| Decimal::from_f64_rounded(t, 9))
    else {
        return Recommendation::hold(
            current,
            Reason::WaitingForMetrics,
            format!("{metric:?} is missing or not a usable number"),
        );
    };
    let load = Some(Load {
        metric: metric.as_str(),
        demand: total.to_f64(),
        capacity: target.to_f64() * o.ready_replicas as f64,
    });
    let note = format!(
        "{metric:?} {total} over {} ready = {:.3} per replica, target {target}",
        o.ready_replicas,
        total.to_f64() / o.ready_replicas as f64
    );
    if within_tolerance(total, o.ready_replicas, target, tolerance) {
        return Recommendation {
            raw: current,
            reason: Reason::WithinTolerance,
            holds_scale_down: false,
            note: format!("{note}; within tolerance {tolerance}"),
            forecast: None,
            load,
        };
    }
    Recommendation {
        raw: proportional_count(total, target),
        reason: Reason::Proportional,
        holds_scale_down: false,
        note,
        forecast: None,
        load,
    }
}

/// The demand a role kind serves (D12), from one observation.
pub fn demand(kind: &RoleKind, o: &RoleObservation) -> Option<f64> {
    match kind {
        RoleKind::Prefill => o.prompt_tokens_per_second,
        RoleKind::Decode => o.generation_tokens_per_second,
        RoleKind::Server => Some(o.prompt_tokens_per_second? + o.generation_tokens_per_second?),
        RoleKind::Encode | RoleKind::Unknown(_) => None,
    }
}

/// Records the observation's demand sample, at the time it was sampled, when it is usable,
/// keeping only what the token windows can still read. A sampling recorded before (a reused
/// one) replaces itself: it is no second sample.
pub fn record_demand(role: &RoleView, token: &TokenPolicy, state: &mut RoleState) -> Option<f64> {
    let o = role
        .observation
        .filter(|o| matches!(o.signal_state, SignalState::Fresh | SignalState::Idle))?;
    // A NaN or infinite rate is no reading at all: it would read as one replica.
    let d = demand(role.kind, o).filter(|d| d.is_finite() && *d >= 0.0)?;
    state.record_demand(role.observed_at, d, token.longest_window_seconds());
    Some(d)
}

/// A p95 read from fewer observations than this in the interval is too thin to grow on (D32).
pub const MIN_LATENCY_OBSERVATIONS: f64 = 20.0;

/// The latency readings of a role against their targets (D13, D32).
struct Breach {
    /// The larger relative breach of the readings its kind checks that are present.
    any: Option<f64>,
    /// The same over the readings with enough observations to grow on.
    solid: Option<f64>,
    /// The reading behind `solid` and its p95.
    worst: Option<Tried>,
    /// The fewest observations behind a thin reading that breaches 1.2x, if any.
    thin: Option<f64>,
    /// A reading the kind checks is missing.
    missing: bool,
}

/// One p95 reading against its target.
#[derive(Clone, Copy)]
struct Reading {
    name: &'static str,
    milliseconds: f64,
    breach: f64,
    observations: Option<f64>,
}

/// Which of `[ttft, itl]` the latency guard checks for `kind` (D13): TTFT for Prefill, ITL
/// for Decode, both for Server, none for other kinds.
fn checked_readings(kind: &RoleKind) -> &'static [usize] {
    match kind {
        RoleKind::Prefill => &[0],
        RoleKind::Decode => &[1],
        RoleKind::Server => &[0, 1],
        _ => &[],
    }
}

/// Whether the latency guard checks (TTFT, ITL) for `kind` (D13).
pub fn guard_checks(kind: &RoleKind) -> (bool, bool) {
    let checked = checked_readings(kind);
    (checked.contains(&0), checked.contains(&1))
}

/// The largest p95, in milliseconds, among the readings the latency guard checks for `kind`
/// (D13). A reading of L milliseconds describes requests that arrived at least L before it
/// was taken, so it tells what replicas added since then did only once that much has passed
/// (D32: `mds_core` judges a growth by it).
pub fn guard_latency_milliseconds(kind: &RoleKind, o: &RoleObservation) -> Option<f64> {
    let readings = [o.ttft_milliseconds, o.itl_milliseconds];
    checked_readings(kind)
        .iter()
        .filter_map(|&i| readings[i])
        .filter(|ms| ms.is_finite())
        .reduce(f64::max)
}

/// The relative latency breach of a role (D13): the larger of the readings its kind checks
/// that are present; a count of observations that is unknown counts as enough (D32).
fn latency_breach(kind: &RoleKind, o: &RoleObservation, token: &TokenPolicy) -> Breach {
    let reading = |name, p95: Option<f64>, target: f64, n: Option<f64>| {
        p95.map(|ms| Reading {
            name,
            milliseconds: ms,
            breach: ms / target,
            observations: n,
        })
    };
    let ttft = reading(
        "TTFT",
        o.ttft_milliseconds,
        token.ttft_target_ms,
        o.ttft_observations,
    );
    let itl = reading(
        "ITL",
        o.itl_milliseconds,
        token.itl_target_ms,
        o.itl_observations,
    );
    let readings = [ttft, itl];
    let checked = checked_readings(kind).iter().map(|&i| readings[i]);
    let present = || checked.clone().flatten();
    // A count that is not a number is no count of enough observations.
    let thin = |r: &Reading| {
        r.observations
            .is_some_and(|n| n.is_nan() || n < MIN_LATENCY_OBSERVATIONS)
    };
    let worst_solid = present()
        .filter(|r| !thin(r))
        .reduce(|a, b| if b.breach > a.breach { b } else { a });
    Breach {
        any: present().map(|r| r.breach).reduce(f64::max),
        solid: worst_solid.map(|r| r.breach),
        worst: worst_solid.map(|r| Tried {
            ready: o.ready_replicas,
            reading: r.name,
            milliseconds: r.milliseconds,
        }),
        thin: present()
            .filter(|r| thin(r) && r.breach > GUARD_GROWTH_BREACH)
            .filter_map(|r| r.observations)
            .reduce(f64::min),
        missing: checked.clone().any(|r| r.is_none()),
    }
}

/// Holds `rec` at current for the latency guard (`LatencyGuardHold`) and notes why.
fn guard_hold(rec: &mut Recommendation, current: i32, note: String) {
    if rec.raw <= current {
        rec.raw = current;
        rec.reason = Reason::LatencyGuardHold;
    }
    rec.holds_scale_down = true;
    rec.note.push_str(&note);
}

/// The latency guard (D13, D32) on top of the throughput recommendation `rec`.
fn latency_guard(
    token: &TokenPolicy,
    role: &RoleView,
    o: &RoleObservation,
    guard: &mut GuardMemory,
    rec: &mut Recommendation,
) {
    let current = role.current;
    let b = latency_breach(role.kind, o, token);
    guard.asked = None;
    guard.asked_reading = None;
    // Judged on solid readings only, once our last growth is measured.
    let measured = !role.growth_in_flight && !role.readings_predate_growth;
    let stalled = guard.judge(b.solid, measured);
    if let Some(worst) = b
        .worst
        .filter(|_| b.solid.is_some_and(|s| s > GUARD_GROWTH_BREACH))
    {
        guard.record_tried(worst);
    }
    if let Some(solid) = b.solid.filter(|s| *s > GUARD_GROWTH_BREACH && !stalled) {
        // While our own growth is still starting or being measured, hold instead of adding
        // one more every pass (D13, D32).
        let one_more = one_more_replica(role);
        if one_more > rec.raw {
            rec.raw = one_more;
            rec.reason = Reason::LatencyGuardScaleUp;
            if one_more > current {
                guard.asked = Some(solid);
                guard.asked_reading = b.worst.map(|w| w.reading);
            }
        }
        rec.holds_scale_down = true;
        rec.note
            .push_str(&format!("; latency at {solid:.2}x target"));
    } else if let Some(breach) = b.any.filter(|b| *b > 1.0) {
        let why = match (stalled, b.thin) {
            (true, _) if b.solid.is_some_and(|s| s > GUARD_GROWTH_BREACH) => format!(
                "; latency at {breach:.2}x target holds scale-down: added capacity did not lower latency, the target is below what this engine reaches at any count ({}; stalled at {:.2}x; released below {GUARD_GROWTH_BREACH}x, on a rise of more than 25 % or a spec change)",
                guard
                    .describe_tried()
                    .unwrap_or_else(|| "no p95 kept".into()),
                guard.stalled_at.unwrap_or(breach)
            ),
            (_, Some(n)) if b.solid.is_none_or(|s| s <= GUARD_GROWTH_BREACH) => format!(
                "; latency at {breach:.2}x target holds scale-down: a p95 from {n} observations is too thin to grow on (fewer than {MIN_LATENCY_OBSERVATIONS})"
            ),
            _ => format!("; latency at {breach:.2}x target holds scale-down"),
        };
        if breach > GUARD_GROWTH_BREACH {
            guard_hold(rec, current, why);
        } else {
            if rec.raw < current {
                rec.raw = current;
                rec.reason = Reason::LatencyGuardHold;
            }
            rec.holds_scale_down = true;
            rec.note.push_str(&why);
        }
    }
    // An idle role has no latency to report; otherwise a missing reading holds scale-down.
    if b.missing && o.signal_state != SignalState::Idle {
        if rec.raw < current {
            rec.raw = current;
            rec.reason = Reason::LatencyGuardHold;
        }
        rec.holds_scale_down = true;
        rec.note.push_str("; latency missing holds scale-down");
    }
}

/// TokenThroughput: windows, panic and the latency guard. The demand sample of this pass must
/// already be recorded in `state`.
pub fn token_throughput(
    token: &TokenPolicy,
    role: &RoleView,
    state: &mut RoleState,
    now: Timestamp,
) -> Recommendation {
    let (kind, current) = (role.kind, role.current);
    let Some(capacity) = token.capacities.for_kind(kind) else {
        let note = match kind {
            // D31: the target gained a kind admission would have refused.
            RoleKind::Unknown(name) => format!(
                "the target gives this role kind {name:?}, which no token capacity describes (Prefill, Decode and Server have one); fix the target's kind or use Proportional"
            ),
            _ => format!("the spec gives no token capacity for {kind} roles"),
        };
        return Recommendation::hold(current, Reason::WaitingForMetrics, note);
    };
    let Some(o) = role.observation else {
        return Recommendation::hold(current, Reason::WaitingForMetrics, "no observation");
    };
    if o.ready_replicas == 0 {
        return Recommendation::hold(current, Reason::NoReadyReplicas, "no ready replica");
    }
    state.stable_demand = state.window_mean(now, token.stable_window_seconds);
    let window = |seconds: i64| state.window_mean(now, seconds);
    let mut rec = match state.stable_demand {
        None => Recommendation::hold(
            current,
            Reason::WaitingForMetrics,
            "no demand sample in the stable window yet",
        ),
        Some(stable) => {
            let stable_rec = ceil_replicas(stable, capacity);
            let mut rec = Recommendation {
                raw: stable_rec,
                reason: Reason::TokenThroughput,
                holds_scale_down: false,
                note: format!(
                    "stable {stable:.1} tok/s over {capacity} per replica = {stable_rec}"
                ),
                forecast: None,
                load: Some(Load {
                    metric: TOKENS_PER_SECOND,
                    demand: stable,
                    capacity: capacity * o.ready_replicas as f64,
                }),
            };
            if let Some(panic) = window(token.panic_window_seconds) {
                let panic_rec = ceil_replicas(panic, capacity);
                let ready_capacity = token.panic_threshold * o.ready_replicas as f64 * capacity;
                rec.note
                    .push_str(&format!("; panic window {panic:.1} tok/s = {panic_rec}"));
                if panic >= ready_capacity {
                    // Panic: the larger recommendation, never below the current count.
                    rec.raw = stable_rec.max(panic_rec).max(current);
                    rec.reason = Reason::Panic;
                    rec.holds_scale_down = true;
                    if let Some(load) = rec.load.as_mut() {
                        load.demand = load.demand.max(panic);
                    }
                    rec.note.push_str(&format!(
                        " reaches {} x {} ready x {capacity}: panic",
                        token.panic_threshold, o.ready_replicas
                    ));
                }
            }
            rec
        }
    };
    // The latency guard acts even without a throughput window.
    latency_guard(token, role, o, &mut state.guard, &mut rec);
    rec
}

/// Predictive (D14): the Kalman forecast, never below the TokenThroughput fallback.
pub fn predictive(
    policy: &PredictivePolicy,
    role: &RoleView,
    demand_now: Option<f64>,
    state: &mut RoleState,
    now: Timestamp,
) -> Recommendation {
    let (kind, current) = (role.kind, role.current);
    let mut fallback = token_throughput(&policy.fallback, role, state, now);
    let noise = Noise {
        q_level: policy.q_level,
        q_trend: policy.q_trend,
        measurement: policy.measurement_noise,
        horizon_seconds: policy.horizon_seconds,
    };
    // One update per sampling (D14): a reused sampling is not a new point toward minPoints.
    let observed_at = role.observed_at;
    if let Some(z) = demand_now {
        match &mut state.kalman {
            Some(k) if k.updated_at < observed_at => k.update(z, observed_at, noise),
            Some(_) => {}
            None => state.kalman = Some(Kalman::start(z, observed_at, noise)),
        }
    }
    let count = state.kalman.as_ref().map_or(0, |k| k.sample_count);
    if count < policy.min_points {
        // Until minPoints the role reports warm-up (spec) with the fallback's result, also
        // while the fallback has no reading yet; the note says what the fallback saw.
        fallback.note = format!(
            "{} ({}); predictor warming up ({count} of {} points)",
            fallback.note, fallback.reason, policy.min_points
        );
        fallback.reason = Reason::PredictorWarmingUp;
        return fallback;
    }
    let (Some(capacity), Some(k)) = (policy.capacities.for_kind(kind), state.kalman.as_ref())
    else {
        return fallback;
    };
    let forecast = k.forecast(policy.horizon_seconds);
    let forecast_rec = ceil_replicas(forecast, capacity);
    let mut rec = fallback.clone();
    rec.note = format!(
        "{}; forecast {forecast:.1} tok/s in {} s over {capacity} per replica = {forecast_rec}",
        fallback.note, policy.horizon_seconds
    );
    rec.forecast = demand_now.map(|demand| Forecast {
        demand,
        value: forecast,
        horizon_seconds: policy.horizon_seconds,
    });
    if forecast_rec > rec.raw {
        rec.raw = forecast_rec;
        rec.reason = Reason::Predictive;
        if let Some(load) = rec.load.as_mut() {
            load.demand = load.demand.max(forecast);
        }
        // The forecast asks for more than the guard: a growth now is not the guard's (D32).
        state.guard.asked = None;
    } else if rec.reason == Reason::TokenThroughput {
        rec.reason = Reason::Predictive;
    }
    // After warm-up, panic or a latency breach above 1.2x asks for at least one more replica.
    let one_more = one_more_replica(role);
    if matches!(fallback.reason, Reason::Panic | Reason::LatencyGuardScaleUp) && rec.raw < one_more
    {
        rec.raw = one_more;
    }
    // Consolidation: removing a replica must leave the others at or below 80 % of capacity.
    if rec.raw < current {
        let stable = state
            .window_mean(now, policy.fallback.stable_window_seconds)
            .unwrap_or(0.0);
        let load = stable.max(forecast);
        let limit = 0.8 * capacity * (current - 1) as f64;
        // Nor may the smaller count be one that panics at this load (a panic threshold at or
        // below 1 would otherwise add the replica straight back: a loop).
        let panics = load >= policy.fallback.panic_threshold * capacity * (current - 1) as f64;
        if load > limit || panics {
            rec.raw = current;
            rec.reason = Reason::PredictiveConsolidationHold;
            rec.note.push_str(&format!(
                "; {load:.1} tok/s exceeds 80 % of {} replicas ({limit:.1})",
                current - 1
            ));
        }
    }
    rec
}
