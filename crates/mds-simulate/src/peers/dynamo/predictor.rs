//! The throughput mode's load predictors, after upstream's
//! `components/src/dynamo/planner/utils/load_predictor.py`: one value per adjustment interval
//! in (a request count, a mean ISL or a mean OSL), a forecast of the next interval's out.
//!
//! Common to all: a NaN is a 0, and the leading zeros of an idle start are skipped until the
//! first non-zero value (later zeros are kept). With nothing kept yet the forecast is 0.
//!
//! Upstream's default is `arima` (`pmdarima.auto_arima`); it has no variant here (module
//! documentation of `dynamo`).

/// Which predictor the throughput mode uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predictor {
    /// The last value.
    Constant,
    /// A local linear trend Kalman filter ([`Kalman`]).
    Kalman,
}

/// Upstream's Kalman defaults (`SLAPlannerDefaults`).
pub const KALMAN_Q_LEVEL: f64 = 1.0;
pub const KALMAN_Q_TREND: f64 = 0.1;
pub const KALMAN_R: f64 = 10.0;
/// Values kept before the Kalman forecast is used (before: the last value).
pub const KALMAN_MIN_POINTS: usize = 5;

/// A local linear trend Kalman filter: state `[level, trend]`, transition
/// `F = [[1, 1], [0, 1]]`, observation `H = [1, 0]`, `P0 = 1000·I`, `Q = diag(q_level,
/// q_trend)`, `R = r`. The first value initialises the state at `[value, 0]` (P stays `P0`);
/// every later one is a predict step then an update step. The forecast is the level one
/// step ahead, `(F x)[0] = level + trend`.
#[derive(Clone, Debug, PartialEq)]
pub struct Kalman {
    x: [f64; 2],
    p: [[f64; 2]; 2],
    q: [f64; 2],
    r: f64,
    initialised: bool,
}

impl Kalman {
    pub fn new(q_level: f64, q_trend: f64, r: f64) -> Kalman {
        Kalman {
            x: [0.0, 0.0],
            p: [[1000.0, 0.0], [0.0, 1000.0]],
            q: [q_level, q_trend],
            r,
            initialised: false,
        }
    }

    pub fn observe(&mut self, z: f64) {
        if !self.initialised {
            self.x = [z, 0.0];
            self.initialised = true;
            return;
        }
        // Predict: x = F x, P = F P Fᵀ + Q.
        let [x0, x1] = self.x;
        self.x = [x0 + x1, x1];
        let [[p00, p01], [p10, p11]] = self.p;
        self.p = [
            [p00 + p01 + p10 + p11 + self.q[0], p01 + p11],
            [p10 + p11, p11 + self.q[1]],
        ];
        // Update: K = P Hᵀ / (H P Hᵀ + R), x += K (z − H x), P = (I − K H) P.
        let [[p00, p01], [p10, p11]] = self.p;
        let s = p00 + self.r;
        let k = [p00 / s, p10 / s];
        let innovation = z - self.x[0];
        self.x = [self.x[0] + k[0] * innovation, self.x[1] + k[1] * innovation];
        self.p = [
            [(1.0 - k[0]) * p00, (1.0 - k[0]) * p01],
            [p10 - k[1] * p00, p11 - k[1] * p01],
        ];
    }

    /// `[level, trend]` after the last value.
    pub fn state(&self) -> [f64; 2] {
        self.x
    }

    pub fn covariance(&self) -> [[f64; 2]; 2] {
        self.p
    }

    /// The one-step forecast (`None` before the first value).
    pub fn forecast(&self) -> Option<f64> {
        self.initialised.then(|| self.x[0] + self.x[1])
    }
}

/// One series' predictor.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadPredictor {
    kind: Predictor,
    last: Option<f64>,
    kept: usize,
    kalman: Kalman,
}

impl LoadPredictor {
    pub fn new(kind: Predictor) -> LoadPredictor {
        LoadPredictor {
            kind,
            last: None,
            kept: 0,
            kalman: Kalman::new(KALMAN_Q_LEVEL, KALMAN_Q_TREND, KALMAN_R),
        }
    }

    pub fn add(&mut self, value: f64) {
        let value = if value.is_nan() { 0.0 } else { value };
        if value == 0.0 && self.last.is_none() {
            return;
        }
        self.last = Some(value);
        self.kept += 1;
        self.kalman.observe(value);
    }

    /// The next interval's value. Upstream returns the filter's level as it is (with `log1p`
    /// off); a negative forecast is left to the caller.
    pub fn predict(&self) -> f64 {
        let last = self.last.unwrap_or(0.0);
        match self.kind {
            Predictor::Constant => last,
            Predictor::Kalman if self.kept < KALMAN_MIN_POINTS => last,
            Predictor::Kalman => self.kalman.forecast().unwrap_or(last),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    /// `load_predictor.py`: `KalmanPredictor` (filterpy's `KalmanFilter`, dim_x 2, dim_z 1).
    #[test]
    fn kalman_matches_hand_computed_steps() {
        let mut k = Kalman::new(1.0, 0.1, 10.0);
        assert_eq!(k.forecast(), None);
        k.observe(10.0);
        assert_eq!(k.state(), [10.0, 0.0]);
        assert_eq!(k.forecast(), Some(10.0));
        // 20: predicted P = 1000 F Fᵀ + Q = [[2001, 1000], [1000, 1000.1]], S = 2011,
        // K = [2001, 1000] / 2011, innovation 10.
        k.observe(20.0);
        let [level, trend] = k.state();
        assert!(close(level, 10.0 + 20_010.0 / 2011.0), "{level}");
        assert!(close(trend, 10_000.0 / 2011.0), "{trend}");
        let p = k.covariance();
        assert!(close(p[0][0], 20_010.0 / 2011.0));
        assert!(close(p[0][1], 10_000.0 / 2011.0));
        assert!(close(p[1][0], 10_000.0 / 2011.0));
        assert!(close(p[1][1], 1000.1 - 1_000_000.0 / 2011.0));
        assert!(close(k.forecast().unwrap(), 24.922_923_918_448_532));
        // 25 (the same recursion, worked in exact fractions).
        k.observe(25.0);
        let [level, trend] = k.state();
        assert!(close(level, 24.998_555_898_961_747), "{level}");
        assert!(close(trend, 5.045_982_972_092_235), "{trend}");
        assert!(close(k.forecast().unwrap(), 30.044_538_871_053_984));
    }

    #[test]
    fn kalman_forecast_converges_to_a_ramps_next_value() {
        let mut p = LoadPredictor::new(Predictor::Kalman);
        let mut errors = Vec::new();
        for i in 0..30 {
            p.add(5.0 + 3.0 * f64::from(i));
            if i >= 4 {
                errors.push((p.predict() - (5.0 + 3.0 * f64::from(i + 1))).abs());
            }
        }
        // After 12 values (5, 8, ..., 38) the forecast is 40.9988 for 41 (worked in exact
        // fractions); the error shrinks at every step until it is under 1e-4.
        assert!(
            (errors[11 - 4] - (41.0 - 40.998_787_134_900_31)).abs() < 1e-9,
            "{errors:?}"
        );
        assert!(errors[..12].windows(2).all(|w| w[1] < w[0]), "{errors:?}");
        assert!(errors[13..].iter().all(|&e| e < 1e-4), "{errors:?}");
    }

    #[test]
    fn leading_zeros_are_skipped_and_kalman_waits_for_five_points() {
        let mut p = LoadPredictor::new(Predictor::Kalman);
        assert_eq!(p.predict(), 0.0);
        for _ in 0..3 {
            p.add(0.0);
        }
        p.add(f64::NAN);
        assert_eq!(p.predict(), 0.0);
        for v in [10.0, 20.0, 30.0, 0.0] {
            p.add(v);
            assert_eq!(p.predict(), v, "the last value until five are kept");
        }
        p.add(50.0);
        assert_ne!(p.predict(), 50.0);
        // The same values with the zeros kept would have started the filter at 0.
        let mut k = Kalman::new(1.0, 0.1, 10.0);
        for v in [10.0, 20.0, 30.0, 0.0, 50.0] {
            k.observe(v);
        }
        assert_eq!(p.predict(), k.forecast().unwrap());

        let mut c = LoadPredictor::new(Predictor::Constant);
        for v in [0.0, 0.0, 4.0, 0.0, 7.0] {
            c.add(v);
        }
        assert_eq!(c.predict(), 7.0);
        c.add(0.0);
        assert_eq!(c.predict(), 0.0, "a zero after the idle start is kept");
    }
}
