//! `mds simulate --peer FILE`: a team's own HPA, ScaledObject, Knative Service or AIBrix
//! PodAutoscaler, run as written beside ours, named after its file; what cannot be simulated
//! is refused naming the file and the field.

use crate::common;

use common::{Scratch, mds, text};

fn example_peer(name: &str) -> String {
    common::repo()
        .join("examples/peers")
        .join(name)
        .display()
        .to_string()
}

/// Ten minutes of the bundled example at twice the trace's rate, with `extra` flags.
fn simulate(extra: &[&str]) -> (String, String, Option<i32>) {
    let scaler = common::repo().join("examples/simulate/chat.yaml");
    let scaler = scaler.display().to_string();
    let mut args = vec![
        "simulate",
        "--no-progress",
        "--no-report",
        "--until",
        "10m",
        "--rate",
        "2",
        "--scaler",
        &scaler,
    ];
    args.extend_from_slice(extra);
    let out = mds(&args, None);
    (text(&out.stdout), text(&out.stderr), out.status.code())
}

/// The GPU-hours of `policy`'s row of a comparison table.
fn gpu_hours(stdout: &str, policy: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("  ") && l.split_whitespace().next() == Some(policy))
        .unwrap_or_else(|| panic!("no row {policy:?} in:\n{stdout}"));
    line.split_whitespace()
        .nth(6)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no GPU-hours in {line:?}"))
}

#[test]
fn a_peer_file_alone_is_compared_with_the_scaler_and_named_after_its_file() {
    let keda = example_peer("keda.yaml");
    let (stdout, stderr, code) = simulate(&["--peer", &keda]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "ScaledObject \"chat\" runs as the row \"keda\": KEDA (its HPA): running + waiting requests at 16 per replica, 1..8 replicas"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("mds simulate --compare: 2 policies"),
        "{stdout}"
    );
    assert!(gpu_hours(&stdout, "keda") > 0.0);
    assert!(gpu_hours(&stdout, "mds") > 0.0);
}

#[test]
fn a_lower_target_in_the_file_costs_more_gpu_hours() {
    let scratch = Scratch::new("peer-target");
    let yaml = std::fs::read_to_string(example_peer("keda.yaml")).unwrap();
    let low = scratch.file(
        "low.yaml",
        &yaml.replace("threshold: \"16\"", "threshold: \"4\""),
    );
    let (stdout, stderr, code) = simulate(&["--peer", &example_peer("keda.yaml"), "--peer", &low]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        gpu_hours(&stdout, "low") > gpu_hours(&stdout, "keda"),
        "{stdout}"
    );
}

#[test]
fn a_file_named_as_a_built_in_peer_keeps_its_extension_in_the_row() {
    let (stdout, stderr, code) =
        simulate(&["--peer", &example_peer("hpa.yaml"), "--compare", "mds,hpa"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("runs as the row \"hpa.yaml\""), "{stderr}");
    assert!(gpu_hours(&stdout, "hpa.yaml") > 0.0);
    assert!(gpu_hours(&stdout, "hpa") > 0.0);
}

#[test]
fn what_cannot_be_simulated_is_refused_naming_the_file_and_the_field() {
    let scratch = Scratch::new("peer-refused");
    let yaml = std::fs::read_to_string(example_peer("hpa.yaml")).unwrap();
    let cpu = scratch.file(
        "cpu.yaml",
        &yaml.replace(
            "    - type: Pods\n      pods:\n        metric:\n          name: vllm_num_requests_running\n        target:\n          type: AverageValue\n          averageValue: \"24\"\n",
            "    - type: Resource\n      resource:\n        name: cpu\n        target: {type: Utilization, averageUtilization: 80}\n",
        ),
    );
    let (stdout, stderr, code) = simulate(&["--peer", &cpu]);
    assert_eq!(code, Some(2), "{stdout}");
    assert!(
        stderr.contains("cpu.yaml: spec.metrics[0].type: Resource (cpu): the simulator models the engines' series, not CPU or memory"),
        "{stderr}"
    );
    let typo = scratch.file(
        "typo.yaml",
        &yaml.replace("vllm_num_requests_running", "vllm_num_request_running"),
    );
    let (_, stderr, code) = simulate(&["--peer", &typo]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(
            "spec.metrics[0].pods.metric.name: \"vllm_num_request_running\" is no engine series"
        ),
        "{stderr}"
    );
    let deployment = scratch.file(
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: chat}\n",
    );
    let (_, stderr, code) = simulate(&["--peer", &deployment]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(
            "deploy.yaml: kind: \"Deployment\" (apps/v1) is not an autoscaler --peer reads"
        ),
        "{stderr}"
    );
}

#[test]
fn suggest_prices_the_teams_own_autoscalers_as_written() {
    let (stdout, stderr, code) = simulate(&["--suggest", "--peer", &example_peer("knative.yaml")]);
    assert!(code == Some(0) || code == Some(1), "{stderr}");
    assert!(
        stdout.contains("your autoscalers as written (--peer), same world:"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("knative ") && l.contains("GPU-hours")),
        "{stdout}"
    );
    // Without --peer the peer lines say they are not the team's settings.
    let (stdout, _, _) = simulate(&["--suggest"]);
    assert!(
        stdout.contains("not your settings: --peer FILE prices your own"),
        "{stdout}"
    );
}

#[test]
fn the_frontier_sweeps_the_file_and_says_what_it_costs_as_written() {
    let (stdout, stderr, code) = simulate(&[
        "--frontier",
        "--compare",
        "mds-tokenthroughput",
        "--frontier-grid",
        "0.5..2:3",
        "--peer",
        &example_peer("aibrix.yaml"),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("aibrix as written (target 0.5 KV-cache usage):"),
        "{stdout}"
    );
}
