//! `mds replay`: what would the scaler have done on a recorded timeline?

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use mds_api::ModelDeploymentScaler;
use mds_core::replay::{PassReport, parse_timeline, replay, synthetic_target};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ModelDeploymentScaler manifest (YAML).
    #[arg(long, value_name = "FILE")]
    pub scaler: PathBuf,
    /// The target ModelDeployment manifest (YAML). Without it, every scaler role is a Server
    /// role starting at its minReplicas.
    #[arg(long, value_name = "FILE")]
    pub target: Option<PathBuf>,
    /// The timeline: JSON Lines, one object per sampling pass (see docs/REPLAY.md).
    #[arg(long, value_name = "FILE")]
    pub timeline: PathBuf,
    /// Print JSON Lines, one object per pass.
    #[arg(long)]
    pub json: bool,
}

fn read(path: &std::path::Path) -> Result<String, String> {
    super::read_text(path, super::MAX_INPUT_BYTES)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

fn yaml<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T, String> {
    let text = read(path)?;
    serde_yaml_ng::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(args: &Args) -> ExitCode {
    match run_inner(args) {
        Ok(out) => {
            super::emit(&out, "");
            ExitCode::SUCCESS
        }
        Err(e) => {
            super::emit("", &format!("mds replay: {e}\n"));
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: &Args) -> Result<String, String> {
    let scaler: ModelDeploymentScaler = yaml(&args.scaler)?;
    let target = match &args.target {
        Some(path) => yaml::<serde_json::Value>(path)?,
        None => {
            super::emit(
                "",
                "mds replay: no --target: every role is a Server role starting at its minReplicas
",
            );
            synthetic_target(&scaler)
        }
    };
    let timeline = parse_timeline(&read(&args.timeline)?)
        .map_err(|e| format!("{}: {e}", args.timeline.display()))?;
    let reports = replay(&scaler, target, &timeline).map_err(|e| e.to_string())?;
    let mut out = String::new();
    if args.json {
        for r in &reports {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string(r).expect("report serializes")
            );
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
