use super::*;

fn no_files(_: &Path) -> Result<String, String> {
    Err("no such file".into())
}

fn profile(text: &str) -> LoadProfile {
    parse_load_profile(text, &no_files).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    parse_load_rule(text, &no_files).expect_err(text)
}

#[test]
fn constant_takes_defaults_for_the_request_shape() {
    let p = profile("constant:rps=5");
    let load = p.load_at(1000.0);
    assert_eq!(load, Load::new(5.0, 512.0, 128.0, 0.0).unwrap());
    let p = profile("constant:rps=2.5,prompt=1000,output=200,hit=0.3");
    assert_eq!(p.load_at(0.0), Load::new(2.5, 1000.0, 200.0, 0.3).unwrap());
}

#[test]
fn steps_hold_each_rate_until_the_next_time() {
    let p = profile("steps:0=2,90s=8,5m=4,prompt=100");
    assert_eq!(p.load_at(89.0).requests_per_second, 2.0);
    assert_eq!(p.load_at(90.0).requests_per_second, 8.0);
    assert_eq!(p.load_at(299.0).requests_per_second, 8.0);
    assert_eq!(p.load_at(10_000.0).requests_per_second, 4.0);
    assert_eq!(p.load_at(0.0).prompt_tokens, 100.0);
}

#[test]
fn a_ramp_holds_then_climbs_then_holds() {
    let p = profile("ramp:from=1,to=21,over=10m,after=1m");
    assert_eq!(p.load_at(30.0).requests_per_second, 1.0);
    assert_eq!(p.load_at(60.0 + 300.0).requests_per_second, 11.0);
    assert_eq!(p.load_at(3600.0).requests_per_second, 21.0);
}

#[test]
fn idle_offers_nothing() {
    assert_eq!(profile("idle").load_at(5.0), Load::IDLE);
}

#[test]
fn a_trace_is_read_and_binned() {
    let csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
               2023-11-16 18:00:00.0000000,100,10\n\
               2023-11-16 18:00:01.0000000,300,30\n\
               2023-11-16 18:00:05.0000000,200,20\n";
    let read = |path: &Path| {
        assert_eq!(path, Path::new("/data/trace.csv"));
        Ok(csv.to_string())
    };
    let p = parse_load_profile("trace:/data/trace.csv,bin=10s", &read).unwrap();
    let arrived = p.arrivals(0.0, 10.0);
    assert!((arrived.requests - 3.0).abs() < 1e-9, "{arrived:?}");
    assert!((arrived.prompt_tokens - 600.0).abs() < 1e-6, "{arrived:?}");
    let jsonl =
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 10, \"hash_ids\": [1, 2]}\n";
    let read = |_: &Path| Ok(jsonl.to_string());
    let p = parse_load_profile("trace:m.jsonl", &read).unwrap();
    assert!((p.arrivals(0.0, 100.0).requests - 1.0).abs() < 1e-9);
}

#[test]
fn a_target_prefix_aims_the_profile() {
    let rule = parse_load_rule("serving/llm=constant:rps=1", &no_files).unwrap();
    assert_eq!(rule.selector.namespace.as_deref(), Some("serving"));
    assert_eq!(rule.selector.name.as_deref(), Some("llm"));
    assert_eq!(rule.selector.role, None);
    assert!(rule.selector.matches("serving", "llm", "decode"));
    assert!(!rule.selector.matches("serving", "other", "decode"));
    let rule = parse_load_rule("serving/llm/decode=idle", &no_files).unwrap();
    assert_eq!(rule.selector.specificity(), 3);
    assert!(!rule.selector.matches("serving", "llm", "prefill"));
    let everywhere = parse_load_rule("constant:rps=1", &no_files).unwrap();
    assert_eq!(everywhere.selector, Selector::default());
    assert!(everywhere.selector.matches("a", "b", "c"));
}

#[test]
fn errors_name_the_bad_part() {
    let cases = [
        ("constant:rps=-1", "rps=-1: must be a number of at least 0"),
        ("constant:rps=fast", "rps=fast"),
        ("constant:prompt=10", "rps is required"),
        ("constant:rps=1,hit=1.5", "hit=1.5"),
        (
            "constant:rps=1,speed=3",
            "unknown key \"speed\"; constant takes rps",
        ),
        ("constant:rps", "\"rps\" is not key=value"),
        ("constant:rps=1,rps=2", "rps is given twice"),
        ("ramp:from=1,to=2,over=", "over has no value"),
        ("constant:", "no fields"),
        ("constant", "no fields"),
        ("burst:rps=1", "\"burst\" is not a profile kind"),
        ("steps:5m=2,1m=3", "1m=3: step times must increase"),
        ("steps:soon=2", "\"soon\" is neither a time"),
        ("steps:prompt=5", "no steps"),
        ("ramp:from=1,to=2", "over is required"),
        ("ramp:from=1,to=2,over=5x", "over=5x: not a duration"),
        ("ramp:from=1,to=2,over=0", "over must be longer than 0"),
        ("trace:", "no file"),
        ("trace:t.csv,loop=yes", "the only option of a trace is bin"),
        ("trace:t.csv", "t.csv: cannot read: no such file"),
        ("Serving/LLM=constant:rps=1", "target \"Serving/LLM\""),
        ("llm=constant:rps=1", "target \"llm\""),
        ("a/b/c/d=idle", "target \"a/b/c/d\""),
    ];
    for (text, expected) in cases {
        let message = error(text);
        assert!(
            message.contains(expected),
            "{text}: {message:?} does not say {expected:?}"
        );
    }
    // The profile is quoted whole, so the user sees which --load was wrong.
    assert!(error("constant:rps=x").starts_with("load profile \"constant:rps=x\": "));
}

#[test]
fn a_bad_trace_names_its_line() {
    let read = |_: &Path| Ok("TIMESTAMP,ContextTokens,GeneratedTokens\nnot,a,row\n".to_string());
    let message = parse_load_profile("trace:t.csv", &read).unwrap_err();
    assert!(message.contains("t.csv: line 2"), "{message}");
}
