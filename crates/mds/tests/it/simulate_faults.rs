//! `mds simulate --fault` as a user runs it: the flag parses, the summary and the JSON list
//! the faults applied with their windows and counts, and a bad spec is an input error naming
//! the flag and the rule.

use crate::common;

use common::{Scratch, mds, text};

/// Ten minutes of the bundled example, its scaler alone.
fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "simulate",
        "--no-progress",
        "--no-report",
        "--until",
        "10m",
        "--compare",
        "none",
    ];
    base.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn faults_are_applied_and_listed_in_the_summary_and_the_json() {
    let scratch = Scratch::new("simulate-faults");
    let json = scratch.0.join("run.json").display().to_string();
    let out = mds(
        &args(&[
            "--fault",
            "api-conflict:rate=0.5,from=1m,until=300",
            "--fault",
            "operator-restart:at=200",
            "--json",
            &json,
        ]),
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("  faults              api-conflict 50 % 60-300 s: "))
        .unwrap_or_else(|| panic!("no faults line in:\n{stdout}"));
    assert!(lines[first].contains(" writes refused"), "{stdout}");
    assert!(
        lines[first + 1].starts_with(
            "                      operator-restart at 200 s, first pass of the new worker "
        ),
        "{stdout}"
    );
    assert!(
        lines[first + 2].starts_with("  invariants          all held"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let faults = report["faults"].as_array().expect("a faults list");
    assert_eq!(faults.len(), 2);
    assert_eq!(faults[0]["kind"], "api-conflict");
    assert_eq!(faults[0]["spec"], "api-conflict:rate=0.5,from=1m,until=300");
    assert_eq!(
        (faults[0]["from"].as_f64(), faults[0]["until"].as_f64()),
        (Some(60.0), Some(300.0))
    );
    assert_eq!(faults[0]["rate"], 0.5);
    assert_eq!(faults[0]["unit"], "writes refused");
    let refused = faults[0]["events"].as_u64().unwrap();
    assert!(
        lines[first].contains(&format!(": {refused} writes refused")),
        "{stdout}"
    );
    assert_eq!(faults[1]["kind"], "operator-restart");
    assert_eq!(faults[1]["events"], 1);
    assert!(faults[1]["until"].as_f64().unwrap() >= 200.0);
    // Without --fault the JSON carries no faults key (the format is unchanged).
    let plain = scratch.0.join("plain.json").display().to_string();
    let out = mds(&args(&["--json", &plain]), None);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    assert!(report.get("faults").is_none());
}

#[test]
fn a_bad_fault_is_an_input_error_naming_the_flag_and_the_rule() {
    for (spec, rule) in [
        (
            "api-conflict:rate=2",
            "--fault \"api-conflict:rate=2\": api-conflict: rate=2: it must be a share above 0 and at most 1",
        ),
        (
            "chaos-monkey",
            "--fault \"chaos-monkey\": unknown fault \"chaos-monkey\"; known faults: api-conflict, api-unavailable, webhook-outage, scrape-timeout, scrape-garbage, counter-reset, quota-never-admits, retirement-abort, operator-restart, leader-change",
        ),
        (
            "operator-restart:from=10",
            "--fault \"operator-restart:from=10\": operator-restart: unknown key \"from\"; operator-restart takes at, down",
        ),
        (
            "webhook-outage:from=5m,until=1m",
            "--fault \"webhook-outage:from=5m,until=1m\": webhook-outage: until (60 s) must come after from (300 s)",
        ),
        (
            "scrape-timeout:role=decode",
            "--fault \"scrape-timeout:role=decode\": the target has no role \"decode\" (its roles: server)",
        ),
        (
            "leader-change:at=2h",
            "--fault \"leader-change:at=2h\": it starts at 7200 s, but the run ends at 720 s",
        ),
    ] {
        let out = mds(&args(&["--fault", spec]), None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert!(stderr.contains(rule), "{spec}: {stderr}");
    }
    // Faults meet our scaler alone: a comparison (or a frontier) refuses them; without one
    // the example runs alone with them.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--until",
            "1m",
            "--fault",
            "api-conflict",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("  faults              api-conflict"));
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--until",
            "1m",
            "--compare",
            "all",
            "--fault",
            "api-conflict",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "--fault: faults apply to our scaler alone, not to a comparison; add --compare none"
        ),
        "{}",
        text(&out.stderr)
    );
}
