//! Named engine profiles: one model on one GPU shape under one engine version, for both engine
//! models, with the cold start its Pods take. `mds simulate` and `mds lab up` serve from them;
//! docs/simulator.md gives every constant's source.

use jiff::SignedDuration;

use crate::engine::EngineProfile;
use crate::engine::request::{CostModel, RequestProfile, SchedulerLimits};

/// A model served on a GPU shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub summary: &'static str,
    /// Calibrated against published measurements (`false`: extrapolated from a calibrated one).
    pub calibrated: bool,
    pub request: RequestProfile,
    /// The fluid model with the same capacities and unloaded latencies.
    pub fluid: EngineProfile,
    /// Mean cold start (admission to Ready) and its spread (uniform within ± this share).
    pub cold_start: SignedDuration,
    pub cold_start_spread: f64,
    /// GPUs one Pod holds.
    pub gpus_per_pod: u32,
    /// KV bytes per token, for the prefill-to-decode hand-off.
    pub kv_bytes_per_token: f64,
}

/// The profile a run uses unless told otherwise.
pub const DEFAULT_PROFILE: &str = "llama3-8b-h100-vllm";

/// Every named profile.
pub fn profiles() -> Vec<Profile> {
    let small = RequestProfile::llama3_8b_h100_vllm();
    let small_profile = Profile {
        name: "llama3-8b-h100-vllm",
        summary: "Llama-3-8B-Instruct, bf16, vLLM 0.8.5, one H100 PCIe (calibrated)",
        calibrated: true,
        request: small,
        fluid: EngineProfile {
            // 1 / prefill_token_seconds.
            prefill_tokens_per_second: 25_000.0,
            // A full batch of 256 at a 300-token context: 256 / (10.2 ms + 256 × 300 × 70 ns).
            decode_tokens_per_second: 16_000.0,
            max_running: 256.0,
            kv_cache_tokens: 384_000.0,
            base_ttft_seconds: 0.0102,
            base_itl_seconds: 0.0106,
        },
        cold_start: SignedDuration::from_secs(60),
        cold_start_spread: 0.2,
        gpus_per_pod: 1,
        kv_bytes_per_token: 131_072.0,
    };
    vec![
        small_profile,
        Profile {
            name: "llama3.1-8b-h100-vllm",
            summary: "Llama-3.1-8B-Instruct (128k context), vLLM, one H100 PCIe: the 8B \
                      calibration with a 128k context (long prompts extrapolated)",
            calibrated: false,
            request: RequestProfile {
                limits: SchedulerLimits {
                    max_model_len: 131_072,
                    ..small.limits
                },
                ..small
            },
            ..small_profile
        },
        Profile {
            name: "llama3-70b-h100x8-vllm",
            summary: "Llama-3-70B-Instruct, bf16, vLLM, eight H100 SXM at TP8 (extrapolated)",
            calibrated: false,
            request: RequestProfile {
                limits: SchedulerLimits {
                    kv_blocks: 79_000,
                    ..SchedulerLimits::default()
                },
                cost: CostModel {
                    // 17.5 GB of weights per GPU at 3.35 TB/s, plus tensor-parallel all-reduces.
                    step_overhead_seconds: 0.0110,
                    // 140 GFLOP per token over 8 × ~400 effective TFLOPS.
                    prefill_token_seconds: 4.4e-5,
                    decode_sequence_seconds: 0.0,
                    // 320 KiB per token split over 8 GPUs at ~3.1 TB/s.
                    kv_read_token_seconds: 1.3e-8,
                },
            },
            fluid: EngineProfile {
                prefill_tokens_per_second: 22_700.0,
                decode_tokens_per_second: 17_000.0,
                max_running: 256.0,
                kv_cache_tokens: 1_264_000.0,
                base_ttft_seconds: 0.011,
                base_itl_seconds: 0.0115,
            },
            cold_start: SignedDuration::from_secs(215),
            cold_start_spread: 0.2,
            gpus_per_pod: 8,
            kv_bytes_per_token: 327_680.0,
        },
    ]
}

/// The profile of that name.
pub fn profile(name: &str) -> Result<Profile, String> {
    profiles()
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = profiles().iter().map(|p| p.name).collect();
            format!("no engine profile {name:?}; known: {}", known.join(", "))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_profile_is_valid_and_found_by_name() {
        for p in super::profiles() {
            p.request.validate().unwrap();
            p.fluid.validate().unwrap();
            assert_eq!(super::profile(p.name).unwrap(), p);
        }
        assert!(
            super::profile("gpt-9")
                .unwrap_err()
                .contains("llama3-8b-h100-vllm")
        );
    }
}
