//! What a profile fitted to measured kernels is made of (its entries are generated into
//! module `measured`), and how a target's role names the GPU it runs on.

use jiff::SignedDuration;
use mds_api::target::EngineKind;

use super::Profile;
use crate::engine::EngineProfile;
use crate::engine::request::{BLOCK_TOKENS, CostModel, RequestProfile, SchedulerLimits};
use crate::hardware::{self, ModelShape, Roofline};

/// The GPUs fitted profiles run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gpu {
    H100Sxm,
    H100Pcie,
    H200,
    A100,
}

impl Gpu {
    pub fn hardware(self) -> hardware::Gpu {
        match self {
            Gpu::H100Sxm => hardware::H100_SXM,
            Gpu::H100Pcie => hardware::H100_PCIE,
            Gpu::H200 => hardware::H200,
            Gpu::A100 => hardware::A100_SXM,
        }
    }

    pub fn label(self) -> &'static str {
        self.hardware().name
    }

    /// The GPU a role's `instanceType` names, read loosely (`h100-sxm`, `nvidia-h100-80gb`,
    /// `H100_PCIe`, `a100-80g`): `None` when it names none of ours. A bare `h100` is the SXM
    /// card, the cloud's common H100 shape; `Ambiguous` says so.
    pub fn from_instance_type(instance_type: &str) -> Option<(Gpu, Reading)> {
        let t = instance_type.to_ascii_lowercase();
        let has = |word: &str| t.contains(word);
        if has("h200") {
            Some((Gpu::H200, Reading::Named))
        } else if has("h100") && (has("pcie") || has("nvl")) {
            // The H100 NVL is the PCIe form factor's 94 GB variant: its card's peaks are
            // nearer the PCIe's than the SXM's.
            Some((Gpu::H100Pcie, Reading::Named))
        } else if has("h100") && has("sxm") {
            Some((Gpu::H100Sxm, Reading::Named))
        } else if has("h100") {
            Some((Gpu::H100Sxm, Reading::Ambiguous))
        } else if has("a100") {
            Some((Gpu::A100, Reading::Named))
        } else {
            None
        }
    }
}

/// How plainly an `instanceType` named its GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Named,
    /// `h100` alone: read as the SXM card.
    Ambiguous,
}

/// The models fitted profiles serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum Model {
    Llama31_8B,
    Llama31_70B,
}

impl Model {
    pub fn shape(self) -> ModelShape {
        match self {
            Model::Llama31_8B => hardware::LLAMA3_8B,
            Model::Llama31_70B => hardware::LLAMA31_70B,
        }
    }

    /// Admission (model loaded on the node, weights from local disk) to Ready.
    fn cold_start(self) -> SignedDuration {
        match self {
            Model::Llama31_8B => SignedDuration::from_secs(60),
            Model::Llama31_70B => SignedDuration::from_secs(215),
        }
    }
}

/// The precision of the weights or of the KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Bf16,
    Fp8,
}

impl Precision {
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }
}

/// One profile fitted to measured kernel tables by tools/profiles/fit.py.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fitted {
    pub name: &'static str,
    pub model: Model,
    pub gpu: Gpu,
    pub engine: EngineKind,
    /// The engine version whose kernels the tables measured.
    pub engine_version: &'static str,
    pub precision: Precision,
    pub kv_cache: Precision,
    pub tensor_parallel: u32,
    pub serves: &'static [&'static str],
    /// The step costs fitted to the composed kernel times (`fit_error`: the largest relative
    /// error on the steps the fit covered).
    pub kernel_fixed_seconds: f64,
    pub prefill_token_seconds: f64,
    pub attention_pair_seconds: f64,
    pub kernel_decode_seconds: f64,
    pub kv_read_token_seconds: f64,
    /// Host time the kernel tables do not hold, per step and per decode sequence, fitted
    /// once per engine on measured serving at tensor parallelisms no profile uses.
    pub host_step_seconds: f64,
    pub host_decode_seconds: f64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: usize,
    pub kv_cache_tokens: u64,
    pub fit_error: f64,
    /// The tables read, as the package lays them out.
    pub tables: &'static str,
    pub summary: &'static str,
}

/// Llama-3.1's context.
const CONTEXT_TOKENS: u64 = 131_072;

impl Fitted {
    pub fn cost(&self) -> CostModel {
        CostModel {
            step_overhead_seconds: self.kernel_fixed_seconds + self.host_step_seconds,
            prefill_token_seconds: self.prefill_token_seconds,
            attention_pair_seconds: self.attention_pair_seconds,
            decode_sequence_seconds: self.kernel_decode_seconds + self.host_decode_seconds,
            kv_read_token_seconds: self.kv_read_token_seconds,
        }
    }

    pub fn request(&self) -> RequestProfile {
        RequestProfile {
            limits: SchedulerLimits {
                max_num_batched_tokens: self.max_num_batched_tokens,
                max_num_seqs: self.max_num_seqs,
                kv_blocks: u32::try_from(self.kv_cache_tokens / BLOCK_TOKENS).unwrap_or(u32::MAX),
                max_model_len: CONTEXT_TOKENS,
            },
            cost: self.cost(),
        }
    }

    pub fn profile(&self) -> Profile {
        let request = self.request();
        let cost = request.cost;
        let full = self.max_num_seqs as f64;
        // A full batch at a 300-token context, as the hand-set profiles quote it.
        let full_step = cost.step_overhead_seconds
            + full * (cost.decode_sequence_seconds + 300.0 * cost.kv_read_token_seconds);
        let shape = self.model.shape();
        // Fp8 weights: half the bytes, and Hopper's fp8 tensor cores at twice the bf16 peak
        // (the floor stays a floor with attention, still bf16, counted at that peak too).
        let flops_factor = 2.0 / self.precision.bytes();
        let gpu = self.gpu.hardware();
        Profile {
            name: self.name,
            summary: self.summary,
            engine: self.engine,
            engine_version: self.engine_version,
            precision: self.precision,
            gpu: self.gpu.label(),
            source: super::measured::SOURCE,
            tables: self.tables,
            serves: self.serves,
            calibrated: false,
            request,
            fluid: EngineProfile {
                prefill_tokens_per_second: 1.0 / cost.prefill_token_seconds,
                decode_tokens_per_second: full / full_step,
                max_running: full,
                kv_cache_tokens: self.kv_cache_tokens as f64,
                base_ttft_seconds: cost.step_overhead_seconds,
                base_itl_seconds: cost.step_overhead_seconds + cost.decode_sequence_seconds,
                steps: Some(request),
            },
            cold_start: self.model.cold_start(),
            cold_start_spread: 0.2,
            gpus_per_pod: self.tensor_parallel,
            kv_bytes_per_token: shape.kv_bytes_per_token() * self.kv_cache.bytes()
                / shape.bytes_per_value,
            roofline: Some(Roofline {
                model: ModelShape {
                    bytes_per_value: self.precision.bytes(),
                    ..shape
                },
                // A tensor-parallel replica: its GPUs' peaks together.
                gpu: hardware::Gpu {
                    peak_flops: gpu.peak_flops * flops_factor * f64::from(self.tensor_parallel),
                    bandwidth: gpu.bandwidth * f64::from(self.tensor_parallel),
                    ..gpu
                },
            }),
        }
    }
}
