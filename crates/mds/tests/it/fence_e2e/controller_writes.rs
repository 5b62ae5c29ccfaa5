//! The controller's own writes through the fence, as deploy/'s ServiceAccount: a commit that
//! its engines ask for lands, while a person's writes under that same identity are refused by
//! what they carry; with the webhook down nothing lands, nothing is half-written, and the next
//! pass after the webhook is back commits.

use kube::api::{Patch, PatchParams};
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION, DecisionPayload};
use mds_api::status::ReplicaVector;
use mds_api::target::ModelDeployment;
use mds_core::patch::{PatchOp, commit};
use mds_webhook::configuration::{DEFAULTS_WEBHOOK, FENCE_WEBHOOK};
use serde_json::json;

use super::engine::{Engine, serve_instance};
use super::lab::{Lab, annotations, bound, eventually, has_decision, refusal, replicas};
use crate::common::text;
use crate::deploy_support::kubectl;
use crate::deploy_support::webhook::target_shape;

fn json_patch(ops: serde_json::Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).unwrap())
}

/// The decision on a target, read from its annotation.
fn decision(md: &ModelDeployment) -> DecisionPayload {
    DecisionPayload::parse(&annotations(md)[DECISION_ANNOTATION]).unwrap()
}

/// The count the decision gave `server`, which the target must carry.
fn committed_server_count(md: &ModelDeployment) -> i32 {
    let decision = decision(md);
    let count = decision.vector["server"];
    assert_eq!(
        replicas(md),
        [("server".to_string(), count)],
        "the counts are the decision's vector"
    );
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_commit_passes_the_fence_as_its_service_account() {
    let Some(lab) = Lab::new("commit").await else {
        return;
    };
    lab.create_target("llm", &[("server", 1)]).await;
    // 30 requests in the batch on one replica, 10 wanted per replica: the scaler wants more.
    let engine = Engine::start(30).await;
    serve_instance(&lab, "llm", "server", 0, &engine).await;
    lab.create_scaler("llm", "llm", &["server"]).await;
    let controller = lab.start_controller().await;

    let committed = lab
        .wait_target("llm", "a commit by the controller", has_decision)
        .await;
    let count = committed_server_count(&committed);
    assert!(count > 1, "grew from 1 to {count}");
    let binding = annotations(&committed)[BINDING_ANNOTATION].clone();
    assert_eq!(decision(&committed).term, 1, "under the binding's term");
    assert!(engine.scrapes() >= 2, "a rate window needs two scrapes");
    // A pass counts its commit when it ends, after the write: the commit can be seen first.
    eventually("the controller counts its commit", || async {
        (controller.telemetry.commits.get() >= 1).then_some(())
    })
    .await;
    assert_eq!(controller.write_failures("commit", "refused"), 0);
    assert_eq!(controller.write_failures("bind", "refused"), 0);

    // A person writing as the controller's very identity (impersonating its ServiceAccount,
    // as every write through GPUStack's aggregated API looks the same) is told apart by what
    // the write carries. A kubectl-scale-shaped patch of the counts alone:
    let as_controller = lab.targets_as(lab.operator.clone());
    let scale = json!([{"op": "replace", "path": "/spec/roles/0/replicas", "value": count + 1}]);
    let answer = as_controller
        .patch("llm", &PatchParams::default(), &json_patch(scale))
        .await;
    let said = refusal(answer);
    assert!(
        said.contains("binding fence (replica counts of a bound target)"),
        "{said}"
    );
    // A GitOps-shaped apply: client-side apply of the manifest in Git sends a merge patch whose
    // roles (the whole list, as a merge patch replaces it) carry the count declared there.
    let mut roles = serde_json::to_value(&committed.spec.roles).unwrap();
    roles[0]["replicas"] = json!(1);
    let answer = as_controller
        .patch(
            "llm",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"roles": roles}})),
        )
        .await;
    let said = refusal(answer);
    assert!(
        said.contains("binding fence (replica counts of a bound target)")
            && said.contains(&format!("server {count} -> 1")),
        "{said}"
    );
    // A hand-forged decision whose vector disagrees with the counts it writes.
    let forged_vector: ReplicaVector = [("server".to_string(), count + 2)].into();
    let forged = DecisionPayload {
        decision_id: "by-hand".into(),
        term: 1,
        vector: forged_vector.clone(),
    }
    .to_annotation();
    let mut ops = commit(&target_shape(&committed), &binding, &forged_vector, &forged);
    for op in &mut ops {
        if let PatchOp::Replace { value, .. } = op {
            *value = json!(count + 1);
        }
    }
    let answer = as_controller
        .patch(
            "llm",
            &PatchParams::default(),
            &json_patch(serde_json::to_value(&ops).unwrap()),
        )
        .await;
    let said = refusal(answer);
    assert!(
        said.contains("binding fence (a commit carries its decision)")
            && said.contains(&format!(
                "its vector says server={} but the request sets server={}",
                count + 2,
                count + 1
            )),
        "{said}"
    );
    let after = lab.targets().get("llm").await.unwrap();
    assert_eq!(replicas(&after), replicas(&committed), "nothing moved");
    controller.stop().await;
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_webhook_down_writes_are_refused_and_the_next_pass_commits_once_it_is_back() {
    let Some(mut lab) = Lab::new("webhook-down").await else {
        return;
    };
    lab.create_target("llm", &[("server", 1)]).await;
    // 5 requests on one replica: the scaler holds at 1 until the load rises.
    let engine = Engine::start(5).await;
    serve_instance(&lab, "llm", "server", 0, &engine).await;
    lab.create_scaler("llm", "llm", &["server"]).await;
    let controller = lab.start_controller().await;
    let before = lab
        .wait_target("llm", "bound by the controller", bound)
        .await;

    lab.webhook.stop().await;
    // A user's edit of the target, and of the scaler, fail: the API server cannot ask.
    let failed_call = |webhook: &str| format!("failed calling webhook \"{webhook}\"");
    let answer = lab
        .patch_target(
            "llm",
            json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "search"}}]),
        )
        .await;
    let said = refusal(answer);
    assert!(said.contains(&failed_call(FENCE_WEBHOOK)), "{said}");
    let answer = lab
        .patch_scaler("llm", json!({"spec": {"suspend": true}}))
        .await;
    let said = refusal(answer);
    assert!(said.contains(&failed_call(DEFAULTS_WEBHOOK)), "{said}");
    // As kubectl shows it (docs/operations.md quotes it).
    let labelled = kubectl(
        lab.plane,
        &[
            "label",
            "modeldeployment",
            "llm",
            "-n",
            &lab.namespace,
            "team=search",
        ],
        None,
    );
    let said = text(&labelled.stderr);
    assert!(!labelled.status.success());
    assert!(
        said.starts_with(&format!(
            "Error from server (InternalError): Internal error occurred: {}: failed to call webhook: Post \"https://127.0.0.1:{}/validate/modeldeployments?timeout=10s\": dial tcp 127.0.0.1:{}: connect: connection refused",
            failed_call(FENCE_WEBHOOK),
            lab.webhook.port,
            lab.webhook.port
        )),
        "{said}"
    );

    // The load rises; the controller's commit fails the same way, and is counted.
    engine.set_running(30);
    eventually("a commit that could not land", || async {
        (controller.write_failures("commit", "unavailable") >= 1).then_some(())
    })
    .await;
    let during = lab.targets().get("llm").await.unwrap();
    assert_eq!(
        during.metadata.resource_version, before.metadata.resource_version,
        "the target is untouched"
    );
    let scaler = lab.scalers().get("llm").await.unwrap();
    assert_eq!(scaler.spec.suspend, Some(false), "the scaler's spec too");
    assert_eq!(controller.write_failures("commit", "refused"), 0);

    // Back: the next pass plans again from what it reads and commits, in one write.
    lab.webhook.resume().await;
    let committed = lab
        .wait_target("llm", "the commit after the webhook is back", has_decision)
        .await;
    let count = committed_server_count(&committed);
    assert!(count > 1, "grew from 1 to {count}");
    assert_eq!(
        annotations(&committed)[BINDING_ANNOTATION],
        annotations(&before)[BINDING_ANNOTATION],
        "under the same binding"
    );
    assert_eq!(
        committed.metadata.generation,
        before.metadata.generation.map(|g| g + 1),
        "one change of the counts: the commit"
    );
    controller.stop().await;
    lab.finish().await;
}
