//! Parser and adapter throughput on engine pages of about 200 KB (issue 3: parser at least
//! 300 MB/s; issue 11: parse plus vLLM adapter at least 500 MB/s, in release).
//!
//! Run: `cargo bench -p mds-signals --bench parser`. Prints MB/s as the median and the best of
//! several timed rounds. `MDS_BENCH_PROFILE=<case>` instead runs one case on 20 pages for
//! `valgrind --tool=callgrind --toggle-collect=parser::profile`, which counts instructions.

use std::hint::black_box;
use std::time::Instant;

use mds_signals::engine::{EngineKind, read, read_text};
use mds_signals::exposition::parse;

#[path = "support/pages.rs"]
mod pages;

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

/// What a case measures on a page.
#[derive(Clone, Copy)]
enum Work {
    /// The parser alone.
    Parse,
    /// The scaler's path: parse the families the adapter reads, read them, no notes.
    Scaler(EngineKind),
    /// `mds inspect-metrics`' path: parse everything, read with notes.
    Inspect(EngineKind),
}

fn run(work: Work, page: &str) {
    match work {
        Work::Parse => {
            black_box(parse(black_box(page)));
        }
        Work::Scaler(engine) => {
            black_box(read_text(engine, black_box(page)));
        }
        Work::Inspect(engine) => {
            black_box(read(engine, &parse(black_box(page))));
        }
    }
}

#[inline(never)]
fn profile(work: Work, page: &str) {
    for _ in 0..20 {
        run(work, page);
    }
}

fn main() {
    let vllm = pages::vllm_page(7);
    let fixture = pages::fixture_page(200 * 1024);
    let sglang = pages::sglang_page();
    let cases = [
        ("parse", "vLLM 0.10 page", Work::Parse, &vllm),
        (
            "vllm",
            "vLLM 0.10 page",
            Work::Scaler(EngineKind::Vllm),
            &vllm,
        ),
        (
            "vllm-notes",
            "vLLM 0.10 page",
            Work::Inspect(EngineKind::Vllm),
            &vllm,
        ),
        ("fixture-parse", "fixture page", Work::Parse, &fixture),
        (
            "fixture",
            "fixture page",
            Work::Scaler(EngineKind::Vllm),
            &fixture,
        ),
        (
            "fixture-notes",
            "fixture page",
            Work::Inspect(EngineKind::Vllm),
            &fixture,
        ),
        (
            "sglang",
            "SGLang 0.5 page",
            Work::Scaler(EngineKind::Sglang),
            &sglang,
        ),
        (
            "sglang-notes",
            "SGLang 0.5 page",
            Work::Inspect(EngineKind::Sglang),
            &sglang,
        ),
    ];
    if let Some(mode) = std::env::var_os("MDS_BENCH_PROFILE") {
        let (_, _, work, page) = cases
            .iter()
            .find(|case| mode == case.0)
            .unwrap_or_else(|| panic!("MDS_BENCH_PROFILE is one of the case names"));
        profile(*work, page);
        return;
    }
    for (name, page) in [
        ("vLLM 0.10 page", &vllm),
        ("fixture page", &fixture),
        ("SGLang 0.5 page", &sglang),
    ] {
        let samples = parse(page).samples.len();
        println!("{name}: {} bytes, {samples} samples", page.len());
    }
    for (case, page_name, work, page) in cases {
        // Warm up, then about 0.5 s per case whatever the page size.
        for _ in 0..20 {
            run(work, page);
        }
        let start = Instant::now();
        run(work, page);
        let once = start.elapsed().as_secs_f64().max(1e-6);
        let iterations = ((0.025 / once) as usize).clamp(5, 1000);
        let (median, best) = mb_per_s(page.len(), 21, iterations, || run(work, page));
        println!(
            "{case:<14} {page_name:<16} median {median:5.0} MB/s, best {best:5.0} MB/s (21 rounds x {iterations})"
        );
    }
}
