//! The three algorithms (spec, *Algorithms*; D11 to D14): from a role's observation and
//! memory to its raw recommendation, the reason, and whether the algorithm holds scale-down.

use jiff::Timestamp;
use mds_api::spec::ProportionalMetric;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_signals::RoleObservation;

use crate::policy::{PredictivePolicy, TokenPolicy};
use crate::reason::Reason;
use crate::state::{Kalman, Noise, RoleState};

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
}

impl Recommendation {
    fn hold(current: i32, reason: Reason, note: impl Into<String>) -> Recommendation {
        Recommendation {
            raw: current,
            reason,
            holds_scale_down: true,
            note: note.into(),
        }
    }
}

/// "At least one more replica" (D13, D14), counted from the replicas that serve: when not all
/// desired replicas are ready yet, the added ones are still starting, so hold at the current
/// count instead of compounding one more each pass.
fn one_more_replica(current: i32, ready: u32) -> i32 {
    if (ready as i64) < current as i64 {
        current
    } else {
        current.saturating_add(1)
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

/// Proportional (D11): load per ready replica against the target, with a deadband.
pub fn proportional(
    metric: ProportionalMetric,
    tolerance: f64,
    target: f64,
    current: i32,
    observation: Option<&RoleObservation>,
) -> Recommendation {
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
    // A non-finite or negative total is garbage, not a load of zero or infinity.
    let Some(total) = total.filter(|t| t.is_finite() && *t >= 0.0) else {
        return Recommendation::hold(
            current,
            Reason::WaitingForMetrics,
            format!("{metric:?} is missing or not a usable number"),
        );
    };
    let load = total / o.ready_replicas as f64;
    let note = format!(
        "{metric:?} {total:.3} over {} ready = {load:.3} per replica, target {target}",
        o.ready_replicas
    );
    if (load / target - 1.0).abs() <= tolerance {
        return Recommendation {
            raw: current,
            reason: Reason::WithinTolerance,
            holds_scale_down: false,
            note: format!("{note}; within tolerance {tolerance}"),
        };
    }
    Recommendation {
        raw: ceil_replicas(total, target),
        reason: Reason::Proportional,
        holds_scale_down: false,
        note,
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

/// Records this pass's demand sample when the observation is usable.
pub fn record_demand(
    kind: &RoleKind,
    observation: Option<&RoleObservation>,
    state: &mut RoleState,
    now: Timestamp,
) -> Option<f64> {
    let o =
        observation.filter(|o| matches!(o.signal_state, SignalState::Fresh | SignalState::Idle))?;
    // A NaN or infinite rate is no reading at all: it would read as one replica.
    let d = demand(kind, o).filter(|d| d.is_finite() && *d >= 0.0)?;
    state.record_demand(now, d);
    Some(d)
}

/// The relative latency breach of a role (D13): the larger of the readings its kind checks
/// that are present, and whether a reading it checks is missing.
fn latency_breach(
    kind: &RoleKind,
    o: &RoleObservation,
    token: &TokenPolicy,
) -> (Option<f64>, bool) {
    let ttft = o.ttft_milliseconds.map(|v| v / token.ttft_target_ms);
    let itl = o.itl_milliseconds.map(|v| v / token.itl_target_ms);
    let checked: &[Option<f64>] = match kind {
        RoleKind::Prefill => &[ttft],
        RoleKind::Decode => &[itl],
        RoleKind::Server => &[ttft, itl],
        _ => &[],
    };
    let breach = checked.iter().flatten().copied().reduce(f64::max);
    (breach, checked.iter().any(Option::is_none))
}

/// TokenThroughput: windows, panic and the latency guard. The demand sample of this pass must
/// already be recorded in `state`.
pub fn token_throughput(
    kind: &RoleKind,
    token: &TokenPolicy,
    current: i32,
    observation: Option<&RoleObservation>,
    state: &RoleState,
    now: Timestamp,
) -> Recommendation {
    let Some(capacity) = token.capacities.for_kind(kind) else {
        return Recommendation::hold(
            current,
            Reason::WaitingForMetrics,
            format!("no capacity for kind {kind}"),
        );
    };
    let Some(o) = observation else {
        return Recommendation::hold(current, Reason::WaitingForMetrics, "no observation");
    };
    if o.ready_replicas == 0 {
        return Recommendation::hold(current, Reason::NoReadyReplicas, "no ready replica");
    }
    let window = |seconds: i64| state.window_mean(now, seconds);
    let mut rec = match window(token.stable_window_seconds) {
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
                    rec.note.push_str(&format!(
                        " reaches {} x {} ready x {capacity}: panic",
                        token.panic_threshold, o.ready_replicas
                    ));
                }
            }
            rec
        }
    };
    // The latency guard acts even without a throughput window. Its extra replica counts from
    // the replicas that serve: while added ones are still starting, it holds instead of adding
    // one more every pass.
    let one_more = one_more_replica(current, o.ready_replicas);
    let idle = o.signal_state == SignalState::Idle;
    let (breach, missing) = latency_breach(kind, o, token);
    if let Some(breach) = breach {
        if breach > 1.2 {
            if one_more > rec.raw {
                rec.raw = one_more;
                rec.reason = Reason::LatencyGuardScaleUp;
            }
            rec.holds_scale_down = true;
            rec.note
                .push_str(&format!("; latency at {breach:.2}x target"));
        } else if breach > 1.0 {
            if rec.raw < current {
                rec.raw = current;
                rec.reason = Reason::LatencyGuardHold;
            }
            rec.holds_scale_down = true;
            rec.note.push_str(&format!(
                "; latency at {breach:.2}x target holds scale-down"
            ));
        }
    }
    // An idle role has no latency to report; otherwise a missing reading holds scale-down.
    if missing && !idle {
        if rec.raw < current {
            rec.raw = current;
            rec.reason = Reason::LatencyGuardHold;
        }
        rec.holds_scale_down = true;
        rec.note.push_str("; latency missing holds scale-down");
    }
    rec
}

/// Predictive (D14): the Kalman forecast, never below the TokenThroughput fallback.
#[allow(clippy::too_many_arguments)]
pub fn predictive(
    kind: &RoleKind,
    policy: &PredictivePolicy,
    current: i32,
    observation: Option<&RoleObservation>,
    demand_now: Option<f64>,
    state: &mut RoleState,
    now: Timestamp,
) -> Recommendation {
    let mut fallback = token_throughput(kind, &policy.fallback, current, observation, state, now);
    let noise = Noise {
        q_level: policy.q_level,
        q_trend: policy.q_trend,
        measurement: policy.measurement_noise,
    };
    if let Some(z) = demand_now {
        match &mut state.kalman {
            Some(k) if k.updated_at < now => k.update(z, now, noise),
            Some(_) => {}
            None => state.kalman = Some(Kalman::start(z, now, noise)),
        }
    }
    let count = state.kalman.as_ref().map_or(0, |k| k.sample_count);
    if count < policy.min_points {
        // Until minPoints the role reports warm-up with the fallback's result, unless there
        // is no result at all.
        if !matches!(
            fallback.reason,
            Reason::NoReadyReplicas | Reason::WaitingForMetrics
        ) {
            fallback.reason = Reason::PredictorWarmingUp;
        }
        fallback.note = format!(
            "{}; predictor warming up ({count} of {} points)",
            fallback.note, policy.min_points
        );
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
    if forecast_rec > rec.raw {
        rec.raw = forecast_rec;
        rec.reason = Reason::Predictive;
    } else if rec.reason == Reason::TokenThroughput {
        rec.reason = Reason::Predictive;
    }
    // After warm-up, panic or a latency breach above 1.2x asks for at least one more replica.
    let ready = observation.map_or(0, |o| o.ready_replicas);
    let one_more = one_more_replica(current, ready);
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
