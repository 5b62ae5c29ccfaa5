//! Target writes as RFC 6902 JSON Patches (D3, D20, TARGET.md §6). A patch tests what it
//! relies on, so a concurrent change fails it cleanly and the next pass re-plans.

use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION, annotation_pointer};
use mds_api::status::ReplicaVector;
use serde::Serialize;
use serde_json::{Value, json};

/// One JSON Patch operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp {
    Test { path: String, value: Value },
    Add { path: String, value: Value },
    Replace { path: String, value: Value },
    Remove { path: String },
}

/// What the target looks like to a patch: its role order and counts, and its annotations.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TargetShape {
    /// `spec.roles[i].name` and `.replicas`, in order.
    pub roles: Vec<(String, i32)>,
    pub has_annotations: bool,
    /// The decision annotation is present (a release removes it only then).
    pub has_decision: bool,
    pub resource_version: Option<String>,
}

impl TargetShape {
    /// The shape of `md` as it stands.
    pub fn of(md: &mds_api::target::ModelDeployment) -> TargetShape {
        TargetShape {
            roles: md
                .spec
                .roles
                .iter()
                .map(|r| (r.name.clone(), r.replicas()))
                .collect(),
            has_annotations: md
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| !a.is_empty()),
            has_decision: crate::protocol::annotation(
                md,
                mds_api::annotations::DECISION_ANNOTATION,
            )
            .is_some(),
            resource_version: md.metadata.resource_version.clone(),
        }
    }
}

/// Installs the binding annotation. Guarded by the resource version: two scalers binding at
/// once cannot both win (a failed bind is simply retried next pass).
pub fn bind(target: &TargetShape, binding: &str) -> Vec<PatchOp> {
    let mut ops = Vec::new();
    if let Some(rv) = &target.resource_version {
        ops.push(PatchOp::Test {
            path: "/metadata/resourceVersion".into(),
            value: json!(rv),
        });
    }
    if target.has_annotations {
        ops.push(PatchOp::Add {
            path: annotation_pointer(BINDING_ANNOTATION),
            value: json!(binding),
        });
    } else {
        ops.push(PatchOp::Add {
            path: "/metadata/annotations".into(),
            value: json!({ BINDING_ANNOTATION: binding }),
        });
    }
    ops
}

/// Writes a replica vector and its decision under the binding (D3): test the binding's exact
/// value and each role's name and current count, replace the changed counts, add the decision.
pub fn commit(
    target: &TargetShape,
    binding: &str,
    vector: &ReplicaVector,
    decision: &str,
) -> Vec<PatchOp> {
    let mut ops = vec![PatchOp::Test {
        path: annotation_pointer(BINDING_ANNOTATION),
        value: json!(binding),
    }];
    for (i, (name, current)) in target.roles.iter().enumerate() {
        let Some(&wanted) = vector.get(name) else {
            continue;
        };
        ops.push(PatchOp::Test {
            path: format!("/spec/roles/{i}/name"),
            value: json!(name),
        });
        ops.push(PatchOp::Test {
            path: format!("/spec/roles/{i}/replicas"),
            value: json!(current),
        });
        if wanted != *current {
            ops.push(PatchOp::Replace {
                path: format!("/spec/roles/{i}/replicas"),
                value: json!(wanted),
            });
        }
    }
    ops.push(PatchOp::Add {
        path: annotation_pointer(DECISION_ANNOTATION),
        value: json!(decision),
    });
    ops
}

/// Removes both annotations after testing the binding is ours; counts stay (D20).
pub fn release(target: &TargetShape, binding: &str) -> Vec<PatchOp> {
    let mut ops = vec![
        PatchOp::Test {
            path: annotation_pointer(BINDING_ANNOTATION),
            value: json!(binding),
        },
        PatchOp::Remove {
            path: annotation_pointer(BINDING_ANNOTATION),
        },
    ];
    if target.has_decision {
        ops.push(PatchOp::Remove {
            path: annotation_pointer(DECISION_ANNOTATION),
        });
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> TargetShape {
        TargetShape {
            roles: vec![("prefill".into(), 3), ("decode".into(), 4)],
            has_annotations: true,
            has_decision: false,
            resource_version: Some("17".into()),
        }
    }

    #[test]
    fn a_commit_tests_what_it_relies_on_and_writes_only_changes() {
        let vector: ReplicaVector = [("prefill".to_string(), 3), ("decode".to_string(), 5)].into();
        let ops = commit(&shape(), "B", &vector, "D");
        let json = serde_json::to_value(&ops).unwrap();
        assert_eq!(
            json,
            json!([
                {"op": "test", "path": "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-binding", "value": "B"},
                {"op": "test", "path": "/spec/roles/0/name", "value": "prefill"},
                {"op": "test", "path": "/spec/roles/0/replicas", "value": 3},
                {"op": "test", "path": "/spec/roles/1/name", "value": "decode"},
                {"op": "test", "path": "/spec/roles/1/replicas", "value": 4},
                {"op": "replace", "path": "/spec/roles/1/replicas", "value": 5},
                {"op": "add", "path": "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-decision", "value": "D"}
            ])
        );
        assert!(
            !json.to_string().contains("resourceVersion"),
            "commits never test the resource version"
        );
    }

    #[test]
    fn binding_creates_the_annotation_map_when_missing() {
        let mut s = shape();
        s.has_annotations = false;
        let ops = bind(&s, "B");
        assert_eq!(
            ops[1],
            PatchOp::Add {
                path: "/metadata/annotations".into(),
                value: json!({BINDING_ANNOTATION: "B"})
            }
        );
    }

    #[test]
    fn release_removes_both_annotations_after_testing_ownership() {
        let mut s = shape();
        s.has_decision = true;
        let ops = release(&s, "B");
        assert!(matches!(&ops[0], PatchOp::Test { value, .. } if value == "B"));
        assert_eq!(ops.len(), 3);
        assert!(
            ops.iter().all(|op| !matches!(op, PatchOp::Replace { .. })),
            "counts stay"
        );
    }
}
