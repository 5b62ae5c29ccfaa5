//! Each scaler's series, read at scrape time from what its passes left: per role, the counts,
//! bounds, signal state, demand against capacity and latency against target; per scaler, the
//! latest pass, `Blocked`, refused scale-downs, and counters of decisions, reversals and failed
//! writes. The alert rules and the dashboard in the Helm chart read exactly these names.
//!
//! A scaler's series go when its worker ends ([`ScalerSeries::keep`]'s guard): no series is
//! removed by hand, and a recreated scaler's counters start again from zero (Prometheus reads
//! that as a counter reset).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use mds_api::status::{ModelDeploymentScalerStatus, SignalState};
use mds_core::WriteKind;
use mds_planner::algorithms::guard_checks;
use mds_planner::policy::AlgorithmPolicy;
use mds_planner::{Plan, Policy};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::ports::ScalerKey;
use crate::worker::PassReport;

/// The reasons of a donation's two commits (spec *Rebalancing*).
const DONATION_STEPS: [&str; 2] = ["DonorRelease", "ReceiverAcquire"];

/// Every signal state a role can be in (`mds_role_signal_state{state}`).
const SIGNAL_STATES: [(SignalState, &str); 4] = [
    (SignalState::Fresh, "Fresh"),
    (SignalState::Idle, "Idle"),
    (SignalState::Missing, "Missing"),
    (SignalState::Stale, "Stale"),
];

/// One role's latest numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoleSeries {
    pub role: String,
    pub recommended: i32,
    pub constrained: i32,
    pub current: i32,
    pub ready: Option<i32>,
    pub min: Option<i32>,
    pub max: Option<i32>,
    pub signal: Option<SignalState>,
    /// The load the algorithm sized the role on, and what its ready replicas serve at target
    /// (in the unit of `metric`).
    pub metric: Option<&'static str>,
    pub demand: Option<f64>,
    pub capacity: Option<f64>,
    /// Predictive's forecast of the demand `horizonSeconds` ahead.
    pub forecast: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    pub ttft_target_ms: Option<f64>,
    pub itl_target_ms: Option<f64>,
    /// Unix seconds since when the role's signals have been `Missing` or `Stale`.
    pub lost_since: Option<f64>,
}

/// One scaler's state for the next scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalerState {
    pub roles: Vec<RoleSeries>,
    /// Unix seconds of the latest pass that reached the core.
    pub last_pass: Option<f64>,
    pub interval_seconds: Option<i64>,
    /// `Blocked`'s status and reason (`Ready` while `False`).
    pub blocked: Option<(bool, String)>,
    /// Roles whose scale-down the target refuses (D35).
    pub scale_down_refused: Vec<String>,
    /// Writes of counts that landed, by (kind, reason).
    pub decisions: BTreeMap<(&'static str, String), u64>,
    /// Commits that turned a role's direction, by role.
    pub reversals: BTreeMap<String, u64>,
    /// Target writes that did not land, by (kind, reason).
    pub write_failures: BTreeMap<(&'static str, &'static str), u64>,
    /// The target write that failed and is not landed yet (failing again, or held by its
    /// backoff): (kind, reason). A write that lands, or a pass that has none to make, clears it.
    pub failing: Option<(&'static str, &'static str)>,
    /// Each role's direction in our last commit that changed it (+1 up, -1 down).
    last_direction: BTreeMap<String, i8>,
}

impl ScalerState {
    /// Folds in one pass at unix time `at`.
    pub fn observe(&mut self, report: &PassReport, at: f64) {
        match &report.write {
            Some((kind, Ok(()))) => {
                self.failing = None;
                self.count_decision(*kind, report);
            }
            Some((kind, Err(e))) => {
                let key = (kind.as_str(), e.kind());
                *self.write_failures.entry(key).or_default() += 1;
                // A conflict is re-planned next pass: not a failing write.
                self.failing = (e.kind() != "conflict").then_some(key);
            }
            // No write this pass and none held: unless the core holds a refused commit's
            // counts (refused until the spec, the target or the plan changes), nothing fails.
            None if report.held.is_none()
                && report
                    .outcome
                    .as_ref()
                    .is_some_and(|o| !o.holds_refused_commit) =>
            {
                self.failing = None
            }
            None => {}
        }
        let Some(outcome) = &report.outcome else {
            return;
        };
        self.last_pass = Some(at);
        let status = &outcome.status;
        self.blocked = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Blocked")
            .map(|c| (c.status == "True", c.reason.clone()));
        self.scale_down_refused = status
            .scale_down_refusals
            .iter()
            .filter(|r| r.aborts >= 2)
            .map(|r| r.name.clone())
            .collect();
        if let Some(policy) = &outcome.policy {
            self.interval_seconds = Some(policy.interval_seconds);
        }
        if let Some(plan) = &outcome.plan {
            let mut roles = role_series(plan, outcome.policy.as_ref(), status);
            for role in &mut roles {
                let lost = matches!(role.signal, Some(SignalState::Missing | SignalState::Stale));
                let before = self.roles.iter().find(|r| r.role == role.role);
                role.lost_since = lost.then(|| before.and_then(|b| b.lost_since).unwrap_or(at));
            }
            self.roles = roles;
        }
    }

    fn count_decision(&mut self, kind: WriteKind, report: &PassReport) {
        if !matches!(
            kind,
            WriteKind::Commit | WriteKind::Rollback | WriteKind::Restore
        ) {
            return;
        }
        // The core recorded this write as the latest decision of the status it returned.
        let Some(decision) = report
            .outcome
            .as_ref()
            .and_then(|o| o.status.decisions.last())
        else {
            return;
        };
        *self
            .decisions
            .entry((kind.as_str(), decision.reason.clone()))
            .or_default() += 1;
        for (role, &after) in &decision.after {
            let Some(&before) = decision.before.get(role) else {
                continue;
            };
            let direction = (after - before).signum() as i8;
            if direction == 0 {
                continue;
            }
            // A rollback or restore undoes a change the cluster refused, and a donation moves
            // a replica between roles for the same reason: no turn of the scaler's own (the
            // rollback alerts say it), and the next commit starts afresh.
            if kind != WriteKind::Commit || DONATION_STEPS.contains(&decision.reason.as_str()) {
                self.last_direction.remove(role);
                continue;
            }
            let previous = self.last_direction.insert(role.clone(), direction);
            if previous.is_some_and(|p| p != direction) {
                *self.reversals.entry(role.clone()).or_default() += 1;
            }
        }
    }
}

/// Each planned role's series: the plan's counts and load, the policy's bounds and latency
/// targets, the status's readings.
fn role_series(
    plan: &Plan,
    policy: Option<&Policy>,
    status: &ModelDeploymentScalerStatus,
) -> Vec<RoleSeries> {
    let targets = policy.and_then(|p| match &p.algorithm {
        AlgorithmPolicy::TokenThroughput(t) => Some((t.ttft_target_ms, t.itl_target_ms)),
        AlgorithmPolicy::Predictive(p) => {
            Some((p.fallback.ttft_target_ms, p.fallback.itl_target_ms))
        }
        AlgorithmPolicy::Proportional { .. } => None,
    });
    let number = |q: &Option<mds_api::quantity::Quantity>| {
        q.as_ref().and_then(|q| q.value().ok()).map(|d| d.to_f64())
    };
    plan.roles
        .iter()
        .map(|r| {
            let bounds = policy.and_then(|p| p.roles.iter().find(|b| b.name == r.name));
            let seen = status.roles.iter().find(|s| s.name == r.name);
            // Only the targets the latency guard holds this role's kind to.
            let (ttft, itl) = bounds.map_or((false, false), |b| guard_checks(&b.kind));
            RoleSeries {
                role: r.name.clone(),
                recommended: r.raw,
                constrained: r.constrained,
                current: r.current,
                ready: seen.and_then(|s| s.ready_replicas),
                min: bounds.map(|b| b.min),
                max: bounds.map(|b| b.max),
                signal: seen.and_then(|s| s.signal_state),
                metric: r.load.map(|l| l.metric),
                demand: r.load.map(|l| l.demand),
                capacity: r.load.map(|l| l.capacity),
                forecast: r.forecast.map(|f| f.value),
                ttft_ms: seen.and_then(|s| number(&s.ttft_milliseconds)),
                itl_ms: seen.and_then(|s| number(&s.itl_milliseconds)),
                ttft_target_ms: targets.filter(|_| ttft).map(|t| t.0),
                itl_target_ms: targets.filter(|_| itl).map(|t| t.1),
                lost_since: None,
            }
        })
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScalerLabels {
    namespace: String,
    scaler: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    namespace: String,
    scaler: String,
    role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindReasonLabels {
    namespace: String,
    scaler: String,
    kind: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    namespace: String,
    scaler: String,
    role: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabels {
    namespace: String,
    scaler: String,
    role: String,
    metric: String,
}

/// Every scaler's state, by key.
#[derive(Debug, Default)]
pub struct ScalerSeries(Mutex<BTreeMap<ScalerKey, ScalerState>>);

impl ScalerSeries {
    /// Folds a pass of `key` in.
    pub fn observe(&self, key: &ScalerKey, report: &PassReport, at: f64) {
        self.lock()
            .entry(key.clone())
            .or_default()
            .observe(report, at);
    }

    /// The series of `key` for as long as the returned guard lives (its worker's life).
    pub fn keep(self: &Arc<Self>, key: &ScalerKey) -> KeptSeries {
        self.lock().entry(key.clone()).or_default();
        KeptSeries {
            series: self.clone(),
            key: key.clone(),
        }
    }

    /// Forgets what `key`'s passes left (this replica stopped leading): only the leader
    /// reports a scaler, so two replicas never report one scaler differently.
    pub fn forget(&self, key: &ScalerKey) {
        if let Some(state) = self.lock().get_mut(key) {
            *state = ScalerState::default();
        }
    }

    /// A scaler's state as the next scrape reads it.
    pub fn get(&self, key: &ScalerKey) -> Option<ScalerState> {
        self.lock().get(key).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<ScalerKey, ScalerState>> {
        // Each update completes before the lock is released, except on a panic inside one,
        // which leaves at worst one pass of a scaler's numbers unfolded.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

type RoleRead = fn(&RoleSeries) -> Option<f64>;

/// The per-role gauges: name, help, value.
const ROLE_GAUGES: [(&str, &str, RoleRead); 14] = [
    (
        "role_recommended_replicas",
        "The algorithm's recommendation per role.",
        |r| Some(r.recommended.into()),
    ),
    (
        "role_constrained_replicas",
        "The recommendation after bounds, ratios, pacing and guards.",
        |r| Some(r.constrained.into()),
    ),
    (
        "role_current_replicas",
        "The count on the target per role.",
        |r| Some(r.current.into()),
    ),
    (
        "role_ready_replicas",
        "Ready serving replicas per role.",
        |r| r.ready.map(f64::from),
    ),
    ("role_min_replicas", "The role's minReplicas.", |r| {
        r.min.map(f64::from)
    }),
    ("role_max_replicas", "The role's maxReplicas.", |r| {
        r.max.map(f64::from)
    }),
    (
        "role_demand",
        "The load the algorithm sized the role on (unit in mds_role_load_info).",
        |r| r.demand,
    ),
    (
        "role_capacity",
        "What the role's ready replicas serve at their per-replica target, in the demand's unit.",
        |r| r.capacity,
    ),
    (
        "role_forecast_demand",
        "Predictive's forecast of the demand horizonSeconds ahead, in tokens per second.",
        |r| r.forecast,
    ),
    (
        "role_ttft_p95_milliseconds",
        "p95 time to first token across the role's engines.",
        |r| r.ttft_ms,
    ),
    (
        "role_itl_p95_milliseconds",
        "p95 inter-token latency across the role's engines.",
        |r| r.itl_ms,
    ),
    (
        "role_ttft_target_milliseconds",
        "The latency guard's TTFT target (token algorithms).",
        |r| r.ttft_target_ms,
    ),
    (
        "role_itl_target_milliseconds",
        "The latency guard's ITL target (token algorithms).",
        |r| r.itl_target_ms,
    ),
    (
        "role_signals_lost_since_timestamp_seconds",
        "Since when the role's signals have been Missing or Stale (unix seconds); absent while usable.",
        |r| r.lost_since,
    ),
];

impl Collector for ScalerSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let scalers = self.lock();
        let scaler_labels = |key: &ScalerKey| ScalerLabels {
            namespace: key.namespace.clone(),
            scaler: key.name.clone(),
        };
        let role_labels = |key: &ScalerKey, role: &str| RoleLabels {
            namespace: key.namespace.clone(),
            scaler: key.name.clone(),
            role: role.to_string(),
        };
        for (name, help, read) in ROLE_GAUGES {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (key, state) in scalers.iter() {
                for role in &state.roles {
                    if let Some(value) = read(role) {
                        ConstGauge::new(value)
                            .encode(metric.encode_family(&role_labels(key, &role.role))?)?;
                    }
                }
            }
        }
        let mut metric = encoder.encode_descriptor(
            "role_signal_state",
            "1 for the role's signal state (Fresh, Idle, Missing, Stale), 0 for the others.",
            None,
            MetricType::Gauge,
        )?;
        for (key, state) in scalers.iter() {
            for role in state.roles.iter().filter(|r| r.signal.is_some()) {
                for (signal, text) in SIGNAL_STATES {
                    let labels = StateLabels {
                        namespace: key.namespace.clone(),
                        scaler: key.name.clone(),
                        role: role.role.clone(),
                        state: text.to_string(),
                    };
                    ConstGauge::new(i64::from(role.signal == Some(signal)))
                        .encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        let mut metric = encoder.encode_descriptor(
            "role_load_info",
            "1, labelled with the unit of mds_role_demand and mds_role_capacity.",
            None,
            MetricType::Gauge,
        )?;
        for (key, state) in scalers.iter() {
            for role in &state.roles {
                if let Some(unit) = role.metric {
                    let labels = UnitLabels {
                        namespace: key.namespace.clone(),
                        scaler: key.name.clone(),
                        role: role.role.clone(),
                        metric: unit.to_string(),
                    };
                    ConstGauge::new(1).encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        encode_scaler_gauges(&mut encoder, &scalers, &scaler_labels)?;
        encode_counters(&mut encoder, &scalers)?;
        Ok(())
    }
}

fn encode_scaler_gauges(
    encoder: &mut DescriptorEncoder,
    scalers: &BTreeMap<ScalerKey, ScalerState>,
    labels: &dyn Fn(&ScalerKey) -> ScalerLabels,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(
        "scaler_last_pass_timestamp_seconds",
        "When the scaler's latest pass reached the planner (unix seconds).",
        None,
        MetricType::Gauge,
    )?;
    for (key, state) in scalers {
        if let Some(at) = state.last_pass {
            ConstGauge::new(at).encode(metric.encode_family(&labels(key))?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_sampling_interval_seconds",
        "The scaler's sampling.intervalSeconds.",
        None,
        MetricType::Gauge,
    )?;
    for (key, state) in scalers {
        if let Some(seconds) = state.interval_seconds {
            ConstGauge::new(seconds).encode(metric.encode_family(&labels(key))?)?;
        }
    }
    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Reason {
        namespace: String,
        scaler: String,
        reason: String,
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_blocked",
        "1 while the Blocked condition is True, 0 while False, labelled with its reason (Ready while False).",
        None,
        MetricType::Gauge,
    )?;
    for (key, state) in scalers {
        if let Some((blocked, reason)) = &state.blocked {
            let l = labels(key);
            let labels = Reason {
                namespace: l.namespace,
                scaler: l.scaler,
                reason: reason.clone(),
            };
            ConstGauge::new(i64::from(*blocked)).encode(metric.encode_family(&labels)?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_scale_down_refused",
        "1 for each role whose retirements the target keeps aborting (scale-down refused, D35).",
        None,
        MetricType::Gauge,
    )?;
    for (key, state) in scalers {
        for role in &state.scale_down_refused {
            let l = labels(key);
            let labels = RoleLabels {
                namespace: l.namespace,
                scaler: l.scaler,
                role: role.clone(),
            };
            ConstGauge::new(1).encode(metric.encode_family(&labels)?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_write_failing",
        "1 while a target write has failed and not landed since (retried with backoff, or refused until something changes), by kind and reason.",
        None,
        MetricType::Gauge,
    )?;
    for (key, state) in scalers {
        if let Some((kind, reason)) = state.failing {
            let l = labels(key);
            let labels = KindReasonLabels {
                namespace: l.namespace,
                scaler: l.scaler,
                kind: kind.to_string(),
                reason: reason.to_string(),
            };
            ConstGauge::new(1).encode(metric.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// Decisions every scaler reports from its first scrape, at zero until they happen: so that
/// `increase()` sees the first rollback or restore (a series born at 1 shows no increase).
const ALWAYS_REPORTED: [(&str, &str); 2] = [
    ("rollback", "ResourceExhausted"),
    ("restore", "ScaleDownAborted"),
];

fn encode_counters(
    encoder: &mut DescriptorEncoder,
    scalers: &BTreeMap<ScalerKey, ScalerState>,
) -> Result<(), std::fmt::Error> {
    let kind_reason = |key: &ScalerKey, kind: &str, reason: &str| KindReasonLabels {
        namespace: key.namespace.clone(),
        scaler: key.name.clone(),
        kind: kind.to_string(),
        reason: reason.to_string(),
    };
    let mut metric = encoder.encode_descriptor(
        "scaler_decisions",
        "Writes of counts that landed (commit, rollback, restore), by the decision's reason.",
        None,
        MetricType::Counter,
    )?;
    for (key, state) in scalers {
        // From the first pass this replica ran for the scaler (a replica that does not lead
        // reports nothing of it).
        let from_zero = if state.last_pass.is_some() {
            &ALWAYS_REPORTED[..]
        } else {
            &[]
        };
        let mut decisions: BTreeMap<(&str, &str), u64> = from_zero
            .iter()
            .map(|&(kind, reason)| ((kind, reason), 0))
            .collect();
        for ((kind, reason), n) in &state.decisions {
            decisions.insert((kind, reason), *n);
        }
        for ((kind, reason), n) in decisions {
            ConstCounter::new(n).encode(metric.encode_family(&kind_reason(key, kind, reason))?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_reversals",
        "Commits that moved a role against the direction of its previous commit.",
        None,
        MetricType::Counter,
    )?;
    for (key, state) in scalers {
        // Every planned role from zero, for the same reason as ALWAYS_REPORTED.
        let mut reversals: BTreeMap<&str, u64> =
            state.roles.iter().map(|r| (r.role.as_str(), 0)).collect();
        for (role, n) in &state.reversals {
            reversals.insert(role, *n);
        }
        for (role, n) in reversals {
            let labels = RoleLabels {
                namespace: key.namespace.clone(),
                scaler: key.name.clone(),
                role: role.to_string(),
            };
            ConstCounter::new(n).encode(metric.encode_family(&labels)?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "scaler_target_write_failures",
        "Target writes of the scaler that did not land, by kind and reason (conflict, refused, unavailable).",
        None,
        MetricType::Counter,
    )?;
    for (key, state) in scalers {
        for ((kind, reason), n) in &state.write_failures {
            ConstCounter::new(*n).encode(metric.encode_family(&kind_reason(key, kind, reason))?)?;
        }
    }
    Ok(())
}

/// Keeps a scaler's series; dropping it (the worker ended, returned or panicked) drops them.
#[derive(Debug)]
pub struct KeptSeries {
    series: Arc<ScalerSeries>,
    key: ScalerKey,
}

impl Drop for KeptSeries {
    fn drop(&mut self) {
        self.series.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use mds_api::status::{DecisionKind, DecisionRecord, RoleStatus, ScaleDownRefusal};
    use mds_planner::algorithms::{Load, TOKENS_PER_SECOND};
    use mds_planner::{Reason, RolePlan};

    use crate::telemetry::Telemetry;

    fn key(name: &str) -> ScalerKey {
        ScalerKey {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn role_plan(name: &str, current: i32, constrained: i32) -> RolePlan {
        RolePlan {
            name: name.into(),
            current,
            raw: constrained + 1,
            constrained,
            reason: Reason::TokenThroughput,
            algorithm_reason: Reason::TokenThroughput,
            note: String::new(),
            forecast: None,
            load: Some(Load {
                metric: TOKENS_PER_SECOND,
                demand: 2400.0,
                capacity: 2000.0,
            }),
            limits: vec![],
            shrink_guards: vec![],
        }
    }

    /// A pass that committed `role` from `before` to `after`.
    fn commit(role: &str, before: i32, after: i32) -> PassReport {
        let decision = DecisionRecord {
            time: Time(jiff::Timestamp::UNIX_EPOCH),
            decision_id: Some("d".into()),
            kind: DecisionKind::Commit,
            reason: "TokenThroughput".into(),
            before: [(role.to_string(), before)].into(),
            after: [(role.to_string(), after)].into(),
            roles: vec![],
        };
        let status = ModelDeploymentScalerStatus {
            decisions: vec![decision],
            roles: vec![RoleStatus {
                name: role.into(),
                ready_replicas: Some(before),
                signal_state: Some(SignalState::Stale),
                ttft_milliseconds: Some("412.5".into()),
                ..RoleStatus::default()
            }],
            conditions: vec![Condition {
                type_: "Blocked".into(),
                status: "True".into(),
                reason: "PacingBounded".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            }],
            scale_down_refusals: vec![ScaleDownRefusal {
                name: role.into(),
                aborts: 2,
                ..ScaleDownRefusal::default()
            }],
            ..ModelDeploymentScalerStatus::default()
        };
        PassReport {
            write: Some((WriteKind::Commit, Ok(()))),
            outcome: Some(mds_core::Outcome {
                write: None,
                status,
                write_status: true,
                events: vec![],
                plan: Some(Plan {
                    roles: vec![role_plan(role, before, after)],
                    conflict: None,
                    wake_at: None,
                }),
                policy: None,
                holds_refused_commit: false,
                wake_at: None,
            }),
            ..PassReport::default()
        }
    }

    #[test]
    fn a_pass_leaves_the_series_the_alerts_and_the_dashboard_read() {
        let t = Telemetry::new();
        let _kept = t.scalers_series.keep(&key("llm"));
        t.scalers_series
            .observe(&key("llm"), &commit("decode", 2, 3), 1000.0);
        let text = t.encode();
        for line in [
            r#"mds_role_current_replicas{namespace="ns",scaler="llm",role="decode"} 2"#,
            r#"mds_role_constrained_replicas{namespace="ns",scaler="llm",role="decode"} 3"#,
            r#"mds_role_ready_replicas{namespace="ns",scaler="llm",role="decode"} 2"#,
            r#"mds_role_demand{namespace="ns",scaler="llm",role="decode"} 2400.0"#,
            r#"mds_role_capacity{namespace="ns",scaler="llm",role="decode"} 2000.0"#,
            r#"mds_role_load_info{namespace="ns",scaler="llm",role="decode",metric="TokensPerSecond"} 1"#,
            r#"mds_role_ttft_p95_milliseconds{namespace="ns",scaler="llm",role="decode"} 412.5"#,
            r#"mds_role_signal_state{namespace="ns",scaler="llm",role="decode",state="Stale"} 1"#,
            r#"mds_role_signal_state{namespace="ns",scaler="llm",role="decode",state="Fresh"} 0"#,
            r#"mds_scaler_last_pass_timestamp_seconds{namespace="ns",scaler="llm"} 1000.0"#,
            r#"mds_scaler_blocked{namespace="ns",scaler="llm",reason="PacingBounded"} 1"#,
            r#"mds_scaler_scale_down_refused{namespace="ns",scaler="llm",role="decode"} 1"#,
            r#"mds_scaler_decisions_total{namespace="ns",scaler="llm",kind="commit",reason="TokenThroughput"} 1"#,
            r#"mds_scaler_decisions_total{namespace="ns",scaler="llm",kind="rollback",reason="ResourceExhausted"} 0"#,
            r#"mds_scaler_reversals_total{namespace="ns",scaler="llm",role="decode"} 0"#,
            r#"mds_role_signals_lost_since_timestamp_seconds{namespace="ns",scaler="llm",role="decode"} 1000.0"#,
            "# TYPE mds_scaler_decisions counter",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Unknown numbers are no series (no mds_role_min_replicas without a policy).
        assert!(!text.contains("mds_role_min_replicas{"), "{text}");
    }

    #[test]
    fn reversals_count_each_turn_of_a_roles_direction() {
        let series = Arc::new(ScalerSeries::default());
        let _kept = series.keep(&key("llm"));
        for (before, after) in [(2, 3), (3, 4), (4, 3), (3, 4), (4, 5)] {
            series.observe(&key("llm"), &commit("decode", before, after), 1.0);
        }
        let state = series.get(&key("llm")).unwrap();
        assert_eq!(state.reversals["decode"], 2, "up, up, down (1), up (2), up");
        // A rollback is no turn, and the commit after it starts afresh.
        let rollback = PassReport {
            write: Some((WriteKind::Rollback, Ok(()))),
            ..commit("decode", 5, 4)
        };
        series.observe(&key("llm"), &rollback, 1.0);
        series.observe(&key("llm"), &commit("decode", 4, 5), 1.0);
        let state = series.get(&key("llm")).unwrap();
        assert_eq!(state.reversals["decode"], 2);
        // Stale since the first pass: the time stays the first pass's.
        assert_eq!(state.roles[0].lost_since, Some(1.0));
        assert_eq!(state.decisions[&("commit", "TokenThroughput".into())], 6);
    }

    #[test]
    fn failed_writes_count_by_kind_and_reason_and_series_go_with_their_worker() {
        let t = Telemetry::new();
        let kept = t.scalers_series.keep(&key("llm"));
        let other = t.scalers_series.keep(&key("other"));
        let failed = PassReport {
            write: Some((
                WriteKind::Commit,
                Err(crate::ports::WriteError::Unavailable("503".into())),
            )),
            ..PassReport::default()
        };
        t.scalers_series.observe(&key("llm"), &failed, 1.0);
        t.scalers_series
            .observe(&key("other"), &commit("server", 1, 2), 1.0);
        let text = t.encode();
        let line = r#"mds_scaler_target_write_failures_total{namespace="ns",scaler="llm",kind="commit",reason="unavailable"} 1"#;
        assert!(text.contains(line), "{text}");
        assert!(
            !text
                .contains(r#"mds_scaler_last_pass_timestamp_seconds{namespace="ns",scaler="llm"}"#),
            "a pass that never reached the planner is no pass: {text}"
        );
        drop(kept);
        let text = t.encode();
        assert!(!text.contains(r#"scaler="llm""#), "{text}");
        assert!(text.contains(r#"scaler="other""#), "{text}");
        drop(other);
        assert!(!t.encode().contains("scaler="), "no scaler series left");
    }
}
