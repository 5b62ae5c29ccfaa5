//! `mds lab up` as a user runs it: the kubeconfig appears once the lab is ready, the matching
//! kubectl works against it (`get md,mds` included), and SIGTERM leaves nothing behind.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::repo;
use mds_testkit::process::process_is_running;
use mds_testkit::{START_TIMEOUT, eventually};

/// Collects a child's output lines on a thread.
fn collect(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    Command::new(mds_testkit::kubectl_path().unwrap())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// The lab's two server pids and data folder, from the line `mds lab up` prints.
fn servers(stdout: &[String]) -> Option<([u32; 2], PathBuf)> {
    let line = stdout.iter().find(|l| l.contains("kube-apiserver pid"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    // "kube-apiserver pid N, etcd pid M; logs and data in FOLDER"
    let pid = |name: &str| {
        let at = words.iter().position(|w| *w == name)?;
        words.get(at + 2)?.trim_end_matches([',', ';']).parse().ok()
    };
    let (api, etcd) = (pid("kube-apiserver")?, pid("etcd")?);
    let folder = PathBuf::from(*words.last()?);
    Some(([api, etcd], folder))
}

#[tokio::test]
async fn lab_up_serves_kubectl_and_stops_clean_on_sigterm() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let kubeconfig = scratch.path().join("lab.kubeconfig");
    let begun = Instant::now();
    let mut lab = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(["lab", "up", "--cold-start", "1", "--load", "constant:rps=2"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = collect(lab.stdout.take().unwrap());
    let stderr = collect(lab.stderr.take().unwrap());
    let output = || {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            stdout.lock().unwrap().join("\n"),
            stderr.lock().unwrap().join("\n")
        )
    };
    let ready = eventually("the lab's kubeconfig", START_TIMEOUT, || {
        let ended = lab.try_wait().ok().flatten();
        let written = kubeconfig.exists();
        async move {
            match ended {
                Some(status) => Some(Err(status)),
                None => written.then_some(Ok(())),
            }
        }
    })
    .await;
    match ready {
        Ok(Ok(())) => {}
        Ok(Err(status)) => panic!("mds lab up ended ({status}):\n{}", output()),
        Err(e) => {
            let _ = lab.kill();
            panic!("{e}\n{}", output());
        }
    }
    eprintln!(
        "mds lab up: kubeconfig written after {:.1} s",
        begun.elapsed().as_secs_f64()
    );
    let (pids, folder) = eventually("the ready message", Duration::from_secs(10), || async {
        servers(&stdout.lock().unwrap())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", output()));
    assert!(pids.iter().all(|p| process_is_running(*p)), "{pids:?}");
    assert!(
        output().contains("get md,mds"),
        "the next commands are printed:\n{}",
        output()
    );

    let example = repo().join("examples/prefill-decode-encode.yaml");
    let applied = kubectl(&kubeconfig, &["apply", "-f", example.to_str().unwrap()]);
    assert!(applied.status.success(), "{applied:?}");
    eventually(
        "the example target Ready",
        Duration::from_secs(60),
        || async {
            let phase = kubectl(
                &kubeconfig,
                &["get", "md", "vl-serving", "-o", "jsonpath={.status.phase}"],
            );
            (String::from_utf8_lossy(&phase.stdout) == "Ready").then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", output()));
    let listed = kubectl(&kubeconfig, &["get", "md,mds"]);
    let listed_text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{listed:?}");
    assert!(
        listed_text.contains("modeldeployment.worker.gpustack.ai/vl-serving")
            && listed_text.contains("modeldeploymentscaler.worker.gpustack.ai/vl-serving"),
        "{listed_text}"
    );
    // The lab prints its events as it sees them; its output is read as it comes, so the line
    // can trail the target's phase by a moment.
    eventually("the ready event printed", Duration::from_secs(10), || {
        let printed = output().contains("default/vl-serving: decode ordinal 1 ready");
        async move { printed.then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: events are printed:\n{}", output()));

    // SIGTERM: a clean stop, nothing left.
    // SAFETY: a plain signal to our own child.
    unsafe {
        libc::kill(lab.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = eventually("mds lab up to exit", Duration::from_secs(30), || {
        let ended = lab.try_wait().unwrap();
        async move { ended }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", output()));
    assert!(status.success(), "{status}\n{}", output());
    assert!(
        pids.iter().all(|p| !process_is_running(*p)),
        "{pids:?} still run"
    );
    assert!(!folder.exists(), "{} is left behind", folder.display());
    assert!(
        !kubeconfig.exists(),
        "the kubeconfig of a stopped lab is removed"
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_starts() {
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("config");
    std::fs::write(&theirs, "kind: Config\ncurrent-context: prod\n").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--load", "ramp:from=1,to=5"],
            "--load ramp:from=1,to=5: load profile \"ramp:from=1,to=5\": over is required",
        ),
        (
            &["--load", "trace:/nonexistent/trace.csv"],
            "/nonexistent/trace.csv: cannot read",
        ),
        (
            &["--quota", "h100=lots"],
            "--quota h100=lots: \"lots\" is not a whole number of GPUs",
        ),
        (
            &["--kubeconfig", theirs.to_str().unwrap()],
            "exists and was not written by mds lab",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["lab", "up"];
        all.extend_from_slice(args);
        let out = common::mds(&all, None);
        let stderr = common::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("mds: error: ") && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        "kind: Config\ncurrent-context: prod\n"
    );
}
