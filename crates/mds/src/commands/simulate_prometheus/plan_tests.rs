//! The tests of `plan`: the series preferred and their queries.

use super::*;
use crate::commands::simulate_prometheus::discovery::discovery_selector;
use crate::commands::simulate_prometheus::tests::matchers;

#[test]
fn the_plan_prefers_histograms_and_hit_counters_and_names_what_is_missing() {
    let group = Group {
        engine: Engine::Vllm,
        model: "m".into(),
        namespace: String::new(),
    };
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let full = names(&[
        "vllm:request_success_total",
        "vllm:request_prompt_tokens_sum",
        "vllm:request_prompt_tokens_count",
        "vllm:request_generation_tokens_sum",
        "vllm:request_generation_tokens_count",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
    ]);
    let plan = Plan::pick(Engine::Vllm, &full, &group).unwrap();
    assert!(matches!(plan.prompt, Mean::Histogram { .. }));
    let queries = plan.queries(&matchers("model_name=m"), 60);
    assert_eq!(
        queries[0].1,
        r#"sum(increase(vllm:request_success_total{model_name="m"}[60s]))"#
    );
    assert_eq!(
        queries[1].1,
        r#"sum(resets(vllm:request_success_total{model_name="m"}[60s]))"#
    );
    assert_eq!(queries.len(), 8);
    // Counters per request when the histograms are missing; no hits: none.
    let counters = names(&[
        "vllm:request_success_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    ]);
    let plan = Plan::pick(Engine::Vllm, &counters, &group).unwrap();
    assert_eq!(plan.prompt, Mean::PerRequest("vllm:prompt_tokens_total"));
    assert!(plan.hits.is_none());
    assert!(plan.text().contains("prefix hits none exported"));
    let err = Plan::pick(Engine::Vllm, &names(&["vllm:prompt_tokens_total"]), &group).unwrap_err();
    assert!(
        err.contains("have no request counter: looked for vllm:request_success_total"),
        "{err}"
    );
    // SGLang: hits by mode, the selector's matchers kept.
    let sglang = names(&[
        "sglang:num_requests_total",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:prefill_effective_tokens_total",
        "sglang:cached_tokens_total",
    ]);
    let plan = Plan::pick(Engine::Sglang, &sglang, &group).unwrap();
    let queries = plan.queries(&matchers("model_name=m"), 600);
    let hits = queries.iter().find(|(k, _)| *k == Key::Hits).unwrap();
    assert_eq!(
        hits.1,
        r#"sum(increase(sglang:prefill_effective_tokens_total{model_name="m",mode=~"device_hit|host_hit|storage_hit"}[600s]))"#
    );
    let gauge = names(&[
        "sglang:num_requests_total",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:cache_hit_rate",
    ]);
    let plan = Plan::pick(Engine::Sglang, &gauge, &group).unwrap();
    assert_eq!(plan.hits, Some(Share::Gauge("sglang:cache_hit_rate")));
    // The discovery selector holds every name and the user's matchers.
    let selector = discovery_selector(&matchers("namespace=prod"));
    assert!(
        selector.starts_with("{__name__=~\"sglang:cache_hit_rate|"),
        "{selector}"
    );
    assert!(selector.ends_with(",namespace=\"prod\"}"), "{selector}");
}
