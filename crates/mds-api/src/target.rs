//! Read model of the target: the `ModelDeployment` subset the scaler reads and writes, and the
//! Kueue `Workload` subset it reads for admission (TARGET.md). Unknown fields are ignored and
//! unknown role kinds are preserved (D2), so a newer GPUStack operator never breaks parsing.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// Label keys GPUStack puts on every Pod of an instance.
pub mod labels {
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    pub const COMPONENT: &str = "app.kubernetes.io/component";
    pub const POD_ORDINAL: &str = "modeldeployment.gpustack.ai/pod-ordinal";
    pub const MEMBER_INDEX: &str = "modeldeployment.gpustack.ai/member-index";
    pub const POD_GROUP_NAME: &str = "kueue.x-k8s.io/pod-group-name";
    pub const NAME: &str = "app.kubernetes.io/name";
    pub const ROLE_KIND: &str = "modeldeployment.gpustack.ai/role-kind";
    pub const ENDPOINT_ELIGIBLE: &str = "modeldeployment.gpustack.ai/endpoint-eligible";
    pub const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
}

/// Annotation keys on the target and its Pods (TARGET.md sections 4 and 5).
pub mod annotation_keys {
    /// `<role>:<ordinal>:<token>`: retry an `Aborted` retirement.
    pub const RETIREMENT_RETRY: &str = "modeldeployment.gpustack.ai/retirement-retry";
    pub const SCRAPE: &str = "prometheus.io/scrape";
    pub const SCRAPE_PATH: &str = "prometheus.io/path";
    pub const SCRAPE_PORT: &str = "prometheus.io/port";
    pub const SCRAPE_SCHEME: &str = "prometheus.io/scheme";
}

/// A GPUStack ModelDeployment, as far as the scaler cares.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
pub struct ModelDeployment {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ModelDeploymentSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ModelDeploymentStatus>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
pub struct ModelDeploymentSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// Present when a router fronts the roles; retirements need it to complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<Router>,
    #[serde(default)]
    pub roles: Vec<TargetRole>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Engine {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Serving engines the scaler reads metrics from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineKind {
    Vllm,
    Sglang,
}

impl EngineKind {
    /// Matches `spec.engine.name` case-insensitively (D2).
    pub fn from_name(name: &str) -> Result<EngineKind, UnknownEngine> {
        if name.eq_ignore_ascii_case("vllm") {
            Ok(EngineKind::Vllm)
        } else if name.eq_ignore_ascii_case("sglang") {
            Ok(EngineKind::Sglang)
        } else {
            Err(UnknownEngine(name.to_string()))
        }
    }
}

/// `spec.engine.name` names an engine the scaler has no metric mapping for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownEngine(pub String);

impl UnknownEngine {
    /// The engine a name that is not one most likely means (`vllm-openai` → vLLM).
    pub fn meant(&self) -> Option<&'static str> {
        let name = self.0.to_ascii_lowercase();
        if name.contains("vllm") {
            Some("vLLM")
        } else if name.contains("sglang") {
            Some("SGLang")
        } else {
            None
        }
    }
}

impl std::fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "engine {:?} is not one the scaler reads", self.0)?;
        if let Some(meant) = self.meant() {
            write!(f, " (did you mean {meant}?)")?;
        }
        f.write_str(": spec.engine.name names vLLM or SGLang (older revisions: vllm, sglang)")
    }
}

impl std::error::Error for UnknownEngine {}

impl ModelDeployment {
    /// Whether a router fronts the roles: without one GPUStack never confirms a retirement,
    /// so no role can shrink (TARGET.md section 5).
    pub fn has_router(&self) -> bool {
        self.spec
            .router
            .as_ref()
            .is_some_and(|r| !r.name.is_empty())
    }

    /// The engine whose metric mapping applies, from `spec.engine.name` (D2).
    pub fn engine_kind(&self) -> Result<EngineKind, UnknownEngine> {
        match &self.spec.engine {
            Some(engine) if !engine.name.is_empty() => EngineKind::from_name(&engine.name),
            _ => Err(UnknownEngine(String::new())),
        }
    }

    /// How role `role`'s members serve, as GPUStack's status reports it.
    pub fn load_balance(&self, role: &str) -> LoadBalance {
        let reported = self
            .status
            .as_ref()
            .and_then(|s| s.roles.iter().find(|r| r.name == role))
            .and_then(|r| r.parallelism.as_ref())
            .and_then(|p| p.load_balance.as_deref());
        LoadBalance::parse(reported)
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Router {
    #[serde(default)]
    pub name: String,
}

/// One role of the target.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TargetRole {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RoleKind>,
    /// Instances; the one field the scaler writes. Defaults to 1 on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods per instance; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// A take-over argv: the role's serving signals are unmanaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Elastic expert parallelism: width, not replicas, scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_ep: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// Arguments appended to the engine's command line (where parallelism flags live; the
    /// scaler reads parallelism from the status, the simulator from here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
}

impl TargetRole {
    /// The role kind; an absent kind is Server (D2).
    pub fn kind(&self) -> RoleKind {
        self.kind.clone().unwrap_or(RoleKind::Server)
    }

    /// A stable fingerprint of how the role is served: every field but its count, and the
    /// router in front of it. Equal fingerprints mean nothing that decides a retirement's
    /// outcome changed (D35).
    pub fn serving_fingerprint(&self, router: Option<&Router>) -> String {
        let role = TargetRole {
            replicas: None,
            ..self.clone()
        };
        // Serializing our own structs cannot fail; a failure would only weaken the
        // fingerprint to the router's.
        let text = serde_json::to_string(&(role, router)).unwrap_or_default();
        format!("{:016x}", fnv1a(text.as_bytes()))
    }

    /// The desired instance count, with the server-side default of 1.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// Pods per instance, with the server-side default of 1.
    pub fn size(&self) -> i32 {
        self.size.unwrap_or(1)
    }

    /// Whether the role runs a custom command (an empty list counts as none).
    pub fn has_command(&self) -> bool {
        self.command.as_ref().is_some_and(|c| !c.is_empty())
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Port {
    pub port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// A role kind: an open set (D2). Unknown values are preserved and reported, never guessed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleKind {
    Server,
    Prefill,
    Decode,
    Encode,
    Unknown(String),
}

impl RoleKind {
    pub fn parse(text: &str) -> RoleKind {
        match text {
            "Server" => RoleKind::Server,
            "Prefill" => RoleKind::Prefill,
            "Decode" => RoleKind::Decode,
            "Encode" => RoleKind::Encode,
            // An empty kind is an absent one (D2).
            "" => RoleKind::Server,
            other => RoleKind::Unknown(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            RoleKind::Server => "Server",
            RoleKind::Prefill => "Prefill",
            RoleKind::Decode => "Decode",
            RoleKind::Encode => "Encode",
            RoleKind::Unknown(other) => other,
        }
    }
}

impl fmt::Display for RoleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RoleKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RoleKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(RoleKind::parse(&text))
    }
}

/// Status the GPUStack operator rebuilds from observation.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ModelDeploymentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<TargetRoleStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<LooseCondition>,
    /// Present only while a removal operation exists, in any state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retirement: Option<Retirement>,
    /// e.g. `1R2S`, `1R3P4D` (kubectl column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_summary: Option<String>,
}

/// Per-role counts; a missing count means "not observed", never zero.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TargetRoleStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RoleKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_reserved: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmanaged: Option<bool>,
    /// How the instance's members share the serving work (`loadBalance`; the other fields
    /// GPUStack reports here are not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<RoleParallelism>,
}

/// `status.roles[].parallelism`, as far as the scaler reads it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RoleParallelism {
    /// `Internal`, `External`, `Hybrid`, `MultiPort` or `Unknown`; kept as written, so a value
    /// of a newer operator never makes the target unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balance: Option<String>,
}

/// Which members of an instance serve the API and `/metrics` (TARGET.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadBalance {
    /// Leader-served parallelism (tensor or pipeline across Pods): member 0 alone serves.
    Internal,
    /// Data parallelism with one endpoint per member: every member serves its own engine.
    External,
    /// `Hybrid`, `MultiPort`, `Unknown`, another value, or not reported.
    Other,
}

impl LoadBalance {
    pub fn parse(text: Option<&str>) -> LoadBalance {
        match text {
            Some("Internal") => LoadBalance::Internal,
            Some("External") => LoadBalance::External,
            _ => LoadBalance::Other,
        }
    }
}

/// A condition whose optional fields may be absent (GPUStack and Kueue both omit some).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct LooseCondition {
    #[serde(rename = "type")]
    pub condition_type: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The removal operation of one ordinal (TARGET.md section 5).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Retirement {
    #[serde(default)]
    pub role_name: String,
    #[serde(default)]
    pub replica_ordinal: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(
        rename = "targetWorkloadUID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub target_workload_uid: Option<String>,
    /// Last step passed: Admitted, Disqualified, Withdrawing, Draining, Deleting, Settling,
    /// Completed or Aborted.
    #[serde(default)]
    pub state: String,
    #[serde(
        rename = "targetMemberUIDs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub target_member_uids: Vec<String>,
    /// Free text, not machine-stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_consumed_retry_token: Option<String>,
}

impl Retirement {
    pub fn is_aborted(&self) -> bool {
        self.state == "Aborted"
    }
}

/// A Kueue `Workload` (kueue.x-k8s.io/v1beta2), as far as admission tracking needs (D4).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
pub struct Workload {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WorkloadSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkloadStatus>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// false: parked (deactivated); counts as refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_sets: Vec<PodSet>,
    /// The LocalQueue the Workload is submitted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct PodSet {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct WorkloadStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<LooseCondition>,
}

/// How an added ordinal's Workload stands with Kueue (TARGET.md section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadAdmission {
    /// `Admitted=True`.
    Admitted,
    /// Quota held or not yet composed: still waiting, not refused.
    Pending,
    /// No quota (or evicted/preempted): the pending timer runs.
    Unadmitted,
    /// `spec.active: false`: parked, refused for good.
    Parked,
}

impl Workload {
    fn condition_true(&self, condition_type: &str) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.condition_type == condition_type && c.status == "True")
        })
    }

    /// Classifies this Workload for the pending cohort (D4).
    pub fn admission(&self) -> WorkloadAdmission {
        if self.spec.active == Some(false) {
            WorkloadAdmission::Parked
        } else if self.condition_true("Evicted") || self.condition_true("Preempted") {
            WorkloadAdmission::Unadmitted
        } else if self.condition_true("Admitted") {
            WorkloadAdmission::Admitted
        } else if self.condition_true("QuotaReserved") {
            WorkloadAdmission::Pending
        } else {
            WorkloadAdmission::Unadmitted
        }
    }
}

/// FNV-1a over `bytes`: a stable 64-bit hash, the same on every machine and run.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_target_with_unknown_fields_and_kinds() {
        let md: ModelDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": "llm", "generation": 7, "uid": "u1"},
            "spec": {
                "model": {"name": "acme/x"},
                "engine": {"name": "SGLang"},
                "someFutureField": {"a": 1},
                "roles": [
                    {"name": "prefill", "kind": "Prefill", "replicas": 3, "instanceType": "h200"},
                    {"name": "server"},
                    {"name": "mtp", "kind": "Speculator", "replicas": 2}
                ]
            },
            "status": {"phase": "Ready", "roles": [{"name": "prefill", "desired": 3, "ready": 2}],
                       "retirement": {"roleName": "prefill", "replicaOrdinal": 2, "state": "Aborted"}}
        }))
        .unwrap();
        assert_eq!(md.spec.roles[0].kind(), RoleKind::Prefill);
        assert_eq!(
            md.spec.roles[1].kind(),
            RoleKind::Server,
            "absent kind is Server"
        );
        assert_eq!(md.spec.roles[1].replicas(), 1);
        assert_eq!(
            md.spec.roles[2].kind(),
            RoleKind::Unknown("Speculator".into())
        );
        let round_trip = serde_json::to_value(&md.spec.roles[2]).unwrap();
        assert_eq!(
            round_trip["kind"], "Speculator",
            "unknown kinds are preserved"
        );
        assert!(md.status.unwrap().retirement.unwrap().is_aborted());
    }

    #[test]
    fn engine_names_match_case_insensitively() {
        assert_eq!(EngineKind::from_name("vLLM"), Ok(EngineKind::Vllm));
        assert_eq!(EngineKind::from_name("vllm"), Ok(EngineKind::Vllm));
        assert_eq!(EngineKind::from_name("SGLang"), Ok(EngineKind::Sglang));
        let err = EngineKind::from_name("TensorRT-LLM").unwrap_err();
        assert!(err.to_string().contains("TensorRT-LLM"));
        let mut md = ModelDeployment::default();
        assert!(
            md.engine_kind().is_err(),
            "a target without an engine has no mapping"
        );
        md.spec.engine = Some(Engine {
            name: "SGLang".into(),
            version: None,
        });
        assert_eq!(md.engine_kind(), Ok(EngineKind::Sglang));
    }

    #[test]
    fn classifies_workload_admission() {
        let wl = |active: Option<bool>, conds: &[(&str, &str)]| Workload {
            spec: WorkloadSpec {
                active,
                ..Default::default()
            },
            status: Some(WorkloadStatus {
                conditions: conds
                    .iter()
                    .map(|(t, s)| LooseCondition {
                        condition_type: t.to_string(),
                        status: s.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            }),
            ..Default::default()
        };
        use WorkloadAdmission::*;
        assert_eq!(wl(None, &[("Admitted", "True")]).admission(), Admitted);
        assert_eq!(wl(None, &[("QuotaReserved", "True")]).admission(), Pending);
        assert_eq!(
            wl(None, &[("QuotaReserved", "False")]).admission(),
            Unadmitted
        );
        assert_eq!(wl(Some(false), &[("Admitted", "True")]).admission(), Parked);
        assert_eq!(
            wl(None, &[("Admitted", "True"), ("Evicted", "True")]).admission(),
            Unadmitted
        );
    }
}
