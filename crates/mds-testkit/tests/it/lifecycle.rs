//! No etcd or kube-apiserver outlives its test: not after a stop, not after a panic, not after
//! the test process exits, not after it is killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mds_testkit::process::process_is_running;
use mds_testkit::{ControlPlane, START_TIMEOUT, eventually};

/// Set in the helper process this test binary runs of itself; its value says how the helper ends.
const HELPER_VAR: &str = "MDS_TESTKIT_LIFECYCLE_HELPER";
/// Its name as libtest knows it in this crate's one test binary (module, then function).
const HELPER_TEST: &str = "lifecycle::helper_holds_the_shared_control_plane";

/// Not a test of its own: the body of the helper process, run by the tests below.
#[test]
#[ignore = "the body of a helper process that the lifecycle tests run"]
fn helper_holds_the_shared_control_plane() {
    let Ok(ending) = std::env::var(HELPER_VAR) else {
        return;
    };
    let plane = mds_testkit::shared().expect("the helper's control plane starts");
    let [api, etcd] = plane.pids();
    println!("HELPER {api} {etcd} {}", plane.folder().display());
    if ending == "hang" {
        // Wait to be killed.
        loop {
            std::thread::park();
        }
    }
}

/// What the helper reported: the two server pids and the data folder.
struct Helper {
    pids: [u32; 2],
    folder: PathBuf,
    process: std::process::Child,
}

/// Runs this test binary as a helper that starts the shared control plane and reports it.
fn start_helper(ending: &str) -> Helper {
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            HELPER_TEST,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_VAR, ending)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the helper process starts");
    let stdout = process.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest may print "test <name> ... " on the same line first.
            if let Some((_, report)) = line.split_once("HELPER ") {
                let _ = tx.send(report.to_string());
            }
        }
    });
    let Ok(report) = rx.recv_timeout(START_TIMEOUT + Duration::from_secs(60)) else {
        let _ = process.kill();
        let _ = process.wait();
        panic!("the helper did not report its control plane (see its messages above)");
    };
    let mut fields = report.splitn(3, ' ');
    let mut pid = || fields.next().unwrap().parse::<u32>().unwrap();
    let pids = [pid(), pid()];
    let folder = PathBuf::from(fields.next().unwrap());
    Helper {
        pids,
        folder,
        process,
    }
}

impl Drop for Helper {
    /// A failed test must not leave its helper behind (its servers follow it by death signal).
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

async fn assert_all_gone(pids: [u32; 2], why: &str) {
    eventually(
        &format!("kube-apiserver and etcd to end after {why}"),
        Duration::from_secs(20),
        || async move { pids.iter().all(|p| !process_is_running(*p)).then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: pids {pids:?} still run"));
}

#[tokio::test]
async fn a_control_plane_dropped_by_a_panicking_test_leaves_nothing() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let pids = plane.pids();
    let folder = plane.folder().to_path_buf();
    assert!(pids.iter().all(|p| process_is_running(*p)));
    assert!(folder.join("etcd").is_dir());
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = plane;
        panic!("a test fails while holding the control plane");
    }));
    assert!(unwound.is_err());
    assert_all_gone(pids, "the panic").await;
    assert!(!folder.exists(), "{} is left behind", folder.display());
}

#[tokio::test]
async fn a_stopped_control_plane_leaves_nothing() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let plane = ControlPlane::start().await.expect("a control plane starts");
    let pids = plane.pids();
    let folder = plane.folder().to_path_buf();
    plane.stop();
    assert_all_gone(pids, "stop").await;
    assert!(!folder.exists(), "{} is left behind", folder.display());
}

#[tokio::test]
async fn the_shared_control_plane_ends_with_its_test_process() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let mut helper = start_helper("exit");
    let status = helper.process.wait().unwrap();
    assert!(status.success(), "the helper failed: {status}");
    assert_all_gone(helper.pids, "the test process exited").await;
    assert!(
        !helper.folder.exists(),
        "{} is left behind",
        helper.folder.display()
    );
}

#[tokio::test]
async fn no_server_survives_a_killed_test_process() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let mut helper = start_helper("hang");
    assert!(helper.pids.iter().all(|p| process_is_running(*p)));
    helper.process.kill().unwrap(); // SIGKILL: no unwinding, no exit hooks
    helper.process.wait().unwrap();
    assert_all_gone(helper.pids, "SIGKILL of the test process").await;
    // Its data folder stays until the next start clears folders of dead processes.
    assert!(helper.folder.exists());
    mds_testkit::remove_stale_data_folders();
    assert!(
        !helper.folder.exists(),
        "{} is left behind",
        helper.folder.display()
    );
}
