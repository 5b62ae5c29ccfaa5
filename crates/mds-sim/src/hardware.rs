//! What a profile's step costs are made of: the model's shape, the GPU's datasheet peaks and
//! the engine's efficiencies on them. The request-level [`CostModel`] is derived from the
//! three, so a measurement on one H100 variant converts to another by one written rule:
//!
//! - **Efficiencies stay, peaks change.** An engine version reaches the same share of the
//!   peak bandwidth and of the peak dense FLOPS on every GPU of one architecture (Hopper), so
//!   the memory-bound terms (the weights' read in the fixed part, the KV reads) scale with the
//!   bandwidth and the compute-bound ones (prompt tokens, prefill attention) with the FLOPS.
//! - **Host work stays.** Kernel launches and the scheduler's own time (the rest of the fixed
//!   part) and each decode sequence's sampling and bookkeeping run on the host: the same seconds
//!   on every variant.
//!
//! The same pieces give each step its physical floor ([`Roofline::floor_seconds`]): no step
//! can be shorter than its bytes over the peak bandwidth or its FLOPs over the peak FLOPS.

use crate::engine::request::{CostModel, StepWork};

/// A GPU's datasheet peaks (dense, without sparsity).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gpu {
    pub name: &'static str,
    /// Dense bf16/fp16 tensor FLOPS.
    pub peak_flops: f64,
    /// HBM bytes per second.
    pub bandwidth: f64,
}

/// NVIDIA H100 PCIe 80 GB (product brief PB-11133-001): 756.5 TFLOPS, 2.0 TB/s.
pub const H100_PCIE: Gpu = Gpu {
    name: "H100 PCIe",
    peak_flops: 756.5e12,
    bandwidth: 2.0e12,
};

/// NVIDIA H100 SXM5 80 GB (datasheet): 989.5 TFLOPS, 3.35 TB/s.
pub const H100_SXM: Gpu = Gpu {
    name: "H100 SXM",
    peak_flops: 989.5e12,
    bandwidth: 3.35e12,
};

/// NVIDIA H200 SXM 141 GB (datasheet): the H100 SXM's compute, 4.8 TB/s.
pub const H200: Gpu = Gpu {
    name: "H200",
    peak_flops: 989.5e12,
    bandwidth: 4.8e12,
};

/// NVIDIA A100 SXM4 80 GB (datasheet): 312 TFLOPS, 2.039 TB/s. Ampere: the Hopper
/// efficiencies carry to it only as a rough check.
pub const A100_SXM: Gpu = Gpu {
    name: "A100 SXM",
    peak_flops: 312e12,
    bandwidth: 2.039e12,
};

/// A decoder-only transformer's shape, as its `config.json` gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelShape {
    pub name: &'static str,
    pub parameters: f64,
    pub layers: u32,
    pub query_heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Bytes per weight and per KV element (2 for bf16/fp16).
    pub bytes_per_value: f64,
}

/// Llama-3-8B and Llama-3.1-8B (same shape): 8.03 B parameters, 32 layers, 32 query and 8 KV
/// heads of 128.
pub const LLAMA3_8B: ModelShape = ModelShape {
    name: "Llama-3-8B",
    parameters: 8.03e9,
    layers: 32,
    query_heads: 32,
    kv_heads: 8,
    head_dim: 128,
    bytes_per_value: 2.0,
};

/// Llama-3.1-70B: 70.6 B parameters, 80 layers, 64 query and 8 KV heads of 128.
pub const LLAMA31_70B: ModelShape = ModelShape {
    name: "Llama-3.1-70B",
    parameters: 70.6e9,
    layers: 80,
    query_heads: 64,
    kv_heads: 8,
    head_dim: 128,
    bytes_per_value: 2.0,
};

impl ModelShape {
    pub fn weight_bytes(&self) -> f64 {
        self.parameters * self.bytes_per_value
    }

    /// The dense layers' FLOPs per token: a multiply and an add per weight.
    pub fn flops_per_token(&self) -> f64 {
        2.0 * self.parameters
    }

    /// Attention's FLOPs per (query, key) pair: `QKᵀ` and `AV`, two FLOPs per head dimension
    /// each, in every query head of every layer.
    pub fn flops_per_attention_pair(&self) -> f64 {
        4.0 * f64::from(self.layers) * f64::from(self.query_heads) * f64::from(self.head_dim)
    }

    /// KV bytes per token: a key and a value per KV head per layer.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * self.bytes_per_value
    }
}

/// An engine version's efficiencies on one architecture, and its host-side costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Efficiency {
    /// Share of the peak bandwidth reached reading weights and KV.
    pub bandwidth: f64,
    /// Share of the peak FLOPS reached by prefill (dense layers and attention alike).
    pub compute: f64,
    /// Host seconds per step: kernel launches, the scheduler.
    pub step_host_seconds: f64,
    /// Seconds per decode sequence per step: sampling, detokenising, bookkeeping, and its
    /// token's share of the dense layers past the weights' read.
    pub decode_sequence_seconds: f64,
}

/// vLLM (0.8.5, V1 engine) on Hopper, fitted to the measurements of module
/// [`crate::calibration`].
/// On the H100 PCIe: 9.4 ms fixed per step, 38.6 µs per prompt token (25,900 tokens/s),
/// 40 µs per decode sequence, 72.8 ns per token of context read.
pub const VLLM_HOPPER: Efficiency = Efficiency {
    bandwidth: 0.9,
    compute: 0.55,
    step_host_seconds: 0.0005,
    decode_sequence_seconds: 4.0e-5,
};

/// SGLang on Hopper: vLLM's GPU efficiencies (the same attention and GEMM kernel families),
/// no host time per step (SGLang's overlap scheduler prepares the next batch while the GPU
/// runs this one); the per-sequence cost as vLLM's. Checked, not fitted, on SGLang's own
/// published runs (module [`crate::calibration`]).
pub const SGLANG_HOPPER: Efficiency = Efficiency {
    step_host_seconds: 0.0,
    ..VLLM_HOPPER
};

/// A model on a GPU under an engine version.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    pub model: ModelShape,
    pub gpu: Gpu,
}

impl Roofline {
    /// The step costs of this model on this GPU at `efficiency` (the rule in the module doc).
    pub fn cost(&self, efficiency: &Efficiency) -> CostModel {
        let bandwidth = self.gpu.bandwidth * efficiency.bandwidth;
        let flops = self.gpu.peak_flops * efficiency.compute;
        CostModel {
            step_overhead_seconds: self.model.weight_bytes() / bandwidth
                + efficiency.step_host_seconds,
            prefill_token_seconds: self.model.flops_per_token() / flops,
            attention_pair_seconds: self.model.flops_per_attention_pair() / flops,
            decode_sequence_seconds: efficiency.decode_sequence_seconds,
            kv_read_token_seconds: self.model.kv_bytes_per_token() / bandwidth,
        }
    }

    /// The shortest a step doing `work` can physically take: its bytes (the weights once, the
    /// context's KV) over the peak bandwidth, or its FLOPs (every token through the dense
    /// layers, prefill attention) over the peak FLOPS, whichever is longer.
    pub fn floor_seconds(&self, work: &StepWork) -> f64 {
        let m = &self.model;
        let bytes = m.weight_bytes() + work.kv_tokens as f64 * m.kv_bytes_per_token();
        let tokens = (work.prefill_tokens + work.decode_sequences) as f64;
        let flops = tokens * m.flops_per_token()
            + work.attention_pairs as f64 * m.flops_per_attention_pair();
        (bytes / self.gpu.bandwidth).max(flops / self.gpu.peak_flops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_8b_by_hand() {
        let m = LLAMA3_8B;
        assert_eq!(m.kv_bytes_per_token(), 131_072.0);
        assert_eq!(m.flops_per_attention_pair(), 524_288.0);
        // A 2k prompt's mean query attends to about 1k keys: 3 % of its dense FLOPs.
        let share = 1024.0 * m.flops_per_attention_pair() / m.flops_per_token();
        assert!((0.03..0.04).contains(&share), "{share}");
    }

    #[test]
    fn a_variant_converts_by_its_peaks_and_keeps_host_time() {
        let e = Efficiency {
            bandwidth: 0.8,
            compute: 0.5,
            step_host_seconds: 0.002,
            decode_sequence_seconds: 3e-5,
        };
        let pcie = Roofline {
            model: LLAMA3_8B,
            gpu: H100_PCIE,
        }
        .cost(&e);
        let sxm = Roofline {
            model: LLAMA3_8B,
            gpu: H100_SXM,
        }
        .cost(&e);
        let ratio = |a: f64, b: f64| a / b;
        assert!(
            (ratio(pcie.kv_read_token_seconds, sxm.kv_read_token_seconds) - 1.675).abs() < 1e-9
        );
        assert!(
            (ratio(pcie.prefill_token_seconds, sxm.prefill_token_seconds) - 989.5 / 756.5).abs()
                < 1e-9
        );
        assert_eq!(pcie.decode_sequence_seconds, sxm.decode_sequence_seconds);
        let weights = |c: &CostModel| c.step_overhead_seconds - 0.002;
        assert!((ratio(weights(&pcie), weights(&sxm)) - 1.675).abs() < 1e-9);
    }
}
