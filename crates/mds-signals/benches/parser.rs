//! Parser throughput on a 200 KB vLLM-like page (issue: at least 300 MB/s in release).
//!
//! Run: `cargo bench -p mds-signals --bench parser`. Prints MB/s for the parser alone and for
//! parser + vLLM adapter, as the median of several timed rounds.

use std::hint::black_box;
use std::time::Instant;

use mds_signals::engine::{EngineKind, read};
use mds_signals::exposition::parse;

/// A vLLM 0.10-style page with `engines` data-parallel engines, grown to about `target` bytes
/// by adding more engines (each engine adds its gauges, counters and full histograms).
fn vllm_like_page(target: usize) -> String {
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vllm-0.10.2-dp2-a.txt"
    ))
    .expect("fixture");
    let mut page = String::new();
    let mut copy = 0;
    while page.len() < target {
        // Each copy stands for two more engines: distinct engine labels, same layout.
        let renamed = template
            .replace("engine=\"0\"", &format!("engine=\"{}\"", copy * 2))
            .replace("engine=\"1\"", &format!("engine=\"{}\"", copy * 2 + 1));
        page.push_str(&renamed);
        copy += 1;
    }
    page
}

/// (median, best) MB/s over `rounds` timed rounds of `iterations` calls. The best round is the
/// least disturbed by other tenants of a shared machine; both are reported.
fn mb_per_s(bytes: usize, rounds: usize, iterations: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut rates: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            let seconds = start.elapsed().as_secs_f64();
            (bytes * iterations) as f64 / seconds / 1e6
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    (rates[rates.len() / 2], rates[rates.len() - 1])
}

fn main() {
    let page = vllm_like_page(200 * 1024);
    let bytes = page.len();
    let samples = parse(&page).samples.len();
    if let Some(mode) = std::env::var_os("MDS_BENCH_PROFILE") {
        // A short run for `valgrind --tool=callgrind`, which counts instructions:
        // MDS_BENCH_PROFILE=parse parses 20 pages, any other value also runs the adapter.
        for _ in 0..20 {
            if mode == "parse" {
                black_box(parse(black_box(&page)));
            } else {
                black_box(read(EngineKind::Vllm, &parse(black_box(&page))));
            }
        }
        return;
    }
    // Warm up.
    for _ in 0..50 {
        black_box(parse(black_box(&page)));
    }
    let parse_rate = mb_per_s(bytes, 21, 100, || {
        black_box(parse(black_box(&page)));
    });
    let read_rate = mb_per_s(bytes, 7, 30, || {
        black_box(read(EngineKind::Vllm, &parse(black_box(&page))));
    });
    println!("page: {bytes} bytes, {samples} samples");
    println!(
        "parse:                 median {:5.0} MB/s, best {:5.0} MB/s (21 rounds x 100 pages)",
        parse_rate.0, parse_rate.1
    );
    println!(
        "parse + vLLM adapter:  median {:5.0} MB/s, best {:5.0} MB/s (7 rounds x 30 pages)",
        read_rate.0, read_rate.1
    );
}
