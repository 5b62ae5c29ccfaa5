//! `mds simulate` as a user runs it: the bundled example, its report, its errors.

mod common;

use common::{Scratch, mds, text};

/// Ten minutes of the bundled example, its scaler alone: quick in a debug build.
const SHORT: &[&str] = &[
    "simulate",
    "--no-progress",
    "--until",
    "10m",
    "--compare",
    "none",
];

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
            .filter(|l| !l.starts_with("json: ") && !l.starts_with("report: "))
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
            "--compare",
            "none",
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

/// Every policy's row name in a full comparison.
const EVERY_PEER: &[&str] = &[
    "hpa ",
    "knative-kpa ",
    "aibrix-kpa ",
    "aibrix-kpa-as-written ",
    "aibrix-kpa-hpa-cooldown ",
    "aibrix-apa ",
    "aibrix-apa-hpa-cooldown ",
    "aibrix-kpa-queue ",
    "dynamo ",
    "dynamo-consolidation ",
    "wva ",
    "wva-hpa ",
    "static-peak ",
];

/// The table row of `policy`, split into its columns.
fn row<'a>(stdout: &'a str, policy: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::split_whitespace)
        .map(Iterator::collect::<Vec<_>>)
        .find(|cols| cols.first() == Some(&policy))
        .unwrap_or_else(|| panic!("no row {policy:?} in:\n{stdout}"))
}

#[test]
fn with_no_arguments_every_policy_is_compared_on_the_bundled_example() {
    let out = mds(&["simulate", "--no-progress", "--until", "10m"], None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("mds simulate --compare: 16 policies on azure-2023-conv, 0 s to 600 s"),
        "{stdout}"
    );
    for policy in [
        "mds-proportional ",
        "mds-tokenthroughput ",
        "mds-predictive ",
    ]
    .iter()
    .chain(EVERY_PEER)
    {
        assert!(
            stdout.contains(&format!("  {policy}")),
            "{policy:?} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("bounds: Oracle A"), "{stdout}");
    // HPA's row is its own yardstick.
    assert_eq!(row(&stdout, "hpa")[7], "1.00", "{stdout}");
}

#[test]
fn the_comparison_runs_on_every_bundled_trace() {
    for trace in ["azure-2023-conv", "azure-2023-code", "mooncake-synthetic"] {
        let out = mds(
            &[
                "simulate",
                "--no-progress",
                "--trace",
                &format!("bundled:{trace}"),
                "--until",
                "8m",
                "--compare",
            ],
            None,
        );
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{trace}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("14 policies on {trace}")),
            "{stdout}"
        );
        for policy in EVERY_PEER {
            assert!(
                stdout.contains(&format!("  {policy}")),
                "{trace}: {policy:?}:\n{stdout}"
            );
        }
        row(&stdout, "mds");
    }
}

#[test]
fn the_disaggregated_example_under_an_auto_quota_never_exceeds_it() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--scaler",
            "examples/simulate/pd.yaml",
            "--trace",
            "bundled:azure-2023-code",
            "--until",
            "15m",
            "--quota",
            "auto",
            "--compare",
            "mds,hpa,dynamo,static-peak",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("quota h100-pcie="), "{stdout}");
    assert!(stdout.contains("(80 % of "), "{stdout}");
    // G10: our scaler never holds more GPUs than the quota, transients included.
    assert_eq!(row(&stdout, "mds")[10], "0s", "{stdout}");
}

#[test]
fn a_cold_start_sweep_gives_one_table_per_cold_start() {
    let scratch = Scratch::new("simulate-sweep");
    let json = scratch.0.join("sweep.json").display().to_string();
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "5m",
            "--cold-start",
            "0,60s,2m",
            "--compare",
            "mds,hpa",
            "--json",
            &json,
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for cold in ["cold start 0 s", "cold start 60 s", "cold start 120 s"] {
        assert!(stdout.contains(cold), "{cold:?}:\n{stdout}");
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let comparisons = report["comparisons"].as_array().unwrap();
    let colds: Vec<f64> = comparisons
        .iter()
        .map(|c| c["cold_start_seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(colds, [0.0, 60.0, 120.0]);
    let rows = comparisons[1]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["policy"], "mds");
    assert_eq!(rows[1]["policy"], "hpa");
    assert_eq!(rows[1]["vs_hpa"], 1.0);
    assert!(
        comparisons[1]["runs"][0]["passes"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );
}

#[test]
fn comparison_flags_are_listed_and_bad_ones_named() {
    let out = mds(&["simulate", "--compare", "list"], None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for policy in EVERY_PEER {
        assert!(stdout.contains(policy.trim()), "{policy}:\n{stdout}");
    }
    for (flags, named) in [
        (&["--compare", "hpa,nope"][..], "no policy \"nope\""),
        (&["--compare", ","][..], "names no policy"),
        (&["--cold-start", "0,soon"][..], "--cold-start \"soon\""),
    ] {
        let mut argv = vec!["simulate", "--no-progress", "--until", "1m"];
        argv.extend_from_slice(flags);
        let out = mds(&argv, None);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(
            text(&out.stderr).contains(named),
            "{flags:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn the_sweep_runs_on_every_bundled_trace() {
    for trace in ["azure-2023-conv", "azure-2023-code", "mooncake-synthetic"] {
        let out = mds(
            &[
                "simulate",
                "--no-progress",
                "--trace",
                &format!("bundled:{trace}"),
                "--until",
                "3m",
                "--cold-start",
                "0,30,60,120,300",
                "--compare",
                "mds,hpa,static-peak",
            ],
            None,
        );
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{trace}: {stdout}{}",
            text(&out.stderr)
        );
        for cold in [0, 30, 60, 120, 300] {
            assert!(
                stdout.contains(&format!("cold start {cold} s ±")),
                "{trace}, {cold} s:\n{stdout}"
            );
        }
        assert_eq!(stdout.matches("policies on").count(), 5, "{stdout}");
    }
}

#[test]
fn the_html_report_goes_next_to_the_json_and_holds_every_plot_and_policy() {
    let scratch = Scratch::new("simulate-report");
    let json = scratch.0.join("run.json");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "5m",
            "--compare",
            "mds,hpa,static-peak",
            "--json",
            &json.display().to_string(),
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let page_path = scratch.0.join("run.html");
    assert!(
        stdout.contains(&format!("report: {}", page_path.display())),
        "{stdout}"
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    for id in ["demand", "replicas", "ttft", "itl", "policies"] {
        assert!(
            page.contains(&format!("<svg id=\"{id}\"")),
            "plot {id} missing"
        );
    }
    for policy in ["<td>mds</td>", "<td>hpa</td>", "<td>static-peak</td>"] {
        assert!(
            page.contains(policy),
            "{policy} missing from the summary table"
        );
    }
    // Self-contained: the only URL is SVG's namespace.
    assert_eq!(
        page.matches("http").count(),
        page.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(page.contains("seed") && page.contains("llama3-8b-h100-vllm"));

    // --no-report writes none; a single run writes its own.
    let single = scratch.0.join("single.html");
    let out = mds(&args(&["--report", &single.display().to_string()]), None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&single)
            .unwrap()
            .contains("<svg id=\"replicas\"")
    );
    let none = scratch.0.join("none.json");
    let out = mds(
        &args(&["--no-report", "--json", &none.display().to_string()]),
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(!scratch.0.join("none.html").exists());
    assert!(!text(&out.stdout).contains("report: "));
}

#[test]
fn suggest_prints_a_fragment_and_the_knee_of_recorded_metrics_is_found() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--suggest",
            "--load",
            "constant:rate=3,duration=600,prompt=1024,output=256",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for line in [
        "mds simulate --suggest: chat on constant",
        "<- cheapest within the goal",
        "suggested: server ",
        "paste into the scaler's spec:",
        "serverTargetTokensPerSecond: \"",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }

    // Recorded metrics: 500 to 10,000 tokens/s per replica, p95 TTFT 300 ms below 6,000 and
    // 900 ms from it on (SLO 500 ms): the knee is at 5,750 and the target the 5,500 seen
    // within the SLO.
    let scratch = Scratch::new("simulate-knee");
    let mut timeline = String::new();
    for i in 2..=20 {
        let per_replica = f64::from(i) * 500.0;
        let ttft = if per_replica < 6000.0 { 300 } else { 900 };
        timeline.push_str(&format!(
            "{{\"t\": {}, \"roles\": {{\"server\": {{\"readyReplicas\": 2, \"promptTokensPerSecond\": {}, \"generationTokensPerSecond\": {}, \"ttftMilliseconds\": {ttft}, \"itlMilliseconds\": 20}}}}}}\n",
            i * 15,
            per_replica * 2.0 * 0.8,
            per_replica * 2.0 * 0.2,
        ));
    }
    let file = scratch.file("timeline.jsonl", &timeline);
    let out = mds(&["simulate", "--suggest", "--metrics", &file], None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("knee 5750 tokens/s per replica"),
        "{stdout}"
    );
    assert!(
        stdout.contains("serverTargetTokensPerSecond: \"5500\""),
        "{stdout}"
    );

    let broken = scratch.file("broken.jsonl", "{\"t\": 0, \"roles\": {}}\nnot json\n");
    let out = mds(&["simulate", "--suggest", "--metrics", &broken], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 2: not JSON"),
        "{}",
        text(&out.stderr)
    );
    let out = mds(&["simulate", "--suggest", "--goal", "120"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--goal 120"),
        "{}",
        text(&out.stderr)
    );
}
