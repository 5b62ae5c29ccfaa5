//! The `ModelDeploymentScaler` resource: spec types as users write them.
//!
//! Doc comments on these types become `kubectl explain` text. Optional fields stay `Option`
//! so that [`crate::defaults::default_spec`] can tell omission from an explicit value (D25).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::Quantity;
use crate::status::ModelDeploymentScalerStatus;

/// API group of the scaler and of its target.
pub const GROUP: &str = "worker.gpustack.ai";
/// Served version of the scaler.
pub const VERSION: &str = "v1";

/// ModelDeploymentScaler plans the replica counts of one GPUStack ModelDeployment from vLLM
/// and SGLang engine metrics. In Shadow mode it only reports its recommendations in status;
/// in Active mode it binds the target and writes spec.roles[].replicas.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "worker.gpustack.ai",
    version = "v1",
    kind = "ModelDeploymentScaler",
    namespaced,
    doc = "ModelDeploymentScaler plans the replica counts of one GPUStack ModelDeployment from engine metrics.",
    shortname = "mds",
    category = "gpustack",
    status = "ModelDeploymentScalerStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Target", "type": "string", "jsonPath": ".spec.targetRef.name"}"#,
    printcolumn = r#"{"name": "Mode", "type": "string", "jsonPath": ".spec.mode"}"#,
    printcolumn = r#"{"name": "Desired", "type": "string", "description": "Counts on the target by role", "jsonPath": ".status.summary.desired"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "description": "Ready replicas by role", "jsonPath": ".status.summary.ready"}"#,
    printcolumn = r#"{"name": "Last Reason", "type": "string", "description": "The latest decision's reason", "jsonPath": ".status.summary.lastReason"}"#,
    printcolumn = r#"{"name": "Blocked", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Blocked\")].reason"}"#,
    printcolumn = r#"{"name": "Algorithm", "type": "string", "priority": 1, "jsonPath": ".spec.algorithm.type"}"#,
    printcolumn = r#"{"name": "Bound", "type": "string", "priority": 1, "jsonPath": ".status.conditions[?(@.type==\"Bound\")].status"}"#,
    printcolumn = r#"{"name": "Active", "type": "string", "priority": 1, "jsonPath": ".status.conditions[?(@.type==\"Active\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModelDeploymentScalerSpec {
    /// The ModelDeployment in this namespace whose replica counts this scaler plans.
    /// Immutable: create a new scaler to scale another deployment.
    pub target_ref: TargetRef,

    /// Shadow (default) computes and reports recommendations without owning the target.
    /// Active acquires the binding fence and commits decisions to spec.roles[].replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,

    /// true stops planning and releases a binding this scaler owns. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// Sampling cadence and the admission wait for added replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,

    /// Replica bounds for every role of the target, one entry per role name.
    #[validate(length(min = 1, max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub roles: Vec<RoleBounds>,

    /// Ratio bands and preferences between the counts of two roles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["numeratorRole".into(), "denominatorRole".into()]))]
    pub ratios: Vec<Ratio>,

    /// The planning algorithm and its one matching parameter block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<Algorithm>,

    /// Pacing of scale-up and scale-down: stabilization windows, step limits and guards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Behavior>,

    /// Whether another role may release capacity after a scale-up times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebalance: Option<Rebalance>,
}

/// Reference to the target ModelDeployment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new("self.name == oldSelf.name").message("targetRef.name is immutable; create a new scaler to scale another ModelDeployment"))]
pub struct TargetRef {
    /// Name of a ModelDeployment in the scaler's namespace. The scaler may be created before it.
    #[validate(length(min = 1, max = 253))]
    pub name: String,
}

/// Whether the scaler commits its decisions.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Plan and report only; never owns or writes the target.
    #[default]
    Shadow,
    /// Own the target through the binding fence and commit replica counts.
    Active,
}

/// Sampling cadence.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Sampling {
    /// Seconds between scrapes of a role's engines; 5 to 300, default 15. A shorter interval
    /// reacts sooner and scrapes more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 5, max = 300))]
    pub interval_seconds: Option<i32>,
    /// Seconds an added replica may stay unadmitted before the whole scale-up is rolled back;
    /// 60 to 1200, default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 60, max = 1200))]
    pub pending_timeout_seconds: Option<i32>,
}

/// Replica bounds of one target role.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.minReplicas) || self.minReplicas <= self.maxReplicas").message("minReplicas must not exceed maxReplicas"))]
pub struct RoleBounds {
    /// Role name on the target (spec.roles[].name of the ModelDeployment).
    #[validate(length(min = 1, max = 63))]
    pub name: String,
    /// Lowest replica count the scaler plans; 1 to 1024, default 1. The scaler never scales
    /// to zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1, max = 1024))]
    pub min_replicas: Option<i32>,
    /// Highest replica count the scaler plans; 1 to 1024 and at least minReplicas.
    #[validate(range(min = 1, max = 1024))]
    pub max_replicas: i32,
}

/// A band and preference for numeratorRole count / denominatorRole count.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.numeratorRole != self.denominatorRole").message("numeratorRole and denominatorRole must name two different roles"),
    validation = Rule::new("!has(self.min) || !has(self.max) || !isQuantity(string(self.min)) || !isQuantity(string(self.max)) || quantity(string(self.min)).compareTo(quantity(string(self.max))) <= 0").message("min must not exceed max"),
)]
pub struct Ratio {
    /// Role whose count is the numerator.
    #[validate(length(min = 1, max = 63))]
    pub numerator_role: String,
    /// Role whose count is the denominator.
    #[validate(length(min = 1, max = 63))]
    pub denominator_role: String,
    /// Preferred ratio, used to break ties between feasible vectors; within min and max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Quantity>,
    /// Lowest allowed ratio (positive quantity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
    /// Highest allowed ratio (positive quantity, at least min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
}

/// The planning algorithm. Only the block matching type is accepted; without type, a
/// proportional block selects Proportional, a predictive block selects Predictive, and
/// anything else selects TokenThroughput.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(has(self.proportional) ? 1 : 0) + (has(self.tokenThroughput) ? 1 : 0) + (has(self.predictive) ? 1 : 0) <= 1").message("set at most one of proportional, tokenThroughput and predictive"),
    validation = Rule::new("!has(self.type) || (self.type == 'Proportional' ? !has(self.tokenThroughput) && !has(self.predictive) : self.type == 'Predictive' ? !has(self.proportional) && !has(self.tokenThroughput) : !has(self.proportional) && !has(self.predictive))").message("only the parameter block matching algorithm.type is accepted"),
    validation = Rule::new("!has(self.type) || self.type != 'Proportional' || has(self.proportional)").message("type Proportional needs a proportional block with metric and roleTargets"),
)]
pub struct Algorithm {
    /// Proportional, TokenThroughput or Predictive; inferred from the parameter block when
    /// omitted.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub algorithm_type: Option<AlgorithmType>,
    /// Parameters of the Proportional algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proportional: Option<ProportionalParams>,
    /// Parameters of the TokenThroughput algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_throughput: Option<TokenThroughputParams>,
    /// Parameters of the Predictive algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictive: Option<PredictiveParams>,
}

/// The three planning algorithms.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
pub enum AlgorithmType {
    /// One instantaneous metric over a fixed per-replica target with a tolerance deadband.
    Proportional,
    /// Cache-missed prompt and generation token rates over stable and panic windows, with
    /// latency guards.
    TokenThroughput,
    /// A Kalman forecast of token demand, never below the TokenThroughput result.
    Predictive,
}

impl AlgorithmType {
    pub fn as_str(self) -> &'static str {
        match self {
            AlgorithmType::Proportional => "Proportional",
            AlgorithmType::TokenThroughput => "TokenThroughput",
            AlgorithmType::Predictive => "Predictive",
        }
    }
}

/// Parameters of the Proportional algorithm.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProportionalParams {
    /// The measured metric: QueueDepth (running plus waiting requests), RunningRequests,
    /// WaitingRequests, PromptTokensPerSecond, GenerationTokensPerSecond or
    /// TotalTokensPerSecond (prompt plus generation).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub metric: Option<ProportionalMetric>,
    /// Deadband around the target: no change while |load/target - 1| is at most tolerance.
    /// Positive and at most 1; default "0.1".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Quantity>,
    /// Per-role targets: requests per ready replica, or tokens per second per ready replica.
    #[serde(default)]
    #[validate(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub role_targets: Vec<RoleTarget>,
}

/// Metrics the Proportional algorithm can follow.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProportionalMetric {
    QueueDepth,
    RunningRequests,
    WaitingRequests,
    PromptTokensPerSecond,
    GenerationTokensPerSecond,
    TotalTokensPerSecond,
}

impl ProportionalMetric {
    /// The metric's name as the spec writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProportionalMetric::QueueDepth => "QueueDepth",
            ProportionalMetric::RunningRequests => "RunningRequests",
            ProportionalMetric::WaitingRequests => "WaitingRequests",
            ProportionalMetric::PromptTokensPerSecond => "PromptTokensPerSecond",
            ProportionalMetric::GenerationTokensPerSecond => "GenerationTokensPerSecond",
            ProportionalMetric::TotalTokensPerSecond => "TotalTokensPerSecond",
        }
    }
}

/// The per-replica target of one role.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RoleTarget {
    /// A scaled role name.
    #[validate(length(min = 1, max = 63))]
    pub name: String,
    /// Positive target per ready replica (requests, or tokens per second for rate metrics).
    pub target: Quantity,
}

/// Parameters of the TokenThroughput algorithm (also the Predictive fallback).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TokenThroughputParams {
    /// Cache-missed prompt tokens per second one Prefill replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_target_tokens_per_second: Option<Quantity>,
    /// Generation tokens per second one Decode replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_target_tokens_per_second: Option<Quantity>,
    /// Prompt plus generation tokens per second one Server replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_target_tokens_per_second: Option<Quantity>,
    /// Seconds of demand averaged for ordinary decisions; 30 to 600, default 180.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 30, max = 600))]
    pub stable_window_seconds: Option<i32>,
    /// Seconds of demand averaged to detect bursts; 10 to 300, default 60. Keep it shorter
    /// than the stable window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 10, max = 300))]
    pub panic_window_seconds: Option<i32>,
    /// Panic starts when the panic-window rate reaches this multiple of the ready replicas'
    /// capacity; positive, default "2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panic_threshold: Option<Quantity>,
    /// p95 time-to-first-token target in milliseconds (Prefill and Server roles); positive,
    /// default "500".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_target_milliseconds: Option<Quantity>,
    /// p95 inter-token latency target in milliseconds (Decode and Server roles); positive,
    /// default "50".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_target_milliseconds: Option<Quantity>,
}

/// Parameters of the Predictive algorithm.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PredictiveParams {
    /// The TokenThroughput fallback used during warm-up and as the floor of every forecast;
    /// same fields, defaults and rules as algorithm.tokenThroughput.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub token_throughput: Option<TokenThroughputParams>,
    /// Seconds ahead the demand is forecast; 30 to 600, default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 30, max = 600))]
    pub horizon_seconds: Option<i32>,
    /// Forecast cache-missed prompt tokens per second one Prefill replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_token_capacity_per_replica: Option<Quantity>,
    /// Forecast generation tokens per second one Decode replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_token_capacity_per_replica: Option<Quantity>,
    /// Forecast prompt plus generation tokens per second one Server replica serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_token_capacity_per_replica: Option<Quantity>,
    /// Process noise of the demand level; higher adapts faster. Omitted or nonpositive uses "1".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_level: Option<Quantity>,
    /// Process noise of the demand trend. Omitted or nonpositive uses "0.1".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_trend: Option<Quantity>,
    /// Observation noise; higher values trust new samples less. Omitted or nonpositive uses "10".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_noise: Option<Quantity>,
    /// Observations before the forecast is used; 1 to 64, default 6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 1, max = 64))]
    pub min_points: Option<i32>,
}

/// Pacing in both directions.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Behavior {
    /// Limits on growth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScaleUp>,
    /// Limits on shrinkage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScaleDown>,
}

/// Limits on growth.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUp {
    /// Growth waits for recommendation history spanning this many seconds and goes at most to
    /// its lowest recommendation; 0 to 600, default 0 (no wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0, max = 600))]
    pub stabilization_window_seconds: Option<i32>,
    /// Replicas one pass may add (the larger of this and maxStepPercent applies); zero or
    /// omission stores 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0))]
    pub max_step_replicas: Option<i32>,
    /// Percent of the current count one pass may add, rounded up; 0 to 1000, zero or omission
    /// stores 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0, max = 1000))]
    pub max_step_percent: Option<i32>,
    /// Replaces both step bounds with one unit; value zero prevents scale-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_policy: Option<StepPolicy>,
}

/// Limits on shrinkage.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScaleDown {
    /// Shrinkage waits for recommendation history spanning this many seconds and goes at most
    /// to its highest recommendation; 0 to 1800, zero or omission stores 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0, max = 1800))]
    pub stabilization_window_seconds: Option<i32>,
    /// Seconds scale-down stays blocked across the target after an aborted retirement;
    /// 0 to 3600, zero or omission stores 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0, max = 3600))]
    pub cooldown_after_abort_seconds: Option<i32>,
    /// Seconds a Decode role keeps its count after growing; 0 to 3600, zero or omission
    /// stores 120.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(range(min = 0, max = 3600))]
    pub decode_post_scale_up_grace_seconds: Option<i32>,
    /// Replaces the default limit of one replica per role per pass; value zero prevents
    /// scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_policy: Option<StepPolicy>,
}

/// One step unit for a direction.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StepPolicy {
    /// Pods counts serving replicas (even when a replica has several Pods); Percent uses the
    /// current replica count, rounded up.
    #[serde(rename = "type")]
    pub policy_type: StepPolicyType,
    /// Nonnegative step; zero prevents movement in this direction.
    #[validate(range(min = 0))]
    pub value: i32,
}

/// Unit of a step policy.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepPolicyType {
    Pods,
    Percent,
}

/// Donor selection after a scale-up times out.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Rebalance {
    /// Opposing (default): a donor's own recommendation must be to shrink. Priority: a role
    /// may take from roles listed after it. Disabled: no donation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RebalancePolicy>,
    /// Scaled role names, highest priority first; only used by the Priority policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(length(max = 32))]
    #[schemars(inner(length(min = 1, max = 63)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub priority: Vec<String>,
}

/// Opposing (default): a donor's own recommendation must be to shrink. Priority: a role may
/// take from roles listed after it. Disabled: no donation.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RebalancePolicy {
    /// A donor's own recommendation must be to shrink.
    #[default]
    Opposing,
    /// A role may take from the roles listed after it in priority.
    Priority,
    /// No donation is attempted.
    Disabled,
}
