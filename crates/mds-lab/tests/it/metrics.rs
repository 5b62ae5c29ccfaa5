//! Engine pages scraped over HTTP from each Pod's own loopback address, the way the controller
//! scrapes them, give back the load the stand-in offers.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use jiff::Timestamp;
use mds_api::target::{EngineKind, RoleKind};
use mds_lab::{Load, LoadProfile, StandInOptions};
use mds_operator::MetricsSource;
use mds_operator::http_source::{HttpSource, ScrapeConfig};
use mds_signals::engine::read;
use mds_signals::exposition::parse;
use mds_signals::observation::{RoleInputs, observe_role};
use mds_signals::samples::{PodReading, SampleStore};
use mds_testkit::eventually;

/// Scrapes each Pod's page at the address and port its status and annotations give.
async fn scrape(
    source: &HttpSource,
    pods: &[k8s_openapi::api::core::v1::Pod],
    store: &mut SampleStore,
) -> Vec<PodReading> {
    let mut readings = Vec::new();
    for pod in pods {
        let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
        let port = annotation(pod, "prometheus.io/port").unwrap();
        let path = annotation(pod, "prometheus.io/path").unwrap();
        let page = source
            .fetch(&format!("http://{ip}:{port}{path}"))
            .await
            .unwrap_or_else(|e| panic!("scraping {ip}: {e:?}"));
        let at = Timestamp::now();
        let parsed = parse(&page);
        assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
        let uid = pod.metadata.uid.as_deref().unwrap();
        readings.push(store.record(
            EngineKind::Vllm,
            uid,
            Some(0),
            read(EngineKind::Vllm, &parsed),
            at,
        ));
    }
    readings
}

#[tokio::test]
async fn pages_scraped_over_http_give_back_the_offered_load() {
    let load = Load::new(4.0, 1000.0, 200.0, 0.25).unwrap();
    let options = StandInOptions {
        world: fast_world(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("metrics", options).await else {
        return;
    };
    lab.standin.set_load(
        &lab.namespace,
        "llm",
        None,
        LoadProfile::constant(load).unwrap(),
    );
    lab.create_target("llm", "vLLM", true, &[("server", "Server", 2, 1)])
        .await;
    let pods = eventually("two ready Pods", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(pods)
    })
    .await
    .unwrap();
    let source = HttpSource::new(ScrapeConfig::default()).unwrap();
    let mut store = SampleStore::default();
    scrape(&source, &pods, &mut store).await;
    // Rates need an interval; wait for one to pass, then scrape again.
    let first = Instant::now();
    eventually("five seconds between scrapes", WAIT, || async {
        (first.elapsed() >= Duration::from_secs(5)).then_some(())
    })
    .await
    .unwrap();
    let readings = scrape(&source, &pods, &mut store).await;
    let observed = observe_role(&RoleInputs {
        kind: &RoleKind::Server,
        ready_replicas: 2,
        readings: &readings,
        interval_seconds: 5,
        now: Timestamp::now(),
    });
    let close = |what: &str, actual: Option<f64>, expected: f64| {
        let actual = actual.unwrap_or_else(|| panic!("{what} is missing: {observed:?}"));
        assert!(
            (actual - expected).abs() <= 0.03 * expected,
            "{what}: {actual} against {expected} offered"
        );
    };
    close(
        "cache-missed prompt tokens/s",
        observed.prompt_tokens_per_second,
        load.missed_prompt_tokens_per_second(),
    );
    close(
        "generation tokens/s",
        observed.generation_tokens_per_second,
        load.generation_tokens_per_second(),
    );
    assert!(observed.running_requests.unwrap() > 0.0);

    // A Pod that is not serving has no page: a stopped engine refuses, as a real one would not
    // answer either.
    let ip = pods[0].status.as_ref().unwrap().pod_ip.clone().unwrap();
    let other_port = source.fetch(&format!("http://{ip}:8001/metrics")).await;
    assert!(other_port.is_err(), "nothing listens on another port");
    lab.assert_no_errors();
}
