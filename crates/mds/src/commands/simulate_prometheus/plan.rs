//! The plan: the series a load is read from, and their PromQL queries.

use std::collections::BTreeSet;

use super::catalog::{Engine, Mean, Series, Share, series};
use super::discovery::Group;
use super::selector::{Matcher, series_selector};

/// The series a load is read from.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Plan {
    pub engine: Engine,
    pub requests: &'static str,
    pub prompt: Mean,
    pub output: Mean,
    pub hits: Option<Share>,
}

impl Plan {
    /// The preferred series of `engine` among `names` (the ones found); refused when it has no
    /// request counter or no token series, naming what was looked for and what was found.
    pub fn pick(engine: Engine, names: &BTreeSet<String>, group: &Group) -> Result<Plan, String> {
        let catalog = engine.catalog();
        let has = |n: &str| names.contains(n);
        let refuse = |what: &str, looked: Vec<String>| {
            format!(
                "--from-prometheus: the {} series of {} have no {what}: looked for {}; found {}",
                engine.name(),
                group.text(),
                looked.join(", "),
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        let requests = catalog
            .requests
            .iter()
            .copied()
            .find(|n| has(n))
            .ok_or_else(|| {
                refuse(
                    "request counter",
                    catalog.requests.iter().map(|n| n.to_string()).collect(),
                )
            })?;
        let mean = |means: &'static [Mean], what: &str| {
            means
                .iter()
                .copied()
                .find(|m| m.names().iter().all(|n| has(n)))
                .ok_or_else(|| refuse(what, means.iter().map(|m| m.text()).collect()))
        };
        let prompt = mean(catalog.prompt, "prompt token series")?;
        let output = mean(catalog.output, "output token series")?;
        let hits = catalog
            .hits
            .iter()
            .copied()
            .find(|s| s.names().iter().all(|n| has(n)));
        Ok(Plan {
            engine,
            requests,
            prompt,
            output,
            hits,
        })
    }

    /// The series used, in words, for the load's description.
    pub fn text(&self) -> String {
        format!(
            "{}: requests {}, prompts {}, outputs {}, prefix hits {}",
            self.engine.name(),
            self.requests,
            self.prompt.text(),
            self.output.text(),
            self.hits
                .map_or_else(|| "none exported (taken as 0)".to_string(), |s| s.text())
        )
    }

    /// The PromQL queries of the load, each evaluated at every window's end.
    pub fn queries(&self, matchers: &[Matcher], window: i64) -> Vec<(Key, String)> {
        let increase = |s: Series| {
            format!(
                "sum(increase({}[{window}s]))",
                series_selector(s.name, matchers, s.extra)
            )
        };
        let mut out = vec![
            (Key::Requests, increase(series(self.requests))),
            (
                Key::Resets,
                format!(
                    "sum(resets({}[{window}s]))",
                    series_selector(self.requests, matchers, "")
                ),
            ),
        ];
        for (mean, sum, count) in [
            (self.prompt, Key::PromptSum, Key::PromptCount),
            (self.output, Key::OutputSum, Key::OutputCount),
        ] {
            match mean {
                Mean::Histogram { sum: s, count: c } => {
                    out.push((sum, increase(series(s))));
                    out.push((count, increase(series(c))));
                }
                Mean::PerRequest(counter) => out.push((sum, increase(series(counter)))),
            }
        }
        match self.hits {
            Some(Share::Ratio { hits, of }) => {
                out.push((Key::Hits, increase(hits)));
                out.push((Key::HitsOf, increase(of)));
            }
            Some(Share::Gauge(name)) => out.push((
                Key::Hits,
                format!(
                    "avg(avg_over_time({}[{window}s]))",
                    series_selector(name, matchers, "")
                ),
            )),
            None => {}
        }
        out
    }
}

/// What a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    Requests,
    Resets,
    PromptSum,
    PromptCount,
    OutputSum,
    OutputCount,
    Hits,
    HitsOf,
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
