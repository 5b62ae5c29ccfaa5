//! Prometheus's JSON: the envelope of every answer, the series found and a range query's points.

use serde::Deserialize;

use super::discovery::Labels;
use super::range::Range;

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// Why an answer was not data.
#[derive(Debug, PartialEq)]
pub(super) enum AnswerError {
    /// Prometheus's own error: its type and text.
    Api(String),
    /// Not Prometheus's JSON at all: what is wrong, and the start of the body.
    NotJson(String),
}

/// The `data` of a Prometheus API answer and its warnings.
pub(super) fn envelope(body: &[u8]) -> Result<(serde_json::Value, Vec<String>), AnswerError> {
    let parsed: Envelope = serde_json::from_slice(body).map_err(|_| {
        let start: String = String::from_utf8_lossy(&body[..body.len().min(160)])
            .chars()
            .filter(|c| !c.is_control())
            .collect();
        AnswerError::NotJson(format!("it starts {start:?}"))
    })?;
    if parsed.status != "success" {
        let kind = parsed.error_type.unwrap_or_else(|| "error".into());
        let text = parsed.error.unwrap_or_else(|| "(no error text)".into());
        return Err(AnswerError::Api(format!("{kind}: {text}")));
    }
    let data = parsed
        .data
        .ok_or_else(|| AnswerError::NotJson("status success but no data".into()))?;
    Ok((data, parsed.warnings))
}

/// The label sets of a `/api/v1/series` answer's data.
pub(super) fn series_labels(data: serde_json::Value) -> Result<Vec<Labels>, String> {
    serde_json::from_value(data)
        .map_err(|e| format!("the series answer is not a list of label sets: {e}"))
}

#[derive(Deserialize)]
struct Matrix {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<MatrixSeries>,
}

#[derive(Deserialize)]
struct MatrixSeries {
    values: Vec<(f64, String)>,
}

/// A range query's answer as one value per window (`None`: no point, a gap): points at the
/// evaluation times of `range`, added together when several series answer; a value that is not
/// a finite number is no point.
pub(super) fn window_values(
    range: &Range,
    data: serde_json::Value,
) -> Result<Vec<Option<f64>>, String> {
    let matrix: Matrix = serde_json::from_value(data)
        .map_err(|e| format!("the range query's answer is not a matrix: {e}"))?;
    if matrix.result_type != "matrix" {
        return Err(format!(
            "the range query's answer is a {}, not a matrix",
            matrix.result_type
        ));
    }
    let (first, _) = range.evaluations();
    let mut out = vec![None; range.count as usize];
    for series in matrix.result {
        for (t, text) in series.values {
            let Ok(value) = text.trim().parse::<f64>() else {
                continue;
            };
            if !value.is_finite() || !t.is_finite() {
                continue;
            }
            let index = ((t - first as f64) / range.window as f64).round();
            if index < 0.0 || index >= range.count as f64 {
                continue;
            }
            let slot = &mut out[index as usize];
            *slot = Some(slot.unwrap_or(0.0) + value);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "answers_tests.rs"]
mod tests;
