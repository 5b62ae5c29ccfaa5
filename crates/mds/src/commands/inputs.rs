//! The scaler and target a command runs, through the same admission as `mds validate`: a
//! scaler admission would refuse is not replayed or simulated, since no cluster would ever
//! run it.

use std::path::Path;

use mds_api::ModelDeploymentScaler;
use mds_api::validation::Report;
use mds_simulate::replay::synthetic_target;
use serde_json::Value;

use crate::manifest::scaler::{read_scaler, read_status, read_target, target_typos, write_report};
use crate::manifest::{Document, holdings, parse_documents};

/// Exit status when the scaler or target is one admission refuses (as `mds validate`).
pub const REFUSED: u8 = 1;
/// Exit status when an input cannot be read, holds the wrong kind, or breaks a format rule.
pub const UNUSABLE: u8 = 2;

/// Why a command did not run: the exit status and the lines for standard error.
pub struct Stop {
    pub code: u8,
    pub text: String,
}

pub fn unusable(message: impl AsRef<str>) -> Stop {
    Stop {
        code: UNUSABLE,
        text: super::error_line(message.as_ref()),
    }
}

/// The YAML documents of a file (`-`: standard input).
pub fn documents(path: &Path) -> Result<Vec<Document>, Stop> {
    let name = path.display().to_string();
    let bytes = super::read_input(path, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{name}: cannot read: {e}")))?;
    parse_documents(&name, &bytes).map_err(unusable)
}

/// The single document of `kind` in `docs` (read from `file`), chosen by `name` when several
/// are.
fn pick<'d>(
    docs: &'d [Document],
    file: &str,
    kind: &str,
    name: Option<&str>,
    verb: &str,
) -> Result<&'d Document, Stop> {
    let of_kind: Vec<&Document> = docs.iter().filter(|d| d.is(kind)).collect();
    let all: Vec<&Document> = docs.iter().collect();
    match (of_kind.as_slice(), name) {
        ([], _) => Err(unusable(format!(
            "{file} holds no {kind}; it holds {}",
            holdings(&all)
        ))),
        (_, Some(name)) => of_kind
            .iter()
            .copied()
            .find(|d| d.name() == Some(name))
            .ok_or_else(|| {
                unusable(format!(
                    "{file} holds no {kind} named {name:?}, the name the scaler's spec.targetRef.name gives; it holds {}",
                    holdings(&of_kind)
                ))
            }),
        ([one], None) => Ok(one),
        (many, None) => Err(unusable(format!(
            "{file} holds {} {kind} documents ({}); give a file with the one to be {verb}",
            many.len(),
            holdings(many)
        ))),
    }
}

/// A refusal in the words `mds validate` uses: the header, then every finding.
fn refused(header: &str, report: &Report) -> Stop {
    let mut lines = String::new();
    write_report(&mut lines, header, report);
    Stop {
        code: REFUSED,
        text: super::error_line(lines.trim_end()),
    }
}

/// A scaler admission accepts, with the status its file carries, and its target.
pub struct Admitted {
    pub scaler: ModelDeploymentScaler,
    /// The target document; without one given, a stand-in where every scaler role is a
    /// Server role at its minReplicas.
    pub target: Value,
}

/// Reads the scaler (`scaler`: its file's documents and name) and its target (`target`, or
/// the stand-in), and runs admission on them; `verb` says what a refused scaler is not
/// (`replayed`, `simulated`).
pub fn admitted(
    scaler: (&[Document], &str),
    target: Option<(&[Document], &str)>,
    verb: &str,
    notes: &mut String,
) -> Result<Admitted, Stop> {
    let (scaler_docs, scaler_file) = scaler;
    let scaler_doc = pick(
        scaler_docs,
        scaler_file,
        "ModelDeploymentScaler",
        None,
        verb,
    )?;
    let read = read_scaler(scaler_doc);
    let name = if read.name.is_empty() {
        "(no name)"
    } else {
        read.name.as_str()
    };
    let scaler_label = format!("{}: ModelDeploymentScaler {name}", scaler_doc.label());

    let (target_value, target_note) = match (target, &read.scaler) {
        (Some((docs, file)), _) => {
            let doc = pick(
                docs,
                file,
                "ModelDeployment",
                read.target_name.as_deref(),
                verb,
            )?;
            if let Err(findings) = read_target(doc) {
                let report = Report {
                    errors: findings,
                    warnings: vec![],
                };
                return Err(refused(
                    &format!("{}: {}: invalid", doc.label(), doc.describe()),
                    &report,
                ));
            }
            for typo in target_typos(doc) {
                notes.push_str(&super::warning_line(&format!(
                    "{}: {}: {typo}",
                    doc.label(),
                    doc.describe()
                )));
            }
            let value = serde_json::to_value(&doc.value)
                .map_err(|e| unusable(format!("{}: cannot be read as JSON: {e}", doc.label())))?;
            (value, format!("checked against {}", doc.describe()))
        }
        (None, Some(scaler)) => {
            notes.push_str(&super::note_line(&format!(
                "no --target: every role is a Server role starting at its minReplicas; pass the \
                 ModelDeployment {:?} with --target FILE, or put it in the same file, to use its roles",
                scaler.spec.target_ref.name
            )));
            let note = "checked against a stand-in target: without --target every role is a \
                        Server role; pass the scaler's ModelDeployment with --target FILE";
            (synthetic_target(scaler), note.to_string())
        }
        (None, None) => (Value::Null, "no target".to_string()),
    };
    let target = serde_json::from_value(target_value.clone()).ok();
    let report = read.check(target.as_ref());
    let Some(scaler) = read.scaler.as_ref().filter(|_| report.is_valid()) else {
        let header = format!(
            "{scaler_label}: invalid ({target_note}); admission refuses it, so it is not {verb}"
        );
        return Err(refused(&header, &report));
    };
    for warning in &report.warnings {
        notes.push_str(&super::warning_line(&format!("{scaler_label}: {warning}")));
    }
    // The run starts from the status the file carries, as a controller starts from the
    // status it reads (docs/REPLAY.md).
    let mut scaler = scaler.clone();
    scaler.status = match read_status(scaler_doc) {
        Ok((status, unknown)) => {
            for finding in &unknown {
                notes.push_str(&super::warning_line(&format!("{scaler_label}: {finding}")));
            }
            status
        }
        Err(findings) => {
            let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
            return Err(unusable(format!(
                "{scaler_label}: its status cannot be read: {}",
                lines.join("; ")
            )));
        }
    };
    Ok(Admitted {
        scaler,
        target: target_value,
    })
}
