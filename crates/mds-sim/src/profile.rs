//! Named engine profiles: one model on one GPU shape under one engine version, for both engine
//! models, with the cold start its Pods take. `mds simulate` and `mds lab up` serve from them;
//! docs/simulator.md gives every constant's source.

use jiff::SignedDuration;
use mds_api::target::{Engine, EngineKind};

use crate::engine::EngineProfile;
use crate::engine::request::{CostModel, RequestProfile, SchedulerLimits};
use crate::hardware::{H100_PCIE, LLAMA3_8B, Roofline, SGLANG_HOPPER};

/// A model served on a GPU shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub summary: &'static str,
    /// The engine it models.
    pub engine: EngineKind,
    /// The models it serves, as `spec.model.name` ends after its organisation, lower case
    /// (`meta-llama/Meta-Llama-3-8B-Instruct` is `meta-llama-3-8b-instruct`).
    pub serves: &'static [&'static str],
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
    /// The model and GPU its costs are derived from, whose floors every step respects
    /// (`None`: costs set by hand).
    pub roofline: Option<Roofline>,
}

/// The profile a run uses unless told otherwise.
pub const DEFAULT_PROFILE: &str = "llama3-8b-h100-vllm";

/// Every named profile.
pub fn profiles() -> Vec<Profile> {
    let small = RequestProfile::llama3_8b_h100_vllm();
    let small_profile = Profile {
        name: "llama3-8b-h100-vllm",
        summary: "Llama-3-8B-Instruct, bf16, vLLM 0.8.5, one H100 PCIe (calibrated)",
        engine: EngineKind::Vllm,
        serves: &[
            "meta-llama-3-8b-instruct",
            "meta-llama-3-8b",
            "llama-3-8b-instruct",
            "llama-3-8b",
        ],
        calibrated: true,
        request: small,
        fluid: EngineProfile {
            // 1 / prefill_token_seconds.
            prefill_tokens_per_second: 25_900.0,
            // A full batch of 1,024 at a 300-token context:
            // 1024 / (9.42 ms + 1024 × (40 µs + 300 × 72.8 ns)).
            decode_tokens_per_second: 14_000.0,
            max_running: 1024.0,
            kv_cache_tokens: 384_000.0,
            base_ttft_seconds: 0.0094,
            base_itl_seconds: 0.0095,
            steps: None,
        },
        cold_start: SignedDuration::from_secs(60),
        cold_start_spread: 0.2,
        gpus_per_pod: 1,
        kv_bytes_per_token: 131_072.0,
        roofline: Some(Roofline {
            model: LLAMA3_8B,
            gpu: H100_PCIE,
        }),
    };
    let long = Profile {
        name: "llama3.1-8b-h100-vllm",
        summary: "Llama-3.1-8B-Instruct (128k context), vLLM 0.8.5, one H100 PCIe: the 8B \
                  calibration with a 128k context (prompts past 2k tokens extrapolated)",
        serves: &[
            "llama-3.1-8b-instruct",
            "llama-3.1-8b",
            "meta-llama-3.1-8b-instruct",
            "meta-llama-3.1-8b",
        ],
        calibrated: false,
        request: RequestProfile {
            limits: SchedulerLimits {
                max_model_len: 131_072,
                ..small.limits
            },
            ..small
        },
        ..small_profile
    };
    // SGLang's defaults on an 80 GB GPU: chunked_prefill_size 8,192, max_running_requests
    // 2,048 (a 128k context), mem_fraction_static 0.88 leaving 442,750 KV tokens.
    let sglang = Profile {
        name: "llama3.1-8b-h100-sglang",
        summary: "Llama-3.1-8B-Instruct (128k context), SGLang 0.4.6-0.5, one H100 PCIe: vLLM's \
                  fitted kernel efficiencies, SGLang's limits and no host time per step \
                  (checked on SGLang's A100 runs)",
        engine: EngineKind::Sglang,
        request: RequestProfile {
            limits: SchedulerLimits {
                max_num_batched_tokens: 8192,
                max_num_seqs: 2048,
                kv_blocks: 27_671,
                max_model_len: 131_072,
            },
            cost: Roofline {
                model: LLAMA3_8B,
                gpu: H100_PCIE,
            }
            .cost(&SGLANG_HOPPER),
        },
        fluid: EngineProfile {
            prefill_tokens_per_second: 25_900.0,
            // 2,048 at a 300-token context: 2048 / (8.92 ms + 2048 × (40 µs + 21.8 µs)).
            decode_tokens_per_second: 15_100.0,
            max_running: 2048.0,
            kv_cache_tokens: 442_750.0,
            base_ttft_seconds: 0.0089,
            base_itl_seconds: 0.009,
            steps: None,
        },
        // SGLang's docs log of this model: about 38 s from the process's start to ready,
        // weights already on the node.
        cold_start: SignedDuration::from_secs(40),
        ..long
    };
    let mut all = vec![
        small_profile,
        long,
        sglang,
        Profile {
            name: "llama3-70b-h100x8-vllm",
            summary: "Llama-3-70B-Instruct, bf16, vLLM, eight H100 SXM at TP8 (extrapolated)",
            engine: EngineKind::Vllm,
            serves: &[
                "meta-llama-3-70b-instruct",
                "meta-llama-3-70b",
                "llama-3-70b-instruct",
                "llama-3-70b",
            ],
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
                    // 4 × 80 layers × 64 heads × 128 FLOPs per pair at the same efficiency.
                    attention_pair_seconds: 8.2e-10,
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
                steps: None,
            },
            cold_start: SignedDuration::from_secs(215),
            cold_start_spread: 0.2,
            gpus_per_pod: 8,
            kv_bytes_per_token: 327_680.0,
            roofline: None,
        },
    ];
    // The fluid engine runs each profile's own step loop in closed form.
    for p in &mut all {
        p.fluid.steps = Some(p.request);
    }
    all
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

/// The profile a run uses and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen {
    pub profile: Profile,
    pub why: String,
}

/// The profile of the model and engine a target names (`spec.model.name`, `spec.engine`):
/// the one serving that model on that engine, else that model on another engine, else the
/// default, with the reason in words.
pub fn for_target(model: Option<&str>, engine: Option<&Engine>) -> Chosen {
    let kind = engine.and_then(|e| EngineKind::from_name(&e.name).ok());
    let engine_name = engine.map_or("an unnamed engine", |e| e.name.as_str());
    let default = || profile(DEFAULT_PROFILE).expect("the default profile exists");
    let Some(model) = model.filter(|m| !m.trim().is_empty()) else {
        return Chosen {
            profile: default(),
            why: "the default: the target names no model".into(),
        };
    };
    let key = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .trim()
        .to_ascii_lowercase();
    let serving: Vec<Profile> = profiles()
        .into_iter()
        .filter(|p| p.serves.contains(&key.as_str()))
        .collect();
    if let Some(p) = serving.iter().find(|p| Some(p.engine) == kind) {
        return Chosen {
            profile: *p,
            why: format!("the target serves {model} on {engine_name}"),
        };
    }
    if let Some(p) = serving.first() {
        return Chosen {
            profile: *p,
            why: format!("the target serves {model}; no profile of it on {engine_name}"),
        };
    }
    Chosen {
        profile: default(),
        why: format!("the default: no profile serves {model}; --profile picks one"),
    }
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

    fn engine(name: &str) -> mds_api::target::Engine {
        mds_api::target::Engine {
            name: name.into(),
            version: None,
        }
    }

    #[test]
    fn the_targets_model_and_engine_pick_the_profile() {
        let pick = |model: Option<&str>, e: &str| super::for_target(model, Some(&engine(e)));
        let c = pick(Some("meta-llama/Meta-Llama-3-8B-Instruct"), "vLLM");
        assert_eq!(c.profile.name, "llama3-8b-h100-vllm");
        assert!(
            c.why.contains("Meta-Llama-3-8B-Instruct on vLLM"),
            "{}",
            c.why
        );
        let c = pick(Some("meta-llama/Llama-3.1-8B-Instruct"), "vLLM");
        assert_eq!(c.profile.name, "llama3.1-8b-h100-vllm");
        let c = pick(Some("meta-llama/Llama-3.1-8B-Instruct"), "sglang");
        assert_eq!(c.profile.name, "llama3.1-8b-h100-sglang");
        // No SGLang profile of Llama-3 8B: the vLLM one, said so.
        let c = pick(Some("meta-llama/Meta-Llama-3-8B-Instruct"), "SGLang");
        assert_eq!(c.profile.name, "llama3-8b-h100-vllm");
        assert!(c.why.contains("no profile of it on SGLang"), "{}", c.why);
        let c = pick(Some("acme/chat-8b"), "vLLM");
        assert_eq!(c.profile.name, super::DEFAULT_PROFILE);
        assert!(
            c.why.contains("no profile serves acme/chat-8b"),
            "{}",
            c.why
        );
        assert!(pick(None, "vLLM").why.contains("names no model"));
    }
}
