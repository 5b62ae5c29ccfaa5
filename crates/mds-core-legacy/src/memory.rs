//! Planner memory in status (spec, *Status*, *Predictor state*; D23): histories and filters
//! ride along with each status write and are read back when planning resumes.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mds_api::quantity::{Decimal, Quantity};
use mds_api::status::{
    Covariance, DemandSample, ModelDeploymentScalerStatus, PredictorStatus, RecommendationSample,
    ReplicaVector,
};
use mds_planner::PlannerState;
use mds_planner::state::{Growth, HISTORY_LIMIT, Kalman, RoleState};

fn number(q: &Quantity) -> Option<f64> {
    q.value().ok().map(Decimal::to_f64)
}

/// Nano precision keeps small covariances; the range check drops nonsense instead of failing.
fn quantity(v: f64) -> Quantity {
    Decimal::from_f64_rounded(v, 9)
        .or_else(|| Decimal::from_f64_rounded(v, 0))
        .unwrap_or_default()
        .into()
}

/// Rebuilds planner memory from a status written earlier, at the first pass after a restart
/// or when planning resumes after a suspension (D29).
///
/// Recommendation histories are change points (D30): the last recorded recommendation holds
/// until now, exactly as in an uninterrupted run, because every change of a raw
/// recommendation is written (D23). Demand samples are a snapshot of the last write.
pub fn restore(status: &ModelDeploymentScalerStatus) -> PlannerState {
    let mut state = PlannerState::default();
    for role in &status.roles {
        let memory = state.roles.entry(role.name.clone()).or_default();
        for sample in &role.stabilization_history {
            memory.record_recommendation(sample.timestamp.0, sample.replicas);
        }
        memory.last_scale_up = role.last_scale_up_time.as_ref().map(|t| t.0);
        memory.last_growth = memory
            .last_scale_up
            .map(|at| restored_growth(status, &role.name, at));
    }
    for predictor in &status.predictors {
        let memory = state.roles.entry(predictor.name.clone()).or_default();
        memory.demand = predictor
            .history
            .iter()
            .filter_map(|s| Some((s.timestamp.0, number(&s.tokens_per_second)?)))
            .collect();
        let excess = memory.demand.len().saturating_sub(HISTORY_LIMIT);
        memory.demand.drain(..excess);
        if predictor.sample_count > 0 {
            memory.kalman = Some(restored_filter(predictor, memory.demand.back().copied()));
        }
    }
    state
}

/// The filter a predictor status describes. Its sample count is what ends warm-up, so it is
/// kept even when other fields are missing: a missing level is the latest demand sample, a
/// missing trend zero, and an unknown value (no level at all, no covariance) is not a number,
/// which makes the next update start the estimate over at its sample, count kept
/// (`Kalman::update`).
fn restored_filter(predictor: &PredictorStatus, latest: Option<(Timestamp, f64)>) -> Kalman {
    let unknown = f64::NAN;
    let level = predictor.level.as_ref().and_then(number);
    let level = level.or(latest.map(|(_, v)| v)).unwrap_or(unknown);
    let trend = predictor.trend.as_ref().and_then(number).unwrap_or(0.0);
    let p = |q: &Quantity| number(q).unwrap_or(unknown);
    let p = predictor
        .covariance
        .as_ref()
        .map_or([[unknown; 2]; 2], |c| {
            [[p(&c.p00), p(&c.p01)], [p(&c.p10), p(&c.p11)]]
        });
    Kalman {
        level,
        trend,
        p,
        sample_count: predictor.sample_count.clamp(0, u32::MAX as i64) as u32,
        updated_at: latest.map_or(Timestamp::UNIX_EPOCH, |(t, _)| t),
    }
}

/// The ordinals the role's last growth added, from the decision records that still name it;
/// when none does, every ordinal counts (D13 then holds the latency guard a little longer
/// after a restart, never beyond `pendingTimeoutSeconds` from that growth).
fn restored_growth(status: &ModelDeploymentScalerStatus, role: &str, at: Timestamp) -> Growth {
    let from_record = |baseline: &ReplicaVector, vector: &ReplicaVector, when: Option<&Time>| {
        let (from, to) = (*baseline.get(role)?, *vector.get(role)?);
        (to > from && when.map(|t| t.0) == Some(at)).then_some(Growth { at, from, to })
    };
    status
        .pending_cohort
        .as_ref()
        .and_then(|c| from_record(&c.baseline_vector, &c.target_vector, c.started_at.as_ref()))
        .or_else(|| {
            let c = status.last_commit.as_ref()?;
            from_record(&c.baseline_vector, &c.vector, c.timestamp.as_ref())
        })
        .unwrap_or(Growth {
            at,
            from: 0,
            to: i32::MAX,
        })
}

/// Writes planner memory into `status` (histories and filters of the named roles).
pub fn persist(state: &PlannerState, status: &mut ModelDeploymentScalerStatus) {
    for role in &mut status.roles {
        if let Some(memory) = state.roles.get(&role.name) {
            role.stabilization_history = memory
                .recommendations
                .iter()
                .map(|(t, r)| RecommendationSample {
                    timestamp: Time(*t),
                    replicas: *r,
                })
                .collect();
            role.last_scale_up_time = memory.last_scale_up.map(Time);
        }
    }
    // Only roles the status reports (roles that left the spec are forgotten).
    let reported: Vec<&str> = status.roles.iter().map(|r| r.name.as_str()).collect();
    status.predictors = state
        .roles
        .iter()
        .filter(|(name, _)| reported.contains(&name.as_str()))
        .filter(|(_, m)| !m.demand.is_empty() || m.kalman.is_some())
        .map(|(name, m)| predictor_status(name, m))
        .collect();
}

fn finite(v: f64) -> Option<Quantity> {
    v.is_finite().then(|| quantity(v))
}

fn predictor_status(name: &str, m: &RoleState) -> PredictorStatus {
    PredictorStatus {
        name: name.to_string(),
        // Values not known (a filter restored without them) stay absent, not zero.
        level: m.kalman.as_ref().and_then(|k| finite(k.level)),
        trend: m.kalman.as_ref().and_then(|k| finite(k.trend)),
        covariance: m
            .kalman
            .as_ref()
            .filter(|k| k.p.iter().flatten().all(|v| v.is_finite()))
            .map(|k| Covariance {
                p00: quantity(k.p[0][0]),
                p01: quantity(k.p[0][1]),
                p10: quantity(k.p[1][0]),
                p11: quantity(k.p[1][1]),
            }),
        sample_count: m.kalman.as_ref().map_or(0, |k| k.sample_count as i64),
        history: m
            .demand
            .iter()
            .map(|(t, v)| DemandSample {
                timestamp: Time(*t),
                tokens_per_second: quantity(*v),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_api::status::RoleStatus;

    #[test]
    fn a_predictor_missing_fields_keeps_its_count_and_writes_back_no_invented_values() {
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let predictor = PredictorStatus {
            name: "prefill".into(),
            sample_count: 10,
            history: vec![DemandSample {
                timestamp: Time(t(0)),
                tokens_per_second: Quantity::from("2400"),
            }],
            ..Default::default()
        };
        let mut status = ModelDeploymentScalerStatus {
            roles: vec![RoleStatus {
                name: "prefill".into(),
                ..Default::default()
            }],
            predictors: vec![predictor],
            ..Default::default()
        };
        let state = restore(&status);
        let k = state.roles["prefill"].kalman.as_ref().expect("a filter");
        assert_eq!((k.sample_count, k.level, k.trend), (10, 2400.0, 0.0));
        assert!(
            !k.is_sane(),
            "an unknown covariance restarts at the next update"
        );
        persist(&state, &mut status);
        let written = &status.predictors[0];
        assert_eq!(written.sample_count, 10);
        assert_eq!(written.covariance, None, "not written as zeros");
        assert_eq!(written.level.as_ref().and_then(number), Some(2400.0));
    }

    #[test]
    fn memory_round_trips_through_status() {
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let mut state = PlannerState::default();
        let role = state.roles.entry("prefill".into()).or_default();
        for i in 0..10 {
            role.record_demand(t(15 * i), 1000.5 + i as f64, 600);
            role.record_recommendation(t(15 * i), 3 + (i % 2) as i32);
        }
        role.kalman = Some(Kalman {
            level: 1009.25,
            trend: 0.125,
            p: [[2.5, 0.001], [0.001, 0.0005]],
            sample_count: 10,
            updated_at: t(135),
        });
        role.last_scale_up = Some(t(60));
        role.last_growth = Some(Growth {
            at: t(60),
            from: 2,
            to: 3,
        });
        let mut status = ModelDeploymentScalerStatus {
            roles: vec![RoleStatus {
                name: "prefill".into(),
                ..Default::default()
            }],
            // The growth's range comes back from the decision record that still names it.
            last_commit: Some(mds_api::status::LastCommit {
                decision_id: "s-t1-1800000060000".into(),
                term: 1,
                vector: [("prefill".to_string(), 3)].into(),
                baseline_vector: [("prefill".to_string(), 2)].into(),
                timestamp: Some(Time(t(60))),
                target_generation: Some(2),
            }),
            ..Default::default()
        };
        persist(&state, &mut status);
        // Through JSON, as the API server stores it.
        let status: ModelDeploymentScalerStatus =
            serde_json::from_value(serde_json::to_value(&status).unwrap()).unwrap();
        let restored = restore(&status);
        assert_eq!(restored, state);
        // Without a record naming it, every ordinal counts as that growth's.
        let mut status = status;
        status.last_commit = None;
        assert_eq!(
            restore(&status).roles["prefill"].last_growth,
            Some(Growth {
                at: t(60),
                from: 0,
                to: i32::MAX
            })
        );
    }
}
