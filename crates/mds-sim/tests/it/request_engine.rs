//! The request-level engine: its scheduler's rules and its prefix cache (its calibration is
//! tests/it/calibration.rs).

use mds_sim::engine::request::{
    FinishedRequest, Outcome, RequestEngine, RequestProfile, SchedulerLimits, StepStats,
};
use mds_sim::rng::Rng;
use proptest::prelude::*;

fn profile() -> RequestProfile {
    RequestProfile::llama3_8b_h100_vllm()
}

fn engine_with(limits: SchedulerLimits) -> RequestEngine {
    RequestEngine::new(RequestProfile {
        limits,
        ..profile()
    })
    .unwrap()
}

/// Poisson arrivals of `count` requests of 206 prompt and 202 output tokens at `qps`, run to
/// completion.
fn sharegpt_run(qps: f64, count: u64, seed: u64) -> (Vec<FinishedRequest>, RequestEngine) {
    let mut engine = RequestEngine::new(profile()).unwrap();
    let mut rng = Rng::new(seed);
    let mut arrival = 0.0;
    for id in 0..count {
        arrival += rng.exponential(qps);
        engine.submit(id, arrival, 206, 202, None);
    }
    engine.advance_to(arrival + 600.0);
    assert!(engine.is_idle());
    (engine.take_finished(), engine)
}

/// Steps until idle, returning every step; bounded so a livelock fails instead of hanging.
fn run_steps(engine: &mut RequestEngine) -> Vec<StepStats> {
    let mut steps = Vec::new();
    while !engine.is_idle() {
        match engine.step() {
            Some(step) => steps.push(step),
            None => {
                let clock = engine.clock();
                engine.advance_to(clock + 1.0);
            }
        }
        assert!(steps.len() < 100_000, "no livelock");
    }
    steps
}

fn small(max_num_batched_tokens: u64, max_num_seqs: usize, kv_blocks: u32) -> SchedulerLimits {
    SchedulerLimits {
        max_num_batched_tokens,
        max_num_seqs,
        kv_blocks,
        max_model_len: u64::from(kv_blocks) * 16,
    }
}

fn finished_by_id(engine: &mut RequestEngine, id: u64) -> FinishedRequest {
    let done = engine.take_finished();
    *done.iter().find(|r| r.id == id).expect("finished")
}

#[test]
fn the_token_budget_and_the_sequence_cap_hold_at_every_step() {
    let mut engine = engine_with(small(512, 8, 2000));
    let mut rng = Rng::new(11);
    for id in 0..40 {
        let prompt = 1 + rng.next_u64() % 2000;
        let output = 1 + rng.next_u64() % 50;
        engine.submit(id, 0.0, prompt, output, None);
    }
    let steps = run_steps(&mut engine);
    assert!(
        steps.iter().any(|s| s.scheduled_tokens == 512),
        "the budget binds"
    );
    assert!(steps.iter().any(|s| s.running == 8), "the cap binds");
    for step in &steps {
        assert!(step.scheduled_tokens <= 512, "{step:?}");
        assert!(
            step.running <= 8 && step.scheduled_requests <= 8,
            "{step:?}"
        );
    }
    assert_eq!(engine.counters.successes, 40);
}

#[test]
fn chunked_prefill_splits_a_prompt_larger_than_the_budget() {
    let mut engine = engine_with(small(512, 8, 2000));
    engine.submit(0, 0.0, 1300, 2, None);
    let steps = run_steps(&mut engine);
    let prefills: Vec<u64> = steps.iter().map(|s| s.work.prefill_tokens).collect();
    assert_eq!(prefills, [512, 512, 276, 0]);
    assert_eq!(steps[3].work.decode_sequences, 1);
    let first_token_at: f64 = steps[..3].iter().map(|s| s.seconds).sum();
    let done = finished_by_id(&mut engine, 0);
    assert!((done.ttft_seconds.unwrap() - first_token_at).abs() < 1e-12);
    assert_eq!(done.queue_seconds, 0.0);
}

#[test]
fn running_decodes_are_scheduled_before_a_new_prompt() {
    let mut engine = engine_with(small(512, 8, 2000));
    engine.submit(0, 0.0, 100, 50, None);
    engine.step().unwrap();
    let first_token = engine.clock();
    engine.submit(1, first_token, 2000, 5, None);
    // While the long prompt is prefilled in chunks, the decode still gets its token each step.
    for _ in 0..3 {
        let step = engine.step().unwrap();
        assert_eq!(step.work.decode_sequences, 1, "{step:?}");
        assert_eq!(step.work.prefill_tokens, 511, "{step:?}");
    }
    run_steps(&mut engine);
    assert_eq!(
        engine.histograms.itl.count,
        (49 + 4) as f64,
        "every gap observed"
    );
}

#[test]
fn idle_time_is_jumped_and_a_full_batch_makes_requests_queue() {
    let mut engine = engine_with(small(8192, 2, 2000));
    engine.submit(0, 0.0, 100, 10, None);
    engine.submit(1, 0.0, 100, 10, None);
    engine.submit(2, 0.0, 100, 10, None);
    engine.submit(3, 1000.0, 100, 10, None);
    engine.advance_to(500.0);
    assert_eq!(engine.clock(), 500.0);
    assert_eq!((engine.running(), engine.waiting()), (0, 0));
    engine.advance_to(2000.0);
    // Ten steps for the first pair together, ten for the third, ten for the last: idle time
    // costs no steps.
    assert_eq!(engine.counters.steps, 30);
    let done = engine.take_finished();
    assert_eq!(done[0].queue_seconds, 0.0);
    let third = done.iter().find(|r| r.id == 2).unwrap();
    assert!(
        (third.queue_seconds - done[0].finish).abs() < 1e-12,
        "waits for a seat"
    );
    let last = done.iter().find(|r| r.id == 3).unwrap();
    assert_eq!(last.queue_seconds, 0.0);
    assert!(last.finish > 1000.0 && last.finish < 1001.0);
}

#[test]
fn a_full_kv_cache_preempts_the_newest_request_and_it_still_completes() {
    // 20 blocks of 16 tokens; three requests each grow to 214 tokens (14 blocks).
    let mut engine = engine_with(small(8192, 8, 20));
    for id in 0..3 {
        engine.submit(id, 0.0, 64, 150, None);
    }
    run_steps(&mut engine);
    assert!(engine.counters.preemptions > 0);
    let done = engine.take_finished();
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|r| r.outcome == Outcome::Finished));
    let oldest = done.iter().find(|r| r.id == 0).unwrap();
    assert_eq!(
        oldest.preemptions, 0,
        "the oldest request is never the victim"
    );
    assert!(done.iter().any(|r| r.preemptions > 0));
    assert_eq!(engine.counters.generation_tokens, 450);
    assert_eq!(
        engine.counters.prompt_tokens_computed, 192,
        "counted once per request"
    );
    assert_eq!(engine.kv_blocks().0, 0);
}

#[test]
fn a_prefix_hit_skips_prefill_compute() {
    let mut engine = engine_with(small(8192, 8, 2000));
    engine.submit(0, 0.0, 1024, 10, Some(&[1, 2]));
    engine.advance_to(10.0);
    let cold = finished_by_id(&mut engine, 0);
    assert_eq!(engine.counters.prefix_cache_hits, 0);

    engine.submit(1, 10.0, 1024, 10, Some(&[1, 2]));
    engine.advance_to(20.0);
    let warm = finished_by_id(&mut engine, 1);
    // All but the last block: at least one token is computed.
    assert_eq!(warm.cached_tokens, 1008);
    assert!(warm.ttft_seconds.unwrap() < cold.ttft_seconds.unwrap());
    let c = engine.counters;
    assert_eq!((c.prefix_cache_queries, c.prefix_cache_hits), (2048, 1008));
    assert_eq!(
        (c.prompt_tokens_computed, c.prompt_tokens_cached),
        (1040, 1008)
    );

    // The same prompt without hashes never hits; a shared first hash id hits its 32 blocks.
    engine.submit(2, 20.0, 1024, 10, None);
    engine.submit(3, 20.0, 1024, 10, Some(&[1, 9]));
    engine.advance_to(30.0);
    let done = engine.take_finished();
    let cached: Vec<u64> = done.iter().map(|r| r.cached_tokens).collect();
    assert_eq!(cached, [0, 512]);
}

#[test]
fn the_prefix_cache_evicts_the_least_recently_freed_blocks_first() {
    // 70 blocks: room for two cached 512-token prompts (32 blocks each) and a little more.
    let mut engine = engine_with(small(8192, 8, 70));
    let hits_of = |engine: &mut RequestEngine, id: u64, hash: u64| {
        engine.submit(id, engine.clock(), 512, 1, Some(&[hash]));
        engine.advance_to(engine.clock() + 1.0);
        finished_by_id(engine, id).cached_tokens
    };
    assert_eq!(hits_of(&mut engine, 0, 1), 0);
    assert_eq!(hits_of(&mut engine, 1, 2), 0);
    assert_eq!(hits_of(&mut engine, 2, 3), 0, "evicts most of hash 1");
    assert_eq!(
        hits_of(&mut engine, 3, 2),
        496,
        "hash 2, freed later, is whole"
    );
    // Freed blocks are queued last block first, so hash 1 lost its tail and kept a prefix.
    let kept = hits_of(&mut engine, 4, 1);
    assert!(kept > 0 && kept < 496, "{kept}");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let (first, a) = sharegpt_run(16.0, 300, 42);
    let (second, b) = sharegpt_run(16.0, 300, 42);
    assert_eq!(first, second);
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.histograms, b.histograms);
    let (third, _) = sharegpt_run(16.0, 300, 44);
    assert!(first != third, "another seed, another run");
}

#[test]
fn an_hour_of_a_trace_rate_runs_through() {
    let (done, engine) = sharegpt_run(5.5, 5 * 3600 + 1800, 5);
    assert_eq!(done.len(), 19_800);
    assert_eq!(engine.counters.generation_tokens, 19_800 * 202);
}

#[derive(Clone, Debug)]
struct Submission {
    gap_ms: u32,
    prompt: u64,
    output: u64,
    hashes: Option<Vec<u64>>,
}

fn submission() -> impl Strategy<Value = Submission> {
    let length = prop_oneof![
        4 => 0..3000u64,
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => 1u64 << 40..u64::MAX,
    ];
    let output = prop_oneof![4 => 0..200u64, 1 => Just(0u64), 1 => Just(u64::MAX)];
    (
        0..200u32,
        length,
        output,
        proptest::option::of(proptest::collection::vec(0..4u64, 0..6)),
    )
        .prop_map(|(gap_ms, prompt, output, hashes)| Submission {
            gap_ms,
            prompt,
            output,
            hashes,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_request_finishes_once_and_tokens_are_conserved(
        submissions in proptest::collection::vec(submission(), 0..40),
        budget in 1..1000u64,
        seqs in 1..16usize,
        blocks in 1..400u32,
    ) {
        let mut engine = engine_with(SchedulerLimits {
            max_num_batched_tokens: budget,
            max_num_seqs: seqs,
            kv_blocks: blocks,
            max_model_len: 4096,
        });
        let mut arrival = 0.0;
        for (id, s) in submissions.iter().enumerate() {
            arrival += f64::from(s.gap_ms) / 1000.0;
            engine.submit(id as u64, arrival, s.prompt, s.output, s.hashes.as_deref());
        }
        run_steps(&mut engine);
        let mut done = engine.take_finished();
        done.sort_by_key(|r| r.id);
        let ids: Vec<u64> = done.iter().map(|r| r.id).collect();
        prop_assert_eq!(ids, (0..submissions.len() as u64).collect::<Vec<_>>());
        let finished: Vec<_> = done.iter().filter(|r| r.outcome == Outcome::Finished).collect();
        let c = engine.counters;
        prop_assert_eq!(c.successes + c.rejected, submissions.len() as u64);
        prop_assert_eq!(c.successes, finished.len() as u64);
        prop_assert_eq!(c.generation_tokens, finished.iter().map(|r| r.output_tokens).sum::<u64>());
        prop_assert_eq!(
            c.prompt_tokens_computed + c.prompt_tokens_cached,
            finished.iter().map(|r| r.prompt_tokens).sum::<u64>()
        );
        prop_assert!(c.prefix_cache_hits <= c.prefix_cache_queries);
        prop_assert_eq!(engine.kv_blocks().0, 0);
        for r in &finished {
            prop_assert!(r.queue_seconds >= 0.0 && r.finish >= r.arrival);
            prop_assert_eq!(r.ttft_seconds.is_some(), r.output_tokens > 0);
        }
    }
}

#[test]
fn a_prefill_chunk_in_a_decode_step_is_a_stall_the_requests_gaps_count() {
    // One request decodes alone (9.5 ms steps); at 0.5 s an 8,000-token prompt arrives and
    // its prefill rides one step of about 360 ms (309 ms of dense layers, 40 ms of attention). The decoding request sees one gap over a
    // 50 ms objective among its 99; the step log sees it too, in the minute it ended.
    let mut engine = RequestEngine::new(profile()).unwrap();
    assert_eq!(engine.itl_objective_seconds, 0.05);
    engine.submit(0, 0.0, 100, 100, None);
    engine.submit(1, 0.5, 8000, 2, None);
    engine.advance_to(60.0);
    let done = engine.take_finished();
    let first = done.iter().find(|r| r.id == 0).unwrap();
    assert_eq!((first.gaps, first.slow_gaps), (99, 1));
    let long = done.iter().find(|r| r.id == 1).unwrap();
    assert_eq!((long.gaps, long.slow_gaps), (1, 0));
    let log = engine.take_gaps();
    assert_eq!(log.over(0), (100, 1));
    let top = log.quantile(None, 1.0).unwrap();
    assert!(
        (0.33..0.38).contains(&top),
        "the stall is the top gap: {top}"
    );
    // The same run against a 400 ms objective has no slow gap.
    let mut lenient = RequestEngine::new(profile()).unwrap();
    lenient.itl_objective_seconds = 0.4;
    lenient.submit(0, 0.0, 100, 100, None);
    lenient.submit(1, 0.5, 8000, 2, None);
    lenient.advance_to(60.0);
    let first = finished_by_id(&mut lenient, 0);
    assert_eq!((first.gaps, first.slow_gaps), (99, 0));
}
