//! What `mds simulate` writes besides its text: the HTML report's path and page, and a
//! progress bar on standard error.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::inputs::{Stop, unusable};

/// Writes `what` (named for the error) as pretty JSON to `path`.
pub(super) fn write_json(
    path: &Path,
    what: &str,
    value: &impl serde::Serialize,
) -> Result<(), Stop> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| unusable(format!("cannot write {what} as JSON: {e}")))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| unusable(format!("{}: cannot write: {e}", path.display())))
}

/// Where the HTML report goes (`None`: --no-report): `--report`, else next to `--json` (its
/// name with .html), else `default_name` in `MDS_REPORT_DIR` or the current directory; a
/// current directory that cannot take it (read-only) gives way to the system's temporary
/// directory, so the run's results are not lost to a report nobody asked for by name.
pub(super) fn report_path(
    no_report: bool,
    report: Option<&Path>,
    json: Option<&Path>,
    default_name: &str,
) -> Result<Option<PathBuf>, Stop> {
    if no_report {
        return Ok(None);
    }
    if let Some(path) = report {
        return Ok(Some(path.to_path_buf()));
    }
    if let Some(json) = json {
        return Ok(Some(json.with_extension("html")));
    }
    match std::env::var_os(REPORT_DIR) {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).map_err(|e| {
                unusable(format!(
                    "{REPORT_DIR}={}: cannot create: {e}",
                    dir.display()
                ))
            })?;
            Ok(Some(dir.join(default_name)))
        }
        _ => {
            let here = PathBuf::from(default_name);
            // Opened to append, so an existing report is not cut short before the run ends,
            // and a probe file is removed again: a run that fails leaves nothing behind.
            let existed = here.exists();
            let writable = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&here)
                .is_ok();
            if writable {
                if !existed {
                    let _ = std::fs::remove_file(&here);
                }
                return Ok(Some(here));
            }
            let dir = std::env::temp_dir().join("mds-simulate");
            std::fs::create_dir_all(&dir)
                .map_err(|e| unusable(format!("{}: cannot create: {e}", dir.display())))?;
            Ok(Some(dir.join(default_name)))
        }
    }
}

/// The environment variable naming the directory default reports go to.
pub(super) const REPORT_DIR: &str = "MDS_REPORT_DIR";

/// A report's file name from the load it ran and what ran: `mds-<load>-<what>.html`, the load
/// cut to letters, digits, dots, dashes and underscores.
pub(super) fn report_name(load: &str, what: &str) -> String {
    let mut stem: String = load
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    stem.truncate(80);
    let stem = stem.trim_matches(|c| c == '-' || c == '.');
    let stem = if stem.is_empty() { "load" } else { stem };
    format!("mds-{stem}-{what}.html")
}

/// Writes the HTML report of `comparisons`.
pub(super) fn write_page(
    path: &Path,
    load: &str,
    requests: usize,
    quota: &str,
    comparisons: &[mds_simulate::compare::Comparison],
    featured: Option<&str>,
) -> Result<(), Stop> {
    let page = mds_simulate::html::page(&mds_simulate::html::Page {
        load,
        requests,
        quota,
        comparisons,
        featured,
    });
    std::fs::write(path, page)
        .map_err(|e| unusable(format!("{}: cannot write the report: {e}", path.display())))
}

/// A progress bar on standard error, for runs longer than a second.
pub(super) struct Progress {
    enabled: bool,
    started: Instant,
    shown: bool,
    last: Option<Instant>,
}

impl Progress {
    pub(super) fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            started: Instant::now(),
            shown: false,
            last: None,
        }
    }

    pub(super) fn show(&mut self, done: f64) {
        if !self.enabled || self.started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        if self.last.is_some_and(|t| t.elapsed().as_millis() < 100) {
            return;
        }
        self.last = Some(Instant::now());
        let done = done.clamp(0.0, 1.0);
        let filled = (done * 30.0) as usize;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r[{}{}] {:>3.0} % simulated",
            "#".repeat(filled),
            " ".repeat(30 - filled),
            done * 100.0
        );
        let _ = err.flush();
        self.shown = true;
    }

    pub(super) fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r{}\r", " ".repeat(50));
            let _ = err.flush();
        }
    }
}
