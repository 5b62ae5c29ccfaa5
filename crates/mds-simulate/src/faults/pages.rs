//! The pages the worker scrapes, with faults: a page that does not answer in time, a page
//! that is no exposition (a proxy's error page, or the engine's families with values no
//! parser reads), and counters that restart from zero on a Pod that shows no restart. The
//! worker's sampler reads them through the production parser and signal code.

use std::collections::BTreeMap;

use mds_worker::{MetricsSource, ScrapeError};

use super::Injector;
use crate::source::Pages;

/// The production scraper's timeout (`mds-operator`'s `ScrapeConfig`), as a timed-out scrape
/// reports it. The simulated source has no clock: the wait costs no virtual time.
pub(crate) const SCRAPE_TIMEOUT_MS: u64 = 2_000;

/// What a fault does to one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strike {
    Timeout,
    /// A proxy's HTML error page instead of the engine's.
    ErrorPage,
    /// The engine's page with every sample's value unreadable.
    Mangled,
}

/// The engines' pages at one pass, struck by the run's faults.
pub(crate) struct FaultyPages<'a> {
    pages: Pages<'a>,
    injector: &'a Injector,
    /// Seconds since the start.
    t: f64,
}

impl<'a> FaultyPages<'a> {
    pub(crate) fn new(pages: Pages<'a>, injector: &'a Injector, t: f64) -> FaultyPages<'a> {
        FaultyPages { pages, injector, t }
    }
}

impl MetricsSource for FaultyPages<'_> {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let Some(pod) = self.pages.pod(url).cloned() else {
            return self.pages.fetch(url).await;
        };
        let strike = self.injector.page_strike(&pod, self.t);
        if strike == Some(Strike::Timeout) {
            return Err(ScrapeError::Timeout(SCRAPE_TIMEOUT_MS));
        }
        let page = self.pages.fetch(url).await?;
        Ok(match strike {
            Some(Strike::ErrorPage) => ERROR_PAGE.to_string(),
            Some(Strike::Mangled) => mangled(&page),
            _ => self.injector.reset_counters(&pod, self.t, page),
        })
    }
}

const ERROR_PAGE: &str = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/// The page with every sample's value replaced by text no exposition parser reads.
fn mangled(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for line in page.lines() {
        match split(line) {
            Some((series, _, _)) => {
                out.push_str(series);
                out.push_str(" 0x1f?\n");
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Splits a sample line into its series (name and labels), its value and what follows the
/// value (a timestamp); `None` for comments and blank lines.
fn split(line: &str) -> Option<(&str, &str, &str)> {
    if line.trim().is_empty() || line.starts_with('#') {
        return None;
    }
    let mut end = None;
    let (mut labels, mut quoted, mut escaped) = (false, false, false);
    for (i, b) in line.bytes().enumerate() {
        if quoted {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = false;
            }
            continue;
        }
        match b {
            b'"' if labels => quoted = true,
            b'{' => labels = true,
            b'}' if labels => {
                end = Some(i + 1);
                break;
            }
            b' ' | b'\t' if !labels => {
                end = Some(i);
                break;
            }
            _ => {}
        }
    }
    let end = end?;
    let rest = line[end..].trim_start();
    let (value, tail) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
    Some((&line[..end], value, tail))
}

/// A series that only grows while its process runs: counters and histogram parts.
fn cumulative(series: &str) -> bool {
    let name = series.split('{').next().unwrap_or(series);
    ["_total", "_count", "_sum", "_bucket"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// The page's cumulative series and their values.
pub(crate) fn counters(page: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter_map(split)
        .filter(|(series, _, _)| cumulative(series))
        .filter_map(|(series, value, _)| Some((series.to_string(), value.parse::<f64>().ok()?)))
        .collect()
}

/// The page with each cumulative series counted from `offsets` (the values it had when it
/// restarted): what the process would show had it started then.
pub(crate) fn restarted(page: &str, offsets: &BTreeMap<String, f64>) -> String {
    let mut out = String::with_capacity(page.len());
    for line in page.lines() {
        let moved = split(line).and_then(|(series, value, tail)| {
            let offset = offsets.get(series)?;
            let v = value.parse::<f64>().ok()?;
            let v = (v - offset).max(0.0);
            Some(if tail.is_empty() {
                format!("{series} {v}")
            } else {
                format!("{series} {v} {tail}")
            })
        });
        out.push_str(moved.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP vllm:prompt_tokens_total Prompt tokens.\n\
        # TYPE vllm:prompt_tokens_total counter\n\
        vllm:prompt_tokens_total{model_name=\"m {x}\"} 1200\n\
        vllm:num_requests_running{model_name=\"m\"} 3\n\
        vllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 40 1700000000\n\
        vllm:time_to_first_token_seconds_count{model_name=\"m\"} 50\n";

    #[test]
    fn counters_restart_from_the_values_they_had_and_gauges_stay() {
        let offsets = counters(PAGE);
        assert_eq!(offsets.len(), 3, "{offsets:?}");
        let later = PAGE.replace("1200", "1500").replace("} 50", "} 60");
        let page = restarted(&later, &offsets);
        assert!(
            page.contains("vllm:prompt_tokens_total{model_name=\"m {x}\"} 300\n"),
            "{page}"
        );
        assert!(page.contains("vllm:num_requests_running{model_name=\"m\"} 3\n"));
        assert!(
            page.contains("le=\"0.1\",model_name=\"m\"} 0 1700000000\n"),
            "{page}"
        );
        assert!(page.contains("_count{model_name=\"m\"} 10\n"), "{page}");
        assert!(page.starts_with("# HELP"));
    }

    #[test]
    fn a_mangled_page_keeps_its_series_and_loses_its_values() {
        let page = mangled(PAGE);
        assert!(page.contains("vllm:num_requests_running{model_name=\"m\"} 0x1f?\n"));
        assert!(counters(&page).is_empty());
    }
}
