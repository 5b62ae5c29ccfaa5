//! The SLO as the scaler's user sets it, and how each request is graded against it.
//!
//! - TTFT: within the objective, which is fixed (`500ms`), grows with the prompt (`500ms+100ms/1k`:
//!   a base plus an allowance per 1,000 prompt tokens), or is a multiple of the request's own
//!   TTFT on an idle replica (`--slo-scale K`, DistServe's "SLO scale").
//! - ITL: `itlTargetMilliseconds` is a p95 of the engine's inter-token histogram (one
//!   observation per output step in vLLM), so by default a request attains when its own p95
//!   gap is within the objective: at most 5 % of its gaps may be stalls. The lenient reading,
//!   the request's mean gap (TPOT), is reported beside it and selectable.
//! - Unattainable at any scale: a request whose TTFT on an idle replica of the profile (its
//!   prompt alone, prefix hits counted as the trace gives them) already exceeds its objective,
//!   whose decode step alone at its context exceeds the ITL objective, or that the engine
//!   refuses (longer than the model's context). No count of replicas serves it in time.

mod classes;
mod fluid;

use std::sync::Arc;

use mds_sim::engine::request::{RequestProfile, StepWork};
use mds_sim::load::{Trace, TraceRequest};
use serde::Serialize;

pub use classes::{MAX_CLASSES, TtftClass, TtftClasses};
pub use fluid::{FluidShares, LOAD_BIN_SECONDS, PromptSpread, binomial_at_most, prompt_shape};

/// How a request's inter-token latency is read against the ITL objective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ItlReading {
    /// Its own p95 gap between output tokens, as the engine's histogram records them.
    #[default]
    P95,
    /// Its mean gap (TPOT): hides stalls a user sees.
    Mean,
}

impl ItlReading {
    pub fn parse(text: &str) -> Option<ItlReading> {
        match text {
            "p95" => Some(ItlReading::P95),
            "mean" => Some(ItlReading::Mean),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ItlReading::P95 => "p95",
            ItlReading::Mean => "mean",
        }
    }
}

/// The latency objectives a request is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Slo {
    /// The TTFT objective's base, seconds (the whole objective without an allowance).
    pub ttft_seconds: f64,
    /// Seconds the TTFT objective grows per 1,000 prompt tokens.
    #[serde(skip_serializing_if = "is_zero")]
    pub ttft_per_1k_prompt_seconds: f64,
    /// The TTFT objective as this multiple of the request's idle-replica TTFT, instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_scale: Option<f64>,
    /// Longer prompts' own TTFT objectives (`--slo-ttft 500ms,4k=2s`), above the base.
    #[serde(skip_serializing_if = "TtftClasses::is_empty")]
    pub ttft_classes: TtftClasses,
    pub itl_seconds: f64,
    pub itl_reading: ItlReading,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            ttft_seconds: 0.5,
            ttft_per_1k_prompt_seconds: 0.0,
            ttft_scale: None,
            ttft_classes: TtftClasses::default(),
            itl_seconds: 0.05,
            itl_reading: ItlReading::P95,
        }
    }
}

fn ms(seconds: f64) -> String {
    format!("{}", (seconds * 1000.0 * 100.0).round() / 100.0)
}

impl Slo {
    /// `TIME` or `TIME+TIME/1k` (a base plus an allowance per 1,000 prompt tokens), as
    /// `--slo-ttft` takes it: the base and the allowance in seconds.
    pub fn parse_ttft(text: &str) -> Result<(f64, f64), String> {
        let (base, allowance) = match text.split_once('+') {
            Some((base, allowance)) => {
                let Some(per) = allowance.trim().strip_suffix("/1k") else {
                    return Err("an allowance is TIME/1k, a time per 1,000 prompt tokens, as in 500ms+100ms/1k".into());
                };
                let per = latency(per).map_err(|rule| format!("the allowance {per:?}: {rule}"))?;
                (base, per)
            }
            None => (text, 0.0),
        };
        let base = latency(base)?;
        if base <= 0.0 {
            return Err("a duration must be positive".into());
        }
        Ok((base, allowance))
    }

    /// `TIME[+TIME/1k][,TOKENS=TIME[+TIME/1k]...]`, as `--slo-ttft` takes it: the base
    /// objective and the prompt classes above it.
    pub fn parse_ttft_classes(text: &str) -> Result<((f64, f64), TtftClasses), String> {
        let mut items = text.split(',');
        let base = Slo::parse_ttft(items.next().unwrap_or_default())?;
        let rest: Vec<&str> = items.collect();
        Ok((base, TtftClasses::parse(&rest)?))
    }

    /// Whether requests have objectives of their own (an allowance, prompt classes, a
    /// scale), so a flat line cannot show the SLO.
    pub fn objective_varies(&self) -> bool {
        self.ttft_per_1k_prompt_seconds > 0.0
            || self.ttft_scale.is_some()
            || !self.ttft_classes.is_empty()
    }

    /// What a request must meet, in words, for every table's header.
    pub fn describe(&self) -> String {
        let objective = |base: f64, per_1k: f64| {
            if per_1k > 0.0 {
                format!("{} ms + {} ms per 1k prompt tokens", ms(base), ms(per_1k))
            } else {
                format!("{} ms", ms(base))
            }
        };
        let classes: Vec<String> = self
            .ttft_classes
            .iter()
            .map(|c| {
                format!(
                    "{} from {} prompt tokens",
                    objective(c.seconds, c.per_1k_prompt_seconds),
                    c.from_prompt_tokens
                )
            })
            .collect();
        let ttft = match self.ttft_scale {
            Some(k) => format!("TTFT <= {k}x its idle-replica TTFT"),
            None if !classes.is_empty() => format!(
                "TTFT <= {}, {}",
                objective(self.ttft_seconds, self.ttft_per_1k_prompt_seconds),
                classes.join(", ")
            ),
            None => format!(
                "TTFT <= {}",
                objective(self.ttft_seconds, self.ttft_per_1k_prompt_seconds)
            ),
        };
        let itl = match self.itl_reading {
            ItlReading::P95 => format!("its p95 inter-token gap <= {} ms", ms(self.itl_seconds)),
            ItlReading::Mean => format!("its mean ITL <= {} ms", ms(self.itl_seconds)),
        };
        format!("{ttft} and {itl}")
    }
}

/// A latency objective in seconds. It needs its unit: a bare `500` is far more often meant as
/// 500 ms than as the 500 s it would read as (and a bare `2` as 2 s), so it is refused with
/// the suggestion its size makes.
pub fn latency(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err("a duration must be positive".into());
    }
    if let Ok(number) = trimmed.parse::<f64>() {
        // Latency objectives are tens of milliseconds to a few seconds: a small number was
        // meant as seconds, a large one as milliseconds.
        let unit = if number < 20.0 { "s" } else { "ms" };
        return Err(format!(
            "a latency needs its unit (ms, s): did you mean {trimmed}{unit}?"
        ));
    }
    mds_sim::load::parse_seconds(trimmed)
}

/// One replica of the profile with nothing else to do: the floor no scale goes below.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleReplica {
    pub profile: RequestProfile,
    /// Seconds per prompt token of the KV hand-off, when prefill and decode are disaggregated.
    pub handoff_seconds_per_token: Option<f64>,
}

impl IdleReplica {
    /// A request's TTFT alone on an idle replica: its uncached prompt (the trace's prefix hits
    /// cached, as an unbounded cache would hold them) in chunks of the step budget, then
    /// (disaggregated) the hand-off and the decode engine's first step.
    pub fn ttft_seconds(&self, r: &TraceRequest) -> f64 {
        self.ttft_with_hits(r, u64::from(r.prefix_hit_tokens))
    }

    /// The same with nothing cached.
    pub fn cold_ttft_seconds(&self, r: &TraceRequest) -> f64 {
        self.ttft_with_hits(r, 0)
    }

    fn ttft_with_hits(&self, r: &TraceRequest, hits: u64) -> f64 {
        let cost = &self.profile.cost;
        let prompt = u64::from(r.prompt_tokens);
        let mut seconds =
            cost.prefill_seconds(prompt, hits, self.profile.limits.max_num_batched_tokens);
        if let Some(per_token) = self
            .handoff_seconds_per_token
            .filter(|_| r.output_tokens > 1)
        {
            // The decode engine computes the last prompt token over the transferred KV.
            seconds += prompt as f64 * per_token
                + cost.step_seconds(&StepWork::prefill_chunk(prompt.saturating_sub(1), 1));
        }
        seconds
    }

    /// A request's inter-token gap alone on an idle replica, as `reading` reads it: one decode
    /// step at its context near the end (p95) or half way through its output (mean).
    pub fn itl_seconds(&self, r: &TraceRequest, reading: ItlReading) -> f64 {
        let output = f64::from(r.output_tokens);
        let context = f64::from(r.prompt_tokens)
            + match reading {
                ItlReading::P95 => 0.95 * output,
                ItlReading::Mean => 0.5 * output,
            };
        self.profile
            .cost
            .step_seconds(&StepWork::decode(1, context as u64))
    }

    /// The engine refuses it: empty, or prompt and output over the model's context.
    pub fn refuses(&self, r: &TraceRequest) -> bool {
        Self::refused_by(&self.profile, r)
    }

    /// An engine of `profile` refuses `r`.
    pub fn refused_by(profile: &RequestProfile, r: &TraceRequest) -> bool {
        let longest = profile.limits.longest_request();
        r.prompt_tokens == 0 || u64::from(r.prompt_tokens) + u64::from(r.output_tokens) > longest
    }
}

/// The trace's requests an engine of the profile refuses (an empty prompt, or prompt and
/// output over its context), said with the profile that would take them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refusals {
    pub requests: u64,
    pub share: f64,
    /// The profile's context: prompt and output together, tokens.
    pub context_tokens: u64,
    /// The longest refused request's prompt and output.
    pub longest_tokens: u64,
    /// The profile of the same engine and GPU whose context takes the most of them, and how
    /// many it takes.
    pub fits: Option<(String, u64)>,
}

impl Refusals {
    /// `None` when the profile takes every request.
    pub fn of(trace: &Trace, profile: &mds_sim::profile::Profile) -> Option<Refusals> {
        let refused: Vec<u64> = trace
            .requests
            .iter()
            .filter(|r| IdleReplica::refused_by(&profile.request, r))
            .map(|r| u64::from(r.prompt_tokens) + u64::from(r.output_tokens))
            .collect();
        if refused.is_empty() {
            return None;
        }
        let longest = refused.iter().copied().max().unwrap_or(0);
        let limits = &profile.request.limits;
        Some(Refusals {
            requests: refused.len() as u64,
            share: refused.len() as f64 / trace.requests.len().max(1) as f64,
            context_tokens: limits.longest_request(),
            longest_tokens: longest,
            fits: mds_sim::profile::profiles()
                .into_iter()
                .filter(|p| {
                    // The same engine on the same GPUs; a superseded profile (serving no
                    // model) is never the advice.
                    p.engine == profile.engine
                        && p.gpu == profile.gpu
                        && p.gpus_per_pod == profile.gpus_per_pod
                        && !p.serves.is_empty()
                        && p.request.limits.longest_request() > limits.longest_request()
                })
                .map(|p| {
                    let context = p.request.limits.longest_request();
                    (
                        p.name.to_string(),
                        refused.iter().filter(|&&t| t <= context).count() as u64,
                    )
                })
                .filter(|(_, takes)| *takes > 0)
                .max_by_key(|(_, takes)| *takes),
        })
    }

    /// The summary's words.
    pub fn describe(&self, profile: &str) -> String {
        let fix = match &self.fits {
            Some((name, takes)) if *takes == self.requests => {
                format!("; --profile {name} takes them all")
            }
            Some((name, takes)) => format!("; --profile {name} takes {takes} of them"),
            None => "; no profile takes them".into(),
        };
        format!(
            "{} request{} ({:.1} %): prompt and output over {profile}'s {}-token context (the \
             longest {} tokens){fix}",
            self.requests,
            if self.requests == 1 { "" } else { "s" },
            self.share * 100.0,
            self.context_tokens,
            self.longest_tokens
        )
    }
}

/// Each offered request's TTFT objective, and whether any scale can meet its SLO.
#[derive(Clone, Debug, PartialEq)]
pub struct Grader {
    pub slo: Slo,
    /// Per request of the trace, by id: its TTFT objective and whether it is unattainable.
    objectives: Arc<[(f64, bool)]>,
    /// How the load's cache-missed prompt lengths spread, for grading fluid steps.
    pub prompts: PromptSpread,
}

impl Grader {
    /// Objectives for every request of `trace` on `idle` (`None`: the fluid engine, whose
    /// requests are not individual; every objective is the base and none is unattainable).
    pub fn new(slo: Slo, trace: Option<&Trace>, idle: Option<&IdleReplica>) -> Grader {
        let objectives = match (trace, idle) {
            (Some(trace), Some(idle)) => trace
                .requests
                .iter()
                .map(|r| {
                    let idle_ttft = idle.ttft_seconds(r);
                    let objective = slo.ttft_objective(f64::from(r.prompt_tokens), idle_ttft);
                    let unattainable = idle.refuses(r)
                        || idle_ttft > objective
                        || (r.output_tokens > 1
                            && idle.itl_seconds(r, slo.itl_reading) > slo.itl_seconds);
                    (objective, unattainable)
                })
                .collect(),
            _ => Arc::from(Vec::new()),
        };
        Grader {
            slo,
            objectives,
            prompts: trace.map_or_else(PromptSpread::default, PromptSpread::of),
        }
    }

    /// Request `id`'s TTFT objective.
    pub fn ttft_objective(&self, id: u64) -> f64 {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.objectives.get(i))
            .map_or(self.slo.ttft_seconds, |o| o.0)
    }

    /// Request `id` cannot meet its SLO at any scale.
    pub fn unattainable(&self, id: u64) -> bool {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.objectives.get(i))
            .is_some_and(|o| o.1)
    }

    /// Requests of the trace no scale serves within the SLO.
    pub fn unattainable_count(&self) -> usize {
        self.objectives.iter().filter(|o| o.1).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: u32, output: u32) -> TraceRequest {
        TraceRequest {
            at_seconds: 0.0,
            prompt_tokens: prompt,
            output_tokens: output,
            prefix_hit_tokens: 0,
            block_hashes: None,
        }
    }

    #[test]
    fn an_allowance_parses_and_a_malformed_one_names_the_rule() {
        assert_eq!(Slo::parse_ttft("500ms"), Ok((0.5, 0.0)));
        assert_eq!(Slo::parse_ttft("500ms+100ms/1k"), Ok((0.5, 0.1)));
        assert_eq!(Slo::parse_ttft("1s + 0.2s/1k"), Ok((1.0, 0.2)));
        for bad in ["500ms+100ms", "500ms+x/1k", "0+1s/1k", "+1s/1k", "-1s"] {
            assert!(Slo::parse_ttft(bad).is_err(), "{bad}");
        }
        assert!(
            Slo::parse_ttft("500ms+100ms")
                .unwrap_err()
                .contains("500ms+100ms/1k")
        );
    }

    #[test]
    fn idle_ttft_by_hand_for_the_8b_profile() {
        // 8B: O 9.42 ms, P 38.6 µs per prompt token, A 1.26 ns per attention pair, K 72.8 ns
        // per context token, 8,192-token steps. 1,000 tokens: 9.42 + 38.60 + 0.63 + 0.07 ms
        // = 48.72 ms. 10,000 tokens: a step of 8,192 (9.42 + 316.2 + 42.3 + 0.6 ms) then
        // 1,808 after it (9.42 + 69.8 + 20.7 + 0.7 ms) = 469.1 ms.
        let idle = IdleReplica {
            profile: RequestProfile::llama3_8b_h100_vllm(),
            handoff_seconds_per_token: None,
        };
        let t = idle.ttft_seconds(&request(1000, 10));
        assert!((t - 0.048_72).abs() < 1e-5, "{t}");
        let t = idle.ttft_seconds(&request(10_000, 10));
        assert!((t - 0.4691).abs() < 1e-3, "{t}");
        // A prefix hit is not computed.
        let mut hit = request(1000, 10);
        hit.prefix_hit_tokens = 512;
        assert!(idle.ttft_seconds(&hit) < 0.035);
    }

    #[test]
    fn objectives_grow_with_the_prompt_and_long_prompts_are_unattainable() {
        let idle = IdleReplica {
            profile: RequestProfile::llama3_8b_h100_vllm(),
            handoff_seconds_per_token: None,
        };
        let trace = Trace {
            requests: vec![request(1000, 100), request(7000, 100), request(9000, 100)],
        };
        // Fixed 200 ms: the 7,000-token prompt (about 300 ms idle) cannot make it; the
        // 9,000-token request is over the 8k context.
        let fixed = Slo {
            ttft_seconds: 0.2,
            ..Slo::default()
        };
        let g = Grader::new(fixed, Some(&trace), Some(&idle));
        assert_eq!(
            (g.unattainable(0), g.unattainable(1), g.unattainable(2)),
            (false, true, true)
        );
        assert_eq!(g.unattainable_count(), 2);
        // 200 ms + 100 ms per 1k: 900 ms for 7,000 tokens.
        let grows = Slo {
            ttft_per_1k_prompt_seconds: 0.1,
            ..fixed
        };
        let g = Grader::new(grows, Some(&trace), Some(&idle));
        assert!((g.ttft_objective(1) - 0.9).abs() < 1e-12);
        assert!(!g.unattainable(1));
        // Twice the idle TTFT.
        let scaled = Slo {
            ttft_scale: Some(2.0),
            ..fixed
        };
        let g = Grader::new(scaled, Some(&trace), Some(&idle));
        assert!((g.ttft_objective(0) - 2.0 * idle.ttft_seconds(&trace.requests[0])).abs() < 1e-12);
        assert_eq!(g.unattainable_count(), 1, "only the refused one");
        // An ITL objective under one idle decode step (9.5 ms) is unattainable for all.
        let tight = Slo {
            itl_seconds: 0.005,
            ..Slo::default()
        };
        assert_eq!(
            Grader::new(tight, Some(&trace), Some(&idle)).unattainable_count(),
            3
        );
    }
}
