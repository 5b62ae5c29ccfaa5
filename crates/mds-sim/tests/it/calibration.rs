//! The request-level profile against the published measurements (module
//! `mds_sim::calibration`), and every step against its physical floor.

use mds_sim::calibration::{self, ARGONNE_PREFILL, POINTS, Point};
use mds_sim::engine::request::{
    CostModel, RequestProfile, SchedulerLimits, StepWork, attention_pairs,
};
use mds_sim::hardware::{Efficiency, H100_PCIE, H100_SXM, LLAMA3_8B, Roofline, VLLM_HOPPER};

/// The 8B profile's limits and vLLM's efficiencies on the GPU the point ran on, with the
/// host time of the point's vLLM version.
fn profile_for(point: &Point, efficiency: &Efficiency) -> RequestProfile {
    profile_with(point, efficiency, calibration::ARGONNE_STEP_HOST_SECONDS)
}

fn profile_with(point: &Point, efficiency: &Efficiency, v0_host: f64) -> RequestProfile {
    let efficiency = Efficiency {
        step_host_seconds: if point.engine == calibration::VLLM_V0 {
            v0_host
        } else {
            efficiency.step_host_seconds
        },
        ..*efficiency
    };
    RequestProfile {
        limits: RequestProfile::llama3_8b_h100_vllm().limits,
        cost: Roofline {
            model: LLAMA3_8B,
            gpu: point.gpu,
        }
        .cost(&efficiency),
    }
}

fn describe(point: &Point) -> String {
    format!(
        "{} {:?} {}-in {}-out on {}",
        point.source, point.offered, point.prompt_tokens, point.output_tokens, point.gpu.name
    )
}

#[test]
fn the_fitted_points_are_within_tolerance_and_the_held_out_error_is_reported() {
    let mut held_out = Vec::new();
    for point in POINTS.iter().chain([&ARGONNE_PREFILL]) {
        let [ttft, tpot, throughput] = calibration::errors(point, profile_for(point, &VLLM_HOPPER));
        eprintln!(
            "{}: TTFT {ttft:+.3?} TPOT {tpot:+.3?} tok/s {throughput:+.3?}",
            describe(point)
        );
        if point.held_out {
            for (name, error) in [("TTFT", ttft), ("TPOT", tpot), ("tok/s", throughput)] {
                if let Some(error) = error {
                    held_out.push((format!("{} {name}", point.source), error));
                }
            }
            continue;
        }
        let within =
            |error: Option<f64>, tolerance: f64| error.is_none_or(|e| e.abs() <= tolerance);
        assert!(
            within(ttft, 0.25),
            "{}: TTFT off by {ttft:?}",
            describe(point)
        );
        assert!(
            within(tpot, 0.15),
            "{}: TPOT off by {tpot:?}",
            describe(point)
        );
        assert!(
            within(throughput, 0.15),
            "{}: throughput off by {throughput:?}",
            describe(point)
        );
    }
    // The held-out points are not tuned to; docs/simulator.md reports their error. A model
    // that misses them by a third is not a model of this engine. One figure is known to miss:
    // the 1,000-request burst's mean TTFT, which the model puts at about 40 % of the
    // published (it has no API server to take the burst in; see docs/simulator.md).
    assert!(held_out.len() >= 9);
    for (figure, error) in held_out {
        if figure == "vLLM #18566 TTFT" {
            assert!((-0.7..0.0).contains(&error), "{figure}: {error}");
        } else {
            assert!(error.abs() <= 0.2, "held out {figure}: {error}");
        }
    }
}

/// `cost`'s steps against `roofline`'s floors over a grid of batches (up to `most`, the
/// profile's `max_num_seqs`), contexts and chunks.
fn assert_above_floor(name: &str, cost: &CostModel, roofline: &Roofline, most: u64) {
    for batch in [1u64, 8, 32, 128, 256, 512, 1024, 2048]
        .into_iter()
        .filter(|b| *b <= most)
    {
        for context in [16u64, 256, 1024, 4096, 16_384, 131_072] {
            let decode = StepWork::decode(batch, batch * context);
            assert!(
                cost.step_seconds(&decode) >= roofline.floor_seconds(&decode),
                "{name}: decode of {batch} at {context}"
            );
        }
    }
    for chunk in [1u64, 64, 512, 2048, 8192] {
        for done in [0u64, 1024, 8192, 65_536, 122_880] {
            let prefill = StepWork::prefill_chunk(done, chunk);
            assert!(
                cost.step_seconds(&prefill) >= roofline.floor_seconds(&prefill),
                "{name}: chunk of {chunk} after {done}"
            );
            // A chunk beside a full decode batch.
            let mixed = StepWork {
                decode_sequences: 255,
                kv_tokens: prefill.kv_tokens + 255 * 2048,
                ..prefill
            };
            assert!(
                cost.step_seconds(&mixed) >= roofline.floor_seconds(&mixed),
                "{name}: chunk of {chunk} after {done} beside 255 decodes"
            );
        }
    }
}

#[test]
fn every_step_is_at_or_above_its_physical_floor() {
    // The fitted efficiencies on both H100 variants, and every profile built on a roofline.
    for gpu in [H100_PCIE, H100_SXM] {
        let roofline = Roofline {
            model: LLAMA3_8B,
            gpu,
        };
        assert_above_floor(gpu.name, &roofline.cost(&VLLM_HOPPER), &roofline, 2048);
    }
    let mut checked = 0;
    for p in mds_sim::profile::profiles() {
        if let Some(roofline) = &p.roofline {
            let most = p.request.limits.max_num_seqs as u64;
            assert_above_floor(p.name, &p.request.cost, roofline, most);
            checked += 1;
        }
    }
    assert!(checked >= 3, "the 8B profiles have rooflines");
}

#[test]
fn attention_makes_long_prompts_cost_more_per_token() {
    let cost = RequestProfile::llama3_8b_h100_vllm().cost;
    let per_token = |prompt: u64| cost.prefill_seconds(prompt, 0, 8192) / prompt as f64;
    // Linear in the prompt the cost per token would fall towards P as the overhead spreads;
    // with attention it rises again past a few thousand tokens.
    assert!(per_token(32_768) > per_token(8192));
    assert!(per_token(131_072) > 1.5 * per_token(8192));
    assert_eq!(attention_pairs(0, 4), 10);
    assert_eq!(attention_pairs(4, 2), 8 + 3);
}

#[test]
fn vllm_0_8_5_limits_on_an_80_gb_gpu() {
    let limits = RequestProfile::llama3_8b_h100_vllm().limits;
    assert_eq!(
        (limits.max_num_batched_tokens, limits.max_num_seqs),
        (8192, 1024)
    );
    assert_eq!(SchedulerLimits::default(), limits);
}

/// The fit: `cargo test -p mds-sim --release --test it calibration:: -- --ignored --nocapture`
/// prints the grid's best efficiencies by worst error over the fitted points.
#[test]
#[ignore = "the fit itself, run by hand"]
fn fit() {
    let mut best: Vec<(f64, Efficiency)> = Vec::new();
    let v0 = std::env::var("V0")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.003);
    for bandwidth in [0.8, 0.85, 0.9, 0.936] {
        for compute in [0.40, 0.45, 0.50, 0.55, 0.6] {
            for host in [0.0005, 0.001, 0.0016, 0.0025] {
                for decode in [0.0, 1e-5, 2e-5, 3e-5, 4e-5] {
                    let e = Efficiency {
                        bandwidth,
                        compute,
                        step_host_seconds: host,
                        decode_sequence_seconds: decode,
                    };
                    let worst = POINTS
                        .iter()
                        .filter(|p| !p.held_out)
                        .flat_map(|p| {
                            let [a, b, c] = calibration::errors(p, profile_with(p, &e, v0));
                            // TTFT's tolerance is wider: weigh it down to compare.
                            [a.map(|x| x * 0.6), b, c]
                        })
                        .flatten()
                        .fold(0.0, |w: f64, x| w.max(x.abs()));
                    best.push((worst, e));
                }
            }
        }
    }
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (worst, e) in best.iter().take(10) {
        println!("{worst:.3} {e:?}");
    }
    let e = best[0].1;
    for p in POINTS.iter().chain([&ARGONNE_PREFILL]) {
        println!(
            "{}: {:+.3?}",
            describe(p),
            calibration::errors(p, profile_with(p, &e, v0))
        );
    }
}

#[test]
fn the_sglang_profile_against_sglangs_own_runs() {
    let sglang = mds_sim::profile::profile("llama3.1-8b-h100-sglang").unwrap();
    for point in &calibration::SGLANG_POINTS {
        let profile = RequestProfile {
            limits: sglang.request.limits,
            cost: Roofline {
                model: LLAMA3_8B,
                gpu: point.gpu,
            }
            .cost(&mds_sim::hardware::SGLANG_HOPPER),
        };
        let [ttft, tpot, throughput] = calibration::errors(point, profile);
        eprintln!(
            "{}: TTFT {ttft:+.3?} TPOT {tpot:+.3?} tok/s {throughput:+.3?}",
            describe(point)
        );
        // Carried to an Ampere GPU and an older SGLang the model is optimistic on decode (TPOT
        // 23-32 % low, throughput 16 % high) and close on TTFT; docs/simulator.md says so.
        for error in [ttft, tpot, throughput].into_iter().flatten() {
            assert!(error.abs() <= 0.35, "{}: {error}", describe(point));
        }
    }
}
