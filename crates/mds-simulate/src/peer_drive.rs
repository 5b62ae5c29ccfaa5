//! A peer autoscaler as the target's writer (module `peers`): its samples and decisions at its
//! own cadence, the world's replicas shown to it as the harness contract names their states,
//! the engine series one 15 s scrape late for peers that read through Prometheus, and its
//! counts written to the target's spec as any direct writer's would be (the same actuator the
//! operator writes through).

use std::collections::{BTreeMap, VecDeque};

use jiff::{SignedDuration, Timestamp};
use mds_api::target::RoleKind;
use mds_sim::{DeploymentKey, EngineState, InstanceState, InstanceView, World};

use crate::peers::{Lifecycle, Peer, Replica, RoleView, Sample, View};
use crate::scaling::{Ctx, Passed, Scaling};

/// Prometheus's scrape interval: what a peer reading through it sees is this late.
pub const SCRAPE_SECONDS: f64 = 15.0;

/// A role's bounds and shape, as the peer is given them.
#[derive(Clone, Debug)]
pub(crate) struct RoleShape {
    pub kind: RoleKind,
    pub min: i32,
    pub max: i32,
    pub gpus_per_replica: u32,
}

type Scrape = BTreeMap<(String, u32), Sample>;

pub(crate) struct PeerDriver {
    pub peer: Box<dyn Peer>,
    roles: BTreeMap<String, RoleShape>,
    budget: Option<u32>,
    start: Timestamp,
    next_decision: Timestamp,
    next_sample: Option<Timestamp>,
    next_scrape: Timestamp,
    /// Scrapes newest last, kept until one at least a scrape interval old is the oldest.
    scrapes: VecDeque<(Timestamp, Scrape)>,
}

/// What is due at an instant.
pub(crate) struct Due {
    pub sample: bool,
    pub decide: bool,
}

impl PeerDriver {
    pub fn new(
        peer: Box<dyn Peer>,
        roles: BTreeMap<String, RoleShape>,
        budget: Option<u32>,
        start: Timestamp,
    ) -> PeerDriver {
        let next_sample = peer.sample_every().map(|_| start);
        PeerDriver {
            peer,
            roles,
            budget,
            start,
            next_decision: start,
            next_sample,
            next_scrape: start,
            scrapes: VecDeque::new(),
        }
    }

    /// The next instant anything is due.
    pub fn next_event(&self) -> Timestamp {
        let mut next = self.next_decision;
        if let Some(sample) = self.next_sample {
            next = next.min(sample);
        }
        if self.peer.through_prometheus() {
            next = next.min(self.next_scrape);
        }
        next
    }

    /// Takes the scrape due at `now` and says what else is; moves each due event on.
    pub fn due(&mut self, now: Timestamp, world: &World, key: &DeploymentKey) -> Due {
        if self.peer.through_prometheus() && self.next_scrape <= now {
            self.scrapes
                .push_back((now, current_samples(world, key, self.start)));
            let keep_from = now - seconds(SCRAPE_SECONDS);
            while self.scrapes.len() > 1 && self.scrapes[1].0 <= keep_from {
                self.scrapes.pop_front();
            }
            self.next_scrape = now + seconds(SCRAPE_SECONDS);
        }
        let sample = match (self.next_sample, self.peer.sample_every()) {
            (Some(at), Some(every)) if at <= now => {
                self.next_sample = Some(now + seconds(every.max(0.001)));
                true
            }
            _ => false,
        };
        let decide = self.next_decision <= now;
        if decide {
            self.next_decision = now + seconds(self.peer.interval().max(0.001));
        }
        Due { sample, decide }
    }

    /// The target as the peer sees it at `now`: replicas live from the API, samples live or
    /// (through Prometheus) from the last scrape at least one scrape interval old.
    pub fn view(
        &self,
        now: Timestamp,
        world: &World,
        key: &DeploymentKey,
        desired: &BTreeMap<String, i32>,
    ) -> View {
        let lagged: Option<&Scrape> = if self.peer.through_prometheus() {
            let cutoff = now - seconds(SCRAPE_SECONDS);
            Some(
                self.scrapes
                    .iter()
                    .rev()
                    .find(|(at, _)| *at <= cutoff)
                    .map(|(_, s)| s)
                    .unwrap_or(&EMPTY),
            )
        } else {
            None
        };
        let instances = world.instances(key);
        let roles = self
            .roles
            .iter()
            .map(|(name, shape)| RoleView {
                name: name.clone(),
                kind: shape.kind.clone(),
                desired: desired.get(name).copied().unwrap_or(0),
                min: shape.min,
                max: shape.max,
                gpus_per_replica: shape.gpus_per_replica,
                replicas: instances
                    .iter()
                    .filter(|i| &i.role == name)
                    .map(|i| {
                        let state = lifecycle(i);
                        let sample = match (state, lagged) {
                            (Lifecycle::Ready, Some(scrape)) => {
                                scrape.get(&(name.clone(), i.ordinal)).copied()
                            }
                            (Lifecycle::Ready, None) => sample_of(i, self.start),
                            _ => None,
                        };
                        Replica {
                            ordinal: i.ordinal,
                            state,
                            sample,
                        }
                    })
                    .collect(),
            })
            .collect();
        View {
            t: now.duration_since(self.start).as_secs_f64(),
            roles,
            gpu_budget: self.budget,
        }
    }

    /// `decided` clamped into the bounds and limited to the roles the peer scales (a peer
    /// that breaks bounds is clamped here, not trusted).
    pub fn counts(&self, decided: BTreeMap<String, i32>) -> BTreeMap<String, i32> {
        decided
            .into_iter()
            .filter_map(|(role, n)| {
                let shape = self.roles.get(&role)?;
                Some((role, n.max(shape.min).min(shape.max.max(shape.min))))
            })
            .collect()
    }
}

static EMPTY: Scrape = BTreeMap::new();

fn seconds(s: f64) -> SignedDuration {
    SignedDuration::from_secs_f64(s)
}

/// The harness contract's state of an instance.
fn lifecycle(i: &InstanceView) -> Lifecycle {
    if i.retiring {
        return Lifecycle::Draining;
    }
    match i.state {
        InstanceState::Composing
        | InstanceState::Queued
        | InstanceState::Parked
        | InstanceState::QuotaReserved => Lifecycle::Pending,
        InstanceState::Starting => Lifecycle::Starting,
        InstanceState::Ready => Lifecycle::Ready,
        InstanceState::Terminating => Lifecycle::Draining,
    }
}

/// Every ready instance's sample now.
fn current_samples(world: &World, key: &DeploymentKey, start: Timestamp) -> Scrape {
    world
        .instances(key)
        .iter()
        .filter(|i| lifecycle(i) == Lifecycle::Ready)
        .filter_map(|i| Some(((i.role.clone(), i.ordinal), sample_of(i, start)?)))
        .collect()
}

/// The instance's engine series as its page shows them.
fn sample_of(i: &InstanceView, start: Timestamp) -> Option<Sample> {
    let e: &EngineState = i.engine.as_ref()?;
    Some(Sample {
        running: e.running_gauge(),
        waiting: e.waiting_gauge(),
        kv_usage: e.kv_usage,
        prompt_tokens: e.counters.prompt_tokens,
        prefix_hit_tokens: e.counters.prefix_hit_tokens,
        generation_tokens: e.counters.generation_tokens,
        requests: e.counters.requests,
        ttft_sum: e.ttft.sum,
        ttft_count: e.ttft.count,
        itl_sum: e.itl.sum,
        itl_count: e.itl.count,
        started_at: e.started_at.duration_since(start).as_secs_f64(),
    })
}

impl Scaling for PeerDriver {
    fn next_due(&self) -> Timestamp {
        self.next_event()
    }

    /// What is due for the peer at `now`: its scrape, its sample, its decision and the write
    /// of the counts it decided (a decision is a pass in the record).
    fn pass(&mut self, ctx: &Ctx, now: Timestamp) -> Result<Option<Passed>, crate::SimError> {
        let due = self.due(now, ctx.world, ctx.deployment);
        if !(due.sample || due.decide) {
            return Ok(None);
        }
        let key = ctx.deployment;
        let before = ctx
            .world
            .deployment(key)
            .map(crate::mirror::role_counts)
            .unwrap_or_default();
        let view = self.view(now, ctx.world, key, &before);
        if due.sample {
            self.peer.observe(&view);
        }
        if !due.decide {
            return Ok(None);
        }
        let decided = self.peer.decide(&view);
        let counts = self.counts(decided);
        let moved: BTreeMap<String, i32> = counts
            .iter()
            .filter(|(role, n)| before.get(*role) != Some(n))
            .map(|(role, n)| (role.clone(), *n))
            .collect();
        let write = (!moved.is_empty()).then(|| {
            let stored = ctx.cluster.edit(|e| {
                e.update(
                    mds_worker::memory_cluster::Kind::Target,
                    &key.namespace,
                    &key.name,
                    |doc| set_counts(doc, &moved),
                )
            });
            ("scale".to_string(), stored.is_some())
        });
        let name = self.peer.name();
        Ok(Some(Passed {
            write,
            rollback: false,
            plan: counts
                .into_iter()
                .map(|(role, n)| (role, (n, name.clone())))
                .collect(),
            decided: BTreeMap::new(),
            forecasts: BTreeMap::new(),
        }))
    }

    fn reads_cluster(&self) -> bool {
        false
    }

    fn bound_by_spec(&self) -> bool {
        false
    }

    fn restart(&mut self, _first: Timestamp) -> bool {
        false
    }
}

/// Sets each named role's `replicas` in a target document.
fn set_counts(doc: &mut serde_json::Value, counts: &BTreeMap<String, i32>) {
    if let Some(roles) = doc["spec"]["roles"].as_array_mut() {
        for role in roles {
            let name = role["name"].as_str().unwrap_or_default().to_string();
            if let Some(n) = counts.get(&name) {
                role["replicas"] = serde_json::json!(n);
            }
        }
    }
}

/// GPUs the quota allows the target's instance types (`None` when any of them is unlimited).
pub(crate) fn gpu_budget(
    target: &mds_api::target::ModelDeployment,
    quota: &BTreeMap<String, Option<u32>>,
) -> Option<u32> {
    let types: std::collections::BTreeSet<&str> = target
        .spec
        .roles
        .iter()
        .map(|r| r.instance_type.as_deref().unwrap_or_default())
        .collect();
    types
        .into_iter()
        .map(|t| quota.get(t).copied().flatten())
        .sum()
}

/// Each role's bounds (from the scaler) and GPUs per replica (from the target and the role's
/// settings).
pub(crate) fn role_shapes(
    scaler: &mds_api::ModelDeploymentScaler,
    target: &mds_api::target::ModelDeployment,
    settings: &BTreeMap<String, (mds_sim::RoleSettings, mds_sim::LoadProfile)>,
) -> BTreeMap<String, RoleShape> {
    let bounds: BTreeMap<&str, (i32, i32)> = scaler
        .spec
        .roles
        .iter()
        .map(|b| {
            (
                b.name.as_str(),
                (
                    b.min_replicas
                        .unwrap_or(mds_api::defaults::values::MIN_REPLICAS),
                    b.max_replicas,
                ),
            )
        })
        .collect();
    target
        .spec
        .roles
        .iter()
        .filter_map(|r| {
            let (min, max) = *bounds.get(r.name.as_str())?;
            let per_pod = settings.get(&r.name).map_or(1, |(s, _)| s.gpus_per_pod);
            Some((
                r.name.clone(),
                RoleShape {
                    kind: r.kind(),
                    min,
                    max,
                    gpus_per_replica: r.size().clamp(1, 64) as u32 * per_pod,
                },
            ))
        })
        .collect()
}
