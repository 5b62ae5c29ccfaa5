//! How long one scheduler step takes, and the scheduler's limits: a profile of one engine
//! instance for the request-level model.

/// A step's duration as a sum of five parts, a roofline with its efficiency factors folded
/// into each coefficient: a fixed part (reading the weights once, launching kernels, the
/// scheduler's own work), the dense layers' compute per prompt token computed, prefill
/// attention's compute per (query, key) pair, per-sequence work of each decode (its token's
/// share of the dense layers, sampling, detokenising), and attention's KV reads per token of
/// context.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    pub step_overhead_seconds: f64,
    pub prefill_token_seconds: f64,
    /// Per (query, key) pair of prefill attention: a prompt chunk of `c` tokens after `d`
    /// computed ones has `c·d + c(c+1)/2` pairs, so a prompt's attention grows with the square
    /// of its length.
    pub attention_pair_seconds: f64,
    pub decode_sequence_seconds: f64,
    pub kv_read_token_seconds: f64,
}

/// The work of one scheduler step, as the cost model counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepWork {
    /// Prompt (and recomputed) tokens computed.
    pub prefill_tokens: u64,
    /// (query, key) pairs of the prefill tokens' causal attention.
    pub attention_pairs: u64,
    /// Sequences sampling one token after a full context.
    pub decode_sequences: u64,
    /// Context attended over: every scheduled request's tokens after the step.
    pub kv_tokens: u64,
}

impl StepWork {
    /// A prompt chunk of `chunk` tokens after `done` computed ones, alone in its step.
    pub fn prefill_chunk(done: u64, chunk: u64) -> StepWork {
        StepWork {
            prefill_tokens: chunk,
            attention_pairs: attention_pairs(done, chunk),
            decode_sequences: 0,
            kv_tokens: done + chunk,
        }
    }

    /// `sequences` decodes over `kv_tokens` tokens of context in all.
    pub fn decode(sequences: u64, kv_tokens: u64) -> StepWork {
        StepWork {
            decode_sequences: sequences,
            kv_tokens,
            ..StepWork::default()
        }
    }
}

/// Causal attention's (query, key) pairs for `chunk` new tokens after `done` computed ones:
/// each new token attends to every earlier token and itself.
pub fn attention_pairs(done: u64, chunk: u64) -> u64 {
    chunk
        .saturating_mul(done)
        .saturating_add(chunk.saturating_mul(chunk.saturating_add(1)) / 2)
}

impl CostModel {
    /// Seconds for a step that does `work`.
    pub fn step_seconds(&self, work: &StepWork) -> f64 {
        self.step_overhead_seconds
            + self.prefill_token_seconds * work.prefill_tokens as f64
            + self.attention_pair_seconds * work.attention_pairs as f64
            + self.decode_sequence_seconds * work.decode_sequences as f64
            + self.kv_read_token_seconds * work.kv_tokens as f64
    }

    /// Seconds to prefill a `prompt` alone on an idle engine in chunks of `budget` tokens, the
    /// first `cached` of it held (at least one token is always computed).
    pub fn prefill_seconds(&self, prompt: u64, cached: u64, budget: u64) -> f64 {
        let budget = budget.max(1);
        let mut done = cached.min(prompt.saturating_sub(1));
        let mut seconds = 0.0;
        while done < prompt {
            let chunk = (prompt - done).min(budget);
            seconds += self.step_seconds(&StepWork::prefill_chunk(done, chunk));
            done += chunk;
        }
        seconds
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

impl SchedulerLimits {
    /// The longest request admitted, prompt and output: `max_model_len`, capped at the pool so
    /// an admitted request can always finish.
    pub fn longest_request(&self) -> u64 {
        self.max_model_len
            .min(u64::from(self.kv_blocks) * super::BLOCK_TOKENS)
    }
}

impl Default for SchedulerLimits {
    fn default() -> Self {
        SchedulerLimits {
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
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
    /// vLLM 0.8.5 serving Llama-3-8B-Instruct (bf16) on one H100 PCIe, with vLLM's default
    /// limits for it: its costs from the model's shape, the card's peaks and vLLM's fitted
    /// efficiencies on Hopper ([`crate::hardware::VLLM_HOPPER`]; module
    /// [`crate::calibration`] has the measurements and docs/simulator.md the fit).
    ///
    /// KV pool: 80 GB × 0.9 less 16 GB of weights and a few GB of activations leaves about
    /// 50 GB; at 128 KiB per token (2 × 32 layers × 8 KV heads × 128 × 2 bytes) that is
    /// 384,000 tokens, 24,000 blocks.
    pub fn llama3_8b_h100_vllm() -> RequestProfile {
        use crate::hardware::{H100_PCIE, LLAMA3_8B, Roofline, VLLM_HOPPER};
        RequestProfile {
            limits: SchedulerLimits::default(),
            cost: Roofline {
                model: LLAMA3_8B,
                gpu: H100_PCIE,
            }
            .cost(&VLLM_HOPPER),
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
            ("attention_pair_seconds", c.attention_pair_seconds),
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
