//! The windows: the answers read into windows of load, with their gaps and counter resets; and
//! the load: its rate curve, its description, its notes and its CSV.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use mds_sim::load::{CurveWindow, RateCurve};

use super::LISTED;
use super::catalog::{Mean, Share};
use super::plan::{Key, Plan};
use super::range::{Range, span_text, time_text};
use super::selector::{Matcher, selector_text};

/// One window's load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct WindowLoad {
    /// Requests per second.
    pub rate: f64,
    pub prompt: f64,
    pub output: f64,
    pub hit_share: f64,
}

/// The windows of a range, gaps filled (when asked), and what was noticed on the way.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Loaded {
    pub windows: Vec<WindowLoad>,
    /// Gaps filled from their neighbours, as (first window start, end) spans.
    pub filled: Vec<(i64, i64)>,
    /// Windows whose request counter reset, as (window start, resets).
    pub resets: Vec<(i64, f64)>,
    /// Requests in the range.
    pub requests: f64,
}

/// A window with samples: its rate, its mean lengths (`None` without requests) and share.
#[derive(Clone, Copy)]
struct Measured {
    rate: f64,
    prompt: Option<f64>,
    output: Option<f64>,
    hit_share: f64,
}

fn get(answers: &BTreeMap<Key, Vec<Option<f64>>>, key: Key, i: usize) -> Option<f64> {
    answers
        .get(&key)
        .and_then(|v| v.get(i).copied().flatten())
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// The spans of consecutive indices in `missing`, as (start, end) times.
fn spans(range: &Range, missing: &[usize]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    let mut previous: Option<usize> = None;
    for &i in missing {
        let (start, end) = (range.window_start(i), range.window_start(i + 1));
        match (previous, out.last_mut()) {
            (Some(p), Some(last)) if p + 1 == i => last.1 = end,
            _ => out.push((start, end)),
        }
        previous = Some(i);
    }
    out
}

fn spans_text(spans: &[(i64, i64)]) -> String {
    let mut listed: Vec<String> = spans
        .iter()
        .take(LISTED)
        .map(|(a, b)| {
            format!(
                "{} to {} ({})",
                time_text(*a),
                time_text(*b),
                span_text(b - a)
            )
        })
        .collect();
    if spans.len() > LISTED {
        listed.push(format!("and {} more", spans.len() - LISTED));
    }
    listed.join(", ")
}

/// The windows of the answers. A window is a gap when the request counter or a length series
/// has no point in it; gaps are refused, naming their spans and the series without samples,
/// unless `fill_gaps`, when each takes the window before it (the first window with samples for
/// leading gaps). A window with no requests is idle, with the lengths of the window before;
/// one without a prefix-hit point has a share of 0. Refused too: no window with samples, and
/// no request in the range.
pub(super) fn windows(
    range: &Range,
    plan: &Plan,
    answers: &BTreeMap<Key, Vec<Option<f64>>>,
    fill_gaps: bool,
) -> Result<Loaded, String> {
    let seconds = range.window as f64;
    let mut measured: Vec<Option<Measured>> = Vec::new();
    let mut missing = Vec::new();
    let mut absent_series: BTreeSet<&str> = BTreeSet::new();
    for i in 0..range.count as usize {
        let requests = get(answers, Key::Requests, i);
        if requests.is_none() {
            absent_series.insert(plan.requests);
        }
        let mut lengths = Vec::new();
        let mut whole = requests.is_some();
        for (mean, sum_key, count_key) in [
            (plan.prompt, Key::PromptSum, Key::PromptCount),
            (plan.output, Key::OutputSum, Key::OutputCount),
        ] {
            let (sum, count, names) = match mean {
                Mean::Histogram { sum, count } => (
                    get(answers, sum_key, i),
                    get(answers, count_key, i),
                    [sum, count],
                ),
                Mean::PerRequest(counter) => {
                    (get(answers, sum_key, i), requests, [counter, plan.requests])
                }
            };
            if sum.is_none() {
                absent_series.insert(names[0]);
            }
            if count.is_none() {
                absent_series.insert(names[1]);
            }
            match (sum, count) {
                (Some(sum), Some(count)) => lengths.push((count > 0.0).then(|| sum / count)),
                _ => whole = false,
            }
        }
        if !whole {
            missing.push(i);
            measured.push(None);
            continue;
        }
        let share = match plan.hits {
            Some(Share::Ratio { .. }) => {
                match (get(answers, Key::Hits, i), get(answers, Key::HitsOf, i)) {
                    (Some(hits), Some(of)) if of > 0.0 => (hits / of).clamp(0.0, 1.0),
                    _ => 0.0,
                }
            }
            Some(Share::Gauge(_)) => get(answers, Key::Hits, i).map_or(0.0, |v| v.clamp(0.0, 1.0)),
            None => 0.0,
        };
        measured.push(Some(Measured {
            rate: requests.unwrap_or(0.0) / seconds,
            prompt: lengths[0],
            output: lengths[1],
            hit_share: share,
        }));
    }
    let absent = absent_series.into_iter().collect::<Vec<_>>().join(", ");
    let Some(first) = measured.iter().flatten().next().copied() else {
        return Err(format!(
            "--from-prometheus: no window from {} to {} has two samples of {absent} for increase() to read: were the engines scraped then? Windows must be at least twice the scrape interval (--window {})",
            time_text(range.start),
            time_text(range.end()),
            span_text(range.window)
        ));
    };
    let gaps = spans(range, &missing);
    if !gaps.is_empty() && !fill_gaps {
        // Lone windows without samples here and there: a window too short for the scrapes.
        let scattered = gaps.len() >= 3 && gaps.iter().all(|(a, b)| b - a == range.window);
        return Err(format!(
            "--from-prometheus: {} of {} windows have no samples of {absent} ({} gap{}: {}); narrow --start/--end to a range with samples, or add --fill-gaps to fill each gap from the window before it{}",
            missing.len(),
            measured.len(),
            gaps.len(),
            if gaps.len() == 1 { "" } else { "s" },
            spans_text(&gaps),
            if scattered {
                format!(
                    "; single windows without samples suggest --window {} is shorter than twice the scrape interval: try a longer one",
                    span_text(range.window)
                )
            } else {
                String::new()
            }
        ));
    }
    // Gaps take the window before (leading ones the first with samples); lengths missing in
    // an idle window likewise.
    let mut previous = WindowLoad {
        rate: first.rate,
        prompt: measured
            .iter()
            .flatten()
            .find_map(|m| m.prompt)
            .unwrap_or(1.0),
        output: measured
            .iter()
            .flatten()
            .find_map(|m| m.output)
            .unwrap_or(1.0),
        hit_share: first.hit_share,
    };
    let mut out = Vec::with_capacity(measured.len());
    let mut requests = 0.0;
    for m in &measured {
        let load = match m {
            Some(m) => WindowLoad {
                rate: m.rate,
                prompt: m.prompt.unwrap_or(previous.prompt),
                output: m.output.unwrap_or(previous.output),
                hit_share: m.hit_share,
            },
            None => previous,
        };
        requests += load.rate * seconds;
        previous = load;
        out.push(load);
    }
    if out.iter().all(|w| w.rate <= 0.0) {
        return Err(format!(
            "--from-prometheus: no request from {} to {}: {} did not increase in any window",
            time_text(range.start),
            time_text(range.end()),
            plan.requests
        ));
    }
    let resets = (0..range.count as usize)
        .filter_map(|i| {
            get(answers, Key::Resets, i)
                .filter(|r| *r > 0.0)
                .map(|r| (range.window_start(i), r))
        })
        .collect();
    Ok(Loaded {
        windows: out,
        filled: gaps,
        resets,
        requests,
    })
}

// ---------------------------------------------------------------------------------------------
// The load

/// The rate curve of the windows, at scale 1.
pub(super) fn curve(range: &Range, loaded: &Loaded) -> Result<RateCurve, String> {
    let windows: Vec<CurveWindow> = loaded
        .windows
        .iter()
        .map(|w| CurveWindow {
            rate: w.rate,
            prompt_tokens: w.prompt,
            output_tokens: w.output,
            prefix_hit_share: w.hit_share,
        })
        .collect();
    RateCurve::from_windows(range.window as f64, &windows, 1.0)
}

/// Where the load came from and what it is, for the output's first line and the report.
pub(super) fn describe(
    url: &str,
    matchers: &[Matcher],
    range: &Range,
    plan: &Plan,
    loaded: &Loaded,
) -> String {
    let rates = loaded.windows.iter().map(|w| w.rate);
    let low = rates.clone().fold(f64::INFINITY, f64::min);
    let high = rates.fold(0.0, f64::max);
    let weighted = |f: &dyn Fn(&WindowLoad) -> f64| {
        let total: f64 = loaded.windows.iter().map(|w| w.rate).sum();
        loaded.windows.iter().map(|w| w.rate * f(w)).sum::<f64>() / total.max(f64::MIN_POSITIVE)
    };
    let prompt = weighted(&|w| w.prompt);
    let output = weighted(&|w| w.output);
    let hits = weighted(&|w| w.prompt * w.hit_share) / prompt.max(f64::MIN_POSITIVE);
    let mut out = format!(
        "Prometheus {url} {}, {} to {} in {} windows ({}); {} windows, {:.2} to {:.2} req/s ({:.0} requests), prompts ~{:.0} tokens, outputs ~{:.0} tokens, {:.1} % prefix hits",
        if matchers.is_empty() {
            "without --match".to_string()
        } else {
            selector_text(matchers)
        },
        time_text(range.start),
        time_text(range.end()),
        span_text(range.window),
        plan.text(),
        loaded.windows.len(),
        low,
        high,
        loaded.requests,
        prompt,
        output,
        hits * 100.0
    );
    let filled: i64 = loaded
        .filled
        .iter()
        .map(|(a, b)| (b - a) / range.window)
        .sum();
    if filled > 0 {
        let _ = write!(
            out,
            ", {filled} window{} without samples filled from the one before",
            if filled == 1 { "" } else { "s" }
        );
    }
    let resets: f64 = loaded.resets.iter().map(|(_, r)| r).sum();
    if resets > 0.0 {
        let _ = write!(
            out,
            ", {resets:.0} counter reset{} counted across by increase()",
            if resets == 1.0 { "" } else { "s" }
        );
    }
    out.push_str("; arrivals seeded Poisson, lengths uniform ±50 % around each window's means");
    out
}

/// Notes for standard error: resets, gaps filled, a range cut short, no prefix series.
pub(super) fn notes(range: &Range, plan: &Plan, loaded: &Loaded) -> Vec<String> {
    let mut out = Vec::new();
    if !loaded.resets.is_empty() {
        let total: f64 = loaded.resets.iter().map(|(_, r)| r).sum();
        let mut at: Vec<String> = loaded
            .resets
            .iter()
            .take(LISTED)
            .map(|(t, _)| time_text(*t))
            .collect();
        if loaded.resets.len() > LISTED {
            at.push(format!("and {} more", loaded.resets.len() - LISTED));
        }
        out.push(format!(
            "--from-prometheus: {total:.0} counter reset{} of {} (an engine restarted) in the window{} starting {}; increase() counts across them",
            if total == 1.0 { "" } else { "s" },
            plan.requests,
            if loaded.resets.len() == 1 { "" } else { "s" },
            at.join(", ")
        ));
        if loaded.resets.len() as f64 > 0.25 * loaded.windows.len() as f64 {
            out.push(format!(
                "--from-prometheus: the request counter reset in {} of {} windows: engines restarting that often lose the requests in flight, and the rates read may be low",
                loaded.resets.len(),
                loaded.windows.len()
            ));
        }
    }
    if !loaded.filled.is_empty() {
        out.push(format!(
            "--fill-gaps: filled from the window before: {}",
            spans_text(&loaded.filled)
        ));
    }
    if range.left_out > 0 {
        out.push(format!(
            "--from-prometheus: {} of the range, short of a whole {} window, {} left out",
            span_text(range.left_out),
            span_text(range.window),
            if range.left_out == 1 { "is" } else { "are" }
        ));
    }
    if plan.hits.is_none() {
        out.push(format!(
            "--from-prometheus: the {} series export no prefix-cache hits: every prompt token is taken to miss the cache",
            plan.engine.name()
        ));
    }
    out
}

/// The windows as a rate-curve CSV that `--load curve:file=FILE,scale=1` reads back (window
/// starts in Unix seconds; a window with no request reads back as a gap).
pub(super) fn curve_csv(range: &Range, loaded: &Loaded) -> String {
    let mut out = String::from(
        "t_start_s,total_rate_rps,mean_input_tokens_est,mean_output_tokens_est,prefix_hit_share\n",
    );
    for (i, w) in loaded.windows.iter().enumerate() {
        let _ = writeln!(
            out,
            "{},{:.6},{:.1},{:.1},{:.4}",
            range.window_start(i),
            w.rate,
            w.prompt,
            w.output,
            w.hit_share
        );
    }
    out
}

#[cfg(test)]
#[path = "windows_tests.rs"]
mod tests;
