//! The reasons a role's status shows (spec, *Role observations*, *Conditions*).

use std::fmt;

/// Algorithm reasons and the constraint reasons that can replace them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    // Algorithm results.
    Proportional,
    TokenThroughput,
    Predictive,
    WithinTolerance,
    Panic,
    NoReadyReplicas,
    LatencyGuardHold,
    LatencyGuardScaleUp,
    PredictorWarmingUp,
    PredictiveConsolidationHold,
    RatioCoupled,
    /// Required readings are missing: the algorithm holds.
    WaitingForMetrics,
    // Constraints.
    BoundsConflict,
    RatioConflict,
    PacingBounded,
    /// The core restored a pending cohort's baseline (set by the reconcile core).
    ResourceExhausted,
    /// The core restored the pre-scale-down vector after an aborted retirement.
    ScaleDownAborted,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Proportional => "Proportional",
            Reason::TokenThroughput => "TokenThroughput",
            Reason::Predictive => "Predictive",
            Reason::WithinTolerance => "WithinTolerance",
            Reason::Panic => "Panic",
            Reason::NoReadyReplicas => "NoReadyReplicas",
            Reason::LatencyGuardHold => "LatencyGuardHold",
            Reason::LatencyGuardScaleUp => "LatencyGuardScaleUp",
            Reason::PredictorWarmingUp => "PredictorWarmingUp",
            Reason::PredictiveConsolidationHold => "PredictiveConsolidationHold",
            Reason::RatioCoupled => "RatioCoupled",
            Reason::WaitingForMetrics => "WaitingForMetrics",
            Reason::BoundsConflict => "BoundsConflict",
            Reason::RatioConflict => "RatioConflict",
            Reason::PacingBounded => "PacingBounded",
            Reason::ResourceExhausted => "ResourceExhausted",
            Reason::ScaleDownAborted => "ScaleDownAborted",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
