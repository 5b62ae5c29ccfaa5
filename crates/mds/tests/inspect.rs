//! `mds inspect-metrics` as a user runs it.

mod common;

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
