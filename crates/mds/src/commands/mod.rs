pub mod crd;
pub mod inspect_metrics;
pub mod replay;
pub mod validate;

use std::io::Write;

/// Writes a command's output. A closed pipe (`mds validate ... | head`) is not an error of
/// ours: the rest is dropped quietly instead of panicking like `print!` would.
pub fn emit(stdout: &str, stderr: &str) {
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
}
