//! The controller against a real kube-apiserver (mds-testkit): watches, the binding write, the
//! status subresource, the finalizer, events, the release on deletion, AlreadyBound, Shadow,
//! suspend, a replaced target, and leader election. The target here has no Pods, so scalers
//! bind, report WaitingForMetrics and plan nothing; scenarios under load are in
//! e2e_scenarios.rs.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::resources::TargetApiVersion;
use mds_testkit::eventually;
use serde_json::json;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_reports_and_releases_on_deletion() {
    let Some((client, ns, targets, scalers)) = setup_llm("controller").await else {
        return;
    };
    let running = start(client.clone(), &ns).await;

    // The controller takes the binding and says so.
    let md = eventually("the binding annotation", WAIT, || async {
        let md = targets.get("llm").await.ok()?;
        md.metadata
            .annotations
            .as_ref()?
            .contains_key(BINDING_ANNOTATION)
            .then_some(md)
    })
    .await
    .unwrap();
    assert_eq!(
        md.spec.roles[0].replicas(),
        2,
        "binding leaves counts alone"
    );
    let s = eventually("Bound and Active", WAIT, || async {
        let s = scalers.get("llm").await.ok()?;
        (condition(&s, "Active") == Some(("True".into(), "Active".into()))).then_some(s)
    })
    .await
    .unwrap();
    assert!(
        s.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|x| x == mds_operator::FINALIZER))
    );
    let s = eventually("MetricsReady reports the missing engines", WAIT, || async {
        let s = scalers.get("llm").await.ok()?;
        condition(&s, "MetricsReady")
            .filter(|c| c.1 == "WaitingForMetrics")
            .map(|_| s)
    })
    .await
    .unwrap();
    assert_eq!(
        s.status.as_ref().unwrap().binding.as_ref().unwrap().term,
        Some(1)
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let bound = eventually("a Bound event with an action", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Bound"))
    })
    .await
    .unwrap();
    assert_eq!(bound.action.as_deref(), Some("Bind"));
    assert_eq!(bound.reporting_controller.as_deref(), Some("mds"));

    // Deleting the scaler releases the binding before the finalizer lets it go.
    scalers
        .delete("llm", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the scaler is gone", WAIT, || async {
        scalers.get_opt("llm").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    let md = targets.get("llm").await.unwrap();
    assert!(
        md.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(BINDING_ANNOTATION)),
        "released: {:?}",
        md.metadata.annotations
    );
    assert!(running.telemetry.encode().contains("mds_passes_total"));
    let _ = running.stop.send(true);
    tokio::time::timeout(WAIT, running.operator.wait())
        .await
        .expect("the controller stops")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_scaler_is_already_bound_and_shadow_writes_nothing() {
    let Some((client, ns, targets, scalers)) = setup("already-bound").await else {
        return;
    };
    create_target(&client, &ns, "llm").await;
    create_scaler(&scalers, "first", "llm").await;
    let running = start(client.clone(), &ns).await;
    wait_condition(&scalers, "first", "Active", "Active").await;
    create_scaler(&scalers, "second", "llm").await;
    let second = wait_condition(&scalers, "second", "Bound", "AlreadyBound").await;
    assert_eq!(
        condition(&second, "Active").map(|c| c.1).as_deref(),
        Some("AlreadyBound")
    );
    let binding = annotations(&targets.get("llm").await.unwrap())[BINDING_ANNOTATION].clone();
    assert!(binding.contains("\"first\""), "{binding}");

    // A Shadow scaler releases its binding and then writes nothing to the target.
    patch_spec(&scalers, "second", json!({"mode": "Shadow"})).await;
    patch_spec(&scalers, "first", json!({"mode": "Shadow"})).await;
    wait_condition(&scalers, "first", "Active", "ShadowMode").await;
    let md = eventually("the release", WAIT, || async {
        let md = targets.get("llm").await.ok()?;
        (!annotations(&md).contains_key(BINDING_ANNOTATION)).then_some(md)
    })
    .await
    .unwrap();
    assert!(!annotations(&md).contains_key(mds_api::annotations::DECISION_ANNOTATION));
    let version = md.metadata.resource_version.clone();
    // Two more intervals: nothing moves on the target.
    let s = scalers.get("first").await.unwrap();
    let generation = s.status.as_ref().and_then(|st| st.observed_generation);
    eventually("two passes of the Shadow scaler", WAIT, || async {
        let passes = running.telemetry.passes.get();
        (passes >= 6).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        targets.get("llm").await.unwrap().metadata.resource_version,
        version
    );
    assert_eq!(
        generation,
        scalers
            .get("first")
            .await
            .unwrap()
            .status
            .unwrap()
            .observed_generation
    );
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_releases_both_annotations_and_a_replaced_target_waits_for_an_edit() {
    let Some((client, ns, targets, scalers)) = setup_llm("suspend").await else {
        return;
    };
    let running = start(client.clone(), &ns).await;
    wait_condition(&scalers, "llm", "Active", "Active").await;
    patch_spec(&scalers, "llm", json!({"suspend": true})).await;
    wait_condition(&scalers, "llm", "Bound", "Suspended").await;
    eventually("both annotations gone", WAIT, || async {
        let a = annotations(&targets.get("llm").await.ok()?);
        (!a.contains_key(BINDING_ANNOTATION)
            && !a.contains_key(mds_api::annotations::DECISION_ANNOTATION))
        .then_some(())
    })
    .await
    .unwrap();
    patch_spec(&scalers, "llm", json!({"suspend": false})).await;
    let s = wait_condition(&scalers, "llm", "Active", "Active").await;
    let term = s.status.unwrap().binding.unwrap().term.unwrap();
    assert!(term >= 2, "a new binding takes a higher term: {term}");

    // The target is deleted and recreated under the same name: the scaler waits for an edit.
    targets
        .delete("llm", &DeleteParams::default())
        .await
        .unwrap();
    wait_condition(&scalers, "llm", "Bound", "TargetNotFound").await;
    create_target(&client, &ns, "llm").await;
    wait_condition(&scalers, "llm", "Bound", "TargetReplaced").await;
    let md = targets.get("llm").await.unwrap();
    assert!(
        !annotations(&md).contains_key(BINDING_ANNOTATION),
        "not bound before the edit"
    );
    patch_spec(
        &scalers,
        "llm",
        json!({"sampling": {"pendingTimeoutSeconds": 120}}),
    )
    .await;
    wait_condition(&scalers, "llm", "Active", "Active").await;
    eventually("the new target is bound", WAIT, || async {
        annotations(&targets.get("llm").await.ok()?)
            .contains_key(BINDING_ANNOTATION)
            .then_some(())
    })
    .await
    .unwrap();
    stop(running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_leader_dies() {
    let Some((client, ns, targets, scalers)) = setup_llm("failover").await else {
        return;
    };
    let a = replica(client.clone(), &ns, "replica-a").await;
    eventually("replica a leads", WAIT, || async {
        a.leads().then_some(())
    })
    .await
    .unwrap();
    let b = replica(client.clone(), &ns, "replica-b").await;
    wait_condition(&scalers, "llm", "Active", "Active").await;
    // The standby keeps its caches warm but runs no pass while a leads.
    eventually("the leader passes", WAIT, || async {
        (a.telemetry.passes.get() >= 2).then_some(())
    })
    .await
    .unwrap();
    assert!(!b.leads());
    assert_eq!(
        b.telemetry.passes.get(),
        0,
        "only the leader plans and writes"
    );

    a.kill();
    let started = std::time::Instant::now();
    eventually("replica b leads", WAIT, || async {
        b.leads().then_some(())
    })
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took over in {:?}",
        started.elapsed()
    );
    // The new leader acts: a suspend is released by it.
    patch_spec(&scalers, "llm", json!({"suspend": true})).await;
    eventually("released by the new leader", WAIT, || async {
        (!annotations(&targets.get("llm").await.ok()?).contains_key(BINDING_ANNOTATION))
            .then_some(())
    })
    .await
    .unwrap();
    // A pass is counted when it ends, after its write: the release can be seen first.
    eventually("the new leader counts its pass", WAIT, || async {
        (b.telemetry.passes.get() > 0).then_some(())
    })
    .await
    .unwrap();
    b.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_hands_the_lease_over() {
    use k8s_openapi::api::coordination::v1::Lease;
    use mds_operator::api_client::ApiClients;
    use mds_operator::leader::LeaseConfig;
    use mds_operator::{Leadership, Operator};
    let Some((client, ns, _targets, _scalers)) = setup("graceful").await else {
        return;
    };
    let lease = LeaseConfig {
        namespace: ns.clone(),
        name: "mds-controller".into(),
        identity: "replica-a".into(),
        duration_seconds: 30,
        grace_seconds: 5,
    };
    let (stop, shutdown) = watch::channel(false);
    let config = config(&ns, "replica-a", Leadership::Lease(lease));
    let operator = Operator::start(ApiClients::shared(client.clone()), config, shutdown)
        .await
        .unwrap();
    let telemetry = operator.telemetry().clone();
    eventually("replica a leads", WAIT, || async {
        (telemetry.leader.get() == 1).then_some(())
    })
    .await
    .unwrap();
    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(20), operator.wait())
        .await
        .expect("shutdown finishes, lease released")
        .unwrap();
    // Released, not left to expire: nobody holds it now, long before its 30 s run out.
    let leases: Api<Lease> = Api::namespaced(client, &ns);
    let held = leases
        .get("mds-controller")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty());
    assert_eq!(held, None);
}

/// What kube-apiserver answers our writes with, and how the production port classifies it:
/// a JSON Patch whose `test` fails and a stale resource version are conflicts (re-planned),
/// a schema or CEL refusal is refused (reported, never read as a conflict), an authorizer's
/// 403 is transient (RBAC may still be on its way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_servers_refusals_are_told_apart_from_conflicts() {
    use mds_core::PatchOp;
    use mds_operator::kube_cluster::{Caches, KubeCluster};
    use mds_operator::{Cluster, WriteError};
    use std::sync::atomic::AtomicBool;
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let ns = plane.namespace("write-classes").await.unwrap();
    let client = plane.client();
    create_target(&client, &ns, "llm").await;
    let cluster = |client: kube::Client| {
        KubeCluster::new(
            client,
            Arc::new(Caches::new(false)),
            TargetApiVersion::V1,
            "e2e".into(),
            Arc::new(AtomicBool::new(true)),
        )
    };
    let admin = cluster(client.clone());
    let replace = |path: &str, value: serde_json::Value| PatchOp::Replace {
        path: path.into(),
        value,
    };
    let failed_test = [
        PatchOp::Test {
            path: "/spec/roles/0/replicas".into(),
            value: json!(7),
        },
        replace("/spec/roles/0/replicas", json!(3)),
    ];
    let e = admin
        .patch_target(&ns, "llm", &failed_test)
        .await
        .unwrap_err();
    assert!(matches!(e, WriteError::Conflict(_)), "{e:?}");
    let schema = [replace("/spec/roles/0/replicas", json!(2000))];
    let e = admin.patch_target(&ns, "llm", &schema).await.unwrap_err();
    assert!(matches!(e, WriteError::Refused(_)), "{e:?}");
    let cel = [replace("/spec/engine/name", json!("SGLang"))];
    let e = admin.patch_target(&ns, "llm", &cel).await.unwrap_err();
    assert!(
        matches!(&e, WriteError::Refused(m) if m.contains("engine.name is immutable")),
        "{e:?}"
    );
    let nobody = cluster(plane.service_account_client(&ns, "nobody"));
    let ops = [replace("/spec/roles/0/replicas", json!(3))];
    let e = nobody.patch_target(&ns, "llm", &ops).await.unwrap_err();
    assert!(
        matches!(&e, WriteError::Unavailable(m) if m.contains("cannot patch")),
        "{e:?}"
    );
    // A status written over a stale resource version.
    let scalers: Api<ModelDeploymentScaler> = Api::namespaced(client.clone(), &ns);
    let created = create_scaler(&scalers, "llm", "llm").await;
    admin.set_finalizer(&created, true).await.unwrap();
    let e = admin
        .write_status(&created, &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(e, WriteError::Conflict(_)), "{e:?}");
}
