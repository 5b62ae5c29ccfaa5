//! The published measurements the request-level profiles are fitted to and checked against,
//! each with its source, and the runs that reproduce them on the model. docs/simulator.md
//! ("Calibration") tabulates them with the model's error on each.
//!
//! Every source ran vLLM on one H100 serving a Llama-3 8B (bf16 or fp16, the same speed):
//!
//! - **IOG**: IOG-Foundation/llm-inference-benchmarks, `results/vllm_200prompts{1,4,8,16,32}qps_
//!   Meta-Llama-3-8B-Instruct_sharegpt_1xNVIDIA-H100-PCIe.json` (vLLM 0.8.5, H100 PCIe,
//!   `--dtype float16`): 200 ShareGPT requests (205.8 prompt, about 202 output tokens) with
//!   Poisson arrivals. Short prompts, up to about 100 running.
//! - **Argonne**: argonne-lcf/LLM-Inference-Bench, `Plots/All_results.csv` and
//!   `Plots/Fig_21/all_results_TTFT.csv` (vLLM of mid-2024, `benchmark_latency.py`, fp16,
//!   Meta-Llama-3-8B): one static batch of `B` random prompts of `L` tokens generating `L`
//!   tokens each; the figure is the batch's end-to-end latency. Long prompts under
//!   concurrency. The GPU is named only "H100"; it is the SXM: the batch of one's 7.8 ms per
//!   token is below the PCIe card's floor of 8.0 ms (16 GB of weights at 2.0 TB/s).
//! - **vLLM #18566**: github.com/vllm-project/vllm/pull/18566 (vLLM 0.9.0 development, V1
//!   defaults, Llama-3.1-8B-Instruct): 1,000 ShareGPT requests sent at once (229.7 prompt,
//!   203.1 output tokens on average). Hundreds running. The pull request does not name its
//!   GPU; it is taken as an H100 SXM, the shape whose floors its figures fit (the weakest
//!   attribution of the three).

use crate::engine::request::{FinishedRequest, RequestEngine, RequestProfile};
use crate::hardware::{Gpu, H100_PCIE, H100_SXM};
use crate::rng::Rng;

/// How a published run offered its requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offered {
    /// `count` requests with Poisson arrivals at `qps`.
    Poisson { qps: f64, count: u64 },
    /// `count` requests at once.
    Burst { count: u64 },
    /// `concurrency` clients, each sending its next request the moment its last one
    /// finishes, `count` requests in all (a closed-loop benchmark's `--concurrency`).
    Closed { concurrency: u64, count: u64 },
}

/// Which statistic of the requests' TTFT and TPOT a source published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statistic {
    Mean,
    Median,
    /// The slowest request's: a static batch's latency, which ends when its last request
    /// has its token.
    Slowest,
}

/// What a run measured (the point's statistic over its requests; `None`: not published or
/// not used).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measured {
    pub ttft_seconds: Option<f64>,
    pub tpot_seconds: Option<f64>,
    /// Output tokens over the time from the first arrival to the last completion.
    pub output_tokens_per_second: Option<f64>,
}

/// vLLM's V1 engine (0.8 and later).
pub const VLLM_V1: &str = "vLLM V1";
/// vLLM's V0 engine of mid-2024, which the Argonne runs used: more host time per step
/// (Python scheduling and input preparation) than V1, the same kernels' efficiencies.
pub const VLLM_V0: &str = "vLLM V0";

/// The V0 engine's host seconds per step, fitted to the Argonne batches with the GPU
/// efficiencies shared.
pub const ARGONNE_STEP_HOST_SECONDS: f64 = 0.003;

/// One published run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub source: &'static str,
    pub engine: &'static str,
    pub gpu: Gpu,
    pub offered: Offered,
    pub prompt_tokens: u64,
    /// The mean output; each request's is drawn around it when `spread_outputs`.
    pub output_tokens: u64,
    /// ShareGPT's outputs spread about exponentially (vLLM's benchmark keeps those of at
    /// least 4 tokens): a short run's last completion is its longest output's, so its
    /// throughput depends on the spread. Drawn so here, seeded; random-token batches
    /// generate exactly their length.
    pub spread_outputs: bool,
    pub statistic: Statistic,
    pub published: Measured,
    /// Kept out of the fit: its error is the model's held-out error.
    pub held_out: bool,
}

const fn iog(qps: f64, ttft: f64, tpot: f64, throughput: Option<f64>, held_out: bool) -> Point {
    Point {
        source: "IOG",
        engine: VLLM_V1,
        gpu: H100_PCIE,
        offered: Offered::Poisson { qps, count: 200 },
        prompt_tokens: 206,
        output_tokens: 202,
        spread_outputs: true,
        statistic: Statistic::Mean,
        published: Measured {
            ttft_seconds: Some(ttft),
            tpot_seconds: Some(tpot),
            output_tokens_per_second: throughput,
        },
        held_out,
    }
}

/// An Argonne batch of `batch` prompts of `length` tokens each generating `length` tokens,
/// its published latency in seconds (as output tokens per second).
const fn argonne(length: u64, batch: u64, latency: f64) -> Point {
    Point {
        source: "Argonne",
        engine: VLLM_V0,
        gpu: H100_SXM,
        offered: Offered::Burst { count: batch },
        prompt_tokens: length,
        output_tokens: length,
        spread_outputs: false,
        statistic: Statistic::Mean,
        published: Measured {
            ttft_seconds: None,
            tpot_seconds: None,
            output_tokens_per_second: Some((batch * length) as f64 / latency),
        },
        held_out: false,
    }
}

/// Every published point, fitted and held out.
pub const POINTS: [Point; 12] = [
    // IOG mean TTFT, mean TPOT, output tokens/s. The 1 QPS throughput is the arrival rate
    // and says nothing about the engine; 4 and 8 QPS are held out.
    iog(1.0, 0.0206, 0.01064, None, false),
    iog(4.0, 0.02165, 0.01098, Some(773.3), true),
    iog(8.0, 0.02312, 0.01169, Some(1329.2), true),
    iog(16.0, 0.02475, 0.01221, Some(2052.4), false),
    iog(32.0, 0.04044, 0.01626, Some(2692.8), false),
    // Argonne: (L, B, seconds) for the batches of at least 16 prompts of 512 tokens or more.
    argonne(512, 16, 5.0432),
    argonne(1024, 16, 11.0247),
    argonne(1024, 64, 18.8087),
    argonne(2048, 16, 25.5299),
    argonne(2048, 32, 31.6744),
    argonne(2048, 64, 48.2152),
    // vLLM #18566: 1,000 ShareGPT requests at once; mean TTFT 9,626 ms, mean TPOT 77.86 ms,
    // 6,582.87 output tokens/s over 30.85 s.
    Point {
        source: "vLLM #18566",
        engine: VLLM_V1,
        gpu: H100_SXM,
        offered: Offered::Burst { count: 1000 },
        prompt_tokens: 230,
        output_tokens: 203,
        spread_outputs: true,
        statistic: Statistic::Mean,
        published: Measured {
            ttft_seconds: Some(9.626),
            tpot_seconds: Some(0.07786),
            output_tokens_per_second: Some(6582.87),
        },
        held_out: true,
    },
];

/// Argonne's 16 prompts of 1,024 tokens prefilled (one output token each) in 0.4257 s
/// (`Plots/Fig_21/all_results_TTFT.csv`): a held-out check of prefill under a burst. The
/// figure is `benchmark_latency.py`'s: the batch's latency, so its slowest request's TTFT.
pub const ARGONNE_PREFILL: Point = Point {
    source: "Argonne TTFT",
    engine: VLLM_V0,
    gpu: H100_SXM,
    offered: Offered::Burst { count: 16 },
    prompt_tokens: 1024,
    output_tokens: 1,
    spread_outputs: false,
    statistic: Statistic::Slowest,
    published: Measured {
        ttft_seconds: Some(0.4257),
        tpot_seconds: None,
        output_tokens_per_second: None,
    },
    held_out: true,
};

/// SGLang's own runs (sgl-project/sglang `benchmark/benchmark_vllm_060/README.md`, SGLang
/// 0.3.0, Llama-3.1-8B-Instruct, one A100 80 GB, ShareGPT through `sglang.bench_serving`:
/// 224 prompt and 189 output tokens on average, as issue #2097's run of the same command
/// counts them; medians). No published SGLang run on an H100 was found: these check the
/// SGLang profile's costs carried to the A100 by the conversion rule, across an architecture
/// (a rough check, not a fit).
pub const SGLANG_POINTS: [Point; 3] = [
    sglang(
        Offered::Poisson {
            qps: 4.0,
            count: 1200,
        },
        Some(0.03198),
        Some(0.01317),
        None,
    ),
    sglang(
        Offered::Poisson {
            qps: 8.0,
            count: 2400,
        },
        Some(0.03568),
        Some(0.01785),
        None,
    ),
    // 5,000 requests at once: 22.03 requests/s, 4,281.51 output tokens/s.
    sglang(Offered::Burst { count: 5000 }, None, None, Some(4281.51)),
];

const fn sglang(
    offered: Offered,
    ttft: Option<f64>,
    tpot: Option<f64>,
    throughput: Option<f64>,
) -> Point {
    Point {
        source: "SGLang 0.3.0",
        engine: "SGLang",
        gpu: crate::hardware::A100_SXM,
        offered,
        prompt_tokens: 224,
        output_tokens: 189,
        spread_outputs: true,
        statistic: Statistic::Median,
        published: Measured {
            ttft_seconds: ttft,
            tpot_seconds: tpot,
            output_tokens_per_second: throughput,
        },
        held_out: true,
    }
}

/// Seeds a Poisson point's mean is taken over.
const SEEDS: u64 = 10;

/// What the model measures on `point`'s run with `profile`, as the source measured it.
pub fn reproduce(point: &Point, profile: RequestProfile) -> Measured {
    let runs: Vec<Vec<FinishedRequest>> = match point.offered {
        Offered::Poisson { qps, count } => (0..SEEDS)
            .map(|seed| {
                let mut rng = Rng::new(seed * 7919 + 3);
                let mut at = 0.0;
                let arrivals = (0..count).map(|_| {
                    at += rng.exponential(qps);
                    at
                });
                run(profile, point, arrivals.collect(), seed)
            })
            .collect(),
        Offered::Burst { count } => vec![run(profile, point, vec![0.0; count as usize], 1)],
        Offered::Closed { concurrency, count } => {
            return closed_loop(profile, point, concurrency, count);
        }
    };
    let statistic = |mut values: Vec<f64>| match point.statistic {
        Statistic::Mean => mean(values),
        Statistic::Median => {
            values.sort_by(f64::total_cmp);
            values.get(values.len() / 2).copied()
        }
        Statistic::Slowest => values.into_iter().reduce(f64::max),
    };
    let all = || runs.iter().flatten();
    Measured {
        ttft_seconds: statistic(all().filter_map(|r| r.ttft_seconds).collect()),
        tpot_seconds: statistic(all().filter_map(|r| r.tpot_seconds).collect()),
        output_tokens_per_second: mean(
            runs.iter()
                .map(|done| {
                    let end = done.iter().map(|r| r.finish).fold(0.0, f64::max);
                    let output: u64 = done.iter().map(|r| r.output_tokens).sum();
                    output as f64 / end.max(1e-9)
                })
                .collect(),
        ),
    }
}

/// A closed-loop run: the clients start together and, their requests being alike, stay in
/// step; the first round is the ramp and is left out, as a steady-state figure means.
fn closed_loop(profile: RequestProfile, point: &Point, concurrency: u64, count: u64) -> Measured {
    let done = closed_loop_run(profile, point, concurrency, count);
    let steady: Vec<&FinishedRequest> = done.iter().filter(|r| r.id >= concurrency).collect();
    let latency = mean(steady.iter().map(|r| r.finish - r.arrival).collect());
    Measured {
        ttft_seconds: mean(steady.iter().filter_map(|r| r.ttft_seconds).collect()),
        tpot_seconds: mean(steady.iter().filter_map(|r| r.tpot_seconds).collect()),
        // Output tokens/s while every client is busy: Little's law over the steady requests.
        output_tokens_per_second: latency
            .filter(|l| *l > 0.0)
            .map(|l| concurrency as f64 * point.output_tokens as f64 / l),
    }
}

fn mean(values: Vec<f64>) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// `concurrency` clients starting at 0, each resubmitting the moment its request finishes,
/// `count` requests in all.
fn closed_loop_run(
    profile: RequestProfile,
    point: &Point,
    concurrency: u64,
    count: u64,
) -> Vec<FinishedRequest> {
    let Ok(mut engine) = RequestEngine::new(profile) else {
        return Vec::new();
    };
    let (prompt, output) = (point.prompt_tokens, point.output_tokens);
    let first = concurrency.min(count);
    for id in 0..first {
        engine.submit(id, 0.0, prompt, output, None);
    }
    let mut sent = first;
    let mut done = Vec::new();
    while engine.step().is_some() {
        for finished in engine.take_finished() {
            if sent < count {
                engine.submit(sent, engine.clock(), prompt, output, None);
                sent += 1;
            }
            done.push(finished);
        }
    }
    done
}

fn run(
    profile: RequestProfile,
    point: &Point,
    arrivals: Vec<f64>,
    seed: u64,
) -> Vec<FinishedRequest> {
    let Ok(mut engine) = RequestEngine::new(profile) else {
        return Vec::new();
    };
    let mut lengths = Rng::new(seed ^ 0x5eed);
    let mean = point.output_tokens as f64;
    let last = arrivals.last().copied().unwrap_or(0.0);
    for (id, at) in arrivals.into_iter().enumerate() {
        let output = if point.spread_outputs {
            // Exponential above the floor of 4 with the published mean, and the prompt and
            // output within 2,048 tokens as the benchmark's sampler keeps them.
            (4 + lengths.exponential(1.0 / (mean - 4.0)).round() as u64)
                .min(2048u64.saturating_sub(point.prompt_tokens).max(4))
        } else {
            point.output_tokens
        };
        engine.submit(id as u64, at, point.prompt_tokens, output, None);
    }
    engine.advance_to(last + 3600.0);
    engine.take_finished()
}

/// The model's relative error on each published figure of `point`: (TTFT, TPOT, output
/// tokens/s), `None` where nothing was published.
pub fn errors(point: &Point, profile: RequestProfile) -> [Option<f64>; 3] {
    let model = reproduce(point, profile);
    let p = &point.published;
    let error = |m: Option<f64>, p: Option<f64>| Some(m? / p? - 1.0);
    [
        error(model.ttft_seconds, p.ttft_seconds),
        error(model.tpot_seconds, p.tpot_seconds),
        error(model.output_tokens_per_second, p.output_tokens_per_second),
    ]
}
