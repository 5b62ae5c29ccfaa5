//! The oracles catch what they are there for: each is shown an input it must refuse to pass
//! or must accept, so a target that checks nothing cannot go unnoticed.

use mds_fuzz::quantity::exact_nanos;

#[test]
fn the_exact_reading_of_a_quantity_agrees_with_the_known_values() {
    for (text, nanos) in [
        ("2k", 2_000_000_000_000),
        ("500m", 500_000_000),
        ("1.5Gi", 1_610_612_736_000_000_000),
        ("3e-2", 30_000_000),
        ("-0.1", -100_000_000),
        ("+7", 7_000_000_000),
        ("1n", 1),
        ("0e9999", 0),
    ] {
        assert_eq!(exact_nanos(text), Some(nanos), "{text}");
    }
    for text in ["", ".", "1.2.3", "1x", "1e", "0.1n", "1..2", "e3"] {
        assert_eq!(exact_nanos(text), None, "{text:?}");
    }
}

#[test]
fn the_quantity_target_passes_a_correct_pair_and_orders_it() {
    mds_fuzz::quantity::run(b"2k\n1999.999999999");
    mds_fuzz::quantity::run(b"1Ki\n1024");
}

#[test]
fn the_exposition_target_reads_a_real_page_both_ways() {
    let page = "# TYPE vllm:num_requests_running gauge\n\
                vllm:num_requests_running{model_name=\"m\"} 3\n\
                vllm:num_requests_waiting{model_name=\"m\"} 2\n\
                vllm:prompt_tokens_total{model_name=\"m\"} 1.5e3\n";
    mds_fuzz::exposition::run(page.as_bytes());
}
