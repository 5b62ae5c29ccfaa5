//! The `mds` binary as a user runs it: exit codes, output and standard input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn mds(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mds runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_example_validates() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 4, "{examples:?}");
    for example in examples {
        let out = mds(&["validate", "-f", example.to_str().unwrap()], None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}{}",
            example.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains(": valid"),
            "{}",
            text(&out.stdout)
        );
        assert!(
            !text(&out.stdout).contains("warning"),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn invalid_manifests_exit_1_and_list_every_error() {
    let manifest = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata: {name: broken}
spec:
  targetRef: {name: md}
  sampling: {intervalSeconds: 1}
  roles:
    - {name: prefill, minReplicas: 8, maxReplicas: 4}
    - {name: decode, maxReplicas: 4}
  ratios:
    - {numeratorRole: prefill, denominatorRole: decode, min: \"2\", target: \"1\"}
  algorithm:
    tokenThroughput: {prefillTargetTokensPerSecond: \"2k\", panicThreshold: \"0\"}
";
    let out = mds(&["validate", "-f", "-"], Some(manifest));
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    for line in [
        "-: document 1: ModelDeploymentScaler broken: invalid",
        "  spec.sampling.intervalSeconds: 1 is out of range; allowed is 5 to 300",
        "  spec.roles[0].minReplicas: 8 is greater than maxReplicas 4",
        "  spec.ratios[0].target: 1 is below min 2",
        "  spec.algorithm.tokenThroughput.panicThreshold: \"0\" must be a positive quantity",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
}

#[test]
fn unreadable_input_exits_2_with_the_reason() {
    let out = mds(&["validate", "-f", "-"], Some("spec:\n  roles: [\n"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("-: line "),
        "{}",
        text(&out.stderr)
    );
    let out = mds(&["validate", "-f", "no/such/file.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no/such/file.yaml: cannot read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn show_defaults_prints_the_stored_object() {
    let out = mds(
        &[
            "validate",
            "-f",
            "examples/token-throughput.yaml",
            "--show-defaults",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for line in [
        "maxStepReplicas: 4",
        "stableWindowSeconds: 180",
        "policy: Opposing",
        "intervalSeconds: 15",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
}

#[test]
fn target_flag_enables_target_rules() {
    let target = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: llm-serving}
spec:
  engine: {name: vLLM}
  roles:
    - {name: server, command: [python, serve.py]}
";
    let dir = std::env::temp_dir().join(format!("mds-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("target.yaml");
    std::fs::write(&path, target).unwrap();
    let out = mds(
        &[
            "validate",
            "-f",
            "examples/proportional.yaml",
            "--target",
            path.to_str().unwrap(),
        ],
        None,
    );
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("spec.roles[0]: role \"server\" runs a custom command"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn crd_command_prints_the_checked_in_crd() {
    let out = mds(&["crd"], None);
    assert_eq!(out.status.code(), Some(0));
    let checked_in = std::fs::read_to_string(
        repo().join("deploy/crds/modeldeploymentscalers.worker.gpustack.ai.yaml"),
    )
    .unwrap();
    assert_eq!(text(&out.stdout), checked_in);
}

#[test]
fn help_explains_the_commands() {
    let out = mds(&["--help"], None);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("validate") && stdout.contains("crd"),
        "{stdout}"
    );
    let out = mds(&["validate", "--help"], None);
    assert!(
        text(&out.stdout).contains("Exit status"),
        "{}",
        text(&out.stdout)
    );
}

const FIXTURES: &str = "crates/mds-signals/tests/fixtures";

#[test]
fn inspect_metrics_shows_one_page() {
    let page = format!("{FIXTURES}/sglang-0.5.18-dpattn-a.txt");
    let out = mds(&["inspect-metrics", "--engine", "sglang", &page], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("running requests       15"), "{stdout}");
    assert!(stdout.contains("waiting requests       4"), "{stdout}");
    assert!(
        stdout.contains("used     sglang:prefill_effective_tokens_total"),
        "{stdout}"
    );
    assert!(!stdout.contains("window of"), "{stdout}");
}

#[test]
fn inspect_metrics_computes_the_window_of_two_pages() {
    let a = format!("{FIXTURES}/sglang-0.5.14-decode-a.txt");
    let b = format!("{FIXTURES}/sglang-0.5.14-decode-b.txt");
    let out = mds(
        &[
            "inspect-metrics",
            "--engine",
            "sglang",
            "--role-kind",
            "decode",
            &a,
            &b,
            "--interval",
            "15",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("waiting requests                7"),
        "{stdout}"
    );
    assert!(
        stdout.contains("prompt tokens/s (cache-missed)  1966.667"),
        "{stdout}"
    );
    assert!(stdout.contains("PromptMinusCached"), "{stdout}");

    let out = mds(
        &[
            "inspect-metrics",
            "--engine",
            "sglang",
            &a,
            &b,
            "--interval",
            "15",
            "--json",
        ],
        None,
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(
        value["window"]["waitingRequests"], 3.0,
        "a Server role does not add the transfer queue"
    );
    assert_eq!(value["window"]["signalState"], "Fresh");
    assert_eq!(value["sample"]["runningRequests"], 8.0);
}

#[test]
fn inspect_metrics_reports_a_dropped_baseline() {
    let a = format!("{FIXTURES}/vllm-0.12.0-a.txt");
    let b = format!("{FIXTURES}/vllm-0.12.0-b.txt");
    // Pages in the wrong order: counters go down, as after a restart.
    let out = mds(
        &[
            "inspect-metrics",
            "--engine",
            "vllm",
            &b,
            &a,
            "--interval",
            "15",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("no rate: the baseline was dropped because a counter decreased"),
        "{stdout}"
    );
    assert!(
        stdout.contains("prompt tokens/s (cache-missed)  missing"),
        "{stdout}"
    );
}

#[test]
fn inspect_metrics_refuses_unreadable_input_with_exit_2() {
    let out = mds(
        &["inspect-metrics", "--engine", "vllm", "no/such/page.txt"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no/such/page.txt: cannot read"),
        "{}",
        text(&out.stderr)
    );
    let out = mds(
        &["inspect-metrics", "--engine", "vllm", "-"],
        Some("<html>not metrics</html>\n"),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("-:1: skipped"), "{stderr}");
    assert!(stderr.contains("no metric samples found"), "{stderr}");
    let page = format!("{FIXTURES}/vllm-0.12.0-a.txt");
    let out = mds(&["inspect-metrics", "--engine", "vllm", &page, &page], None);
    assert_eq!(out.status.code(), Some(2), "a second page needs --interval");
    for interval in ["1e12", "1e300", "1e-12", "0", "NaN"] {
        let out = mds(
            &[
                "inspect-metrics",
                "--engine",
                "vllm",
                &page,
                &page,
                "--interval",
                interval,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "--interval {interval}");
        assert!(
            text(&out.stderr).contains("--interval must be between 0.001 and 86400 seconds"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn inspect_metrics_refuses_a_page_over_the_size_limit() {
    // Exactly one byte over, so the whole input is read and the pipe never breaks.
    let huge = "x 1\n".repeat(16 * 1024 * 1024 / 4) + "\n";
    let out = mds(&["inspect-metrics", "--engine", "vllm", "-"], Some(&huge));
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("larger than 16777216 bytes"), "{stderr}");
}

#[test]
fn replay_prints_each_pass_and_json_lines() {
    let args = [
        "replay",
        "--scaler",
        "examples/replay/scaler.yaml",
        "--target",
        "examples/replay/target.yaml",
        "--timeline",
        "examples/replay/timeline.jsonl",
    ];
    let out = mds(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("write: bind  term 1"), "{stdout}");
    assert!(
        stdout.contains("write: rollback decode=3 prefill=3 term 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("MetricsReady=False (ResourceExhausted)"),
        "{stdout}"
    );

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = mds(&json_args, None);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 30, "one object per timeline pass");
    assert_eq!(lines[0]["write"]["kind"], "bind");
    assert_eq!(lines[0]["conditions"]["Bound"]["status"], "True");
    let commit = lines
        .iter()
        .find(|l| l["write"]["kind"] == "commit")
        .expect("a commit");
    assert!(
        commit["write"]["decisionID"]
            .as_str()
            .unwrap()
            .starts_with("llm-serving-t1-")
    );
    assert_eq!(
        commit["roles"]["prefill"]["raw"],
        commit["write"]["vector"]["prefill"]
    );
    // The same inputs give byte-identical output.
    assert_eq!(mds(&json_args, None).stdout, out.stdout);
}

#[test]
fn replay_refuses_a_broken_timeline_naming_the_line() {
    let dir = std::env::temp_dir().join(format!("mds-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("bad.jsonl");
    std::fs::write(
        &timeline,
        "{\"t\": 0, \"roles\": {}}\n{\"t\": 15, \"roles\": {\"prefill\": {\"readyReplica\": 2}}}\n",
    )
    .unwrap();
    let out = mds(
        &[
            "replay",
            "--scaler",
            "examples/replay/scaler.yaml",
            "--timeline",
            timeline.to_str().unwrap(),
        ],
        None,
    );
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("timeline line 2") && stderr.contains("readyReplica"),
        "{stderr}"
    );
}

#[test]
fn a_closed_output_pipe_is_not_a_panic() {
    use std::io::Read;
    let doc = std::fs::read_to_string(repo().join("examples/proportional.yaml")).unwrap();
    let many: String = (0..3000).map(|_| format!("{doc}\n---\n")).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(["validate", "-f", "-"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(many.as_bytes());
    });
    // Read one byte of output, then close the pipe, like `| head -c 1`.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_ne!(
        out.status.code(),
        Some(101),
        "panicked: {}",
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn replay_errors_name_the_line_and_the_target_kind_is_checked() {
    let dir = std::env::temp_dir().join(format!("mds-replay-kind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let timeline = dir.join("t.jsonl");
    std::fs::write(
        &timeline,
        "{\"t\": 0, \"roles\": {}}\n{\"t\": 15, \"target\": {\"replicas\": {\"nope\": 2}}}\n",
    )
    .unwrap();
    let run = |target: &str| {
        mds(
            &[
                "replay",
                "--scaler",
                "examples/replay/scaler.yaml",
                "--target",
                target,
                "--timeline",
                timeline.to_str().unwrap(),
            ],
            None,
        )
    };
    let out = run("examples/replay/target.yaml");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("timeline line 2"),
        "{}",
        text(&out.stderr)
    );
    let out = run("examples/replay/scaler.yaml");
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not a ModelDeployment"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn inspect_metrics_shows_the_status_rounding() {
    let dir = std::env::temp_dir().join(format!("mds-inspect-round-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = |generated: u32| {
        format!(
            "vllm:num_requests_running 2.6\nvllm:num_requests_waiting 0\n\
             vllm:kv_cache_usage_perc 0.123456\nvllm:generation_tokens_total {generated}\n"
        )
    };
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    std::fs::write(&a, page(0)).unwrap();
    std::fs::write(&b, page(100)).unwrap();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let args = [
        "inspect-metrics",
        "--engine",
        "vllm",
        &a,
        &b,
        "--interval",
        "3",
    ];
    let out = mds(&args, None);
    let stdout = text(&out.stdout);
    // Requests to whole requests, KV usage to four places, rates to a thousandth.
    assert!(
        stdout.contains("running requests                3\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("KV cache usage (mean)           0.1235\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("generation tokens/s             33.333\n"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
