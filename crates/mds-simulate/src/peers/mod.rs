//! The peer autoscalers, re-implemented from their upstream sources so that `mds simulate
//! --compare` runs them on the same world, trace, seed and actuator as mds: Kubernetes HPA,
//! Knative KPA, AIBrix KPA and APA, a Dynamo-like planner, the llm-d WVA saturation scaler and
//! static peak provisioning. Each is pure: it sees a [`View`] of the target (its counts, each
//! replica's lifecycle and engine sample) at its own cadence and answers the counts it would
//! write. The harness (`crate::compare`) applies them as a direct writer of the target.
//!
//! Where upstream reads through Prometheus the harness hands the peer samples one 15 s scrape
//! late; where upstream scrapes the Pods itself (Knative, AIBrix) the samples are current.

pub mod aibrix;
pub mod dynamo;
pub mod file;
pub mod hpa;
pub mod knative;
pub mod metric;
pub mod static_peak;
pub mod wva;

use std::collections::BTreeMap;

use mds_api::target::RoleKind;

/// Where a replica (one target ordinal, whatever its Pod count) is in its life, as the
/// harness contract names the states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Waiting for admission or GPUs; no Pod runs.
    Pending,
    /// Pods run, the engine loads; no metrics yet.
    Starting,
    Ready,
    /// Being deleted.
    Draining,
}

/// One replica's engine series as its page shows them (the leader's engine).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Sample {
    /// Requests in the running batch and waiting (gauges).
    pub running: f64,
    pub waiting: f64,
    /// KV-cache usage, 0..1.
    pub kv_usage: f64,
    /// Counters since the engine started.
    pub prompt_tokens: f64,
    pub prefix_hit_tokens: f64,
    pub generation_tokens: f64,
    pub requests: f64,
    /// Histogram sums and counts, seconds.
    pub ttft_sum: f64,
    pub ttft_count: f64,
    pub itl_sum: f64,
    pub itl_count: f64,
    /// When the engine process started (seconds since the run's start): a counter series
    /// restarts when this changes.
    pub started_at: f64,
}

impl Sample {
    /// Running plus waiting requests: the queue depth of one replica.
    pub fn queue_depth(&self) -> f64 {
        self.running + self.waiting
    }
}

/// One replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Replica {
    pub ordinal: u32,
    pub state: Lifecycle,
    /// Its engine sample (`None`: no metrics, e.g. while starting, or not yet scraped).
    pub sample: Option<Sample>,
}

/// One role of the target.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleView {
    pub name: String,
    pub kind: RoleKind,
    /// The count the target's spec holds now.
    pub desired: i32,
    /// The scaler's bounds for the role.
    pub min: i32,
    pub max: i32,
    pub gpus_per_replica: u32,
    pub replicas: Vec<Replica>,
}

impl RoleView {
    /// Samples of the ready replicas that have one.
    pub fn ready_samples(&self) -> impl Iterator<Item = &Sample> {
        self.replicas
            .iter()
            .filter(|r| r.state == Lifecycle::Ready)
            .filter_map(|r| r.sample.as_ref())
    }

    pub fn count(&self, state: Lifecycle) -> i32 {
        self.replicas.iter().filter(|r| r.state == state).count() as i32
    }

    /// Clamps `n` into the role's bounds.
    pub fn clamp(&self, n: i32) -> i32 {
        n.max(self.min).min(self.max.max(self.min))
    }
}

/// What a peer sees at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// Seconds since the start of the run.
    pub t: f64,
    pub roles: Vec<RoleView>,
    /// GPUs the scenario's quota allows (`None`: unlimited).
    pub gpu_budget: Option<u32>,
}

impl View {
    pub fn role(&self, name: &str) -> Option<&RoleView> {
        self.roles.iter().find(|r| r.name == name)
    }
}

/// A peer autoscaler.
pub trait Peer {
    /// Its name in the comparison table (`hpa`, `knative-kpa`, ...).
    fn name(&self) -> String;
    /// Seconds between its decisions.
    fn interval(&self) -> f64;
    /// Seconds between the samples it collects between decisions (`None`: it decides from
    /// the view of the decision alone).
    fn sample_every(&self) -> Option<f64> {
        None
    }
    /// Upstream reads the engine series through Prometheus (samples one scrape late).
    fn through_prometheus(&self) -> bool;
    /// Takes one sample (every `sample_every` seconds).
    fn observe(&mut self, _view: &View) {}
    /// The counts it writes, per role; roles it leaves out keep their count.
    fn decide(&mut self, view: &View) -> BTreeMap<String, i32>;
}

/// A per-replica target by role: one per role, or the same for every role (a team's own
/// autoscaler names one target).
#[derive(Clone, Debug, PartialEq)]
pub enum RoleTargets {
    PerRole(BTreeMap<String, f64>),
    Every(f64),
}

impl RoleTargets {
    pub fn get(&self, role: &str) -> Option<f64> {
        match self {
            RoleTargets::PerRole(map) => map.get(role).copied(),
            RoleTargets::Every(v) => Some(*v),
        }
    }
}

/// The per-replica targets every peer is configured from (the harness contract: the same
/// per-replica target as the Proportional run unless the peer's upstream says otherwise).
#[derive(Clone, Debug, PartialEq)]
pub struct Targets {
    /// Requests running plus waiting per replica, per role (Proportional's QueueDepth target).
    pub queue_depth: BTreeMap<String, f64>,
    /// Tokens per second one replica serves, per role (the token algorithms' capacity).
    pub tokens_per_second: BTreeMap<String, f64>,
    /// Latency objectives, seconds.
    pub ttft_seconds: f64,
    pub itl_seconds: f64,
}

impl Targets {
    /// Every per-replica target `factor` times as large (the latency objectives are not
    /// targets: they stay).
    pub fn scaled(&self, factor: f64) -> Targets {
        let scale =
            |m: &BTreeMap<String, f64>| m.iter().map(|(k, v)| (k.clone(), v * factor)).collect();
        Targets {
            queue_depth: scale(&self.queue_depth),
            tokens_per_second: scale(&self.tokens_per_second),
            ..self.clone()
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Views for the peers' table tests.
    use super::*;

    /// A ready replica with `queue` requests (all running) and `kv` usage.
    pub fn ready(ordinal: u32, queue: f64, kv: f64) -> Replica {
        Replica {
            ordinal,
            state: Lifecycle::Ready,
            sample: Some(Sample {
                running: queue,
                kv_usage: kv,
                ..Sample::default()
            }),
        }
    }

    pub fn replica(ordinal: u32, state: Lifecycle) -> Replica {
        Replica {
            ordinal,
            state,
            sample: None,
        }
    }

    /// One Server role `server` with `desired` replicas in bounds `[min, max]`.
    pub fn view(t: f64, desired: i32, min: i32, max: i32, replicas: Vec<Replica>) -> View {
        View {
            t,
            roles: vec![RoleView {
                name: "server".into(),
                kind: RoleKind::Server,
                desired,
                min,
                max,
                gpus_per_replica: 1,
                replicas,
            }],
            gpu_budget: None,
        }
    }
}
