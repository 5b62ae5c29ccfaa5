//! The fluid engine's step loop: the steady state of vLLM V1's scheduler (module `request`
//! runs it request by request) serving a constant rate of one mix, in closed form, on the same
//! cost model and limits.
//!
//! At `λ` requests/s each step of `T` seconds computes the prompt chunks that arrived and one
//! token of every decoding request. With `w` the step time one request adds over its life (its
//! prompt's compute, and each output token's share of a decode step), `T = c0 + λ·T·w`, so
//! `T = c0 / (1 − λw)`. Little's law gives the batch (`λ·T` per step a request stays), and
//! the capacity is the largest `λ` whose batch fits `max_num_seqs` and the KV pool and whose
//! steps fit the token budget.
//!
//! Gaps are not all alike: a step that carries a prompt chunk (a share `f` of the steps, the
//! prompts arriving as a Poisson stream) takes the decode step plus the chunks' compute. That
//! is what a request's own p95 gap sees, and what a step mean hides.

use super::WorkKind;
use super::request::{RequestProfile, StepWork};
use crate::load::Arrivals;

/// The mean request of a step's pool.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Mix {
    pub prompt: f64,
    pub missed_prompt: f64,
    pub output: f64,
}

impl Mix {
    /// The mean request of `pool` (all zero when it is empty).
    pub fn of(pool: &Arrivals) -> Mix {
        if pool.requests <= 0.0 {
            return Mix::default();
        }
        Mix {
            prompt: pool.prompt_tokens / pool.requests,
            missed_prompt: pool.missed_prompt_tokens() / pool.requests,
            output: pool.output_tokens / pool.requests,
        }
    }
}

/// The step loop at one rate.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Steady {
    /// Mean step: what a request's mean gap (TPOT) reads.
    pub step_seconds: f64,
    /// A step of decodes only.
    pub decode_step_seconds: f64,
    /// A step that also carries prompt chunks (the mean of those that do).
    pub mixed_step_seconds: f64,
    /// Share of steps carrying a prompt chunk.
    pub mixed_share: f64,
    /// TTFT of the mix's request alone on an idle engine.
    pub ttft_floor_seconds: f64,
    /// The same with half and with twice its prompt (attention makes it grow faster than the
    /// prompt).
    pub ttft_floor_half_seconds: f64,
    pub ttft_floor_double_seconds: f64,
    /// Mean TTFT once scheduled: the step under way, then its chunks' steps.
    pub ttft_seconds: f64,
    /// Requests in the batch (prefilling or decoding).
    pub running: f64,
    /// Share of time the engine computes prompts (`λ` times one prompt's compute).
    pub prefill_utilization: f64,
    /// One prompt's compute beyond the steps' fixed part.
    pub prefill_seconds: f64,
    /// Prompt chunks a step carries on average (a Poisson mean).
    pub chunks_per_step: f64,
    /// A chunk's mean tokens, and the step time each adds.
    pub chunk_tokens: f64,
    pub prefill_seconds_per_token: f64,
}

/// What one request of a mix costs the step loop.
struct Work {
    /// Prompt compute beyond the steps' fixed part.
    prefill_seconds: f64,
    /// Steps its prompt takes (0 on a decode engine).
    chunks: f64,
    /// Decode steps it is in.
    decodes: f64,
    /// One decode's share of a step.
    decode_seconds: f64,
    /// Tokens it holds in KV while decoding.
    held_tokens: f64,
}

impl Work {
    fn total(&self) -> f64 {
        self.prefill_seconds + self.decodes * self.decode_seconds
    }

    /// Steps a request stays in the batch.
    fn steps(&self) -> f64 {
        self.chunks + self.decodes
    }
}

/// Rounded token count, at least `min`.
fn tokens(value: f64, min: u64) -> u64 {
    if value.is_finite() && value > 0.0 {
        (value.round() as u64).max(min)
    } else {
        min
    }
}

fn work(profile: &RequestProfile, kind: WorkKind, mix: &Mix) -> Work {
    let cost = &profile.cost;
    let budget = profile.limits.max_num_batched_tokens.max(1);
    let prompt = tokens(mix.prompt, 1);
    let missed = tokens(mix.missed_prompt, 1).min(prompt);
    let (prefill_seconds, chunks) = if kind == WorkKind::Decode {
        (0.0, 0.0)
    } else {
        let chunks = missed.div_ceil(budget) as f64;
        let seconds = cost.prefill_seconds(prompt, prompt - missed, budget);
        (
            (seconds - chunks * cost.step_overhead_seconds).max(0.0),
            chunks,
        )
    };
    let output = mix.output.max(0.0);
    let decodes = match kind {
        WorkKind::Prefill => 0.0,
        // The first token is sampled at the end of the prompt's last chunk.
        WorkKind::Server => (output - 1.0).max(0.0),
        WorkKind::Decode => output.max(1.0),
    };
    let context = prompt as f64 + output / 2.0;
    let decode_seconds =
        cost.step_seconds(&StepWork::decode(1, tokens(context, 1))) - cost.step_overhead_seconds;
    Work {
        prefill_seconds,
        chunks,
        decodes,
        decode_seconds: decode_seconds.max(0.0),
        held_tokens: context,
    }
}

/// TTFT alone on an idle engine of a request like `mix` with its prompt `scale` times as long.
fn idle_ttft(profile: &RequestProfile, kind: WorkKind, mix: &Mix, scale: f64) -> f64 {
    let mix = Mix {
        prompt: mix.prompt * scale,
        missed_prompt: mix.missed_prompt * scale,
        output: mix.output,
    };
    let w = work(profile, kind, &mix);
    let c0 = profile.cost.step_overhead_seconds;
    match kind {
        WorkKind::Decode => c0 + w.decode_seconds,
        _ => w.chunks * c0 + w.prefill_seconds,
    }
}

/// Requests per second an engine of `profile` serves of `mix`: the largest rate whose batch
/// fits `max_num_seqs` and the KV pool and whose steps fit the token budget.
pub fn capacity(profile: &RequestProfile, kind: WorkKind, mix: &Mix) -> f64 {
    let w = work(profile, kind, mix);
    let c0 = profile.cost.step_overhead_seconds;
    let kv_tokens = f64::from(profile.limits.kv_blocks) * super::request::BLOCK_TOKENS as f64;
    let seqs = (profile.limits.max_num_seqs as f64).min(kv_tokens / w.held_tokens.max(1.0));
    let budget = profile.limits.max_num_batched_tokens as f64;
    let tokens_each = if kind == WorkKind::Decode {
        w.decodes
    } else {
        mix.missed_prompt.max(1.0) + w.decodes
    };
    // λ·T·steps ≤ seqs and λ·T·tokens ≤ budget, with T = c0 / (1 − λw).
    let by_batch = seqs / (w.steps() * c0 + seqs * w.total());
    let by_budget = budget / (tokens_each * c0 + budget * w.total());
    let cap = by_batch.min(by_budget);
    if cap.is_finite() && cap > 0.0 {
        cap
    } else {
        0.0
    }
}

/// The step loop of an engine of `profile` serving `rate` requests/s of `mix` (at most its
/// [`capacity`]).
pub fn steady(profile: &RequestProfile, kind: WorkKind, mix: &Mix, rate: f64) -> Steady {
    let w = work(profile, kind, mix);
    let c0 = profile.cost.step_overhead_seconds;
    let lambda = rate.clamp(0.0, capacity(profile, kind, mix));
    let step = c0 / (1.0 - lambda * w.total()).max(1e-9);
    let decode_step = c0 + lambda * step * w.decodes * w.decode_seconds;
    let per_step_prefill = lambda * step * w.prefill_seconds;
    let mixed_share = if w.prefill_seconds > 0.0 && w.decodes > 0.0 {
        1.0 - (-lambda * step * w.chunks.max(1.0)).exp()
    } else {
        0.0
    };
    let mixed_step = if mixed_share > 1e-12 {
        decode_step + per_step_prefill / mixed_share
    } else {
        decode_step + w.prefill_seconds / w.chunks.max(1.0)
    };
    let running = lambda * step * w.steps();
    let floor = idle_ttft(profile, kind, mix, 1.0);
    // A request arriving while a step runs waits for its end: the step's residual life,
    // weighted by the chance the loop is busy at all.
    let second_moment =
        mixed_share * mixed_step * mixed_step + (1.0 - mixed_share) * decode_step * decode_step;
    let busy = 1.0 - (-running).exp();
    let residual = busy * second_moment / (2.0 * step);
    let ttft = match kind {
        WorkKind::Decode => residual + step,
        _ => residual + w.chunks * (decode_step + per_step_prefill) + w.prefill_seconds,
    };
    let missed = mix.missed_prompt.max(1.0);
    Steady {
        prefill_utilization: (lambda * w.prefill_seconds).clamp(0.0, 1.0),
        prefill_seconds: w.prefill_seconds,
        chunks_per_step: if w.prefill_seconds > 0.0 {
            lambda * step * w.chunks
        } else {
            0.0
        },
        chunk_tokens: missed / w.chunks.max(1.0),
        prefill_seconds_per_token: w.prefill_seconds / missed,
        step_seconds: step,
        decode_step_seconds: decode_step,
        mixed_step_seconds: mixed_step,
        mixed_share,
        ttft_floor_seconds: floor,
        ttft_floor_half_seconds: idle_ttft(profile, kind, mix, 0.5),
        ttft_floor_double_seconds: idle_ttft(profile, kind, mix, 2.0),
        ttft_seconds: ttft.max(floor),
        running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> RequestProfile {
        RequestProfile::llama3_8b_h100_vllm()
    }

    const CHAT: Mix = Mix {
        prompt: 850.0,
        missed_prompt: 850.0,
        output: 90.0,
    };

    #[test]
    fn an_idle_engine_reads_the_idle_costs() {
        let p = h100();
        let s = steady(&p, WorkKind::Server, &CHAT, 0.0);
        let prefill = p.cost.prefill_seconds(850, 0, 8192);
        assert!((s.ttft_floor_seconds - prefill).abs() < 1e-12);
        assert!((s.ttft_seconds - prefill).abs() < 1e-12);
        assert_eq!(s.step_seconds, p.cost.step_overhead_seconds);
        assert_eq!(s.mixed_share, 0.0);
        assert_eq!(s.running, 0.0);
    }

    #[test]
    fn steps_lengthen_and_stall_more_as_the_rate_nears_capacity() {
        let p = h100();
        let cap = capacity(&p, WorkKind::Server, &CHAT);
        let mut last = steady(&p, WorkKind::Server, &CHAT, 0.0);
        for share in [0.2, 0.4, 0.6, 0.8, 0.95, 1.0] {
            let s = steady(&p, WorkKind::Server, &CHAT, share * cap);
            assert!(s.step_seconds > last.step_seconds, "{share}");
            assert!(s.mixed_share > last.mixed_share, "{share}");
            assert!(s.mixed_step_seconds > s.decode_step_seconds);
            assert!(s.ttft_seconds >= last.ttft_seconds);
            // The mean step is the mixture of its two kinds.
            let mean = s.mixed_share * s.mixed_step_seconds
                + (1.0 - s.mixed_share) * s.decode_step_seconds;
            assert!((mean - s.step_seconds).abs() < 1e-9 * s.step_seconds);
            last = s;
        }
        // Beyond capacity nothing more is served: the steady state is capacity's.
        assert_eq!(steady(&p, WorkKind::Server, &CHAT, 10.0 * cap), last);
    }

    #[test]
    fn capacity_is_where_the_batch_or_the_budget_binds() {
        let p = h100();
        for (kind, mix) in [
            (WorkKind::Server, CHAT),
            (WorkKind::Prefill, CHAT),
            (WorkKind::Decode, CHAT),
            (
                WorkKind::Server,
                Mix {
                    prompt: 12_000.0,
                    missed_prompt: 12_000.0,
                    output: 20.0,
                },
            ),
        ] {
            let cap = capacity(&p, kind, &mix);
            let s = steady(&p, kind, &mix, cap);
            let w = work(&p, kind, &mix);
            let tokens = if kind == WorkKind::Decode {
                w.decodes
            } else {
                mix.missed_prompt + w.decodes
            };
            let kv_seqs = f64::from(p.limits.kv_blocks) * 16.0 / w.held_tokens;
            let seqs = kv_seqs.min(1024.0);
            let budget_used = cap * s.step_seconds * tokens;
            assert!(budget_used <= 8192.0 * (1.0 + 1e-9), "{kind:?}");
            assert!(s.running <= seqs * (1.0 + 1e-9), "{kind:?}");
            let binds = (budget_used - 8192.0).abs() < 1e-6 * 8192.0
                || (s.running - seqs).abs() < 1e-6 * seqs;
            assert!(binds, "{kind:?}: the budget or the batch binds at capacity");
        }
    }

    #[test]
    fn a_decode_engine_never_stalls_on_prompts() {
        let p = h100();
        let cap = capacity(&p, WorkKind::Decode, &CHAT);
        let s = steady(&p, WorkKind::Decode, &CHAT, 0.5 * cap);
        assert_eq!(s.mixed_share, 0.0);
        assert_eq!(s.decode_step_seconds, s.step_seconds);
    }
}
