//! What the core needs to know about the target's instances, read from its Pods and Workloads
//! (D4, D5, D6, D13; the GPUStack labels of each instance's Pods).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use mds_api::target::{ModelDeployment, Workload, WorkloadAdmission, labels};
use mds_signals::scrape::PodFacts;

/// The annotations GPUStack puts on serving Pods for scraping.
mod annotations {
    pub const SCRAPE: &str = "prometheus.io/scrape";
    pub const SCHEME: &str = "prometheus.io/scheme";
    pub const PORT: &str = "prometheus.io/port";
    pub const PATH: &str = "prometheus.io/path";
}

/// The engine container of every serving Pod.
const ENGINE_CONTAINER: &str = "main";

/// One Pod's place in the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodPlace {
    pub role: String,
    pub ordinal: i32,
    pub member: i32,
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Role, ordinal and member of a Pod from its labels; `None` for a Pod that carries no
/// ordinal (not an instance member).
pub fn place(pod: &Pod) -> Option<PodPlace> {
    Some(PodPlace {
        role: label(pod, labels::COMPONENT)?.to_string(),
        ordinal: label(pod, labels::POD_ORDINAL)?.parse().ok()?,
        // Older GPUStack revisions set the member index only above size 1: absent is 0.
        member: label(pod, labels::MEMBER_INDEX).map_or(Some(0), |m| m.parse().ok())?,
    })
}

/// The Pod's condition of `kind` while its status is True.
fn true_condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
}

fn condition_true(pod: &Pod, condition: &str) -> bool {
    true_condition(pod, condition).is_some()
}

/// Ready and not on its way out.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && condition_true(pod, "Ready")
}

/// When the Pod last became Ready, while it is (D9 amended: a Pod Ready since inside the
/// window is joining).
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    true_condition(pod, "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// The engine container's restart count, when reported (D8: a restart drops the baseline).
pub fn restart_count(pod: &Pod) -> Option<u32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let main = statuses.iter().find(|c| c.name == ENGINE_CONTAINER)?;
    u32::try_from(main.restart_count).ok()
}

/// The facts the core's `Target` carries besides the deployment itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceFacts {
    pub admission: BTreeMap<(String, i32), WorkloadAdmission>,
    pub ordinals_with_pods: BTreeSet<(String, i32)>,
    /// Pod names per instance, sorted.
    pub pod_names: BTreeMap<(String, i32), Vec<String>>,
    pub ready_ordinals: BTreeSet<(String, i32)>,
    /// Instances whose Workload exists; `None` without the Workload API.
    pub workloads: Option<BTreeSet<(String, i32)>>,
}

/// The Pods of each instance, by (role, ordinal), with their member indexes.
type Members<'a> = BTreeMap<(String, i32), Vec<(&'a Pod, i32)>>;

fn members(pods: &[Arc<Pod>]) -> Members<'_> {
    let mut members = Members::new();
    for pod in pods {
        if let Some(p) = place(pod) {
            members
                .entry((p.role, p.ordinal))
                .or_default()
                .push((pod.as_ref(), p.member));
        }
    }
    members
}

/// Pods per instance of `role` (1 for a role the target lacks).
fn role_size(md: &ModelDeployment, role: &str) -> i32 {
    md.spec
        .roles
        .iter()
        .find(|r| r.name == role)
        .map_or(1, |r| r.size())
}

/// An instance is ready when every one of its `size` members is (GPUStack's `ready` count).
fn instance_ready(group: &[(&Pod, i32)], size: i32) -> bool {
    let ready: BTreeSet<i32> = group
        .iter()
        .filter(|(pod, _)| pod_ready(pod))
        .map(|(_, member)| *member)
        .collect();
    ready.len() as i32 >= size
}

/// Ready serving replicas of `role`: instances whose members are all ready, not ready Pods
/// (a replica of `size: 2` is one replica of capacity).
pub fn ready_instances(md: &ModelDeployment, pods: &[Arc<Pod>], role: &str) -> u32 {
    let size = role_size(md, role);
    members(pods)
        .iter()
        .filter(|((r, _), group)| r == role && instance_ready(group, size))
        .count() as u32
}

/// Reads admission (D4), remaining Pods (D5) and readiness (D13) per instance.
pub fn instance_facts(
    md: &ModelDeployment,
    pods: &[Arc<Pod>],
    workloads: Option<&[Arc<Workload>]>,
) -> InstanceFacts {
    let members = members(pods);
    let workloads_by_name: Option<BTreeMap<&str, &Workload>> = workloads.map(|ws| {
        ws.iter()
            .filter_map(|w| Some((w.metadata.name.as_deref()?, w.as_ref())))
            .collect()
    });
    let mut facts = InstanceFacts {
        workloads: workloads.map(|_| BTreeSet::new()),
        ..InstanceFacts::default()
    };
    for (key, group) in &members {
        facts.ordinals_with_pods.insert(key.clone());
        let mut names: Vec<String> = group
            .iter()
            .filter_map(|(pod, _)| pod.metadata.name.clone())
            .collect();
        names.sort();
        facts.pod_names.insert(key.clone(), names);
        if instance_ready(group, role_size(md, &key.0)) {
            facts.ready_ordinals.insert(key.clone());
        }
        let leaving = group
            .iter()
            .all(|(pod, _)| pod.metadata.deletion_timestamp.is_some());
        let admission = match &workloads_by_name {
            Some(by_name) => {
                let workload = instance_workload(group, by_name);
                if let (Some(_), Some(present)) = (workload, facts.workloads.as_mut()) {
                    present.insert(key.clone());
                }
                workload.map_or(WorkloadAdmission::Pending, |w| w.admission())
            }
            None => scheduled_admission(group),
        };
        // An instance whose every Pod is being deleted is leaving: whether it was admitted
        // says nothing about growth (D18). Its Workload is gone first, so reading it as
        // pending would hold growth until the last Pod went, for ever on a lost node.
        if !leaving {
            facts.admission.insert(key.clone(), admission);
        }
    }
    // The ordinal being retired: its Workload is also named by UID (TARGET.md section 5).
    let retiring = md.status.as_ref().and_then(|s| s.retirement.as_ref());
    if let (Some(r), Some(present), Some(ws)) = (retiring, facts.workloads.as_mut(), workloads) {
        let uid = r.target_workload_uid.as_deref().filter(|u| !u.is_empty());
        if uid.is_some_and(|uid| ws.iter().any(|w| w.metadata.uid.as_deref() == Some(uid))) {
            present.insert((r.role_name.clone(), r.replica_ordinal));
        }
    }
    facts
}

/// D4: the instance's Workload is named by its Pods' pod-group label and owned by one of them;
/// no Workload yet means not composed (pending, not refused).
fn instance_workload<'a>(
    group: &[(&Pod, i32)],
    by_name: &BTreeMap<&str, &'a Workload>,
) -> Option<&'a Workload> {
    let uids: BTreeSet<&str> = group
        .iter()
        .filter_map(|(p, _)| p.metadata.uid.as_deref())
        .collect();
    group
        .iter()
        .filter_map(|(p, _)| label(p, labels::POD_GROUP_NAME))
        .find_map(|name| by_name.get(name).copied())
        .filter(|w| {
            // A Workload of the same name owned by other Pods is not this instance's.
            w.metadata.owner_references.as_ref().is_none_or(|refs| {
                refs.is_empty() || refs.iter().any(|r| uids.contains(r.uid.as_str()))
            })
        })
}

/// D4 without the Workload API: admitted once every Pod of the instance is scheduled.
fn scheduled_admission(group: &[(&Pod, i32)]) -> WorkloadAdmission {
    if group.iter().all(|(p, _)| condition_true(p, "PodScheduled")) {
        WorkloadAdmission::Admitted
    } else {
        WorkloadAdmission::Pending
    }
}

/// The scrape facts of one role's Pods (D6 chooses among them).
pub fn pod_facts(pods: &[Arc<Pod>], role: &str) -> Vec<PodFacts> {
    pods.iter()
        .filter(|p| label(p, labels::COMPONENT) == Some(role))
        .map(|pod| {
            let place = place(pod);
            PodFacts {
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                ordinal: place.as_ref().and_then(|p| u32::try_from(p.ordinal).ok()),
                member_index: place.as_ref().and_then(|p| u32::try_from(p.member).ok()),
                ready: pod_ready(pod),
                pod_ip: pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .filter(|ip| !ip.is_empty()),
                scrape_annotation: annotation(pod, annotations::SCRAPE),
                scheme_annotation: annotation(pod, annotations::SCHEME),
                port_annotation: annotation(pod, annotations::PORT),
                path_annotation: annotation(pod, annotations::PATH),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(role: &str, ordinal: i32, member: Option<i32>, ready: bool, group: &str) -> Arc<Pod> {
        let mut labels = json!({
            "app.kubernetes.io/instance": "llm",
            "app.kubernetes.io/component": role,
            "modeldeployment.gpustack.ai/pod-ordinal": ordinal.to_string(),
            "kueue.x-k8s.io/pod-group-name": group,
        });
        if let Some(m) = member {
            labels["modeldeployment.gpustack.ai/member-index"] = json!(m.to_string());
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{role}-{ordinal}-{member:?}"), "uid": format!("uid-{role}-{ordinal}-{member:?}"), "labels": labels},
                "status": {
                    "podIP": "127.0.0.2",
                    "conditions": [
                        {"type": "Ready", "status": if ready { "True" } else { "False" }},
                        {"type": "PodScheduled", "status": "True"}
                    ],
                    "containerStatuses": [{"name": "main", "restartCount": 2, "ready": ready, "image": "x", "imageID": "y"}]
                }
            }))
            .unwrap(),
        )
    }

    fn workload(name: &str, admitted: bool) -> Arc<Workload> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "status": {"conditions": [{"type": "Admitted", "status": if admitted { "True" } else { "False" }}]}
            }))
            .unwrap(),
        )
    }

    fn md() -> ModelDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": "llm"},
            "spec": {"roles": [
                {"name": "prefill", "replicas": 2, "instanceType": "h"},
                {"name": "decode", "replicas": 1, "size": 2, "instanceType": "h"}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn instances_are_read_from_labels_workloads_and_readiness() {
        let pods = vec![
            pod("prefill", 0, None, true, "g-p0"),
            pod("prefill", 1, None, false, "g-p1"),
            pod("decode", 0, Some(0), true, "g-d0"),
            pod("decode", 0, Some(1), false, "g-d0"),
        ];
        let workloads = vec![workload("g-p0", true), workload("g-d0", false)];
        let facts = instance_facts(&md(), &pods, Some(&workloads));
        let key = |r: &str, o: i32| (r.to_string(), o);
        assert_eq!(
            facts.admission[&key("prefill", 0)],
            WorkloadAdmission::Admitted
        );
        assert_eq!(
            facts.admission[&key("prefill", 1)],
            WorkloadAdmission::Pending,
            "no Workload yet: not composed"
        );
        assert_eq!(
            facts.admission[&key("decode", 0)],
            WorkloadAdmission::Unadmitted
        );
        assert_eq!(
            facts.ready_ordinals,
            [key("prefill", 0)].into(),
            "decode 0 has one of two members ready"
        );
        assert_eq!(facts.ordinals_with_pods.len(), 3);
        assert_eq!(ready_instances(&md(), &pods, "prefill"), 1);
        assert_eq!(
            ready_instances(&md(), &pods, "decode"),
            0,
            "one ready Pod of a two-Pod replica is no ready replica"
        );
        // Without the Workload API, scheduled Pods are admitted.
        let facts = instance_facts(&md(), &pods, None);
        assert_eq!(
            facts.admission[&key("prefill", 1)],
            WorkloadAdmission::Admitted
        );
    }

    #[test]
    fn an_instance_is_there_while_its_workload_is() {
        // prefill 1 left a Pod behind (Terminating) after its Workload was deleted; decode 1,
        // being retired, has no Pod left but its Workload is named by the retirement's UID.
        let pods = vec![
            pod("prefill", 0, None, true, "g-p0"),
            pod("prefill", 1, None, false, "g-p1"),
        ];
        let mut retired = (*workload("g-d1", true)).clone();
        retired.metadata.uid = Some("w-d1".into());
        let workloads = vec![workload("g-p0", true), Arc::new(retired)];
        let mut md = md();
        md.status = Some(
            serde_json::from_value(json!({"retirement": {
                "roleName": "decode", "replicaOrdinal": 1, "state": "Deleting",
                "targetWorkloadUID": "w-d1"}}))
            .unwrap(),
        );
        let facts = instance_facts(&md, &pods, Some(&workloads));
        let key = |r: &str, o: i32| (r.to_string(), o);
        assert_eq!(
            facts.workloads,
            Some([key("prefill", 0), key("decode", 1)].into())
        );
        assert!(facts.ordinals_with_pods.contains(&key("prefill", 1)));
        assert_eq!(
            instance_facts(&md, &pods, None).workloads,
            None,
            "without the Workload API nothing is known about Workloads"
        );
    }

    #[test]
    fn a_leaving_instance_has_no_admission_to_hold_growth() {
        // prefill 1's Workload is gone and its Pod is Terminating (stuck, say, on a lost
        // node): it is still there for D5, but not an unadmitted instance for D18.
        let mut terminating = (*pod("prefill", 1, None, false, "g-p1")).clone();
        terminating.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        let pods = vec![pod("prefill", 0, None, true, "g-p0"), Arc::new(terminating)];
        let workloads = vec![workload("g-p0", true)];
        for served in [Some(workloads.as_slice()), None] {
            let facts = instance_facts(&md(), &pods, served);
            let key = |r: &str, o: i32| (r.to_string(), o);
            assert!(facts.ordinals_with_pods.contains(&key("prefill", 1)));
            assert_eq!(
                facts.admission.keys().collect::<Vec<_>>(),
                [&key("prefill", 0)],
                "only the instance that stays has an admission"
            );
        }
        // One member still running keeps the instance's admission.
        let mut one_left = pods.clone();
        one_left.push(pod("prefill", 1, Some(1), false, "g-p1"));
        let facts = instance_facts(&md(), &one_left, Some(&workloads));
        assert_eq!(
            facts.admission[&("prefill".to_string(), 1)],
            WorkloadAdmission::Pending
        );
    }

    #[test]
    fn scrape_facts_carry_ordinals_members_and_annotations() {
        let pods = vec![pod("decode", 3, Some(1), true, "g")];
        let facts = pod_facts(&pods, "decode");
        assert_eq!(facts.len(), 1);
        assert_eq!(
            (facts[0].ordinal, facts[0].member_index),
            (Some(3), Some(1))
        );
        assert!(facts[0].ready);
        assert_eq!(facts[0].pod_ip.as_deref(), Some("127.0.0.2"));
        assert_eq!(restart_count(&pods[0]), Some(2));
        assert!(pod_facts(&pods, "prefill").is_empty());
    }
}
