//! The scaler's OpenAPI schema (the one in the CRD) as a source of words for messages: what
//! a field accepts ("a whole number from 1 to 1024"), which fields an object has (for "did you
//! mean"), and a stand-in value for a field whose own value is unusable.

use std::sync::OnceLock;

use kube::CustomResourceExt;
use mds_api::ModelDeploymentScaler;
use mds_api::suggest::or_list;
use serde_json::Value as Json;
use serde_yaml_ng::Value;

use super::Seg;

/// The CRD's `openAPIV3Schema`, built once from the types.
pub fn scaler_root() -> &'static Json {
    static ROOT: OnceLock<Json> = OnceLock::new();
    ROOT.get_or_init(|| {
        let crd = serde_json::to_value(ModelDeploymentScaler::crd()).unwrap_or_default();
        crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or_default()
    })
}

/// The schema of the field at `path`.
pub fn node<'s>(root: &'s Json, path: &[Seg]) -> Option<&'s Json> {
    static METADATA: OnceLock<Json> = OnceLock::new();
    if let [Seg::Key(key)] = path
        && key == "metadata"
    {
        // The CRD leaves metadata to the API server; it is an object all the same.
        return Some(METADATA.get_or_init(|| serde_json::json!({"type": "object"})));
    }
    path.iter().try_fold(root, |node, seg| match seg {
        Seg::Key(key) => node.get("properties")?.get(key),
        Seg::Index(_) => node.get("items"),
    })
}

/// The fields an object schema names.
pub fn field_names(node: &Json) -> Vec<&str> {
    node.get("properties")
        .and_then(Json::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Whether the object at `parent` requires its field `key`.
pub fn requires(parent: &Json, key: &str) -> bool {
    parent
        .get("required")
        .and_then(Json::as_array)
        .is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)))
}

fn bound(node: &Json, key: &str) -> Option<i64> {
    node.get(key).and_then(Json::as_f64).map(|v| v as i64)
}

/// The inclusive range an integer field accepts, when the schema bounds it.
pub fn integer_range(node: &Json) -> (Option<i64>, Option<i64>) {
    (bound(node, "minimum"), bound(node, "maximum"))
}

pub fn is_integer(node: &Json) -> bool {
    node.get("type").and_then(Json::as_str) == Some("integer")
}

/// The values of an enumerated field.
pub fn variants(node: &Json) -> Vec<&str> {
    node.get("enum")
        .and_then(Json::as_array)
        .map(|e| e.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default()
}

/// What the field accepts, as a phrase that completes "allowed is …" or "give …".
pub fn expected(node: &Json) -> String {
    let options = variants(node);
    if !options.is_empty() {
        return format!("one of {}", or_list(&options));
    }
    if node.get("x-kubernetes-int-or-string").is_some() {
        return "a quantity written as a quoted string, such as \"0.5\", \"8\" or \"2k\"".into();
    }
    match node.get("type").and_then(Json::as_str) {
        Some("integer") => match integer_range(node) {
            (Some(min), Some(max)) => format!("a whole number from {min} to {max}"),
            (Some(min), None) => format!("a whole number, {min} or more"),
            (None, Some(max)) => format!("a whole number up to {max}"),
            (None, None) => "a whole number".into(),
        },
        Some("number") => "a number".into(),
        Some("boolean") => "true or false".into(),
        Some("string") => "text (quote it if it looks like a number or true/false)".into(),
        Some("array") => "a list".into(),
        Some("object") => "a mapping of fields".into(),
        _ => "a value of the documented form".into(),
    }
}

/// A valid stand-in for the field, so the rest of the document can still be checked: the
/// largest allowed integer (so no min ≤ max rule trips over it), the first enum value, an
/// empty string, list or object with its required fields filled in the same way.
pub fn placeholder(node: &Json) -> Option<Value> {
    if let Some(first) = variants(node).first() {
        return Some(Value::String((*first).to_string()));
    }
    if node.get("x-kubernetes-int-or-string").is_some() {
        return Some(Value::String("1".into()));
    }
    Some(match node.get("type").and_then(Json::as_str)? {
        "integer" => {
            let (min, max) = integer_range(node);
            Value::Number(max.or(min).unwrap_or(0).into())
        }
        "number" => Value::Number(0.into()),
        "boolean" => Value::Bool(false),
        "string" => Value::String(String::new()),
        "array" => Value::Sequence(vec![]),
        "object" => {
            let mut mapping = serde_yaml_ng::Mapping::new();
            let required = node.get("required").and_then(Json::as_array);
            for key in required.into_iter().flatten().filter_map(Json::as_str) {
                let field = node.get("properties")?.get(key)?;
                mapping.insert(Value::String(key.to_string()), placeholder(field)?);
            }
            Value::Mapping(mapping)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str) -> &'static Json {
        let segs: Vec<Seg> = path
            .split('.')
            .map(|s| match s.parse::<usize>() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key(s.to_string()),
            })
            .collect();
        node(scaler_root(), &segs).unwrap_or_else(|| panic!("no schema at {path}"))
    }

    #[test]
    fn phrases_come_from_the_crd() {
        assert_eq!(
            expected(at("spec.roles.0.maxReplicas")),
            "a whole number from 1 to 1024"
        );
        assert_eq!(
            expected(at("spec.behavior.scaleUp.maxStepReplicas")),
            "a whole number, 0 or more"
        );
        assert_eq!(expected(at("spec.mode")), "one of Shadow or Active");
        assert_eq!(expected(at("spec.suspend")), "true or false");
        assert!(expected(at("spec.algorithm.proportional.tolerance")).starts_with("a quantity"));
        assert!(field_names(at("spec")).contains(&"mode"));
        assert!(requires(at("spec.roles.0"), "maxReplicas"));
        assert!(!requires(at("spec.roles.0"), "minReplicas"));
    }

    #[test]
    fn placeholders_fill_required_fields() {
        let role = placeholder(at("spec.roles.0")).unwrap();
        assert_eq!(role["maxReplicas"].as_i64(), Some(1024));
        assert_eq!(role["name"].as_str(), Some(""));
        let spec = placeholder(at("spec")).unwrap();
        assert!(spec["roles"].is_sequence());
        assert_eq!(spec["targetRef"]["name"].as_str(), Some(""));
    }
}
