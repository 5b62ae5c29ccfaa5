//! `mds simulate` as a user runs it: the bundled example, its report, its errors.

use crate::common;

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

/// Whether a comparison shows `policy`: a row of its own, or named beneath a row with the
/// same results (`    = a, b (the same results)`).
fn shows_policy(stdout: &str, policy: &str) -> bool {
    let policy = policy.trim_end();
    stdout.lines().any(|l| {
        l.starts_with(&format!("  {policy} "))
            || (l.starts_with("    = ") && l.split([' ', ',']).any(|name| name == policy))
    })
}

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
        "llama3-8b-h100-vllm (the target serves meta-llama/Meta-Llama-3-8B-Instruct on vLLM, instanceType h100-pcie), request engine, router least-outstanding",
        "  hardware: H100 PCIe x1, vLLM 0.8.5, bf16, 8,192-token context, calibrated on published vLLM runs",
        "means               TTFT",
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
fn a_single_runs_quota_is_on_its_world_line_and_in_its_json_inputs() {
    let scratch = Scratch::new("simulate-quota");
    let json = scratch.0.join("q.json").display().to_string();
    let out = mds(
        &args(&["--no-report", "--quota", "h100-pcie=3", "--json", &json]),
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains(", seed 1, quota h100-pcie=3"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        report["inputs"]["quota"],
        serde_json::json!({"h100-pcie": 3})
    );
    let unlimited = mds(&args(&["--no-report"]), None);
    assert!(text(&unlimited.stdout).contains(", seed 1, quota unlimited"));
}

/// `mds simulate` of `load` alone on the fluid engine.
fn fluid_run(load: &str) -> Vec<&str> {
    vec![
        "simulate",
        "--no-progress",
        "--compare",
        "none",
        "--engine",
        "fluid",
        "--load",
        load,
    ]
}

#[test]
fn the_fluid_engine_and_a_synthetic_load_run() {
    let out = mds(&fluid_run("step:from=2,to=12,at=300,duration=900"), None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("fluid engine"), "{stdout}");
    assert!(
        stdout.contains("step from 2 to 12 req/s at 300 s"),
        "{stdout}"
    );
    // The bounds come from the fluid engine's own curves, and the run says so.
    assert!(stdout.contains("on the fluid engine's curves"), "{stdout}");
}

#[test]
fn a_rate_curve_is_a_load_and_its_errors_name_the_line() {
    let scratch = Scratch::new("simulate-curve");
    let curve = scratch.file(
        "curve.csv",
        "t_start_s,total_rate_rps,mean_input_tokens_est,mean_output_tokens_est\n\
         0,100,300,200\n600,0,0,0\n1200,200,300,200\n",
    );
    let spec = format!("curve:file={curve},scale=0.02");
    let out = mds(&fluid_run(&spec), None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "x0.02 over 0.5 h (3 windows, 1 zero-rate window filled from the one before)"
        ),
        "{stdout}"
    );
    let bad = scratch.file("bad.csv", "t_start_s,total_rate_rps\n0,1\n");
    let spec = format!("curve:file={bad},scale=1");
    let out = mds(&["simulate", "--no-progress", "--load", &spec], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 1: the header has no column mean_input_tokens_est"),
        "{}",
        text(&out.stderr)
    );
    let out = mds(
        &["simulate", "--no-progress", "--load", "curve:scale=1"],
        None,
    );
    assert!(
        text(&out.stderr).contains("missing required key file"),
        "{}",
        text(&out.stderr)
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
            vec!["--slo-ttft", "0ms"],
            "--slo-ttft \"0ms\": a duration must be positive",
        ),
        (
            vec!["--slo-ttft", "500"],
            "--slo-ttft \"500\": a latency needs its unit (ms, s): did you mean 500ms?",
        ),
        (
            vec!["--slo-ttft", "2"],
            "--slo-ttft \"2\": a latency needs its unit (ms, s): did you mean 2s?",
        ),
        (
            vec!["--slo-ttft", "500ms+100/1k"],
            "--slo-ttft \"500ms+100/1k\": the allowance \"100\": a latency needs its unit (ms, s): did you mean 100ms?",
        ),
        (
            vec!["--slo-itl", "50"],
            "--slo-itl \"50\": a latency needs its unit (ms, s): did you mean 50ms?",
        ),
        (
            vec!["--slo-ttft", "500ms+100ms"],
            "--slo-ttft \"500ms+100ms\": an allowance is TIME/1k",
        ),
        (
            vec!["--slo-ttft", "500ms+x/1k"],
            "--slo-ttft \"500ms+x/1k\": the allowance \"x\"",
        ),
        (
            vec!["--slo-itl-mode", "median"],
            "--slo-itl-mode \"median\": it must be p95 or mean",
        ),
        (
            vec!["--slo-scale", "0"],
            "--slo-scale \"0\": it must be a positive number",
        ),
        (
            vec!["--frontier", "0"],
            "--frontier \"0\": tier \"0\" must be a percentage above 0 and at most 100",
        ),
        (
            vec!["--frontier", "95,101"],
            "tier \"101\" must be a percentage above 0 and at most 100",
        ),
        (
            vec!["--frontier", "--frontier-grid", "8..0.25"],
            "--frontier-grid \"8..0.25\": a grid that brackets a tier needs MIN < MAX",
        ),
        (
            vec!["--frontier", "--frontier-grid", "1..2:1"],
            "a grid that brackets a tier needs MIN < MAX and 2 to 64 points",
        ),
        (vec!["--jobs", "0"], "--jobs \"0\": it must be at least 1"),
        (
            vec!["--goal", "0"],
            "--goal \"0\": it must be a percentage above 0 and at most 100",
        ),
        (
            vec!["--goal", "0.95"],
            "--goal \"0.95\": a goal is a percentage, and one at or below 1 % is almost surely a fraction: did you mean 95?",
        ),
        (
            vec!["--quota", "a100=2"],
            "--quota \"a100=2\": no role of the target uses instance type \"a100\", so it would limit nothing; the target's roles use h100-pcie",
        ),
        (
            vec![
                "--scaler",
                "examples/proportional.yaml",
                "--quota",
                "h100-pcie=2",
            ],
            "the target's roles use replay (the stand-in target made without --target; pass your ModelDeployment with --target FILE to quota its types)",
        ),
        (
            vec!["--load", "constant:rate=2,prompt=20000"],
            "nothing could be served: 1240 requests (100.0 %): prompt and output over llama3-8b-h100-vllm's 8192-token context",
        ),
        (
            vec!["--pd-retirements", "sometimes"],
            "--pd-retirements \"sometimes\": it must be abort or complete",
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
    let out = mds(
        &["simulate", "--frontier", "--compare", "kubectl-autoscale"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no policy \"kubectl-autoscale\""),
        "{}",
        text(&out.stderr)
    );
    // --suggest answers for one world: a sweep of cold starts is refused, not ignored.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--suggest",
            "--cold-start",
            "0,300",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--cold-start \"0,300\": --suggest searches at one cold start"),
        "{}",
        text(&out.stderr)
    );
    // One value is the cold start it searches at, not the profile's.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--suggest",
            "--cold-start",
            "120",
            "--load",
            "constant:rate=1,duration=300",
        ],
        None,
    );
    assert!(
        text(&out.stdout).contains("cold start 120 s"),
        "{}",
        text(&out.stdout)
    );
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

/// The table row of `policy`, split into its columns; a policy whose results equal an earlier
/// row's is listed under it (`= hpa, … (the same results)`) and reads that row.
fn row<'a>(stdout: &'a str, policy: &str) -> Vec<&'a str> {
    let mut last_row = None;
    for line in stdout.lines().filter(|l| l.starts_with("  ")) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if let Some(same) = line.trim_start().strip_prefix("= ") {
            let names = same.split(" (the same").next().unwrap_or("");
            if names.split(", ").any(|name| name == policy)
                && let Some(found) = last_row
            {
                return found;
            }
            continue;
        }
        if cols.first() == Some(&policy) {
            return cols;
        }
        last_row = Some(cols);
    }
    panic!("no row {policy:?} in:\n{stdout}")
}

#[test]
fn with_no_arguments_the_frontier_of_the_bundled_example_is_drawn() {
    let out = mds(&["simulate", "--no-progress", "--until", "10m"], None);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for line in [
        "mds simulate --frontier 90 %, 95 %, 99 %: 12 policies on azure-2023-conv, 0 s to 600 s",
        "  SLO: TTFT <= 500 ms and its p95 inter-token gap <= 50 ms, graded per request",
        "  at 95 %: knee server ",
        "  reaching 90 %",
        "  reaching 95 %",
        "  reaching 99 %",
        "  verdict: ",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
    // Every tier's block lists its policies cheapest first.
    for block in stdout.split("  reaching ").skip(1) {
        let costs: Vec<f64> = block
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("  not reached") && !l.starts_with("  verdict"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{block}");
    }
}

#[test]
fn compare_all_runs_every_policy_at_one_setting() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "10m",
            "--compare",
            "all",
        ],
        None,
    );
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
            shows_policy(&stdout, policy),
            "{policy:?} missing:\n{stdout}"
        );
    }
    // Identical rows are one (issue 27 item 7), and a verdict line says who is cheapest.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .map(|l| l.split_whitespace().skip(1).collect())
        .filter(|cells: &Vec<&str>| cells.len() >= 13)
        .collect();
    for (i, a) in rows.iter().enumerate() {
        assert!(
            rows[i + 1..].iter().all(|b| b != a),
            "a repeated row:\n{stdout}"
        );
    }
    assert!(
        stdout.lines().any(
            |l| l.starts_with("  verdict at 95 %: ours mds-") && l.contains(", cheapest peer ")
        ),
        "{stdout}"
    );
    assert!(stdout.contains("bounds at 95 %: Oracle A"), "{stdout}");
    assert!(
        stdout.contains("knee (what one replica serves): server "),
        "{stdout}"
    );
    // HPA's row is its own yardstick.
    assert_eq!(row(&stdout, "hpa")[8], "1.00", "{stdout}");
}

#[test]
fn the_slo_is_graded_as_the_user_set_it_and_the_mean_reading_is_beside_it() {
    let run = |extra: &[&str]| {
        let mut a = vec![
            "simulate",
            "--no-progress",
            "--no-report",
            "--until",
            "10m",
            "--compare",
            "aibrix-kpa",
        ];
        a.extend_from_slice(extra);
        let out = mds(&a, None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // One replica all along: prefill chunks stall the decode steps, so requests' own p95 gaps
    // miss 50 ms far more often than their mean gaps do.
    let p95 = run(&[]);
    assert!(p95.contains("its p95 inter-token gap <= 50 ms"), "{p95}");
    let cols = row(&p95, "aibrix-kpa");
    let (strict, lenient) = (cols[1].to_string(), cols[2].to_string());
    assert!(
        strict.parse::<f64>().unwrap() + 20.0 < lenient.parse::<f64>().unwrap(),
        "{p95}"
    );
    let mean = run(&["--slo-itl-mode", "mean"]);
    assert!(mean.contains("its mean ITL <= 50 ms"), "{mean}");
    let cols = row(&mean, "aibrix-kpa");
    assert_eq!((cols[1], cols[2]), (lenient.as_str(), strict.as_str()));
    // A TTFT objective that grows with the prompt, or scales the idle TTFT.
    let grows = run(&["--slo-ttft", "200ms+100ms/1k"]);
    assert!(
        grows.contains("TTFT <= 200 ms + 100 ms per 1k prompt tokens"),
        "{grows}"
    );
    let scaled = run(&["--slo-scale", "3"]);
    assert!(
        scaled.contains("TTFT <= 3x its idle-replica TTFT"),
        "{scaled}"
    );
    // A TTFT objective shorter than long prompts' prefill leaves them unattainable at any
    // scale, and says so.
    let tight = run(&["--slo-ttft", "60ms"]);
    let share = tight
        .split("  SLO: ")
        .nth(1)
        .and_then(|l| l.split(" cannot meet").next())
        .unwrap();
    assert!(!share.ends_with("; 0 requests (0.0 %)"), "{tight}");
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
                shows_policy(&stdout, policy),
                "{trace}: {policy:?}:\n{stdout}"
            );
        }
        row(&stdout, "mds");
    }
}

#[test]
fn the_fluid_engine_refuses_a_disaggregated_target_and_names_the_request_engine() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--scaler",
            "examples/simulate/pd.yaml",
            "--engine",
            "fluid",
        ],
        None,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--engine"), "{stderr}");
    assert!(stderr.contains("use --engine request"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
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
    assert_eq!(row(&stdout, "mds").last(), Some(&"0s"), "{stdout}");
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
    // Captions true for the run (issue 27 item 11, in part): no fault shading without faults,
    // the colours named and drawn as a legend, Oracle A and B as they bound this run.
    assert!(
        !page.contains("Shaded: the windows of the faults"),
        "no --fault given"
    );
    assert!(
        page.contains("<g class=\"legend\">")
            && page.contains("ours in blue, each peer in a colour of its own")
    );
    assert!(!page.contains("a policy left of it reaches less"));
    assert!(page.contains("none reaches it for less than Oracle A"));

    // Policies on one spot share a dot, and the caption names every one behind its "+N".
    let grouped = scratch.0.join("grouped.html");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "5m",
            "--compare",
            "aibrix-kpa,aibrix-kpa-as-written,hpa",
            "--report",
            &grouped.display().to_string(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&grouped).unwrap();
    assert!(
        page.contains("aibrix-kpa +1"),
        "the two land on one spot here"
    );
    assert!(page.contains("aibrix-kpa shares its dot with aibrix-kpa-as-written."));

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
        text(&out.stderr).contains("line 2: not a JSON object"),
        "{}",
        text(&out.stderr)
    );
    let out = mds(&["simulate", "--suggest", "--goal", "120"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--goal \"120\""),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_frontier_prints_the_same_whatever_the_jobs() {
    let run = |jobs: &str| {
        let out = mds(
            &[
                "simulate",
                "--no-progress",
                "--no-report",
                "--until",
                "5m",
                "--frontier",
                "95",
                "--frontier-grid",
                "0.5..4:3",
                "--compare",
                "mds-tokenthroughput,hpa",
                "--jobs",
                jobs,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let one = run("1");
    assert!(one.contains("  reaching 95 %"), "{one}");
    assert_eq!(one, run("3"));
}

#[test]
fn the_profile_follows_the_targets_model_and_a_refused_request_says_why() {
    let scratch = Scratch::new("simulate-profile");
    let example = std::fs::read_to_string(common::repo().join("examples/simulate/chat.yaml"))
        .unwrap()
        .replace(
            "meta-llama/Meta-Llama-3-8B-Instruct",
            "meta-llama/Llama-3.1-8B-Instruct",
        );
    let first_line = |out: &std::process::Output| {
        let stdout = text(&out.stdout);
        stdout.lines().nth(1).unwrap_or_default().to_string()
    };
    // The example names Llama-3-8B on vLLM: the 8k profile, said why.
    let out = mds(&args(&[]), None);
    assert!(
        first_line(&out).contains(
            "llama3-8b-h100-vllm (the target serves meta-llama/Meta-Llama-3-8B-Instruct on vLLM, \
             instanceType h100-pcie)"
        ),
        "{}",
        text(&out.stdout)
    );
    // Llama-3.1 on vLLM, then on SGLang.
    let llama31 = scratch.file("llama31.yaml", &example);
    let out = mds(&args(&["--scaler", &llama31]), None);
    assert!(first_line(&out).contains(
        "llama3.1-8b-h100pcie-vllm (the target serves meta-llama/Llama-3.1-8B-Instruct on vLLM, \
         instanceType h100-pcie)"
    ));
    let sglang = scratch.file(
        "sglang.yaml",
        &example.replace("name: vLLM", "name: SGLang"),
    );
    let out = mds(&args(&["--scaler", &sglang]), None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(first_line(&out).contains(
        "llama3.1-8b-h100pcie-sglang (the target serves meta-llama/Llama-3.1-8B-Instruct on \
         SGLang, instanceType h100-pcie)"
    ));
    // The role's GPU and tensor parallelism pick among the fitted profiles, and the header
    // says what the profile models.
    let seventy = scratch.file(
        "seventy.yaml",
        &example
            .replace("Llama-3.1-8B-Instruct", "Llama-3.1-70B-Instruct")
            .replace(
                "instanceType: h100-pcie",
                "instanceType: h200\n      extraArgs: [\"--tensor-parallel-size\", \"8\"]",
            ),
    );
    let out = mds(&args(&["--scaler", &seventy]), None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("llama3.1-70b-h200-tp8-vllm (the target serves")
            && stdout.contains("  hardware: H200 x8, vLLM 0.24.0, bf16, 131,072-token context, fitted to aiconfigurator"),
        "{stdout}"
    );
    // What no profile serves: exit 2 naming what would, unless --profile is given.
    let l40s = scratch.file(
        "l40s.yaml",
        &example.replace("instanceType: h100-pcie", "instanceType: l40s-48g"),
    );
    let out = mds(&args(&["--scaler", &l40s]), None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("instanceType \"l40s-48g\" names no GPU with a profile of")
            && stderr.contains("llama3.1-8b-h100sxm-vllm (H100 SXM x1)")
            && stderr.contains("--profile NAME picks one"),
        "{stderr}"
    );
    let out = mds(
        &args(&["--scaler", &l40s, "--profile", "llama3.1-8b-a100-vllm"]),
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let unknown = scratch.file(
        "unknown.yaml",
        &example.replace("meta-llama/Llama-3.1-8B-Instruct", "acme/chat-9b"),
    );
    let out = mds(&args(&["--scaler", &unknown]), None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no engine profile serves acme/chat-9b"),
        "{stderr}"
    );
    // --profile overrides, and says so.
    let out = mds(
        &args(&["--scaler", &sglang, "--profile", "llama3-8b-h100-vllm"]),
        None,
    );
    assert!(first_line(&out).contains("llama3-8b-h100-vllm (--profile)"));
    // Mooncake's long prompts on the 8k profile: counted, and the profile that takes them.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--compare",
            "none",
            "--trace",
            "bundled:mooncake-synthetic",
            "--until",
            "2m",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    let refused = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("refused"))
        .unwrap_or_else(|| panic!("no refused line in:\n{stdout}"));
    assert!(
        refused.contains("over llama3-8b-h100-vllm's 8192-token context")
            && refused.contains("--profile llama3.1-8b-h100pcie-vllm takes"),
        "{refused}"
    );
    // --suggest says why no factor helps.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--suggest",
            "--trace",
            "bundled:mooncake-synthetic",
            "--until",
            "3m",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("refused: 294 requests (45.6 %)")
            && stdout.contains("more than the goal leaves: --profile llama3.1-8b-h100pcie-vllm"),
        "{stdout}"
    );
}

#[test]
fn suggest_says_when_the_slo_is_unattainable_for_a_share_of_requests_at_any_count() {
    // A 100 ms TTFT: a long prompt's prefill on an idle replica alone takes longer.
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--suggest",
            "--slo-ttft",
            "100ms",
            "--until",
            "5m",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("cannot meet the SLO at any count of replicas"))
        .unwrap_or_else(|| panic!("no unattainable line in:\n{stdout}"));
    assert!(
        line.contains("below the goal; relax the SLO (for long prompts --slo-ttft BASE+TIME/1k"),
        "{line}"
    );
}

/// Every scaler example in the repository simulates as given (issue 27 item 8), and a scaler
/// whose roles need their target's kinds says to pass it.
#[test]
fn every_example_simulates_as_given_and_a_missing_target_is_named() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut examples = Vec::new();
    for dir in ["examples", "examples/simulate"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                examples.push(path.display().to_string());
            }
        }
    }
    examples.sort();
    assert!(examples.len() >= 6, "{examples:?}");
    for example in &examples {
        let run = |extra: &[&str]| {
            let mut args = vec![
                "simulate",
                "--no-progress",
                "--no-report",
                "--compare",
                "none",
                "--until",
                "2m",
                "--scaler",
                example,
            ];
            args.extend_from_slice(extra);
            mds(&args, None)
        };
        let out = run(&[]);
        // The spec's prefill/decode/encode example serves a made-up model on L40S GPUs: no
        // profile serves it, which is said (exit 2), and `--profile` runs it anyway.
        if example.ends_with("prefill-decode-encode.yaml") {
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{example}: {stderr}");
            assert!(
                stderr.contains("no engine profile serves acme/vision-70b"),
                "{stderr}"
            );
            let out = run(&["--profile", "llama3-70b-h100x8-vllm"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "{example}: {}",
            text(&out.stderr)
        );
    }
    let scratch = Scratch::new("simulate-no-target");
    let scaler_only = std::fs::read_to_string(format!("{root}/examples/predictive.yaml"))
        .unwrap()
        .split("---\n")
        .nth(1)
        .unwrap()
        .to_string();
    let path = scratch.file("scaler.yaml", &scaler_only);
    let out = mds(&["simulate", "--no-progress", "--scaler", &path], None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("pass the ModelDeployment \"llm-serving\" with --target FILE")
            && stderr.contains("pass the scaler's ModelDeployment with --target FILE"),
        "{stderr}"
    );
}

/// One rule for latency targets (issue 27 item 5): the scaler's own targets drive the guards
/// of every row of our code, the SLO grades, the output says when they differ, and
/// `--suggest` pastes the targets the SLO implies.
#[test]
fn the_scalers_targets_drive_its_guards_and_suggest_pastes_the_slos() {
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--no-report",
            "--until",
            "10m",
            "--compare",
            "mds,mds-tokenthroughput",
            "--slo-ttft",
            "150ms",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let row = |name: &str| {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("  {name} ")))
            .unwrap_or_else(|| panic!("no {name} row in {stdout}"));
        line.split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // The same guards, the same run: one row, the other named beneath it.
    assert!(
        stdout.contains("    = mds-tokenthroughput (the same results)"),
        "{stdout}"
    );
    row("mds");
    assert!(
        text(&out.stderr).contains(
            "the scaler's guards aim at TTFT 500 ms and ITL 50 ms; the SLO grades TTFT <= 150 ms"
        ),
        "{}",
        text(&out.stderr)
    );
    let suggested = mds(
        &[
            "simulate",
            "--no-progress",
            "--suggest",
            "--slo-ttft",
            "300ms",
            "--load",
            "constant:rate=3,duration=300,prompt=1024,output=256",
        ],
        None,
    );
    let stdout = text(&suggested.stdout);
    assert!(
        stdout.contains("guards: aimed at the SLO before the search, and pasted so: ttftTargetMilliseconds 500 -> 300")
            && stdout.contains("ttftTargetMilliseconds: \"300\""),
        "{stdout}{}",
        text(&suggested.stderr)
    );
}

/// `--suggest` never suggests a capacity above the knee, marks the settings above it, breaks
/// near-ties toward headroom and says what the peers cost at the suggested capacity (issue 27
/// item 6). A Predictive scaler: its cheapest settings sit far above the knee, the latency
/// guard doing the scaling.
#[test]
fn suggest_stays_at_or_below_the_knee_and_prices_the_peers_there() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let chat = std::fs::read_to_string(format!("{root}/examples/simulate/chat.yaml")).unwrap();
    let predictive = chat.replace(
        "    type: TokenThroughput\n    tokenThroughput:\n      # Cache-missed prompt plus generation tokens one replica serves within the SLO.\n      serverTargetTokensPerSecond: \"4000\"\n      ttftTargetMilliseconds: \"500\"\n      itlTargetMilliseconds: \"50\"\n",
        "    type: Predictive\n    predictive:\n      serverTokenCapacityPerReplica: \"4000\"\n      tokenThroughput:\n        serverTargetTokensPerSecond: \"4000\"\n",
    );
    assert_ne!(predictive, chat, "the example's algorithm block moved");
    let scratch = Scratch::new("suggest-knee");
    let path = scratch.file("predictive.yaml", &predictive);
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--suggest",
            "--scaler",
            &path,
            "--goal",
            "90",
            "--load",
            "sinusoid:mean=6,amplitude=4,period=450,duration=900,prompt=1024,output=256",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let number_after = |line: &str, marker: &str| -> f64 {
        let rest = &line[line.find(marker).unwrap() + marker.len()..];
        rest.split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let knee_line = stdout
        .lines()
        .find(|l| l.contains("knee at the goal: server "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let knee = number_after(knee_line, "server ");
    assert!(stdout.contains("(above the knee)"), "{stdout}");
    let pasted = stdout
        .lines()
        .filter(|l| {
            l.contains("TargetTokensPerSecond: \"") || l.contains("TokenCapacityPerReplica: \"")
        })
        .map(|l| number_after(l, ": \""))
        .collect::<Vec<_>>();
    assert_eq!(pasted.len(), 2, "{stdout}");
    for capacity in pasted {
        assert!(
            capacity <= knee,
            "{capacity} above the knee {knee}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains(
            "the peers whose per-replica target comes from the capacity, at the suggested one"
        ) && stdout.contains("  hpa "),
        "{stdout}"
    );
}

/// The first hour's slips each get an error that names the fix (issue 27 items 9 and 12).
#[test]
fn slips_get_errors_that_name_the_fix() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["simulate", "--trace", "azure-2023-conv"],
            "azure-2023-conv: cannot read: No such file or directory (os error 2); did you mean bundled:azure-2023-conv?",
        ),
        (
            vec!["simulate", "--compare", "HPA"],
            "--compare \"HPA\": no policy \"HPA\" (did you mean hpa?)",
        ),
        (
            vec!["simulate", "--compare", "keda"],
            "(KEDA scales through an HPA on its metric, so `hpa` stands for it; --peer FILE runs your own ScaledObject)",
        ),
        (
            vec!["simulate", "--slo-ttft", "-1"],
            "--slo-ttft \"-1\": a duration must be positive",
        ),
        (
            vec!["simulate", "--slo-itl", "-5ms"],
            "--slo-itl \"-5ms\": a duration must be positive",
        ),
    ];
    for (argv, message) in cases {
        let out = mds(&argv, None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{argv:?}: {message:?} not in {stderr}"
        );
    }
    let listed = text(&mds(&["simulate", "--compare", "list"], None).stdout);
    assert!(listed.contains("KEDA scales through an HPA on its metric: `hpa` stands for it."));

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let chat = std::fs::read_to_string(format!("{root}/examples/simulate/chat.yaml")).unwrap();
    let scratch = Scratch::new("slips");
    let target_only = scratch.file("target.yaml", chat.split("---\n").next().unwrap());
    let out = mds(&["validate", "-f", &target_only], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!(
            "no ModelDeploymentScaler documents found ({target_only} holds ModelDeployment); a ModelDeployment alone is checked as the --target of a scaler"
        )),
        "{}",
        text(&out.stderr)
    );
    let misspelt = chat.replace(
        "      itlTargetMilliseconds: \"50\"\n",
        "      itlTargetMilliseconds: \"50\"\n      stableWindowSecs: 60\n",
    );
    let out = mds(
        &["validate", "-f", &scratch.file("misspelt.yaml", &misspelt)],
        None,
    );
    assert!(
        text(&out.stdout).contains("stableWindowSecs: is not a field of ModelDeploymentScaler and is dropped by the API server; did you mean stableWindowSeconds?"),
        "{}",
        text(&out.stdout)
    );
    let stamped = format!(
        "{chat}status:\n  roles:\n    - name: server\n      lastScaleUpTime: \"yesterday\"\n"
    );
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--compare",
            "none",
            "--scaler",
            &scratch.file("stamped.yaml", &stamped),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("status.roles[0].lastScaleUpTime: \"yesterday\" is not a timestamp; give one in RFC 3339, such as 2026-12-03T09:21:43Z"),
        "{}",
        text(&out.stderr)
    );
    let help = text(&mds(&["simulate", "--help"], None).stdout);
    assert!(
        help.contains("With no arguments it draws the frontier of the bundled example")
            && !help.contains("runs the bundled example (a TokenThroughput scaler"),
        "{help}"
    );
}

/// Warnings and notes about the inputs (a dropped unknown field, no --target) come before the
/// results, as a reader of the scaler file expects them (issue 46 item 8; issue 27 had put
/// them after): one stream, in the order written.
#[test]
fn warnings_about_the_inputs_print_before_the_results() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let chat = std::fs::read_to_string(format!("{root}/examples/simulate/chat.yaml")).unwrap();
    let scaler_only = chat.split("---\n").nth(1).unwrap().replace(
        "      itlTargetMilliseconds: \"50\"\n",
        "      itlTargetMilliseconds: \"50\"\n      stableWindowSecs: 60\n",
    );
    let scratch = Scratch::new("warnings-before");
    let path = scratch.file("scaler.yaml", &scaler_only);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' simulate --no-progress --no-report --compare none --until 2m --scaler '{path}' 2>&1",
            env!("CARGO_BIN_EXE_mds")
        ))
        .output()
        .unwrap();
    let both = text(&out.stdout);
    let results = both.find("invariants ").unwrap_or_else(|| panic!("{both}"));
    let note = both
        .find("mds: note: no --target")
        .unwrap_or_else(|| panic!("{both}"));
    let warning = both
        .find("did you mean stableWindowSeconds?")
        .unwrap_or_else(|| panic!("{both}"));
    assert!(note < results && warning < results, "{both}");
}

/// Runs `mds simulate ARGS` in `dir` with no report directory set, as a user's shell would.
fn simulate_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mds"))
        .arg("simulate")
        .args(args)
        .current_dir(dir)
        .env_remove("MDS_REPORT_DIR")
        .output()
        .unwrap()
}

#[test]
fn a_default_report_is_named_after_the_trace_in_the_current_directory() {
    let scratch = Scratch::new("report-names");
    let trace = common::repo().join("data/traces/azure-2023-conv.csv");
    let mine = scratch.0.join("my-traffic.csv");
    std::fs::copy(&trace, &mine).unwrap();

    let one = simulate_in(
        &scratch.0,
        &["--no-progress", "--until", "2m", "--compare", "none"],
    );
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    assert!(
        text(&one.stdout).contains("report: mds-azure-2023-conv-run.html"),
        "{}",
        text(&one.stdout)
    );
    assert!(scratch.0.join("mds-azure-2023-conv-run.html").exists());

    let two = simulate_in(
        &scratch.0,
        &[
            "--no-progress",
            "--until",
            "2m",
            "--trace",
            "my-traffic.csv",
            "--compare",
            "mds,hpa",
        ],
    );
    assert_eq!(two.status.code(), Some(0), "{}", text(&two.stderr));
    assert!(text(&two.stdout).contains("report: mds-my-traffic-compare.html"));
    // The first run's page is still there: one file per run, not one overwritten file.
    assert!(scratch.0.join("mds-my-traffic-compare.html").exists());
    assert!(scratch.0.join("mds-azure-2023-conv-run.html").exists());

    let elsewhere = scratch.0.join("reports");
    let three = std::process::Command::new(env!("CARGO_BIN_EXE_mds"))
        .args([
            "simulate",
            "--no-progress",
            "--until",
            "2m",
            "--load",
            "ramp:from=1,to=4,start=0s,over=2m",
            "--compare",
            "none",
        ])
        .current_dir(&scratch.0)
        .env("MDS_REPORT_DIR", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(three.status.code(), Some(0), "{}", text(&three.stderr));
    assert!(
        elsewhere.join("mds-ramp-run.html").exists(),
        "{}",
        text(&three.stdout)
    );

    // A current directory that cannot take the report (/proc refuses new files even to
    // root): the results still print, the report goes to the temporary directory and the
    // output says where.
    if cfg!(target_os = "linux") {
        let four = simulate_in(
            std::path::Path::new("/proc"),
            &["--no-progress", "--until", "2m", "--compare", "none"],
        );
        assert_eq!(four.status.code(), Some(0), "{}", text(&four.stderr));
        let stdout = text(&four.stdout);
        let shown = std::env::temp_dir().join("mds-simulate/mds-azure-2023-conv-run.html");
        assert!(
            stdout.contains("SLO attainment")
                && stdout.contains(&format!("report: {}", shown.display())),
            "{stdout}"
        );
    }
}
