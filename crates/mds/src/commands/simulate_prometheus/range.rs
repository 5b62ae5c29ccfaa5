//! The range: durations and times as the flags give them, and the windows they ask for.

/// The shortest window: a scrape interval of 15 s gives two samples in 30 s, so shorter
/// windows only make sense with faster scrapes.
const MIN_WINDOW_SECONDS: i64 = 15;
/// Prometheus refuses a range query of more than 11,000 points per series.
const MAX_WINDOWS: i64 = 11_000;

/// A length of time as Prometheus writes one: one or more `NUMBER UNIT` parts, units `ms`,
/// `s`, `m`, `h`, `d` and `w` (`90s`, `15m`, `7d`, `1h30m`), or a bare number of seconds. In
/// seconds; the error says what the text must be.
pub(super) fn parse_duration(text: &str) -> Result<f64, String> {
    const RULE: &str = "it must be a duration such as 90s, 15m, 6h, 7d or 1h30m";
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return match seconds {
            s if !(s.is_finite() && s > 0.0) => Err(format!("{RULE}, and positive")),
            s if s > MAX_DURATION_SECONDS => Err(format!("{RULE}, of at most 10 years")),
            s => Ok(s),
        };
    }
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(RULE.into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(RULE)?;
        let number: f64 = rest[..digits].parse().map_err(|_| RULE.to_string())?;
        rest = &rest[digits..];
        let units = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..units] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "w" => 604_800.0,
            _ => return Err(RULE.into()),
        };
        rest = &rest[units..];
        total += number * scale;
    }
    if !(total.is_finite() && total > 0.0) {
        return Err(format!("{RULE}, and positive"));
    }
    if total > MAX_DURATION_SECONDS {
        return Err(format!("{RULE}, of at most 10 years"));
    }
    Ok(total)
}

/// The longest duration read: ten years.
const MAX_DURATION_SECONDS: f64 = 10.0 * 365.0 * 86_400.0;

/// Seconds as the shortest of `2 d 3 h`, `10 m`, `45 s`.
pub(super) fn span_text(seconds: i64) -> String {
    let mut parts = Vec::new();
    let mut left = seconds.max(0);
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if left >= size {
            parts.push(format!("{} {unit}", left / size));
            left %= size;
        }
    }
    if parts.is_empty() {
        "0 s".into()
    } else {
        parts.join(" ")
    }
}

/// A Unix time as RFC 3339 in UTC.
pub(super) fn time_text(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds).map_or_else(|_| format!("{seconds} s"), |t| t.to_string())
}

/// The windows read: `count` windows of `window` seconds from `start` (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Range {
    pub start: i64,
    pub window: i64,
    pub count: i64,
    /// Seconds of the range asked for that no whole window covers (left out).
    pub left_out: i64,
    /// Whether the window was chosen from the range's length (no `--window`).
    pub default_window: bool,
}

impl Range {
    pub fn end(&self) -> i64 {
        self.start + self.window * self.count
    }

    /// The start of window `i`.
    pub fn window_start(&self, i: usize) -> i64 {
        self.start + self.window * i as i64
    }

    /// The query's evaluation times: each window's end, from the first window's.
    pub fn evaluations(&self) -> (i64, i64) {
        (self.start + self.window, self.end())
    }
}

/// The range flags as given.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RangeFlags<'a> {
    pub since: Option<&'a str>,
    pub start: Option<&'a str>,
    pub end: Option<&'a str>,
    pub window: Option<&'a str>,
}

/// The window length when `--window` is not given, from the range's length: 1 m up to 6 h,
/// 5 m up to 2 days, 10 m up to 14 days, 30 m up to 60 days, 1 h beyond.
fn default_window(span_seconds: i64) -> i64 {
    match span_seconds {
        s if s <= 6 * 3600 => 60,
        s if s <= 2 * 86_400 => 300,
        s if s <= 14 * 86_400 => 600,
        s if s <= 60 * 86_400 => 1800,
        _ => 3600,
    }
}

fn timestamp_flag(flag: &str, text: &str) -> Result<i64, String> {
    let t: jiff::Timestamp = text.trim().parse().map_err(|_| {
        format!(
            "--{flag} {text:?}: it must be an RFC 3339 time with its offset, such as 2025-06-01T00:00:00Z"
        )
    })?;
    Ok(t.as_second())
}

/// The windows the flags ask for, `now` being the current Unix time. `--since D` ends at
/// `--end` (default: now, rounded down to a whole window so that windows are whole clock
/// windows) and is whole windows back from there; `--start` begins the windows at it and any
/// rest of the range short of a window is left out at the end. Errors name the flag and the
/// rule.
pub(super) fn range(flags: &RangeFlags, now: i64) -> Result<Range, String> {
    let end = flags.end.map(|e| timestamp_flag("end", e)).transpose()?;
    let start = flags
        .start
        .map(|s| timestamp_flag("start", s))
        .transpose()?;
    let since = match flags.since {
        Some(text) => Some(
            parse_duration(text)
                .map_err(|rule| format!("--since {text:?}: {rule}"))?
                .round() as i64,
        ),
        None => None,
    };
    let (low, high) = match (since, start) {
        (Some(_), Some(_)) => {
            return Err("--since and --start both give the range's start: give one".into());
        }
        (Some(since), None) => {
            let high = end.unwrap_or(now);
            (high.saturating_sub(since), high)
        }
        (None, Some(start)) => (start, end.unwrap_or(now)),
        (None, None) => {
            return Err(
                "--from-prometheus needs a range: --since DURATION (such as 7d), or --start TIME, each up to --end TIME or now".into(),
            );
        }
    };
    if high <= low {
        return Err(match (flags.start, flags.end) {
            (Some(s), Some(e)) => format!("--end {e:?} is not after --start {s:?}"),
            (Some(s), None) => format!("--start {s:?} is not in the past"),
            _ => format!(
                "--since {:?}: the range must be longer than 0",
                flags.since.unwrap_or_default()
            ),
        });
    }
    let span = high - low;
    let (window, default) = match flags.window {
        Some(text) => {
            let seconds =
                parse_duration(text).map_err(|rule| format!("--window {text:?}: {rule}"))?;
            let whole = seconds.round();
            if (seconds - whole).abs() > 1e-9 {
                return Err(format!(
                    "--window {text:?}: it must be a whole number of seconds"
                ));
            }
            let whole = whole as i64;
            if whole < MIN_WINDOW_SECONDS {
                return Err(format!(
                    "--window {text:?}: it must be at least {MIN_WINDOW_SECONDS} s (and at least twice the scrape interval, so that increase() sees two samples in each window)"
                ));
            }
            if whole > span {
                return Err(format!(
                    "--window {text:?}: it is longer than the range ({}); the range must hold at least one window",
                    span_text(span)
                ));
            }
            (whole, false)
        }
        None => (default_window(span).min(span.max(MIN_WINDOW_SECONDS)), true),
    };
    if span < window {
        return Err(format!(
            "the range ({}) is shorter than the shortest window, {MIN_WINDOW_SECONDS} s",
            span_text(span)
        ));
    }
    // With --since up to now, windows end at a whole window of the clock.
    let (low, high) = if since.is_some() && end.is_none() {
        let high = high.div_euclid(window) * window;
        (high - (span + window / 2) / window * window, high)
    } else {
        (low, high)
    };
    let count = ((high - low) / window).max(1);
    if count > MAX_WINDOWS {
        let least = (high - low + MAX_WINDOWS - 1) / MAX_WINDOWS;
        return Err(format!(
            "--window {}: the range ({}) is {count} windows; Prometheus answers at most {MAX_WINDOWS} points a query: give a --window of at least {}",
            span_text(window),
            span_text(high - low),
            span_text(least)
        ));
    }
    let (start, left_out) = if since.is_some() {
        (high - count * window, (high - low - count * window).max(0))
    } else {
        (low, high - low - count * window)
    };
    Ok(Range {
        start,
        window,
        count,
        left_out,
        default_window: default,
    })
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod tests;
