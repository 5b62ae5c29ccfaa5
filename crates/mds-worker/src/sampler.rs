//! One pass's sampling of a target: which Pods to scrape (D6), their pages through the
//! `MetricsSource` port, and the per-role observations (D7–D10). Counter baselines live in the
//! worker's `SampleStore`, per Pod UID, and are dropped when a Pod stops answering or goes, or
//! when they are older than two sampling intervals. The store also keeps each role's newest
//! valid reading, which turns a role that has not answered for three intervals `Stale`.

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use mds_api::target::ModelDeployment;
use mds_signals::engine::{EngineKind, EngineSample};
use mds_signals::scrape::{self, ScrapeTarget};
use mds_signals::{PodReading, RoleInputs, RoleObservation, SampleStore, engine};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::facts::{pod_facts, ready_instances, ready_since, restart_count};
use crate::ports::{MetricsSource, ScrapeError};

/// How one Pod's scrape went.
#[derive(Clone, Debug, PartialEq)]
pub struct ScrapeResult {
    pub role: String,
    pub pod_uid: String,
    pub seconds: f64,
    pub error: Option<ScrapeError>,
}

/// The observations of a pass and how the scrapes went.
#[derive(Clone, Debug, Default)]
pub struct Sampling {
    pub observations: BTreeMap<String, RoleObservation>,
    pub scrapes: Vec<ScrapeResult>,
    /// Why nothing was scraped, when that is the target's fault (an unknown engine).
    pub problem: Option<String>,
}

/// Scrapes the target's Pods and observes every role.
pub async fn sample<M: MetricsSource>(
    metrics: &M,
    store: &mut SampleStore,
    md: &ModelDeployment,
    pods: &[Arc<Pod>],
    interval_seconds: u32,
    now: Timestamp,
) -> Sampling {
    // Baselines of Pods that are gone describe nothing any more.
    let live: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect();
    store.retain(&live);
    let roles: Vec<&str> = md.spec.roles.iter().map(|r| r.name.as_str()).collect();
    store.retain_roles(&roles);
    // A baseline older than two intervals starts a new window (D8).
    store.set_sampling_interval(interval_seconds);
    let engine_kind = match md.engine_kind() {
        Ok(kind) => kind,
        Err(unknown) => {
            return Sampling {
                problem: Some(unknown.to_string()),
                ..Sampling::default()
            };
        }
    };
    let mut sampling = Sampling::default();
    // Each page counts as read when it arrived, not when the pass began: at scale a read can
    // wait for a permit or a slow engine for a good part of a second, and counter deltas over
    // pass-start times would be off by that much (3 % of a 15 s interval per half second).
    // The source's clock, so paused time keeps tests and simulations deterministic.
    let started = metrics.now();
    let mut plans = Vec::new();
    for role in &md.spec.roles {
        let plan = scrape::plan(&pod_facts(pods, &role.name), md.load_balance(&role.name));
        plans.push((role, plan));
    }
    // Every Pod of every role at once; the source bounds concurrency across scalers. Each
    // page is parsed the moment it arrives and its text dropped: the pass holds samples, not
    // the pages of all its Pods until the slowest has answered.
    let fetches = plans.iter().flat_map(|(role, plan)| {
        plan.targets
            .iter()
            .map(move |t| fetch_one(metrics, engine_kind, role.name.as_str(), t))
    });
    let pages = join_all(fetches).await;
    let pod_states: BTreeMap<&str, (Option<u32>, Option<Timestamp>)> = pods
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.uid.as_deref()?,
                (restart_count(p), ready_since(p)),
            ))
        })
        .collect();
    let optional: BTreeSet<&str> = plans
        .iter()
        .flat_map(|(_, plan)| plan.targets.iter())
        .filter(|t| !t.required)
        .map(|t| t.uid.as_str())
        .collect();
    // Opted-in non-leaders that answered: endpoints too, though coverage never waits for them.
    let mut optional_answered: BTreeMap<&str, u32> = BTreeMap::new();
    let mut readings: BTreeMap<&str, Vec<PodReading>> = BTreeMap::new();
    for (role, uid, fetch, page) in pages {
        let read_at = now
            .saturating_add(fetch.arrived_after(started))
            .unwrap_or(now);
        let error = match page {
            Ok(engine_sample) => {
                let (restarts, ready) = pod_states.get(uid.as_str()).copied().unwrap_or_default();
                let mut reading = store.record(engine_kind, &uid, restarts, engine_sample, read_at);
                reading.ready_since = ready;
                if reading.is_valid() {
                    store.note_valid_reading(role, read_at);
                }
                readings.entry(role).or_default().push(reading);
                if optional.contains(uid.as_str()) {
                    *optional_answered.entry(role).or_default() += 1;
                }
                None
            }
            Err(e) => {
                // No answer: the next valid sample starts a new window (D8).
                store.forget(&uid);
                Some(e)
            }
        };
        sampling.scrapes.push(ScrapeResult {
            role: role.to_string(),
            pod_uid: uid,
            seconds: fetch.seconds,
            error,
        });
    }
    for (role, plan) in &plans {
        let role_readings = readings.remove(role.name.as_str()).unwrap_or_default();
        let mut observation = mds_signals::observe_role(&RoleInputs {
            kind: &role.kind(),
            // The endpoints totals are estimated for and coverage is judged against (D9).
            ready_replicas: plan.required_ready
                + optional_answered
                    .get(role.name.as_str())
                    .copied()
                    .unwrap_or(0),
            readings: &role_readings,
            interval_seconds,
            now,
        });
        // Capacity counts serving replicas: instances whose members are all ready.
        observation.ready_replicas = ready_instances(md, pods, &role.name);
        // D6: more eligible Pods than the cap, or Pods whose address is unusable, leave the
        // role's coverage incomplete.
        if plan.capped || !plan.unusable.is_empty() {
            observation.coverage_complete = false;
        }
        // D10: no usable reading now, and the newest valid one expired.
        observation.expire(
            store.newest_valid_reading(&role.name),
            interval_seconds,
            now,
        );
        sampling.observations.insert(role.name.clone(), observation);
    }
    sampling
}

/// When one page arrived, on the source's clock (none when it keeps none), and how long its
/// read took.
struct FetchTimes {
    arrived: Option<Timestamp>,
    seconds: f64,
}

impl FetchTimes {
    /// How long after `start` the page arrived; zero without a clock or when the clock went
    /// back.
    fn arrived_after(&self, start: Option<Timestamp>) -> jiff::SignedDuration {
        match (start, self.arrived) {
            (Some(start), Some(arrived)) => arrived
                .duration_since(start)
                .max(jiff::SignedDuration::ZERO),
            _ => jiff::SignedDuration::ZERO,
        }
    }
}

/// Reads one Pod's page and parses it as soon as it has arrived.
async fn fetch_one<'a, M: MetricsSource>(
    metrics: &M,
    engine_kind: EngineKind,
    role: &'a str,
    target: &ScrapeTarget,
) -> (
    &'a str,
    String,
    FetchTimes,
    Result<EngineSample, ScrapeError>,
) {
    let began = metrics.now();
    // Only the families the adapter reads are parsed; no notes for inspection.
    let page = metrics
        .fetch_with(&target.url, |text| engine::read_text(engine_kind, text))
        .await;
    let arrived = metrics.now();
    let seconds = match (began, arrived) {
        (Some(began), Some(arrived)) => arrived.duration_since(began).as_secs_f64().max(0.0),
        _ => 0.0,
    };
    let times = FetchTimes { arrived, seconds };
    (role, target.uid.clone(), times, page)
}
