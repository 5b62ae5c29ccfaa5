//! The `mds` binary as a user runs it: exit codes, output and standard input.

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{mds, repo, text};

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
fn show_defaults_output_is_yaml_that_validates_again() {
    let scratch = common::Scratch::new("stored");
    for example in [
        "examples/token-throughput.yaml",
        "examples/prefill-decode-encode.yaml",
    ] {
        let out = mds(&["validate", "--show-defaults", "-f", example], None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(
            text(&out.stderr).contains(": valid"),
            "the report goes to stderr"
        );
        assert!(
            stdout.starts_with("---\napiVersion: worker.gpustack.ai/v1\n"),
            "{stdout}"
        );
        for line in [
            "maxStepReplicas: 4",
            "policy:",
            "intervalSeconds: 15",
            "minReplicas:",
        ] {
            assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
        }
        // validate --show-defaults > stored.yaml && validate -f stored.yaml
        let stored = scratch.file("stored.yaml", &stdout);
        let again = mds(&["validate", "-f", &stored], None);
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stdout));
        assert!(
            !text(&again.stdout).contains("warning"),
            "{}",
            text(&again.stdout)
        );
        let twice = mds(&["validate", "--show-defaults", "-f", &stored], None);
        assert_eq!(text(&twice.stdout), stdout, "storing twice changes nothing");
    }
}

#[test]
fn one_file_as_scalers_and_targets_keeps_its_scaler() {
    let example = "examples/prefill-decode-encode.yaml";
    let out = mds(&["validate", "-f", example, "--target", example], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("ModelDeploymentScaler vl-serving: valid (checked against ModelDeployment \"vl-serving\")"),
        "{}",
        text(&out.stdout)
    );
    let both = std::fs::read_to_string(repo().join(example)).unwrap();
    let out = mds(&["validate", "-f", "-", "--target", "-"], Some(&both));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = mds(
        &[
            "validate",
            "-f",
            "examples/proportional.yaml",
            "--target",
            example,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "its target is not in --target");
    assert!(
        text(&out.stdout).contains("target not found"),
        "{}",
        text(&out.stdout)
    );
    let out = mds(
        &[
            "validate",
            "-f",
            "examples/proportional.yaml",
            "--target",
            example,
            "--allow-missing-target",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn strict_fails_on_warnings() {
    let manifest = std::fs::read_to_string(repo().join("examples/proportional.yaml"))
        .unwrap()
        .replace("  mode:", "  mod: Active\n  mode:");
    assert!(manifest.contains("mod: Active"), "the example sets a mode");
    let out = mds(&["validate", "-f", "-"], Some(&manifest));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("warning: spec.mod: "),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains("did you mean mode?"),
        "{}",
        text(&out.stdout)
    );
    let out = mds(&["validate", "--strict", "-f", "-"], Some(&manifest));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
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
fn every_command_prefixes_its_errors_the_same_way() {
    let scratch = common::Scratch::new("prefix");
    let missing = scratch.0.join("missing.yaml").display().to_string();
    let runs: [&[&str]; 5] = [
        &["validate", "-f", &missing],
        &["replay", "--scaler", &missing, "--timeline", &missing],
        &["inspect-metrics", "--engine", "vllm", &missing],
        &["inspect-metrics", "--engine", "tgi", &missing],
        &["validate"],
    ];
    for args in runs {
        let out = mds(args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("mds: error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn show_defaults_stores_the_inferred_algorithm_type() {
    // D28: a manifest without algorithm.type gets the inferred one.
    let scratch = common::Scratch::new("inferred");
    let manifest = scratch.file(
        "scaler.yaml",
        "apiVersion: worker.gpustack.ai/v1\nkind: ModelDeploymentScaler\nmetadata: {name: x}\nspec:\n  targetRef: {name: x}\n  roles: [{name: server, maxReplicas: 4}]\n  algorithm:\n    proportional:\n      metric: QueueDepth\n      roleTargets: [{name: server, target: \"8\"}]\n",
    );
    let out = mds(&["validate", "--show-defaults", "-f", &manifest], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("type: Proportional"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn controller_text_logs_off_a_terminal_carry_no_colour_codes() {
    // A cluster that is not there: the controller logs that it starts, then fails to reach it.
    let scratch = common::Scratch::new("controller-logs");
    let kubeconfig = scratch.file(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n\
         clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: nobody, user: {token: x}}]\n\
         contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args([
            "controller",
            "--kubeconfig",
            &kubeconfig,
            "--leader-elect=false",
        ])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args(["--health-probe-bind-address", "127.0.0.1:0"])
        .args(["--log-format", "text"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let logged = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{logged}");
    assert!(
        logged.contains("INFO") && logged.contains("controller starting"),
        "{logged}"
    );
    assert!(!logged.contains('\u{1b}'), "escape codes in:\n{logged:?}");
}
