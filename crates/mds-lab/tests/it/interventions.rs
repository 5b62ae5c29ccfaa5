//! Interventions from outside reach the API server as GPUStack and Kueue would show them: an
//! eviction replaces the Pods and marks the Workload, parking deactivates it, a container
//! restart counts, and a Pod deleted with the API is recreated.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use mds_api::target::labels;
use mds_lab::StandInOptions;
use mds_testkit::eventually;

async fn one_ready_pod(lab: &Setup, what: &str) -> Pod {
    eventually(what, WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 1 && pod_ready(&pods[0])).then(|| pods[0].clone())
    })
    .await
    .unwrap()
}

async fn workload_of(lab: &Setup, pod: &Pod) -> serde_json::Value {
    let group = label(pod, labels::POD_GROUP_NAME).unwrap().to_string();
    let workload = workloads(&lab.client, &lab.namespace)
        .get(&group)
        .await
        .unwrap();
    serde_json::to_value(workload).unwrap()
}

#[tokio::test]
async fn interventions_show_on_the_api_server() {
    let options = StandInOptions {
        world: fast_world(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("interventions", options).await else {
        return;
    };
    let ns = lab.namespace.clone();
    lab.create_target("llm", "vLLM", true, &[("server", "Server", 1, 2)])
        .await;
    let pods = eventually("two ready members", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(pods)
    })
    .await
    .unwrap();

    // A container restart: the count grows on the same Pod, which is not ready for a while.
    lab.standin
        .restart_member(&ns, "llm", "server", 0, 0)
        .unwrap();
    let leader = pods[0].metadata.name.clone().unwrap();
    let restarted = eventually("the restart to show", WAIT, || async {
        let pod = Api::<Pod>::namespaced(lab.client.clone(), &ns)
            .get(&leader)
            .await
            .ok()?;
        let statuses = pod.status.as_ref()?.container_statuses.clone()?;
        (statuses[0].restart_count == 1).then_some(pod)
    })
    .await
    .unwrap();
    assert_eq!(restarted.metadata.uid, pods[0].metadata.uid);

    // An eviction while the quota is taken elsewhere: new Pods, gated; the Workload says
    // Evicted and waits.
    eventually("the instance ready again", WAIT, || async {
        let pods = lab.pods("llm").await;
        pods.iter().all(pod_ready).then_some(())
    })
    .await
    .unwrap();
    lab.standin.set_quota("h100", Some(0));
    lab.standin.evict(&ns, "llm", "server", 0).unwrap();
    let old: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let replaced = eventually("gated replacement Pods", WAIT, || async {
        let pods = lab.pods("llm").await;
        let fresh = pods.len() == 2
            && pods
                .iter()
                .all(|p| !old.contains(p.metadata.uid.as_deref().unwrap_or("")))
            && pods.iter().all(gated);
        fresh.then_some(pods)
    })
    .await
    .unwrap();
    lab.standin.settle().await;
    let workload = workload_of(&lab, &replaced[0]).await;
    assert_eq!(condition(&workload, "Evicted"), Some("True"), "{workload}");
    assert_eq!(
        condition(&workload, "Admitted"),
        Some("False"),
        "{workload}"
    );
    let owners: Vec<_> = workload["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["uid"].as_str().unwrap().to_string())
        .collect();
    let new: Vec<String> = replaced
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    assert_eq!(owners, new, "the Workload is owned by the new Pods");
    lab.standin.set_quota("h100", None);
    eventually("the instance admitted and ready again", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(())
    })
    .await
    .unwrap();

    // Parking: spec.active false, gated Pods; activating admits again.
    lab.standin.park(&ns, "llm", "server", 0).unwrap();
    lab.standin.settle().await;
    let pods = lab.pods("llm").await;
    let workload = workload_of(&lab, &pods[0]).await;
    assert_eq!(workload["spec"]["active"], false, "{workload}");
    assert!(pods.iter().all(|p| !pod_ready(p)));
    lab.standin.activate(&ns, "llm", "server", 0).unwrap();
    eventually("the parked instance back", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(())
    })
    .await
    .unwrap();
    lab.assert_no_errors();
}

fn gated(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref().unwrap();
    spec.scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty())
        && spec.node_name.is_none()
}

#[tokio::test]
async fn a_pod_deleted_with_the_api_is_recreated() {
    let options = StandInOptions {
        world: fast_world(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("deleted-pod", options).await else {
        return;
    };
    lab.create_target("llm", "vLLM", true, &[("server", "Server", 1, 1)])
        .await;
    let pod = one_ready_pod(&lab, "a ready Pod").await;
    let name = pod.metadata.name.clone().unwrap();
    Api::<Pod>::namespaced(lab.client.clone(), &lab.namespace)
        .delete(
            &name,
            &kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let again = eventually("a new ready Pod", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 1 && pods[0].metadata.uid != pod.metadata.uid && pod_ready(&pods[0]))
            .then(|| pods[0].clone())
    })
    .await
    .unwrap();
    // At size 1 GPUStack generates the name, so the replacement has a new one.
    assert_ne!(again.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(label(&again, labels::POD_ORDINAL), Some("0"));
    lab.assert_no_errors();
}
