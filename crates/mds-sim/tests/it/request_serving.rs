//! The world offered requests: routing at arrival, pages from the request-level engines,
//! disaggregated hand-off, and every request accounted for.

use crate::common;

use std::sync::Arc;

use common::{key, t, target, world};
use mds_sim::load::TraceRequest;
use mds_sim::{RequestServing, Router, ServedOutcome, ServedRequest, Trace, World};

fn trace(count: usize, every: f64, prompt: u32, output: u32) -> Arc<Trace> {
    Arc::new(Trace {
        requests: (0..count)
            .map(|i| TraceRequest {
                at_seconds: i as f64 * every,
                prompt_tokens: prompt,
                output_tokens: output,
                prefix_hit_tokens: 0,
                block_hashes: None,
            })
            .collect(),
    })
}

fn run(world: &mut World, name: &str, until: i64) -> Vec<ServedRequest> {
    let mut served = Vec::new();
    for s in 1..=until {
        world.step(t(s)).unwrap();
        served.extend(world.take_served(&key(name)));
    }
    served
}

fn counter(page: &str, name: &str) -> f64 {
    page.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[test]
fn requests_before_ready_are_unrouted_then_served_and_counted_on_the_page() {
    let mut w = world(10);
    let k = w
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 2, 1)]))
        .unwrap();
    // 2 requests/s for 60 s: the first 10 s find no ready instance. Each request decodes
    // for about a second, so two overlap and least outstanding sends work to both.
    w.set_requests(&k, trace(120, 0.5, 300, 100), RequestServing::default())
        .unwrap();
    let served = run(&mut w, "chat", 120);
    assert_eq!(served.len(), 120, "every request ends once");
    let unrouted = served
        .iter()
        .filter(|r| r.outcome == ServedOutcome::Unrouted)
        .count();
    assert!((19..=22).contains(&unrouted), "{unrouted} before ready");
    let finished: Vec<_> = served
        .iter()
        .filter(|r| r.outcome == ServedOutcome::Finished)
        .collect();
    assert_eq!(finished.len() + unrouted, 120);
    for r in &finished {
        let ttft = r.ttft_seconds.unwrap();
        assert!(ttft > 0.005 && ttft < 0.2, "ttft {ttft}");
        let itl = r.itl_seconds.unwrap();
        assert!(itl > 0.005 && itl < 0.05, "itl {itl}");
    }
    // The pages add up to what was served: least outstanding spreads it over both.
    let pods: Vec<_> = w
        .pods(&k)
        .into_iter()
        .filter(|p| p.serves_metrics)
        .collect();
    assert_eq!(pods.len(), 2);
    let mut generated = 0.0;
    for p in &pods {
        let page = w
            .metrics_page("serving", p.metadata.name.as_deref().unwrap())
            .unwrap();
        let mine = counter(&page, "vllm:generation_tokens_total");
        assert!(mine > 0.0, "both instances serve:\n{page}");
        generated += mine;
        assert_eq!(counter(&page, "vllm:num_requests_running"), 0.0);
    }
    assert_eq!(generated, 100.0 * finished.len() as f64);
}

#[test]
fn disaggregated_requests_hand_their_kv_to_decode() {
    let mut w = world(5);
    let k = w
        .apply_deployment(target(
            "pd",
            "vLLM",
            true,
            &[("prefill", "Prefill", 1, 1), ("decode", "Decode", 1, 1)],
        ))
        .unwrap();
    w.advance_to(t(7)).unwrap();
    assert!(w.instances(&k).iter().all(|i| i.routed));
    // Offered once both are ready; a 10 GB/s link: 2,000 tokens × 128 KiB take 26 ms.
    let serving = RequestServing {
        link_bytes_per_second: 10e9,
        ..RequestServing::default()
    };
    w.set_requests(&k, trace(20, 1.0, 2000, 100), serving)
        .unwrap();
    let mut served = Vec::new();
    for s in 8..=60 {
        w.step(t(s)).unwrap();
        served.extend(w.take_served(&k));
    }
    assert_eq!(served.len(), 20);
    for r in &served {
        assert_eq!(r.outcome, ServedOutcome::Finished);
        // Prefill of 2,000 tokens (about 90 ms) + 26 ms of transfer + a decode step.
        let ttft = r.ttft_seconds.unwrap();
        assert!(ttft > 0.11 && ttft < 0.3, "ttft {ttft}");
    }
    let page = |role: &str| {
        let pod = w
            .pods(&k)
            .into_iter()
            .find(|p| p.role == role && p.serves_metrics)
            .unwrap();
        w.metrics_page("serving", pod.metadata.name.as_deref().unwrap())
            .unwrap()
    };
    assert_eq!(
        counter(&page("prefill"), "vllm:generation_tokens_total"),
        20.0
    );
    assert_eq!(
        counter(&page("decode"), "vllm:generation_tokens_total"),
        2000.0
    );
    assert_eq!(
        counter(&page("prefill"), "vllm:prompt_tokens_total"),
        40_000.0
    );
}

#[test]
fn a_restart_loses_the_requests_inside() {
    let mut w = world(5);
    let k = w
        .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 1, 1)]))
        .unwrap();
    w.advance_to(t(7)).unwrap();
    assert!(w.instances(&k).iter().all(|i| i.routed));
    // Long outputs: each request runs for seconds.
    w.set_requests(&k, trace(10, 0.1, 500, 2000), RequestServing::default())
        .unwrap();
    w.step(t(8)).unwrap();
    w.step(t(9)).unwrap();
    w.restart_member(&k, "server", 0, 0).unwrap();
    let mut served = Vec::new();
    for s in 10..=20 {
        w.step(t(s)).unwrap();
        served.extend(w.take_served(&k));
    }
    assert_eq!(served.len(), 10);
    assert!(served.iter().all(|r| r.outcome == ServedOutcome::Lost));
    assert_eq!(w.pending_requests(&k), (0, 0));
}

#[test]
fn routers_spread_or_follow_the_prefix() {
    let hashed = |n: usize| {
        Arc::new(Trace {
            requests: (0..n)
                .map(|i| TraceRequest {
                    at_seconds: i as f64 * 0.5,
                    prompt_tokens: 1024,
                    output_tokens: 4,
                    prefix_hit_tokens: 0,
                    // Everyone shares the first 512-token span.
                    block_hashes: Some(Arc::from(vec![7, 100 + i as u64])),
                })
                .collect(),
        })
    };
    let hits = |router: Router| {
        let mut w = world(1);
        let k = w
            .apply_deployment(target("chat", "vLLM", true, &[("server", "Server", 3, 1)]))
            .unwrap();
        w.advance_to(t(2)).unwrap();
        let serving = RequestServing {
            router,
            ..RequestServing::default()
        };
        w.set_requests(&k, hashed(30), serving).unwrap();
        let mut served = Vec::new();
        for s in 3..=40 {
            w.step(t(s)).unwrap();
            served.extend(w.take_served(&k));
        }
        assert_eq!(served.len(), 30);
        served.iter().map(|r| r.cached_tokens).sum::<u64>()
    };
    // Round robin computes the shared span once per instance, prefix-aware once.
    assert_eq!(hits(Router::RoundRobin), 27 * 512);
    assert_eq!(hits(Router::PrefixAware), 29 * 512);
}
