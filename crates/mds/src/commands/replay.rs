//! `mds replay`: what would the scaler have done on a recorded timeline?
//!
//! The scaler and target go through the same checks as `mds validate` first: a scaler that
//! admission would refuse is not replayed, since no cluster would ever run it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mds_api::validation::Report;
use mds_simulate::replay::{PassReport, parse_timeline, replay, synthetic_target};

use crate::manifest::scaler::{read_scaler, read_status, read_target, write_report};
use crate::manifest::{Document, holdings, parse_documents};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ModelDeploymentScaler manifest (YAML; in a multi-document file, the one document
    /// of that kind).
    #[arg(long, value_name = "FILE")]
    pub scaler: PathBuf,
    /// The target ModelDeployment manifest (YAML; in a multi-document file, the
    /// ModelDeployment the scaler's targetRef names). Without it, every scaler role is a
    /// Server role starting at its minReplicas.
    #[arg(long, value_name = "FILE")]
    pub target: Option<PathBuf>,
    /// The timeline: JSON Lines, one object per sampling pass (see docs/REPLAY.md).
    #[arg(long, value_name = "FILE")]
    pub timeline: PathBuf,
    /// Print JSON Lines, one object per pass.
    #[arg(long)]
    pub json: bool,
}

/// Exit status when the scaler or target is one admission refuses (as `mds validate`).
const REFUSED: u8 = 1;
/// Exit status when an input cannot be read, holds the wrong kind, or the timeline is wrong.
const UNUSABLE: u8 = 2;

/// Why the replay did not run: the exit status and the lines for standard error.
struct Stop {
    code: u8,
    text: String,
}

fn unusable(message: impl AsRef<str>) -> Stop {
    Stop {
        code: UNUSABLE,
        text: super::error_line(message.as_ref()),
    }
}

pub fn run(args: &Args) -> ExitCode {
    let mut notes = String::new();
    match run_inner(args, &mut notes) {
        Ok(out) => {
            super::emit(&out, &notes);
            ExitCode::SUCCESS
        }
        Err(stop) => {
            super::emit("", &(notes + &stop.text));
            ExitCode::from(stop.code)
        }
    }
}

fn documents(path: &Path) -> Result<Vec<Document>, Stop> {
    let name = path.display().to_string();
    let bytes = super::read_input(path, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{name}: cannot read: {e}")))?;
    parse_documents(&name, &bytes).map_err(unusable)
}

/// The single document of `kind` in `docs`, chosen by `name` when several are.
fn pick<'d>(
    docs: &'d [Document],
    file: &Path,
    kind: &str,
    name: Option<&str>,
) -> Result<&'d Document, Stop> {
    let file = file.display();
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
            "{file} holds {} {kind} documents ({}); give a file with the one to replay",
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

fn run_inner(args: &Args, notes: &mut String) -> Result<String, Stop> {
    let scaler_docs = documents(&args.scaler)?;
    let scaler_doc = pick(&scaler_docs, &args.scaler, "ModelDeploymentScaler", None)?;
    let read = read_scaler(scaler_doc);
    let name = if read.name.is_empty() {
        "(no name)"
    } else {
        read.name.as_str()
    };
    let scaler_label = format!("{}: ModelDeploymentScaler {name}", scaler_doc.label());

    let target_docs = match &args.target {
        Some(path) => documents(path)?,
        None => vec![],
    };
    let (target_value, target_note) = match (&args.target, &read.scaler) {
        (Some(path), _) => {
            let doc = pick(
                &target_docs,
                path,
                "ModelDeployment",
                read.target_name.as_deref(),
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
            let value = serde_json::to_value(&doc.value)
                .map_err(|e| unusable(format!("{}: cannot be read as JSON: {e}", doc.label())))?;
            (value, format!("checked against {}", doc.describe()))
        }
        (None, Some(scaler)) => {
            notes.push_str(&super::note_line(
                "no --target: every role is a Server role starting at its minReplicas",
            ));
            let note =
                "checked against a stand-in target: without --target every role is a Server role";
            (synthetic_target(scaler), note.to_string())
        }
        (None, None) => (serde_json::Value::Null, "no target".to_string()),
    };
    let target = serde_json::from_value(target_value.clone()).ok();
    let report = read.check(target.as_ref());
    let Some(scaler) = read.scaler.as_ref().filter(|_| report.is_valid()) else {
        let header = format!(
            "{scaler_label}: invalid ({target_note}); admission refuses it, so it is not replayed"
        );
        return Err(refused(&header, &report));
    };
    for warning in &report.warnings {
        notes.push_str(&super::warning_line(&format!("{scaler_label}: {warning}")));
    }
    // The replay starts from the status the file carries, as a controller starts from the
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

    let timeline_name = args.timeline.display().to_string();
    let text = super::read_text(&args.timeline, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{timeline_name}: cannot read: {e}")))?;
    let timeline = parse_timeline(&text).map_err(|e| unusable(format!("{timeline_name}: {e}")))?;
    let reports = replay(&scaler, target_value, &timeline).map_err(|e| {
        let source = match &args.target {
            _ if e.0.starts_with("timeline line") => timeline_name.clone(),
            Some(path) => path.display().to_string(),
            None => "the stand-in target".to_string(),
        };
        unusable(format!("{source}: {e}"))
    })?;
    let mut out = String::new();
    if args.json {
        for r in &reports {
            let line = serde_json::to_string(r)
                .map_err(|e| unusable(format!("cannot print a pass as JSON: {e}")))?;
            let _ = writeln!(out, "{line}");
        }
    } else {
        write_text(&mut out, &reports);
    }
    Ok(out)
}

fn write_text(out: &mut String, reports: &[PassReport]) {
    let mut previous: Option<&PassReport> = None;
    for r in reports {
        let _ = writeln!(out, "t={}s", r.t);
        for (name, role) in &r.roles {
            let arrow = if role.constrained == role.current {
                "holds".to_string()
            } else {
                format!("{} -> {}", role.current, role.constrained)
            };
            let _ = writeln!(out, "  {name:<12} {}", role.observed);
            let _ = write!(
                out,
                "  {:<12} raw {:>4}  {arrow:<10} {}",
                "", role.raw, role.reason
            );
            if !role.limits.is_empty() {
                let _ = write!(out, " ({})", role.limits.join("; "));
            }
            let _ = writeln!(out);
        }
        if let Some(w) = &r.write {
            let vector = w
                .vector
                .as_ref()
                .map(|v| {
                    v.iter()
                        .map(|(k, n)| format!("{k}={n}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let refused = if w.rejected {
                " [refused: a test failed, re-planned next pass]"
            } else {
                ""
            };
            let _ = writeln!(out, "  write: {} {vector} term {}{refused}", w.kind, w.term);
        }
        for (kind, c) in &r.conditions {
            let changed = previous.is_none_or(|p| p.conditions.get(kind) != Some(c));
            if changed {
                let _ = writeln!(out, "  {kind}={} ({})", c.status, c.reason);
            }
        }
        for e in &r.events {
            let _ = writeln!(out, "  event {e}");
        }
        previous = Some(r);
    }
}
