//! Reading a peer file's fields by path, so that every error names the field it is about.

use std::collections::BTreeMap;

use serde_json::Value;

/// A field of a peer file that cannot be read as the autoscaler means it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PeerFileError {
    /// The field's path (`spec.metrics[0].pods.target.averageValue`).
    pub field: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

/// One field of the document, present or not, with its path.
#[derive(Clone, Debug)]
pub(super) struct Field<'a> {
    value: Option<&'a Value>,
    path: String,
}

impl<'a> Field<'a> {
    pub(super) fn root(value: &'a Value) -> Field<'a> {
        Field {
            value: Some(value),
            path: String::new(),
        }
    }

    pub(super) fn get(&self, key: &str) -> Field<'a> {
        Field {
            value: self.value.and_then(|v| v.get(key)),
            path: if self.path.is_empty() {
                key.to_string()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }

    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// Present and not null.
    pub(super) fn present(&self) -> bool {
        self.value.is_some_and(|v| !v.is_null())
    }

    pub(super) fn error(&self, message: impl Into<String>) -> PeerFileError {
        PeerFileError {
            field: self.path.clone(),
            message: message.into(),
        }
    }

    fn missing(&self) -> PeerFileError {
        self.error("is missing")
    }

    /// A scalar as text (numbers and booleans as written).
    pub(super) fn text(&self) -> Result<String, PeerFileError> {
        self.opt_text()?.ok_or_else(|| self.missing())
    }

    pub(super) fn opt_text(&self) -> Result<Option<String>, PeerFileError> {
        match self.value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(self.error("must be a single value, not a list or a map")),
        }
    }

    /// A Kubernetes quantity (`"500m"`, `"2k"`, `5`) above zero.
    pub(super) fn quantity(&self) -> Result<f64, PeerFileError> {
        self.opt_quantity()?.ok_or_else(|| self.missing())
    }

    pub(super) fn opt_quantity(&self) -> Result<Option<f64>, PeerFileError> {
        let Some(text) = self.opt_text()? else {
            return Ok(None);
        };
        let value = mds_api::quantity::parse_decimal(&text)
            .map_err(|e| self.error(e.to_string()))?
            .to_f64();
        if !(value > 0.0 && value.is_finite()) {
            return Err(self.error(format!("{text:?} must be above zero")));
        }
        Ok(Some(value))
    }

    /// A whole number.
    pub(super) fn opt_int(&self) -> Result<Option<i64>, PeerFileError> {
        let Some(text) = self.opt_text()? else {
            return Ok(None);
        };
        text.parse::<i64>()
            .map(Some)
            .map_err(|_| self.error(format!("{text:?} is not a whole number")))
    }

    /// A number (`"2.5"`, `2`).
    pub(super) fn opt_number(&self) -> Result<Option<f64>, PeerFileError> {
        let Some(text) = self.opt_text()? else {
            return Ok(None);
        };
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(self.error(format!("{text:?} is not a number of zero or more"))),
        }
    }

    /// A duration (`"60s"`, `"5m"`, `"1m30s"`; a bare number is seconds), in seconds.
    pub(super) fn opt_seconds(&self) -> Result<Option<f64>, PeerFileError> {
        let Some(text) = self.opt_text()? else {
            return Ok(None);
        };
        seconds(&text).map(Some).ok_or_else(|| {
            self.error(format!(
                "{text:?} is not a duration; write one such as \"60s\", \"5m\" or \"1m30s\""
            ))
        })
    }

    /// The items of a list (missing: none).
    pub(super) fn items(&self) -> Result<Vec<Field<'a>>, PeerFileError> {
        match self.value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, v)| Field {
                    value: Some(v),
                    path: format!("{}[{i}]", self.path),
                })
                .collect()),
            Some(_) => Err(self.error("must be a list")),
        }
    }

    /// A map of strings (annotations, labels, trigger metadata); missing: empty.
    pub(super) fn strings(&self) -> Result<BTreeMap<String, String>, PeerFileError> {
        match self.value {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .keys()
                .map(|k| Ok((k.clone(), self.get(k).text()?)))
                .collect(),
            Some(_) => Err(self.error("must be a map")),
        }
    }
}

/// Seconds in a duration: a bare number of seconds, or Go's and Kubernetes' `1h2m3s` form.
pub(super) fn seconds(text: &str) -> Option<f64> {
    if let Ok(v) = text.parse::<f64>() {
        return (v.is_finite() && v >= 0.0).then_some(v);
    }
    let d: jiff::SignedDuration = text.parse().ok()?;
    let s = d.as_secs_f64();
    (s >= 0.0).then_some(s)
}
