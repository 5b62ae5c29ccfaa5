//! A load from a rate curve: a CSV of windows, each with a start, a request rate and mean
//! request lengths (as ServeGen's per-10-minute curves give them), with no individual
//! requests. Arrivals inside each window are a seeded Poisson process at the window's rate
//! times a scale; lengths are drawn around the window's means as a synthetic load draws them.
//!
//! A window of rate 0 is a gap in the collection, not an idle service: it takes the rate and
//! lengths of the window before it (the first non-zero window for leading gaps), and the
//! description counts how many were filled.

use super::synthetic::{MAX_REQUESTS, around};
use super::trace::{Trace, TraceRequest};
use crate::rng::Rng;

/// The columns read, by header name.
const START: &str = "t_start_s";
const RATE: &str = "total_rate_rps";
const PROMPT: &str = "mean_input_tokens_est";
const OUTPUT: &str = "mean_output_tokens_est";

/// One window of the curve.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    start: f64,
    rate: f64,
    prompt: u32,
    output: u32,
}

/// A rate curve, scaled.
#[derive(Clone, Debug, PartialEq)]
pub struct RateCurve {
    windows: Vec<Window>,
    /// Seconds the curve covers (the last window as long as the one before it).
    pub duration_seconds: f64,
    pub scale: f64,
    /// Zero-rate windows filled from their neighbour.
    pub gaps_filled: usize,
}

impl RateCurve {
    /// Reads the CSV (header naming at least `t_start_s`, `total_rate_rps`,
    /// `mean_input_tokens_est` and `mean_output_tokens_est`; starts increasing) and scales its
    /// rates by `scale`. Every error names the line and the rule broken.
    pub fn parse_csv(text: &str, scale: f64) -> Result<RateCurve, String> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(format!("scale is {scale}; it must be a positive number"));
        }
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let Some((_, header)) = lines.next() else {
            return Err("the curve is empty: line 1 must be a header".into());
        };
        let columns: Vec<&str> = header.split(',').map(str::trim).collect();
        let index = |name: &str| {
            columns
                .iter()
                .position(|c| *c == name)
                .ok_or_else(|| format!("line 1: the header has no column {name}"))
        };
        let (start, rate, prompt, output) =
            (index(START)?, index(RATE)?, index(PROMPT)?, index(OUTPUT)?);
        let mut raw: Vec<(usize, f64, f64, f64, f64)> = Vec::new();
        for (i, line) in lines {
            let n = i + 1;
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let cell = |at: usize, name: &str| -> Result<f64, String> {
                let text = cells
                    .get(at)
                    .ok_or_else(|| format!("line {n}: no {name} cell"))?;
                match text.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                    _ => Err(format!(
                        "line {n}: {name} {text:?} is not a number of at least 0"
                    )),
                }
            };
            let row = (
                n,
                cell(start, START)?,
                cell(rate, RATE)?,
                cell(prompt, PROMPT)?,
                cell(output, OUTPUT)?,
            );
            if let Some(last) = raw.last()
                && row.1 <= last.1
            {
                return Err(format!(
                    "line {n}: {START} {} is not after the line before's {}",
                    row.1, last.1
                ));
            }
            raw.push(row);
        }
        let Some(first_live) = raw.iter().find(|r| r.2 > 0.0) else {
            return Err("every window's rate is 0: the curve offers nothing".into());
        };
        let mut previous = *first_live;
        let mut gaps_filled = 0;
        let windows: Vec<Window> = raw
            .iter()
            .map(|&r| {
                let live = if r.2 > 0.0 {
                    previous = r;
                    r
                } else {
                    gaps_filled += 1;
                    previous
                };
                Window {
                    start: r.1,
                    rate: live.2 * scale,
                    prompt: (live.3.round() as u32).max(1),
                    output: (live.4.round() as u32).max(1),
                }
            })
            .collect();
        let width = match windows.as_slice() {
            [.., a, b] => b.start - a.start,
            _ => 600.0,
        };
        let duration_seconds = windows.last().map_or(0.0, |w| w.start + width);
        let offset = windows.first().map_or(0.0, |w| w.start);
        Ok(RateCurve {
            windows: windows
                .into_iter()
                .map(|w| Window {
                    start: w.start - offset,
                    ..w
                })
                .collect(),
            duration_seconds: duration_seconds - offset,
            scale,
            gaps_filled,
        })
    }

    /// About how many requests the curve offers between `from` and `until` seconds (`None`:
    /// its end).
    pub fn expected_requests(&self, from: f64, until: Option<f64>) -> f64 {
        let until = until.unwrap_or(self.duration_seconds);
        self.windows
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let end = self
                    .windows
                    .get(i + 1)
                    .map_or(self.duration_seconds, |n| n.start);
                w.rate * (end.min(until) - w.start.max(from)).max(0.0)
            })
            .sum()
    }

    /// The requests for `seed` between `from` and `until` seconds, sorted, at their times on
    /// the curve (from 0, the first window's start). The arrivals before `from` are drawn and
    /// dropped, so a window of the curve is the same requests as that window of the whole.
    /// More than [`MAX_REQUESTS`] in the window is refused.
    pub fn generate_within(
        &self,
        seed: u64,
        from: f64,
        until: Option<f64>,
    ) -> Result<Trace, String> {
        let expected = self.expected_requests(from, until);
        if expected > MAX_REQUESTS {
            return Err(format!(
                "the curve scaled by {} offers about {expected:.0} requests in the window run; \
                 at most {MAX_REQUESTS} are allowed (lower the scale or narrow --from/--until)",
                self.scale
            ));
        }
        let until = until.unwrap_or(self.duration_seconds);
        let mut arrivals = Rng::stream(seed, "curve-arrivals");
        let mut prompts = Rng::stream(seed, "curve-prompt-tokens");
        let mut outputs = Rng::stream(seed, "curve-output-tokens");
        let mut requests = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            if w.start >= until {
                break;
            }
            let end = self
                .windows
                .get(i + 1)
                .map_or(self.duration_seconds, |n| n.start);
            let mut t = w.start;
            loop {
                t += arrivals.exponential(w.rate);
                if t >= end {
                    break;
                }
                let prompt = around(&mut prompts, w.prompt);
                let output = around(&mut outputs, w.output);
                if t >= from && t < until {
                    requests.push(TraceRequest::plain(t, prompt, output));
                }
            }
        }
        Ok(Trace { requests })
    }

    /// The requests for `seed` over the whole curve (see [`RateCurve::generate_within`]).
    pub fn generate(&self, seed: u64) -> Result<Trace, String> {
        self.generate_within(seed, 0.0, None)
    }

    /// A one-line description for reports.
    pub fn describe(&self, file: &str) -> String {
        let gaps = match self.gaps_filled {
            0 => String::new(),
            1 => ", 1 zero-rate window filled from the one before".into(),
            n => format!(", {n} zero-rate windows filled from the one before"),
        };
        format!(
            "rate curve {file} x{} over {:.1} h ({} windows{gaps}); prompts and outputs \
             around each window's means (uniform ±50 %)",
            self.scale,
            self.duration_seconds / 3600.0,
            self.windows.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CURVE: &str = "t_start_s,total_rate_rps,mean_input_tokens_est,mean_output_tokens_est\n\
                         600,10,100,50\n1200,0,0,0\n1800,20,200,100\n";

    #[test]
    fn windows_are_scaled_gaps_filled_and_arrivals_follow_the_rate() {
        let c = RateCurve::parse_csv(CURVE, 0.5).unwrap();
        assert_eq!((c.duration_seconds, c.gaps_filled), (1800.0, 1));
        let t = c.generate(7).unwrap();
        assert_eq!(t, c.generate(7).unwrap(), "seeded");
        // A window of the curve is that window of the whole.
        let part = c.generate_within(7, 700.0, Some(1500.0)).unwrap();
        let whole: Vec<_> = t
            .requests
            .iter()
            .filter(|r| (700.0..1500.0).contains(&r.at_seconds))
            .cloned()
            .collect();
        assert_eq!(part.requests, whole);
        let count = |from: f64, to: f64| {
            t.requests
                .iter()
                .filter(|r| (from..to).contains(&r.at_seconds))
                .count() as f64
        };
        // 5 req/s, the gap filled at 5, then 10, for 600 s each.
        for (from, rate) in [(0.0, 5.0), (600.0, 5.0), (1200.0, 10.0)] {
            let n = count(from, from + 600.0);
            assert!((n / 600.0 - rate).abs() < 0.5, "{from}: {n}");
        }
        let late = t.requests.iter().filter(|r| r.at_seconds >= 1200.0);
        assert!(late.clone().all(|r| (100..=300).contains(&r.prompt_tokens)));
        assert!(c.describe("f.csv").contains("1 zero-rate window filled"));
    }

    #[test]
    fn bad_curves_name_the_line_and_the_rule() {
        let err = |text: &str, scale: f64| RateCurve::parse_csv(text, scale).unwrap_err();
        assert!(err(CURVE, 0.0).contains("scale"));
        assert!(err("a,b\n1,2\n", 1.0).contains("no column t_start_s"));
        assert!(err(&CURVE.replace("1800,20", "1800,x"), 1.0).contains("line 4"));
        assert!(err(&CURVE.replace("1800,20", "900,20"), 1.0).contains("not after"));
        assert!(
            err(
                &CURVE
                    .replace("600,10", "600,0")
                    .replace("1800,20", "1800,0"),
                1.0
            )
            .contains("offers nothing")
        );
        // Too many requests is refused when the run's window is generated.
        let huge = RateCurve::parse_csv(CURVE, 1e6).unwrap();
        assert!(huge.generate(1).unwrap_err().contains("at most"));
        assert!(huge.generate_within(1, 0.0, Some(1.0)).is_ok());
        assert!(err("", 1.0).contains("empty"));
    }
}
