//! `mds replay`: what would the scaler have done on a recorded timeline?
//!
//! The scaler and target go through the same checks as `mds validate` first: a scaler that
//! admission would refuse is not replayed, since no cluster would ever run it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use mds_simulate::replay::{PassReport, parse_timeline, replay};

use super::inputs::{Admitted, Stop, admitted, documents, unusable};

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

fn run_inner(args: &Args, notes: &mut String) -> Result<String, Stop> {
    let scaler_docs = documents(&args.scaler)?;
    let target_docs = match &args.target {
        Some(path) => Some((documents(path)?, path.display().to_string())),
        None => None,
    };
    let Admitted {
        scaler,
        target: target_value,
    } = admitted(
        (&scaler_docs, &args.scaler.display().to_string()),
        target_docs
            .as_ref()
            .map(|(d, n)| (d.as_slice(), n.as_str())),
        "replayed",
        notes,
    )?;
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
            let changed = previous.is_none_or(|p| {
                p.conditions
                    .get(kind)
                    .is_none_or(|was| (&was.status, &was.reason) != (&c.status, &c.reason))
            });
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
