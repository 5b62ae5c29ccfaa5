//! One object that does not decode stops nothing else: on a control plane of its own, the
//! ModelDeployment CRD is replaced by one with a looser schema (as a GPUStack revision ahead of
//! us, or a hand-installed CRD, could have), one target is written with a field of a type our
//! model does not expect, beside a healthy one. The healthy scaler binds and plans; the other
//! reports `Blocked` `TargetUnreadable` naming the field, with an event and the
//! `mds_undecodable_objects` gauge, and binds once its target is fixed.

use crate::common;

use common::*;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::BINDING_ANNOTATION;
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_testkit::eventually;
use serde_json::json;

const CRD: &str = "modeldeployments.worker.gpustack.ai";

/// Every version of the target CRD accepts any JSON under it.
async fn loosen_target_schema(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds.get(CRD).await.unwrap();
    for version in &mut crd.spec.versions {
        version.schema = Some(
            serde_json::from_value(json!({"openAPIV3Schema": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true
            }}))
            .unwrap(),
        );
    }
    crds.replace(CRD, &PostParams::default(), &crd)
        .await
        .unwrap();
}

fn bad_target(name: &str) -> serde_json::Value {
    let mut value = target(name);
    value["spec"]["roles"][0]["replicas"] = json!("two");
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_does_not_decode_blocks_its_scaler_only() {
    if mds_testkit::skip_e2e() {
        return;
    }
    let plane = mds_testkit::ControlPlane::start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client();
    let ns = plane.namespace("undecodable").await.unwrap();
    loosen_target_schema(&client).await;
    // The looser schema is in force once a target of the wrong type is accepted.
    let gvk = kube::core::GroupVersionKind::gvk("worker.gpustack.ai", "v1", "ModelDeployment");
    let resource = kube::core::ApiResource::from_gvk(&gvk);
    let raw: Api<kube::core::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    eventually("the looser schema accepts a string count", WAIT, || async {
        let object: kube::core::DynamicObject = serde_json::from_value(bad_target("bad")).unwrap();
        raw.create(&PostParams::default(), &object).await.ok()
    })
    .await
    .unwrap();
    create_target(&client, &ns, "good").await;
    let scalers: Api<ModelDeploymentScaler> = Api::namespaced(client.clone(), &ns);
    let targets: Api<ModelDeployment> =
        Api::namespaced_with(client.clone(), &ns, &TargetApiVersion::V1);
    create_scaler(&scalers, "good", "good").await;
    create_scaler(&scalers, "bad", "bad").await;
    let running = start(client.clone(), &ns).await;

    // The healthy half: bound and planning.
    wait_condition(&scalers, "good", "Active", "Active").await;
    let good = targets.get("good").await.unwrap();
    assert!(annotations(&good).contains_key(BINDING_ANNOTATION));

    // The bad half: Blocked, naming the field, with an event and a metric; nothing written.
    let bad = wait_condition(&scalers, "bad", "Blocked", "TargetUnreadable").await;
    let message = bad
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Blocked")
        .unwrap()
        .message
        .clone();
    assert!(
        message.contains("spec.roles[0].replicas") && message.contains("invalid type"),
        "{message}"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually(
        "a TargetUnreadable event on the bad scaler",
        WAIT,
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("TargetUnreadable")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
            })
        },
    )
    .await
    .unwrap();
    let gauge = format!(
        "mds_undecodable_objects{{kind=\"ModelDeployment\",namespace=\"{ns}\",name=\"bad\"}} 1"
    );
    assert!(running.telemetry.encode().contains(&gauge));
    let stored = raw.get("bad").await.unwrap();
    assert!(
        stored
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(BINDING_ANNOTATION)),
        "nothing is written to a target that does not decode"
    );

    // Fixed: it decodes again, the scaler binds, the gauge goes.
    raw.patch(
        "bad",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "replace", "path": "/spec/roles/0/replicas", "value": 2}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    wait_condition(&scalers, "bad", "Active", "Active").await;
    assert!(
        !running
            .telemetry
            .encode()
            .contains("mds_undecodable_objects{")
    );
    stop(running).await;
    plane.stop();
}
