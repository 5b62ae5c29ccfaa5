//! The `ModelDeploymentScaler` status: observations, decisions and recovery state.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::Quantity;

/// A replica count per role name.
pub type ReplicaVector = BTreeMap<String, i32>;

/// Observed state of a ModelDeploymentScaler. Written only when its control plane moves.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ModelDeploymentScalerStatus {
    /// Scaler generation this report was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The target this scaler plans for, and the binding term of its commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<BindingStatus>,
    /// Observation and recommendation per role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub roles: Vec<RoleStatus>,
    /// The latest write to the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_commit: Option<LastCommit>,
    /// A committed scale-up whose added replicas are not all admitted yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_cohort: Option<PendingCohort>,
    /// The donor/receiver transaction after a scale-up timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalance: Option<RebalanceStatus>,
    /// The latest scale-down and how its retirement ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_down: Option<LastScaleDown>,
    /// Roles whose retirements the target keeps aborting, and how long their scale-down
    /// waits (D35).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub scale_down_refusals: Vec<ScaleDownRefusal>,
    /// Demand history (TokenThroughput) and filter state (Predictive) per role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub predictors: Vec<PredictorStatus>,
    /// Bound, Active, MetricsReady and Blocked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The latest decisions, oldest first, at most 10: each write of counts to the target
    /// (Active), or each change of the recommended counts (Shadow).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionRecord>,
    /// One line per column of `kubectl get mds`: the counts and the latest decision's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<StatusSummary>,
}

/// How many decisions `status.decisions` keeps.
pub const DECISION_HISTORY: usize = 10;

/// What a decision did to the target.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionKind {
    /// A planned vector written to the target (a donation's two steps included).
    Commit,
    /// A pending cohort's baseline restored after its admission timed out.
    Rollback,
    /// The pre-scale-down vector restored after an aborted retirement.
    Restore,
    /// A Shadow (or not owning) scaler's recommended counts changed; nothing was written.
    Recommendation,
}

/// One decision: when, what it changed, why, and the numbers that decided it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    pub time: Time,
    /// The decision written to the target with the counts (none for a recommendation).
    #[serde(
        rename = "decisionID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub decision_id: Option<String>,
    pub kind: DecisionKind,
    /// The reason of the first role that changed (the same words as `roles[].reason`, the
    /// events and the operator's metrics), or `ResourceExhausted` for a rollback,
    /// `ScaleDownAborted` for a restore, `DonorRelease` or `ReceiverAcquire` for a donation.
    pub reason: String,
    /// Counts by role before the decision.
    pub before: ReplicaVector,
    /// Counts by role after it.
    pub after: ReplicaVector,
    /// Each role the decision changed, with what the algorithm measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<DecisionRole>,
}

/// One role a decision changed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRole {
    pub name: String,
    /// The role's reason that pass.
    pub reason: String,
    /// What demand and capacity are measured in: a Proportional metric's name or
    /// `TokensPerSecond`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The load the algorithm sized the role on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Quantity>,
    /// What the role's ready replicas serve at their per-replica target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Quantity>,
}

/// The columns of `kubectl get mds`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct StatusSummary {
    /// Counts on the target by role (`4`, or `decode=3,prefill=2` with several roles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// Ready replicas by role, written the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// The latest decision's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
}

/// The target seen by the scaler.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BindingStatus {
    /// UID of the target; a different UID under the same name is a replacement.
    #[serde(rename = "targetUID", default, skip_serializing_if = "Option::is_none")]
    pub target_uid: Option<String>,
    /// Name of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
    /// Term used for Active commits; a Shadow scaler may have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<i64>,
}

/// Whether a role's signals can be used.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum SignalState {
    /// Current readings from every sampled replica.
    Fresh,
    /// Observed successfully, with no requests and zero rates.
    Idle,
    /// No usable reading, or no established rate window yet.
    Missing,
    /// The newest valid reading is older than three sampling intervals.
    Stale,
}

/// Observation and recommendation of one role.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    /// Role name.
    pub name: String,
    /// Desired count currently on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_replicas: Option<i32>,
    /// Ready serving replicas used to calculate capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Fresh, Idle, Missing or Stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_state: Option<SignalState>,
    /// Cache-missed prompt tokens per second across sampled replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_second: Option<Quantity>,
    /// Generation tokens per second across sampled replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_second: Option<Quantity>,
    /// Requests being served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_requests: Option<i64>,
    /// Requests queued (for Decode roles including the KV transfer queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_requests: Option<i64>,
    /// Mean reported KV cache usage fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<Quantity>,
    /// p95 time to first token in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_milliseconds: Option<Quantity>,
    /// p95 inter-token latency in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_milliseconds: Option<Quantity>,
    /// The algorithm's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_recommended_replicas: Option<i32>,
    /// The result after bounds, ratios, pacing and guards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained_replicas: Option<i32>,
    /// Algorithm or constraint explanation, such as TokenThroughput, WithinTolerance or
    /// PacingBounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When this role last grew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_up_time: Option<Time>,
    /// Recent recommendations, at most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stabilization_history: Vec<RecommendationSample>,
}

/// One recommendation in the stabilization history.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationSample {
    pub timestamp: Time,
    pub replicas: i32,
}

/// The latest write to the target.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct LastCommit {
    #[serde(rename = "decisionID")]
    pub decision_id: String,
    pub term: i64,
    /// Committed replica counts by role.
    pub vector: ReplicaVector,
    /// Counts before this commit.
    #[serde(default)]
    pub baseline_vector: ReplicaVector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Time>,
    /// Target generation expected after the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_generation: Option<i64>,
}

/// A committed scale-up awaiting admission of its added replicas.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PendingCohort {
    #[serde(rename = "decisionID")]
    pub decision_id: String,
    pub term: i64,
    /// Restored if admission times out.
    pub baseline_vector: ReplicaVector,
    pub target_vector: ReplicaVector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
}

/// The donor/receiver transaction.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RebalanceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub donor_role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub donor_target_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_target_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// Identifies the exhaustion episode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhaustion_episode_generation: Option<i64>,
    /// Whether this episode already used its donation attempt.
    #[serde(default)]
    pub donation_attempted: bool,
    /// ResourceExhausted, DonorRelease, ReceiverAcquire, DonationAttempted,
    /// RebalanceNotApplicable or RebalanceBlocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub reason: Option<RebalanceReason>,
}

/// Where an exhaustion episode stands: `status.rebalance.reason`.
///
/// A text this version does not know (a status written by hand, or by another version) reads
/// as [`RebalanceReason::Other`] and is written back as it was: the status still reads, no
/// rule acts on the unknown reason, and a status write does not rewrite it. (`#[serde(other)]`
/// would read it too, but as a unit variant that forgets the text.)
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum RebalanceReason {
    /// A scale-up was rolled back: the episode is open and may donate.
    #[serde(rename = "ResourceExhausted")]
    ResourceExhausted,
    /// The donor released a replica; the receiver waits for it to be gone.
    #[serde(rename = "DonorRelease")]
    DonorRelease,
    /// The receiver acquired (or already had) the released replica.
    #[serde(rename = "ReceiverAcquire")]
    ReceiverAcquire,
    /// A transaction ended without the receiver's replica: this exhaustion's donation is
    /// spent.
    #[serde(rename = "DonationAttempted")]
    DonationAttempted,
    /// No role can donate.
    #[serde(rename = "RebalanceNotApplicable")]
    NotApplicable,
    /// A donation would break bounds or ratios in between, was already attempted, or was
    /// given up.
    #[serde(rename = "RebalanceBlocked")]
    Blocked,
    /// A reason this version does not know, kept verbatim.
    #[serde(untagged)]
    Other(String),
}

impl RebalanceReason {
    /// The reason's text in the status.
    pub fn as_str(&self) -> &str {
        match self {
            RebalanceReason::ResourceExhausted => "ResourceExhausted",
            RebalanceReason::DonorRelease => "DonorRelease",
            RebalanceReason::ReceiverAcquire => "ReceiverAcquire",
            RebalanceReason::DonationAttempted => "DonationAttempted",
            RebalanceReason::NotApplicable => "RebalanceNotApplicable",
            RebalanceReason::Blocked => "RebalanceBlocked",
            RebalanceReason::Other(text) => text,
        }
    }
}

/// Outcome of the latest scale-down.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleDownOutcome {
    /// The retirement is running or finished.
    Committed,
    /// The retirement failed and the pre-scale-down vector was restored.
    Aborted,
}

/// The latest scale-down.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LastScaleDown {
    pub role: String,
    /// Zero-based ordinal removed from the role.
    pub ordinal: i32,
    /// Restored after an aborted retirement.
    pub pre_scale_down_vector: ReplicaVector,
    pub outcome: ScaleDownOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_until: Option<Time>,
}

/// Retirements of one role that ended `Aborted` in a row with no change to the role in the
/// target spec between them (D35). From the second, the role's scale-down is refused by the
/// target until `retryAt`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDownRefusal {
    /// The role.
    pub name: String,
    /// Retirements of the role aborted in a row.
    pub aborts: i32,
    /// The target's reason text for the last abort, as it gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_reason: Option<String>,
    /// Fingerprint of the role in the target spec (all but its count, and the router) at the
    /// last abort: a change to it releases the refusal.
    #[serde(default)]
    pub role_spec_hash: String,
    /// Scaler generation at the last abort: a spec change releases the refusal.
    #[serde(default)]
    pub scaler_generation: i64,
    /// While refused, one retry is allowed from this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Time>,
    /// The hold `retryAt` was set with: one hour, doubling with each refused retry to one day.
    #[serde(default)]
    pub hold_seconds: i64,
}

/// Demand history and Kalman state of one role.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PredictorStatus {
    /// Role this state belongs to.
    pub name: String,
    /// Estimated demand in tokens per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Quantity>,
    /// Demand change per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covariance: Option<Covariance>,
    /// Observations processed by the filter.
    #[serde(default)]
    pub sample_count: i64,
    /// Recent demand samples within the active window, at most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<DemandSample>,
}

/// The 2x2 covariance of level and trend.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Covariance {
    pub p00: Quantity,
    pub p01: Quantity,
    pub p10: Quantity,
    pub p11: Quantity,
}

/// One demand sample.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DemandSample {
    pub timestamp: Time,
    pub tokens_per_second: Quantity,
}
