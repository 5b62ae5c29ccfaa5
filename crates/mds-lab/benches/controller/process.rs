//! The controller under test: the release `mds` binary as a process of its own, so its CPU time
//! and memory are its own.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mds_lab::process::ManagedChild;

use crate::probe;

/// The release binary: `--mds PATH`, else `target/release/mds` of this workspace.
pub fn default_binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/mds")
}

fn free_port() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    listener.local_addr().map_err(|e| e.to_string())
}

pub struct Controller {
    child: ManagedChild,
    pub metrics: SocketAddr,
    probes: SocketAddr,
    pub log: PathBuf,
}

impl Controller {
    /// Starts `mds controller` against the kubeconfig, leader election off, its endpoints on
    /// free loopback ports, logging to `log`; `extra` are further flags.
    pub fn start(
        binary: &Path,
        kubeconfig: &Path,
        log: PathBuf,
        extra: &[String],
    ) -> Result<Controller, String> {
        let metrics = free_port()?;
        let probes = free_port()?;
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut command = Command::new(binary);
        command
            .arg("controller")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--leader-elect=false")
            .arg("--metrics-bind-address")
            .arg(metrics.to_string())
            .arg("--health-probe-bind-address")
            .arg(probes.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        let child = ManagedChild::spawn("mds controller", command)
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        Ok(Controller {
            child,
            metrics,
            probes,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `/readyz` answers 200 (watch caches synced).
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "the controller exited ({status}); see {}",
                    self.log.display()
                ));
            }
            if probe::http_get(self.probes, "/readyz").await.is_ok() {
                return Ok(started.elapsed());
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "the controller was not ready after {} s",
                    timeout.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn metrics(&self) -> Result<Vec<probe::Series>, String> {
        Ok(probe::parse_page(
            &probe::http_get(self.metrics, "/metrics").await?,
        ))
    }

    /// SIGTERM, then up to `grace` for a clean exit; SIGKILL after that.
    pub async fn stop(mut self, grace: Duration) -> Result<(), String> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let started = Instant::now();
        while started.elapsed() < grace {
            if let Ok(Some(status)) = self.child.try_wait() {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("the controller exited with {status}"))
                };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.child.kill();
        Err(format!(
            "the controller did not stop within {} s of SIGTERM",
            grace.as_secs()
        ))
    }
}
