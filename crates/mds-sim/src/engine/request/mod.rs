//! One serving engine as vLLM V1's scheduler runs it, request by request (docs/SIMULATION.md,
//! "The request-level engine"). Beside the fluid model, not replacing it.
//!
//! Each step, within a token budget (`max_num_batched_tokens`):
//! 1. running requests, oldest first, each take what they still need: one token for a decode,
//!    a chunk of the remaining prompt for a prefill; a request that needs a KV block when none
//!    is free preempts the most recently admitted running request (its blocks are freed and it
//!    returns to the front of the waiting queue, to be recomputed);
//! 2. if nothing was preempted, waiting requests that have arrived are admitted in order while
//!    the batch holds fewer than `max_num_seqs` and their first chunk's blocks are free. On
//!    admission the leading run of the prompt's blocks found in the prefix cache is a hit: held,
//!    not computed (at least one token is always computed, as vLLM does).
//!
//! A step's duration comes from the [`CostModel`]; the requests whose computed tokens reach
//! their total sample one token at its end. Time is seconds on the engine's own clock.
//!
//! Block hashes: a request's `block_hashes` are a Mooncake trace's `hash_ids`, one per
//! 512-token span, so each maps onto [`KV_BLOCKS_PER_HASH`] (32) KV blocks of 16 tokens, keyed by
//! (hash id, position in the span). Only full prompt blocks are cached; a request without
//! hashes (or the part of a prompt past its hashes) never hits.

mod cost;
mod kv;
mod metrics;
mod page;

use std::collections::VecDeque;

pub use cost::{CostModel, RequestProfile, SchedulerLimits, StepWork, attention_pairs};
pub use kv::{BLOCK_TOKENS, KV_BLOCKS_PER_HASH};
pub use metrics::{
    FinishedRequest, Outcome, RequestCounters, RequestHistograms, VLLM_REQUEST_LATENCY,
};

use crate::engine::gaps::GapLog;
use crate::engine::histogram::{HistogramAcc, layouts};
use kv::{BlockKey, BlockPool, blocks_for};
use metrics::observe_exact;

/// The ITL objective an engine counts gaps against unless told another: the spec's default
/// `itlTargetMilliseconds`.
pub const DEFAULT_ITL_OBJECTIVE_SECONDS: f64 = 0.05;

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct StepStats {
    pub start: f64,
    pub seconds: f64,
    /// Tokens computed, prefill and decode.
    pub scheduled_tokens: u64,
    /// What the step's duration is made of.
    pub work: StepWork,
    /// Requests scheduled in the step.
    pub scheduled_requests: usize,
    /// Requests in the running batch during the step (after preemption and admission).
    pub running: usize,
    pub preempted: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct Request {
    id: u64,
    arrival: f64,
    prompt: u64,
    output: u64,
    hashes: Option<Box<[u64]>>,
    /// Tokens whose KV is in the request's blocks.
    computed: u64,
    generated: u64,
    blocks: Vec<u32>,
    /// Leading full prompt blocks registered in the prefix cache.
    registered: u64,
    cached_tokens: u64,
    first_scheduled: Option<f64>,
    first_token: Option<f64>,
    last_token: f64,
    preemptions: u32,
    /// Tokens the current step computes.
    scheduled: u64,
    /// The prompt's KV arrives from a prefill engine (disaggregated serving): admission holds
    /// it without computing it. Cleared by a preemption, after which the prompt is recomputed
    /// here.
    prefilled: bool,
    /// Gaps between its output tokens so far, and those over the ITL objective.
    gaps: u64,
    slow_gaps: u64,
}

impl Request {
    /// Tokens that must be computed before the next token is sampled.
    fn total(&self) -> u64 {
        self.prompt + self.generated
    }

    /// The cache key of KV block `index`, for a full prompt block with a hash.
    fn key(&self, index: u64) -> Option<BlockKey> {
        if (index + 1) * BLOCK_TOKENS > self.prompt {
            return None;
        }
        let hashes = self.hashes.as_deref()?;
        let hash_id = *hashes.get(usize::try_from(index / KV_BLOCKS_PER_HASH).ok()?)?;
        Some(BlockKey {
            hash_id,
            part: (index % KV_BLOCKS_PER_HASH) as u32,
        })
    }
}

/// One engine instance, request by request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestEngine {
    profile: RequestProfile,
    clock: f64,
    pool: BlockPool,
    running: Vec<Request>,
    waiting: VecDeque<Request>,
    finished: Vec<FinishedRequest>,
    pub counters: RequestCounters,
    pub histograms: RequestHistograms,
    /// Every gap between output tokens since the last [`take_gaps`](Self::take_gaps).
    gaps: GapLog,
    /// The ITL objective each request's gaps are counted against, seconds.
    pub itl_objective_seconds: f64,
}

impl RequestEngine {
    pub fn new(profile: RequestProfile) -> Result<RequestEngine, String> {
        Self::with_layouts(profile, layouts::VLLM_TTFT, layouts::VLLM_ITL)
    }

    /// An engine whose TTFT and ITL histograms use the given bucket bounds (SGLang's differ
    /// from vLLM's).
    pub fn with_layouts(
        profile: RequestProfile,
        ttft: &'static [f64],
        itl: &'static [f64],
    ) -> Result<RequestEngine, String> {
        profile.validate()?;
        let histograms = RequestHistograms {
            ttft: HistogramAcc::new(ttft),
            itl: HistogramAcc::new(itl),
            request_tpot: HistogramAcc::new(itl),
            ..RequestHistograms::default()
        };
        Ok(RequestEngine {
            profile,
            clock: 0.0,
            pool: BlockPool::new(profile.limits.kv_blocks),
            running: Vec::new(),
            waiting: VecDeque::new(),
            finished: Vec::new(),
            counters: RequestCounters::default(),
            histograms,
            gaps: GapLog::default(),
            itl_objective_seconds: DEFAULT_ITL_OBJECTIVE_SECONDS,
        })
    }

    pub fn profile(&self) -> &RequestProfile {
        &self.profile
    }

    /// The engine's clock: the end of its last step, or the time it last advanced to.
    pub fn clock(&self) -> f64 {
        self.clock
    }

    /// Queues a request that arrives at `arrival` (a time not before the clock, in submission
    /// order). An empty prompt, or one whose prompt and output exceed `max_model_len` (capped
    /// at the pool), is rejected at once, as vLLM refuses it.
    pub fn submit(
        &mut self,
        id: u64,
        arrival: f64,
        prompt_tokens: u64,
        output_tokens: u64,
        block_hashes: Option<&[u64]>,
    ) {
        let arrival = if arrival.is_finite() {
            arrival
        } else {
            self.clock
        };
        let longest = self.profile.limits.longest_request();
        if prompt_tokens == 0 || prompt_tokens.saturating_add(output_tokens) > longest {
            self.counters.rejected += 1;
            self.finished.push(FinishedRequest {
                id,
                outcome: Outcome::Rejected,
                arrival,
                prompt_tokens,
                output_tokens,
                cached_tokens: 0,
                queue_seconds: 0.0,
                ttft_seconds: None,
                tpot_seconds: None,
                gaps: 0,
                slow_gaps: 0,
                finish: arrival,
                preemptions: 0,
            });
            return;
        }
        self.waiting.push_back(Request {
            id,
            arrival,
            prompt: prompt_tokens,
            output: output_tokens,
            hashes: block_hashes.map(Box::from),
            computed: 0,
            generated: 0,
            blocks: Vec::new(),
            registered: 0,
            cached_tokens: 0,
            first_scheduled: None,
            first_token: None,
            last_token: arrival,
            preemptions: 0,
            scheduled: 0,
            prefilled: false,
            gaps: 0,
            slow_gaps: 0,
        });
    }

    /// Queues a request whose prompt KV a prefill engine computed and sent (disaggregated
    /// serving): admission allocates its blocks and computes only the last prompt token, as
    /// a decode instance does with the transferred KV. Its prompt counts as computed, not as a
    /// prefix-cache hit.
    pub fn submit_prefilled(
        &mut self,
        id: u64,
        arrival: f64,
        prompt_tokens: u64,
        output_tokens: u64,
    ) {
        self.submit(id, arrival, prompt_tokens, output_tokens, None);
        if let Some(req) = self.waiting.back_mut().filter(|r| r.id == id) {
            req.prefilled = true;
        }
    }

    /// Requests submitted and not finished (running and waiting, arrived or not), in no
    /// particular order: what is lost when the engine stops.
    pub fn unfinished_ids(&self) -> Vec<u64> {
        self.running
            .iter()
            .chain(self.waiting.iter())
            .map(|r| r.id)
            .collect()
    }

    /// Requests running or queued, arrived or not: what a least-outstanding router counts.
    pub fn outstanding(&self) -> usize {
        self.running.len() + self.waiting.len()
    }

    /// Prompt tokens of the leading run of a prompt's full blocks this engine's prefix cache
    /// holds now (what a prefix-aware router compares).
    pub fn cached_prefix_tokens(&self, prompt_tokens: u64, block_hashes: &[u64]) -> u64 {
        let mut index = 0;
        while (index + 1) * BLOCK_TOKENS <= prompt_tokens {
            let Some(&hash_id) = usize::try_from(index / KV_BLOCKS_PER_HASH)
                .ok()
                .and_then(|i| block_hashes.get(i))
            else {
                break;
            };
            let key = BlockKey {
                hash_id,
                part: (index % KV_BLOCKS_PER_HASH) as u32,
            };
            if self.pool.lookup(key).is_none() {
                break;
            }
            index += 1;
        }
        index * BLOCK_TOKENS
    }

    /// Runs steps back to back while there is work, jumping idle time to the next arrival, and
    /// leaves the clock at `now` (or at the end of a step that began before `now`).
    pub fn advance_to(&mut self, now: f64) {
        while self.clock < now {
            if self.has_ready_work() {
                if self.step().is_none() {
                    break;
                }
                continue;
            }
            match self.waiting.front() {
                Some(next) if next.arrival < now => self.clock = self.clock.max(next.arrival),
                _ => break,
            }
        }
        self.clock = self.clock.max(now);
    }

    /// One scheduler step at the clock, if any request can be scheduled.
    pub fn step(&mut self) -> Option<StepStats> {
        let start = self.clock;
        let mut budget = self.profile.limits.max_num_batched_tokens;
        let preempted = self.schedule_running(&mut budget);
        if preempted == 0 {
            self.admit_waiting(&mut budget, start);
        }
        let mut stats = StepStats {
            start,
            running: self.running.len(),
            preempted,
            ..StepStats::default()
        };
        for req in self.running.iter().filter(|r| r.scheduled > 0) {
            stats.scheduled_requests += 1;
            stats.scheduled_tokens += req.scheduled;
            let work = &mut stats.work;
            work.kv_tokens += req.computed + req.scheduled;
            if req.generated > 0 && req.scheduled == 1 && req.computed + 1 == req.total() {
                work.decode_sequences += 1;
            } else {
                work.prefill_tokens += req.scheduled;
                work.attention_pairs += attention_pairs(req.computed, req.scheduled);
            }
        }
        if stats.scheduled_requests == 0 {
            return None;
        }
        stats.seconds = self.profile.cost.step_seconds(&stats.work);
        self.clock = start + stats.seconds;
        self.counters.steps += 1;
        self.complete_step(start);
        Some(stats)
    }

    /// The gaps between output tokens observed since the last call.
    pub fn take_gaps(&mut self) -> GapLog {
        self.gaps.take()
    }

    /// Requests finished (or rejected) since the last call, in the order they finished.
    pub fn take_finished(&mut self) -> Vec<FinishedRequest> {
        std::mem::take(&mut self.finished)
    }

    /// Requests in the running batch (`num_requests_running`).
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Requests arrived and not running (`num_requests_waiting`).
    pub fn waiting(&self) -> usize {
        self.waiting
            .iter()
            .take_while(|r| r.arrival <= self.clock)
            .count()
    }

    /// Every submitted request has finished.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// KV blocks held by requests, and the pool's size.
    pub fn kv_blocks(&self) -> (u32, u32) {
        (self.pool.used(), self.pool.total())
    }

    /// Share of the KV pool held (`kv_cache_usage_perc`).
    pub fn kv_usage(&self) -> f64 {
        f64::from(self.pool.used()) / f64::from(self.pool.total())
    }

    fn has_ready_work(&self) -> bool {
        !self.running.is_empty()
            || self
                .waiting
                .front()
                .is_some_and(|r| r.arrival <= self.clock)
    }

    /// Gives each running request its tokens for this step, oldest first, preempting from the
    /// back when blocks run out; returns the number preempted.
    fn schedule_running(&mut self, budget: &mut u64) -> u32 {
        let mut preempted = 0;
        let mut index = 0;
        while index < self.running.len() && *budget > 0 {
            let req = &self.running[index];
            let tokens = (req.total() - req.computed).min(*budget);
            let fits = loop {
                if self.grow(index, tokens) {
                    break true;
                }
                let victim = self.running.len() - 1;
                self.preempt_last();
                preempted += 1;
                if victim == index {
                    break false;
                }
            };
            if !fits {
                break;
            }
            self.running[index].scheduled = tokens;
            *budget -= tokens;
            index += 1;
        }
        preempted
    }

    /// Admits arrived waiting requests in order while the batch, the budget and the pool allow.
    fn admit_waiting(&mut self, budget: &mut u64, start: f64) {
        let max_seqs = self.profile.limits.max_num_seqs;
        while *budget > 0 && self.running.len() < max_seqs {
            let Some(req) = self.waiting.front() else {
                break;
            };
            if req.arrival > start {
                break;
            }
            let total = req.total();
            // The leading run of cached blocks, leaving at least one token to compute.
            let most_hits = (total - 1) / BLOCK_TOKENS;
            let mut hits = 0;
            let mut reclaimed = 0;
            while hits < most_hits && !req.prefilled {
                match req.key(hits).and_then(|key| self.pool.lookup(key)) {
                    Some((_, in_free_queue)) => reclaimed += u32::from(in_free_queue),
                    None => break,
                }
                hits += 1;
            }
            // Transferred KV is held, not computed: only the last prompt token is.
            let held = if req.prefilled { total - 1 } else { 0 };
            let computed = (hits * BLOCK_TOKENS).max(held);
            let tokens = (total - computed).min(*budget);
            let new_blocks = blocks_for(computed + tokens) - hits;
            let hit_tokens = hits * BLOCK_TOKENS;
            if new_blocks + u64::from(reclaimed) > u64::from(self.pool.free()) {
                break;
            }
            let mut req = self.waiting.pop_front().expect("front exists");
            for index in 0..hits {
                let key = req.key(index).expect("a hit has a key");
                let (block, _) = self.pool.lookup(key).expect("a hit is cached");
                self.pool.touch(block);
                req.blocks.push(block);
            }
            for _ in 0..new_blocks {
                req.blocks.push(self.pool.allocate().expect("checked free"));
            }
            if !req.prefilled {
                self.counters.prefix_cache_queries += total;
                self.counters.prefix_cache_hits += hit_tokens;
            }
            if req.first_scheduled.is_none() {
                req.first_scheduled = Some(start);
                req.cached_tokens = hit_tokens;
            }
            req.computed = computed;
            req.scheduled = tokens;
            *budget -= tokens;
            self.running.push(req);
        }
    }

    /// Gives running request `index` the blocks `tokens` more tokens need; false (and nothing
    /// taken) when the pool has too few free.
    fn grow(&mut self, index: usize, tokens: u64) -> bool {
        let req = &mut self.running[index];
        let needed = blocks_for(req.computed + tokens).saturating_sub(req.blocks.len() as u64);
        if needed > u64::from(self.pool.free()) {
            return false;
        }
        for _ in 0..needed {
            req.blocks.push(self.pool.allocate().expect("checked free"));
        }
        true
    }

    /// Sends the most recently admitted running request back to the front of the queue.
    fn preempt_last(&mut self) {
        let Some(mut req) = self.running.pop() else {
            return;
        };
        for &block in req.blocks.iter().rev() {
            self.pool.release(block);
        }
        req.blocks.clear();
        req.computed = 0;
        req.registered = 0;
        req.scheduled = 0;
        req.prefilled = false;
        req.preemptions += 1;
        self.counters.preemptions += 1;
        self.waiting.push_front(req);
    }

    /// Applies the step that ran from `start` to the clock: KV computed, full prompt blocks
    /// cached, tokens sampled, finished requests released and recorded.
    fn complete_step(&mut self, start: f64) {
        let end = self.clock;
        let RequestEngine {
            running,
            pool,
            counters,
            histograms,
            finished,
            gaps,
            itl_objective_seconds,
            ..
        } = self;
        // Gaps of requests that also sampled at the end of the previous step are one step long.
        let mut one_step_gaps = 0;
        let objective = *itl_objective_seconds;
        let slow_step = end - start > objective;
        let mut any_finished = false;
        for req in running.iter_mut().filter(|r| r.scheduled > 0) {
            req.computed += req.scheduled;
            req.scheduled = 0;
            let full_prompt_blocks = req.computed.min(req.prompt) / BLOCK_TOKENS;
            for index in req.registered..full_prompt_blocks {
                if let Some(key) = req.key(index) {
                    pool.register(req.blocks[index as usize], key);
                }
            }
            req.registered = req.registered.max(full_prompt_blocks);
            if req.computed < req.total() {
                continue;
            }
            if req.output > 0 {
                req.generated += 1;
                counters.generation_tokens += 1;
                match req.first_token {
                    None => {
                        req.first_token = Some(end);
                        observe_exact(&mut histograms.ttft, 1, end - req.arrival);
                    }
                    Some(_) if req.last_token == start => {
                        one_step_gaps += 1;
                        req.gaps += 1;
                        req.slow_gaps += u64::from(slow_step);
                    }
                    Some(_) => {
                        let gap = end - req.last_token;
                        observe_exact(&mut histograms.itl, 1, gap);
                        gaps.observe(end, gap, 1, gap > objective);
                        req.gaps += 1;
                        req.slow_gaps += u64::from(gap > objective);
                    }
                }
                req.last_token = end;
            }
            if req.generated == 1 || req.output == 0 {
                counters.prompt_tokens_computed += req.prompt - req.cached_tokens;
                counters.prompt_tokens_cached += req.cached_tokens;
            }
            if req.generated >= req.output {
                any_finished = true;
                for &block in req.blocks.iter().rev() {
                    pool.release(block);
                }
                req.blocks.clear();
                counters.successes += 1;
                finished.push(record(req, end, histograms));
            }
        }
        observe_exact(&mut histograms.itl, one_step_gaps, end - start);
        gaps.observe(end, end - start, one_step_gaps, slow_step);
        if any_finished {
            running.retain(|r| r.generated < r.output || (r.output == 0 && r.computed < r.prompt));
        }
    }
}

/// The finished request's record, its per-request histograms observed.
fn record(req: &Request, end: f64, histograms: &mut RequestHistograms) -> FinishedRequest {
    let queue_seconds = req.first_scheduled.unwrap_or(end) - req.arrival;
    let tpot_seconds = match req.first_token {
        Some(first) if req.generated >= 2 => Some((end - first) / (req.generated - 1) as f64),
        _ => None,
    };
    if let Some(tpot) = tpot_seconds {
        observe_exact(&mut histograms.request_tpot, 1, tpot);
    }
    observe_exact(&mut histograms.e2e, 1, end - req.arrival);
    observe_exact(&mut histograms.queue_time, 1, queue_seconds);
    FinishedRequest {
        id: req.id,
        outcome: Outcome::Finished,
        arrival: req.arrival,
        prompt_tokens: req.prompt,
        output_tokens: req.output,
        cached_tokens: req.cached_tokens,
        queue_seconds,
        ttft_seconds: req.first_token.map(|t| t - req.arrival),
        tpot_seconds,
        gaps: req.gaps,
        slow_gaps: req.slow_gaps,
        finish: end,
        preemptions: req.preemptions,
    }
}
