//! Engine pages rendered by the world, read back through the scaler's own signal path (parser,
//! adapter, sample windows, role observation), give back the offered load.

use crate::common;

use common::*;
use jiff::Timestamp;
use mds_api::status::SignalState;
use mds_api::target::{Engine, EngineKind, RoleKind};
use mds_signals::RoleObservation;
use mds_signals::engine::read;
use mds_signals::exposition::parse;
use mds_signals::observation::{RoleInputs, observe_role};
use mds_signals::samples::{PodReading, PromptPath, SampleStore};
use mds_sim::{Load, LoadProfile, World};

/// Scrapes every serving Pod of `role` now into `store`.
fn scrape(
    world: &World,
    key: &mds_sim::DeploymentKey,
    role: &str,
    engine: EngineKind,
    store: &mut SampleStore,
) -> Vec<PodReading> {
    let at: Timestamp = world.now();
    world
        .pods(key)
        .iter()
        .filter(|p| p.role == role && p.serves_metrics)
        .map(|p| {
            let page = world
                .metrics_page("serving", p.metadata.name.as_deref().unwrap())
                .unwrap();
            let parsed = parse(&page);
            assert!(
                parsed.skipped.is_empty(),
                "every line parses: {:?}",
                parsed.skipped
            );
            let uid = p.metadata.uid.as_deref().unwrap();
            store.record(
                engine,
                uid,
                Some(p.restart_count),
                read(engine, &parsed),
                at,
            )
        })
        .collect()
}

/// Serves `load` on `role` and observes it over a 30 s window after a minute of warm-up.
fn observe(
    engine: &str,
    version: Option<&str>,
    roles: &[RoleSpec],
    load: Load,
    role: &str,
) -> RoleObservation {
    let mut world = world(0);
    let mut md = target("llm", engine, true, roles);
    md.spec.engine = Some(Engine {
        name: engine.into(),
        version: version.map(String::from),
    });
    let k = world.apply_deployment(md).unwrap();
    for (name, ..) in roles {
        world
            .set_load(&k, name, LoadProfile::constant(load).unwrap())
            .unwrap();
    }
    world.advance_to(t(60)).unwrap();
    let kind = EngineKind::from_name(engine).unwrap();
    let mut store = SampleStore::default();
    scrape(&world, &k, role, kind, &mut store);
    world.advance_to(t(90)).unwrap();
    let readings = scrape(&world, &k, role, kind, &mut store);
    let role_kind = roles
        .iter()
        .find(|r| r.0 == role)
        .map(|r| RoleKind::parse(r.1))
        .unwrap();
    observe_role(&RoleInputs {
        kind: &role_kind,
        ready_replicas: readings.len() as u32,
        readings: &readings,
        interval_seconds: 30,
        now: world.now(),
    })
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("value present");
    // Counters are whole tokens: at most one token per Pod and window lost to rounding.
    assert!(
        (actual - expected).abs() <= 0.001 * expected + 0.2,
        "{actual} vs {expected}"
    );
}

const SERVER: &[RoleSpec] = &[("server", "Server", 2, 1)];

#[test]
fn vllm_0_10_pages_give_back_the_offered_rates() {
    let load = Load::new(4.0, 1500.0, 300.0, 0.4).unwrap();
    let o = observe("vLLM", Some("0.10.2"), SERVER, load, "server");
    assert_eq!(o.signal_state, SignalState::Fresh);
    assert!(o.coverage_complete);
    close(o.prompt_tokens_per_second, 4.0 * 1500.0 * 0.6);
    close(o.generation_tokens_per_second, 4.0 * 300.0);
    assert_eq!(o.prompt_paths, vec![PromptPath::PromptMinusPrefixHits]);
    assert!(o.running_requests.unwrap() > 0.0);
    assert_eq!(o.waiting_requests, Some(0.0));
    assert!(o.kv_cache_usage.unwrap() > 0.0);
    assert!(o.ttft_milliseconds.unwrap() > 50.0);
    assert!(o.itl_milliseconds.unwrap() >= 15.0);
}

#[test]
fn vllm_0_11_pages_give_back_the_offered_rates() {
    let load = Load::new(3.0, 800.0, 120.0, 0.0).unwrap();
    let o = observe("vLLM", Some("0.11.0"), SERVER, load, "server");
    close(o.prompt_tokens_per_second, 3.0 * 800.0);
    close(o.generation_tokens_per_second, 3.0 * 120.0);
}

#[test]
fn sglang_pages_give_back_the_offered_rates() {
    let load = Load::new(5.0, 2000.0, 250.0, 0.5).unwrap();
    let o = observe("SGLang", None, SERVER, load, "server");
    close(o.prompt_tokens_per_second, 5.0 * 2000.0 * 0.5);
    close(o.generation_tokens_per_second, 5.0 * 250.0);
    assert_eq!(o.prompt_paths, vec![PromptPath::EffectiveInput]);
    assert!(o.ttft_milliseconds.is_some() && o.itl_milliseconds.is_some());
}

#[test]
fn prefill_and_decode_roles_report_their_own_work() {
    let pd: &[RoleSpec] = &[("prefill", "Prefill", 2, 1), ("decode", "Decode", 2, 1)];
    let load = Load::new(4.0, 3000.0, 400.0, 0.25).unwrap();
    for engine in ["vLLM", "SGLang"] {
        let prefill = observe(engine, None, pd, load, "prefill");
        close(prefill.prompt_tokens_per_second, 4.0 * 3000.0 * 0.75);
        close(prefill.generation_tokens_per_second, 4.0);
        assert_eq!(
            prefill.itl_milliseconds, None,
            "{engine}: a prefill engine emits one token"
        );
        let decode = observe(engine, None, pd, load, "decode");
        close(decode.generation_tokens_per_second, 4.0 * 400.0);
        assert!(decode.ttft_milliseconds.is_some() && decode.itl_milliseconds.is_some());
    }
}

#[test]
fn an_overloaded_role_serves_its_capacity_and_queues() {
    // Two instances of 2,500 output tokens/s each against 8,000 offered.
    let load = Load::new(40.0, 100.0, 200.0, 0.0).unwrap();
    let o = observe("vLLM", None, SERVER, load, "server");
    let generated = o.generation_tokens_per_second.unwrap();
    assert!(generated < 5_000.0 && generated > 4_000.0, "{generated}");
    assert!(o.waiting_requests.unwrap() > 100.0);
    assert!(o.ttft_milliseconds.unwrap() > 1_000.0);
}

#[test]
fn a_trace_profile_round_trips_its_token_totals() {
    let mut rows = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\r\n");
    for i in 0..600 {
        // Two requests per second for 300 s, alternating lengths.
        let (context, generated) = if i % 2 == 0 { (900, 100) } else { (300, 60) };
        rows.push_str(&format!(
            "2023-11-16 18:{:02}:{:02}.{:07},{context},{generated}\r\n",
            17 + (i / 2) / 60,
            (i / 2) % 60,
            (i % 2) * 5_000_000
        ));
    }
    let trace = mds_sim::Trace::parse_azure_csv(&rows).unwrap();
    let profile = trace.to_profile(1.0).unwrap();
    let mut world = world(0);
    let k = world
        .apply_deployment(target("llm", "vLLM", true, SERVER))
        .unwrap();
    world.step(t(0)).unwrap();
    world.set_load(&k, "server", profile).unwrap();
    world.advance_to(t(400)).unwrap();
    let served: f64 = world
        .instances(&k)
        .iter()
        .map(|i| i.engine.as_ref().unwrap().counters.prompt_tokens)
        .sum();
    assert!((served - 300.0 * (900.0 + 300.0)).abs() < 1e-6, "{served}");
}
