//! `mds simulate` as a user runs it: the bundled example, its report, its errors.

mod common;

use common::{Scratch, mds, text};

/// Ten minutes of the bundled example: quick in a debug build.
const SHORT: &[&str] = &["simulate", "--no-progress", "--until", "10m"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    SHORT.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn the_bundled_example_runs_and_reports() {
    let out = mds(SHORT, None);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    for line in [
        "mds simulate: scaler chat on azure-2023-conv, 0 s to 600 s",
        "llama3-8b-h100-vllm, request engine, router least-outstanding",
        "SLO attainment",
        "TTFT p50/p95/p99",
        "GPU-hours",
        "replicas server",
        "invariants          all held",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from:\n{stdout}");
    }
}

#[test]
fn the_json_report_holds_bins_passes_and_inputs_and_repeats_exactly() {
    let scratch = Scratch::new("simulate-json");
    let path = |name: &str| scratch.0.join(name).display().to_string();
    let (a, b) = (path("a.json"), path("b.json"));
    let first = mds(&args(&["--json", &a, "--minutes"]), None);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let second = mds(&args(&["--json", &b, "--minutes"]), None);
    let without_path = |out: &std::process::Output| {
        let stdout = text(&out.stdout);
        stdout
            .lines()
            .filter(|l| !l.starts_with("report: "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_path(&first), without_path(&second));
    let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert_eq!(
        a, b,
        "the same inputs and seed write the same report, byte for byte"
    );
    let report: serde_json::Value = serde_json::from_slice(&a).unwrap();
    let bins = report["bins"].as_array().unwrap();
    assert!(bins.len() >= 10, "one bin per minute");
    assert_eq!(bins[3]["seconds"], 60.0);
    assert!(bins[3]["requests"].as_f64().unwrap() > 100.0);
    assert!(bins[3]["ttft"]["p95"].as_f64().is_some());
    assert_eq!(report["inputs"]["seed"], 1);
    assert_eq!(report["inputs"]["engine"], "request");
    assert!(report["passes"].as_array().unwrap().len() >= 40);
    assert_eq!(report["violations"].as_array().unwrap().len(), 0);
    assert!(text(&first.stdout).contains("min  requests  attain"));
}

#[test]
fn the_fluid_engine_and_a_synthetic_load_run() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--engine",
            "fluid",
            "--load",
            "step:from=2,to=12,at=300,duration=900",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("fluid engine"), "{stdout}");
    assert!(
        stdout.contains("step from 2 to 12 req/s at 300 s"),
        "{stdout}"
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_flag_or_line() {
    let scratch = Scratch::new("simulate-bad");
    let broken = scratch.file(
        "broken.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,10,5\n2023-11-16 18:15:47.0,ten,5\n",
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--engine", "warp"],
            "--engine \"warp\": it must be request or fluid",
        ),
        (
            vec!["--router", "random"],
            "--router \"random\": it must be one of",
        ),
        (vec!["--profile", "gpt-9"], "no engine profile \"gpt-9\""),
        (
            vec!["--quota", "h100"],
            "--quota \"h100\": it must be TYPE=GPUS",
        ),
        (vec!["--cold-start", "soon"], "--cold-start \"soon\""),
        (
            vec!["--slo-ttft", "0"],
            "--slo-ttft \"0\": it must be positive",
        ),
        (
            vec!["--rate=-1"],
            "--rate \"-1\": it must be a positive number",
        ),
        (
            vec!["--trace", "bundled:nope"],
            "no bundled trace of that name",
        ),
        (vec!["--trace", &broken], "line 3: ContextTokens \"ten\""),
    ];
    for (extra, message) in cases {
        let out = mds(&args(&extra), None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{extra:?}: {message:?} not in {stderr}"
        );
        assert!(text(&out.stdout).is_empty());
    }
    let out = mds(&["simulate", "--load", "step:from=1"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--load: step"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_scaler_admission_refuses_is_not_simulated() {
    let out = mds(
        &args(&["--scaler", "examples/invalid/broken-scaler.yaml"]),
        None,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("admission refuses it, so it is not simulated"),
        "{stderr}"
    );
}

#[test]
fn profiles_are_listed() {
    let out = mds(&["simulate", "--profile", "list"], None);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("llama3-8b-h100-vllm"), "{stdout}");
    assert!(stdout.contains("calibrated"), "{stdout}");
}
