//! The binding fence's two annotations on the target and their JSON payloads.

use serde::{Deserialize, Serialize};

use crate::status::ReplicaVector;

/// Names the scaler that owns the target's replica counts, and its term.
pub const BINDING_ANNOTATION: &str = "modeldeployment.gpustack.ai/scaler-binding";
/// The latest committed decision: its ID, term and replica vector.
pub const DECISION_ANNOTATION: &str = "modeldeployment.gpustack.ai/scaler-decision";

/// Payload of [`BINDING_ANNOTATION`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BindingPayload {
    pub scaler_name: String,
    #[serde(rename = "scalerUID")]
    pub scaler_uid: String,
    pub term: i64,
}

/// Payload of [`DECISION_ANNOTATION`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionPayload {
    #[serde(rename = "decisionID")]
    pub decision_id: String,
    pub term: i64,
    pub vector: ReplicaVector,
}

/// Why an annotation payload is invalid. Messages complete "the annotation …".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("{annotation} is not a JSON object with the expected fields: {detail}")]
    Malformed {
        annotation: &'static str,
        detail: String,
    },
    #[error("{annotation} has an empty {field}")]
    EmptyField {
        annotation: &'static str,
        field: &'static str,
    },
    #[error("{annotation} has term {term}; terms start at 1")]
    BadTerm { annotation: &'static str, term: i64 },
    #[error("{annotation} has replicas {count} for role {role:?}; counts range from 1 to 1024")]
    BadCount {
        annotation: &'static str,
        role: String,
        count: i32,
    },
    #[error("{annotation} has an empty vector; a decision names at least one role")]
    EmptyVector { annotation: &'static str },
}

fn parse_json<T: for<'de> Deserialize<'de>>(
    annotation: &'static str,
    text: &str,
) -> Result<T, PayloadError> {
    serde_json::from_str(text).map_err(|e| PayloadError::Malformed {
        annotation,
        detail: e.to_string(),
    })
}

fn check_term(annotation: &'static str, term: i64) -> Result<(), PayloadError> {
    if term < 1 {
        return Err(PayloadError::BadTerm { annotation, term });
    }
    Ok(())
}

impl BindingPayload {
    /// Parses and checks a binding annotation value.
    pub fn parse(text: &str) -> Result<BindingPayload, PayloadError> {
        let payload: BindingPayload = parse_json(BINDING_ANNOTATION, text)?;
        for (field, value) in [
            ("scalerName", &payload.scaler_name),
            ("scalerUID", &payload.scaler_uid),
        ] {
            if value.is_empty() {
                return Err(PayloadError::EmptyField {
                    annotation: BINDING_ANNOTATION,
                    field,
                });
            }
        }
        check_term(BINDING_ANNOTATION, payload.term)?;
        Ok(payload)
    }

    /// The exact annotation value (compact JSON, fields in a fixed order).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("a binding payload always serializes")
    }
}

impl DecisionPayload {
    /// Parses and checks a decision annotation value.
    pub fn parse(text: &str) -> Result<DecisionPayload, PayloadError> {
        let payload: DecisionPayload = parse_json(DECISION_ANNOTATION, text)?;
        if payload.decision_id.is_empty() {
            return Err(PayloadError::EmptyField {
                annotation: DECISION_ANNOTATION,
                field: "decisionID",
            });
        }
        check_term(DECISION_ANNOTATION, payload.term)?;
        if payload.vector.is_empty() {
            return Err(PayloadError::EmptyVector {
                annotation: DECISION_ANNOTATION,
            });
        }
        if let Some((role, &count)) = payload
            .vector
            .iter()
            .find(|(_, c)| !(1..=1024).contains(*c))
        {
            return Err(PayloadError::BadCount {
                annotation: DECISION_ANNOTATION,
                role: role.clone(),
                count,
            });
        }
        Ok(payload)
    }

    /// The exact annotation value (compact JSON, roles sorted).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("a decision payload always serializes")
    }
}

/// The JSON Pointer of an annotation key (`/` escaped as `~1`, D3).
pub fn annotation_pointer(key: &str) -> String {
    format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_round_trips_and_reports_why_it_is_invalid() {
        let binding = BindingPayload {
            scaler_name: "llm".into(),
            scaler_uid: "uid-1".into(),
            term: 3,
        };
        let text = binding.to_annotation();
        assert_eq!(text, r#"{"scalerName":"llm","scalerUID":"uid-1","term":3}"#);
        assert_eq!(BindingPayload::parse(&text), Ok(binding));

        let cases = [
            ("not json", "not a JSON object"),
            (
                r#"{"scalerName":"a","term":1}"#,
                "missing field `scalerUID`",
            ),
            (
                r#"{"scalerName":"","scalerUID":"u","term":1}"#,
                "empty scalerName",
            ),
            (
                r#"{"scalerName":"a","scalerUID":"u","term":0}"#,
                "terms start at 1",
            ),
            (
                r#"{"scalerName":"a","scalerUID":"u","term":"1"}"#,
                "invalid type",
            ),
        ];
        for (text, expected) in cases {
            let err = BindingPayload::parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
            assert!(err.contains(BINDING_ANNOTATION), "{err}");
        }
    }

    #[test]
    fn decision_round_trips_and_reports_why_it_is_invalid() {
        let text = r#"{"decisionID":"d-1","term":2,"vector":{"decode":2,"prefill":3}}"#;
        let decision = DecisionPayload::parse(text).unwrap();
        assert_eq!(decision.vector["prefill"], 3);
        assert_eq!(decision.to_annotation(), text);
        let cases = [
            (
                r#"{"decisionID":"","term":1,"vector":{"a":1}}"#,
                "empty decisionID",
            ),
            (
                r#"{"decisionID":"d","term":-1,"vector":{"a":1}}"#,
                "terms start at 1",
            ),
            (r#"{"decisionID":"d","term":1,"vector":{}}"#, "empty vector"),
            (
                r#"{"decisionID":"d","term":1,"vector":{"a":0}}"#,
                "replicas 0 for role \"a\"",
            ),
        ];
        for (text, expected) in cases {
            let err = DecisionPayload::parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn annotation_keys_are_escaped_in_json_pointers() {
        assert_eq!(
            annotation_pointer(BINDING_ANNOTATION),
            "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-binding"
        );
    }
}
