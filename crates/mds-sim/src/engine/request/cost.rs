//! How long one scheduler step takes, and the scheduler's limits: a profile of one engine
//! instance for the request-level model.

/// A step's duration as a sum of four parts, a roofline with its efficiency factors folded
/// into each coefficient: a fixed part (reading the weights once, launching kernels, the
/// scheduler's own work), prefill compute per prompt token computed, per-sequence work of each
/// decode (sampling, detokenising), and attention's KV reads per token of context.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    pub step_overhead_seconds: f64,
    pub prefill_token_seconds: f64,
    pub decode_sequence_seconds: f64,
    pub kv_read_token_seconds: f64,
}

impl CostModel {
    /// Seconds for a step that computes `prefill_tokens` prompt tokens, decodes
    /// `decode_sequences` sequences and attends over `kv_tokens` tokens of context in all.
    pub fn step_seconds(&self, prefill_tokens: u64, decode_sequences: u64, kv_tokens: u64) -> f64 {
        self.step_overhead_seconds
            + self.prefill_token_seconds * prefill_tokens as f64
            + self.decode_sequence_seconds * decode_sequences as f64
            + self.kv_read_token_seconds * kv_tokens as f64
    }
}

/// The scheduler's limits (vLLM's flags of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerLimits {
    /// Tokens one step may compute (`--max-num-batched-tokens`).
    pub max_num_batched_tokens: u64,
    /// Requests in the running batch (`--max-num-seqs`).
    pub max_num_seqs: usize,
    /// KV blocks of 16 tokens in the pool.
    pub kv_blocks: u32,
    /// Longest request (prompt plus output); longer ones are rejected at submission
    /// (`--max-model-len`). Capped at the pool's size, so an admitted request can always finish.
    pub max_model_len: u64,
}

impl Default for SchedulerLimits {
    fn default() -> Self {
        SchedulerLimits {
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            kv_blocks: 24_000,
            max_model_len: 8192,
        }
    }
}

/// One engine instance for the request-level model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestProfile {
    pub limits: SchedulerLimits,
    pub cost: CostModel,
}

impl RequestProfile {
    /// vLLM 0.8.5 serving Llama-3-8B-Instruct (bf16) on one H100 PCIe, with vLLM's default limits.
    ///
    /// KV pool: 80 GB × 0.9 less 16 GB of weights and a few GB of activations leaves about
    /// 50 GB; at 128 KiB per token (2 × 32 layers × 8 KV heads × 128 × 2 bytes) that is
    /// 384,000 tokens, 24,000 blocks.
    ///
    /// The cost constants are fitted to the published single-instance measurements that
    /// `tests/request_engine.rs` checks (TTFT and TPOT at 1, 16 and 32 QPS of ShareGPT-like
    /// 206-in / 202-out requests). In steady state a step of a batch of `B` decodes at mean
    /// context `c` (about 206 + 101 tokens), with `λ × 206` prompt tokens per second
    /// interleaved, lasts `s = (O + B (D + c K)) / (1 − 206 λ P)`, and TPOT is `s`; TTFT is
    /// about half a step of waiting plus one step carrying the prompt. So:
    /// - `O`, the fixed part, is fixed by TPOT at 1 QPS, where `B ≈ 2`;
    /// - `D + c K`, the per-sequence slope, by the rise of TPOT from 1 to 32 QPS (B ≈ 2 to
    ///   106);
    /// - `P` by the excess of TTFT over a step and a half. The three TTFTs do not agree on one
    ///   `P` (the measured TTFT grows faster with load than one more prompt per step explains;
    ///   the frontend's own queueing is not modelled), so `P` sits where all three are within
    ///   tolerance.
    ///
    /// The measurements cannot separate `D` from `K` (the mean context is the same at every
    /// rate), so `D` is 0 and the slope is all KV reads. A grid over `O` (9.8 to 10.2 ms), `P`
    /// (3 to 5 × 10⁻⁵ s) and `K` (5 to 8 × 10⁻⁸ s) picked the values below; they read
    /// physically: `O` = 10.2 ms is the 16 GB of weights at 2 TB/s (8 ms) plus 2 ms of launch
    /// and scheduling, `K` is 128 KiB per token at 1.9 TB/s (94 % of the H100 PCIe's pin
    /// bandwidth), and `P` is 25,000 prompt tokens/s, about half the card's dense bf16 peak at
    /// 16 GFLOP per token. Contexts much longer than 300 tokens, and prompts much longer than
    /// 206, are an extrapolation.
    pub fn llama3_8b_h100_vllm() -> RequestProfile {
        RequestProfile {
            limits: SchedulerLimits::default(),
            cost: CostModel {
                step_overhead_seconds: 0.0102,
                prefill_token_seconds: 4.0e-5,
                decode_sequence_seconds: 0.0,
                kv_read_token_seconds: 7.0e-8,
            },
        }
    }

    /// Limits must be positive and every cost finite and not negative.
    pub fn validate(&self) -> Result<(), String> {
        let l = &self.limits;
        if l.max_num_batched_tokens == 0 || l.max_num_seqs == 0 || l.kv_blocks == 0 {
            return Err(
                "max_num_batched_tokens, max_num_seqs and kv_blocks must be positive".into(),
            );
        }
        let c = &self.cost;
        for (field, value) in [
            ("step_overhead_seconds", c.step_overhead_seconds),
            ("prefill_token_seconds", c.prefill_token_seconds),
            ("decode_sequence_seconds", c.decode_sequence_seconds),
            ("kv_read_token_seconds", c.kv_read_token_seconds),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!(
                    "{field} is {value}; it must be a finite number, at least 0"
                ));
            }
        }
        if c.step_overhead_seconds <= 0.0 {
            return Err("step_overhead_seconds must be positive (a step takes time)".into());
        }
        Ok(())
    }
}
