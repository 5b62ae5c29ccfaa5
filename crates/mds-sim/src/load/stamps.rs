//! The times and fields of a trace row as people write them: an Azure row's TIMESTAMP as the
//! Azure traces write it, as RFC 3339 or as Unix seconds; a Mooncake row's fields with errors
//! that say what each must be, never a parser's internals.

use jiff::Timestamp;
use jiff::civil::DateTime;
use serde_json::Value;

/// The TIMESTAMP formats an Azure CSV may use, in words for an error.
pub(super) const AZURE_FORMATS: &str = "\"2023-11-16 18:15:46.6805900\" (as the Azure traces write it, read as UTC), an RFC 3339 time such as \"2023-11-16T18:15:46Z\", or Unix seconds such as 1700158546.68";

/// Unix times above this are milliseconds: as seconds they would lie past the year 5000.
const UNIX_MILLISECONDS_ABOVE: f64 = 1e11;

/// An Azure row's time. The first row's format is the file's; every row is read in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum AzureStamp {
    /// `YYYY-MM-DD HH:MM:SS.fffffff`, no zone (the published traces).
    Civil(DateTime),
    /// An RFC 3339 time with its offset (`Z`, `+02:00`).
    Instant(Timestamp),
    /// Unix time, in seconds.
    Unix(f64),
}

impl AzureStamp {
    /// Reads `text` in any accepted format; `None` when it is none of them.
    pub(super) fn parse(text: &str) -> Option<AzureStamp> {
        let text = text.trim();
        // A time with an offset first: the civil reader would drop the offset.
        if let Ok(at) = text.parse::<Timestamp>() {
            return Some(AzureStamp::Instant(at));
        }
        if let Ok(at) = text.parse::<DateTime>() {
            return Some(AzureStamp::Civil(at));
        }
        let number: f64 = text.parse().ok()?;
        if !number.is_finite() || number < 0.0 {
            return None;
        }
        Some(AzureStamp::Unix(if number > UNIX_MILLISECONDS_ABOVE {
            number / 1000.0
        } else {
            number
        }))
    }

    /// The format's name, for an error about a row in another one.
    pub(super) fn format(self) -> &'static str {
        match self {
            AzureStamp::Civil(_) => "a date and time without a zone",
            AzureStamp::Instant(_) => "an RFC 3339 time",
            AzureStamp::Unix(_) => "Unix seconds",
        }
    }

    /// Seconds from `origin` to this time; `None` when the two are in different formats.
    pub(super) fn seconds_since(self, origin: AzureStamp) -> Option<f64> {
        match (self, origin) {
            (AzureStamp::Civil(at), AzureStamp::Civil(first)) => {
                Some(at.duration_since(first).as_secs_f64())
            }
            (AzureStamp::Instant(at), AzureStamp::Instant(first)) => {
                Some(at.duration_since(first).as_secs_f64())
            }
            (AzureStamp::Unix(at), AzureStamp::Unix(first)) => Some(at - first),
            _ => None,
        }
    }
}

/// A Mooncake row's fields.
#[derive(Debug)]
pub(super) struct MooncakeRow {
    /// Milliseconds from the start.
    pub timestamp_ms: f64,
    pub input_length: u32,
    pub output_length: u32,
    pub hash_ids: Vec<u64>,
}

/// Reads one Mooncake JSONL line; the error names the field and what it must be.
pub(super) fn mooncake_row(line: &str) -> Result<MooncakeRow, String> {
    const FIELDS: &str = "timestamp, input_length, output_length and optionally hash_ids";
    let value: Value = serde_json::from_str(line).map_err(|e| {
        format!(
            "not a JSON object (a Mooncake line holds {FIELDS}): {}",
            json_problem(&e)
        )
    })?;
    let Some(object) = value.as_object() else {
        return Err(format!("not a JSON object; a Mooncake line holds {FIELDS}"));
    };
    let field = |name: &str| {
        object
            .get(name)
            .ok_or_else(|| format!("no {name:?} field; a Mooncake line holds {FIELDS}"))
    };
    let timestamp = field("timestamp")?;
    let timestamp_ms = timestamp
        .as_f64()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| {
            format!(
                "timestamp {timestamp} must be a number of milliseconds from the start, 0 or more"
            )
        })?;
    let tokens = |name: &str| -> Result<u32, String> {
        let value = field(name)?;
        value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("{name} {value} must be a whole number of tokens"))
    };
    let hash_ids = match object.get("hash_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| {
                id.as_u64()
                    .ok_or_else(|| format!("hash_ids holds {id}; block ids are whole numbers"))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "hash_ids {other} must be a list of whole-number block ids"
            ));
        }
    };
    Ok(MooncakeRow {
        timestamp_ms,
        input_length: tokens("input_length")?,
        output_length: tokens("output_length")?,
        hash_ids,
    })
}

/// A JSON syntax error in words, without the parser's type names.
fn json_problem(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Eof => "the line ends inside the object".into(),
        _ => format!("invalid JSON at column {}", e.column()),
    }
}

/// A note when a Mooncake trace's timestamps look like seconds read as milliseconds:
/// thousands of requests arriving faster than 30 a second (the published Mooncake traces
/// carry a few a second). Read as seconds they would span a thousand times longer;
/// `--time-scale 1000` reads them so.
pub fn seconds_not_milliseconds(requests: &[super::TraceRequest]) -> Option<String> {
    const MANY: usize = 1000;
    const FAST_PER_SECOND: f64 = 30.0;
    let span = requests.last()?.at_seconds;
    let rate = requests.len() as f64 / span.max(1e-9);
    (requests.len() >= MANY && rate > FAST_PER_SECOND).then(|| {
        format!(
            "the timestamps are read as milliseconds from the start (Mooncake's unit): {} requests in {:.1} min, {rate:.0} a second; if they are whole seconds, the trace spans {:.1} h: add --time-scale 1000 to read them so",
            requests.len(),
            span / 60.0,
            span * 1000.0 / 3600.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_times_are_read_in_each_accepted_format() {
        let civil = AzureStamp::parse("2023-11-16 18:15:46.5").unwrap();
        let later = AzureStamp::parse("2023-11-16 18:15:48.0").unwrap();
        assert_eq!(later.seconds_since(civil), Some(1.5));
        let z = AzureStamp::parse("2023-11-16T18:15:46.5Z").unwrap();
        let offset = AzureStamp::parse("2023-11-16T20:15:48+02:00").unwrap();
        assert_eq!(offset.seconds_since(z), Some(1.5));
        let unix = AzureStamp::parse("1700158546.5").unwrap();
        let millis = AzureStamp::parse("1700158548000").unwrap();
        assert_eq!(millis.seconds_since(unix), Some(1.5));
        assert_eq!(z.seconds_since(civil), None, "formats do not mix");
        for bad in ["yesterday", "-5", "NaN", "2023-13-01 00:00:00"] {
            assert_eq!(AzureStamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn mooncake_fields_are_named_with_what_they_must_be() {
        let row =
            mooncake_row(r#"{"timestamp": 1.5, "input_length": 3, "output_length": 2}"#).unwrap();
        assert_eq!(
            (row.timestamp_ms, row.input_length, row.hash_ids.len()),
            (1.5, 3, 0)
        );
        for (line, says) in [
            (
                r#"{"timestamp": "x", "input_length": 3, "output_length": 2}"#,
                "timestamp \"x\" must be a number of milliseconds",
            ),
            (
                r#"{"input_length": 3, "output_length": 2}"#,
                "no \"timestamp\" field",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3.5, "output_length": 2}"#,
                "input_length 3.5 must be a whole number of tokens",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 2, "hash_ids": 7}"#,
                "hash_ids 7 must be a list",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3"#,
                "the line ends inside the object",
            ),
            ("[1, 2]", "not a JSON object"),
        ] {
            let err = mooncake_row(line).unwrap_err();
            assert!(err.contains(says), "{line}: {err}");
            assert!(!err.contains("invalid type"), "{err}");
        }
    }

    #[test]
    fn second_timestamps_read_as_milliseconds_are_noticed() {
        let fast: Vec<_> = (0..2000)
            .map(|i| super::super::TraceRequest::plain(f64::from(i) * 0.016, 100, 10))
            .collect();
        assert!(
            seconds_not_milliseconds(&fast)
                .unwrap()
                .contains("--time-scale 1000")
        );
        let slow: Vec<_> = (0..2000)
            .map(|i| super::super::TraceRequest::plain(f64::from(i) * 0.2, 100, 10))
            .collect();
        assert_eq!(seconds_not_milliseconds(&slow), None);
    }
}
