//! The traces bundled in `data/traces` are the upstream files as they are, and the readers take
//! every row of them.

use mds_sim::Trace;

fn bundled(name: &str) -> String {
    let path = format!("{}/../../data/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_azure_traces_are_unmodified_and_read_in_full() {
    for (name, rows, minutes) in [
        ("azure-2023-conv.csv", 19_366, 58.4),
        ("azure-2023-code.csv", 8_819, 57.3),
    ] {
        let text = bundled(name);
        assert!(
            text.contains("\r\n"),
            "{name}: upstream CRLF line endings kept"
        );
        assert!(
            !text.ends_with('\n'),
            "{name}: no newline after the last row, as upstream"
        );
        let trace = Trace::parse_azure_csv(&text).unwrap();
        assert_eq!(trace.requests.len(), rows, "{name}");
        let span = trace.duration_seconds() / 60.0;
        assert!((span - minutes).abs() < 0.1, "{name}: {span} min");
    }
}

#[test]
fn the_mooncake_trace_is_read_in_full_with_its_prefix_hits() {
    let trace = Trace::parse_mooncake_jsonl(&bundled("mooncake-synthetic.jsonl")).unwrap();
    assert_eq!(trace.requests.len(), 3_993);
    let prompt: u64 = trace
        .requests
        .iter()
        .map(|r| u64::from(r.prompt_tokens))
        .sum();
    let hits: u64 = trace
        .requests
        .iter()
        .map(|r| u64::from(r.prefix_hit_tokens))
        .sum();
    // An unlimited cache serves about 65 % of the prompt tokens.
    let share = hits as f64 / prompt as f64;
    assert!((0.6..0.7).contains(&share), "{share}");
}
