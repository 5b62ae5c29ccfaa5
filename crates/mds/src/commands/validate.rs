//! `mds validate`: the admission rules offline, for CI and GitOps pipelines.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use mds_api::spec::{GROUP, VERSION};
use mds_api::target::ModelDeployment;
use mds_api::validation::{Finding, Report};

use crate::manifest::scaler::{read_scaler, read_target, target_typos, write_report};
use crate::manifest::{Document, holdings, parse_documents};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A YAML file of ModelDeploymentScaler manifests (multi-document); '-' reads standard
    /// input. Repeat for several files.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// A YAML file of target ModelDeployment manifests; enables the target-dependent rules for
    /// scalers whose targetRef names them. A scaler whose target is not among them is invalid
    /// unless --allow-missing-target is given. The same file may also be given with -f.
    #[arg(long = "target", value_name = "FILE")]
    pub targets: Vec<PathBuf>,
    /// With --target: a scaler whose target is not in the --target files is checked alone
    /// (a warning) instead of being invalid.
    #[arg(long)]
    pub allow_missing_target: bool,
    /// Warnings count as errors: a scaler with any warning is invalid (exit 1). For CI.
    #[arg(long)]
    pub strict: bool,
    /// Print each valid scaler with its stored defaults filled in, as the API server would
    /// store it, as YAML on standard output; the report goes to standard error.
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

/// One named input, its bytes (or why they could not be read), and what it was given as.
pub struct Input {
    pub name: String,
    pub bytes: Result<Vec<u8>, String>,
    /// Given with -f: its scalers are checked.
    pub scalers: bool,
    /// Given with --target: its ModelDeployments are targets, and a scaler must find its own.
    pub targets: bool,
}

/// The flags that change how findings are judged and printed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub show_defaults: bool,
    pub strict: bool,
    pub allow_missing_target: bool,
}

pub fn run(args: &Args) -> ExitCode {
    let mut inputs: Vec<Input> = Vec::new();
    let given = args
        .files
        .iter()
        .map(|p| (p, true))
        .chain(args.targets.iter().map(|p| (p, false)));
    for (path, as_scalers) in given {
        let name = path.display().to_string();
        // One file given as both is read once ('-' can only be read once) and plays both parts.
        if let Some(seen) = inputs.iter_mut().find(|i| i.name == name) {
            seen.scalers |= as_scalers;
            seen.targets |= !as_scalers;
            continue;
        }
        inputs.push(Input {
            name,
            bytes: super::read_input(path, super::MAX_INPUT_BYTES),
            scalers: as_scalers,
            targets: !as_scalers,
        });
    }
    let options = Options {
        show_defaults: args.show_defaults,
        strict: args.strict,
        allow_missing_target: args.allow_missing_target,
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    let outcome = check_inputs(&inputs, options, &mut stdout, &mut stderr);
    super::emit(&stdout, &stderr);
    ExitCode::from(outcome as u8)
}

/// A document and what its input was given as.
struct Placed<'a> {
    doc: &'a Document,
    input: &'a Input,
}

/// The whole command without I/O: output goes to two strings, the outcome is returned.
pub fn check_inputs(
    inputs: &[Input],
    options: Options,
    out: &mut String,
    err: &mut String,
) -> Outcome {
    let (parsed, mut outcome) = parse_inputs(inputs, err);
    let placed: Vec<Placed> = parsed
        .iter()
        .flat_map(|(input, docs)| docs.iter().map(move |doc| Placed { doc, input }))
        .collect();

    // The report goes where the YAML does not: stderr when --show-defaults prints YAML.
    let mut report = String::new();
    let mut yaml = String::new();
    let (targets, read) = read_targets(&placed, &mut report);
    outcome = outcome.max(read);
    let target_docs: Vec<&Document> = placed
        .iter()
        .filter(|p| p.input.targets)
        .map(|p| p.doc)
        .collect();
    let targets_given = inputs.iter().any(|i| i.targets);
    let context = TargetContext {
        targets: &targets,
        targets_given,
        target_file_holdings: holdings(&target_docs),
        any_target_in_inputs: placed.iter().any(|p| p.doc.is("ModelDeployment")),
    };

    let mut scalers = 0;
    for p in &placed {
        let (scaler, checked) = check_document(p, &context, options, &mut report, &mut yaml, err);
        scalers += usize::from(scaler);
        outcome = outcome.max(checked);
    }
    if options.show_defaults {
        err.push_str(&report);
        out.push_str(&yaml);
    } else {
        out.push_str(&report);
    }
    if scalers == 0 && outcome == Outcome::Valid {
        // Nothing was validated: in a pipeline that is a mistake, not a pass.
        err.push_str(&super::error_line(&nothing_validated(&parsed, &targets)));
        outcome = Outcome::Unreadable;
    }
    outcome
}

/// Each input's documents; an input that cannot be read or parsed is said on `err` and makes
/// the outcome `Unreadable`.
fn parse_inputs<'a>(
    inputs: &'a [Input],
    err: &mut String,
) -> (Vec<(&'a Input, Vec<Document>)>, Outcome) {
    let mut outcome = Outcome::Valid;
    let mut parsed: Vec<(&Input, Vec<Document>)> = Vec::new();
    for input in inputs {
        let bytes = match &input.bytes {
            Ok(bytes) => bytes,
            Err(reason) => {
                err.push_str(&super::error_line(&format!(
                    "{}: cannot read: {reason}",
                    input.name
                )));
                outcome = outcome.max(Outcome::Unreadable);
                continue;
            }
        };
        match parse_documents(&input.name, bytes) {
            Ok(docs) => parsed.push((input, docs)),
            Err(message) => {
                err.push_str(&super::error_line(&message));
                outcome = outcome.max(Outcome::Unreadable);
            }
        }
    }
    (parsed, outcome)
}

/// The ModelDeployments among the documents; one that cannot be read is reported invalid.
fn read_targets(placed: &[Placed], report: &mut String) -> (Vec<ModelDeployment>, Outcome) {
    let mut outcome = Outcome::Valid;
    let mut targets: Vec<ModelDeployment> = Vec::new();
    for p in placed.iter().filter(|p| p.doc.is("ModelDeployment")) {
        match read_target(p.doc) {
            Ok(md) => {
                let typos = target_typos(p.doc);
                if !typos.is_empty() {
                    let header = format!(
                        "{}: {}: read, with warnings",
                        p.doc.label(),
                        p.doc.describe()
                    );
                    let findings = Report {
                        errors: vec![],
                        warnings: typos,
                    };
                    write_report(report, &header, &findings);
                }
                targets.push(md);
            }
            Err(findings) => {
                let header = format!("{}: {}: invalid", p.doc.label(), p.doc.describe());
                let findings = Report {
                    errors: findings,
                    warnings: vec![],
                };
                write_report(report, &header, &findings);
                outcome = outcome.max(Outcome::Invalid);
            }
        }
    }
    (targets, outcome)
}

/// One document: a scaler of our group is checked (the first value says it was one), a scaler
/// of another group is invalid, anything else is skipped with a note.
fn check_document(
    p: &Placed,
    context: &TargetContext,
    options: Options,
    report: &mut String,
    yaml: &mut String,
    err: &mut String,
) -> (bool, Outcome) {
    let doc = p.doc;
    match (doc.kind(), doc.api_group()) {
        (Some("ModelDeploymentScaler"), Some(GROUP)) if p.input.scalers => {
            (true, check_scaler(doc, context, options, report, yaml))
        }
        (Some("ModelDeploymentScaler"), group) if p.input.scalers => {
            let _ = writeln!(
                report,
                "{}: ModelDeploymentScaler {}: invalid\n  apiVersion: group {:?} is not {GROUP}; use apiVersion: {GROUP}/{VERSION}",
                doc.label(),
                doc.name().unwrap_or_default(),
                group.unwrap_or("")
            );
            (false, Outcome::Invalid)
        }
        _ if doc.is("ModelDeployment") => (false, Outcome::Valid),
        (kind, _) if p.input.scalers => {
            err.push_str(&super::note_line(&format!(
                "{}: skipped: kind {:?} is not a ModelDeploymentScaler",
                doc.label(),
                kind.unwrap_or("<none>")
            )));
            (false, Outcome::Valid)
        }
        (kind, _) => {
            err.push_str(&super::note_line(&format!(
                "{}: skipped: --target files hold ModelDeployment documents, not kind {:?}",
                doc.label(),
                kind.unwrap_or("<none>")
            )));
            (false, Outcome::Valid)
        }
    }
}

/// The error when no scaler was validated: the files read with -f and what they hold instead.
fn nothing_validated(parsed: &[(&Input, Vec<Document>)], targets: &[ModelDeployment]) -> String {
    let files: Vec<String> = parsed
        .iter()
        .filter(|(input, _)| input.scalers)
        .map(|(input, docs)| {
            let kinds: std::collections::BTreeSet<String> = docs
                .iter()
                .map(|d| d.kind().unwrap_or("a document without kind").to_string())
                .collect();
            let kinds: Vec<String> = kinds.into_iter().collect();
            if kinds.is_empty() {
                format!("{} holds no document", input.name)
            } else {
                format!(
                    "{} holds {}",
                    input.name,
                    mds_api::suggest::and_list(&kinds)
                )
            }
        })
        .collect();
    let hint = if targets.is_empty() {
        String::new()
    } else {
        "; a ModelDeployment alone is checked as the --target of a scaler".to_string()
    };
    format!(
        "no ModelDeploymentScaler documents found{}{hint}",
        if files.is_empty() {
            String::new()
        } else {
            format!(" ({})", files.join("; "))
        }
    )
}

/// What is known about targets when a scaler looks for its own.
struct TargetContext<'a> {
    targets: &'a [ModelDeployment],
    targets_given: bool,
    target_file_holdings: String,
    any_target_in_inputs: bool,
}

impl TargetContext<'_> {
    /// The target the scaler names: same name, and the same namespace when both say one.
    fn find(&self, name: Option<&str>, namespace: Option<&str>) -> Option<&ModelDeployment> {
        let name = name?;
        self.targets.iter().find(|md| {
            md.metadata.name.as_deref() == Some(name)
                && (namespace.is_none()
                    || md.metadata.namespace.is_none()
                    || md.metadata.namespace.as_deref() == namespace)
        })
    }
}

fn check_scaler(
    doc: &Document,
    context: &TargetContext,
    options: Options,
    report_out: &mut String,
    yaml_out: &mut String,
) -> Outcome {
    let read = read_scaler(doc);
    let target = context.find(read.target_name.as_deref(), read.namespace.as_deref());
    let mut report: Report = read.check(target);
    // What would hold the scaler at its counts whatever the load is said first.
    if let Some(why) = target.and_then(super::simulate_scaler::router_hold) {
        report.warnings.insert(
            0,
            Finding {
                path: "spec.targetRef.name".into(),
                message: why,
            },
        );
    }
    let wanted = match (&read.target_name, &read.namespace) {
        (Some(name), Some(ns)) => format!("ModelDeployment {name:?} in namespace {ns:?}"),
        (Some(name), None) => format!("ModelDeployment {name:?}"),
        (None, _) => "the ModelDeployment spec.targetRef.name names".to_string(),
    };
    let mut note = match target {
        Some(_) => format!("checked against {wanted}"),
        None if context.targets_given => "target not found: target-dependent rules skipped".into(),
        None if context.any_target_in_inputs => {
            format!("no {wanted} among the inputs: target-dependent rules skipped")
        }
        None => "no target given: target-dependent rules skipped".into(),
    };
    if target.is_none() && context.targets_given {
        let finding = Finding {
            path: "spec.targetRef.name".into(),
            message: format!(
                "no {wanted} among the --target files, which hold {}; give its manifest with --target, or --allow-missing-target to check the scaler alone",
                context.target_file_holdings
            ),
        };
        if options.allow_missing_target {
            report.warnings.insert(0, finding);
        } else {
            report.errors.insert(0, finding);
        }
    }
    let failed_strictly = options.strict && !report.warnings.is_empty();
    if failed_strictly {
        note.push_str("; --strict: warnings count as errors");
    }
    let valid = report.is_valid() && !failed_strictly;
    let name = if read.name.is_empty() {
        "(no name)"
    } else {
        read.name.as_str()
    };
    let header = format!(
        "{}: ModelDeploymentScaler {name}: {} ({note})",
        doc.label(),
        if valid { "valid" } else { "invalid" }
    );
    write_report(report_out, &header, &report);
    if options.show_defaults
        && valid
        && let Some(scaler) = &read.scaler
    {
        match serde_yaml_ng::to_string(scaler) {
            Ok(yaml) => {
                let _ = write!(yaml_out, "---\n{yaml}");
            }
            Err(e) => {
                let _ = writeln!(report_out, "  cannot print the stored object: {e}");
                return Outcome::Invalid;
            }
        }
    }
    if valid {
        Outcome::Valid
    } else {
        Outcome::Invalid
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
