//! Synthetic request streams: a rate shape over time sampled as a Poisson process, so a policy
//! can be tried on loads no recorded trace has (a clean step, a flash crowd, an on/off cycle)
//! through the same per-request [`Trace`] a replay uses.
//!
//! The command line names a load with a spec, `NAME:key=value,key=value`
//! (see [`Synthetic::parse`]); [`Synthetic::generate`] turns it into a trace for a seed.

use std::f64::consts::TAU;

use super::trace::{Trace, TraceRequest};
use crate::rng::Rng;

/// The trace length when a spec gives none: one hour.
pub const DEFAULT_DURATION_SECONDS: f64 = 3600.0;
/// The mean prompt length when a spec gives none.
pub const DEFAULT_PROMPT_TOKENS: u32 = 1024;
/// The mean output length when a spec gives none.
pub const DEFAULT_OUTPUT_TOKENS: u32 = 256;
/// The most requests a synthetic load may ask for (its maximum rate times its duration), so a
/// mistyped rate fails with a message instead of exhausting memory.
pub const MAX_REQUESTS: f64 = 20_000_000.0;
/// The shape names [`Synthetic::parse`] knows, in the order the errors list them.
pub const SHAPE_NAMES: [&str; 6] = [
    "constant",
    "step",
    "ramp",
    "sinusoid",
    "flash-crowd",
    "on-off",
];

/// A request rate over time. Rates are requests per second, times seconds from the start of
/// the generated trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// The same rate throughout: the baseline every policy should hold steady on.
    Constant { rate: f64 },
    /// `from` before `at`, `to` from `at` on: the cleanest test of reaction time.
    Step { from: f64, to: f64, at: f64 },
    /// `from` until `start`, linearly to `to` over `duration` seconds, then `to`: growth a
    /// policy can follow without a jump.
    Ramp {
        from: f64,
        to: f64,
        start: f64,
        duration: f64,
    },
    /// `mean + amplitude * sin(2π t / period)`, clamped at 0: a daily cycle, compressed.
    Sinusoid {
        mean: f64,
        amplitude: f64,
        period: f64,
    },
    /// `base`, then from `at` a linear rise to `peak` over `rise` seconds, `peak` for `hold`
    /// seconds, a linear decay back to `base` over `decay` seconds, then `base`: a sudden crowd
    /// that tests scale-up speed and the scale-down after it.
    FlashCrowd {
        base: f64,
        peak: f64,
        at: f64,
        rise: f64,
        hold: f64,
        decay: f64,
    },
    /// `rate` for `on` seconds, then nothing for `off` seconds, repeating from the start: tests
    /// scale-to-zero and the cold start after it.
    OnOff { rate: f64, on: f64, off: f64 },
}

/// Whether a parameter is a rate (a plain number) or a time (seconds, or a suffix `s`, `m`,
/// `h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Rate,
    Time,
}

/// Each shape's keys in the spec, in order, with their kind.
fn shape_keys(name: &str) -> Option<&'static [(&'static str, Kind)]> {
    use Kind::{Rate, Time};
    Some(match name {
        "constant" => &[("rate", Rate)],
        "step" => &[("from", Rate), ("to", Rate), ("at", Time)],
        "ramp" => &[
            ("from", Rate),
            ("to", Rate),
            ("start", Time),
            ("over", Time),
        ],
        "sinusoid" => &[("mean", Rate), ("amplitude", Rate), ("period", Time)],
        "flash-crowd" => &[
            ("base", Rate),
            ("peak", Rate),
            ("at", Time),
            ("rise", Time),
            ("hold", Time),
            ("decay", Time),
        ],
        "on-off" => &[("rate", Rate), ("on", Time), ("off", Time)],
        _ => return None,
    })
}

impl Shape {
    /// The shape's name in a spec.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Constant { .. } => "constant",
            Shape::Step { .. } => "step",
            Shape::Ramp { .. } => "ramp",
            Shape::Sinusoid { .. } => "sinusoid",
            Shape::FlashCrowd { .. } => "flash-crowd",
            Shape::OnOff { .. } => "on-off",
        }
    }

    /// The parameters as the spec names them, in the spec's order.
    fn params(&self) -> Vec<(&'static str, f64)> {
        match *self {
            Shape::Constant { rate } => vec![("rate", rate)],
            Shape::Step { from, to, at } => vec![("from", from), ("to", to), ("at", at)],
            Shape::Ramp {
                from,
                to,
                start,
                duration,
            } => vec![
                ("from", from),
                ("to", to),
                ("start", start),
                ("over", duration),
            ],
            Shape::Sinusoid {
                mean,
                amplitude,
                period,
            } => vec![("mean", mean), ("amplitude", amplitude), ("period", period)],
            Shape::FlashCrowd {
                base,
                peak,
                at,
                rise,
                hold,
                decay,
            } => vec![
                ("base", base),
                ("peak", peak),
                ("at", at),
                ("rise", rise),
                ("hold", hold),
                ("decay", decay),
            ],
            Shape::OnOff { rate, on, off } => vec![("rate", rate), ("on", on), ("off", off)],
        }
    }

    /// The rate at `t` seconds, in requests per second (never negative).
    pub fn rate_at(&self, t: f64) -> f64 {
        let rate = match *self {
            Shape::Constant { rate } => rate,
            Shape::Step { from, to, at } => {
                if t < at {
                    from
                } else {
                    to
                }
            }
            Shape::Ramp {
                from,
                to,
                start,
                duration,
            } => {
                if t < start {
                    from
                } else if t >= start + duration {
                    to
                } else {
                    from + (to - from) * (t - start) / duration
                }
            }
            Shape::Sinusoid {
                mean,
                amplitude,
                period,
            } => mean + amplitude * (TAU * t / period).sin(),
            Shape::FlashCrowd {
                base,
                peak,
                at,
                rise,
                hold,
                decay,
            } => {
                let top = at + rise;
                let fall = top + hold;
                let end = fall + decay;
                if t < at || t >= end {
                    base
                } else if t < top {
                    base + (peak - base) * (t - at) / rise
                } else if t < fall {
                    peak
                } else {
                    peak - (peak - base) * (t - fall) / decay
                }
            }
            Shape::OnOff { rate, on, off } => {
                let cycle = on + off;
                if cycle > 0.0 && t.rem_euclid(cycle) < on {
                    rate
                } else {
                    0.0
                }
            }
        };
        // `max` also turns a NaN (from parameters `validate` rejects) into 0.
        rate.max(0.0)
    }

    /// The highest rate the shape reaches: the rate at which [`Synthetic::generate`] draws
    /// candidate arrivals before thinning.
    pub fn max_rate(&self) -> f64 {
        let max = match *self {
            Shape::Constant { rate } | Shape::OnOff { rate, .. } => rate,
            Shape::Step { from, to, .. } | Shape::Ramp { from, to, .. } => from.max(to),
            Shape::Sinusoid {
                mean, amplitude, ..
            } => mean + amplitude.abs(),
            Shape::FlashCrowd { base, peak, .. } => base.max(peak),
        };
        max.max(0.0)
    }

    /// Checks the shape's own rules; errors name the shape and the key.
    fn validate(&self) -> Result<(), String> {
        let name = self.name();
        for (key, value) in self.params() {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!(
                    "{name}: {key} is {value}; it must be a finite number of at least 0"
                ));
            }
        }
        match *self {
            Shape::Sinusoid { period, .. } if period <= 0.0 => {
                Err(format!("sinusoid: period is {period}; it must be positive"))
            }
            Shape::FlashCrowd { base, peak, .. } if peak < base => Err(format!(
                "flash-crowd: peak ({peak}) must be at least base ({base})"
            )),
            Shape::OnOff { on, .. } if on <= 0.0 => Err(format!(
                "on-off: on is {on}; it must be positive (a load that is never on has no requests)"
            )),
            _ => Ok(()),
        }
    }

    /// A short description of the shape alone.
    fn describe(&self) -> String {
        match *self {
            Shape::Constant { rate } => format!("constant {rate} req/s"),
            Shape::Step { from, to, at } => format!("step from {from} to {to} req/s at {at} s"),
            Shape::Ramp {
                from,
                to,
                start,
                duration,
            } => format!("ramp from {from} to {to} req/s over {duration} s from {start} s"),
            Shape::Sinusoid {
                mean,
                amplitude,
                period,
            } => format!("sinusoid {mean} ± {amplitude} req/s with a period of {period} s"),
            Shape::FlashCrowd {
                base,
                peak,
                at,
                rise,
                hold,
                decay,
            } => format!(
                "flash crowd from {base} to {peak} req/s at {at} s \
                 (rise {rise} s, hold {hold} s, decay {decay} s)"
            ),
            Shape::OnOff { rate, on, off } => {
                format!("on-off {rate} req/s for {on} s, then none for {off} s, repeating")
            }
        }
    }
}

/// A synthetic load: a rate shape, how long it lasts and the mean request lengths.
#[derive(Clone, Debug, PartialEq)]
pub struct Synthetic {
    /// The rate over time.
    pub shape: Shape,
    /// The generated trace covers `[0, duration_seconds)`.
    pub duration_seconds: f64,
    /// The mean prompt length in tokens.
    pub prompt_tokens: u32,
    /// The mean output length in tokens.
    pub output_tokens: u32,
}

impl Synthetic {
    /// The key that sets the trace's length in a spec (`length` is the same key).
    fn length_key(&self) -> &'static str {
        "duration"
    }

    /// Reads a `--load` spec: `NAME:key=value,key=value`.
    ///
    /// Shapes and their keys (all required): `constant:rate`, `step:from,to,at`,
    /// `ramp:from,to,start,over` (`over`: the ramp's own length), `sinusoid:mean,amplitude,period`,
    /// `flash-crowd:base,peak,at,rise,hold,decay`, `on-off:rate,on,off`. Every shape also takes
    /// `duration` (the trace's length, 3600 s by default; `length` is the same key), `prompt` (mean prompt tokens,
    /// 1024) and `output` (mean output tokens, 256). Rates are plain numbers in requests per
    /// second; times are seconds or carry a suffix `s`, `m` or `h` (`90s`, `10m`, `1.5h`).
    /// Spaces around items are ignored, and so are empty items.
    ///
    /// Every error names the shape or key and the rule broken; no string panics.
    pub fn parse(spec: &str) -> Result<Synthetic, String> {
        let spec = spec.trim();
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim();
        let Some(keys) = shape_keys(name) else {
            return Err(format!(
                "unknown load shape {name:?}; known shapes: {}",
                SHAPE_NAMES.join(", ")
            ));
        };
        let common = ["duration", "length", "prompt", "output"];
        let allowed: Vec<&str> = keys.iter().map(|(k, _)| *k).chain(common).collect();

        let given = key_values(name, rest, &allowed)?;
        let find = |key: &str| given.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);

        let mut values = Vec::with_capacity(keys.len());
        for &(key, kind) in keys {
            let Some(text) = find(key) else {
                let required: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
                let hint = if key == "over" {
                    " (the ramp's own length; duration is the whole load's)"
                } else {
                    ""
                };
                return Err(format!(
                    "{name}: missing required key {key}{hint}; {name} needs {}",
                    required.join(", ")
                ));
            };
            values.push(number(name, key, text, kind)?);
        }
        let v = |i: usize| values[i];
        let shape = match name {
            "constant" => Shape::Constant { rate: v(0) },
            "step" => Shape::Step {
                from: v(0),
                to: v(1),
                at: v(2),
            },
            "ramp" => Shape::Ramp {
                from: v(0),
                to: v(1),
                start: v(2),
                duration: v(3),
            },
            "sinusoid" => Shape::Sinusoid {
                mean: v(0),
                amplitude: v(1),
                period: v(2),
            },
            "flash-crowd" => Shape::FlashCrowd {
                base: v(0),
                peak: v(1),
                at: v(2),
                rise: v(3),
                hold: v(4),
                decay: v(5),
            },
            _ => Shape::OnOff {
                rate: v(0),
                on: v(1),
                off: v(2),
            },
        };

        let length = match (find("duration"), find("length")) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{name}: duration and length both set the trace's length; give one"
                ));
            }
            (Some(text), None) => number(name, "duration", text, Kind::Time)?,
            (None, Some(text)) => number(name, "length", text, Kind::Time)?,
            (None, None) => DEFAULT_DURATION_SECONDS,
        };
        let tokens = |key: &str, default: u32| match find(key) {
            None => Ok(default),
            Some(text) => match text.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!(
                    "{name}: {key} is {text:?}; it must be a whole number of tokens from 1 to {}",
                    u32::MAX
                )),
            },
        };
        let synthetic = Synthetic {
            shape,
            duration_seconds: length,
            prompt_tokens: tokens("prompt", DEFAULT_PROMPT_TOKENS)?,
            output_tokens: tokens("output", DEFAULT_OUTPUT_TOKENS)?,
        };
        synthetic.validate()?;
        Ok(synthetic)
    }

    /// Checks the rules [`Synthetic::parse`] applies, for a load built in code: shape
    /// parameters finite and at least 0, a positive duration, a positive sinusoid period and
    /// on-off `on`, a flash crowd's `peak` at least its `base`, lengths of at least 1 token,
    /// and at most [`MAX_REQUESTS`] at the maximum rate.
    pub fn validate(&self) -> Result<(), String> {
        self.shape.validate()?;
        let name = self.shape.name();
        let length = self.duration_seconds;
        if !(length.is_finite() && length > 0.0) {
            return Err(format!(
                "{name}: {} is {length} s; the trace's duration must be a positive, finite number",
                self.length_key()
            ));
        }
        for (key, tokens) in [
            ("prompt", self.prompt_tokens),
            ("output", self.output_tokens),
        ] {
            if tokens == 0 {
                return Err(format!("{name}: {key} is 0; it must be at least 1 token"));
            }
        }
        let most = self.shape.max_rate() * length;
        if most > MAX_REQUESTS {
            return Err(format!(
                "{name}: {} req/s over {length} s is up to {most:.0} requests; at most \
                 {MAX_REQUESTS} are allowed (lower the rate or the {})",
                self.shape.max_rate(),
                self.length_key()
            ));
        }
        Ok(())
    }

    /// The spec that [`Synthetic::parse`] reads back into this load, every key written out,
    /// so a report can say exactly what ran.
    pub fn spec(&self) -> String {
        let mut items: Vec<String> = self
            .shape
            .params()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        items.push(format!("{}={}", self.length_key(), self.duration_seconds));
        items.push(format!("prompt={}", self.prompt_tokens));
        items.push(format!("output={}", self.output_tokens));
        format!("{}:{}", self.shape.name(), items.join(","))
    }

    /// A one-line description for reports, e.g. `step from 2 to 8 req/s at 600 s for 3600 s;
    /// prompts ~1024 tokens, outputs ~256 tokens (uniform ±50 %)`.
    pub fn describe(&self) -> String {
        format!(
            "{} for {} s; prompts ~{} tokens, outputs ~{} tokens (uniform ±50 %)",
            self.shape.describe(),
            self.duration_seconds,
            self.prompt_tokens,
            self.output_tokens
        )
    }

    /// The requests of one run for `seed`, sorted, with times in `[0, duration_seconds)`.
    ///
    /// Arrivals are a non-homogeneous Poisson process, drawn by thinning: candidates come at
    /// the shape's maximum rate and each is kept with probability `rate_at(t) / max`. Prompt
    /// and output lengths are each uniform within ±50 % of their means (rounded, at least 1):
    /// spread enough that batches are not all alike, bounded so a run has no freak request,
    /// and with the given mean. Arrivals, prompts and outputs use their own streams of the
    /// seed, so changing a length leaves the arrival times as they were. Requests have no
    /// block hashes and no prefix hits.
    ///
    /// A load that fails [`Synthetic::validate`] gives an empty trace.
    pub fn generate(&self, seed: u64) -> Trace {
        if self.validate().is_err() {
            return Trace::default();
        }
        let max = self.shape.max_rate();
        let mut arrivals = Rng::stream(seed, "synthetic-arrivals");
        let mut prompts = Rng::stream(seed, "synthetic-prompt-tokens");
        let mut outputs = Rng::stream(seed, "synthetic-output-tokens");
        let mut requests = Vec::new();
        let mut t = 0.0;
        loop {
            t += arrivals.exponential(max);
            if t >= self.duration_seconds {
                break;
            }
            if arrivals.unit() * max <= self.shape.rate_at(t) {
                let prompt = around(&mut prompts, self.prompt_tokens);
                let output = around(&mut outputs, self.output_tokens);
                requests.push(TraceRequest::plain(t, prompt, output));
            }
        }
        Trace { requests }
    }
}

/// A length uniform within ±50 % of `mean`, rounded, at least 1.
pub(super) fn around(rng: &mut Rng, mean: u32) -> u32 {
    let x = f64::from(mean) * rng.uniform(0.5, 1.5);
    (x.round() as u32).max(1)
}

/// A time in seconds from text: a plain number of seconds, or a number with `ms`, `s`, `m` or
/// `h`; finite and not negative. The error says what the text must be.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (digits, scale) = if let Some(d) = text.strip_suffix("ms") {
        (d, 0.001)
    } else if let Some(d) = text.strip_suffix('h') {
        (d, 3600.0)
    } else if let Some(d) = text.strip_suffix('m') {
        (d, 60.0)
    } else if let Some(d) = text.strip_suffix('s') {
        (d, 1.0)
    } else {
        (text, 1.0)
    };
    let value =
        digits.trim().parse::<f64>().map_err(|_| {
            "it must be a time in seconds, or with a suffix ms, s, m or h".to_string()
        })? * scale;
    if !value.is_finite() {
        return Err("it must be a finite number".into());
    }
    if value < 0.0 {
        return Err("it must not be negative".into());
    }
    Ok(value)
}

/// A parameter's value: a finite number of at least 0; a time may carry a unit.
fn number(shape: &str, key: &str, text: &str, kind: Kind) -> Result<f64, String> {
    let value = match kind {
        Kind::Time => parse_seconds(text),
        Kind::Rate => match text.trim().parse::<f64>() {
            Err(_) => Err("it must be a number of requests per second".to_string()),
            Ok(v) if !v.is_finite() => Err("it must be a finite number".into()),
            Ok(v) if v < 0.0 => Err("it must not be negative".into()),
            Ok(v) => Ok(v),
        },
    };
    value.map_err(|rule| format!("{shape}: {key} is {text:?}; {rule}"))
}

/// The `key=value,...` list after `NAME:` in a flag's spec, each key one of `allowed` and given
/// once with a value; the error names `name`, the item and the rule.
pub fn key_values<'a>(
    name: &str,
    rest: &'a str,
    allowed: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, String> {
    pairs(name, rest, &allowed.join(", "), Some(allowed))
}

/// The `key=value,...` list after `NAME:` whatever its keys (a list keyed by times, say), each
/// key given once with a value; `takes` says what `name` takes, for the error.
pub fn items<'a>(
    name: &str,
    rest: &'a str,
    takes: &str,
) -> Result<Vec<(&'a str, &'a str)>, String> {
    pairs(name, rest, takes, None)
}

fn pairs<'a>(
    name: &str,
    rest: &'a str,
    takes: &str,
    allowed: Option<&[&str]>,
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut given: Vec<(&str, &str)> = Vec::new();
    for item in rest.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "{name}: {item:?} is not key=value; {name} takes {takes}"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if allowed.is_some_and(|allowed| !allowed.contains(&key)) {
            return Err(format!("{name}: unknown key {key:?}; {name} takes {takes}"));
        }
        if given.iter().any(|(k, _)| *k == key) {
            return Err(format!("{name}: {key} is given twice"));
        }
        if value.is_empty() {
            return Err(format!("{name}: {key} has no value"));
        }
        given.push((key, value));
    }
    Ok(given)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flash_crowd_rises_holds_and_decays() {
        let shape = Shape::FlashCrowd {
            base: 2.0,
            peak: 20.0,
            at: 100.0,
            rise: 10.0,
            hold: 50.0,
            decay: 20.0,
        };
        let at = |t| shape.rate_at(t);
        assert_eq!(
            [
                at(99.0),
                at(105.0),
                at(110.0),
                at(159.0),
                at(170.0),
                at(180.0)
            ],
            [2.0, 11.0, 20.0, 20.0, 11.0, 2.0]
        );
        assert_eq!(shape.max_rate(), 20.0);
    }

    #[test]
    fn shapes_follow_their_formulas() {
        let ramp = Shape::Ramp {
            from: 1.0,
            to: 3.0,
            start: 10.0,
            duration: 20.0,
        };
        assert_eq!(
            [ramp.rate_at(0.0), ramp.rate_at(20.0), ramp.rate_at(40.0)],
            [1.0, 2.0, 3.0]
        );
        let sudden = Shape::Ramp {
            from: 1.0,
            to: 3.0,
            start: 10.0,
            duration: 0.0,
        };
        assert_eq!([sudden.rate_at(9.9), sudden.rate_at(10.0)], [1.0, 3.0]);
        let sine = Shape::Sinusoid {
            mean: 1.0,
            amplitude: 3.0,
            period: 40.0,
        };
        assert!((sine.rate_at(10.0) - 4.0).abs() < 1e-12);
        assert_eq!(sine.rate_at(30.0), 0.0, "clamped at 0");
        assert_eq!(sine.max_rate(), 4.0);
        let on_off = Shape::OnOff {
            rate: 5.0,
            on: 10.0,
            off: 30.0,
        };
        assert_eq!(
            [
                on_off.rate_at(0.0),
                on_off.rate_at(9.9),
                on_off.rate_at(10.0),
                on_off.rate_at(45.0)
            ],
            [5.0, 5.0, 0.0, 5.0]
        );
    }

    #[test]
    fn spec_reads_back() {
        for spec in [
            "constant:rate=4",
            "ramp:from=1,to=10,start=300,over=1200,duration=2h",
            "flash-crowd:base=2,peak=20,at=900,rise=30,hold=300,decay=120,prompt=7",
        ] {
            let load = Synthetic::parse(spec).unwrap();
            assert_eq!(Synthetic::parse(&load.spec()).unwrap(), load, "{spec}");
        }
    }
}
