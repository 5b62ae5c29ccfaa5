//! A ModelDeploymentScaler document checked as admission checks it: type problems first (in
//! the user's words), then the stored defaults and every admission rule on what could be
//! read, then fields the API server would drop. `mds validate` and `mds replay` both use it.

use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::suggest::closest;
use mds_api::target::ModelDeployment;
use mds_api::validation::{Finding, Report, validate_scaler};
use serde_yaml_ng::Value;

use super::collect::{Scope, collect};
use super::{Document, Seg, render, schema};

/// A scaler document, typed as far as it goes.
pub struct ScalerRead {
    /// `metadata.name` as written (empty when absent).
    pub name: String,
    pub namespace: Option<String>,
    /// `spec.targetRef.name` as written.
    pub target_name: Option<String>,
    /// The scaler with its stored defaults, when the document could be typed.
    pub scaler: Option<ModelDeploymentScaler>,
    type_errors: Vec<Finding>,
    scopes: Vec<Scope>,
    unknown: Vec<Finding>,
}

pub fn read_scaler(doc: &Document) -> ScalerRead {
    let mut value = doc.value.clone();
    if let Value::Mapping(m) = &mut value {
        // The API server ignores status sent with the object; so does the check.
        m.remove("status");
    }
    let root = schema::scaler_root();
    let collected = collect::<ModelDeploymentScaler>(&value, Some(root));
    let mut unknown = Vec::new();
    for path in &collected.unknown {
        if matches!(path.as_slice(), [Seg::Key(k)] if k == "apiVersion" || k == "kind") {
            continue;
        }
        let known = path
            .split_last()
            .and_then(|(_, parent)| schema::node(root, parent))
            .map(schema::field_names)
            .unwrap_or_default();
        let hint = match path.last() {
            Some(Seg::Key(key)) => closest(key, known).map(|near| format!("did you mean {near}?")),
            _ => None,
        };
        unknown.push(Finding {
            path: render(path),
            message: format!(
                "is not a field of ModelDeploymentScaler and is dropped by the API server; {}",
                hint.unwrap_or_else(|| "check its spelling and indentation".into())
            ),
        });
    }
    let scaler = collected.value.map(|mut s| {
        default_spec(&mut s.spec);
        s
    });
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    ScalerRead {
        name: doc.name().unwrap_or_default().to_string(),
        namespace: doc.namespace().map(str::to_string),
        target_name: text(
            doc.value
                .get("spec")
                .and_then(|s| s.get("targetRef"))
                .and_then(|t| t.get("name")),
        ),
        scaler,
        type_errors: collected.errors,
        scopes: collected.scopes,
        unknown,
    }
}

impl ScalerRead {
    /// Every finding: type problems, the admission rules (with `target` when there is one)
    /// except where a value had to be stood in for, and unknown fields.
    pub fn check(&self, target: Option<&ModelDeployment>) -> Report {
        let mut report = Report {
            errors: self.type_errors.clone(),
            warnings: vec![],
        };
        if let Some(scaler) = &self.scaler {
            let rules = validate_scaler(scaler, None, target);
            let kept = |f: &Finding| !self.scopes.iter().any(|s| s.covers(f));
            report.errors.extend(rules.errors.into_iter().filter(kept));
            report
                .warnings
                .extend(rules.warnings.into_iter().filter(kept));
        }
        report.warnings.extend(self.unknown.iter().cloned());
        report
    }
}

/// The `status` a scaler document carries, as a controller starting up would read it from
/// the API server (`mds replay` starts from it; `mds validate` ignores it, as admission
/// does). `Ok(None)` without one; every problem by its path under `status`. Fields the
/// status type does not know come back as warnings.
pub fn read_status(
    doc: &Document,
) -> Result<(Option<ModelDeploymentScalerStatus>, Vec<Finding>), Vec<Finding>> {
    #[derive(serde::Deserialize)]
    struct StatusOnly {
        #[serde(default)]
        status: Option<ModelDeploymentScalerStatus>,
    }
    let Some(status) = doc.value.get("status").filter(|v| !v.is_null()) else {
        return Ok((None, vec![]));
    };
    let mut only = serde_yaml_ng::Mapping::new();
    only.insert(Value::from("status"), status.clone());
    let collected = collect::<StatusOnly>(&Value::Mapping(only), Some(schema::scaler_root()));
    match collected.value {
        Some(typed) if collected.errors.is_empty() => {
            let unknown = collected
                .unknown
                .iter()
                .map(|path| Finding {
                    path: render(path),
                    message: "is not a field of the scaler's status and is ignored".into(),
                })
                .collect();
            Ok((typed.status, unknown))
        }
        _ => Err(collected.errors),
    }
}

/// A ModelDeployment document typed as the scaler reads it; every problem by path.
pub fn read_target(doc: &Document) -> Result<ModelDeployment, Vec<Finding>> {
    let collected = collect::<ModelDeployment>(&doc.value, None);
    match collected.value {
        Some(md) if collected.errors.is_empty() => Ok(md),
        _ => Err(collected.errors),
    }
}

/// The fields of a ModelDeployment the scaler reads, by parent (`[]`: any list item). A
/// target carries many more (GPUStack's own), which are kept and not reported.
const TARGET_FIELDS: &[(&str, &[&str])] = &[
    ("", &["apiVersion", "kind", "metadata", "spec", "status"]),
    ("spec", &["model", "engine", "router", "roles"]),
    (
        "spec.roles[]",
        &[
            "name",
            "kind",
            "replicas",
            "size",
            "instanceType",
            "command",
            "elasticEp",
            "ports",
            "extraArgs",
        ],
    ),
    ("spec.engine", &["name", "version"]),
    (
        "spec.router",
        &[
            "name",
            "replicas",
            "image",
            "extraArgs",
            "requestTimeoutSeconds",
        ],
    ),
    ("spec.model", &["name"]),
];

/// A ModelDeployment's fields that look like misspellings of one the scaler reads
/// (`replicsa`, `rolse`): warnings with a did-you-mean. Other unknown fields are GPUStack's
/// and pass silently.
pub fn target_typos(doc: &Document) -> Vec<Finding> {
    let collected = collect::<ModelDeployment>(&doc.value, None);
    let mut out = Vec::new();
    for path in &collected.unknown {
        let Some((Seg::Key(key), parent)) = path.split_last() else {
            continue;
        };
        let pattern = render(parent)
            .replace("(document)", "")
            .split('[')
            .map(|part| part.split_once(']').map_or(part, |(_, rest)| rest))
            .collect::<Vec<_>>()
            .join("[]");
        let Some((_, known)) = TARGET_FIELDS.iter().find(|(p, _)| *p == pattern) else {
            continue;
        };
        if let Some(near) = closest(key, known.iter().copied()) {
            out.push(Finding {
                path: render(path),
                message: format!(
                    "is not a ModelDeployment field the scaler reads; did you mean {near}? (the scaler reads the target's {near} and ignores {key})"
                ),
            });
        }
    }
    out
}

/// Writes a report: a header line, then each error and warning indented under it.
pub fn write_report(out: &mut String, header: &str, report: &Report) {
    // The same finding lines the admission webhook returns.
    out.push_str(header);
    report.write_findings(out, true);
    out.push('\n');
}
