//! `mds simulate` and `mds validate` with a team's own files: what holds or changes the
//! scaler as written is said on the first lines, never left to be guessed from the results.

use crate::common;

use common::{Scratch, mds, text};

/// The bundled example with the scaler's mode, the target's router and the scaler's bounds
/// replaced as given.
fn example(mode: &str, router: bool, bounds: (u32, u32)) -> String {
    let yaml = std::fs::read_to_string(common::repo().join("examples/simulate/chat.yaml"))
        .expect("the example");
    let yaml = yaml.replace("  mode: Active\n", &format!("  mode: {mode}\n"));
    let yaml = if router {
        yaml
    } else {
        yaml.replace("  router:\n    name: vllm-router\n", "")
    };
    yaml.replace(
        "      minReplicas: 1\n      maxReplicas: 8\n",
        &format!(
            "      minReplicas: {}\n      maxReplicas: {}\n",
            bounds.0, bounds.1
        ),
    )
}

/// Twenty minutes of the bundled trace at twice its rate: enough load to scale.
fn simulate(file: &str, extra: &[&str]) -> (String, String, Option<i32>) {
    let mut args = vec![
        "simulate",
        "--no-progress",
        "--no-report",
        "--until",
        "20m",
        "--rate",
        "2",
        "--scaler",
        file,
    ];
    args.extend_from_slice(extra);
    let out = mds(&args, None);
    (text(&out.stdout), text(&out.stderr), out.status.code())
}

/// The number a summary row starts with (`scale actions       3 (...)`).
fn row_number(stdout: &str, row: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(row))
        .unwrap_or_else(|| panic!("no {row:?} row in:\n{stdout}"));
    line.trim_start()[row.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

#[test]
fn a_shadow_scaler_is_simulated_as_active_and_the_first_line_says_so() {
    let scratch = Scratch::new("shadow");
    let file = scratch.file("shadow.yaml", &example("Shadow", true, (1, 8)));
    let (stdout, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("simulated as Active: spec.mode is Shadow (it only reports)"),
        "{stdout}"
    );
    assert!(row_number(&stdout, "scale actions") > 0.0, "{stdout}");

    let (as_written, stderr, code) = simulate(&file, &["--as-written"]);
    assert_eq!(code, Some(0), "{as_written}\n{stderr}");
    assert!(
        as_written.starts_with("mds simulate: scaler chat"),
        "{as_written}"
    );
    assert_eq!(
        row_number(&as_written, "scale actions"),
        0.0,
        "{as_written}"
    );

    // An Active scaler runs as written with no headline.
    let active = scratch.file("active.yaml", &example("Active", true, (1, 8)));
    let (stdout, _, _) = simulate(&active, &[]);
    assert!(stdout.starts_with("mds simulate: scaler chat"), "{stdout}");
}

#[test]
fn a_suspended_scaler_is_simulated_as_active_too() {
    let scratch = Scratch::new("suspended");
    let yaml = example("Active", true, (1, 8))
        .replace("  mode: Active\n", "  mode: Active\n  suspend: true\n");
    let file = scratch.file("suspended.yaml", &yaml);
    let (stdout, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("simulated as Active: spec.suspend is true"),
        "{stdout}"
    );
    assert!(row_number(&stdout, "scale actions") > 0.0, "{stdout}");
}

#[test]
fn a_target_without_a_router_is_said_to_hold_scale_down_by_validate_and_simulate() {
    let scratch = Scratch::new("router-less");
    let file = scratch.file("norouter.yaml", &example("Active", false, (1, 8)));

    let out = mds(&["validate", "-f", &file], None);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines[1].starts_with(
            "  warning: spec.targetRef.name: ModelDeployment \"chat\" has no spec.router"
        ) && lines[1].contains("never shrinks a role"),
        "the first finding: {report}"
    );
    let strict = mds(&["validate", "--strict", "-f", &file], None);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict.stdout));

    let (stdout, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("scale-down held: ModelDeployment \"chat\" has no spec.router"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "router least-outstanding (the target has no spec.router: no retirement completes)"
        ),
        "{stdout}"
    );

    // With its router the same files say nothing of it.
    let routed = scratch.file("routed.yaml", &example("Active", true, (1, 8)));
    let out = mds(&["validate", "-f", &routed], None);
    assert!(
        !text(&out.stdout).contains("spec.router"),
        "{}",
        text(&out.stdout)
    );
    let (stdout, _, _) = simulate(&routed, &[]);
    assert!(!stdout.contains("spec.router"), "{stdout}");
}

#[test]
fn a_count_a_bound_decided_is_named_in_the_run_and_on_the_frontier() {
    let scratch = Scratch::new("decided");
    // Two to two: nothing but the bounds decides.
    let file = scratch.file("fixed.yaml", &example("Active", true, (2, 2)));
    let (stdout, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("counts held: minReplicas equals maxReplicas (server at 2)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  decided by          server held at minReplicas 2 throughout"),
        "{stdout}"
    );
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--until",
            "10m",
            "--scaler",
            &file,
            "--frontier",
            "90",
            "--compare",
            "mds",
            "--frontier-grid",
            "0.5..2:2",
        ],
        None,
    );
    let frontier = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{frontier}\n{}",
        text(&out.stderr)
    );
    assert!(
        frontier.contains("(server held at minReplicas 2 throughout: the knob cannot change it)"),
        "{frontier}"
    );
    assert!(!frontier.contains("grid's edge"), "{frontier}");
}

#[test]
fn a_latency_target_in_the_wrong_unit_is_warned_naming_the_field() {
    let scratch = Scratch::new("unit-slip");
    let yaml = example("Active", true, (1, 8))
        .replace(
            "ttftTargetMilliseconds: \"500\"",
            "ttftTargetMilliseconds: \"0.5\"",
        )
        .replace(
            "itlTargetMilliseconds: \"50\"",
            "itlTargetMilliseconds: \"50000000\"",
        );
    let file = scratch.file("slip.yaml", &yaml);
    let out = mds(&["validate", "-f", &file], None);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    for line in [
        "warning: spec.algorithm.tokenThroughput.ttftTargetMilliseconds: 0.5 ms is under one millisecond: the field is in milliseconds, so no engine meets it and the latency guard keeps adding replicas; for 0.5 s write \"500\"",
        "warning: spec.algorithm.tokenThroughput.itlTargetMilliseconds: 50000000 ms is over ten minutes: the field is in milliseconds, so the latency guard would never act; if it is in microseconds, write \"50000\"",
    ] {
        assert!(report.contains(line), "{line:?} missing from:\n{report}");
    }
    let good = scratch.file("good.yaml", &example("Active", true, (1, 8)));
    let out = mds(&["validate", "-f", &good], None);
    assert!(
        !text(&out.stdout).contains("warning"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn target_typos_are_warned_with_a_did_you_mean_and_gpustack_fields_pass() {
    let scratch = Scratch::new("target-typos");
    let yaml = example("Active", true, (1, 8))
        .replace(
            "      replicas: 2\n",
            "      replicsa: 2\n      image: vllm/vllm-openai\n",
        )
        .replace("  router:\n", "  rolse: []\n  router:\n");
    let file = scratch.file("typos.yaml", &yaml);
    let out = mds(&["validate", "-f", &file], None);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("  warning: spec.roles[0].replicsa: is not a ModelDeployment field the scaler reads; did you mean replicas?"),
        "{report}"
    );
    assert!(
        report.contains("  warning: spec.rolse: is not a ModelDeployment field the scaler reads; did you mean roles?"),
        "{report}"
    );
    assert!(
        !report.contains("image"),
        "a GPUStack field is not ours to judge: {report}"
    );
    let (_, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("spec.roles[0].replicsa: is not a ModelDeployment field"),
        "{stderr}"
    );
}

#[test]
fn an_engine_name_we_do_not_know_is_named_under_its_own_field() {
    let scratch = Scratch::new("engine-name");
    let yaml =
        example("Active", true, (1, 8)).replace("    name: vLLM\n", "    name: vllm-openai\n");
    let file = scratch.file("engine.yaml", &yaml);
    let out = mds(&["validate", "-f", &file], None);
    let report = text(&out.stdout);
    assert!(
        report.contains("warning: ModelDeployment \"chat\" spec.engine.name: engine \"vllm-openai\" is not one the scaler reads (did you mean vLLM?): spec.engine.name names vLLM or SGLang"),
        "{report}"
    );
    let (stdout, stderr, code) = simulate(&file, &[]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("mds: error: ModelDeployment \"chat\" spec.engine.name: engine \"vllm-openai\" is not one the scaler reads (did you mean vLLM?)"),
        "{stderr}"
    );
}

#[test]
fn a_quota_below_the_floor_is_warned() {
    let scratch = Scratch::new("quota-floor");
    let file = scratch.file("floor.yaml", &example("Active", true, (2, 8)));
    let (stdout, stderr, code) = simulate(&file, &["--quota", "h100-pcie=1"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("mds: warning: --quota h100-pcie=1: 1 GPU is fewer than the 2 that server's minReplicas 2 (1 GPU per replica) need"),
        "{stderr}"
    );
    let (_, stderr, _) = simulate(&file, &["--quota", "h100-pcie=2"]);
    assert!(!stderr.contains("fewer than"), "{stderr}");
}

#[test]
fn trace_times_in_other_formats_are_read_or_named() {
    let scratch = Scratch::new("trace-formats");
    let rows = |stamp: &dyn Fn(u32) -> String| {
        let mut csv = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
        for i in 0..200 {
            csv.push_str(&format!("{},500,100\n", stamp(i)));
        }
        csv
    };
    let run = |file: &str| {
        let out = mds(
            &[
                "simulate",
                "--no-progress",
                "--no-report",
                "--compare",
                "none",
                "--trace",
                file,
            ],
            None,
        );
        (text(&out.stdout), text(&out.stderr), out.status.code())
    };
    let zulu = scratch.file(
        "z.csv",
        &rows(&|i| format!("2023-11-16T18:{:02}:{:02}Z", i / 60, i % 60)),
    );
    let unix = scratch.file("u.csv", &rows(&|i| format!("{}.5", 1_700_158_546 + i)));
    for file in [&zulu, &unix] {
        let (stdout, stderr, code) = run(file);
        assert_eq!(code, Some(0), "{file}: {stdout}\n{stderr}");
        assert!(stdout.contains("(200 requests, "), "{stdout}");
    }
    let bad = scratch.file("bad.csv", &rows(&|i| format!("day {i}")));
    let (_, stderr, code) = run(&bad);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(
            "line 2: TIMESTAMP \"day 0\" is not a time; expected \"2023-11-16 18:15:46.6805900\""
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("jiff"), "{stderr}");

    // Whole seconds in a Mooncake file: read as milliseconds, and said.
    let mut jsonl = String::new();
    for i in 0..3000 {
        jsonl.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 200, \"output_length\": 20}}\n",
            i * 2
        ));
    }
    let seconds = scratch.file("s.jsonl", &jsonl);
    let (_, stderr, code) = run(&seconds);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("if they are whole seconds, the trace spans 1.7 h: add --time-scale 1000 to read them so"),
        "{stderr}"
    );
    let float = scratch.file(
        "f.jsonl",
        "{\"timestamp\": 0.5, \"input_length\": 200, \"output_length\": 20}\n{\"timestamp\": 1.5, \"input_length\": 200, \"output_length\": 20}\n",
    );
    let (stdout, stderr, code) = run(&float);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

#[test]
fn an_slo_per_prompt_class_grades_reports_and_plots_each_request_against_its_own_objective() {
    let scratch = Scratch::new("slo-classes");
    let page = scratch.0.join("run.html").display().to_string();
    let json = scratch.0.join("run.json").display().to_string();
    let run = |slo: &str| {
        mds(
            &[
                "simulate",
                "--no-progress",
                "--compare",
                "none",
                "--until",
                "10m",
                "--slo-ttft",
                slo,
                "--report",
                &page,
                "--json",
                &json,
            ],
            None,
        )
    };
    let out = run("500ms,4k=2s");
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("SLO                 TTFT <= 500 ms, 2000 ms from 4000 prompt tokens and its p95 inter-token gap <= 50 ms"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        report["inputs"]["slo"]["ttft_classes"],
        serde_json::json!([{"from_prompt_tokens": 4000, "seconds": 2.0}])
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("p95 of each request's TTFT over its own objective"),
        "the TTFT plot"
    );
    assert!(
        html.contains("each request's own objective"),
        "its reference line"
    );

    // A flat objective keeps the flat line.
    let out = run("500ms");
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("SLO 500 ms") && !html.contains("own objective"));

    for (slo, says) in [
        ("500ms,4k", "a prompt class is TOKENS=TIME"),
        ("500ms,8k=2s,4k=1s", "from shorter to longer prompts"),
        ("500ms,4k=2", "did you mean 2s?"),
    ] {
        let out = run(slo);
        assert_eq!(out.status.code(), Some(2), "{slo}");
        assert!(
            text(&out.stderr).contains(says),
            "{slo}: {}",
            text(&out.stderr)
        );
    }
}

/// Issue 46 item 4: the fragment `--suggest` pastes, put into the scaler and run as a user
/// runs it, gives the attainment and GPU-hours the suggestion said (and the frontier's
/// `mds --suggest` row, which is the same search: tests/it/frontier.rs in mds-simulate).
#[test]
fn the_pasted_suggestion_runs_as_the_suggestion_said() {
    let scratch = Scratch::new("pasted");
    let file = scratch.file("chat.yaml", &example("Active", true, (1, 8)));
    let (stdout, stderr, code) = simulate(&file, &["--suggest"]);
    assert_eq!(code, Some(0), "{stderr}");
    // The answer: the tuned line when tuning kept a change, else the suggested one.
    let said = stdout
        .lines()
        .find(|l| l.starts_with("tuned: "))
        .or_else(|| stdout.lines().find(|l| l.starts_with("suggested: ")))
        .unwrap_or_else(|| panic!("no answer in:\n{stdout}"));
    let fragment = stdout
        .split("paste into the scaler's spec:\n")
        .nth(1)
        .expect("a fragment");
    let blocks: serde_json::Value = serde_yaml_ng::from_str(fragment).unwrap();
    let mut docs: Vec<serde_json::Value> =
        serde_yaml_ng::Deserializer::from_str(&std::fs::read_to_string(&file).unwrap())
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
    for doc in &mut docs {
        if doc["kind"] == "ModelDeploymentScaler" {
            for (block, value) in blocks.as_object().unwrap() {
                doc["spec"][block] = value.clone();
            }
        }
    }
    let pasted = docs
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).unwrap())
        .collect::<Vec<_>>()
        .join("---\n");
    let pasted = scratch.file("pasted.yaml", &pasted);
    let (run, stderr, code) = simulate(&pasted, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let attainment = row_number(&run, "SLO attainment");
    let gpu_hours = row_number(&run, "GPU-hours");
    assert!(
        said.contains(&format!("{attainment:.1} %"))
            && said.contains(&format!("{gpu_hours:.2} GPU-hours")),
        "the suggestion said {said:?}; the pasted scaler ran {attainment:.1} % at {gpu_hours:.2} GPU-hours"
    );
}
