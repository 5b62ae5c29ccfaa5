//! The tests of `discovery`: the series found grouped, and the refusals that list them.

use super::*;
use crate::commands::simulate_prometheus::selector::parse_matchers;
use crate::commands::simulate_prometheus::tests::{matchers, range_of};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn vllm(name: &str, model: &str, ns: &str) -> Labels {
    labels(&[
        ("__name__", name),
        ("model_name", model),
        ("namespace", ns),
        ("pod", "p-0"),
    ])
}

#[test]
fn several_models_and_no_series_are_refused_with_what_exists() {
    let found = [
        vllm("vllm:request_success_total", "a", "prod"),
        vllm("vllm:prompt_tokens_total", "a", "prod"),
        vllm("vllm:request_success_total", "b", "prod"),
        vllm("vllm:request_success_total", "a", "dev"),
    ];
    let Discovery::Several(groups) = discover(&found) else {
        panic!("several");
    };
    assert_eq!(groups.len(), 3);
    let text = several_text(&matchers("job=x"), &range_of(10), &groups);
    assert!(
        text.starts_with("--match '{job=\"x\"}': the engine series of 3 deployments match"),
        "{text}"
    );
    assert!(
        text.contains(r#"model_name="a",namespace="dev" (vLLM, 1 series)"#),
        "{text}"
    );
    assert!(
        text.contains(r#"model_name="a",namespace="prod" (vLLM, 2 series)"#),
        "{text}"
    );
    assert!(
        text.contains("--match 'model_name=a,namespace=dev'"),
        "{text}"
    );
    // vLLM and SGLang under the same labels.
    let both = [
        vllm("vllm:request_success_total", "a", "prod"),
        vllm("sglang:num_requests_total", "a", "prod"),
    ];
    let Discovery::Several(groups) = discover(&both) else {
        panic!("several");
    };
    assert!(several_text(&[], &range_of(1), &groups).contains("tells them apart"));

    // Series without the labels: the suggestion still parses.
    let bare = [
        labels(&[("__name__", "vllm:request_success_total")]),
        vllm("vllm:request_success_total", "a", "prod"),
    ];
    let Discovery::Several(groups) = discover(&bare) else {
        panic!("several");
    };
    let text = several_text(&[], &range_of(1), &groups);
    assert!(text.contains("--match 'model_name=\"\"'"), "{text}");
    assert!(parse_matchers("model_name=\"\"").is_ok());

    assert_eq!(discover(&[]), Discovery::Nothing);
    let text = nothing_text(
        &matchers("model_name=c,deployment=x"),
        &range_of(10),
        &found,
    );
    assert!(text.contains("looked for sglang:cache_hit_rate"), "{text}");
    assert!(
        text.contains(r#"this Prometheus has them for model_name="a",namespace="dev" (vLLM)"#),
        "{text}"
    );
    assert!(
        text.contains(
            "no such series has the label deployment: their labels are model_name, namespace, pod"
        ),
        "{text}"
    );
    let text = nothing_text(&[], &range_of(10), &[]);
    assert!(
        text.contains("has none of these series in that range"),
        "{text}"
    );
}
