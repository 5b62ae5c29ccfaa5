//! Planner memory: demand and recommendation histories and the Kalman filter of each role.
//! Kept in memory while planning and written to (and restored from) status by the core.

use std::collections::{BTreeMap, VecDeque};

use jiff::Timestamp;

pub use mds_api::defaults::values::HISTORY_LIMIT;

/// A local-linear-trend Kalman filter over a role's demand (tokens per second).
#[derive(Clone, Debug, PartialEq)]
pub struct Kalman {
    /// Estimated demand.
    pub level: f64,
    /// Demand change per second.
    pub trend: f64,
    /// Covariance of (level, trend).
    pub p: [[f64; 2]; 2],
    /// Observations processed.
    pub sample_count: u32,
    pub updated_at: Timestamp,
}

/// Noise parameters of the filter, as the spec gives them: `q_level` and `q_trend` are
/// variances per forecast horizon (D34), `measurement` per observation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    pub q_level: f64,
    pub q_trend: f64,
    pub measurement: f64,
    /// The forecast horizon H, seconds: the one step the process noises are given for.
    pub horizon_seconds: f64,
}

impl Noise {
    /// The process noise of a predict step of `dt` seconds (D34): the level's variance per
    /// horizon spread over the step, `q_level · dt / H`, and the trend's, a per-horizon
    /// variance of a per-horizon trend, `q_trend · (dt / H)³`, read per second (the filter
    /// keeps its trend per second, so divided by `dt²`): `q_trend · dt / H³`. A horizon that
    /// is not a positive number reads as one second.
    pub fn per_step(&self, dt: f64) -> (f64, f64) {
        let h = self.horizon();
        (self.q_level * dt / h, self.q_trend * dt / (h * h * h))
    }

    /// The horizon in seconds; one that is not a positive number reads as one second.
    fn horizon(&self) -> f64 {
        if self.horizon_seconds.is_finite() && self.horizon_seconds > 0.0 {
            self.horizon_seconds
        } else {
            1.0
        }
    }
}

impl Kalman {
    /// A filter seeded by its first observation (D37): level at the observation with the
    /// variance of a measurement, no trend, and the trend as uncertain as one that would move
    /// the level by one measurement deviation over the horizon. D37 states it per pass,
    /// `measurementNoise / (H / Δ)²`; the trend is kept per second here, so the pass length
    /// cancels: `measurementNoise / H²`. (A start of 1 (token/s per s)² carried the first
    /// readings' slope a horizon ahead: 26,584 tokens/s forecast against about 6,000.)
    pub fn start(z: f64, at: Timestamp, noise: Noise) -> Kalman {
        let h = noise.horizon();
        Kalman {
            level: z,
            trend: 0.0,
            p: [[noise.measurement, 0.0], [0.0, noise.measurement / (h * h)]],
            sample_count: 1,
            updated_at: at,
        }
    }

    /// One predict-and-update step with observation `z` at `at` (D14: one per pass).
    pub fn update(&mut self, z: f64, at: Timestamp, noise: Noise) {
        if !z.is_finite() {
            return; // a bad sample must not poison the filter for good
        }
        if !self.is_sane() {
            // Restored state that cannot be a covariance (or NaN): start over at this sample.
            *self = Kalman {
                sample_count: self.sample_count,
                ..Kalman::start(z, at, noise)
            };
            self.sample_count += 1;
            return;
        }
        let dt = at.duration_since(self.updated_at).as_secs_f64().max(0.0);
        // Predict: x = F x, P = F P Fᵀ + Q with F = [[1, dt], [0, 1]].
        let level = self.level + self.trend * dt;
        let [[p00, p01], [p10, p11]] = self.p;
        let (q_level, q_trend) = noise.per_step(dt);
        let a00 = p00 + dt * (p10 + p01) + dt * dt * p11 + q_level;
        let a01 = p01 + dt * p11;
        let a10 = p10 + dt * p11;
        let a11 = p11 + q_trend;
        // Update with H = [1, 0].
        let innovation = z - level;
        let s = a00 + noise.measurement;
        if !(s > 0.0 && s.is_finite()) {
            return;
        }
        let (k0, k1) = (a00 / s, a10 / s);
        self.level = level + k0 * innovation;
        self.trend += k1 * innovation;
        self.p = [
            [(1.0 - k0) * a00, (1.0 - k0) * a01],
            [a10 - k1 * a00, a11 - k1 * a01],
        ];
        self.sample_count += 1;
        self.updated_at = at;
    }

    /// Finite numbers and a covariance with nonnegative variances.
    pub fn is_sane(&self) -> bool {
        let finite = self.level.is_finite()
            && self.trend.is_finite()
            && self.p.iter().flatten().all(|v| v.is_finite());
        finite && self.p[0][0] >= 0.0 && self.p[1][1] >= 0.0
    }

    /// Demand `horizon` seconds ahead, never below zero (D14).
    pub fn forecast(&self, horizon_seconds: f64) -> f64 {
        (self.level + self.trend * horizon_seconds).max(0.0)
    }
}

/// Memory of one role.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RoleState {
    /// Demand samples (tokens per second) for the token windows, only those inside the
    /// longest window the algorithm reads.
    pub demand: VecDeque<(Timestamp, f64)>,
    /// Algorithm recommendations for stabilization (D15) as change points (D30): an entry
    /// holds from its time until the next one.
    pub recommendations: VecDeque<(Timestamp, i32)>,
    pub kalman: Option<Kalman>,
    /// When the role last grew (decode post-scale-up grace).
    pub last_scale_up: Option<Timestamp>,
    /// The ordinals our last growth commit added to this role (D13: while one of them is not
    /// ready and the commit is younger than `pendingTimeoutSeconds`, the latency guard holds).
    pub last_growth: Option<Growth>,
    /// The first pass that saw every ordinal of `last_growth` ready (D32: the guard waits one
    /// sampling interval of readings after it). Cleared by each growth commit; in memory only.
    pub growth_ready_at: Option<Timestamp>,
    /// What the latency guard learned from its own growths (D32); in memory only.
    pub guard: GuardMemory,
    /// The stable-window demand of the last pass, tokens/s (what a shrink was planned on).
    pub stable_demand: Option<f64>,
    /// Our shrinks and the guard's reversals of them (D33); in memory only.
    pub shrink: crate::reversal::ShrinkMemory,
}

/// The relative breach under which a stalled guard is released, and above which it asks for
/// one more replica (D13, D32).
pub const GUARD_GROWTH_BREACH: f64 = 1.2;
/// A stalled guard is released when the breach rises by more than this share above the value
/// it stalled at (D32): the load changed. A lower breach still above 1.2x is not news, and p95
/// readings move by 10 % on noise alone.
pub const GUARD_STALL_RELEASE_RISE: f64 = 0.25;
/// Replica counts whose p95 the guard remembers for its stall message (D32).
pub const GUARD_TRIED_COUNTS: usize = 8;
/// Guard-driven growths in a row that left the breach no lower before the guard stops (D32).
pub const GUARD_FUTILE_GROWTHS: u32 = 2;

/// D32: the latency guard's record of its own growths of one role. Kept in memory only: after
/// a restart it starts empty, which only makes the guard as eager as it was before D32 until
/// it has seen two more growths.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct GuardMemory {
    /// The breach the guard asked for one more replica on in this pass (`None` when the pass's
    /// recommendation is not the guard's); a growth commit of the pass reads it.
    pub asked: Option<f64>,
    /// The reading (`TTFT` or `ITL`) behind `asked`; set exactly when `asked` is.
    pub asked_reading: Option<&'static str>,
    /// The breach at our last guard-driven growth commit, until the first measured reading
    /// after it judges that growth.
    pub growth_breach: Option<f64>,
    /// Guard-driven growths in a row that left the breach no lower.
    pub futile: u32,
    /// The breach at which the guard stopped adding replicas; it only holds scale-down until
    /// the breach falls below 1.2x, rises more than 25 % above this value, or the spec changes.
    pub stalled_at: Option<f64>,
    /// The worst solid p95 read at each ready count while the guard was above 1.2x, for the
    /// stall's message: (ready replicas, which reading, milliseconds), oldest count first.
    pub tried: [Option<Tried>; GUARD_TRIED_COUNTS],
}

/// A p95 the latency guard read at one ready count (D32).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tried {
    pub ready: u32,
    /// `TTFT` or `ITL`.
    pub reading: &'static str,
    pub milliseconds: f64,
}

impl GuardMemory {
    /// Our growth commit of this role: guard-driven when the guard asked for it in the pass
    /// that committed it; any other growth starts the count of futile growths again.
    pub fn record_growth(&mut self) {
        match self.asked {
            Some(breach) => self.growth_breach = Some(breach),
            None => {
                self.growth_breach = None;
                self.futile = 0;
            }
        }
    }

    /// Judges the last guard-driven growth by `breach`, a reading with enough observations,
    /// once that growth is measured (`measured`: no growth of ours in flight), and releases a
    /// stall the reading ends. Returns whether the guard is stalled.
    pub fn judge(&mut self, breach: Option<f64>, measured: bool) -> bool {
        let Some(breach) = breach.filter(|b| b.is_finite()) else {
            return self.stalled_at.is_some();
        };
        if let Some(stalled) = self.stalled_at {
            let rose = breach > (1.0 + GUARD_STALL_RELEASE_RISE) * stalled;
            if breach < GUARD_GROWTH_BREACH || rose {
                *self = GuardMemory::default();
            }
        }
        if breach < GUARD_GROWTH_BREACH {
            // Under the guard's threshold the run of growths is over.
            self.growth_breach = None;
            self.futile = 0;
            self.tried = Default::default();
            return false;
        }
        if measured && let Some(before) = self.growth_breach.take() {
            self.futile = if breach >= before { self.futile + 1 } else { 0 };
            if self.futile >= GUARD_FUTILE_GROWTHS && self.stalled_at.is_none() {
                self.stalled_at = Some(breach);
            }
        }
        self.stalled_at.is_some()
    }
}

impl GuardMemory {
    /// Remembers the p95 read at `ready` replicas (the latest reading at a count replaces the
    /// one before; when every slot is taken the oldest count is forgotten).
    pub fn record_tried(&mut self, tried: Tried) {
        if let Some(slot) = self
            .tried
            .iter_mut()
            .flatten()
            .find(|t| t.ready == tried.ready)
        {
            *slot = tried;
            return;
        }
        if let Some(free) = self.tried.iter_mut().find(|t| t.is_none()) {
            *free = Some(tried);
            return;
        }
        self.tried.rotate_left(1);
        self.tried[GUARD_TRIED_COUNTS - 1] = Some(tried);
    }

    /// "p95 ITL 75 ms at 2 ready replicas, 76 ms at 3, 75 ms at 4", by count.
    pub fn describe_tried(&self) -> Option<String> {
        let mut tried: Vec<Tried> = self.tried.iter().flatten().copied().collect();
        tried.sort_by_key(|t| t.ready);
        let first = tried.first()?;
        let mut text = format!(
            "p95 {} {:.0} ms at {} ready replica{}",
            first.reading,
            first.milliseconds,
            first.ready,
            if first.ready == 1 { "" } else { "s" }
        );
        for t in &tried[1..] {
            let reading = if t.reading == first.reading {
                String::new()
            } else {
                format!("{} ", t.reading)
            };
            text.push_str(&format!(
                ", {reading}{:.0} ms at {}",
                t.milliseconds, t.ready
            ));
        }
        Some(text)
    }
}

/// One growth commit of a role: when, and the ordinals it added (`from..to`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Growth {
    pub at: Timestamp,
    pub from: i32,
    pub to: i32,
}

/// Keeps at most [`HISTORY_LIMIT`] entries, dropping the oldest.
fn cap<T>(history: &mut VecDeque<(Timestamp, T)>) {
    while history.len() > HISTORY_LIMIT {
        history.pop_front();
    }
}

impl RoleState {
    /// Records this pass's demand sample and forgets samples no window of `keep_seconds`
    /// can reach any more.
    pub fn record_demand(&mut self, at: Timestamp, tokens_per_second: f64, keep_seconds: i64) {
        // A second sample for the same instant replaces the first: one pass, one sample.
        if self.demand.back().is_some_and(|(t, _)| *t == at) {
            self.demand.pop_back();
        }
        self.demand.push_back((at, tokens_per_second));
        let horizon = at - jiff::SignedDuration::from_secs(keep_seconds);
        while self.demand.front().is_some_and(|(t, _)| *t <= horizon) {
            self.demand.pop_front();
        }
        cap(&mut self.demand);
    }

    /// Records this pass's recommendation: a new entry only when it differs from the one in
    /// effect (D30), so a steady role keeps one entry however long it stays steady.
    pub fn record_recommendation(&mut self, at: Timestamp, replicas: i32) {
        // A second recommendation for the same instant replaces the first.
        if self.recommendations.back().is_some_and(|(t, _)| *t == at) {
            self.recommendations.pop_back();
        }
        if self
            .recommendations
            .back()
            .is_some_and(|(_, r)| *r == replicas)
        {
            return;
        }
        self.recommendations.push_back((at, replicas));
        cap(&mut self.recommendations);
    }

    /// Mean demand over `(now - window, now]`, `None` when no sample falls in it. (Each sample
    /// is already a rate from two successive scrapes, so one sample establishes a window.)
    /// Walks back from the newest sample only as far as the window reaches.
    pub fn window_mean(&self, now: Timestamp, window_seconds: i64) -> Option<f64> {
        let since = now - jiff::SignedDuration::from_secs(window_seconds);
        let (mut sum, mut count) = (0.0, 0u32);
        for (t, v) in self.demand.iter().rev() {
            if *t <= since {
                break;
            }
            if *t <= now {
                sum += v;
                count += 1;
            }
        }
        (count >= 1).then(|| sum / count as f64)
    }

    /// The lowest and highest recommendation in effect during `[now - window, now]` (`None`
    /// when there is none), and whether the history is enough for the window (D15, D30): it
    /// reaches back to the window's start, or the cap forced out older entries, in which case
    /// the range covers every entry still held.
    pub fn recommendation_range(
        &self,
        now: Timestamp,
        window_seconds: i64,
    ) -> (Option<(i32, i32)>, bool) {
        let since = now - jiff::SignedDuration::from_secs(window_seconds);
        let capped = self.recommendations.len() >= HISTORY_LIMIT;
        let spans = capped
            || self
                .recommendations
                .front()
                .is_some_and(|(t, _)| *t <= since);
        let mut range: Option<(i32, i32)> = None;
        let mut widen = |r: i32| {
            range = Some(range.map_or((r, r), |(lo, hi)| (lo.min(r), hi.max(r))));
        };
        for (t, r) in self.recommendations.iter().rev() {
            if *t > now {
                continue;
            }
            widen(*r);
            // The newest entry at or before the window's start is in effect at its start;
            // nothing older is.
            if *t <= since {
                break;
            }
        }
        (range, spans)
    }
}

/// Memory of every role, by name.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PlannerState {
    pub roles: BTreeMap<String, RoleState>,
    /// The scaler generation this memory last planned under; a change of the spec releases
    /// every stalled latency guard (D32). In memory only.
    pub spec_generation: Option<i64>,
}

impl PlannerState {
    /// Notes the spec generation of this pass; a new one releases the latency guards' stalls
    /// and their counts of futile growths (D32) and the reversals in force (D33).
    pub fn plan_under(&mut self, generation: i64) {
        if self.spec_generation != Some(generation) {
            for role in self.roles.values_mut() {
                role.guard = GuardMemory::default();
                role.shrink.release();
            }
            self.spec_generation = Some(generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    const NOISE: Noise = Noise {
        q_level: 1.0,
        q_trend: 0.1,
        measurement: 10.0,
        horizon_seconds: 300.0,
    };

    #[test]
    fn the_filter_tracks_a_linear_ramp() {
        // A ramp of 2 tokens/s per second. With D37's small trend prior the filter trusts a
        // slope only once it has lasted: 0.41 of it after 10 passes, 1.78 after 40 (ten
        // minutes), 1.99 after 200; with the old start of 1 it had 1.96 after two passes.
        let mut k = Kalman::start(1000.0, at(0), NOISE);
        for step in 1..=40 {
            k.update(1000.0 + 2.0 * 15.0 * step as f64, at(15 * step), NOISE);
        }
        assert!((1.7..2.05).contains(&k.trend), "trend {}", k.trend);
        // 300 s ahead the ramp is at 2,800; the forecast is within 5 % (2,693).
        let expected = 1000.0 + 2.0 * (600.0 + 300.0);
        assert!(
            (k.forecast(300.0) - expected).abs() < 0.05 * expected,
            "forecast {}",
            k.forecast(300.0)
        );
        assert_eq!(k.sample_count, 41);
    }

    #[test]
    fn process_noises_are_per_horizon_spread_over_the_step() {
        // D34: q_level 1 per 300 s horizon over a 15 s pass is 0.05; q_trend 0.1 per horizon
        // of a per-horizon trend is 0.1 x (15/300)^3 per pass, read per second: / 15^2.
        let (level, trend) = NOISE.per_step(15.0);
        assert!((level - 0.05).abs() < 1e-12, "{level}");
        let expected = 0.1 * (15.0f64 / 300.0).powi(3) / (15.0 * 15.0);
        assert!((trend - expected).abs() < 1e-18, "{trend} {expected}");
        // A horizon that is not a positive number reads as one second, never as a division by 0.
        let odd = Noise {
            horizon_seconds: 0.0,
            ..NOISE
        };
        assert_eq!(odd.per_step(15.0), (15.0, 1.5));
    }

    #[test]
    fn one_update_by_hand() {
        // Start at 1000 with P = [[10, 0], [0, 10 / 300^2]] (D37: the trend as uncertain as
        // one that moves the level by one measurement deviation, sqrt(10), over the 300 s
        // horizon), observe 1100 fifteen seconds later.
        let mut k = Kalman::start(1000.0, at(0), NOISE);
        let p11 = 10.0 / (300.0 * 300.0);
        assert_eq!(k.p, [[10.0, 0.0], [0.0, p11]]);
        k.update(1100.0, at(15), NOISE);
        let q = NOISE.per_step(15.0);
        // Predicted covariance: P00 = 10 + 15^2 P11 + q_level, P01 = P10 = 15 P11,
        // P11 = P11 + q_trend.
        let a00 = 10.0 + 225.0 * p11 + q.0;
        let a10 = 15.0 * p11;
        let s = a00 + 10.0;
        let (k0, k1) = (a00 / s, a10 / s);
        assert!(
            (k.level - (1000.0 + k0 * 100.0)).abs() < 1e-9,
            "{}",
            k.level
        );
        assert!((k.trend - k1 * 100.0).abs() < 1e-15, "{}", k.trend);
        assert!((k.p[0][0] - (1.0 - k0) * a00).abs() < 1e-9);
        assert!((k.p[1][1] - (p11 + q.1 - k1 * a10)).abs() < 1e-15);
        // The forecast is level + trend (per second) x horizon (D14, D34).
        assert_eq!(k.forecast(300.0), k.level + k.trend * 300.0);
    }

    #[test]
    fn the_first_readings_slope_is_not_carried_a_horizon_ahead() {
        // D37: demand that settles from 3,000 to 6,000 tokens/s in the first passes (a cold
        // window filling) and stays there. Started with a trend variance of 1 (token/s per s)²,
        // the second reading's jump became a trend of about 180 tokens/s per second and the
        // forecast 300 s ahead about 60,000 tokens/s; the first forecasts on the conversation
        // trace were 26,584 against about 6,000.
        let readings = [3000.0, 6000.0, 6000.0, 6000.0, 6000.0, 6000.0];
        let mut k = Kalman::start(readings[0], at(0), NOISE);
        for (i, z) in readings.iter().enumerate().skip(1) {
            k.update(*z, at(15 * i as i64), NOISE);
            let forecast = k.forecast(300.0);
            assert!(
                forecast <= 6000.0 * 1.05,
                "pass {i}: forecast {forecast:.0} tokens/s against 6,000 of demand"
            );
        }
        // (A ramp that lasts is still followed: the_filter_tracks_a_linear_ramp.)
    }

    #[test]
    fn on_a_flat_noisy_load_the_forecast_is_closer_than_the_last_value() {
        // 5,000 tokens/s with +-25 % uniform noise every 15 s pass (a seeded LCG), forecast
        // 300 s (20 passes) ahead; with the noises applied per pass (before D34) the forecast
        // was several times further off than the last value.
        let mut seed: u64 = 42;
        let mut noise = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let z: Vec<f64> = (0..600).map(|_| 5000.0 * (1.0 + 0.25 * noise())).collect();
        let mut k = Kalman::start(z[0], at(0), NOISE);
        let smape = |a: f64, b: f64| (a - b).abs() / ((a.abs() + b.abs()) / 2.0);
        let (mut forecast, mut last, mut n) = (0.0, 0.0, 0.0);
        for i in 1..z.len() - 20 {
            k.update(z[i], at(15 * i as i64), NOISE);
            if i >= 100 {
                forecast += smape(k.forecast(300.0), z[i + 20]);
                last += smape(z[i], z[i + 20]);
                n += 1.0;
            }
        }
        let (forecast, last) = (forecast / n, last / n);
        assert!(
            forecast < 0.8 * last,
            "forecast sMAPE {forecast:.3} against the last value's {last:.3}"
        );
    }

    #[test]
    fn forecasts_never_go_below_zero() {
        let mut k = Kalman::start(100.0, at(0), NOISE);
        for step in 1..=20 {
            k.update((100.0 - 10.0 * step as f64).max(0.0), at(15 * step), NOISE);
        }
        assert_eq!(k.forecast(600.0), 0.0);
    }

    #[test]
    fn windows_average_their_samples_and_histories_stay_bounded() {
        let mut s = RoleState::default();
        assert_eq!(s.window_mean(at(0), 60), None);
        s.record_demand(at(0), 100.0, 600);
        assert_eq!(s.window_mean(at(0), 60), Some(100.0));
        s.record_demand(at(15), 300.0, 600);
        assert_eq!(s.window_mean(at(15), 60), Some(200.0));
        assert_eq!(s.window_mean(at(80), 60), None, "both samples fell out");
        for i in 0..300 {
            s.record_recommendation(at(i), i as i32);
        }
        assert_eq!(s.recommendations.len(), HISTORY_LIMIT);
        let (range, spans) = s.recommendation_range(at(299), 10);
        assert_eq!(range, Some((289, 299)));
        assert!(spans);
        // D30: the cap forced out older entries, so the history is enough for any window and
        // the range covers everything still held.
        let (range, spans) = s.recommendation_range(at(299), 1000);
        assert_eq!(range, Some((44, 299)));
        assert!(spans);
    }

    #[test]
    fn recommendation_history_keeps_change_points_only() {
        let mut s = RoleState::default();
        for i in 0..100 {
            s.record_recommendation(at(15 * i), 3);
        }
        assert_eq!(
            s.recommendations,
            [(at(0), 3)],
            "a steady role keeps one entry"
        );
        s.record_recommendation(at(1500), 5);
        s.record_recommendation(at(1515), 5);
        assert_eq!(s.recommendations, [(at(0), 3), (at(1500), 5)]);
        // Within the window [1510, 1810] only 5 was in effect; the 3 ended at 1500.
        assert_eq!(s.recommendation_range(at(1810), 300), (Some((5, 5)), true));
        // A window starting before the change sees both values.
        assert_eq!(s.recommendation_range(at(1600), 300), (Some((3, 5)), true));
        // A same-instant correction back to the value in effect leaves no change point.
        s.record_recommendation(at(1530), 2);
        s.record_recommendation(at(1530), 5);
        assert_eq!(s.recommendations, [(at(0), 3), (at(1500), 5)]);
    }

    #[test]
    fn a_long_window_is_spanned_at_a_short_interval() {
        // D30: 5 s passes and a 1,800 s window: 361 passes, one entry.
        let mut s = RoleState::default();
        for i in 0..=360 {
            s.record_recommendation(at(5 * i), 2);
        }
        assert_eq!(s.recommendation_range(at(1800), 1800), (Some((2, 2)), true));
    }

    #[test]
    fn demand_samples_outside_the_longest_window_are_dropped() {
        let mut s = RoleState::default();
        for i in 0..100 {
            s.record_demand(at(15 * i), i as f64, 180);
        }
        // Samples at (1485 - 180, 1485]: 12 of them.
        assert_eq!(s.demand.len(), 12);
        assert_eq!(s.demand.front().map(|(t, _)| *t), Some(at(15 * 88)));
    }
}
