//! Target 7: the worker's passes over arbitrary engine pages, Pod states and API faults in the
//! in-memory cluster (structure-aware: the bytes choose the roles, bounds, counts, each
//! Pod's readiness, each page's numbers or garbage, each write's fault and the time between
//! passes). Oracles: no panic, and after every pass the spec's invariants hold as the
//! simulator checks them (`mds_simulate::invariants`): bounds, ratio bands, one direction
//! per commit, only the scaler's own writes move the target, no growth while unadmitted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use arbitrary::{Result, Unstructured};
use jiff::{SignedDuration, Timestamp};
use mds_api::ModelDeploymentScaler;
use mds_core::WriteKind;
use mds_simulate::invariants::{PassFacts, check};
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
use mds_worker::memory_cluster::{self, Fault, Kind, MemoryCluster, ready};
use mds_worker::{MetricsSource, ScalerKey, ScrapeError, Worker};

/// Passes per input: enough for a bind, growth, a guard and a shrink.
const MAX_PASSES: usize = 12;
const NAMESPACE: &str = "ns";

pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(mut world) = World::arbitrary(&mut u) else {
        return;
    };
    for _ in 0..MAX_PASSES {
        // An input used up is the end of the run, not a finding.
        if world.pass(&mut u).is_err() {
            return;
        }
    }
}

/// The engines' pages by URL.
#[derive(Default)]
struct Pages(Mutex<BTreeMap<String, Result<String, ScrapeError>>>);

impl MetricsSource for Pages {
    async fn fetch(&self, url: &str) -> std::result::Result<String, ScrapeError> {
        let pages = self.0.lock().unwrap_or_else(|e| e.into_inner());
        pages
            .get(url)
            .cloned()
            .unwrap_or(Err(ScrapeError::Status(404)))
    }
}

struct World {
    cluster: MemoryCluster,
    worker: Worker,
    pages: Pages,
    roles: Vec<(&'static str, &'static str)>,
    /// Seconds since the start; the pass runs at [`at`] of it.
    now: i64,
    /// Each engine's counters so far (prompt, generation), by URL.
    counters: BTreeMap<String, (u64, u64)>,
    pods_made: u64,
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

impl World {
    fn arbitrary(u: &mut Unstructured<'_>) -> Result<World> {
        let roles = if u.arbitrary()? {
            vec![("prefill", "Prefill"), ("decode", "Decode")]
        } else {
            vec![("server", "Server")]
        };
        let mut scaler = mk_scaler("llm")
            .stored(NAMESPACE, "scaler-1", "1")
            .mode("Active")
            .interval_seconds(15);
        let mut target = mk_target("llm")
            .stored(NAMESPACE, "md-1", "1")
            .engine("vllm");
        for (name, kind) in &roles {
            let min: i32 = u.int_in_range(1..=2)?;
            let max: i32 = u.int_in_range(min..=6)?;
            scaler = scaler.role_bounds(name, min, max);
            // Within the bounds, as after a scaler's first commit: the invariants judge every
            // written count, and a count a user left outside them is not the scaler's.
            let replicas: i32 = u.int_in_range(min..=max)?;
            target = target.role(mk_role(name).kind(kind).replicas(replicas));
        }
        let scaler = scaler.queue_depth(u.choose(&["1", "4", "0.5", "10"])?);
        let cluster = MemoryCluster::new();
        cluster.set_fence(u.arbitrary()?);
        cluster
            .apply(Kind::Target, target.build())
            .expect("the target stores");
        cluster
            .apply(Kind::Scaler, scaler.build())
            .expect("the scaler stores");
        let mut world = World {
            cluster,
            worker: Worker::new(ScalerKey {
                namespace: NAMESPACE.into(),
                name: "llm".into(),
            }),
            pages: Pages::default(),
            roles,
            now: 0,
            counters: BTreeMap::new(),
            pods_made: 0,
        };
        world.follow_counts(u)?;
        Ok(world)
    }

    /// The target's counts by role.
    fn counts(&self) -> BTreeMap<String, i32> {
        let target = self
            .cluster
            .get(Kind::Target, NAMESPACE, "llm")
            .expect("the target stays");
        target["spec"]["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let name = r["name"].as_str().unwrap_or_default().to_string();
                (name, r["replicas"].as_i64().unwrap_or(1) as i32)
            })
            .collect()
    }

    fn generation(&self) -> i64 {
        self.cluster
            .read(Kind::Target, NAMESPACE, "llm", |t| {
                t["metadata"]["generation"].as_i64()
            })
            .flatten()
            .unwrap_or(0)
    }

    /// GPUStack's part: a Pod per instance, each ready or not as the input says; Pods of
    /// removed ordinals go.
    fn follow_counts(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let counts = self.counts();
        for (index, (role, _)) in self.roles.clone().into_iter().enumerate() {
            let count = counts.get(role).copied().unwrap_or(0).max(0);
            for ordinal in 0..8 {
                let name = format!("llm-{role}-{ordinal}");
                let exists = self.cluster.get(Kind::Pod, NAMESPACE, &name).is_some();
                if ordinal < count && !exists {
                    self.pods_made += 1;
                    let ip = format!("127.0.{}.{}", index + 1, ordinal + 10);
                    let pod = mk_pod("llm", role, ordinal as u32)
                        .namespace(NAMESPACE)
                        .uid(&format!("pod-{}", self.pods_made));
                    let pod = if u.ratio(4, 5)? {
                        pod.serving(&ip)
                    } else {
                        pod.port(8000).ip(&ip) // not ready yet
                    };
                    let _ = self.cluster.apply(Kind::Pod, pod.build());
                } else if ordinal >= count && exists {
                    let _ = self
                        .cluster
                        .delete(Kind::Pod, NAMESPACE, &name, at(self.now));
                }
            }
        }
        Ok(())
    }

    /// Every Pod's page for the next pass: vLLM's series with the input's numbers, garbage,
    /// or a failed read.
    fn set_pages(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let mut pages = BTreeMap::new();
        for (index, (role, _)) in self.roles.clone().into_iter().enumerate() {
            for ordinal in 0..8 {
                let url = format!("http://127.0.{}.{}:8000/metrics", index + 1, ordinal + 10);
                let page = match u.int_in_range(0..=9)? {
                    0 => Err(ScrapeError::Timeout(2000)),
                    1 => Err(ScrapeError::Status(500)),
                    2 => Ok(u.arbitrary::<String>()?),
                    _ => Ok(self.page(u, &url, role)?),
                };
                pages.insert(url, page);
            }
        }
        *self.pages.0.lock().unwrap_or_else(|e| e.into_inner()) = pages;
        Ok(())
    }

    fn page(&mut self, u: &mut Unstructured<'_>, url: &str, role: &str) -> Result<String> {
        let counters = self.counters.entry(url.to_string()).or_default();
        // Counters mostly grow; sometimes the engine restarted and they start again.
        if u.ratio(1, 12)? {
            *counters = (0, 0);
        }
        counters.0 += u64::from(u.int_in_range(0u32..=50_000)?);
        counters.1 += u64::from(u.int_in_range(0u32..=20_000)?);
        let running: u32 = u.int_in_range(0..=64)?;
        let waiting: u32 = u.int_in_range(0..=200)?;
        let kv = f64::from(u.int_in_range(0u32..=100)?) / 100.0;
        let (prompt, generation) = *counters;
        Ok(format!(
            "# TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{{model_name=\"m\",engine=\"{role}\"}} {running}\n\
             # TYPE vllm:num_requests_waiting gauge\n\
             vllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n\
             # TYPE vllm:kv_cache_usage_perc gauge\n\
             vllm:kv_cache_usage_perc{{model_name=\"m\"}} {kv}\n\
             # TYPE vllm:prompt_tokens_total counter\n\
             vllm:prompt_tokens_total{{model_name=\"m\"}} {prompt}\n\
             # TYPE vllm:generation_tokens_total counter\n\
             vllm:generation_tokens_total{{model_name=\"m\"}} {generation}\n"
        ))
    }

    /// One pass, checked against the invariants; then GPUStack follows the counts.
    fn pass(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        self.set_pages(u)?;
        if u.ratio(1, 6)? {
            let fault = *u.choose(&[
                Fault::Conflict,
                Fault::Unavailable,
                Fault::Forbidden,
                Fault::Invalid,
                Fault::Timeout,
            ])?;
            self.cluster
                .script(memory_cluster::WriteKind::PatchTarget, fault);
        }
        self.now += i64::from(*u.choose(&[15u32, 15, 15, 1, 5, 60, 300])?);
        let scaler: ModelDeploymentScaler = self
            .cluster
            .scaler(NAMESPACE, "llm")
            .map(|s| (*s).clone())
            .expect("the scaler stays");
        let before = self.counts();
        let generation = self.generation();
        let report = ready(self.worker.pass(&self.cluster, &self.pages, at(self.now)));
        let after = self.counts();
        let (wrote_target, rollback) = match &report.write {
            Some((kind, result)) => (result.is_ok(), *kind == WriteKind::Rollback),
            None => (false, false),
        };
        let violations = check(&PassFacts {
            now: at(self.now),
            t: self.now as f64,
            scaler: &scaler,
            before: &before,
            after: &after,
            target_changed: self.generation() != generation,
            wrote_target,
            unadmitted: false,
            held: &before,
            rollback,
        });
        assert!(
            violations.is_empty(),
            "at {} s the pass broke {violations:?} (report: {:?})",
            self.now,
            report.write
        );
        self.follow_counts(u)
    }
}
