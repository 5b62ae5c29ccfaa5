//! One capacity, every policy's per-replica target. A comparison is fair only when every
//! scaler is configured from the same idea of what one replica serves; the scaler under test
//! states it once, as a token capacity (TokenThroughput, Predictive) or as a request target
//! (Proportional), and the other form follows from Little's law on the trace and the engine
//! profile:
//!
//! - a replica at capacity `C` tokens/s serves `λ = C / t` requests/s, `t` being the mean
//!   tokens per request the role's kind counts (cache-missed prompt for prefill, output for
//!   decode, both for a server);
//! - each request spends `W` in the replica: its prefill (`overhead + prompt × per-token
//!   prefill time`) and, unless the role only prefills, `output × ITL(B)`, where `ITL(B)` is
//!   one decode step of a batch of `B` at the mean context, stretched by the share of GPU time
//!   prefill takes (`λ × missed prompt × per-token prefill time`);
//! - the request target is the concurrency `Q = λ × W(Q)` (a fixed point, at most the
//!   engine's batch limit), and the capacity of a request target `Q` is `C = λ × t` with
//!   `λ = Q / W`.

use std::collections::BTreeMap;

use mds_api::spec::ProportionalMetric;
use mds_api::target::{ModelDeployment, RoleKind};
use mds_planner::Policy;
use mds_planner::policy::AlgorithmPolicy;
use mds_sim::load::Trace;
use mds_sim::profile::Profile;

use crate::peers::Targets;
use crate::report::Slo;

/// Means of the trace's requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceMeans {
    pub prompt: f64,
    pub missed_prompt: f64,
    pub output: f64,
}

impl TraceMeans {
    pub fn of(trace: &Trace) -> TraceMeans {
        let n = trace.requests.len().max(1) as f64;
        let sum = |f: &dyn Fn(&mds_sim::load::TraceRequest) -> u32| {
            trace.requests.iter().map(|r| f64::from(f(r))).sum::<f64>() / n
        };
        TraceMeans {
            prompt: sum(&|r| r.prompt_tokens),
            missed_prompt: sum(&|r| r.prompt_tokens.saturating_sub(r.prefix_hit_tokens)),
            output: sum(&|r| r.output_tokens),
        }
    }

    /// Tokens per request a role of `kind` counts.
    pub fn tokens(&self, kind: &RoleKind) -> f64 {
        crate::oracle::demand_of(kind, self.missed_prompt, self.output)
    }
}

/// Seconds a request spends in a replica of `kind` serving `rate` requests/s with `batch`
/// requests decoding together.
fn residence(profile: &Profile, means: &TraceMeans, kind: &RoleKind, rate: f64, batch: f64) -> f64 {
    let cost = &profile.request.cost;
    let prefill = cost.step_overhead_seconds + means.missed_prompt * cost.prefill_token_seconds;
    // A server replica prefills too, which stretches its decode steps; a decode replica
    // only decodes.
    let prefill_share = match kind {
        RoleKind::Decode => 0.0,
        _ => (rate * means.missed_prompt * cost.prefill_token_seconds).min(0.9),
    };
    let b = batch.max(1.0);
    let context = means.prompt + means.output / 2.0;
    let step = cost.step_overhead_seconds
        + b * cost.decode_sequence_seconds
        + b * context * cost.kv_read_token_seconds;
    let decode = means.output * step / (1.0 - prefill_share);
    match kind {
        RoleKind::Prefill | RoleKind::Encode => prefill,
        RoleKind::Decode => decode,
        RoleKind::Server | RoleKind::Unknown(_) => prefill + decode,
    }
}

/// The request target (running plus waiting per replica) at a token capacity.
pub fn queue_depth_at(
    profile: &Profile,
    means: &TraceMeans,
    kind: &RoleKind,
    capacity: f64,
) -> f64 {
    let tokens = means.tokens(kind).max(1.0);
    let rate = capacity / tokens;
    let limit = profile.request.limits.max_num_seqs as f64;
    let mut q = 1.0;
    for _ in 0..100 {
        q = (rate * residence(profile, means, kind, rate, q)).clamp(0.0, limit);
    }
    q
}

/// The token capacity of a request target.
pub fn capacity_at(
    profile: &Profile,
    means: &TraceMeans,
    kind: &RoleKind,
    queue_depth: f64,
) -> f64 {
    let tokens = means.tokens(kind).max(1.0);
    let mut rate = 0.0;
    for _ in 0..100 {
        rate = queue_depth / residence(profile, means, kind, rate, queue_depth).max(1e-9);
    }
    rate * tokens
}

/// Every policy's per-replica targets, from the scaler's algorithm (module documentation).
pub fn derive(
    policy: &Policy,
    target: &ModelDeployment,
    trace: &Trace,
    profile: &Profile,
    slo: Slo,
) -> Result<Targets, String> {
    let means = TraceMeans::of(trace);
    let mut out = Targets {
        queue_depth: BTreeMap::new(),
        tokens_per_second: BTreeMap::new(),
        ttft_seconds: slo.ttft_seconds,
        itl_seconds: slo.itl_seconds,
    };
    for (index, role) in policy.roles.iter().enumerate() {
        if !target.spec.roles.iter().any(|r| r.name == role.name) {
            continue;
        }
        let kind = &role.kind;
        let (capacity, queue) = match &policy.algorithm {
            AlgorithmPolicy::TokenThroughput(t) => (t.capacities.for_kind(kind), None),
            AlgorithmPolicy::Predictive(p) => (p.capacities.for_kind(kind), None),
            AlgorithmPolicy::Proportional {
                metric, targets, ..
            } => {
                let value = targets.get(index).copied().flatten().map(|d| d.to_f64());
                match metric {
                    ProportionalMetric::QueueDepth
                    | ProportionalMetric::RunningRequests
                    | ProportionalMetric::WaitingRequests => (None, value),
                    ProportionalMetric::PromptTokensPerSecond
                    | ProportionalMetric::GenerationTokensPerSecond
                    | ProportionalMetric::TotalTokensPerSecond => (value, None),
                }
            }
        };
        let (capacity, queue) = match (capacity, queue) {
            (Some(c), _) => (c, queue_depth_at(profile, &means, kind, c)),
            (None, Some(q)) => (capacity_at(profile, &means, kind, q), q),
            // A role scaled through a ratio has no target of its own.
            (None, None) => continue,
        };
        out.tokens_per_second.insert(role.name.clone(), capacity);
        out.queue_depth.insert(role.name.clone(), queue.max(1.0));
    }
    if out.tokens_per_second.is_empty() {
        return Err("the scaler gives no role a per-replica target to compare from".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn means() -> TraceMeans {
        TraceMeans {
            prompt: 1155.0,
            missed_prompt: 1155.0,
            output: 211.0,
        }
    }

    #[test]
    fn littles_law_by_hand_for_the_8b_profile() {
        // 4000 tokens/s over 1366 tokens a request: 2.93 requests/s. Prefill 10.2 ms + 1155 ×
        // 40 µs = 56.4 ms; prefill takes 13.5 % of the GPU; a decode step of ~8 at a 1260-token
        // context is 10.2 ms + 8 × 1260 × 70 ns = 10.9 ms, 12.6 ms stretched; 211 of them is
        // 2.66 s. Q = 2.93 × 2.72 ≈ 8.0.
        let profile = mds_sim::profile::profile("llama3-8b-h100-vllm").unwrap();
        let q = queue_depth_at(&profile, &means(), &RoleKind::Server, 4000.0);
        assert!((7.5..8.5).contains(&q), "{q}");
        // And back.
        let c = capacity_at(&profile, &means(), &RoleKind::Server, q);
        assert!((c - 4000.0).abs() < 1.0, "{c}");
        // A prefill replica holds a request only for its prefill.
        let p = queue_depth_at(&profile, &means(), &RoleKind::Prefill, 20_000.0);
        assert!(p < 1.5, "{p}");
        // A decode replica at 600 tokens/s of 211-token outputs: 2.84 requests/s, each 211
        // steps of 10.2 ms + B × 1260 × 70 ns, so Q = 6.1 / (1 - 0.0526) ≈ 6.5.
        let d = queue_depth_at(&profile, &means(), &RoleKind::Decode, 600.0);
        assert!((6.0..7.0).contains(&d), "{d}");
    }
}
