//! The planner's pre-deployment profile, derived from the engine capacity model instead of
//! measured: upstream's profiler sweeps a prefill engine over prompt lengths and a decode
//! engine over batch sizes and contexts, and the planner interpolates those tables. Here the
//! tables are the request-level cost model itself ([`CostModel::step_seconds`]).

use mds_sim::engine::request::{BLOCK_TOKENS, CostModel, StepWork};
use mds_sim::profile::Profile;

/// One engine's capacity, as the planner's profile knows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Capacity {
    pub cost: CostModel,
    /// Requests one step may run (`--max-num-seqs`).
    pub max_num_seqs: usize,
    /// Tokens one step may compute (`--max-num-batched-tokens`): the prefill chunk.
    pub max_num_batched_tokens: u64,
    /// Tokens the KV cache holds.
    pub kv_cache_tokens: f64,
}

impl Capacity {
    pub fn from_profile(profile: &Profile) -> Capacity {
        let limits = profile.request.limits;
        Capacity {
            cost: profile.request.cost,
            max_num_seqs: limits.max_num_seqs,
            max_num_batched_tokens: limits.max_num_batched_tokens,
            kv_cache_tokens: f64::from(limits.kv_blocks) * BLOCK_TOKENS as f64,
        }
    }

    /// Prompt tokens per second per GPU of a replica of `gpus` GPUs doing nothing but
    /// prefill: full chunks back to back, each chunk the largest one up to
    /// `max_num_batched_tokens` whose step meets `ttft_seconds` (a prompt that waits for no
    /// queue then meets the TTFT target one chunk at a time). This is `1 /
    /// prefill_token_seconds` less the share of the step overhead (for the 8B H100 profile,
    /// 8192 tokens in 337.9 ms: 24,245 tokens/s against 25,000). If not even one token's step
    /// meets the target, one-token steps are what the engine can do.
    pub fn prefill_tokens_per_second_per_gpu(&self, ttft_seconds: f64, gpus: u32) -> f64 {
        let c = &self.cost;
        let fits = if c.prefill_token_seconds > 0.0 {
            ((ttft_seconds - c.step_overhead_seconds) / c.prefill_token_seconds).floor()
        } else {
            f64::INFINITY
        };
        let chunk = fits
            .min(self.max_num_batched_tokens as f64)
            .max(1.0)
            .min(u64::MAX as f64) as u64;
        chunk as f64 / c.step_seconds(&StepWork::prefill_chunk(0, chunk)) / f64::from(gpus.max(1))
    }

    /// The largest decode batch whose step at mean context `context` tokens meets
    /// `itl_seconds`: at most `max_num_seqs`, at most what the KV cache holds at that context,
    /// at least 1 (when not even one sequence meets the target, the engine still decodes one).
    pub fn decode_batch(&self, itl_seconds: f64, context: f64) -> u64 {
        let c = &self.cost;
        let context = context.max(0.0);
        let per_sequence = c.decode_sequence_seconds + context * c.kv_read_token_seconds;
        let by_latency = if per_sequence > 0.0 {
            ((itl_seconds - c.step_overhead_seconds) / per_sequence).floor()
        } else if itl_seconds >= c.step_overhead_seconds {
            f64::INFINITY
        } else {
            0.0
        };
        let by_cache = if context > 0.0 {
            (self.kv_cache_tokens / context).floor()
        } else {
            f64::INFINITY
        };
        let mut batch = by_latency
            .min(by_cache)
            .min(self.max_num_seqs as f64)
            .max(1.0) as u64;
        // The closed form can sit one above the truth where `kv_tokens` rounds up.
        while batch > 1 && self.decode_step(batch, context) > itl_seconds {
            batch -= 1;
        }
        batch
    }

    /// Seconds of one decode step of `batch` sequences at mean context `context`.
    pub fn decode_step(&self, batch: u64, context: f64) -> f64 {
        let kv = (batch as f64 * context.max(0.0)).round() as u64;
        self.cost.step_seconds(&StepWork::decode(batch, kv))
    }

    /// Generated tokens per second per GPU of a replica of `gpus` GPUs meeting `itl_seconds`
    /// at mean context `context`: the batch of [`Capacity::decode_batch`] over its step.
    pub fn decode_tokens_per_second_per_gpu(
        &self,
        itl_seconds: f64,
        context: f64,
        gpus: u32,
    ) -> f64 {
        let batch = self.decode_batch(itl_seconds, context);
        batch as f64 / self.decode_step(batch, context) / f64::from(gpus.max(1))
    }

    /// The TTFT the profile expects for a prompt of `isl` tokens on an idle engine (the
    /// profiler's single-request TTFT): its chunks of `max_num_batched_tokens`, one step each.
    pub fn expected_ttft(&self, isl: f64) -> f64 {
        let isl = isl.round().max(1.0) as u64;
        self.cost
            .prefill_seconds(isl, 0, self.max_num_batched_tokens)
    }

    /// The ITL the profile expects for a decode batch of `batch` sequences (at least one) at
    /// mean context `context`.
    pub fn expected_itl(&self, batch: f64, context: f64) -> f64 {
        let batch = batch.round().max(1.0) as u64;
        self.decode_step(batch, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Capacity {
        Capacity::from_profile(&mds_sim::profile::profile("llama3-8b-h100-vllm").unwrap())
    }

    #[test]
    fn prefill_throughput_is_full_chunks_meeting_the_ttft_target() {
        let c = small();
        let k = c.cost;
        let chunk_seconds = |chunk: u64| k.step_seconds(&StepWork::prefill_chunk(0, chunk));
        assert_eq!(c.kv_cache_tokens, 384_000.0);
        // 8192 tokens in 9.4 ms + 8192 × 38.6 µs + 33.6M pairs × 1.26 ns ≈ 368 ms, within
        // 500 ms.
        let per_gpu = c.prefill_tokens_per_second_per_gpu(0.5, 1);
        assert!((chunk_seconds(8192) - 0.368).abs() < 0.002);
        assert!(
            (per_gpu - 8192.0 / chunk_seconds(8192)).abs() < 1e-6,
            "{per_gpu}"
        );
        // Two GPUs per replica: half per GPU.
        assert!((c.prefill_tokens_per_second_per_gpu(0.5, 2) - per_gpu / 2.0).abs() < 1e-9);
        // A 100 ms target: (100 − 9.4) ms / 38.6 µs = 2346 tokens per chunk.
        let fits = ((0.1 - k.step_overhead_seconds) / k.prefill_token_seconds).floor() as u64;
        assert_eq!(fits, 2346);
        let tight = c.prefill_tokens_per_second_per_gpu(0.1, 1);
        assert!((tight - fits as f64 / chunk_seconds(fits)).abs() < 1e-6);
        // Below one step's overhead: one-token steps.
        let hopeless = c.prefill_tokens_per_second_per_gpu(0.001, 1);
        assert!((hopeless - 1.0 / chunk_seconds(1)).abs() < 1e-9);
    }

    #[test]
    fn decode_throughput_is_the_largest_batch_meeting_the_itl_target() {
        let c = small();
        let k = c.cost;
        let per_sequence =
            |context: f64| k.decode_sequence_seconds + context * k.kv_read_token_seconds;
        // 50 ms at context 300: (50 − 9.4) ms / (40 µs + 300 × 72.8 ns) = 656 sequences.
        let by_hand = ((0.05 - k.step_overhead_seconds) / per_sequence(300.0)).floor() as u64;
        assert_eq!((c.decode_batch(0.05, 300.0), by_hand), (656, 656));
        let tput = c.decode_tokens_per_second_per_gpu(0.05, 300.0, 1);
        assert!(
            (tput - 656.0 / c.decode_step(656, 300.0)).abs() < 1e-6,
            "{tput}"
        );
        // 25 ms at context 1000: 15.6 ms / 112.8 µs = 138 sequences.
        assert_eq!(c.decode_batch(0.025, 1000.0), 138);
        assert!(c.decode_step(138, 1000.0) <= 0.025 && c.decode_step(139, 1000.0) > 0.025);
        // The KV cache bounds the batch at long contexts (384,000 / 4,000 = 96), max_num_seqs
        // at short ones, and a target below the step overhead still decodes one sequence.
        assert_eq!(c.decode_batch(1.0, 4000.0), 96);
        assert_eq!(c.decode_batch(10.0, 10.0), 1024);
        assert_eq!(c.decode_batch(0.005, 300.0), 1);
        assert!((c.decode_tokens_per_second_per_gpu(0.05, 300.0, 4) - tput / 4.0).abs() < 1e-9);
    }

    #[test]
    fn expected_latencies_come_from_the_cost_model() {
        let c = small();
        let k = c.cost;
        let chunk = |done: u64, chunk: u64| k.step_seconds(&StepWork::prefill_chunk(done, chunk));
        assert!((c.expected_ttft(206.0) - chunk(0, 206)).abs() < 1e-12);
        // 10,000 tokens: one chunk of 8192 and one of 1808 after it.
        let two = chunk(0, 8192) + chunk(8192, 1808);
        assert!((c.expected_ttft(10_000.0) - two).abs() < 1e-12);
        let itl = k.step_overhead_seconds
            + 100.0 * k.decode_sequence_seconds
            + 30_000.0 * k.kv_read_token_seconds;
        assert!((c.expected_itl(100.0, 300.0) - itl).abs() < 1e-12);
        assert_eq!(c.expected_itl(0.0, 300.0), c.expected_itl(1.0, 300.0));
    }
}
