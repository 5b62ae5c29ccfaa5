//! Trace transforms: a slice of a trace, the same trace faster or slower, or the same time
//! course with more or fewer requests. Each returns a new trace sorted by time, so a replay can
//! be tried at other loads than the one recorded without editing the file.

use super::trace::{Trace, TraceRequest};
use crate::rng::Rng;

/// The most requests [`Trace::rate_multiplied`] returns, so a mistyped factor fails with a
/// message instead of exhausting memory.
pub const MAX_MULTIPLIED_REQUESTS: f64 = 50_000_000.0;

impl Trace {
    /// The requests with `from_seconds <= at < until_seconds` (no upper bound for `None`),
    /// with times rebased so that `from_seconds` is 0: a replay of one part of a long trace.
    /// The first kept request is not moved to 0; the gap before it is part of the window.
    ///
    /// `from` must be a finite number of at least 0 and `until`, when given, later than `from`;
    /// the errors name the `--from` and `--until` options that carry them on the command line.
    pub fn window(&self, from_seconds: f64, until_seconds: Option<f64>) -> Result<Trace, String> {
        if !(from_seconds.is_finite() && from_seconds >= 0.0) {
            return Err(format!(
                "--from is {from_seconds}; it must be a finite number of seconds of at least 0"
            ));
        }
        if let Some(until) = until_seconds
            && (until.is_nan() || until <= from_seconds)
        {
            return Err(format!(
                "--until is {until}; it must be later than --from ({from_seconds} s)"
            ));
        }
        let until = until_seconds.unwrap_or(f64::INFINITY);
        let requests = self
            .requests
            .iter()
            .filter(|r| from_seconds <= r.at_seconds && r.at_seconds < until)
            .map(|r| TraceRequest {
                at_seconds: r.at_seconds - from_seconds,
                ..r.clone()
            })
            .collect();
        Ok(Trace { requests })
    }

    /// Every request time multiplied by `factor`: 0.5 replays an hour in 30 minutes at twice
    /// the rate, 2 replays it over two hours at half the rate. Request count and tokens are
    /// unchanged. `factor` must be a positive, finite number.
    pub fn time_scaled(&self, factor: f64) -> Result<Trace, String> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(format!(
                "the time scale factor is {factor}; it must be a positive, finite number"
            ));
        }
        let requests = self
            .requests
            .iter()
            .map(|r| TraceRequest {
                at_seconds: r.at_seconds * factor,
                ..r.clone()
            })
            .collect();
        Ok(Trace { requests })
    }

    /// The same time course with about `factor` times as many requests, for a load the trace's
    /// shape has but not its volume.
    ///
    /// Below 1 each request is kept with probability `factor`. Above 1 every request is kept,
    /// with `floor(factor) - 1` copies and one more with probability `fract(factor)`; a copy
    /// keeps the original's tokens, prefix hits and block hashes and is placed at a uniform
    /// time between the original and the next request (after the last request: within one
    /// mean inter-arrival gap). Times are not rebased, so the duration stays about the same.
    /// Draws come from the seed's `rate-multiplied` stream; the result is sorted, stably (an
    /// original comes before copies at the same time).
    ///
    /// `factor` must be positive and finite, and the expected result at most
    /// [`MAX_MULTIPLIED_REQUESTS`] requests.
    pub fn rate_multiplied(&self, factor: f64, seed: u64) -> Result<Trace, String> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(format!(
                "the rate factor is {factor}; it must be a positive, finite number"
            ));
        }
        let expected = factor * self.requests.len() as f64;
        if expected > MAX_MULTIPLIED_REQUESTS {
            return Err(format!(
                "the rate factor {factor} would make about {expected:.0} requests from {}; \
                 at most {MAX_MULTIPLIED_REQUESTS} are allowed",
                self.requests.len()
            ));
        }
        let mut rng = Rng::stream(seed, "rate-multiplied");
        if factor < 1.0 {
            let requests = self
                .requests
                .iter()
                .filter(|_| rng.unit() <= factor)
                .cloned()
                .collect();
            return Ok(Trace { requests });
        }
        let whole_copies = factor.floor() as usize - 1;
        let fraction = factor.fract();
        let n = self.requests.len();
        let mean_gap = if n >= 2 {
            (self.requests[n - 1].at_seconds - self.requests[0].at_seconds) / (n - 1) as f64
        } else {
            0.0
        };
        let mut requests = Vec::with_capacity(expected.ceil() as usize + 1);
        for (i, r) in self.requests.iter().enumerate() {
            let extra = usize::from(fraction > 0.0 && rng.unit() <= fraction);
            let next = self
                .requests
                .get(i + 1)
                .map_or(r.at_seconds + mean_gap, |next| next.at_seconds);
            requests.push(r.clone());
            for _ in 0..whole_copies + extra {
                requests.push(TraceRequest {
                    at_seconds: rng.uniform(r.at_seconds, next),
                    ..r.clone()
                });
            }
        }
        requests.sort_by(|a, b| a.at_seconds.total_cmp(&b.at_seconds));
        Ok(Trace { requests })
    }
}
