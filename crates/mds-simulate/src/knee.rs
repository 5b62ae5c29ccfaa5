//! The load at which latency leaves its SLO, from recorded metrics: readings of one role's
//! load per ready replica and its latency relative to the SLO (p95 ÷ objective; above 1 is
//! out of SLO). The knee is the split of the readings, sorted by load, that misclassifies the
//! fewest of them as "within below, out above" (ties: the lower split, the cautious one). The
//! suggested per-replica target is the highest load within the SLO below the knee, so it is a
//! load the role was seen to serve within the SLO.

use std::collections::BTreeMap;

use mds_api::target::{ModelDeployment, RoleKind};
use serde::Serialize;
use serde_json::json;

use crate::replay::TimelineEntry;
use crate::report::Slo;

/// What the readings say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Knee {
    /// The load at which latency leaves the SLO (`None`: it never did in the readings).
    pub knee: Option<f64>,
    /// The highest load within the SLO below the knee (every reading's highest without one).
    pub suggested: Option<f64>,
    pub readings: usize,
    /// Readings out of SLO below the knee and within it above (the split's misfits).
    pub misfits: usize,
    /// The highest load seen.
    pub highest: Option<f64>,
}

/// The knee of `(load, latency ÷ SLO)` readings (module documentation); readings that are
/// not finite or not positive loads are left out.
pub fn knee(readings: &[(f64, f64)]) -> Knee {
    let mut points: Vec<(f64, bool)> = readings
        .iter()
        .filter(|(l, r)| l.is_finite() && *l > 0.0 && r.is_finite())
        .map(|(l, r)| (*l, *r > 1.0))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = points.len();
    let highest = points.last().map(|p| p.0);
    if !points.iter().any(|p| p.1) {
        return Knee {
            knee: None,
            suggested: highest,
            readings: n,
            misfits: 0,
            highest,
        };
    }
    // Split at index k: points[..k] "within", points[k..] "out".
    let out_total = points.iter().filter(|p| p.1).count();
    let mut best = (usize::MAX, 0);
    let mut out_below = 0;
    for k in 0..=n {
        if k > 0 && points[k - 1].1 {
            out_below += 1;
        }
        // Splits only between distinct loads.
        if k > 0 && k < n && points[k - 1].0 == points[k].0 {
            continue;
        }
        let within_above = (n - k) - (out_total - out_below);
        let misfits = out_below + within_above;
        if misfits < best.0 {
            best = (misfits, k);
        }
    }
    let (misfits, k) = best;
    let knee = match k {
        0 => points.first().map(|p| p.0),
        k if k >= n => None,
        k => Some((points[k - 1].0 + points[k].0) / 2.0),
    };
    let suggested = points[..k].iter().rev().find(|p| !p.1).map(|p| p.0);
    Knee {
        knee,
        suggested,
        readings: n,
        misfits,
        highest,
    }
}

/// One role's knee from a recorded timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleKnee {
    pub role: String,
    #[serde(skip)]
    pub kind: RoleKind,
    pub knee: Knee,
}

/// Each role's knee from a timeline in the `mds replay` format: per entry and role with a
/// ready replica, the load per ready replica (the tokens its kind counts, or running plus
/// waiting requests when `requests` is set, for a Proportional scaler) against p95 latency
/// over its objective (TTFT for prefill, ITL for decode, the larger for a server).
pub fn from_timeline(
    entries: &[TimelineEntry],
    target: &ModelDeployment,
    requests: bool,
    slo: Slo,
) -> Result<Vec<RoleKnee>, String> {
    let mut readings: BTreeMap<String, (RoleKind, Vec<(f64, f64)>)> = BTreeMap::new();
    for entry in entries {
        for (name, obs) in &entry.roles {
            let Some(role) = target.spec.roles.iter().find(|r| &r.name == name) else {
                return Err(format!(
                    "line {}: role {name:?} is not a role of the target",
                    entry.line
                ));
            };
            let Some(ready) = obs.ready_replicas.filter(|r| *r >= 1) else {
                continue;
            };
            let kind = role.kind();
            let load = if requests {
                obs.running_requests
                    .map(|r| r + obs.waiting_requests.unwrap_or(0.0))
            } else {
                // The rates the kind counts must be there; the others count nothing.
                let (prompt, output) = (
                    obs.prompt_tokens_per_second,
                    obs.generation_tokens_per_second,
                );
                let rates = match kind {
                    RoleKind::Prefill | RoleKind::Encode => prompt.map(|p| (p, 0.0)),
                    RoleKind::Decode => output.map(|o| (0.0, o)),
                    _ => prompt.zip(output),
                };
                rates.map(|(p, o)| crate::oracle::demand_of(&kind, p, o))
            };
            let ttft = obs.ttft_milliseconds.map(|v| v / 1000.0 / slo.ttft_seconds);
            let itl = obs.itl_milliseconds.map(|v| v / 1000.0 / slo.itl_seconds);
            let ratio = match kind {
                RoleKind::Prefill | RoleKind::Encode => ttft,
                RoleKind::Decode => itl,
                _ => ttft.into_iter().chain(itl).reduce(f64::max),
            };
            if let (Some(load), Some(ratio)) = (load, ratio) {
                readings
                    .entry(name.clone())
                    .or_insert_with(|| (kind, Vec::new()))
                    .1
                    .push((load / f64::from(ready), ratio));
            }
        }
    }
    if readings.is_empty() {
        return Err("no reading has a ready replica, a load and a latency to compare".into());
    }
    Ok(readings
        .into_iter()
        .map(|(role, (kind, points))| RoleKnee {
            role,
            kind,
            knee: knee(&points),
        })
        .collect())
}

/// The `spec.algorithm` that sets each role's suggested target, as YAML to paste (`None`
/// when no role has a load seen within the SLO).
pub fn fragment(knees: &[RoleKnee], requests: bool) -> Option<String> {
    let suggested: Vec<(&RoleKnee, f64)> = knees
        .iter()
        .filter_map(|k| Some((k, k.knee.suggested?)))
        .collect();
    if suggested.is_empty() {
        return None;
    }
    let algorithm = if requests {
        let targets: Vec<_> = suggested
            .iter()
            .map(|(k, v)| json!({"name": k.role, "target": format!("{v:.1}")}))
            .collect();
        json!({"type": "Proportional", "proportional": {"metric": "QueueDepth", "roleTargets": targets}})
    } else {
        let mut fields = serde_json::Map::new();
        for (k, v) in &suggested {
            let field = match k.kind {
                RoleKind::Prefill => "prefill",
                RoleKind::Decode => "decode",
                _ => "server",
            };
            fields.insert(
                format!("{field}TargetTokensPerSecond"),
                json!(format!("{v:.0}")),
            );
        }
        json!({"type": "TokenThroughput", "tokenThroughput": fields})
    };
    Some(crate::fragment::algorithm(&algorithm))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_knee_is_found_and_the_target_is_the_highest_load_within_it() {
        // 1,000 to 10,000 tokens/s per replica; latency at 60 % of the SLO below 6,000, at
        // 180 % from 6,000 on.
        let readings: Vec<(f64, f64)> = (2..=20)
            .map(|i| {
                let load = f64::from(i) * 500.0;
                (load, if load < 6000.0 { 0.6 } else { 1.8 })
            })
            .collect();
        let k = knee(&readings);
        assert_eq!(k.knee, Some(5750.0));
        assert_eq!(k.suggested, Some(5500.0));
        assert_eq!(k.misfits, 0);
    }

    #[test]
    fn noise_moves_the_knee_to_the_fewest_misfits_and_no_breach_gives_the_highest_load() {
        // One stray breach at 2,000 and one good reading at 7,000.
        let mut readings: Vec<(f64, f64)> = (2..=20)
            .map(|i| {
                let load = f64::from(i) * 500.0;
                (load, if load < 6000.0 { 0.6 } else { 1.8 })
            })
            .collect();
        readings.push((2000.0, 1.5));
        readings.push((7000.0, 0.9));
        let k = knee(&readings);
        assert_eq!(k.knee, Some(5750.0));
        assert_eq!(k.misfits, 2);
        let calm = knee(&[(1000.0, 0.5), (3000.0, 0.9), (f64::NAN, 2.0)]);
        assert_eq!(
            (calm.knee, calm.suggested, calm.readings),
            (None, Some(3000.0), 2)
        );
        // Every reading out of SLO: the knee is at the lowest load, nothing to suggest.
        let hot = knee(&[(1000.0, 1.5), (2000.0, 2.0)]);
        assert_eq!((hot.knee, hot.suggested), (Some(1000.0), None));
    }
}
