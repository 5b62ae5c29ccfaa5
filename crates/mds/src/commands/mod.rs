pub mod certs;
pub mod controller;
pub mod crd;
pub mod gitops;
pub mod inputs;
pub mod inspect_metrics;
pub mod lab;
pub mod replay;
pub mod service;
pub mod simulate;
mod simulate_compare;
mod simulate_faults;
mod simulate_frontier;
mod simulate_io;
mod simulate_options;
mod simulate_peers;
mod simulate_prometheus;
mod simulate_scaler;
mod simulate_suggest;
pub mod validate;
pub mod webhook;

use std::io::{Read, Write};
use std::path::Path;

/// The largest manifest or timeline a command reads; far above any real one.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a file, or standard input for `-`, refusing more than `limit` bytes. The error says
/// why, for a `PATH: cannot read: REASON` line.
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let reader: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| e.to_string())?)
    };
    let mut bytes = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes; refused"));
    }
    Ok(bytes)
}

/// [`read_input`] for text: invalid UTF-8 is refused with the offset of the first bad byte.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_input(path, limit)?).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Writes a command's output. A closed pipe (`mds validate ... | head`) is not an error of
/// ours: the rest is dropped quietly instead of panicking like `print!` would.
pub fn emit(stdout: &str, stderr: &str) {
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
}

/// Every line a command writes to standard error on its own behalf starts `mds: LEVEL: `,
/// whichever command wrote it.
pub fn error_line(message: &str) -> String {
    format!("mds: error: {message}\n")
}

pub fn warning_line(message: &str) -> String {
    format!("mds: warning: {message}\n")
}

pub fn note_line(message: &str) -> String {
    format!("mds: note: {message}\n")
}
