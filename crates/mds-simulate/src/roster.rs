//! Every peer by name, built from one set of per-replica targets (module `targets`).

use std::collections::BTreeMap;

use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_sim::load::Trace;

use crate::SimError;
use crate::oracle;
use crate::peers::aibrix::{Aibrix, AibrixAlgorithm, AibrixConfig, AibrixMetric, AibrixSwitches};
use crate::peers::dynamo::DynamoPlanner;
use crate::peers::dynamo::predictor::Predictor;
use crate::peers::hpa::Hpa;
use crate::peers::knative::KnativeKpa;
use crate::peers::static_peak::StaticPeak;
use crate::peers::wva::{SaturationConfig, Wva};
use crate::peers::{Peer, Targets};
use crate::run::{self, BIN, RunOptions};

/// A peer of the comparison, as its row names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerName {
    Hpa,
    KnativeKpa,
    AibrixKpa,
    AibrixKpaAsWritten,
    AibrixKpaHpaCooldown,
    AibrixApa,
    AibrixApaHpaCooldown,
    AibrixKpaQueue,
    Dynamo,
    DynamoConsolidation,
    Wva,
    WvaHpa,
    StaticPeak,
}

impl PeerName {
    pub const ALL: [PeerName; 13] = [
        PeerName::Hpa,
        PeerName::KnativeKpa,
        PeerName::AibrixKpa,
        PeerName::AibrixKpaAsWritten,
        PeerName::AibrixKpaHpaCooldown,
        PeerName::AibrixApa,
        PeerName::AibrixApaHpaCooldown,
        PeerName::AibrixKpaQueue,
        PeerName::Dynamo,
        PeerName::DynamoConsolidation,
        PeerName::Wva,
        PeerName::WvaHpa,
        PeerName::StaticPeak,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PeerName::Hpa => "hpa",
            PeerName::KnativeKpa => "knative-kpa",
            PeerName::AibrixKpa => "aibrix-kpa",
            PeerName::AibrixKpaAsWritten => "aibrix-kpa-as-written",
            PeerName::AibrixKpaHpaCooldown => "aibrix-kpa-hpa-cooldown",
            PeerName::AibrixApa => "aibrix-apa",
            PeerName::AibrixApaHpaCooldown => "aibrix-apa-hpa-cooldown",
            PeerName::AibrixKpaQueue => "aibrix-kpa-queue",
            PeerName::Dynamo => "dynamo",
            PeerName::DynamoConsolidation => "dynamo-consolidation",
            PeerName::Wva => "wva",
            PeerName::WvaHpa => "wva-hpa",
            PeerName::StaticPeak => "static-peak",
        }
    }

    /// What it is, for `--compare list`.
    pub fn summary(self) -> &'static str {
        match self {
            PeerName::Hpa => {
                "Kubernetes HPA autoscaling/v2, Pods metric running+waiting, default behaviour"
            }
            PeerName::KnativeKpa => {
                "Knative Serving KPA (v1.23), concurrency at 70 % of the request target"
            }
            PeerName::AibrixKpa => {
                "AIBrix KPA on KV-cache usage at 0.5, the per-Pod mean taken as a total (times ready replicas)"
            }
            PeerName::AibrixKpaAsWritten => {
                "AIBrix KPA with the per-Pod mean over the per-Pod target, as the code is written"
            }
            PeerName::AibrixKpaHpaCooldown => {
                "AIBrix KPA with an HPA-like scale-down cooldown (max in the window)"
            }
            PeerName::AibrixApa => "AIBrix APA on KV-cache usage, target 0.5",
            PeerName::AibrixApaHpaCooldown => "AIBrix APA with an HPA-like scale-down cooldown",
            PeerName::AibrixKpaQueue => "AIBrix KPA on running+waiting at the request target",
            PeerName::Dynamo => {
                "Dynamo-like planner: throughput mode (Kalman predictor) and load mode, budget clamp"
            }
            PeerName::DynamoConsolidation => {
                "Dynamo-like planner whose scale-down re-predicts latency on the survivors"
            }
            PeerName::Wva => "llm-d WVA saturation scaler, written directly",
            PeerName::WvaHpa => "llm-d WVA saturation scaler behind default HPA behaviour",
            PeerName::StaticPeak => {
                "static peak provisioning: the busiest minute's replicas, all run long"
            }
        }
    }

    pub fn parse(text: &str) -> Option<PeerName> {
        PeerName::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// The peer's one sizing knob (BASELINES: the one its users tune).
    pub fn knob(self) -> Knob {
        match self {
            PeerName::Hpa | PeerName::KnativeKpa | PeerName::AibrixKpaQueue => Knob::RequestTarget,
            PeerName::AibrixKpa
            | PeerName::AibrixKpaAsWritten
            | PeerName::AibrixKpaHpaCooldown
            | PeerName::AibrixApa
            | PeerName::AibrixApaHpaCooldown => Knob::KvTarget,
            PeerName::Wva | PeerName::WvaHpa => Knob::KvThreshold,
            PeerName::Dynamo | PeerName::DynamoConsolidation => Knob::SlaTargets,
            PeerName::StaticPeak => Knob::Capacity,
        }
    }

    /// The peer configured from `targets` (static peak holds `statics`), its KV target or
    /// threshold, or its SLA targets, at `factor` times its default; request targets and
    /// capacities come scaled in `targets`.
    pub fn build(
        self,
        targets: &Targets,
        options: &RunOptions,
        statics: &BTreeMap<String, i32>,
        factor: f64,
    ) -> Box<dyn Peer> {
        let kv = || AibrixMetric::KvUsage;
        let switches = |kpa_total: bool, hpa_like_cooldown: bool| AibrixSwitches {
            kpa_total,
            hpa_like_cooldown,
        };
        let aibrix = AibrixConfig {
            kv_usage_target: kv_target(factor),
            ..AibrixConfig::default()
        };
        let kv_aibrix = |algorithm: AibrixAlgorithm, kpa_total: bool, hpa_like: bool| {
            Box::new(Aibrix::with_config(
                algorithm,
                kv(),
                switches(kpa_total, hpa_like),
                aibrix.clone(),
            ))
        };
        let saturation = SaturationConfig {
            kv_cache_threshold: kv_threshold(factor),
            ..SaturationConfig::default()
        };
        let sla = Targets {
            ttft_seconds: targets.ttft_seconds * factor,
            itl_seconds: targets.itl_seconds * factor,
            ..targets.clone()
        };
        match self {
            PeerName::Hpa => Box::new(Hpa::from_targets(targets)),
            PeerName::Wva => Box::new(Wva::direct().with_config(saturation)),
            PeerName::WvaHpa => Box::new(Wva::behind_hpa().with_config(saturation)),
            PeerName::StaticPeak => Box::new(StaticPeak::new(statics.clone())),
            PeerName::KnativeKpa => Box::new(KnativeKpa::new(targets)),
            PeerName::AibrixKpa => kv_aibrix(AibrixAlgorithm::Kpa, true, false),
            PeerName::AibrixKpaAsWritten => kv_aibrix(AibrixAlgorithm::Kpa, false, false),
            PeerName::AibrixKpaHpaCooldown => kv_aibrix(AibrixAlgorithm::Kpa, true, true),
            PeerName::AibrixApa => kv_aibrix(AibrixAlgorithm::Apa, true, false),
            PeerName::AibrixApaHpaCooldown => kv_aibrix(AibrixAlgorithm::Apa, true, true),
            PeerName::AibrixKpaQueue => Box::new(Aibrix::kpa(
                AibrixMetric::queue_depth(targets),
                switches(true, false),
            )),
            PeerName::Dynamo | PeerName::DynamoConsolidation => {
                Box::new(DynamoPlanner::from_profile(
                    &options.profile,
                    &sla,
                    // Upstream's default predictor is ARIMA, which is not re-implemented
                    // (peers::dynamo::predictor); Kalman is its documented alternative.
                    Predictor::Kalman,
                    self == PeerName::DynamoConsolidation,
                ))
            }
        }
    }
}

/// A policy's one sizing knob, as users tune it; a larger factor on it uses fewer GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Knob {
    /// Tokens per second one replica serves (our token algorithms; static peak sizes from it).
    Capacity,
    /// Requests running plus waiting per replica (Proportional on QueueDepth, HPA, Knative,
    /// AIBrix on queue depth).
    RequestTarget,
    /// AIBrix's per-replica KV-cache usage target (default 0.5).
    KvTarget,
    /// WVA's KV-cache saturation threshold (default 0.8).
    KvThreshold,
    /// The Dynamo-like planner's SLA targets (default: the SLO).
    SlaTargets,
    /// Every target a team's own autoscaler file names (`--peer`; factor 1: as written).
    FileTargets,
}

impl Knob {
    pub fn as_str(self) -> &'static str {
        match self {
            Knob::Capacity => "capacity",
            Knob::RequestTarget => "request target",
            Knob::KvTarget => "KV target",
            Knob::KvThreshold => "KV threshold",
            Knob::SlaTargets => "SLA targets",
            Knob::FileTargets => "its targets",
        }
    }
}

/// AIBrix's KV-usage target at `factor` times its default, within (0, 1].
pub fn kv_target(factor: f64) -> f64 {
    (0.5 * factor).clamp(0.01, 1.0)
}

/// WVA's KV saturation threshold at `factor` times its default, within (0, 1].
pub fn kv_threshold(factor: f64) -> f64 {
    (0.8 * factor).clamp(0.01, 1.0)
}

/// Static peak's counts: per role, the busiest minute's demand over the capacity, raised to
/// meet the ratio bands.
pub fn static_counts(
    scaler: &ModelDeploymentScaler,
    target: &ModelDeployment,
    trace: &Trace,
    options: &RunOptions,
    targets: &Targets,
) -> Result<BTreeMap<String, i32>, SimError> {
    let policy = run::policy_of(scaler, target)?;
    let duration = run::run_seconds(trace, options);
    let demands = run::role_demands(
        &policy,
        target,
        trace,
        &targets.tokens_per_second,
        options,
        duration,
        BIN,
    );
    let roles: Vec<oracle::RoleDemand> = demands.iter().map(|(_, d)| d.clone()).collect();
    let joint = oracle::joint(&roles, &run::bands(&policy), None, BIN, 0.0);
    Ok(demands
        .into_iter()
        .zip(joint.static_peak)
        .map(|((role, demand), bound)| {
            (role, bound.replicas.first().copied().unwrap_or(demand.min))
        })
        .collect())
}
