//! The engine series names teams configure autoscalers on, and the PromQL of a KEDA
//! Prometheus trigger, read into the series the simulated engines publish.

use crate::peers::hpa::Aggregate;
use crate::peers::metric::PodMetric;

/// The names `--peer` reads, as the engines publish them (for errors).
pub(super) const KNOWN: [&str; 9] = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
];

/// The series a name means: vLLM's and SGLang's names with or without their prefix, with
/// `:` as Prometheus writes it or `_` as adapters rename it; a counter's `_total`, or the
/// adapter's usual `_per_second` rename of it, is its rate. `None`: not a series we publish.
pub(super) fn pod_metric(name: &str) -> Option<PodMetric> {
    let lower = name.to_lowercase().replace(':', "_");
    let base = ["vllm_", "sglang_"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    let (base, rate_suffix) = match base
        .strip_suffix("_per_second")
        .or_else(|| base.strip_suffix("_total"))
    {
        Some(b) => (b, true),
        None => (base, false),
    };
    let metric = match base {
        "num_requests_running" | "num_running_reqs" => PodMetric::Running,
        "num_requests_waiting" | "num_queue_reqs" => PodMetric::Waiting,
        "kv_cache_usage_perc" | "gpu_cache_usage_perc" | "token_usage" => PodMetric::KvUsage,
        "request_success" => PodMetric::RequestRate,
        "prompt_tokens" => PodMetric::PromptTokenRate,
        "generation_tokens" => PodMetric::GenerationTokenRate,
        _ => return None,
    };
    (metric.is_rate() || !rate_suffix).then_some(metric)
}

/// `name` is no series we publish: the message, with the closest name we know.
pub(super) fn unknown(name: &str) -> String {
    let hint = mds_api::suggest::closest(name, KNOWN)
        .map(|near| format!(" (did you mean {near}?)"))
        .unwrap_or_default();
    format!(
        "{name:?} is no engine series the simulator publishes{hint}; it publishes {}",
        KNOWN.join(", ")
    )
}

/// What a KEDA Prometheus trigger's query reads.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Query {
    pub metric: PodMetric,
    pub aggregate: Aggregate,
    /// A counter's `rate()` window, seconds.
    pub window: f64,
    pub note: Option<String>,
}

/// Reads the series, the aggregation and a rate's window out of `query`: one aggregation
/// (`sum`, `avg`, `max`, `min`) over one series, or over running plus waiting, a counter
/// inside `rate()` or `irate()`. Label matchers are ignored (the run has one model).
pub(super) fn read_query(query: &str) -> Result<Query, String> {
    let mut words: Vec<String> = Vec::new();
    let mut window: Option<f64> = None;
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // Label matchers and strings say which model, not which series.
            '{' => skip_to(&mut chars, '}'),
            '"' => skip_to(&mut chars, '"'),
            '[' => {
                let mut inside = String::new();
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    inside.push(c);
                }
                let range = inside.split(':').next().unwrap_or_default().trim();
                window = Some(super::fields::seconds(range).ok_or_else(|| {
                    format!("the range [{inside}] is not a duration such as [1m]")
                })?);
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' || n == ':' {
                        word.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                words.push(word);
            }
            _ => {}
        }
    }
    let has = |w: &str| words.iter().any(|x| x == w);
    if has("increase") || has("delta") || has("deriv") {
        return Err("reads increase(), delta() or deriv(); the simulator reads a counter through rate() or irate() only".into());
    }
    let rated = has("rate") || has("irate");
    let mut series: Vec<PodMetric> = Vec::new();
    for word in &words {
        if let Some(m) = pod_metric(word)
            && !series.contains(&m)
        {
            series.push(m);
        }
    }
    let metric = match series.as_slice() {
        [one] => *one,
        [_, _] if series.contains(&PodMetric::Running) && series.contains(&PodMetric::Waiting) => {
            PodMetric::QueueDepth
        }
        [] => {
            let named = words
                .iter()
                .find(|w| {
                    !matches!(
                        w.as_str(),
                        "sum" | "avg" | "max" | "min" | "rate" | "irate" | "by" | "without"
                    )
                })
                .cloned()
                .unwrap_or_default();
            return Err(unknown(&named));
        }
        _ => {
            return Err(format!(
                "reads {} series ({}); the simulator reads one, or running plus waiting",
                series.len(),
                series
                    .iter()
                    .map(|m| m.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    };
    if metric.is_rate() && !rated {
        return Err(format!(
            "reads the counter of {} without rate(): its value only grows; write rate(...[1m])",
            metric.describe()
        ));
    }
    if !metric.is_rate() && rated {
        return Err(format!(
            "takes rate() of a gauge ({}); a gauge is read as it is",
            metric.describe()
        ));
    }
    let first = words.first().map(String::as_str).unwrap_or_default();
    let (aggregate, note) = match first {
        "sum" => (Aggregate::Sum, None),
        "avg" => (Aggregate::Avg, None),
        "max" => (Aggregate::Max, None),
        "min" => (Aggregate::Min, None),
        _ => (
            Aggregate::Sum,
            Some("the query has no outer sum/avg/max/min: KEDA refuses a query that returns one series per Pod; read as their sum".to_string()),
        ),
    };
    Ok(Query {
        metric,
        aggregate,
        window: window.unwrap_or(60.0),
        note,
    })
}

fn skip_to(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, end: char) {
    for c in chars.by_ref() {
        if c == end {
            break;
        }
    }
}

/// A target as a short number (`8`, `0.5`, `2.25`, `19.0`, `240`).
pub(super) fn number(v: f64) -> String {
    let digits = if v.abs() >= 100.0 {
        0.0
    } else if v.abs() >= 10.0 {
        1.0
    } else {
        3.0
    };
    let scale = 10f64.powf(digits);
    format!("{}", (v * scale).round() / scale)
}
