//! The spec's invariants, checked from outside after every pass: what the target's counts did
//! against what the scaler's spec, its status and the world allowed at that moment. A run
//! with a violation fails (the command exits 1 and names the moment and the rule).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use mds_api::ModelDeploymentScaler;
use serde::Serialize;

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    /// Seconds since the start of the run.
    pub t: f64,
    /// The rule, as the spec states it.
    pub rule: &'static str,
    pub detail: String,
}

/// What one pass saw and did.
pub struct PassFacts<'a> {
    pub now: Timestamp,
    pub t: f64,
    /// The scaler as the pass read it (spec, and status before the pass).
    pub scaler: &'a ModelDeploymentScaler,
    /// The target's counts before and after the pass.
    pub before: &'a BTreeMap<String, i32>,
    pub after: &'a BTreeMap<String, i32>,
    /// The target's generation moved during the pass.
    pub target_changed: bool,
    /// The pass's own target write landed.
    pub wrote_target: bool,
    /// An instance of the target waited for admission when the pass began.
    pub unadmitted: bool,
    /// Instances of each role the world held when the pass began, terminating ones excepted
    /// (ordinals `0..n`: the world keeps them without gaps). Raising a count to cover only
    /// these adds no replica: it is the restore after an aborted retirement, which GPUStack
    /// answers by adopting the held instance (spec, *Pacing and guards*; D5).
    pub held: &'a BTreeMap<String, i32>,
    /// The pass's write was a pending cohort's rollback: the spec restores the cohort's
    /// baseline once an added ordinal is unadmitted past `pendingTimeoutSeconds`, and lists
    /// the abort cooldown among the guards of planned scale-down only (*Pacing and guards*;
    /// D18, D29), so a cooldown does not hold it.
    pub rollback: bool,
}

pub const BOUNDS: &str = "a written count lies within the role's minReplicas and maxReplicas";
pub const RATIO: &str = "a written vector lies within every ratio's min and max";
pub const ONE_DIRECTION: &str = "one commit moves the target in one direction";
pub const ONE_WRITER: &str = "only the bound scaler writes the target's counts";
pub const NO_GROWTH_UNADMITTED: &str = "a pending unadmitted workload prevents further growth";
pub const NO_SHRINK_COOLDOWN: &str = "an abort cooldown prevents scale-down across the target";

/// Every rule `facts` breaks.
pub fn check(facts: &PassFacts) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut broke = |rule: &'static str, detail: String| {
        out.push(Violation {
            t: facts.t,
            rule,
            detail,
        })
    };
    let moved: Vec<(&String, i32, i32)> = facts
        .after
        .iter()
        .filter_map(|(role, &n)| {
            let old = facts.before.get(role).copied().unwrap_or(n);
            (old != n).then_some((role, old, n))
        })
        .collect();
    if facts.target_changed && !facts.wrote_target {
        broke(
            ONE_WRITER,
            "the target's generation moved in a pass that wrote no target change".into(),
        );
    }
    if moved.is_empty() {
        return out;
    }
    let vector = describe(facts.before, facts.after);
    let up = moved.iter().any(|(_, old, new)| new > old);
    let down = moved.iter().any(|(_, old, new)| new < old);
    if up && down {
        broke(ONE_DIRECTION, vector.clone());
    }
    let spec = &facts.scaler.spec;
    for bounds in &spec.roles {
        let Some(&n) = facts.after.get(&bounds.name) else {
            continue;
        };
        let min = bounds.min_replicas.unwrap_or(1);
        if n < min || n > bounds.max_replicas {
            broke(
                BOUNDS,
                format!(
                    "{}={n} outside {min}..={} ({vector})",
                    bounds.name, bounds.max_replicas
                ),
            );
        }
    }
    for ratio in &spec.ratios {
        let (Some(&num), Some(&den)) = (
            facts.after.get(&ratio.numerator_role),
            facts.after.get(&ratio.denominator_role),
        ) else {
            continue;
        };
        let outside = |bound: &Option<mds_api::quantity::Quantity>, wrong: Ordering| {
            bound
                .as_ref()
                .and_then(|q| q.value().ok())
                .is_some_and(|q| q.cmp_ratio(i64::from(num), i64::from(den)) == wrong)
        };
        // num/den below min, or above max.
        if den > 0
            && (outside(&ratio.min, Ordering::Less) || outside(&ratio.max, Ordering::Greater))
        {
            broke(
                RATIO,
                format!(
                    "{}/{} = {num}/{den} outside its band ({vector})",
                    ratio.numerator_role, ratio.denominator_role
                ),
            );
        }
    }
    // Growth adds a replica: a raised count above what the world already holds.
    let adds = moved
        .iter()
        .any(|(role, old, new)| new > old && *new > facts.held.get(*role).copied().unwrap_or(0));
    if adds && facts.unadmitted {
        broke(NO_GROWTH_UNADMITTED, vector.clone());
    }
    let cooldown = facts
        .scaler
        .status
        .as_ref()
        .and_then(|s| s.last_scale_down.as_ref())
        .and_then(|l| l.cooldown_until.as_ref())
        .is_some_and(|until| until.0 > facts.now);
    if down && cooldown && !facts.rollback {
        broke(NO_SHRINK_COOLDOWN, vector);
    }
    out
}

fn describe(before: &BTreeMap<String, i32>, after: &BTreeMap<String, i32>) -> String {
    after
        .iter()
        .map(|(role, n)| match before.get(role) {
            Some(old) if old != n => format!("{role} {old}->{n}"),
            _ => format!("{role} {n}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_testdata::mk_scaler;
    use serde_json::json;

    fn scaler() -> ModelDeploymentScaler {
        let mut s: ModelDeploymentScaler = mk_scaler("pd")
            .role_bounds("prefill", 1, 8)
            .role_bounds("decode", 1, 8)
            .typed();
        s.spec.ratios = serde_json::from_value(json!([
            {"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "max": "2"}
        ]))
        .unwrap();
        s
    }

    fn v(prefill: i32, decode: i32) -> BTreeMap<String, i32> {
        BTreeMap::from([("prefill".into(), prefill), ("decode".into(), decode)])
    }

    fn rules(
        scaler: &ModelDeploymentScaler,
        before: (i32, i32),
        after: (i32, i32),
        wrote: bool,
        unadmitted: bool,
    ) -> Vec<&'static str> {
        rules_holding(scaler, before, after, wrote, unadmitted, before)
    }

    /// [`rules`] with the world holding `held` instances (prefill, decode).
    fn rules_holding(
        scaler: &ModelDeploymentScaler,
        before: (i32, i32),
        after: (i32, i32),
        wrote: bool,
        unadmitted: bool,
        held: (i32, i32),
    ) -> Vec<&'static str> {
        rules_of(scaler, before, after, (wrote, false), unadmitted, held)
    }

    /// [`rules_holding`] with `write` as (landed, was a rollback).
    fn rules_of(
        scaler: &ModelDeploymentScaler,
        before: (i32, i32),
        after: (i32, i32),
        (wrote, rollback): (bool, bool),
        unadmitted: bool,
        held: (i32, i32),
    ) -> Vec<&'static str> {
        let (before, after, held) = (
            v(before.0, before.1),
            v(after.0, after.1),
            v(held.0, held.1),
        );
        check(&PassFacts {
            now: Timestamp::from_second(1_000).unwrap(),
            t: 10.0,
            scaler,
            before: &before,
            after: &after,
            target_changed: before != after,
            wrote_target: wrote,
            unadmitted,
            held: &held,
            rollback,
        })
        .into_iter()
        .map(|v| v.rule)
        .collect()
    }

    #[test]
    fn a_legal_move_breaks_nothing() {
        let s = scaler();
        assert!(rules(&s, (2, 2), (3, 2), true, false).is_empty());
        assert!(rules(&s, (2, 2), (2, 2), false, true).is_empty());
    }

    #[test]
    fn each_rule_is_caught() {
        let s = scaler();
        assert_eq!(rules(&s, (2, 2), (9, 8), true, false), vec![BOUNDS]);
        assert_eq!(rules(&s, (2, 2), (5, 2), true, false), vec![RATIO]);
        assert_eq!(
            rules(&s, (2, 2), (3, 1), true, false),
            vec![ONE_DIRECTION, RATIO]
        );
        assert_eq!(rules(&s, (2, 2), (3, 2), false, false), vec![ONE_WRITER]);
        assert_eq!(
            rules(&s, (2, 2), (3, 2), true, true),
            vec![NO_GROWTH_UNADMITTED]
        );
        let mut cooling = scaler();
        cooling.status = serde_json::from_value(json!({"lastScaleDown": {
            "role": "decode", "ordinal": 2, "preScaleDownVector": {"decode": 3, "prefill": 2},
            "outcome": "Aborted", "cooldownUntil": "1970-01-01T00:20:00Z"}}))
        .unwrap();
        assert_eq!(
            rules(&cooling, (2, 2), (2, 1), true, false),
            vec![NO_SHRINK_COOLDOWN]
        );
        assert!(rules(&cooling, (2, 2), (3, 2), true, false).is_empty());
        // A pending cohort's rollback is no planned scale-down: the cooldown does not hold it.
        assert!(rules_of(&cooling, (3, 2), (2, 2), (true, true), true, (3, 2)).is_empty());
    }

    #[test]
    fn restoring_counts_over_held_instances_is_no_growth() {
        let s = scaler();
        // An aborted retirement kept prefill 2 (unadmitted) and decode 1: the restore
        // declares them again and adds nothing.
        assert!(rules_holding(&s, (2, 1), (3, 2), true, true, (3, 2)).is_empty());
        // One more than the world holds is growth.
        assert_eq!(
            rules_holding(&s, (2, 1), (4, 2), true, true, (3, 2)),
            vec![NO_GROWTH_UNADMITTED]
        );
    }
}
