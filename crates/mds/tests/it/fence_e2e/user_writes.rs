//! What the fence does to a user's writes of a target (the cluster administrator; the fence
//! decides by content, D24, and administrators go through suspend like everyone).

use kube::api::{DeleteParams, PostParams};
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload, annotation_pointer,
};
use mds_api::fence::{NamedScaler, ScalerFacts};
use mds_api::target::ModelDeployment;
use serde_json::json;

use super::lab::{
    Lab, annotations, bound, eventually, refusal, replicas, set_replicas, with_replicas,
};
use crate::deploy_support::webhook::bind_as_operator;

/// `[("server", n)]`.
fn server(n: i32) -> Vec<(String, i32)> {
    vec![("server".to_string(), n)]
}

/// The JSON Patch that removes the binding annotation.
fn remove_binding() -> serde_json::Value {
    json!([{"op": "remove", "path": annotation_pointer(BINDING_ANNOTATION)}])
}

fn without_binding(md: &ModelDeployment) -> ModelDeployment {
    let mut edited = md.clone();
    if let Some(a) = edited.metadata.annotations.as_mut() {
        a.remove(BINDING_ANNOTATION);
    }
    edited
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_replica_edit_is_refused_while_bound_and_passes_once_the_scaler_is_suspended() {
    let Some(lab) = Lab::new("bound-counts").await else {
        return;
    };
    lab.create_target("llm", &[("server", 1)]).await;
    let scaler = lab.create_scaler("llm", "llm", &["server"]).await;
    let controller = lab.start_controller().await;
    let live = lab
        .wait_target("llm", "bound by the controller", bound)
        .await;
    let binding = BindingPayload::parse(&annotations(&live)[BINDING_ANNOTATION]).unwrap();
    assert_eq!(binding.scaler_uid, scaler.metadata.uid.clone().unwrap());

    let answer = lab.patch_target("llm", set_replicas(0, 3)).await;
    let expected = lab.fence_refusal(
        Some(&live),
        &with_replicas(&live, 0, 3),
        NamedScaler::NotLookedUp,
    );
    assert_eq!(refusal(answer), expected);
    for says in [
        "binding fence (replica counts of a bound target)",
        "this request changes server 1 -> 3",
        "suspend the scaler (kubectl patch mds llm",
    ] {
        assert!(expected.contains(says), "{expected}");
    }
    assert_eq!(
        replicas(&lab.targets().get("llm").await.unwrap()),
        server(1)
    );

    // Suspended, the scaler releases the binding (D20), and the same edit passes.
    lab.patch_scaler("llm", json!({"spec": {"suspend": true}}))
        .await
        .unwrap();
    lab.wait_target("llm", "released by the controller", |md| !bound(md))
        .await;
    let edited = lab
        .patch_target("llm", set_replicas(0, 3))
        .await
        .expect("an unbound target's counts are the user's");
    assert_eq!(replicas(&edited), server(3));
    controller.stop().await;
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_fields_of_a_bound_target_stay_editable() {
    let Some(lab) = Lab::new("other-fields").await else {
        return;
    };
    lab.create_target("llm", &[("server", 2)]).await;
    let scaler = lab.create_scaler("llm", "llm", &["server"]).await;
    let (binding, _) = bind_as_operator(lab.operator.clone(), &lab.admin, &scaler, "llm").await;

    // A new role is a count that was not there: refused while bound (removed in one write and
    // added back in the next, a role would otherwise change its bound count).
    let answer = lab
        .patch_target(
            "llm",
            json!([{"op": "add", "path": "/spec/roles/-",
                "value": {"name": "embed", "kind": "Server", "replicas": 1, "instanceType": "l4"}}]),
        )
        .await;
    let said = refusal(answer);
    assert!(
        said.contains("binding fence (replica counts of a bound target)")
            && said.contains("embed (none) -> 1"),
        "{said}"
    );
    // A label, an annotation of someone else's and a field of a role.
    let edited = lab
        .patch_target(
            "llm",
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"team": "search"}},
                {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "search"},
                {"op": "replace", "path": "/spec/roles/0/instanceType", "value": "h200"},
            ]),
        )
        .await
        .expect("the fence lets fields other than counts and its annotations through");
    let stored = serde_json::to_value(lab.dynamic_targets().get("llm").await.unwrap()).unwrap();
    assert_eq!(stored["metadata"]["labels"]["team"], "search");
    assert_eq!(stored["spec"]["roles"][0]["instanceType"], "h200");
    let kept = annotations(&edited);
    assert_eq!(kept[BINDING_ANNOTATION], binding, "the binding stays");
    assert_eq!(kept["example.com/owner"], "search");
    assert_eq!(replicas(&edited)[0], ("server".to_string(), 2));
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_binding_or_decision_is_refused() {
    let Some(lab) = Lab::new("hand-made").await else {
        return;
    };
    let unbound = lab.create_target("llm", &[("server", 1)]).await;
    let scaler = lab.create_scaler("llm", "llm", &["server"]).await;
    // What a user copies from another target: the binding of a scaler of the same name that
    // was deleted and created again (another UID).
    let binding = BindingPayload {
        scaler_name: "llm".into(),
        scaler_uid: "uid-of-an-earlier-llm".into(),
        term: 1,
    }
    .to_annotation();
    let facts = ScalerFacts::of(&scaler).unwrap();
    let decision = DecisionPayload {
        decision_id: "by-hand".into(),
        term: 1,
        vector: [("server".to_string(), 1)].into(),
    }
    .to_annotation();
    let with = |md: &ModelDeployment, key: &str, value: &str| {
        let mut edited = md.clone();
        edited
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
        edited
    };
    let add = |key: &str, value: &str| json!([{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]);

    let answer = lab
        .patch_target("llm", add(BINDING_ANNOTATION, &binding))
        .await;
    let expected = lab.fence_refusal(
        Some(&unbound),
        &with(&unbound, BINDING_ANNOTATION, &binding),
        NamedScaler::Present(facts.clone()),
    );
    assert_eq!(refusal(answer), expected);
    assert!(
        expected.contains("binding fence (a bind names a claiming scaler under a new term)")
            && expected.contains("not uid-of-an-earlier-llm"),
        "{expected}"
    );
    let answer = lab
        .patch_target("llm", add(DECISION_ANNOTATION, &decision))
        .await;
    let expected = lab.fence_refusal(
        Some(&unbound),
        &with(&unbound, DECISION_ANNOTATION, &decision),
        NamedScaler::NotLookedUp,
    );
    assert_eq!(refusal(answer), expected);
    assert!(
        expected.contains("binding fence (scaler annotations on an unbound target)")
            && expected.contains("create a scaler with mode: Active"),
        "{expected}"
    );
    // Nor can a new target arrive bound.
    let mut copy = super::lab::target_manifest("copy", &[("server", 1)]);
    copy["metadata"]["annotations"] = json!({ BINDING_ANNOTATION: binding });
    let copy_object: kube::api::DynamicObject = serde_json::from_value(copy.clone()).unwrap();
    let answer = lab
        .dynamic_targets()
        .create(&PostParams::default(), &copy_object)
        .await;
    let copy_read: ModelDeployment = serde_json::from_value(copy).unwrap();
    assert_eq!(
        refusal(answer),
        lab.fence_refusal(None, &copy_read, NamedScaler::NotLookedUp)
    );
    assert!(lab.targets().get_opt("copy").await.unwrap().is_none());

    // Bound by the operator, its binding is not the user's to rewrite either.
    let (_, live) = bind_as_operator(lab.operator.clone(), &lab.admin, &scaler, "llm").await;
    let next_term = BindingPayload {
        scaler_name: "llm".into(),
        scaler_uid: scaler.metadata.uid.clone().unwrap(),
        term: 2,
    }
    .to_annotation();
    let rewrite = json!([{"op": "replace", "path": annotation_pointer(BINDING_ANNOTATION), "value": next_term}]);
    let answer = lab.patch_target("llm", rewrite).await;
    let expected = lab.fence_refusal(
        Some(&live),
        &with(&live, BINDING_ANNOTATION, &next_term),
        NamedScaler::NotLookedUp,
    );
    assert!(
        expected.contains("binding fence (scaler annotations of a bound target)"),
        "{expected}"
    );
    assert_eq!(refusal(answer), expected);
    let after = lab.targets().get("llm").await.unwrap();
    assert_eq!(annotations(&after), annotations(&live), "nothing changed");
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_recovery_removes_a_binding_only_once_its_scaler_is_gone_with_counts_unchanged() {
    let Some(lab) = Lab::new("orphan").await else {
        return;
    };
    lab.create_target("llm", &[("server", 2)]).await;
    let scaler = lab.create_scaler("llm", "llm", &["server"]).await;
    let uid = scaler.metadata.uid.clone().unwrap();
    let controller = lab.start_controller().await;
    lab.wait_target("llm", "bound by the controller", bound)
        .await;
    let with_finalizer = eventually("the controller's finalizer on the scaler", || async {
        let s = lab.scalers().get("llm").await.ok()?;
        s.metadata
            .finalizers
            .as_ref()?
            .iter()
            .any(|f| f == mds_operator::FINALIZER)
            .then_some(s)
    })
    .await;
    assert_eq!(with_finalizer.metadata.uid, Some(uid.clone()));
    // The controller stops (no one will release the binding now).
    controller.stop().await;
    let live = lab.targets().get("llm").await.unwrap();
    assert!(bound(&live), "stopping releases nothing");

    // While the scaler lives, its binding is not orphaned.
    let answer = lab.patch_target("llm", remove_binding()).await;
    assert_eq!(
        refusal(answer),
        lab.fence_refusal(
            Some(&live),
            &without_binding(&live),
            NamedScaler::Present(ScalerFacts::of(&with_finalizer).unwrap())
        )
    );

    // Deleted with the controller gone, the scaler waits on its finalizer; removed by hand,
    // it is gone and the binding stays behind.
    lab.scalers()
        .delete("llm", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = lab.scalers().get("llm").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    lab.patch_scaler("llm", json!({"metadata": {"finalizers": null}}))
        .await
        .expect("the finalizer of a scaler being deleted may be removed");
    eventually("the scaler is gone", || async {
        lab.scalers()
            .get_opt("llm")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(bound(&lab.targets().get("llm").await.unwrap()));

    // Removing it while changing counts is refused: one write for each.
    let mut both = remove_binding();
    both.as_array_mut()
        .unwrap()
        .extend(set_replicas(0, 5).as_array().unwrap().clone());
    let answer = lab.patch_target("llm", both).await;
    let expected = lab.fence_refusal(
        Some(&live),
        &with_replicas(&without_binding(&live), 0, 5),
        NamedScaler::Absent,
    );
    assert!(
        expected.contains("binding fence (orphan recovery)")
            && expected.contains("must leave the replica counts unchanged"),
        "{expected}"
    );
    assert_eq!(refusal(answer), expected);

    // Removing it alone passes; then the counts are the user's.
    let recovered = lab
        .patch_target("llm", remove_binding())
        .await
        .expect("orphan recovery");
    assert!(!bound(&recovered));
    assert_eq!(replicas(&recovered), server(2));
    let edited = lab.patch_target("llm", set_replicas(0, 5)).await.unwrap();
    assert_eq!(replicas(&edited), server(5));
    lab.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_target_being_deleted_is_not_blocked() {
    let Some(lab) = Lab::new("deleting").await else {
        return;
    };
    lab.create_target("llm", &[("server", 2)]).await;
    let scaler = lab.create_scaler("llm", "llm", &["server"]).await;
    // Another controller's finalizer holds the target while it is being deleted.
    lab.patch_target(
        "llm",
        json!([{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/drain"]}]),
    )
    .await
    .unwrap();
    bind_as_operator(lab.operator.clone(), &lab.admin, &scaler, "llm").await;
    let refused = lab.patch_target("llm", set_replicas(0, 1)).await;
    assert!(
        refusal(refused).contains("binding fence (replica counts of a bound target)"),
        "bound, the counts are fenced"
    );

    lab.targets()
        .delete("llm", &DeleteParams::default())
        .await
        .expect("deleting a bound target is not fenced");
    let deleting = lab.targets().get("llm").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // Being deleted, the same writes pass (D24): counts, the binding, the finalizer.
    let edited = lab
        .patch_target("llm", set_replicas(0, 1))
        .await
        .expect("a target being deleted takes count edits");
    assert_eq!(replicas(&edited), server(1));
    lab.patch_target("llm", remove_binding())
        .await
        .expect("and annotation removals");
    lab.patch_target(
        "llm",
        json!([{"op": "remove", "path": "/metadata/finalizers"}]),
    )
    .await
    .unwrap();
    eventually("the target is gone", || async {
        lab.targets()
            .get_opt("llm")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    lab.finish().await;
}
