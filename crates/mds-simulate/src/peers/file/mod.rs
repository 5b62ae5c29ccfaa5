//! `--peer FILE`: a team's own autoscaler object, read as it is written, run as a peer. An
//! `autoscaling/v2` HorizontalPodAutoscaler, a KEDA `ScaledObject` (its Prometheus triggers),
//! a Knative Service, Configuration or Revision (its autoscaling annotations) or an AIBrix
//! `PodAutoscaler` becomes the matching re-implemented peer with the object's metric, target,
//! bounds, behaviour and windows. What upstream would read and we do not model is refused with
//! the field and the reason; what we read differently is said in a note.

mod aibrix;
mod fields;
mod hpa;
mod knative;
mod names;

use std::collections::BTreeMap;

use serde_json::Value;

use super::aibrix::{Aibrix, AibrixAlgorithm, AibrixConfig, AibrixMetric, AibrixSwitches};
use super::hpa::{Hpa, HpaBehavior, HpaMetric, MetricSource};
use super::knative::{KnativeConfig, KnativeKpa};
use super::metric::{PodMetric, PodReader};
use super::{Peer, RoleTargets, View};

pub use fields::PeerFileError;

/// A team's autoscaler, read from its file.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerFile {
    /// The row's name: the file's name without its extension.
    pub name: String,
    /// What the file holds (`HorizontalPodAutoscaler "chat"`).
    pub object: String,
    /// The policy as it runs, in words: metric, target, bounds, windows.
    pub summary: String,
    /// Where the run differs from what upstream would do with the object, and why.
    pub notes: Vec<String>,
    /// The object's replica bounds (they replace the scaler's; `max` `None`: the scaler's).
    pub min: i32,
    pub max: Option<i32>,
    spec: Spec,
}

/// What a reader makes of a file's object, before it is named.
struct Policy {
    summary: String,
    notes: Vec<String>,
    min: i32,
    max: Option<i32>,
    spec: Spec,
}

/// The policy a file configures.
#[derive(Clone, Debug, PartialEq)]
enum Spec {
    Hpa {
        metrics: Vec<FileMetric>,
        behavior: HpaBehavior,
    },
    Knative {
        rps: bool,
        target: f64,
        config: KnativeConfig,
    },
    Aibrix {
        algorithm: AibrixAlgorithm,
        metric: PodMetric,
        target: f64,
        config: AibrixConfig,
    },
}

/// One metric of an HPA (or a KEDA trigger): its series, where it comes from, its target.
#[derive(Clone, Debug, PartialEq)]
struct FileMetric {
    source: MetricSource,
    metric: PodMetric,
    target: f64,
    /// The window a counter's rate is taken over, seconds.
    rate_window: f64,
}

impl PeerFile {
    /// Reads the object in `doc` (the file's YAML as JSON) and names it after `file_stem`.
    pub fn read(file_stem: &str, doc: &Value) -> Result<PeerFile, PeerFileError> {
        let root = fields::Field::root(doc);
        let kind = root.get("kind").text()?;
        let api = root.get("apiVersion").text().unwrap_or_default();
        let name = root.get("metadata").get("name").text().unwrap_or_default();
        let policy = match kind.as_str() {
            "HorizontalPodAutoscaler" => hpa::read_hpa(&root, &api)?,
            "ScaledObject" => hpa::read_keda(&root)?,
            "Service" | "Configuration" | "Revision" if api.starts_with("serving.knative.dev") => {
                knative::read(&root, &kind)?
            }
            "PodAutoscaler" if api.starts_with("autoscaling.aibrix.ai") => aibrix::read(&root)?,
            other => {
                return Err(root.get("kind").error(format!(
                    "{other:?} ({api}) is not an autoscaler --peer reads; give an autoscaling/v2 HorizontalPodAutoscaler, a KEDA ScaledObject, a Knative Service, Configuration or Revision (serving.knative.dev), or an AIBrix PodAutoscaler (autoscaling.aibrix.ai)"
                )));
            }
        };
        Ok(PeerFile {
            name: file_stem.to_string(),
            object: format!("{kind} {name:?}"),
            summary: policy.summary,
            notes: policy.notes,
            min: policy.min,
            max: policy.max,
            spec: policy.spec,
        })
    }

    /// The peer at `factor` times the object's targets (1: as written), held to the
    /// object's bounds.
    pub fn build(&self, factor: f64) -> Box<dyn Peer> {
        let inner: Box<dyn Peer> = match &self.spec {
            Spec::Hpa { metrics, behavior } => Box::new(Hpa::with_metrics(
                metrics
                    .iter()
                    .map(|m| {
                        HpaMetric::new(
                            m.source,
                            PodReader::new(m.metric, m.rate_window),
                            RoleTargets::Every(scaled(m.metric, m.target, factor)),
                        )
                    })
                    .collect(),
                behavior.clone(),
            )),
            Spec::Knative {
                rps,
                target,
                config,
            } => Box::new(KnativeKpa::on(
                RoleTargets::Every(target * factor),
                *rps,
                config.clone(),
            )),
            Spec::Aibrix {
                algorithm,
                metric,
                target,
                config,
            } => Box::new(Aibrix::with_config(
                *algorithm,
                AibrixMetric::Gauge(*metric, scaled(*metric, *target, factor)),
                AibrixSwitches::default(),
                config.clone(),
            )),
        };
        Box::new(Bounded {
            inner,
            min: self.min,
            max: self.max,
        })
    }

    /// The object's targets at `factor`, in words (`target 8 running + waiting requests`).
    pub fn knob_text(&self, factor: f64) -> String {
        let one = |metric: PodMetric, target: f64| {
            format!(
                "{} {}",
                names::number(scaled(metric, target, factor)),
                metric.describe()
            )
        };
        match &self.spec {
            Spec::Hpa { metrics, .. } => {
                let each: Vec<String> = metrics.iter().map(|m| one(m.metric, m.target)).collect();
                format!("target {}", each.join(", "))
            }
            Spec::Knative { rps, target, .. } => {
                let metric = if *rps {
                    PodMetric::RequestRate
                } else {
                    PodMetric::QueueDepth
                };
                format!("target {}", one(metric, *target))
            }
            Spec::Aibrix { metric, target, .. } => format!("target {}", one(*metric, *target)),
        }
    }
}

/// A target at `factor`; a KV-usage target stays a share (at most 1).
fn scaled(metric: PodMetric, target: f64, factor: f64) -> f64 {
    let v = target * factor;
    if metric == PodMetric::KvUsage {
        v.min(1.0)
    } else {
        v
    }
}

/// A peer held to its object's replica bounds instead of the scaler's.
struct Bounded {
    inner: Box<dyn Peer>,
    min: i32,
    max: Option<i32>,
}

impl Bounded {
    fn bound(&self, view: &View) -> View {
        let mut view = view.clone();
        for role in &mut view.roles {
            role.min = self.min;
            role.max = self.max.unwrap_or(role.max).max(self.min);
        }
        view
    }
}

impl Peer for Bounded {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn interval(&self) -> f64 {
        self.inner.interval()
    }
    fn sample_every(&self) -> Option<f64> {
        self.inner.sample_every()
    }
    fn through_prometheus(&self) -> bool {
        self.inner.through_prometheus()
    }
    fn observe(&mut self, view: &View) {
        let view = self.bound(view);
        self.inner.observe(&view);
    }
    fn decide(&mut self, view: &View) -> BTreeMap<String, i32> {
        let view = self.bound(view);
        self.inner.decide(&view)
    }
}

/// The scale-to-zero floor every reader shares: the simulated target keeps one replica.
fn floor_of(min: i64, field: &fields::Field, notes: &mut Vec<String>) -> i32 {
    if min <= 0 {
        notes.push(format!(
            "{} is {min}: scale to zero is not simulated, so the floor is 1 replica",
            field.path()
        ));
        1
    } else {
        min.min(i64::from(i32::MAX)) as i32
    }
}

#[cfg(test)]
mod tests;
