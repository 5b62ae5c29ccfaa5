//! Request traces → offered load. Readers take the file's text (the caller does the I/O) and
//! return one [`TraceRequest`] per row; [`Trace::to_profile`] bins them into constant segments.
//!
//! Formats read:
//! - Azure LLM inference traces (2023): header `TIMESTAMP,ContextTokens,GeneratedTokens`,
//!   timestamps `YYYY-MM-DD HH:MM:SS.fffffff` without a zone (also RFC 3339 or Unix seconds,
//!   module `stamps`), CRLF or LF lines, sorted by time.
//!   These traces carry no prefix information: every prompt token misses the cache.
//! - Mooncake JSONL: one object per line with `timestamp` (ms from the start, whole or not), `input_length`,
//!   `output_length` and `hash_ids` (one id per 512-token prompt block, chained so that a shared
//!   leading run of ids is a shared prefix). Prefix hits are what an unlimited cache would
//!   serve: the leading run of blocks seen before, in tokens, at most the prompt length.

use std::collections::BTreeSet;
use std::sync::Arc;

use thiserror::Error;

use super::stamps::{AZURE_FORMATS, AzureStamp, mooncake_row};
use super::{Load, LoadError, LoadProfile, Segment};

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Seconds since the trace's first request.
    pub at_seconds: f64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Prompt tokens a prefix cache would serve.
    pub prefix_hit_tokens: u32,
    /// The prompt's block hashes, one per 512-token span (Mooncake's `hash_ids`), for the
    /// request-level engine's prefix cache; `None` when the trace has none.
    pub block_hashes: Option<Arc<[u64]>>,
}

impl TraceRequest {
    /// A request with no prefix information (a synthetic one, or an Azure row).
    pub fn plain(at_seconds: f64, prompt_tokens: u32, output_tokens: u32) -> TraceRequest {
        TraceRequest {
            at_seconds,
            prompt_tokens,
            output_tokens,
            prefix_hit_tokens: 0,
            block_hashes: None,
        }
    }
}

/// A trace row that could not be read, with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    pub line: usize,
    pub message: String,
}

fn error(line: usize, message: impl Into<String>) -> TraceError {
    TraceError {
        line,
        message: message.into(),
    }
}

/// Requests in time order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Trace {
    pub requests: Vec<TraceRequest>,
}

const AZURE_HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens";
const MOONCAKE_BLOCK_TOKENS: u64 = 512;

impl Trace {
    /// Reads an Azure LLM inference trace CSV.
    pub fn parse_azure_csv(text: &str) -> Result<Trace, TraceError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end()));
        match lines.next() {
            Some((_, AZURE_HEADER)) => {}
            Some((_, other)) => {
                return Err(error(
                    1,
                    format!("the header is {other:?}; expected {AZURE_HEADER:?}"),
                ));
            }
            None => return Err(error(1, "the file is empty; expected a header")),
        }
        let mut first: Option<AzureStamp> = None;
        let mut requests = Vec::new();
        for (line, row) in lines {
            if row.is_empty() {
                continue;
            }
            let fields: Vec<&str> = row.split(',').collect();
            let [stamp, context, generated] = fields[..] else {
                return Err(error(
                    line,
                    format!(
                        "{} fields; expected 3 (TIMESTAMP,ContextTokens,GeneratedTokens)",
                        fields.len()
                    ),
                ));
            };
            let at = AzureStamp::parse(stamp).ok_or_else(|| {
                error(
                    line,
                    format!("TIMESTAMP {stamp:?} is not a time; expected {AZURE_FORMATS}"),
                )
            })?;
            let origin = *first.get_or_insert(at);
            let at_seconds = at.seconds_since(origin).ok_or_else(|| {
                error(
                    line,
                    format!(
                        "TIMESTAMP {stamp:?} is {}, but the first row's is {}; one file uses one format",
                        at.format(),
                        origin.format()
                    ),
                )
            })?;
            let count = |name: &str, text: &str| {
                text.trim().parse::<u32>().map_err(|_| {
                    error(
                        line,
                        format!("{name} {text:?} is not a whole number of tokens"),
                    )
                })
            };
            push_in_order(
                &mut requests,
                line,
                TraceRequest::plain(
                    at_seconds,
                    count("ContextTokens", context)?,
                    count("GeneratedTokens", generated)?,
                ),
            )?;
        }
        Ok(Trace { requests })
    }

    /// Reads a Mooncake JSONL trace, with prefix hits of an unlimited cache.
    pub fn parse_mooncake_jsonl(text: &str) -> Result<Trace, TraceError> {
        let mut seen: BTreeSet<u64> = BTreeSet::new();
        let mut requests = Vec::new();
        for (i, row) in text.lines().enumerate() {
            let line = i + 1;
            if row.trim().is_empty() {
                continue;
            }
            let row = mooncake_row(row).map_err(|message| error(line, message))?;
            let leading_hits = row
                .hash_ids
                .iter()
                .take_while(|id| seen.contains(id))
                .count();
            let hit_tokens =
                (leading_hits as u64 * MOONCAKE_BLOCK_TOKENS).min(row.input_length as u64);
            seen.extend(row.hash_ids.iter().copied());
            push_in_order(
                &mut requests,
                line,
                TraceRequest {
                    at_seconds: row.timestamp_ms / 1000.0,
                    prompt_tokens: row.input_length,
                    output_tokens: row.output_length,
                    prefix_hit_tokens: hit_tokens as u32,
                    block_hashes: (!row.hash_ids.is_empty()).then(|| Arc::from(row.hash_ids)),
                },
            )?;
        }
        Ok(Trace { requests })
    }

    /// Seconds from the first to the last request.
    pub fn duration_seconds(&self) -> f64 {
        self.requests.last().map_or(0.0, |r| r.at_seconds)
    }

    /// One constant segment per `bin_seconds` bin holding requests: the bin's arrival rate and
    /// its mean prompt, output and hit fraction. Bins without requests have no load. The
    /// profile ends with the last bin.
    pub fn to_profile(&self, bin_seconds: f64) -> Result<LoadProfile, LoadError> {
        if !(bin_seconds.is_finite() && bin_seconds > 0.0) {
            return Err(LoadError::Segment {
                index: 0,
                message: format!("bin width {bin_seconds} s must be a positive number"),
            });
        }
        let mut segments: Vec<Segment> = Vec::new();
        let mut current: Option<(u64, Bin)> = None;
        for r in &self.requests {
            let index = (r.at_seconds / bin_seconds).floor() as u64;
            match &mut current {
                Some((i, bin)) if *i == index => bin.add(r),
                _ => {
                    if let Some((i, bin)) = current.take() {
                        segments.push(bin.segment(i, bin_seconds));
                    }
                    let mut bin = Bin::default();
                    bin.add(r);
                    current = Some((index, bin));
                }
            }
        }
        if let Some((i, bin)) = current {
            segments.push(bin.segment(i, bin_seconds));
        }
        LoadProfile::from_segments(segments)
    }
}

fn push_in_order(
    requests: &mut Vec<TraceRequest>,
    line: usize,
    request: TraceRequest,
) -> Result<(), TraceError> {
    if let Some(last) = requests.last()
        && request.at_seconds < last.at_seconds
    {
        return Err(error(
            line,
            format!(
                "the request at {:.6} s comes before the previous one at {:.6} s; traces must be sorted by time",
                request.at_seconds, last.at_seconds
            ),
        ));
    }
    requests.push(request);
    Ok(())
}

#[derive(Default)]
struct Bin {
    requests: f64,
    prompt: f64,
    output: f64,
    hits: f64,
}

impl Bin {
    fn add(&mut self, r: &TraceRequest) {
        self.requests += 1.0;
        self.prompt += r.prompt_tokens as f64;
        self.output += r.output_tokens as f64;
        self.hits += r.prefix_hit_tokens as f64;
    }

    fn segment(&self, index: u64, width: f64) -> Segment {
        let load = Load {
            requests_per_second: self.requests / width,
            prompt_tokens: self.prompt / self.requests,
            output_tokens: self.output / self.requests,
            prefix_hit_fraction: if self.prompt > 0.0 {
                (self.hits / self.prompt).min(1.0)
            } else {
                0.0
            },
        };
        Segment {
            start: index as f64 * width,
            end: (index + 1) as f64 * width,
            from: load,
            to: load,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_rows_become_per_second_bins() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\
                    2023-11-16 18:17:03.0000000,100,10\r\n\
                    2023-11-16 18:17:03.5000000,300,30\r\n\
                    2023-11-16 18:17:05.2500000,50,5";
        let trace = Trace::parse_azure_csv(text).unwrap();
        assert_eq!(trace.requests.len(), 3);
        assert_eq!(trace.requests[1].at_seconds, 0.5);
        assert_eq!(trace.duration_seconds(), 2.25);
        let profile = trace.to_profile(1.0).unwrap();
        let first = profile.load_at(0.2);
        assert_eq!(first.requests_per_second, 2.0);
        assert_eq!(first.prompt_tokens, 200.0);
        assert_eq!(first.output_tokens, 20.0);
        assert_eq!(profile.load_at(1.5), Load::IDLE);
        let all = profile.arrivals(0.0, 10.0);
        assert_eq!(all.requests, 3.0);
        assert_eq!(all.prompt_tokens, 450.0);
        assert_eq!(all.output_tokens, 45.0);
    }

    #[test]
    fn azure_errors_name_the_line_and_field() {
        let bad_header = Trace::parse_azure_csv("time,in,out\n").unwrap_err();
        assert_eq!(bad_header.line, 1);
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0,x,1\n";
        let err = Trace::parse_azure_csv(text).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("ContextTokens"), "{err}");
        let unsorted = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                        2023-11-16 18:17:03.0,1,1\n2023-11-16 18:17:02.0,1,1\n";
        let err = Trace::parse_azure_csv(unsorted).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("sorted"), "{err}");
        let short = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0,1\n";
        assert!(
            Trace::parse_azure_csv(short)
                .unwrap_err()
                .message
                .contains("2 fields")
        );
    }

    #[test]
    fn mooncake_prefix_hits_are_leading_runs_of_seen_blocks() {
        let text = r#"{"timestamp": 0, "input_length": 1200, "output_length": 5, "hash_ids": [1, 2, 3]}
{"timestamp": 500, "input_length": 1100, "output_length": 7, "hash_ids": [1, 2, 9]}
{"timestamp": 900, "input_length": 700, "output_length": 7, "hash_ids": [9, 1]}
"#;
        let trace = Trace::parse_mooncake_jsonl(text).unwrap();
        let hits: Vec<u32> = trace.requests.iter().map(|r| r.prefix_hit_tokens).collect();
        assert_eq!(
            hits,
            vec![0, 1024, 700],
            "leading run, capped at the prompt"
        );
        assert_eq!(trace.requests[1].at_seconds, 0.5);
        let err = Trace::parse_mooncake_jsonl("{\"timestamp\": 1}\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("input_length"), "{err}");
    }
}
