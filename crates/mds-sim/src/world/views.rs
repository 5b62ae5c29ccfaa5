//! Read views of the world, shaped so a mirror can turn them into Kubernetes objects and a
//! simulator can feed them to the operator's ports: Pods (TARGET.md section 4 labels and
//! annotations), Kueue Workloads with their conditions, and instances with their engines.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use mds_api::target::{
    LooseCondition, PodSet, Workload, WorkloadSpec, WorkloadStatus, annotation_keys, labels,
};

use super::deployment::Deployment;
use super::instance::{Instance, Member, Phase, loopback_ip};
use super::{DeploymentKey, WorldConfig};
use crate::engine::EngineState;
use mds_api::target::LoadBalance;

/// The API version the Pods' controller reference names (the CRD's storage version).
pub const MODEL_DEPLOYMENT_API_VERSION: &str = "worker.gpustack.ai/v1alpha1";
/// Kueue pod groups declare their size in this annotation.
pub const POD_GROUP_TOTAL_COUNT: &str = "kueue.x-k8s.io/pod-group-total-count";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    /// Gated by Kueue (no node, no IP).
    Pending,
    Running,
}

/// One Pod as the API server would hold it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    /// Name, namespace, UID, labels, annotations, controller reference, creation and (while
    /// terminating) deletion timestamps.
    pub metadata: ObjectMeta,
    pub deployment: DeploymentKey,
    pub role: String,
    pub ordinal: u32,
    pub member_index: u32,
    pub phase: PodPhase,
    /// Carries Kueue's scheduling gate (waiting for admission).
    pub scheduling_gated: bool,
    /// The `Ready` condition.
    pub ready: bool,
    /// A slot no other Pod of this world ever had; [`loopback_ip`] maps it to `pod_ip`.
    pub ip_slot: u32,
    /// Set once the Pod runs.
    pub pod_ip: Option<String>,
    /// The engine's port (`prometheus.io/port`).
    pub metrics_port: u16,
    /// `restartCount` of the `main` container.
    pub restart_count: u32,
    /// Answers `/metrics` (the leader of a ready instance of a known engine).
    pub serves_metrics: bool,
}

/// Where an instance stands, for reports and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InstanceState {
    /// Pods exist; no Workload yet.
    Composing,
    /// Waiting for quota (also after an eviction).
    Queued,
    /// `spec.active: false`.
    Parked,
    /// Quota held; admission checks pending.
    QuotaReserved,
    /// Admitted; engines loading.
    Starting,
    Ready,
    /// Deleted by a retirement; Pods going.
    Terminating,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InstanceView {
    pub deployment: DeploymentKey,
    pub role: String,
    pub ordinal: u32,
    pub state: InstanceState,
    pub instance_type: String,
    pub gpus: u32,
    /// Receives load (ready, not withdrawn).
    pub routed: bool,
    /// A retirement targets it (any state, aborted included).
    pub retiring: bool,
    /// Evicted and not re-admitted since.
    pub evicted: bool,
    /// Pod group and Workload name.
    pub group_name: String,
    /// The leader's engine while it runs.
    pub engine: Option<EngineState>,
}

pub(crate) fn instance_view(dep: &Deployment, role: &str, i: &Instance) -> InstanceView {
    let w = i.workload.as_ref();
    let state = match i.phase {
        Phase::Composing { .. } => InstanceState::Composing,
        Phase::Gated if w.is_some_and(|w| !w.active) => InstanceState::Parked,
        Phase::Gated if w.is_some_and(|w| w.holds_quota()) => InstanceState::QuotaReserved,
        Phase::Gated => InstanceState::Queued,
        Phase::Starting { .. } => InstanceState::Starting,
        Phase::Ready => InstanceState::Ready,
        Phase::Terminating { .. } => InstanceState::Terminating,
    };
    InstanceView {
        deployment: dep.key.clone(),
        role: role.to_string(),
        ordinal: i.ordinal,
        state,
        instance_type: i.shape.instance_type.clone(),
        gpus: i.shape.gpus,
        routed: i.is_routed(),
        retiring: dep
            .retirement
            .as_ref()
            .is_some_and(|r| r.targets(role, i.ordinal)),
        evicted: w.is_some_and(|w| w.evicted),
        group_name: i.group_name.clone(),
        engine: i.engine.clone(),
    }
}

fn time(t: Timestamp) -> Option<Time> {
    Some(Time(t))
}

pub(crate) fn pod_view(
    dep: &Deployment,
    role: &str,
    i: &Instance,
    m: &Member,
    config: &WorldConfig,
) -> PodView {
    let md = dep.object.metadata.name.clone().unwrap_or_default();
    let running = matches!(
        i.phase,
        Phase::Starting { .. } | Phase::Ready | Phase::Terminating { .. }
    );
    let ready = i.is_ready();
    let mut l = BTreeMap::new();
    l.insert(labels::NAME.to_string(), "model-deployment".to_string());
    l.insert(labels::INSTANCE.to_string(), md.clone());
    l.insert(labels::COMPONENT.to_string(), role.to_string());
    l.insert(labels::POD_ORDINAL.to_string(), i.ordinal.to_string());
    l.insert(labels::MEMBER_INDEX.to_string(), m.index.to_string());
    l.insert(
        labels::ROLE_KIND.to_string(),
        i.shape.kind.as_str().to_ascii_lowercase(),
    );
    if i.is_routed() {
        l.insert(labels::ENDPOINT_ELIGIBLE.to_string(), "true".to_string());
    }
    l.insert(labels::POD_GROUP_NAME.to_string(), i.group_name.clone());
    l.insert(
        labels::QUEUE_NAME.to_string(),
        i.shape.instance_type.clone(),
    );
    let mut a = BTreeMap::new();
    a.insert(POD_GROUP_TOTAL_COUNT.to_string(), i.shape.size.to_string());
    if i.shape.managed && (m.index == 0 || config.annotate_non_leaders) {
        a.insert(annotation_keys::SCRAPE.to_string(), "true".to_string());
        a.insert(
            annotation_keys::SCRAPE_PATH.to_string(),
            "/metrics".to_string(),
        );
        a.insert(
            annotation_keys::SCRAPE_PORT.to_string(),
            i.shape.port.to_string(),
        );
        a.insert(
            annotation_keys::SCRAPE_SCHEME.to_string(),
            "http".to_string(),
        );
    }
    let deletion = match i.phase {
        Phase::Terminating { gone_at } => time(
            gone_at
                .checked_sub(config.pod_termination)
                .unwrap_or(gone_at),
        ),
        _ => None,
    };
    PodView {
        metadata: ObjectMeta {
            name: Some(m.name.clone()),
            namespace: Some(dep.key.namespace.clone()),
            uid: Some(m.uid.clone()),
            labels: Some(l),
            annotations: Some(a),
            owner_references: Some(vec![OwnerReference {
                api_version: MODEL_DEPLOYMENT_API_VERSION.to_string(),
                kind: "ModelDeployment".to_string(),
                name: md,
                uid: dep.uid().to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            creation_timestamp: time(m.created_at),
            deletion_timestamp: deletion,
            ..ObjectMeta::default()
        },
        deployment: dep.key.clone(),
        role: role.to_string(),
        ordinal: i.ordinal,
        member_index: m.index,
        phase: if running {
            PodPhase::Running
        } else {
            PodPhase::Pending
        },
        scheduling_gated: !running,
        ready,
        ip_slot: m.ip_slot,
        pod_ip: running.then(|| loopback_ip(m.ip_slot)),
        metrics_port: i.shape.port,
        restart_count: m.restart_count,
        serves_metrics: serves_metrics(i, m),
    }
}

/// Whether a member answers `/metrics`: the leader of a ready instance of a known engine, or
/// with External load balancing every member, each an engine of its own.
pub(crate) fn serves_metrics(i: &Instance, m: &Member) -> bool {
    i.is_ready()
        && (m.index == 0 || i.shape.load_balance == LoadBalance::External)
        && i.shape.managed
        && i.engine.is_some()
}

/// The instance's Workload, while it exists (not before composition, not after deletion).
pub(crate) fn workload_view(dep: &Deployment, role: &str, i: &Instance) -> Option<Workload> {
    let w = i.workload.as_ref()?;
    if i.is_terminating() {
        return None;
    }
    let condition =
        |kind: &str, status: bool, reason: &str, message: &str, since: Timestamp| LooseCondition {
            condition_type: kind.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            observed_generation: None,
            last_transition_time: time(since),
        };
    let mut conditions = Vec::new();
    conditions.push(match (w.quota_reserved_at, w.active) {
        (Some(at), _) => condition("QuotaReserved", true, "QuotaReserved", "quota reserved", at),
        (None, false) => condition(
            "QuotaReserved",
            false,
            "Deactivated",
            "the set failed to assemble and is parked rather than held",
            w.waiting_since,
        ),
        (None, true) => condition(
            "QuotaReserved",
            false,
            "Pending",
            "insufficient quota",
            w.waiting_since,
        ),
    });
    conditions.push(match w.admitted_at {
        Some(at) => condition("Admitted", true, "Admitted", "admitted", at),
        None => condition(
            "Admitted",
            false,
            "NoReservation",
            "not admitted",
            w.quota_reserved_at.unwrap_or(w.waiting_since),
        ),
    });
    if w.evicted {
        conditions.push(condition(
            "Evicted",
            true,
            "Preempted",
            "preempted",
            w.waiting_since,
        ));
        conditions.push(condition(
            "Preempted",
            true,
            "InClusterQueue",
            "preempted",
            w.waiting_since,
        ));
    }
    Some(Workload {
        metadata: ObjectMeta {
            name: Some(i.group_name.clone()),
            namespace: Some(dep.key.namespace.clone()),
            uid: Some(w.uid.clone()),
            labels: Some(BTreeMap::from([(
                labels::QUEUE_NAME.to_string(),
                i.shape.instance_type.clone(),
            )])),
            owner_references: Some(
                i.members
                    .iter()
                    .map(|m| OwnerReference {
                        api_version: "v1".to_string(),
                        kind: "Pod".to_string(),
                        name: m.name.clone(),
                        uid: m.uid.clone(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            creation_timestamp: time(w.created_at),
            ..ObjectMeta::default()
        },
        spec: WorkloadSpec {
            active: Some(w.active),
            pod_sets: vec![PodSet {
                name: role.to_string(),
                count: Some(i.shape.size as i32),
            }],
            queue_name: Some(i.shape.instance_type.clone()),
        },
        status: Some(WorkloadStatus { conditions }),
    })
}
