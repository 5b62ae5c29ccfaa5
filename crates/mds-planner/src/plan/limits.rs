//! What holds a role this pass, in words a status condition and `mds explain` can show: the
//! guards that hold a direction, and the limits that cap or floor a move.

use std::fmt;

/// Why scale-down or scale-up of a role was held this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    NoReadyReplicas,
    IncompleteCoverage,
    AlgorithmHold,
    RetirementActive,
    CommitNotObserved,
    NoRouter,
    AbortCooldown,
    DecodePostScaleUpGrace,
    UnadmittedOrdinals,
    ExhaustionBackoff,
    ScaleDownRefused,
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Guard::NoReadyReplicas => "no ready replica",
            Guard::IncompleteCoverage => "the observation does not cover every ready replica",
            Guard::AlgorithmHold => "the algorithm holds scale-down",
            Guard::RetirementActive => "a retirement is active on the target",
            Guard::CommitNotObserved => "the target's status does not show our last commit yet",
            Guard::NoRouter => {
                "the target has no router, and GPUStack cannot complete a retirement without one"
            }
            Guard::AbortCooldown => "an aborted retirement's cooldown is running",
            Guard::DecodePostScaleUpGrace => "the decode post-scale-up grace is running",
            Guard::UnadmittedOrdinals => "an added replica is not admitted yet",
            Guard::ScaleDownRefused => {
                "the target aborted this role's last retirements; Blocked says until when"
            }
            Guard::ExhaustionBackoff => {
                "a scale-up of this pool was rolled back; growth waits pendingTimeoutSeconds"
            }
        })
    }
}

/// A limit that shaped a role's result, with its numbers.
#[derive(Clone, Debug, PartialEq)]
pub enum Limit {
    Bound {
        min: i32,
        max: i32,
    },
    Step {
        max_change: i32,
    },
    /// Growth waits for or is capped by the scale-up window's lowest recommendation.
    ScaleUpWindow {
        window_seconds: i64,
        lowest: Option<i32>,
    },
    /// Shrinkage waits for or is floored by the scale-down window's highest recommendation.
    ScaleDownWindow {
        window_seconds: i64,
        highest: Option<i32>,
    },
    Guard(Guard),
    /// The ratio bands of these `spec.ratios` indices moved the result.
    Ratio {
        ratios: Vec<usize>,
    },
    /// No vector satisfies the bands within the allowed moves: the component holds.
    NoFeasibleVector {
        ratios: Vec<usize>,
    },
    /// A linked role recommends growth, so no role of its ratio component shrinks (D17).
    ComponentGrows {
        ratios: Vec<usize>,
    },
    /// Another role grows in this commit; shrinking waits (D16).
    GrowthFirst,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Bound { min, max } => write!(f, "bounds [{min}, {max}]"),
            Limit::Step { max_change } => {
                write!(f, "step limit of {max_change} replica(s) per pass")
            }
            Limit::ScaleUpWindow {
                window_seconds,
                lowest: Some(l),
            } => write!(
                f,
                "scale-up window of {window_seconds} s: lowest recommendation {l}"
            ),
            Limit::ScaleUpWindow {
                window_seconds,
                lowest: None,
            } => write!(
                f,
                "scale-up window of {window_seconds} s: history does not span it yet"
            ),
            Limit::ScaleDownWindow {
                window_seconds,
                highest: Some(h),
            } => write!(
                f,
                "scale-down window of {window_seconds} s: highest recommendation {h}"
            ),
            Limit::ScaleDownWindow {
                window_seconds,
                highest: None,
            } => write!(
                f,
                "scale-down window of {window_seconds} s: history does not span it yet"
            ),
            Limit::Guard(g) => write!(f, "{g}"),
            Limit::Ratio { ratios } => write!(f, "ratio bands {ratios:?}"),
            Limit::NoFeasibleVector { ratios } => write!(
                f,
                "no vector satisfies ratio bands {ratios:?} within the allowed moves"
            ),
            Limit::ComponentGrows { ratios } => write!(
                f,
                "a role linked by ratio bands {ratios:?} recommends growth, so none of them shrinks"
            ),
            Limit::GrowthFirst => {
                f.write_str("growth commits first; shrinking waits for a later pass")
            }
        }
    }
}
