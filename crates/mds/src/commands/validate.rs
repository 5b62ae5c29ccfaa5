//! `mds validate`: the admission rules offline, for CI and GitOps pipelines.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::spec::{GROUP, VERSION};
use mds_api::target::ModelDeployment;
use mds_api::validation::{Report, TargetCheck, validate_scaler};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A YAML file of ModelDeploymentScaler manifests (multi-document); '-' reads standard
    /// input. Repeat for several files.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// A YAML file of target ModelDeployment manifests; enables the target-dependent rules for
    /// scalers whose targetRef names them.
    #[arg(long = "target", value_name = "FILE")]
    pub targets: Vec<PathBuf>,
    /// Print each scaler with its stored defaults filled in, as the API server would store it.
    #[arg(long)]
    pub show_defaults: bool,
}

/// How one run ended; the highest severity wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Valid = 0,
    Invalid = 1,
    Unreadable = 2,
}

/// One YAML document of an input.
struct Document {
    source: String,
    index: usize,
    value: serde_yaml_ng::Value,
}

impl Document {
    fn label(&self) -> String {
        format!("{}: document {}", self.source, self.index + 1)
    }

    fn kind(&self) -> Option<&str> {
        self.value.get("kind").and_then(|k| k.as_str())
    }

    fn api_group(&self) -> Option<&str> {
        let api_version = self.value.get("apiVersion")?.as_str()?;
        Some(api_version.split_once('/').map_or("", |(group, _)| group))
    }
}

/// One named input and its bytes, or why it could not be read.
pub struct Input {
    pub name: String,
    pub bytes: Result<Vec<u8>, String>,
}

pub fn run(args: &Args) -> ExitCode {
    let inputs: Vec<Input> = args
        .files
        .iter()
        .chain(&args.targets)
        .map(|path| Input {
            name: path.display().to_string(),
            bytes: super::read_input(path, super::MAX_INPUT_BYTES),
        })
        .collect();
    let target_sources: Vec<String> = args
        .targets
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut stdout = String::new();
    let mut stderr = String::new();
    let outcome = check_inputs(
        &inputs,
        &target_sources,
        args.show_defaults,
        &mut stdout,
        &mut stderr,
    );
    super::emit(&stdout, &stderr);
    ExitCode::from(outcome as u8)
}

/// The whole command without I/O: output goes to two strings, the outcome is returned.
pub fn check_inputs(
    inputs: &[Input],
    target_sources: &[String],
    show_defaults: bool,
    out: &mut String,
    err: &mut String,
) -> Outcome {
    let mut outcome = Outcome::Valid;
    let mut documents = Vec::new();
    for input in inputs {
        let source = &input.name;
        let bytes = match &input.bytes {
            Ok(bytes) => bytes,
            Err(reason) => {
                let _ = writeln!(err, "{source}: cannot read: {reason}");
                outcome = outcome.max(Outcome::Unreadable);
                continue;
            }
        };
        match parse_documents(source, bytes) {
            Ok(docs) => documents.extend(docs),
            Err(message) => {
                let _ = writeln!(err, "{message}");
                outcome = outcome.max(Outcome::Unreadable);
            }
        }
    }

    let mut targets: Vec<ModelDeployment> = Vec::new();
    for doc in &documents {
        if doc.kind() == Some("ModelDeployment") && doc.api_group() == Some(GROUP) {
            match serde_path_to_error::deserialize::<_, ModelDeployment>(doc.value.clone()) {
                Ok(md) => targets.push(md),
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "{}: ModelDeployment: invalid\n  {}: {}",
                        doc.label(),
                        yaml_path(&e.path().to_string()),
                        e.inner()
                    );
                    outcome = outcome.max(Outcome::Invalid);
                }
            }
        } else if target_sources.contains(&doc.source) {
            let _ = writeln!(
                err,
                "{}: skipped: --target files hold ModelDeployment documents (kind {:?})",
                doc.label(),
                doc.kind().unwrap_or("<none>")
            );
        }
    }

    let mut scalers = 0;
    for doc in documents
        .iter()
        .filter(|d| !target_sources.contains(&d.source))
    {
        match (doc.kind(), doc.api_group()) {
            (Some("ModelDeploymentScaler"), Some(GROUP)) => {
                scalers += 1;
                outcome = outcome.max(check_scaler(doc, &targets, show_defaults, out));
            }
            (Some("ModelDeploymentScaler"), group) => {
                let _ = writeln!(
                    out,
                    "{}: ModelDeploymentScaler: invalid\n  apiVersion: group {:?} is not {GROUP}; use apiVersion: {GROUP}/{VERSION}",
                    doc.label(),
                    group.unwrap_or("")
                );
                outcome = outcome.max(Outcome::Invalid);
            }
            (Some("ModelDeployment"), _) => {}
            (kind, _) => {
                let _ = writeln!(
                    err,
                    "{}: skipped: kind {:?} is not a ModelDeploymentScaler",
                    doc.label(),
                    kind.unwrap_or("<none>")
                );
            }
        }
    }
    if scalers == 0 && outcome == Outcome::Valid {
        // Nothing was validated: in a pipeline that is a mistake, not a pass.
        let _ = writeln!(err, "no ModelDeploymentScaler documents found");
        outcome = Outcome::Unreadable;
    }
    outcome
}

/// Splits a YAML stream into non-empty documents; a syntax error names the line.
fn parse_documents(source: &str, bytes: &[u8]) -> Result<Vec<Document>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "{source}: not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    let mut documents = Vec::new();
    for (index, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value: serde_yaml_ng::Value = serde::Deserialize::deserialize(de).map_err(|e| {
            let place = e
                .location()
                .map(|l| format!("line {} column {}", l.line(), l.column()))
                .unwrap_or_else(|| format!("document {}", index + 1));
            format!("{source}: {place}: not readable YAML: {e}")
        })?;
        if value.is_null() {
            continue;
        }
        if !value.is_mapping() {
            return Err(format!(
                "{source}: document {}: not readable as a manifest: expected a mapping with apiVersion and kind",
                index + 1
            ));
        }
        documents.push(Document {
            source: source.to_string(),
            index,
            value,
        });
    }
    Ok(documents)
}

/// Turns a serde path (`spec.roles[0].maxReplicas`, `.` for the root) into the printed form.
fn yaml_path(path: &str) -> String {
    if path == "." || path.is_empty() {
        "(document)".to_string()
    } else {
        path.to_string()
    }
}

/// `spec.roles.0.name` (serde's path form) as `spec.roles[0].name`.
fn bracket_indices(path: &str) -> String {
    let mut out = String::new();
    for segment in path.split('.') {
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(segment);
        }
    }
    out
}

/// Deserializes a scaler and lists every type error, not just the first: each failing value
/// is removed and deserialization retried, so the rest of the document is still checked.
/// Returns the scaler when it deserializes, the type errors (path, message) and the unknown
/// fields.
fn deserialize_collecting(
    value: &serde_yaml_ng::Value,
) -> (
    Option<ModelDeploymentScaler>,
    Vec<(String, String)>,
    Vec<String>,
) {
    let mut value = value.clone();
    let mut errors: Vec<(String, String)> = Vec::new();
    for _ in 0..64 {
        let mut unknown = Vec::new();
        let mut note_unknown = |path: serde_ignored::Path| unknown.push(path.to_string());
        let parsed: Result<ModelDeploymentScaler, _> = serde_path_to_error::deserialize(
            serde_ignored::Deserializer::new(value.clone(), &mut note_unknown),
        );
        match parsed {
            Ok(scaler) => return (Some(scaler), errors, unknown),
            Err(e) => {
                let message = e.inner().to_string();
                let segments: Vec<String> = e.path().iter().filter_map(segment).collect();
                // A missing required field is reported at the field itself.
                let missing = message
                    .strip_prefix("missing field `")
                    .and_then(|m| m.split('`').next())
                    .map(str::to_string);
                let mut path: Vec<String> = segments.clone();
                if let Some(field) = &missing {
                    path.push(field.clone());
                }
                let printed = if path.is_empty() {
                    "(document)".to_string()
                } else {
                    bracket_indices(&path.join("."))
                };
                let message = if missing.is_some() {
                    "is required".to_string()
                } else {
                    message
                };
                if errors.iter().any(|(p, _)| *p == printed)
                    || missing.is_some()
                    || !remove(&mut value, &segments)
                {
                    errors.push((printed, message));
                    return (None, errors, unknown);
                }
                errors.push((printed, message));
            }
        }
    }
    (None, errors, vec![])
}

/// A path segment as a key or index, when it names a place in the document.
fn segment(s: &serde_path_to_error::Segment) -> Option<String> {
    match s {
        serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
        serde_path_to_error::Segment::Map { key } => Some(key.clone()),
        _ => None,
    }
}

/// Removes the value at `path` from a YAML document; false when there is nothing to remove.
fn remove(value: &mut serde_yaml_ng::Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = value;
    for key in parents {
        let next = match node {
            serde_yaml_ng::Value::Mapping(m) => m.get_mut(key.as_str()),
            serde_yaml_ng::Value::Sequence(s) => {
                key.parse::<usize>().ok().and_then(|i| s.get_mut(i))
            }
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
    }
    match node {
        serde_yaml_ng::Value::Mapping(m) => m.remove(last.as_str()).is_some(),
        serde_yaml_ng::Value::Sequence(s) => match last.parse::<usize>() {
            Ok(i) if i < s.len() => {
                s.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

fn check_scaler(
    doc: &Document,
    targets: &[ModelDeployment],
    show_defaults: bool,
    out: &mut String,
) -> Outcome {
    let (parsed, type_errors, unknown_fields) = deserialize_collecting(&doc.value);
    let Some(mut scaler) = parsed.filter(|_| type_errors.is_empty()) else {
        let _ = writeln!(out, "{}: ModelDeploymentScaler: invalid", doc.label());
        for (path, message) in &type_errors {
            let _ = writeln!(out, "  {path}: {message}");
        }
        return Outcome::Invalid;
    };
    let name = scaler.metadata.name.clone().unwrap_or_default();
    let namespace = scaler.metadata.namespace.clone();
    default_spec(&mut scaler.spec);
    let target = targets.iter().find(|md| {
        md.metadata.name.as_deref() == Some(scaler.spec.target_ref.name.as_str())
            && (namespace.is_none()
                || md.metadata.namespace.is_none()
                || md.metadata.namespace == namespace)
    });
    let mut report: Report = validate_scaler(&scaler, None, target);
    // The generated type reads apiVersion and kind itself; status is the controller's.
    let ignored =
        |f: &&String| f.as_str() == "apiVersion" || f.as_str() == "kind" || f.starts_with("status");
    for field in unknown_fields.iter().filter(|f| !ignored(f)) {
        report.warn(
            bracket_indices(field),
            "is not a field of ModelDeploymentScaler and is dropped by the API server; check its spelling and indentation",
        );
    }
    let target_check = match target {
        Some(_) => TargetCheck::Checked(&scaler.spec.target_ref.name),
        None => TargetCheck::NotGiven,
    };
    let _ = writeln!(
        out,
        "{}: {}",
        doc.label(),
        report.render(&name, &target_check, true)
    );
    if show_defaults && report.is_valid() {
        let yaml = serde_yaml_ng::to_string(&scaler).expect("a scaler always serializes");
        let _ = writeln!(out, "---\n{yaml}");
    }
    if report.is_valid() {
        Outcome::Valid
    } else {
        Outcome::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run_on(texts: &[(&str, &str)], targets: &[&str]) -> (Outcome, String, String) {
        let inputs: Vec<Input> = texts
            .iter()
            .map(|(name, text)| Input {
                name: name.to_string(),
                bytes: Ok(text.as_bytes().to_vec()),
            })
            .collect();
        let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        let (mut out, mut err) = (String::new(), String::new());
        let outcome = check_inputs(&inputs, &targets, false, &mut out, &mut err);
        (outcome, out, err)
    }

    const SCALER: &str = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata:
  name: s
spec:
  targetRef:
    name: md
  roles:
    - name: server
      maxReplicas: 4
  algorithm:
    proportional:
      metric: QueueDepth
      roleTargets:
        - name: server
          target: \"8\"
";

    #[test]
    fn type_errors_name_the_path() {
        let text = SCALER.replace("maxReplicas: 4", "maxReplicas: many");
        let (outcome, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert_eq!(outcome, Outcome::Invalid);
        assert!(
            out.contains("spec.roles[0].maxReplicas: invalid type"),
            "{out}"
        );
        let text = SCALER.replace("metric: QueueDepth", "metric: Queue");
        let (_, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert!(
            out.contains("spec.algorithm.proportional.metric: unknown variant `Queue`"),
            "{out}"
        );
        let text = format!(
            "{SCALER}  behavior:\n    scaleDown:\n      stepPolicy: {{type: Replicas, value: 1}}\n"
        );
        let (_, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert!(out.contains("spec.behavior.scaleDown.stepPolicy.type: unknown variant `Replicas`, expected `Pods` or `Percent`"), "{out}");
        let text = format!("{SCALER}  behavior:\n    scaleUp:\n      stepPolicy: {{type: Pods}}\n");
        let (_, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert!(
            out.contains("spec.behavior.scaleUp.stepPolicy.value: is required"),
            "{out}"
        );
        let text = SCALER.replace("target: \"8\"", "target: 0.5");
        let (_, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert!(out.contains("quote it as a string"), "{out}");
    }

    #[test]
    fn every_type_error_is_listed_and_the_rules_still_run_after_none() {
        let text = SCALER
            .replace("maxReplicas: 4", "maxReplicas: many")
            .replace("metric: QueueDepth", "metric: Queue")
            .replace("  targetRef:", "  mode: active\n  targetRef:");
        let (outcome, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert_eq!(outcome, Outcome::Invalid);
        for path in [
            "spec.mode:",
            "spec.roles[0].maxReplicas:",
            "spec.algorithm.proportional.metric:",
        ] {
            assert!(out.contains(path), "missing {path} in {out}");
        }
        let text = SCALER.replace("metadata:\n  name: s\n", "");
        let (_, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert!(out.contains("  metadata: is required"), "{out}");
    }

    #[test]
    fn unknown_fields_are_warned_about() {
        let text = SCALER.replace("maxReplicas: 4", "maxReplicas: 4\n      maxReplica: 5");
        let (outcome, out, _) = run_on(&[("a.yaml", &text)], &[]);
        assert_eq!(outcome, Outcome::Valid, "{out}");
        assert!(out.contains("warning: spec.roles[0].maxReplica"), "{out}");
    }

    #[test]
    fn targets_from_the_inputs_enable_target_rules() {
        let target = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: md
spec:
  engine: {name: vLLM}
  roles:
    - name: server
    - name: extra
";
        let (outcome, out, _) = run_on(&[("t.yaml", target), ("a.yaml", SCALER)], &["t.yaml"]);
        assert_eq!(outcome, Outcome::Invalid);
        assert!(
            out.contains("checked against ModelDeployment \"md\""),
            "{out}"
        );
        assert!(out.contains("spec.roles: target role \"extra\""), "{out}");
        // The same pair in one multi-document file.
        let both = format!("{target}---\n{SCALER}");
        let (outcome, _, _) = run_on(&[("both.yaml", &both)], &[]);
        assert_eq!(outcome, Outcome::Invalid);
    }

    #[test]
    fn other_kinds_are_skipped_and_empty_input_is_reported() {
        let (outcome, out, err) = run_on(&[("cm.yaml", "apiVersion: v1\nkind: ConfigMap\n")], &[]);
        assert_eq!(
            outcome,
            Outcome::Unreadable,
            "nothing validated is not a pass"
        );
        assert!(out.is_empty());
        assert!(err.contains("skipped: kind \"ConfigMap\""), "{err}");
        assert!(
            err.contains("no ModelDeploymentScaler documents found"),
            "{err}"
        );
    }

    #[test]
    fn yaml_syntax_errors_are_unreadable_with_a_line() {
        let (outcome, _, err) = run_on(&[("bad.yaml", "spec:\n  roles: [\n")], &[]);
        assert_eq!(outcome, Outcome::Unreadable);
        assert!(err.contains("bad.yaml: line "), "{err}");
        let (outcome, _, err) = run_on(&[("list.yaml", "- a\n- b\n")], &[]);
        assert_eq!(outcome, Outcome::Unreadable);
        assert!(err.contains("expected a mapping"), "{err}");
    }

    #[test]
    fn the_worst_outcome_wins() {
        let invalid = SCALER.replace("maxReplicas: 4", "maxReplicas: 2000");
        let (outcome, out, _) = run_on(&[("ok.yaml", SCALER), ("bad.yaml", &invalid)], &[]);
        assert_eq!(outcome, Outcome::Invalid);
        assert!(
            out.contains("ok.yaml: document 1: ModelDeploymentScaler s: valid"),
            "{out}"
        );
        assert!(
            out.contains("  spec.roles[0].maxReplicas: 2000 is out of range; allowed is 1 to 1024"),
            "{out}"
        );
        let (outcome, _, _) = run_on(&[("bad.yaml", &invalid), ("u.yaml", "a: [")], &[]);
        assert_eq!(outcome, Outcome::Unreadable);
    }

    /// Fragments that make random documents likely to reach the deeper parsing paths.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("apiVersion: worker.gpustack.ai/v1\n".to_string()),
            Just("kind: ModelDeploymentScaler\n".to_string()),
            Just("kind: ModelDeployment\n".to_string()),
            Just("metadata: {name: s}\n".to_string()),
            Just("spec:\n  targetRef: {name: md}\n".to_string()),
            Just("  roles: [{name: server, maxReplicas: 4, minReplicas: 9}]\n".to_string()),
            Just(
                "  ratios: [{numeratorRole: a, denominatorRole: a, min: \"1e400\"}]\n".to_string()
            ),
            Just("  algorithm: {predictive: {qLevel: \"-0\"}}\n".to_string()),
            Just("---\n".to_string()),
            Just("&a [*a]\n".to_string()),
            "[ -~\\n]{0,12}",
        ]
    }

    proptest! {
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let inputs = [Input { name: "fuzz".into(), bytes: Ok(bytes) }];
            let (mut out, mut err) = (String::new(), String::new());
            let _ = check_inputs(&inputs, &[], true, &mut out, &mut err);
        }

        #[test]
        fn never_panics_on_manifest_like_text(parts in proptest::collection::vec(fragment(), 0..14)) {
            let text = parts.concat();
            let inputs = [Input { name: "fuzz".into(), bytes: Ok(text.into_bytes()) }];
            let (mut out, mut err) = (String::new(), String::new());
            let outcome = check_inputs(&inputs, &[], true, &mut out, &mut err);
            if outcome == Outcome::Unreadable {
                prop_assert!(!err.is_empty());
            }
        }
    }
}
