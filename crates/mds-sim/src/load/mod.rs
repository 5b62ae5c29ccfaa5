//! Offered load over time: what the clients of one role ask for, before any engine serves it.
//!
//! A [`LoadProfile`] is a sorted list of segments on a time axis in seconds from the profile's
//! origin (the world sets the origin when the profile is assigned). In a segment every field
//! of [`Load`] moves linearly from its start value to its end value, so constants, steps and
//! ramps are all the same shape and traces become one constant segment per bin. Outside every
//! segment the load is zero.
//!
//! The world never samples the profile at a point: it asks for the [`Arrivals`] in the interval
//! between two steps, the exact integral of the rate (and of the rate times each token length),
//! so the served counters match the offered load whatever the step size.
//!
//! Request streams for the request-level engine are [`Trace`]s: read from a recorded trace,
//! cut, sped up or thinned by the transforms ([`Trace::window`], [`Trace::time_scaled`],
//! [`Trace::rate_multiplied`]), or generated from a rate [`Shape`] by [`Synthetic`].

pub mod curve;
mod stamps;
pub mod synthetic;
pub mod trace;
mod transform;

use thiserror::Error;

pub use curve::{CurveWindow, RateCurve};
pub use stamps::seconds_not_milliseconds;
pub use synthetic::{Shape, Synthetic, items, key_values, parse_seconds};
pub use trace::{Trace, TraceError, TraceRequest};
pub use transform::MAX_MULTIPLIED_REQUESTS;

/// Offered load at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Load {
    /// Request arrivals per second.
    pub requests_per_second: f64,
    /// Mean prompt length in tokens (cached prefix included).
    pub prompt_tokens: f64,
    /// Mean output length in tokens.
    pub output_tokens: f64,
    /// Fraction of prompt tokens served from the prefix cache, 0..=1.
    pub prefix_hit_fraction: f64,
}

/// A load field that is not a finite, non-negative number (or a hit fraction above 1).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum LoadError {
    #[error("{field} is {value}; it must be a finite number of at least 0")]
    Negative { field: &'static str, value: f64 },
    #[error("prefix_hit_fraction is {0}; it must lie in 0..=1")]
    HitFraction(f64),
    #[error("segment {index}: {message}")]
    Segment { index: usize, message: String },
}

impl Load {
    /// No requests.
    pub const IDLE: Load = Load {
        requests_per_second: 0.0,
        prompt_tokens: 0.0,
        output_tokens: 0.0,
        prefix_hit_fraction: 0.0,
    };

    pub fn new(
        requests_per_second: f64,
        prompt_tokens: f64,
        output_tokens: f64,
        prefix_hit_fraction: f64,
    ) -> Result<Load, LoadError> {
        let load = Load {
            requests_per_second,
            prompt_tokens,
            output_tokens,
            prefix_hit_fraction,
        };
        load.validate()?;
        Ok(load)
    }

    pub fn validate(&self) -> Result<(), LoadError> {
        for (field, value) in [
            ("requests_per_second", self.requests_per_second),
            ("prompt_tokens", self.prompt_tokens),
            ("output_tokens", self.output_tokens),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(LoadError::Negative { field, value });
            }
        }
        if !(0.0..=1.0).contains(&self.prefix_hit_fraction) {
            return Err(LoadError::HitFraction(self.prefix_hit_fraction));
        }
        Ok(())
    }

    /// Prompt tokens per second that miss the prefix cache (what a prefill engine computes).
    pub fn missed_prompt_tokens_per_second(&self) -> f64 {
        self.requests_per_second * self.prompt_tokens * (1.0 - self.prefix_hit_fraction)
    }

    /// Output tokens per second.
    pub fn generation_tokens_per_second(&self) -> f64 {
        self.requests_per_second * self.output_tokens
    }

    fn lerp(&self, to: &Load, x: f64) -> Load {
        let mix = |a: f64, b: f64| a + (b - a) * x;
        Load {
            requests_per_second: mix(self.requests_per_second, to.requests_per_second),
            prompt_tokens: mix(self.prompt_tokens, to.prompt_tokens),
            output_tokens: mix(self.output_tokens, to.output_tokens),
            prefix_hit_fraction: mix(self.prefix_hit_fraction, to.prefix_hit_fraction),
        }
    }
}

/// Requests and tokens that arrive in an interval (totals, not rates).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Arrivals {
    pub requests: f64,
    pub prompt_tokens: f64,
    pub output_tokens: f64,
    /// Prompt tokens that hit the prefix cache.
    pub prefix_hit_tokens: f64,
}

impl Arrivals {
    pub fn add(&mut self, other: &Arrivals) {
        self.requests += other.requests;
        self.prompt_tokens += other.prompt_tokens;
        self.output_tokens += other.output_tokens;
        self.prefix_hit_tokens += other.prefix_hit_tokens;
    }

    pub fn scaled(&self, factor: f64) -> Arrivals {
        Arrivals {
            requests: self.requests * factor,
            prompt_tokens: self.prompt_tokens * factor,
            output_tokens: self.output_tokens * factor,
            prefix_hit_tokens: self.prefix_hit_tokens * factor,
        }
    }

    /// Prompt tokens that miss the prefix cache.
    pub fn missed_prompt_tokens(&self) -> f64 {
        (self.prompt_tokens - self.prefix_hit_tokens).max(0.0)
    }

    pub fn is_empty(&self) -> bool {
        self.requests <= 0.0
    }
}

/// One piece of a profile: every field moves linearly from `from` at `start` to `to` at `end`.
/// `end` may be infinite only when `from == to`.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub start: f64,
    pub end: f64,
    pub from: Load,
    pub to: Load,
}

impl Segment {
    fn load_at(&self, t: f64) -> Load {
        if self.end.is_infinite() || self.end <= self.start {
            return self.from;
        }
        self.from
            .lerp(&self.to, (t - self.start) / (self.end - self.start))
    }

    /// The exact integral over `[a, b]` (inside the segment). Every integrand is a product of
    /// at most three linear functions, a cubic, for which Simpson's rule is exact.
    fn arrivals(&self, a: f64, b: f64) -> Arrivals {
        if b <= a {
            return Arrivals::default();
        }
        let at = |t: f64| {
            let l = self.load_at(t);
            let prompt = l.requests_per_second * l.prompt_tokens;
            Arrivals {
                requests: l.requests_per_second,
                prompt_tokens: prompt,
                output_tokens: l.requests_per_second * l.output_tokens,
                prefix_hit_tokens: prompt * l.prefix_hit_fraction,
            }
        };
        let (fa, fm, fb) = (at(a), at((a + b) / 2.0), at(b));
        let simpson = |x: f64, m: f64, y: f64| (b - a) / 6.0 * (x + 4.0 * m + y);
        Arrivals {
            requests: simpson(fa.requests, fm.requests, fb.requests),
            prompt_tokens: simpson(fa.prompt_tokens, fm.prompt_tokens, fb.prompt_tokens),
            output_tokens: simpson(fa.output_tokens, fm.output_tokens, fb.output_tokens),
            prefix_hit_tokens: simpson(
                fa.prefix_hit_tokens,
                fm.prefix_hit_tokens,
                fb.prefix_hit_tokens,
            ),
        }
    }
}

/// Offered load over time: sorted, non-overlapping segments; zero outside them.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LoadProfile {
    segments: Vec<Segment>,
}

impl LoadProfile {
    /// No load at any time.
    pub fn idle() -> LoadProfile {
        LoadProfile::default()
    }

    /// The same load from the origin on.
    pub fn constant(load: Load) -> Result<LoadProfile, LoadError> {
        LoadProfile::from_segments(vec![Segment {
            start: 0.0,
            end: f64::INFINITY,
            from: load,
            to: load,
        }])
    }

    /// Each load holds from its start (seconds from the origin) until the next one starts; the
    /// last holds for ever. Before the first start the load is zero.
    pub fn steps(steps: &[(f64, Load)]) -> Result<LoadProfile, LoadError> {
        let segments = steps
            .iter()
            .enumerate()
            .map(|(i, (start, load))| Segment {
                start: *start,
                end: steps.get(i + 1).map_or(f64::INFINITY, |next| next.0),
                from: *load,
                to: *load,
            })
            .collect();
        LoadProfile::from_segments(segments)
    }

    /// `from` until `start`, a linear ramp to `to` over `duration` seconds, then `to` for ever.
    pub fn ramp(from: Load, to: Load, start: f64, duration: f64) -> Result<LoadProfile, LoadError> {
        let end = start + duration;
        let mut segments = Vec::new();
        if start > 0.0 {
            segments.push(Segment {
                start: 0.0,
                end: start,
                from,
                to: from,
            });
        }
        segments.push(Segment {
            start,
            end,
            from,
            to,
        });
        segments.push(Segment {
            start: end,
            end: f64::INFINITY,
            from: to,
            to,
        });
        LoadProfile::from_segments(segments)
    }

    /// Checks and takes segments: finite starts, `start < end`, sorted without overlap, valid
    /// loads, and an infinite end only on a constant segment.
    pub fn from_segments(segments: Vec<Segment>) -> Result<LoadProfile, LoadError> {
        let bad = |index: usize, message: String| LoadError::Segment { index, message };
        for (i, s) in segments.iter().enumerate() {
            if !s.start.is_finite() || s.end.is_nan() || s.end <= s.start {
                return Err(bad(
                    i,
                    format!(
                        "start {} and end {} must satisfy start < end",
                        s.start, s.end
                    ),
                ));
            }
            if s.end.is_infinite() && s.from != s.to {
                return Err(bad(i, "a ramp needs a finite end".into()));
            }
            s.from.validate().map_err(|e| bad(i, e.to_string()))?;
            s.to.validate().map_err(|e| bad(i, e.to_string()))?;
            if i > 0 && segments[i - 1].end > s.start {
                return Err(bad(
                    i,
                    format!(
                        "starts at {} before the previous segment ends at {}",
                        s.start,
                        segments[i - 1].end
                    ),
                ));
            }
        }
        Ok(LoadProfile { segments })
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The load at `t` seconds from the origin.
    pub fn load_at(&self, t: f64) -> Load {
        self.segments
            .iter()
            .find(|s| s.start <= t && t < s.end)
            .map_or(Load::IDLE, |s| s.load_at(t))
    }

    /// Requests and tokens arriving in `[a, b)` seconds from the origin.
    pub fn arrivals(&self, a: f64, b: f64) -> Arrivals {
        let mut total = Arrivals::default();
        if a.is_nan() || b.is_nan() || b <= a {
            return total;
        }
        // Segments are sorted by start; skip the ones that end before `a`.
        let first = self.segments.partition_point(|s| s.end <= a);
        for s in &self.segments[first..] {
            if s.start >= b {
                break;
            }
            total.add(&s.arrivals(a.max(s.start), b.min(s.end)));
        }
        total
    }

    /// The last finite segment end (0 for an empty profile, infinite for an open one).
    pub fn end(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(rps: f64) -> Load {
        Load::new(rps, 1000.0, 200.0, 0.25).unwrap()
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} != {b}");
    }

    #[test]
    fn constant_arrivals_are_rate_times_time() {
        let p = LoadProfile::constant(load(4.0)).unwrap();
        let a = p.arrivals(10.0, 25.0);
        close(a.requests, 60.0);
        close(a.prompt_tokens, 60_000.0);
        close(a.prefix_hit_tokens, 15_000.0);
        close(a.missed_prompt_tokens(), 45_000.0);
        close(a.output_tokens, 12_000.0);
    }

    #[test]
    fn steps_split_an_interval_exactly() {
        let p = LoadProfile::steps(&[(0.0, load(1.0)), (10.0, load(3.0))]).unwrap();
        close(p.arrivals(5.0, 15.0).requests, 5.0 + 15.0);
        assert_eq!(p.load_at(9.99).requests_per_second, 1.0);
        assert_eq!(p.load_at(10.0).requests_per_second, 3.0);
        let late = LoadProfile::steps(&[(30.0, load(2.0))]).unwrap();
        assert_eq!(late.arrivals(0.0, 30.0), Arrivals::default());
    }

    #[test]
    fn a_ramp_integrates_products_exactly() {
        // Rate 0 → 10 and prompt 100 → 300 over 10 s: ∫ r·p = ∫ t·(100 + 20t) dt on 0..10.
        let from = Load::new(0.0, 100.0, 0.0, 0.0).unwrap();
        let to = Load::new(10.0, 300.0, 0.0, 0.0).unwrap();
        let p = LoadProfile::ramp(from, to, 0.0, 10.0).unwrap();
        close(p.arrivals(0.0, 10.0).requests, 50.0);
        close(
            p.arrivals(0.0, 10.0).prompt_tokens,
            5000.0 + 20.0 * 1000.0 / 3.0,
        );
        close(p.arrivals(10.0, 12.0).requests, 20.0);
        assert_eq!(p.load_at(5.0).requests_per_second, 5.0);
    }

    #[test]
    fn bad_loads_and_segments_are_named() {
        let err = Load::new(-1.0, 1.0, 1.0, 0.0).unwrap_err();
        assert!(err.to_string().contains("requests_per_second"), "{err}");
        assert!(Load::new(1.0, 1.0, 1.0, 1.5).is_err());
        assert!(Load::new(f64::NAN, 1.0, 1.0, 0.5).is_err());
        let err = LoadProfile::steps(&[(5.0, load(1.0)), (2.0, load(1.0))]).unwrap_err();
        assert!(err.to_string().starts_with("segment 0"), "{err}");
        let open_ramp = Segment {
            start: 0.0,
            end: f64::INFINITY,
            from: load(1.0),
            to: load(2.0),
        };
        assert!(LoadProfile::from_segments(vec![open_ramp]).is_err());
    }
}
