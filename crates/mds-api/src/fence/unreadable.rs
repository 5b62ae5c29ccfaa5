//! The fence on an object that does not read as a `ModelDeployment` (a field whose shape this
//! build does not know): it cannot be judged fully, so it is judged on what still reads from
//! the raw JSON, its two scaler annotations and `spec.roles[].name`/`.replicas` taken leniently.

use serde_json::Value;

use super::{Allowance, Rule, Verdict, deny};
use crate::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};

fn annotation<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a str> {
    object?
        .get("metadata")?
        .get("annotations")?
        .get(key)?
        .as_str()
}

/// `spec.roles[].name` and `.replicas`, or `None` when even that shape is not there.
fn raw_counts(object: Option<&Value>) -> Option<Vec<(Value, Value)>> {
    let roles = object?.get("spec")?.get("roles")?.as_array()?;
    Some(
        roles
            .iter()
            .map(|r| {
                let field = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
                (field("name"), field("replicas"))
            })
            .collect(),
    )
}

/// Passes a write that leaves both scaler annotations as they are and, on a bound object, moves
/// no count that still reads (GPUStack's own writes, and nothing the scaler could plan on
/// anyway); refuses any other, since the fence cannot tell whether it is allowed. `why` is the
/// read error, `name` the object's name.
pub fn decide_unreadable(
    old: Option<&Value>,
    new: Option<&Value>,
    name: &str,
    why: &str,
) -> Verdict {
    let untouched = |key| annotation(old, key) == annotation(new, key);
    let annotations_kept = untouched(BINDING_ANNOTATION) && untouched(DECISION_ANNOTATION);
    let unclaimed = annotation(new, BINDING_ANNOTATION).is_none();
    let counts_kept = match (raw_counts(old), raw_counts(new)) {
        (Some(before), Some(after)) => before == after,
        _ => true,
    };
    if annotations_kept && (unclaimed || counts_kept) {
        return Verdict::Allowed(Allowance::Untouched);
    }
    deny(
        Rule::BoundAnnotations,
        format!(
            "ModelDeployment {name:?} does not read as a ModelDeployment ({why}), and this \
             write changes a scaler annotation or the replica counts of a bound target, so the \
             fence cannot tell whether it is allowed; fix the field named"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(binding: Option<&str>, replicas: Value) -> Value {
        let annotations = match binding {
            Some(b) => json!({ BINDING_ANNOTATION: b }),
            None => json!({}),
        };
        json!({"metadata": {"annotations": annotations},
            "spec": {"roles": [{"name": "server", "replicas": replicas}]}})
    }

    #[test]
    fn what_still_reads_decides() {
        let decide = |old: &Value, new: &Value| decide_unreadable(Some(old), Some(new), "t", "bad");
        let bound = object(Some("b"), json!("two"));
        // GPUStack's write leaving annotations and counts alone passes.
        assert!(decide(&bound, &bound).is_allowed());
        // A count that still reads moves on a bound object: refused.
        let moved = object(Some("b"), json!(3));
        assert!(!decide(&object(Some("b"), json!(2)), &moved).is_allowed());
        // Counts are free on an unbound one; annotations are never touched.
        assert!(decide(&object(None, json!(2)), &object(None, json!(3))).is_allowed());
        let (rule, message) = match decide(&bound, &object(None, json!("two"))) {
            Verdict::Denied { rule, message } => (rule, message),
            other => panic!("{other:?}"),
        };
        assert_eq!(rule, Rule::BoundAnnotations);
        assert!(message.contains("(bad)"), "{message}");
    }
}
