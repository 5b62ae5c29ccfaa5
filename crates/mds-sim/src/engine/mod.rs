//! One serving engine process as a fluid queue (docs/SIMULATION.md has the formulas).
//!
//! Requests arrive as fractional amounts ([`Arrivals`]) and join a backlog. A step of `dt`
//! seconds serves up to `dt / u` requests, where `u` is the engine time one request of the
//! backlog's mix needs: its cache-missed prompt tokens over the prefill capacity plus its output
//! tokens over the decode capacity (a prefill engine does only the first part, a decode engine
//! only the second). Served requests add to the token counters at once; what is left waits.
//!
//! Latency and occupancy follow from the step's utilisation `ρ` (served over servable):
//! - ITL rises linearly from the unloaded `base_itl` to the full-batch step time
//!   `max(base_itl, max_running / decode_tokens_per_second)` as `ρ` goes from 0 to 1;
//! - TTFT is `base_ttft` plus the prefill time stretched by `1 / (1 − min(ρ, 0.95))` (an M/M/1
//!   style wait) plus the time to serve the backlog ahead (`waiting × u`); on a decode engine
//!   the prefill part is replaced by one decode step;
//! - each step's served requests stay in the running batch for their residence time (TTFT
//!   without the backlog wait, plus output length × ITL), so the batch holds served rate ×
//!   residence (Little's law) and a withdrawn engine empties within one residence time;
//! - KV usage is running requests × tokens each holds (prompt, plus half the output when the
//!   engine decodes) over the KV pool, at most 1.

mod batch;
pub mod gaps;
pub mod histogram;
pub mod request;
pub mod steps;

use jiff::Timestamp;
use mds_api::target::{Engine, RoleKind};

use crate::load::Arrivals;
use batch::Batch;
use histogram::{HistogramAcc, layouts};

/// The floor of a step's ITL observations as a share of their mean (never below the unloaded
/// ITL). A real engine's per-token ITL at a steady batch is tight, its p95 within about 1.5
/// times the mean; over `floor + Exp(mean - floor)` this share puts the p95 at about
/// `0.85 + ln 20 x 0.15 = 1.3` times the mean, where a floor at the unloaded ITL put it at three
/// times the mean's excess over that floor (75 to 100 ms at 23 % utilisation).
pub const ITL_FLOOR_SHARE: f64 = 0.85;

/// Capacity and unloaded latency of one engine instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineProfile {
    /// Cache-missed prompt tokens per second the instance prefills at full load.
    pub prefill_tokens_per_second: f64,
    /// Output tokens per second the instance generates with a full batch.
    pub decode_tokens_per_second: f64,
    /// Largest running batch (`--max-num-seqs`, `--max-running-requests`).
    pub max_running: f64,
    /// KV-cache pool in tokens.
    pub kv_cache_tokens: f64,
    /// TTFT of a lone request, without its prefill compute.
    pub base_ttft_seconds: f64,
    /// ITL of a lone request.
    pub base_itl_seconds: f64,
    /// The request-level profile whose step loop this engine runs in closed form (module
    /// [`steps`]): capacity, step times, stalls and TTFT from its cost model and limits, the
    /// fields above then only its pages' shape. `None`: the linear model of the module doc.
    pub steps: Option<request::RequestProfile>,
}

impl Default for EngineProfile {
    fn default() -> Self {
        EngineProfile {
            prefill_tokens_per_second: 20_000.0,
            decode_tokens_per_second: 2_500.0,
            max_running: 256.0,
            kv_cache_tokens: 500_000.0,
            base_ttft_seconds: 0.05,
            base_itl_seconds: 0.015,
            steps: None,
        }
    }
}

impl EngineProfile {
    /// Every field must be a positive, finite number.
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("prefill_tokens_per_second", self.prefill_tokens_per_second),
            ("decode_tokens_per_second", self.decode_tokens_per_second),
            ("max_running", self.max_running),
            ("kv_cache_tokens", self.kv_cache_tokens),
            ("base_ttft_seconds", self.base_ttft_seconds),
            ("base_itl_seconds", self.base_itl_seconds),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("{field} is {value}; it must be a positive number"));
            }
        }
        Ok(())
    }

    /// ITL with a full batch.
    fn full_batch_itl(&self) -> f64 {
        self.base_itl_seconds
            .max(self.max_running / self.decode_tokens_per_second)
    }
}

/// What work an engine does, from its role kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkKind {
    /// Prefill and decode (a `Server` role, and kinds the model does not know).
    Server,
    /// Prompt only; answers each request with one token (`Prefill`, and `Encode`).
    Prefill,
    /// Output only; the prompt's KV arrives from a prefill engine (`Decode`).
    Decode,
}

impl WorkKind {
    pub fn of(kind: &RoleKind) -> WorkKind {
        match kind {
            RoleKind::Prefill | RoleKind::Encode => WorkKind::Prefill,
            RoleKind::Decode => WorkKind::Decode,
            RoleKind::Server | RoleKind::Unknown(_) => WorkKind::Server,
        }
    }
}

/// Which exposition an engine serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EngineFlavor {
    /// vLLM 0.10.2: both KV-usage names, both prefix-hit names, both ITL names.
    Vllm010,
    /// vLLM 0.11: preferred names only (the legacy ITL name stays), plus the per-request
    /// time-per-output-token histogram.
    Vllm011,
    /// SGLang 0.5.18 or later, multiprocess collector.
    Sglang,
}

impl EngineFlavor {
    /// From `spec.engine`: vLLM `0.10*` → 0.10, any other vLLM → 0.11, SGLang → SGLang; other
    /// engines serve no page.
    pub fn of(engine: Option<&Engine>) -> Option<EngineFlavor> {
        let engine = engine?;
        match mds_api::target::EngineKind::from_name(&engine.name).ok()? {
            mds_api::target::EngineKind::Vllm => {
                let old = engine
                    .version
                    .as_deref()
                    .is_some_and(|v| v.trim_start_matches('v').starts_with("0.10"));
                Some(if old {
                    EngineFlavor::Vllm010
                } else {
                    EngineFlavor::Vllm011
                })
            }
            mds_api::target::EngineKind::Sglang => Some(EngineFlavor::Sglang),
        }
    }

    pub(crate) fn layouts(self) -> (&'static [f64], &'static [f64]) {
        match self {
            EngineFlavor::Vllm010 | EngineFlavor::Vllm011 => {
                (layouts::VLLM_TTFT, layouts::VLLM_ITL)
            }
            EngineFlavor::Sglang => (layouts::SGLANG_TTFT, layouts::SGLANG_ITL),
        }
    }
}

/// Token and request counters since the process started.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Counters {
    /// Prompt tokens, cached included.
    pub prompt_tokens: f64,
    /// Prompt tokens served from the prefix cache.
    pub prefix_hit_tokens: f64,
    pub generation_tokens: f64,
    pub requests: f64,
}

/// Latencies and load of the last step, for views and reports.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct StepSummary {
    pub served_requests_per_second: f64,
    pub utilization: f64,
    pub ttft_mean_seconds: f64,
    /// The mean gap between output tokens (a request's TPOT).
    pub itl_mean_seconds: f64,
    /// TTFT of the step's mean request alone on an idle engine: TTFTs spread over
    /// `floor + Exp(mean − floor)`.
    pub ttft_floor_seconds: f64,
    /// The idle TTFT with half and with twice the mean prompt.
    pub ttft_floor_half_seconds: f64,
    pub ttft_floor_double_seconds: f64,
    /// The step's mean request.
    pub prompt_tokens_each: f64,
    pub output_tokens_each: f64,
    /// Gaps of a step of decodes only, and of a step carrying prompt chunks, and the share of
    /// steps that carry them: what each request's own p95 gap reads.
    pub decode_step_seconds: f64,
    pub mixed_step_seconds: f64,
    pub mixed_share: f64,
    /// What a prompt-carrying step is made of: chunks per step (a Poisson mean), a chunk's
    /// mean tokens and the step time per token (zero for the linear model).
    pub chunks_per_step: f64,
    pub chunk_tokens: f64,
    pub prefill_seconds_per_token: f64,
    /// Most tokens a step computes.
    pub step_token_budget: f64,
    /// Share of time the engine computes prompts, and one prompt's compute: a prompt arriving
    /// while another computes waits for it (zero for the linear model).
    pub prefill_utilization: f64,
    pub prefill_seconds: f64,
}

/// Member `index`'s part of `members` whole parts of `floor(value)`: the parts add up to it
/// and each grows with it.
fn split_whole(value: f64, index: u32, members: u32) -> f64 {
    let total = value.max(0.0).floor();
    ((total + f64::from(members - 1 - index.min(members - 1))) / f64::from(members)).floor()
}

/// One engine process.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineState {
    pub flavor: EngineFlavor,
    pub kind: WorkKind,
    /// Process start: `process_start_time_seconds` and the `_created` marks.
    pub started_at: Timestamp,
    /// Requests (and their tokens) not yet scheduled.
    pub backlog: Arrivals,
    /// Requests in the running batch (at most `max_running` as reported).
    pub running: f64,
    batch: Batch,
    pub kv_usage: f64,
    pub counters: Counters,
    pub ttft: HistogramAcc,
    pub itl: HistogramAcc,
    /// vLLM 0.11's per-request mean time per output token (recorded at finish; not ITL).
    pub request_tpot: HistogramAcc,
    pub last: StepSummary,
    /// KV tokens a running request holds, from the last mix served.
    tokens_per_running: f64,
}

impl EngineState {
    pub fn new(flavor: EngineFlavor, kind: WorkKind, started_at: Timestamp) -> EngineState {
        let (ttft, itl) = flavor.layouts();
        EngineState {
            flavor,
            kind,
            started_at,
            backlog: Arrivals::default(),
            running: 0.0,
            batch: Batch::default(),
            kv_usage: 0.0,
            counters: Counters::default(),
            ttft: HistogramAcc::new(ttft),
            itl: HistogramAcc::new(itl),
            request_tpot: HistogramAcc::new(layouts::VLLM_ITL),
            last: StepSummary::default(),
            tokens_per_running: 0.0,
        }
    }

    /// Running requests as the engine reports them (whole requests).
    /// Member `index` of `members` data-parallel engines that split this engine's work
    /// (External load balancing). Every count the page shows as a whole number (counters,
    /// histogram counts, request gauges) is split as whole numbers, the lower members taking
    /// the remainder, so the members' pages add up exactly to the instance's; histogram sums are
    /// split evenly and KV usage, a fraction, stays.
    pub fn member_share(&self, index: u32, members: u32) -> EngineState {
        let members = members.max(1);
        let whole = |value: f64| split_whole(value, index, members);
        let mut share = self.clone();
        share.running = whole(self.running.round());
        share.backlog.requests = whole(self.backlog.requests.round());
        let c = &mut share.counters;
        for value in [
            &mut c.prompt_tokens,
            &mut c.prefix_hit_tokens,
            &mut c.generation_tokens,
            &mut c.requests,
        ] {
            *value = whole(*value);
        }
        for h in [&mut share.ttft, &mut share.itl, &mut share.request_tpot] {
            h.split(whole, f64::from(members));
        }
        share
    }

    pub fn running_gauge(&self) -> f64 {
        self.running.round()
    }

    /// Waiting requests as the engine reports them (whole requests).
    pub fn waiting_gauge(&self) -> f64 {
        self.backlog.requests.round()
    }

    /// Every drain gauge reads exactly 0 (TARGET.md section 5).
    pub fn is_idle(&self) -> bool {
        self.running_gauge() == 0.0 && self.waiting_gauge() == 0.0
    }

    /// Serves `dt` seconds with `arrivals` joining the backlog.
    pub fn advance(&mut self, profile: &EngineProfile, arrivals: &Arrivals, dt: f64) {
        let mut pool = self.backlog;
        pool.add(arrivals);
        if dt.is_nan() || dt <= 0.0 {
            self.backlog = pool;
            return;
        }
        let step = match &profile.steps {
            Some(model) => self.step_loop(model, &pool, dt),
            None => self.linear(profile, &pool, dt),
        };
        self.record(&step, dt);
    }

    /// One step of the linear model (the module doc).
    fn linear(&mut self, profile: &EngineProfile, pool: &Arrivals, dt: f64) -> Step {
        let (served, servable, work) = self.serve(profile, pool, dt);
        let n = served.requests;
        let rho = if servable.is_finite() && servable > 0.0 {
            (n / servable).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mix = steps::Mix::of(pool);
        let prefill_each = if self.kind == WorkKind::Decode {
            0.0
        } else {
            mix.missed_prompt / profile.prefill_tokens_per_second
        };
        let base_itl = profile.base_itl_seconds;
        let itl = base_itl + (profile.full_batch_itl() - base_itl) * rho;
        let congestion = 1.0 / (1.0 - rho.min(0.95));
        let backlog_wait = self.backlog.requests * work;
        let (ttft_floor, in_batch_before_output) = match self.kind {
            WorkKind::Decode => (
                profile.base_ttft_seconds + base_itl,
                profile.base_ttft_seconds + itl,
            ),
            _ => (
                profile.base_ttft_seconds + prefill_each,
                profile.base_ttft_seconds + prefill_each * congestion,
            ),
        };
        let residence = match self.kind {
            WorkKind::Prefill => in_batch_before_output,
            _ => in_batch_before_output + mix.output * itl,
        };
        Step {
            served,
            mix,
            rho,
            max_running: profile.max_running,
            kv_cache_tokens: profile.kv_cache_tokens,
            residence,
            summary: StepSummary {
                served_requests_per_second: n / dt,
                utilization: rho,
                ttft_mean_seconds: in_batch_before_output + backlog_wait,
                itl_mean_seconds: itl,
                ttft_floor_seconds: ttft_floor,
                ttft_floor_half_seconds: 0.5 * ttft_floor,
                ttft_floor_double_seconds: 2.0 * ttft_floor,
                prompt_tokens_each: mix.prompt,
                output_tokens_each: mix.output,
                decode_step_seconds: itl,
                mixed_step_seconds: itl,
                mixed_share: 0.0,
                chunks_per_step: 0.0,
                chunk_tokens: 0.0,
                prefill_seconds_per_token: 0.0,
                step_token_budget: f64::INFINITY,
                prefill_utilization: 0.0,
                prefill_seconds: 0.0,
            },
            // A steady batch steps at a steady pace: the spread is a small share of the mean.
            itl_floor: base_itl.max(ITL_FLOOR_SHARE * itl),
        }
    }

    /// One step of the request-level profile's step loop in closed form (module [`steps`]).
    fn step_loop(&mut self, model: &request::RequestProfile, pool: &Arrivals, dt: f64) -> Step {
        let mix = steps::Mix::of(pool);
        let capacity = steps::capacity(model, self.kind, &mix);
        let share = if pool.requests <= 1e-12 {
            0.0
        } else {
            (capacity * dt / pool.requests).min(1.0)
        };
        let served = pool.scaled(share);
        self.backlog = if share >= 1.0 || pool.requests <= 1e-12 {
            Arrivals::default()
        } else {
            pool.scaled(1.0 - share)
        };
        let rate = served.requests / dt;
        let loop_ = steps::steady(model, self.kind, &mix, rate);
        let backlog_wait = if capacity > 0.0 {
            self.backlog.requests / capacity
        } else {
            0.0
        };
        let decodes = match self.kind {
            WorkKind::Prefill => 0.0,
            _ => mix.output,
        };
        let kv_tokens = f64::from(model.limits.kv_blocks) * request::BLOCK_TOKENS as f64;
        let rho = if capacity > 0.0 {
            (rate / capacity).clamp(0.0, 1.0)
        } else {
            0.0
        };
        Step {
            served,
            mix,
            rho,
            max_running: model.limits.max_num_seqs as f64,
            kv_cache_tokens: kv_tokens,
            residence: loop_.ttft_seconds + decodes * loop_.step_seconds,
            summary: StepSummary {
                served_requests_per_second: rate,
                utilization: rho,
                ttft_mean_seconds: loop_.ttft_seconds + backlog_wait,
                itl_mean_seconds: loop_.step_seconds,
                ttft_floor_seconds: loop_.ttft_floor_seconds,
                ttft_floor_half_seconds: loop_.ttft_floor_half_seconds,
                ttft_floor_double_seconds: loop_.ttft_floor_double_seconds,
                prompt_tokens_each: mix.prompt,
                output_tokens_each: mix.output,
                decode_step_seconds: loop_.decode_step_seconds,
                mixed_step_seconds: loop_.mixed_step_seconds,
                mixed_share: loop_.mixed_share,
                chunks_per_step: loop_.chunks_per_step,
                chunk_tokens: loop_.chunk_tokens,
                prefill_seconds_per_token: loop_.prefill_seconds_per_token,
                step_token_budget: model.limits.max_num_batched_tokens as f64,
                prefill_utilization: loop_.prefill_utilization,
                prefill_seconds: loop_.prefill_seconds,
            },
            itl_floor: ITL_FLOOR_SHARE * loop_.decode_step_seconds,
        }
    }

    /// Counts what a step served: counters, batch, KV usage and histograms.
    fn record(&mut self, step: &Step, dt: f64) {
        let served = &step.served;
        let n = served.requests;
        let s = &step.summary;
        self.running = self
            .batch
            .advance(dt, n, step.residence)
            .min(step.max_running);
        if n > 0.0 {
            self.tokens_per_running = match self.kind {
                WorkKind::Prefill => step.mix.prompt,
                _ => step.mix.prompt + step.mix.output / 2.0,
            };
        }
        self.kv_usage =
            (self.running * self.tokens_per_running / step.kv_cache_tokens).clamp(0.0, 1.0);

        self.counters.prompt_tokens += served.prompt_tokens;
        self.counters.prefix_hit_tokens += served.prefix_hit_tokens;
        self.counters.requests += n;
        self.counters.generation_tokens += match self.kind {
            WorkKind::Prefill => n,
            _ => served.output_tokens,
        };
        self.ttft
            .observe(n, s.ttft_floor_seconds, s.ttft_mean_seconds);
        if self.kind != WorkKind::Prefill {
            let gaps = (served.output_tokens - n).max(0.0);
            let mixed = gaps * s.mixed_share;
            self.itl.observe_both(
                gaps - mixed,
                &mut self.request_tpot,
                n,
                step.itl_floor,
                s.decode_step_seconds,
            );
            if mixed > 0.0 {
                let floor = ITL_FLOOR_SHARE * s.mixed_step_seconds;
                self.itl.observe(mixed, floor, s.mixed_step_seconds);
            }
        }
        self.last = *s;
        self.last.utilization = step.rho;
    }

    /// Serves what `dt` allows from `pool`; the rest becomes the backlog. Returns the served
    /// part, the requests that could have been served, and the engine time per request.
    fn serve(&mut self, profile: &EngineProfile, pool: &Arrivals, dt: f64) -> (Arrivals, f64, f64) {
        if pool.requests <= 1e-12 {
            self.backlog = Arrivals::default();
            return (Arrivals::default(), f64::INFINITY, 0.0);
        }
        let prefill =
            pool.missed_prompt_tokens() / pool.requests / profile.prefill_tokens_per_second;
        let decode = pool.output_tokens / pool.requests / profile.decode_tokens_per_second;
        let work = match self.kind {
            WorkKind::Server => prefill + decode,
            WorkKind::Prefill => prefill,
            WorkKind::Decode => decode,
        };
        let servable = if work > 0.0 { dt / work } else { f64::INFINITY };
        let share = (servable / pool.requests).min(1.0);
        self.backlog = if share >= 1.0 {
            Arrivals::default()
        } else {
            pool.scaled(1.0 - share)
        };
        (pool.scaled(share), servable, work)
    }
}

/// What one step served and how, from either model.
struct Step {
    served: Arrivals,
    mix: steps::Mix,
    rho: f64,
    max_running: f64,
    kv_cache_tokens: f64,
    /// Seconds each served request stays in the batch.
    residence: f64,
    summary: StepSummary,
    /// The floor of a decode-only step's gaps.
    itl_floor: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Load;

    fn arrivals(load: Load, dt: f64) -> Arrivals {
        crate::load::LoadProfile::constant(load)
            .unwrap()
            .arrivals(0.0, dt)
    }

    fn engine(kind: WorkKind) -> EngineState {
        EngineState::new(EngineFlavor::Vllm011, kind, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn under_capacity_everything_is_served_and_counted() {
        let mut e = engine(WorkKind::Server);
        let load = Load::new(2.0, 1000.0, 100.0, 0.5).unwrap();
        for _ in 0..60 {
            e.advance(&EngineProfile::default(), &arrivals(load, 1.0), 1.0);
        }
        assert!((e.counters.requests - 120.0).abs() < 1e-9);
        assert!((e.counters.prompt_tokens - 120_000.0).abs() < 1e-6);
        assert!((e.counters.prefix_hit_tokens - 60_000.0).abs() < 1e-6);
        assert!((e.counters.generation_tokens - 12_000.0).abs() < 1e-6);
        assert_eq!(e.waiting_gauge(), 0.0);
        // Little: 2 req/s × (0.05 + 0.025 × 1.15 + 100 × 0.026 s) ≈ 5.4 (ρ ≈ 0.13).
        assert!(e.running > 5.0 && e.running < 6.0, "{}", e.running);
        // 5.4 requests × 1,050 tokens of a 500,000-token pool.
        assert!(e.kv_usage > 0.01 && e.kv_usage < 0.012, "{}", e.kv_usage);
    }

    #[test]
    fn over_capacity_serves_at_capacity_and_queues_the_rest() {
        let mut e = engine(WorkKind::Decode);
        // 100 req/s × 100 output tokens = 10,000 tok/s against 2,500 tok/s.
        let load = Load::new(100.0, 500.0, 100.0, 0.0).unwrap();
        for _ in 0..10 {
            e.advance(&EngineProfile::default(), &arrivals(load, 1.0), 1.0);
        }
        assert!((e.counters.generation_tokens - 25_000.0).abs() < 1e-6);
        assert!((e.waiting_gauge() - 750.0).abs() < 1.0);
        assert_eq!(e.last.utilization, 1.0);
        assert!(e.last.itl_mean_seconds > 0.1 - 1e-9, "full-batch ITL");
        assert!(
            e.last.ttft_mean_seconds > 10.0,
            "the backlog wait dominates TTFT"
        );
    }

    #[test]
    fn a_withdrawn_engine_drains_to_idle() {
        let mut e = engine(WorkKind::Server);
        let load = Load::new(5.0, 1000.0, 200.0, 0.0).unwrap();
        for _ in 0..30 {
            e.advance(&EngineProfile::default(), &arrivals(load, 1.0), 1.0);
        }
        assert!(!e.is_idle());
        let mut seconds = 0;
        while !e.is_idle() && seconds < 240 {
            e.advance(&EngineProfile::default(), &Arrivals::default(), 1.0);
            seconds += 1;
        }
        assert!(e.is_idle() && seconds > 5 && seconds < 120, "{seconds} s");
    }

    /// The p95 a histogram reads: the smallest bound holding 95 % of its observations.
    fn p95(h: &HistogramAcc) -> f64 {
        h.bounds
            .iter()
            .zip(&h.cumulative)
            .find(|(_, c)| **c >= 0.95 * h.count)
            .map_or(f64::INFINITY, |(b, _)| *b)
    }

    #[test]
    fn itl_at_a_steady_batch_is_tight() {
        // 3 requests/s of 512 + 128 tokens: 23 % utilisation, mean ITL 35 ms.
        let mut e = engine(WorkKind::Server);
        let load = Load::new(3.0, 512.0, 128.0, 0.0).unwrap();
        for _ in 0..120 {
            e.advance(&EngineProfile::default(), &arrivals(load, 1.0), 1.0);
        }
        let mean = e.itl.sum / e.itl.count;
        assert!((mean - 0.0351).abs() < 0.001, "mean {mean}");
        let p95 = p95(&e.itl);
        assert!(p95 <= 1.5 * mean, "p95 {p95} s over a mean of {mean} s");
        assert_eq!(p95, 0.05, "vLLM's 50 ms bucket holds 95 %");
    }

    #[test]
    fn prefill_engines_count_one_output_token_and_no_itl() {
        let mut e = engine(WorkKind::Prefill);
        let load = Load::new(1.0, 2000.0, 300.0, 0.0).unwrap();
        e.advance(&EngineProfile::default(), &arrivals(load, 10.0), 10.0);
        assert!((e.counters.generation_tokens - 10.0).abs() < 1e-9);
        assert!(e.itl.is_empty());
        assert!((e.ttft.count - 10.0).abs() < 1e-9);
    }

    #[test]
    fn flavor_follows_the_engine_spec() {
        let engine = |name: &str, version: Option<&str>| Engine {
            name: name.into(),
            version: version.map(String::from),
        };
        assert_eq!(
            EngineFlavor::of(Some(&engine("vLLM", Some("0.10.2")))),
            Some(EngineFlavor::Vllm010)
        );
        assert_eq!(
            EngineFlavor::of(Some(&engine("vllm", None))),
            Some(EngineFlavor::Vllm011)
        );
        assert_eq!(
            EngineFlavor::of(Some(&engine("SGLang", Some("0.5.20")))),
            Some(EngineFlavor::Sglang)
        );
        assert_eq!(EngineFlavor::of(Some(&engine("TGI", None))), None);
        assert_eq!(EngineFlavor::of(None), None);
    }
}
