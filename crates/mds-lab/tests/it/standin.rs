//! The stand-in on the shared control plane: Pods, Workloads and ModelDeployment status as the
//! world says, quota holding an instance back, and retirements with and without a router.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use mds_api::target::labels;
use mds_lab::StandInOptions;
use mds_testkit::eventually;
use serde_json::Value;

#[tokio::test]
async fn a_two_role_target_gets_pods_workloads_and_status() {
    let options = StandInOptions {
        world: fast_world(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("two-roles", options).await else {
        return;
    };
    lab.create_target(
        "llm",
        "vLLM",
        true,
        &[("prefill", "Prefill", 1, 1), ("decode", "Decode", 1, 2)],
    )
    .await;
    let pods = eventually("three ready Pods", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 3 && pods.iter().all(pod_ready)).then_some(pods)
    })
    .await
    .unwrap();
    let md = lab.target("llm").await.unwrap();
    let md_uid = md.metadata.uid.clone().unwrap();

    let mut addresses = BTreeSet::new();
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap();
        let role = label(pod, labels::COMPONENT).unwrap();
        let member = label(pod, labels::MEMBER_INDEX).unwrap();
        assert_eq!(label(pod, labels::NAME), Some("model-deployment"), "{name}");
        assert_eq!(label(pod, labels::INSTANCE), Some("llm"), "{name}");
        assert_eq!(label(pod, labels::POD_ORDINAL), Some("0"), "{name}");
        assert_eq!(label(pod, labels::QUEUE_NAME), Some("h100"), "{name}");
        assert_eq!(
            label(pod, labels::ENDPOINT_ELIGIBLE),
            Some("true"),
            "{name}"
        );
        let kind = if role == "prefill" {
            "prefill"
        } else {
            "decode"
        };
        assert_eq!(label(pod, labels::ROLE_KIND), Some(kind), "{name}");
        assert!(
            label(pod, labels::POD_GROUP_NAME).is_some_and(|g| g.starts_with("gpustack-fnv64-")),
            "{name}"
        );
        // Only the leader of an instance is scraped.
        let scraped = member == "0";
        assert_eq!(
            annotation(pod, "prometheus.io/scrape").is_some(),
            scraped,
            "{name}"
        );
        if scraped {
            assert_eq!(annotation(pod, "prometheus.io/port"), Some("8000"));
            assert_eq!(annotation(pod, "prometheus.io/path"), Some("/metrics"));
            assert_eq!(annotation(pod, "prometheus.io/scheme"), Some("http"));
        }
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ModelDeployment", md_uid.as_str())
        );
        assert_eq!(owner.controller, Some(true));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some("mds-lab-node"),
            "{name} is bound"
        );
        assert!(
            spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty),
            "{name}"
        );
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let ip = status.pod_ip.clone().unwrap();
        assert!(ip.starts_with("127.") && ip != "127.0.0.1", "{name}: {ip}");
        addresses.insert(ip);
        let main = &status.container_statuses.as_ref().unwrap()[0];
        assert_eq!((main.name.as_str(), main.restart_count), ("main", 0));
    }
    assert_eq!(addresses.len(), 3, "every Pod has an address of its own");
    // The decode instance's members are named by ordinal and member.
    let names: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert!(
        names.contains(&"llm-decode-r0-m0") && names.contains(&"llm-decode-r0-m1"),
        "{names:?}"
    );

    // One Workload per instance, admitted, owned by its Pods (with the server's UIDs).
    let pod_uids: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    let workloads = lab.workloads().await;
    assert_eq!(workloads.len(), 2);
    for workload in &workloads {
        let data = serde_json::to_value(workload).unwrap();
        assert_eq!(condition(&data, "QuotaReserved"), Some("True"), "{data}");
        assert_eq!(condition(&data, "Admitted"), Some("True"), "{data}");
        assert_eq!(data["spec"]["active"], true);
        assert_eq!(data["spec"]["queueName"], "h100");
        assert_eq!(
            data["status"]["admission"]["clusterQueue"], "h100",
            "{data}"
        );
        for owner in workload.metadata.owner_references.as_ref().unwrap() {
            assert!(
                pod_uids.contains(&owner.uid),
                "{} owns it but is no Pod",
                owner.uid
            );
        }
    }

    let status = eventually("the target's status to say Ready", WAIT, || async {
        lab.status("llm").await.filter(|s| s["phase"] == "Ready")
    })
    .await
    .unwrap();
    assert_eq!(status["roleSummary"], "1R1P1D");
    for role in status["roles"].as_array().unwrap() {
        assert_eq!(
            (role["desired"].as_i64(), role["ready"].as_i64()),
            (Some(1), Some(1))
        );
        assert_eq!(role["quotaReserved"], 1);
    }
    // The world holds the server's UIDs, so what it reports names real objects.
    let world = lab.standin.world();
    let key = mds_lab::DeploymentKey::new(&lab.namespace, "llm");
    let world_uids: BTreeSet<String> = world
        .pods(&key)
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    assert_eq!(world_uids, pod_uids);
    lab.assert_no_errors();
}

#[tokio::test]
async fn a_third_instance_waits_for_quota_and_is_admitted_when_it_frees() {
    let options = StandInOptions {
        world: fast_world(),
        quotas: [("h100".to_string(), 2)].into(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("quota", options).await else {
        return;
    };
    lab.create_target("first", "vLLM", true, &[("server", "Server", 2, 1)])
        .await;
    eventually("the first target's two instances ready", WAIT, || async {
        let pods = lab.pods("first").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(())
    })
    .await
    .unwrap();
    lab.create_target("second", "vLLM", true, &[("server", "Server", 1, 1)])
        .await;
    let waiting = eventually("the third instance's Workload", WAIT, || async {
        let pods = lab.pods("second").await;
        let group = label(pods.first()?, labels::POD_GROUP_NAME)?.to_string();
        let workload = lab
            .workloads()
            .await
            .into_iter()
            .find(|w| w.metadata.name.as_deref() == Some(&group))?;
        let data = serde_json::to_value(&workload).unwrap();
        condition(&data, "Admitted")
            .is_some()
            .then_some((pods, data))
    })
    .await
    .unwrap();
    let (pods, workload) = waiting;
    assert_eq!(
        condition(&workload, "QuotaReserved"),
        Some("False"),
        "{workload}"
    );
    assert_eq!(
        condition(&workload, "Admitted"),
        Some("False"),
        "{workload}"
    );
    let pod = &pods[0];
    let gates = pod
        .spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .clone()
        .unwrap_or_default();
    assert_eq!(gates.len(), 1, "the Pod carries Kueue's gate");
    assert_eq!(gates[0].name, "kueue.x-k8s.io/admission");
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.pod_ip, None);
    // The status follows the Workload within the same mirror pass.
    lab.standin.settle().await;
    let status = lab.status("second").await.unwrap();
    assert_eq!(status["roles"][0]["quotaReserved"], 0);

    // Deleting the first target frees its two GPUs (its Pods and Workloads go with it).
    model_deployments(&lab.client, &lab.namespace)
        .delete("first", &Default::default())
        .await
        .unwrap();
    let admitted = eventually("the third instance admitted and ready", WAIT, || async {
        let pods = lab.pods("second").await;
        (pods.len() == 1 && pod_ready(&pods[0])).then_some(pods)
    })
    .await
    .unwrap();
    assert_eq!(
        admitted[0].metadata.uid, pod.metadata.uid,
        "the same Pod, ungated"
    );
    assert!(admitted[0].status.as_ref().unwrap().pod_ip.is_some());
    eventually(
        "the first target's Pods and Workloads gone",
        WAIT,
        || async {
            let workloads = lab.workloads().await;
            let admitted = workloads.iter().filter(|w| {
                condition(&serde_json::to_value(w).unwrap(), "Admitted") == Some("True")
            });
            (lab.pods("first").await.is_empty() && workloads.len() == 1 && admitted.count() == 1)
                .then_some(())
        },
    )
    .await
    .unwrap();
    lab.assert_no_errors();
}

/// Retirement states seen in the target's status while waiting for `done`.
async fn watch_retirement(
    lab: &Setup,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Vec<String> {
    let seen = std::cell::RefCell::new(Vec::<String>::new());
    let outcome = eventually(what, WAIT, || async {
        let status = lab.status(name).await?;
        let state = status["retirement"]["state"]
            .as_str()
            .unwrap_or("(none)")
            .to_string();
        let mut seen = seen.borrow_mut();
        if seen.last() != Some(&state) {
            seen.push(state);
        }
        done(&status).then_some(())
    })
    .await;
    let seen = seen.into_inner();
    if let Err(e) = outcome {
        panic!("{e}; states seen: {seen:?}");
    }
    seen
}

#[tokio::test]
async fn lowering_replicas_with_a_router_retires_an_instance_to_completion() {
    let options = StandInOptions {
        world: fast_world(),
        ..StandInOptions::default()
    };
    let Some(lab) = setup("retire-router", options).await else {
        return;
    };
    lab.create_target("llm", "SGLang", true, &[("server", "Server", 2, 1)])
        .await;
    let pods = eventually("two ready Pods", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(pods)
    })
    .await
    .unwrap();
    let retired = pods
        .iter()
        .find(|p| label(p, labels::POD_ORDINAL) == Some("1"))
        .unwrap();
    lab.set_replicas("llm", 0, 1).await;

    let started = eventually("a retirement in the status", WAIT, || async {
        lab.status("llm")
            .await
            .filter(|s| s.get("retirement").is_some())
    })
    .await
    .unwrap();
    let retirement = &started["retirement"];
    assert_eq!(
        (
            retirement["roleName"].as_str(),
            retirement["replicaOrdinal"].as_i64()
        ),
        (Some("server"), Some(1))
    );
    assert_eq!(
        retirement["targetMemberUIDs"][0].as_str(),
        retired.metadata.uid.as_deref(),
        "the retirement names the Pod by the API server's UID"
    );
    let states = watch_retirement(&lab, "llm", "the retirement to finish", |s| {
        s.get("retirement").is_none()
    })
    .await;
    assert!(!states.contains(&"Aborted".to_string()), "{states:?}");
    assert!(
        states.contains(&"Deleting".to_string()) || states.contains(&"Settling".to_string()),
        "{states:?}"
    );
    let left = lab.pods("llm").await;
    assert_eq!(left.len(), 1, "ordinal 1's Pod is gone");
    assert_eq!(label(&left[0], labels::POD_ORDINAL), Some("0"));
    let status = lab.status("llm").await.unwrap();
    assert_eq!(
        (
            status["roles"][0]["desired"].as_i64(),
            status["roles"][0]["ready"].as_i64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(lab.workloads().await.len(), 1);
    lab.assert_no_errors();
}

#[tokio::test]
async fn lowering_replicas_without_a_router_aborts_and_the_abort_stays() {
    let mut world = fast_world();
    world.budgets.withdrawal = jiff::SignedDuration::from_secs(2);
    let options = StandInOptions {
        world,
        ..StandInOptions::default()
    };
    let Some(lab) = setup("retire-no-router", options).await else {
        return;
    };
    lab.create_target("llm", "vLLM", false, &[("server", "Server", 2, 1)])
        .await;
    eventually("two ready Pods", WAIT, || async {
        let pods = lab.pods("llm").await;
        (pods.len() == 2 && pods.iter().all(pod_ready)).then_some(())
    })
    .await
    .unwrap();
    lab.set_replicas("llm", 0, 1).await;
    let states = watch_retirement(&lab, "llm", "the retirement to abort", |s| {
        s["retirement"]["state"] == "Aborted"
    })
    .await;
    assert_eq!(
        states.last().map(String::as_str),
        Some("Aborted"),
        "{states:?}"
    );
    // Let the world run on for a few more seconds: the reservation persists.
    let aborted_at = lab.standin.world().now();
    eventually("the world to run three more seconds", WAIT, || async {
        (lab.standin.world().now() >= aborted_at + jiff::SignedDuration::from_secs(3)).then_some(())
    })
    .await
    .unwrap();
    lab.standin.settle().await;
    let status = lab.status("llm").await.unwrap();
    assert_eq!(status["retirement"]["state"], "Aborted", "{status}");
    assert_eq!(status["retirement"]["replicaOrdinal"], 1);
    let pods = lab.pods("llm").await;
    assert_eq!(pods.len(), 2, "the aborted instance keeps its Pod");
    assert!(pods.iter().all(pod_ready));
    lab.assert_no_errors();
}
