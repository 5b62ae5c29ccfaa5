//! `mds simulate --suggest`: the cheapest per-replica target that meets an SLO attainment goal,
//! searched on the trace and profile with the production code, ready to paste.
//!
//! The search keeps the scaler as it is and scales every role's per-replica target by one
//! factor (so the ratios between roles' targets stay): the token capacities for TokenThroughput
//! and Predictive (both its capacity and its fallback), the request targets for Proportional.
//! It runs a geometric grid of factors from 1/4 to 8 of the given targets, then halves the gap
//! between the cheapest setting that meets the goal and the next larger one three times, and
//! picks the fewest GPU-hours among the settings that meet it (ties: the higher attainment).
//! From there a coordinate search tunes the spec's windows and thresholds and each role's
//! capacity (module `tune`). Every trial is a whole `mds simulate` run on the same world and
//! seed, run side by side.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use mds_api::ModelDeploymentScaler;

use crate::SimError;
use crate::compare::{self, Case, Contender};
use crate::peers::file::PeerFile;

/// One setting tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trial {
    /// The factor on the given targets.
    pub factor: f64,
    /// Per role: the target it sets (tokens/s or requests).
    pub targets: Vec<(String, f64)>,
    pub attainment: Option<f64>,
    pub gpu_hours: f64,
    pub violations: usize,
    /// A token target above its role's knee at the goal: never suggested (one replica does
    /// not serve that much within the SLO; the latency guard would be doing the scaling).
    pub above_knee: bool,
    /// Its run in full (for the frontier's row, which is this search's answer).
    #[serde(skip)]
    pub report: Option<Box<crate::run::RunReport>>,
}

impl Trial {
    fn meets(&self, goal: f64) -> bool {
        self.violations == 0 && self.attainment.is_some_and(|a| a >= goal)
    }
}

/// A peer priced on the same world: a team's own (`--peer`) as written, else a default peer
/// configured from the suggested capacity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerCost {
    pub peer: String,
    pub attainment: Option<f64>,
    pub gpu_hours: f64,
    /// The team's own file, as written (not a setting derived from our capacity).
    pub as_written: bool,
}

/// The team's own peers as written, when given; else the default peers configured from
/// `scaler`'s capacity; on `case`'s world.
fn peers_at(
    case: &Case,
    scaler: &ModelDeploymentScaler,
    own: &[Arc<PeerFile>],
    threads: usize,
) -> Result<Vec<PeerCost>, SimError> {
    let case = Case {
        scaler,
        trace: case.trace.clone(),
        ..*case
    };
    if !own.is_empty() {
        let contenders: Vec<Contender> = own
            .iter()
            .map(|peer| Contender::File {
                peer: peer.clone(),
                factor: 1.0,
            })
            .collect();
        return Ok(priced(
            compare::run_all(&case, &contenders, threads, &|_| {})?,
            true,
        ));
    }
    // Only the peers whose knob the capacity sets (a KV or SLA knob is not configured from it).
    let contenders: Vec<Contender> = crate::frontier::DEFAULT_PEERS
        .iter()
        .filter(|name| {
            matches!(
                name.knob(),
                crate::roster::Knob::Capacity | crate::roster::Knob::RequestTarget
            )
        })
        .map(|name| Contender::Peer {
            name: *name,
            factor: 1.0,
        })
        .collect();
    Ok(priced(
        compare::run_all(&case, &contenders, threads, &|_| {})?,
        false,
    ))
}

fn priced(reports: Vec<crate::run::RunReport>, as_written: bool) -> Vec<PeerCost> {
    reports
        .into_iter()
        .map(|r| PeerCost {
            peer: r.inputs.scaler.clone(),
            attainment: r.summary.totals.attainment,
            gpu_hours: r.summary.totals.gpu_hours,
            as_written,
        })
        .collect()
}

/// GPU-hours within this share of the cheapest are a near-tie, broken toward headroom (the
/// smaller per-replica target).
const NEAR_TIE: f64 = 0.01;

/// Each role kind's knee at the goal, tokens/s (the least over its roles), keyed as the token
/// fields name kinds: `server`, `prefill`, `decode`, `encode`.
pub type Ceiling = BTreeMap<String, f64>;

/// The knees `case`'s roles reach at `goal` on the trace's mix (module `capacity`).
pub fn ceiling(case: &Case, goal: f64, threads: usize) -> Ceiling {
    let curves =
        crate::run::whole_curves(case.scaler, case.target, &case.trace, case.options, threads);
    ceiling_of(&curves, case.target, goal)
}

/// The knees at `goal` of roles' measured `curves`, per kind (the least over its roles).
pub fn ceiling_of(
    curves: &BTreeMap<String, crate::capacity::Curves>,
    target: &mds_api::target::ModelDeployment,
    goal: f64,
) -> Ceiling {
    let mut out = Ceiling::new();
    for (role, c) in curves {
        let knee = c.one().and_then(|c| c.knee(goal));
        let kind = target.spec.roles.iter().find(|r| &r.name == role);
        if let (Some(knee), Some(r)) = (knee, kind) {
            let label = format!("{:?}", r.kind()).to_lowercase();
            let least = out.entry(label).or_insert(f64::INFINITY);
            *least = least.min(knee.tokens_per_second);
        }
    }
    out
}

/// Whether a token target of `algorithm` (a capacity or a fallback's target) is above its
/// kind's knee.
pub(crate) fn above_knee(algorithm: &Value, ceiling: &Ceiling) -> bool {
    target_fields(algorithm).iter().any(|(path, v)| {
        let field = path.last().map(String::as_str).unwrap_or_default();
        let kind = field
            .strip_suffix("TargetTokensPerSecond")
            .or_else(|| field.strip_suffix("TokenCapacityPerReplica"));
        kind.and_then(|k| ceiling.get(k))
            .is_some_and(|knee| *v > knee * (1.0 + 1e-9))
    })
}

/// The search's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Suggestion {
    /// The SLO attainment goal, 0..1.
    pub goal: f64,
    /// The guard targets set to what the SLO implies before the search (`field old -> new`).
    pub guard_changes: Vec<String>,
    /// Each role kind's knee at the goal: no target above it is suggested.
    pub ceiling: Ceiling,
    /// The team's own peers as written (`--peer`), else the default peers configured from
    /// the suggested capacity (they use it too), each with its attainment and GPU-hours on
    /// the same world.
    pub peers: Vec<PeerCost>,
    /// Every setting tried, by factor.
    pub trials: Vec<Trial>,
    /// The cheapest that meets the goal (`None`: none does).
    pub chosen: Option<Trial>,
    /// The scaler's `spec.algorithm` (and `spec.behavior` when tuning changed it) with the
    /// chosen setting, as YAML.
    pub fragment: Option<String>,
    /// The coordinate search beyond the capacity from the chosen factor (module `tune`), when
    /// a factor met the goal.
    pub tuned: Option<crate::tune::Tuned>,
    /// The share of counted requests no count of replicas serves within the SLO (their TTFT
    /// or decode step on an idle replica is over the objective): attainment cannot pass
    /// 1 minus it, whatever the setting.
    pub unattainable_share: f64,
}

/// Where each role's target sits in `spec.algorithm`, and its value.
pub(crate) fn target_fields(algorithm: &Value) -> Vec<(Vec<String>, f64)> {
    let mut out = Vec::new();
    let kind = algorithm["type"].as_str().unwrap_or("TokenThroughput");
    let mut token_fields = |base: &[&str]| {
        let mut block = algorithm;
        for key in base {
            block = &block[*key];
        }
        if let Some(map) = block.as_object() {
            for (key, value) in map {
                let is_target = key.ends_with("TargetTokensPerSecond")
                    || key.ends_with("TokenCapacityPerReplica");
                if let Some(v) = quantity(value).filter(|_| is_target) {
                    let mut path: Vec<String> = base.iter().map(|s| s.to_string()).collect();
                    path.push(key.clone());
                    out.push((path, v));
                }
            }
        }
    };
    match kind {
        "Proportional" => {
            if let Some(targets) = algorithm["proportional"]["roleTargets"].as_array() {
                for (i, t) in targets.iter().enumerate() {
                    if let Some(v) = quantity(&t["target"]) {
                        let path = vec![
                            "proportional".to_string(),
                            "roleTargets".to_string(),
                            i.to_string(),
                            "target".to_string(),
                        ];
                        out.push((path, v));
                    }
                }
            }
        }
        "Predictive" => {
            token_fields(&["predictive"]);
            token_fields(&["predictive", "tokenThroughput"]);
        }
        _ => token_fields(&["tokenThroughput"]),
    }
    out
}

fn quantity(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => mds_api::quantity::parse_decimal(s).ok().map(|d| d.to_f64()),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

/// Sets the quantity at `path` (object keys, or indices into lists) as a string.
pub(crate) fn set(algorithm: &mut Value, path: &[String], value: f64) {
    put(algorithm, path, Value::String(format_quantity(value)));
}

/// Sets the value at `path` (object keys, or indices into lists), making objects on the way.
pub(crate) fn put(doc: &mut Value, path: &[String], value: Value) {
    let mut at = doc;
    for key in path {
        at = match key.parse::<usize>() {
            Ok(i) if at.is_array() => &mut at[i],
            _ => &mut at[key.as_str()],
        };
    }
    *at = value;
}

/// A target as a quantity string: whole above 10, two decimals below.
pub(crate) fn format_quantity(v: f64) -> String {
    if v >= 10.0 {
        format!("{}", v.round())
    } else {
        format!("{}", (v * 100.0).round() / 100.0)
    }
}

/// The label a role's target field names (`server`, `prefill`, or the role of a Proportional
/// target).
fn label(algorithm: &Value, path: &[String]) -> String {
    let last = path.last().map(String::as_str).unwrap_or_default();
    if last == "target" {
        let index: usize = path.get(2).and_then(|i| i.parse().ok()).unwrap_or(0);
        return algorithm["proportional"]["roleTargets"][index]["name"]
            .as_str()
            .unwrap_or("role")
            .to_string();
    }
    let role = last
        .strip_suffix("TargetTokensPerSecond")
        .or_else(|| last.strip_suffix("TokenCapacityPerReplica"))
        .unwrap_or(last);
    if path.len() > 2 {
        format!("{role} (fallback)")
    } else {
        role.to_string()
    }
}

/// The scaler's algorithm sets a per-replica target to scale.
pub(crate) fn has_target(scaler: &ModelDeploymentScaler) -> bool {
    serde_json::to_value(scaler)
        .map(|doc| !target_fields(&doc["spec"]["algorithm"]).is_empty())
        .unwrap_or(false)
}

/// The scaler with every target scaled by `factor`.
pub(crate) fn scaled(
    scaler: &ModelDeploymentScaler,
    factor: f64,
) -> Result<(ModelDeploymentScaler, Vec<(String, f64)>), SimError> {
    let mut doc = serde_json::to_value(scaler)
        .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
    let fields = target_fields(&doc["spec"]["algorithm"]);
    let mut targets = Vec::new();
    for (path, value) in &fields {
        let v = value * factor;
        set(&mut doc["spec"]["algorithm"], path, v);
        targets.push((label(&doc["spec"]["algorithm"], path), v));
    }
    let variant = serde_json::from_value(doc)
        .map_err(|e| SimError::Input(format!("a scaled scaler does not parse: {e}")))?;
    Ok((variant, targets))
}

/// The trials of `factors`, and the share of requests unattainable at any scale (a property
/// of the trace, the profile and the SLO: the same in every trial).
fn run_factors(
    case: &Case,
    factors: &[f64],
    ceiling: &Ceiling,
    threads: usize,
) -> Result<(Vec<Trial>, f64), SimError> {
    let mut contenders = Vec::new();
    let mut targets = Vec::new();
    let mut over = Vec::new();
    for f in factors {
        let (scaler, t) = scaled(case.scaler, *f)?;
        let doc = serde_json::to_value(&scaler.spec).unwrap_or_default();
        over.push(above_knee(&doc["algorithm"], ceiling));
        contenders.push(Contender::Mds {
            name: format!("x{f}"),
            scaler: Box::new(scaler),
        });
        targets.push(t);
    }
    // Totals only: no bounds or metrics to measure.
    let runs = compare::run_all(case, &contenders, threads, &|_| {})?;
    let rows = compare::rows(&runs, None);
    let unattainable_share = runs.first().map_or(0.0, |run| {
        let totals = &run.summary.totals;
        if totals.requests > 0.0 {
            totals.unattainable / totals.requests
        } else {
            0.0
        }
    });
    let trials = rows
        .iter()
        .zip(runs)
        .zip(factors)
        .zip(targets)
        .zip(over)
        .map(|((((row, run), f), t), above_knee)| Trial {
            factor: *f,
            targets: t,
            attainment: row.attainment,
            gpu_hours: row.gpu_hours,
            violations: row.violations,
            above_knee,
            report: Some(Box::new(run)),
        })
        .collect();
    Ok((trials, unattainable_share))
}

/// The search (module documentation), then the peers priced beside its answer: `own`, the
/// team's autoscalers (`--peer`) as written, else the default peers at the suggested capacity.
pub fn suggest(
    case: &Case,
    goal: f64,
    own: &[Arc<PeerFile>],
    threads: usize,
) -> Result<Suggestion, SimError> {
    let knees = ceiling(case, goal, threads);
    let mut found = search(case, goal, knees, threads)?;
    let aimed = crate::guards::aimed_at(case.scaler, &case.options.slo)?.0;
    let case = &Case {
        scaler: &aimed,
        trace: case.trace.clone(),
        ..*case
    };
    found.peers = match &found.tuned {
        Some(t) => peers_at(case, &t.scaler, own, threads)?,
        None if !own.is_empty() => peers_at(case, case.scaler, own, threads)?,
        None => Vec::new(),
    };
    Ok(found)
}

/// The one tuner `--suggest` and the frontier's `mds --suggest` row share: the guards aimed at
/// the SLO, the factor grid and its halvings toward the cheapest setting at or below `knees`
/// (each kind's knee at the goal) that meets `goal`, then the coordinate search of module
/// `tune` from it, held under the knees too. No peers are priced.
pub fn search(
    case: &Case,
    goal: f64,
    knees: Ceiling,
    threads: usize,
) -> Result<Suggestion, SimError> {
    // The pasted scaler's guards aim at the SLO it was searched for (module `guards`).
    let (aimed, guard_changes) = crate::guards::aimed_at(case.scaler, &case.options.slo)?;
    let case = &Case {
        scaler: &aimed,
        trace: case.trace.clone(),
        ..*case
    };
    if !has_target(case.scaler) {
        return Err(SimError::Input(
            "the scaler's algorithm gives no per-replica target to search (a token capacity or a Proportional request target)".into(),
        ));
    }
    let grid = [0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6, 8.0];
    let (mut trials, unattainable_share) = run_factors(case, &grid, &knees, threads)?;
    for _ in 0..3 {
        trials.sort_by(|a, b| a.factor.total_cmp(&b.factor));
        let Some(best) = cheapest(&trials, goal) else {
            break;
        };
        let Some(next) = trials.iter().find(|t| t.factor > best.factor) else {
            break;
        };
        let mid = (best.factor * next.factor).sqrt();
        if (next.factor / best.factor) < 1.02 {
            break;
        }
        let mid = (mid * 1000.0).round() / 1000.0;
        trials.extend(run_factors(case, &[mid], &knees, threads)?.0);
    }
    trials.sort_by(|a, b| a.factor.total_cmp(&b.factor));
    let chosen = cheapest(&trials, goal).cloned();
    let (fragment, tuned) = match &chosen {
        Some(t) => {
            let (scaler, _) = scaled(case.scaler, t.factor)?;
            let seed = (t.gpu_hours, t.attainment.unwrap_or(goal));
            let tuned = crate::tune::tune(case, &scaler, seed, goal, &knees, threads)?;
            let spec = serde_json::to_value(&tuned.scaler.spec)
                .map_err(|e| SimError::Input(e.to_string()))?;
            let behavior_changed = tuned.steps.iter().any(|s| s.field.starts_with("behavior."));
            let mut blocks = vec![("algorithm", &spec["algorithm"])];
            if behavior_changed {
                blocks.push(("behavior", &spec["behavior"]));
            }
            (Some(crate::fragment::spec_blocks(&blocks)), Some(tuned))
        }
        None => (None, None),
    };
    Ok(Suggestion {
        goal,
        guard_changes,
        ceiling: knees,
        peers: Vec::new(),
        trials,
        chosen,
        fragment,
        tuned,
        unattainable_share,
    })
}

/// The trial with the fewest GPU-hours among those at or below the knee that meet the goal;
/// of near-ties (within [`NEAR_TIE`]), the one with the most headroom (the smallest factor).
fn cheapest(trials: &[Trial], goal: f64) -> Option<&Trial> {
    let meeting = || trials.iter().filter(|t| t.meets(goal) && !t.above_knee);
    let least = meeting().map(|t| t.gpu_hours).min_by(f64::total_cmp)?;
    meeting()
        .filter(|t| t.gpu_hours <= least * (1.0 + NEAR_TIE))
        .min_by(|a, b| a.factor.total_cmp(&b.factor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trial(factor: f64, gpu_hours: f64, above_knee: bool) -> Trial {
        Trial {
            factor,
            targets: vec![],
            attainment: Some(0.96),
            gpu_hours,
            violations: 0,
            above_knee,
            report: None,
        }
    }

    #[test]
    fn the_cheapest_is_at_or_below_the_knee_and_near_ties_go_to_headroom() {
        let trials = [
            trial(1.0, 2.50, false),
            trial(1.2, 2.48, false),
            trial(1.4, 2.40, false),
            trial(1.6, 2.39, false),
            trial(4.0, 1.90, true),
        ];
        // 2.39 is the least at or below the knee; 2.40 is within 1 % of it and has more
        // headroom (the smaller target).
        assert_eq!(cheapest(&trials, 0.95).map(|t| t.factor), Some(1.4));
        assert_eq!(cheapest(&trials[4..], 0.95), None);
    }

    #[test]
    fn a_capacity_or_fallback_target_over_its_kinds_knee_is_above_it() {
        let ceiling = Ceiling::from([("server".to_string(), 4000.0)]);
        let at = json!({"type": "Predictive", "predictive": {
            "serverTokenCapacityPerReplica": "4000",
            "tokenThroughput": {"serverTargetTokensPerSecond": "3000"}}});
        assert!(!above_knee(&at, &ceiling));
        let fallback_over = json!({"type": "Predictive", "predictive": {
            "serverTokenCapacityPerReplica": "3000",
            "tokenThroughput": {"serverTargetTokensPerSecond": "4001"}}});
        assert!(above_knee(&fallback_over, &ceiling));
        let proportional = json!({"type": "Proportional", "proportional": {
            "roleTargets": [{"name": "server", "target": "8000"}]}});
        assert!(
            !above_knee(&proportional, &ceiling),
            "a request target is not tokens/s"
        );
    }
}
