//! Data folders of control planes and private files in them.

use std::fs;
use std::path::{Path, PathBuf};

use crate::{Error, process};

/// `<name>-<pid>-`: every data folder starts so, in the temporary folder, which lets a later
/// start find the folders of processes that were killed before they could clean up.
pub(crate) fn data_folder_prefix(name: &str) -> String {
    format!("{name}-{}-", std::process::id())
}

/// Removes the data folders named after `name` whose process no longer runs (killed before its
/// exit hook ran). Every start does this first.
pub fn remove_stale_data_folders(name: &str) {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let prefix = format!("{name}-");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !process::process_is_running(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Writes `text` to `path`, readable by its owner only (kubeconfigs hold the admin key).
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_error(&format!("writing {}", path.display()), e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| io_error(&format!("writing {}", path.display()), e))
}

pub(crate) fn io_error(context: &str, source: std::io::Error) -> Error {
    Error::Io {
        context: context.to_string(),
        source,
    }
}

/// The last lines of a component's log, for error messages.
pub(crate) fn log_tail(folder: &Path, component: &str) -> String {
    let text = fs::read_to_string(folder.join(format!("{component}.log"))).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Removes a data folder on a failed start; disarmed once a control plane owns it.
pub(crate) struct FolderGuard(pub Option<PathBuf>);

impl FolderGuard {
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for FolderGuard {
    fn drop(&mut self) {
        if let Some(folder) = self.0.take() {
            let _ = fs::remove_dir_all(&folder);
            process::forget_folder_at_exit(&folder);
        }
    }
}
