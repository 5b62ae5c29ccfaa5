//! A load from a rate curve: a CSV of windows, each with a start, a request rate and mean
//! request lengths (as ServeGen's per-10-minute curves give them), with no individual
//! requests. Arrivals inside each window are a seeded Poisson process at the window's rate
//! times a scale; lengths are drawn around the window's means as a synthetic load draws them.
//!
//! A window of rate 0 in a CSV is a gap in the collection, not an idle service: it takes the
//! rate and lengths of the window before it (the first non-zero window for leading gaps), and
//! the description counts how many were filled. A curve built in code from windows
//! ([`RateCurve::from_windows`], as `mds simulate --from-prometheus` measures them) knows its
//! gaps and has filled them already, so there a window of rate 0 is idle.
//!
//! A window may carry a prefix-hit share (the optional `prefix_hit_share` column, or
//! [`CurveWindow::prefix_hit_share`]): the share of its prompt tokens a prefix cache served.
//! Its requests then carry block hashes whose leading spans are shared by every such request
//! (one common prefix, as a system prompt is), as many as make the share on average, and
//! their `prefix_hit_tokens` are what an unlimited cache would serve, as a Mooncake trace's
//! are. A window without a share (every window of a curve without the column) draws nothing
//! more, so such curves give the requests they always gave.

use std::sync::Arc;

use super::synthetic::{MAX_REQUESTS, around};
use super::trace::{Trace, TraceRequest};
use crate::rng::Rng;

/// The columns read, by header name.
const START: &str = "t_start_s";
const RATE: &str = "total_rate_rps";
const PROMPT: &str = "mean_input_tokens_est";
const OUTPUT: &str = "mean_output_tokens_est";
/// The optional column of each window's prefix-hit share, 0 to 1.
const SHARE: &str = "prefix_hit_share";

/// Prompt tokens per block hash: a Mooncake trace's span, and the request-level engine's
/// `KV_BLOCKS_PER_HASH` blocks of 16 tokens.
const HASH_SPAN_TOKENS: u32 = 512;
/// The first id of the shared spans' hashes; the other spans' ids count up from 1, far below.
const SHARED_HASH_BASE: u64 = 1 << 62;

/// One window of the curve.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    start: f64,
    rate: f64,
    prompt: u32,
    output: u32,
    /// The share of prompt tokens a prefix cache serves; 0: no prefix information.
    prefix_hit_share: f64,
}

/// One window of a curve built in code: its mean request rate (requests per second, before
/// the scale), mean prompt and output lengths in tokens, and the share of its prompt tokens a
/// prefix cache served (0 to 1; 0 draws no hashes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurveWindow {
    pub rate: f64,
    pub prompt_tokens: f64,
    pub output_tokens: f64,
    pub prefix_hit_share: f64,
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
        let share = columns.iter().position(|c| *c == SHARE);
        let mut raw: Vec<(usize, f64, f64, f64, f64, f64)> = Vec::new();
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
            let hit_share = match share {
                Some(at) => {
                    let value = cell(at, SHARE)?;
                    if value > 1.0 {
                        return Err(format!(
                            "line {n}: {SHARE} {value} is not a share from 0 to 1"
                        ));
                    }
                    value
                }
                None => 0.0,
            };
            let row = (
                n,
                cell(start, START)?,
                cell(rate, RATE)?,
                cell(prompt, PROMPT)?,
                cell(output, OUTPUT)?,
                hit_share,
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
                    prefix_hit_share: live.5,
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

    /// Windows of `width_seconds` each, back to back from 0, with their rates scaled by
    /// `scale`. A window of rate 0 is idle (no arrivals): the caller has filled its gaps.
    /// Refused: a width or scale that is not a positive number, no window, a rate or length
    /// that is not a finite number of at least 0, a share outside 0 to 1, or no window with
    /// requests. Lengths are rounded to whole tokens, at least 1. Errors name the window (from
    /// 1) and the rule.
    pub fn from_windows(
        width_seconds: f64,
        windows: &[CurveWindow],
        scale: f64,
    ) -> Result<RateCurve, String> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(format!("scale is {scale}; it must be a positive number"));
        }
        if !(width_seconds.is_finite() && width_seconds > 0.0) {
            return Err(format!(
                "the window width is {width_seconds} s; it must be a positive number of seconds"
            ));
        }
        if windows.is_empty() {
            return Err("the curve has no window".into());
        }
        let mut out = Vec::with_capacity(windows.len());
        for (i, w) in windows.iter().enumerate() {
            for (name, value) in [
                ("rate", w.rate),
                ("prompt_tokens", w.prompt_tokens),
                ("output_tokens", w.output_tokens),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(format!(
                        "window {}: {name} is {value}; it must be a finite number of at least 0",
                        i + 1
                    ));
                }
            }
            if !(0.0..=1.0).contains(&w.prefix_hit_share) {
                return Err(format!(
                    "window {}: prefix_hit_share is {}; it must be a share from 0 to 1",
                    i + 1,
                    w.prefix_hit_share
                ));
            }
            let tokens = |mean: f64| (mean.round().min(f64::from(u32::MAX)) as u32).max(1);
            out.push(Window {
                start: i as f64 * width_seconds,
                rate: w.rate * scale,
                prompt: tokens(w.prompt_tokens),
                output: tokens(w.output_tokens),
                prefix_hit_share: w.prefix_hit_share,
            });
        }
        if out.iter().all(|w| w.rate <= 0.0) {
            return Err("every window's rate is 0: the curve offers nothing".into());
        }
        Ok(RateCurve {
            duration_seconds: out.len() as f64 * width_seconds,
            windows: out,
            scale,
            gaps_filled: 0,
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
        let mut prefix_draws = Rng::stream(seed, "curve-prefix-spans");
        let mut prefixes = Prefixes::default();
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
                // Past `until` nothing more is kept, here or in a later window.
                if t >= end || t >= until {
                    break;
                }
                let prompt = around(&mut prompts, w.prompt);
                let output = around(&mut outputs, w.output);
                // Drawn before the window is cut, so a window of the curve is that window of
                // the whole, hashes included.
                let shared = (w.prefix_hit_share > 0.0)
                    .then(|| prefixes.draw(&mut prefix_draws, prompt, w.prefix_hit_share));
                if t >= from && t < until {
                    let mut request = TraceRequest::plain(t, prompt, output);
                    if let Some((hit_tokens, hashes)) = shared {
                        request.prefix_hit_tokens = hit_tokens;
                        request.block_hashes = Some(hashes);
                    }
                    requests.push(request);
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
        let prefixes = if self.windows.iter().any(|w| w.prefix_hit_share > 0.0) {
            "; prompts share a common prefix at each window's prefix-hit share"
        } else {
            ""
        };
        format!(
            "rate curve {file} x{} over {:.1} h ({} windows{gaps}); prompts and outputs \
             around each window's means (uniform ±50 %){prefixes}",
            self.scale,
            self.duration_seconds / 3600.0,
            self.windows.len()
        )
    }
}

/// The block hashes of requests that share a common prefix, and how deep it has been seen.
#[derive(Debug, Default)]
struct Prefixes {
    /// The most shared spans any request so far carried.
    deepest: u32,
    /// The last id given to a span of one request's own.
    last_own: u64,
}

impl Prefixes {
    /// The hashes of a `prompt`-token request whose expected share of prompt tokens in the
    /// common prefix is `share`, and the tokens an unlimited cache would serve it (the
    /// leading shared spans seen before, at most the prompt). The prefix covers whole spans,
    /// or the whole prompt: the number of spans is the one below or above `share` times the
    /// prompt, picked at random so that its mean is exact. One draw per request.
    fn draw(&mut self, rng: &mut Rng, prompt: u32, share: f64) -> (u32, Arc<[u64]>) {
        let spans = prompt.div_ceil(HASH_SPAN_TOKENS);
        let target = share.clamp(0.0, 1.0) * f64::from(prompt);
        let covered = |n: u32| f64::from(n.saturating_mul(HASH_SPAN_TOKENS).min(prompt));
        let below = ((target / f64::from(HASH_SPAN_TOKENS)).floor() as u32).min(spans);
        let u = rng.unit();
        let shared = if below >= spans {
            spans
        } else {
            let (low, high) = (covered(below), covered(below + 1));
            let up = high > low && u <= (target - low) / (high - low);
            below + u32::from(up)
        };
        let seen = shared.min(self.deepest);
        self.deepest = self.deepest.max(shared);
        let hit_tokens = seen.saturating_mul(HASH_SPAN_TOKENS).min(prompt);
        let hashes: Arc<[u64]> = (0..spans)
            .map(|span| {
                if span < shared {
                    SHARED_HASH_BASE + u64::from(span)
                } else {
                    self.last_own += 1;
                    self.last_own
                }
            })
            .collect();
        (hit_tokens, hashes)
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

    fn window(rate: f64, prompt: f64, share: f64) -> CurveWindow {
        CurveWindow {
            rate,
            prompt_tokens: prompt,
            output_tokens: 100.0,
            prefix_hit_share: share,
        }
    }

    #[test]
    fn windows_from_code_are_idle_at_rate_zero_and_share_prefixes_at_their_share() {
        let windows = [
            window(4.0, 1000.0, 0.0),
            window(0.0, 1.0, 0.0),
            window(8.0, 1500.0, 0.4),
        ];
        let c = RateCurve::from_windows(600.0, &windows, 0.5).unwrap();
        assert_eq!((c.duration_seconds, c.gaps_filled), (1800.0, 0));
        let t = c.generate(3).unwrap();
        assert_eq!(t, c.generate(3).unwrap(), "seeded");
        let part = c.generate_within(3, 1000.0, Some(1700.0)).unwrap();
        let whole: Vec<_> = t
            .requests
            .iter()
            .filter(|r| (1000.0..1700.0).contains(&r.at_seconds))
            .cloned()
            .collect();
        assert_eq!(part.requests, whole, "a window is that window of the whole");
        let within = |from: f64| {
            t.requests
                .iter()
                .filter(move |r| (from..from + 600.0).contains(&r.at_seconds))
        };
        // 2 req/s without prefixes, idle, then 4 req/s sharing 40 % of prompt tokens.
        assert!((within(0.0).count() as f64 / 600.0 - 2.0).abs() < 0.3);
        assert!(within(0.0).all(|r| r.block_hashes.is_none() && r.prefix_hit_tokens == 0));
        assert_eq!(within(600.0).count(), 0, "a window of rate 0 is idle");
        let last: Vec<_> = within(1200.0).collect();
        assert!((last.len() as f64 / 600.0 - 4.0).abs() < 0.4);
        let prompt: f64 = last.iter().map(|r| f64::from(r.prompt_tokens)).sum();
        let hits: f64 = last.iter().map(|r| f64::from(r.prefix_hit_tokens)).sum();
        assert!((hits / prompt - 0.4).abs() < 0.03, "{}", hits / prompt);
        for r in &last {
            let hashes = r.block_hashes.as_deref().unwrap();
            assert_eq!(hashes.len() as u32, r.prompt_tokens.div_ceil(512));
            assert!(r.prefix_hit_tokens <= r.prompt_tokens);
            // The shared spans lead, and every request's own spans are its own.
            let shared = hashes
                .iter()
                .take_while(|h| **h >= SHARED_HASH_BASE)
                .count();
            assert!(hashes[shared..].iter().all(|h| *h < SHARED_HASH_BASE));
        }
        assert!(c.describe("x").contains("common prefix"));
    }

    #[test]
    fn windows_from_code_are_checked() {
        let err = |width: f64, windows: &[CurveWindow]| {
            RateCurve::from_windows(width, windows, 1.0).unwrap_err()
        };
        assert!(err(0.0, &[window(1.0, 1.0, 0.0)]).contains("width"));
        assert!(err(60.0, &[]).contains("no window"));
        assert!(err(60.0, &[window(f64::NAN, 1.0, 0.0)]).starts_with("window 1: rate"));
        assert!(
            err(60.0, &[window(1.0, 1.0, 0.0), window(1.0, 1.0, 1.5)])
                .starts_with("window 2: prefix_hit_share")
        );
        assert!(err(60.0, &[window(0.0, 1.0, 0.0)]).contains("offers nothing"));
        assert!(RateCurve::from_windows(60.0, &[window(1.0, 1.0, 0.0)], -1.0).is_err());
    }

    #[test]
    fn a_csv_may_give_each_window_a_prefix_hit_share() {
        let text = "t_start_s,total_rate_rps,mean_input_tokens_est,mean_output_tokens_est,prefix_hit_share\n\
                    0,5,2000,50,0.5\n600,0,0,0,0\n";
        let c = RateCurve::parse_csv(text, 1.0).unwrap();
        assert_eq!(c.gaps_filled, 1);
        let t = c.generate(1).unwrap();
        let prompt: f64 = t.requests.iter().map(|r| f64::from(r.prompt_tokens)).sum();
        let hits: f64 = t
            .requests
            .iter()
            .map(|r| f64::from(r.prefix_hit_tokens))
            .sum();
        // The gap takes the share of the window before it.
        assert!((hits / prompt - 0.5).abs() < 0.03, "{}", hits / prompt);
        let bad = text.replace("0.5\n", "1.5\n");
        assert!(
            RateCurve::parse_csv(&bad, 1.0)
                .unwrap_err()
                .contains("line 2: prefix_hit_share 1.5")
        );
        // Without the column, no request carries hashes.
        let plain = RateCurve::parse_csv(CURVE, 1.0)
            .unwrap()
            .generate(1)
            .unwrap();
        assert!(plain.requests.iter().all(|r| r.block_hashes.is_none()));
    }
}
