//! `mds simulate --from-prometheus URL`: the load of a team's own engines, read from their
//! Prometheus as windows of request rate, mean prompt and output lengths and prefix-hit share,
//! and offered as a rate curve (docs/simulator.md, "Load from your Prometheus").
//!
//! This is the thin I/O: one HTTP client with a timeout on every request and a cap on every
//! answer, asking `/api/v1/series` which engine series the selector matches and
//! `/api/v1/query_range` for each quantity. Everything else (the range, the queries, the
//! windows, gaps, resets, the description) is in the submodules.
//!
//! They are the pure half of `mds simulate --from-prometheus`: the flags read into a selector
//! (`selector`) and a range of windows (`range`), the engine series found (`catalog`,
//! `discovery`) read into a plan of PromQL queries (`plan`), and the answers (`answers`) read
//! into windows of request rate, mean prompt and output lengths and prefix-hit share, with
//! their gaps, counter resets and description (`windows`). No I/O: this module asks Prometheus
//! and hands the JSON bodies there.
//!
//! Every query is `sum(increase(SERIES{selector}[W]))` (or `resets`, or `avg_over_time` for a
//! gauge) evaluated at each window's end with `step` = W, so Prometheus handles counter
//! resets and each answer point is one window. A window without a point is a gap: absent is
//! not zero.

mod answers;
mod catalog;
mod discovery;
mod plan;
mod range;
mod selector;
#[cfg(test)]
mod tests;
mod windows;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mds_sim::load::Trace;

use self::discovery::{Discovery, Labels};
use self::plan::Plan;
use self::range::{Range, RangeFlags};
use self::selector::Matcher;
use super::inputs::{Stop, unusable};
use super::simulate::Args;

/// Gap spans and label values listed in one message, at most.
const LISTED: usize = 8;

/// The largest answer read; a larger one is refused rather than read in part.
const MAX_ANSWER_BYTES: usize = 64 << 20;
/// Each request's budget when `--prometheus-timeout` is not given.
const DEFAULT_TIMEOUT_SECONDS: f64 = 60.0;
/// The longest `--prometheus-timeout`.
const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
/// The most a connection may take, within the request's budget.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The trace of `--from-prometheus` and its description; notes (counter resets, gaps filled,
/// Prometheus's own warnings) go to `notes`.
pub(super) fn load(args: &Args, notes: &mut String) -> Result<(Trace, String), Stop> {
    let url = args.from_prometheus.as_deref().unwrap_or_default();
    let mut matchers: Vec<Matcher> = Vec::new();
    for text in &args.matchers {
        matchers.extend(
            selector::parse_matchers(text)
                .map_err(|rule| unusable(format!("--match {text:?}: {rule}")))?,
        );
    }
    let now = jiff::Timestamp::now().as_second();
    let range = range::range(
        &RangeFlags {
            since: args.since.as_deref(),
            start: args.start.as_deref(),
            end: args.end.as_deref(),
            window: args.window.as_deref(),
        },
        now,
    )
    .map_err(unusable)?;
    let timeout = match &args.prometheus_timeout {
        Some(text) => match mds_sim::load::parse_seconds(text) {
            Ok(seconds) if seconds > 0.0 && seconds <= MAX_TIMEOUT_SECONDS => seconds,
            Ok(_) => {
                return Err(unusable(format!(
                    "--prometheus-timeout {text:?}: it must be longer than 0 and at most an hour"
                )));
            }
            Err(rule) => return Err(unusable(format!("--prometheus-timeout {text:?}: {rule}"))),
        },
        None => DEFAULT_TIMEOUT_SECONDS,
    };
    let token = match &args.prometheus_token_file {
        Some(path) => {
            let text = super::read_text(path, 64 * 1024).map_err(|e| {
                unusable(format!(
                    "--prometheus-token-file {}: cannot read: {e}",
                    path.display()
                ))
            })?;
            let token = text.trim().to_string();
            if token.is_empty() {
                return Err(unusable(format!(
                    "--prometheus-token-file {}: the file is empty; it must hold the bearer token",
                    path.display()
                )));
            }
            Some(token)
        }
        None => None,
    };
    let mut client = Client::new(url, Duration::from_secs_f64(timeout), token)?;

    let found = client.series(&matchers, &range)?;
    let (group, names) = match discovery::discover(&found) {
        Discovery::One { group, names } => (group, names),
        Discovery::Several(groups) => {
            return Err(unusable(discovery::several_text(
                &matchers, &range, &groups,
            )));
        }
        Discovery::Nothing => {
            let everywhere = client.series(&[], &range)?;
            return Err(unusable(discovery::nothing_text(
                &matchers,
                &range,
                &everywhere,
            )));
        }
    };
    let plan = Plan::pick(group.engine, &names, &group).map_err(unusable)?;
    let mut answers = BTreeMap::new();
    for (key, query) in plan.queries(&matchers, range.window) {
        answers.insert(key, client.range_query(&query, &range)?);
    }
    let loaded = windows::windows(&range, &plan, &answers, args.fill_gaps).map_err(unusable)?;
    for warning in &client.warnings {
        notes.push_str(&super::warning_line(&format!(
            "--from-prometheus: Prometheus warns: {warning}"
        )));
    }
    for note in windows::notes(&range, &plan, &loaded) {
        notes.push_str(&super::note_line(&note));
    }
    if let Some(path) = &args.save_curve {
        std::fs::write(path, windows::curve_csv(&range, &loaded)).map_err(|e| {
            unusable(format!(
                "--save-curve {}: cannot write: {e}",
                path.display()
            ))
        })?;
    }
    let curve =
        windows::curve(&range, &loaded).map_err(|e| unusable(format!("--from-prometheus: {e}")))?;
    let (from, until) = super::simulate_options::window_flags(args)?;
    let expected = curve.expected_requests(from, until);
    if expected > mds_sim::load::synthetic::MAX_REQUESTS {
        return Err(unusable(format!(
            "--from-prometheus: the range offers about {expected:.0} requests; at most {} are simulated: pick part of it with --from/--until (seconds from {})",
            mds_sim::load::synthetic::MAX_REQUESTS,
            range::time_text(range.start)
        )));
    }
    let trace = curve
        .generate_within(args.seed, from, until)
        .map_err(|e| unusable(format!("--from-prometheus: {e}")))?;
    let description = windows::describe(&client.shown, &matchers, &range, &plan, &loaded);
    Ok((trace, description))
}

/// Prometheus's HTTP API, asked one request at a time.
struct Client {
    http: reqwest::Client,
    base: reqwest::Url,
    /// The URL as messages show it: without credentials or a trailing slash.
    shown: String,
    token: Option<String>,
    timeout: Duration,
    runtime: tokio::runtime::Runtime,
    /// Prometheus's warnings, once each.
    warnings: BTreeSet<String>,
}

/// Why a request got no answer.
enum Failure {
    Timeout,
    Connect(String),
    TooLarge,
    Other(String),
}

impl Client {
    fn new(url: &str, timeout: Duration, token: Option<String>) -> Result<Client, Stop> {
        // Credentials in the URL stay out of every message.
        let said = match (url.find("://"), url.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &url[..scheme + 3], &url[at..])
            }
            _ => url.to_string(),
        };
        let refuse = |rule: &str| unusable(format!("--from-prometheus {said:?}: {rule}"));
        let base = reqwest::Url::parse(url.trim()).map_err(|_| {
            refuse("it must be the http:// or https:// URL of your Prometheus, such as http://prometheus.monitoring:9090")
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(refuse(
                "it must be the http:// or https:// URL of your Prometheus, such as http://prometheus.monitoring:9090",
            ));
        }
        let mut shown = base.clone();
        let _ = shown.set_password(None);
        let _ = shown.set_username("");
        let shown = shown.as_str().trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(CONNECT_TIMEOUT))
            .user_agent(concat!("mds-simulate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| refuse(&format!("cannot make an HTTP client: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| refuse(&format!("cannot start the HTTP runtime: {e}")))?;
        Ok(Client {
            http,
            base,
            shown,
            token,
            timeout,
            runtime,
            warnings: BTreeSet::new(),
        })
    }

    /// The label sets of the series `selector` matches in the range.
    fn series(&mut self, matchers: &[Matcher], range: &Range) -> Result<Vec<Labels>, Stop> {
        let selector = discovery::discovery_selector(matchers);
        let data = self.get(
            "api/v1/series",
            &[
                ("match[]", selector.to_string()),
                ("start", range.start.to_string()),
                ("end", range.end().to_string()),
            ],
            &format!("the series lookup {}", discovery::discovery_text(matchers)),
        )?;
        answers::series_labels(data).map_err(|e| self.not_prometheus("api/v1/series", &e))
    }

    /// `query` at every window's end, one value per window.
    fn range_query(&mut self, query: &str, range: &Range) -> Result<Vec<Option<f64>>, Stop> {
        let (first, last) = range.evaluations();
        let data = self.get(
            "api/v1/query_range",
            &[
                ("query", query.to_string()),
                ("start", first.to_string()),
                ("end", last.to_string()),
                ("step", range.window.to_string()),
                ("timeout", format!("{}s", self.timeout.as_secs().max(1))),
            ],
            &format!("the query {query}"),
        )?;
        answers::window_values(range, data)
            .map_err(|e| self.not_prometheus("api/v1/query_range", &e))
    }

    fn not_prometheus(&self, path: &str, what: &str) -> Stop {
        unusable(format!(
            "--from-prometheus {}: /{path} answered with no Prometheus data ({what}): is this the address of Prometheus's HTTP API?",
            self.shown
        ))
    }

    /// The `data` of an answer to `path` (relative to the URL's own path), Prometheus's
    /// warnings kept; `what` names the request in errors.
    fn get(
        &mut self,
        path: &str,
        params: &[(&str, String)],
        what: &str,
    ) -> Result<serde_json::Value, Stop> {
        let mut url = self.base.clone();
        let joined = format!("{}/{path}", self.base.path().trim_end_matches('/'));
        url.set_path(&joined);
        let mut request = self.http.get(url).query(params);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let answer = self.runtime.block_on(async {
            let mut response = request.send().await.map_err(classify)?;
            let status = response.status();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(classify)? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(Failure::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, body))
        });
        let shown = &self.shown;
        let (status, body) = answer.map_err(|failure| {
            unusable(match failure {
                Failure::Timeout => format!(
                    "--from-prometheus {shown}: no whole answer to {what} within {} (--prometheus-timeout): raise it, or narrow the range or --match",
                    range::span_text(self.timeout.as_secs() as i64)
                ),
                Failure::Connect(e) => format!(
                    "--from-prometheus {shown}: cannot connect: {e}; is Prometheus listening there?"
                ),
                Failure::TooLarge => format!(
                    "--from-prometheus {shown}: the answer to {what} is over {} MiB; narrow --match or the range",
                    MAX_ANSWER_BYTES >> 20
                ),
                Failure::Other(e) => format!("--from-prometheus {shown}: {what}: {e}"),
            })
        })?;
        let code = status.as_u16();
        let credentials = if matches!(code, 401 | 403) {
            "; it asks for credentials: give --prometheus-token-file FILE (a bearer token), or user:password@ in the URL"
        } else {
            ""
        };
        match answers::envelope(&body) {
            Ok((data, warnings)) if status.is_success() => {
                self.warnings.extend(warnings);
                Ok(data)
            }
            Ok(_) => Err(unusable(format!(
                "--from-prometheus {shown}: /{path} answered HTTP {status}{credentials}"
            ))),
            Err(answers::AnswerError::Api(text)) => Err(unusable(format!(
                "--from-prometheus {shown}: Prometheus refused {what}: {text} (HTTP {code}){credentials}"
            ))),
            Err(answers::AnswerError::NotJson(text)) => Err(unusable(format!(
                "--from-prometheus {shown}: /{path} answered HTTP {status} with no Prometheus JSON ({text}){credentials}; is this the address of Prometheus's HTTP API?"
            ))),
        }
    }
}

/// A request's error in words: its kind and every cause.
fn classify(e: reqwest::Error) -> Failure {
    if e.is_timeout() {
        return Failure::Timeout;
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if e.is_connect() {
        Failure::Connect(text)
    } else {
        Failure::Other(text)
    }
}
