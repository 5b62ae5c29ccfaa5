//! `mds inspect-metrics` as a user runs it.

use crate::common;

use common::{mds, text};

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

#[test]
fn inspect_metrics_names_the_engine_a_page_belongs_to() {
    let sglang = format!("{FIXTURES}/sglang-0.5.18-dpattn-a.txt");
    let out = mds(&["inspect-metrics", "--engine", "vllm", &sglang], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("mds: error: crates/mds-signals/tests/fixtures/sglang-0.5.18-dpattn-a.txt: this page holds SGLang series (sglang:…), not vLLM ones; run with --engine sglang"),
        "{stderr}"
    );
    let vllm = format!("{FIXTURES}/vllm-0.12.0-a.txt");
    let out = mds(&["inspect-metrics", "--engine", "sglang", &vllm], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("run with --engine vllm"),
        "{}",
        text(&out.stderr)
    );

    let out = mds(
        &["inspect-metrics", "--engine", "vllm", "-"],
        Some("process_cpu_seconds_total 5\ngo_goroutines 12\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("this page holds no vLLM or SGLang series (2 samples of other metrics, such as process_cpu_seconds_total)"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn inspect_metrics_takes_engine_names_as_the_target_spells_them() {
    for (engine, page) in [
        ("SGLang", "sglang-0.5.18-dpattn-a.txt"),
        ("vLLM", "vllm-0.12.0-a.txt"),
        ("VLLM", "vllm-0.12.0-a.txt"),
    ] {
        let page = format!("{FIXTURES}/{page}");
        let out = mds(
            &[
                "inspect-metrics",
                "--engine",
                engine,
                "--role-kind",
                "Decode",
                &page,
            ],
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{engine}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn inspect_metrics_says_why_each_reading_is_missing_or_ignored() {
    let page = "vllm:num_requests_running -3\nvllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc 85\nvllm:prompt_tokens_total 5\n";
    let out = mds(&["inspect-metrics", "--engine", "vllm", "-"], Some(page));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "  running requests       missing: every value of vllm:num_requests_running is negative or not a number",
        "  KV cache usage         missing: every value of vllm:kv_cache_usage_perc lies outside 0 to 1",
        "  generation tokens missing: vllm:generation_tokens_total is not on the page",
        "  TTFT histogram  missing: vllm:time_to_first_token_seconds is not on the page",
        "  ignored  vllm:num_requests_running                     every value of",
        "  ignored  vllm:kv_cache_usage_perc                      every value of",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    for line in stdout.lines() {
        let line = line.trim_end();
        assert!(!line.ends_with("missing"), "a bare 'missing': {line}");
        assert!(!line.ends_with("ignored"), "a bare 'ignored': {line}");
    }
    let out = mds(
        &["inspect-metrics", "--engine", "vllm", "-", "--json"],
        Some(page),
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        value["sample"]["missing"]["running requests"]
            .as_str()
            .unwrap()
            .contains("negative"),
        "{value}"
    );

    // Two pages: window rows that have no value say why too.
    let scratch = common::Scratch::new("inspect-why");
    let a = scratch.file("a.txt", "vllm:num_requests_running 1\nvllm:generation_tokens_total 5\nvllm:time_to_first_token_seconds_count 3\nvllm:time_to_first_token_seconds_sum 1\n");
    let b = scratch.file("b.txt", "vllm:num_requests_running 1\nvllm:generation_tokens_total 9\nvllm:time_to_first_token_seconds_count 3\nvllm:time_to_first_token_seconds_sum 1\n");
    let out = mds(
        &[
            "inspect-metrics",
            "--engine",
            "vllm",
            &a,
            &b,
            "--interval",
            "15",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    for line in [
        "  prompt tokens/s (cache-missed)  missing: vllm:prompt_tokens_total is not on the page",
        "  TTFT p95 (ms)                   missing: no request finished between the pages",
        "  waiting requests                missing: vllm:num_requests_waiting is not on the page",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    let out = mds(
        &[
            "inspect-metrics",
            "--engine",
            "vllm",
            &a,
            &b,
            "--interval",
            "15",
            "--json",
        ],
        None,
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        value["window"]["missing"]["promptTokensPerSecond"]
            .as_str()
            .unwrap()
            .contains("not on the page"),
        "{value}"
    );
}
