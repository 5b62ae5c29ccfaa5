//! One pass's sampling of a target: which Pods to scrape (D6), their pages through the
//! `MetricsSource` port, and the per-role observations (D7–D10). Counter baselines live in the
//! worker's `SampleStore`, per Pod UID, and are dropped when a Pod stops answering or goes, or
//! when they are older than two sampling intervals. The store also keeps each role's newest
//! valid reading, which turns a role that has not answered for three intervals `Stale`.

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use mds_api::target::{ModelDeployment, TargetRole};
use mds_signals::engine::{EngineKind, EngineSample};
use mds_signals::scrape::{self, ScrapePlan, ScrapeTarget};
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
    let pass = Pass {
        md,
        pods,
        interval_seconds,
        now,
    };
    prune_store(store, pass);
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
    let plans: Vec<(&TargetRole, ScrapePlan)> = md
        .spec
        .roles
        .iter()
        .map(|role| {
            let plan = scrape::plan(&pod_facts(pods, &role.name), md.load_balance(&role.name));
            (role, plan)
        })
        .collect();
    // Every Pod of every role at once; the source bounds concurrency across scalers. Each
    // page is parsed the moment it arrives and its text dropped: the pass holds samples, not
    // the pages of all its Pods until the slowest has answered.
    let fetches = plans.iter().flat_map(|(role, plan)| {
        plan.targets
            .iter()
            .map(move |t| fetch_one(metrics, engine_kind, role.name.as_str(), t))
    });
    let pages = join_all(fetches).await;
    let mut answers = record_pages(
        store,
        engine_kind,
        pass,
        &plans,
        pages,
        started,
        &mut sampling,
    );
    for (role, plan) in &plans {
        let observation = observe(store, pass, role, plan, &mut answers);
        sampling.observations.insert(role.name.clone(), observation);
    }
    sampling
}

/// The pass a sampling is for: the target, its Pods, the sampling interval and the pass's
/// time.
#[derive(Clone, Copy)]
struct Pass<'a> {
    md: &'a ModelDeployment,
    pods: &'a [Arc<Pod>],
    interval_seconds: u32,
    now: Timestamp,
}

/// Drops what the store keeps of Pods and roles that are gone and sets the sampling
/// interval, past two of which a baseline starts a new window (D8).
fn prune_store(store: &mut SampleStore, pass: Pass<'_>) {
    // Baselines of Pods that are gone describe nothing any more.
    let live: Vec<&str> = pass
        .pods
        .iter()
        .filter_map(|p| p.metadata.uid.as_deref())
        .collect();
    store.retain(&live);
    let roles: Vec<&str> = pass.md.spec.roles.iter().map(|r| r.name.as_str()).collect();
    store.retain_roles(&roles);
    // A baseline older than two intervals starts a new window (D8).
    store.set_sampling_interval(pass.interval_seconds);
}

/// What the pages left per role: its Pods' readings, and how many of its opted-in
/// non-leaders answered.
#[derive(Default)]
struct Answers<'a> {
    readings: BTreeMap<&'a str, Vec<PodReading>>,
    optional_answered: BTreeMap<&'a str, u32>,
}

/// One fetched page: its role, its Pod's UID, when it arrived and what it held.
type Page<'a> = (
    &'a str,
    String,
    FetchTimes,
    Result<EngineSample, ScrapeError>,
);

/// Records the pages in the fetches' order, each as read when it arrived (`started` on the
/// source's clock, added to the pass's time): an answer becomes a reading against the Pod's
/// counter baseline (a valid one refreshes its role's newest valid reading); no answer
/// forgets the Pod's baseline (D8). Every page's scrape is noted in `sampling`.
fn record_pages<'a>(
    store: &mut SampleStore,
    engine_kind: EngineKind,
    pass: Pass<'_>,
    plans: &[(&TargetRole, ScrapePlan)],
    pages: Vec<Page<'a>>,
    started: Option<Timestamp>,
    sampling: &mut Sampling,
) -> Answers<'a> {
    let now = pass.now;
    let pod_states: BTreeMap<&str, (Option<u32>, Option<Timestamp>)> = pass
        .pods
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
    let mut answers = Answers::default();
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
                answers.readings.entry(role).or_default().push(reading);
                if optional.contains(uid.as_str()) {
                    *answers.optional_answered.entry(role).or_default() += 1;
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
    answers
}

/// One role's observation from its readings (taken out of `answers`): totals are estimated
/// for, and coverage judged against, its required ready Pods plus the opted-in ones that
/// answered (D9); capacity counts its ready instances; a capped plan or unusable Pods leave
/// coverage incomplete (D6); and with no usable reading now, the newest valid one expires
/// (D10).
fn observe(
    store: &SampleStore,
    pass: Pass<'_>,
    role: &TargetRole,
    plan: &ScrapePlan,
    answers: &mut Answers<'_>,
) -> RoleObservation {
    let Pass {
        md,
        pods,
        interval_seconds,
        now,
    } = pass;
    let role_readings = answers
        .readings
        .remove(role.name.as_str())
        .unwrap_or_default();
    let mut observation = mds_signals::observe_role(&RoleInputs {
        kind: &role.kind(),
        // The endpoints totals are estimated for and coverage is judged against (D9).
        ready_replicas: plan.required_ready
            + answers
                .optional_answered
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
    observation
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
) -> Page<'a> {
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
