//! The binding fence over HTTP, in-process (spec *Binding fence*, D24): user edits, orphan
//! recovery and releases with the scaler looked up, and the controller's own writes as mds-core
//! builds them, told apart from a person's by content even under one identity.

use crate::common;

use common::*;
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::fence::{NotClaiming, ScalerFacts};
use mds_api::status::ReplicaVector;
use mds_core::patch::{self, PatchOp, TargetShape};
use mds_testdata::{Target, mk_role, mk_target};
use mds_webhook::ports::LookupError;
use mds_webhook::router::VALIDATE_TARGETS_PATH;
use mds_worker::Cluster;
use mds_worker::memory_cluster::{Kind, MemoryCluster, ready};
use serde_json::{Value, json};

fn binding(term: i64) -> String {
    BindingPayload {
        scaler_name: "llm".into(),
        scaler_uid: "uid-1".into(),
        term,
    }
    .to_annotation()
}

/// llm-serving as stored (resourceVersion 41, generation 7): SGLang without a router, a Prefill
/// and a Decode role of no instance type, no annotations map.
fn target(prefill: i32, decode: i32) -> Target {
    let role = |name: &str, kind: &str, replicas: i32| {
        mk_role(name)
            .kind(kind)
            .replicas(replicas)
            .no_instance_type()
    };
    mk_target("llm-serving")
        .engine("SGLang")
        .router(None)
        .stored("default", "t-1", "41")
        .generation(7)
        .role(role("prefill", "Prefill", prefill))
        .role(role("decode", "Decode", decode))
}

/// Unbound: its annotations map is empty.
fn unbound(prefill: i32, decode: i32) -> Value {
    target(prefill, decode).empty_annotations().build()
}

fn bound_to(prefill: i32, decode: i32) -> Value {
    let binding = binding(3);
    target(prefill, decode)
        .annotation(BINDING_ANNOTATION, &binding)
        .build()
}

fn bound() -> Value {
    bound_to(2, 2)
}

/// The target kept as the API server keeps it, without the fence webhook: the webhook under
/// test is the one that judges what the controller's patches make of it.
struct Stored(MemoryCluster);

impl Stored {
    fn new(doc: &Value) -> Stored {
        let cluster = MemoryCluster::new();
        cluster.set_fence(false);
        cluster.edit(|objects| objects.put(Kind::Target, doc.clone()));
        Stored(cluster)
    }

    fn doc(&self) -> Value {
        self.0.get(Kind::Target, "default", "llm-serving").unwrap()
    }

    /// Applies mds-core's patch, built on the stored target; returns the target as written.
    fn write(&self, ops: impl FnOnce(&TargetShape) -> Vec<PatchOp>) -> Value {
        let ops = ops(&shape(&self.doc()));
        let written = ready(self.0.patch_target("default", "llm-serving", &ops));
        written.expect("the core's patch applies");
        self.doc()
    }
}

fn shape(doc: &Value) -> TargetShape {
    TargetShape::of(&md(doc))
}

async fn update(fake: Fake, user: &str, old: &Value, new: &Value) -> Value {
    admit(
        app(fake),
        VALIDATE_TARGETS_PATH,
        &review("UPDATE", "ModelDeployment", user, Some(new), Some(old)),
    )
    .await
}

/// Scaler "llm" exists with `uid`, targeting llm-serving; Active unless `not_claiming`.
fn scaler_as(uid: &str, not_claiming: Option<NotClaiming>) -> Fake {
    let mut fake = Fake::default();
    let facts = ScalerFacts {
        uid: uid.into(),
        target_name: "llm-serving".into(),
        not_claiming,
        status_target_uid: None,
        status_term: None,
    };
    fake.scalers.insert(("default".into(), "llm".into()), facts);
    fake
}

fn scaler_exists(uid: &str) -> Fake {
    scaler_as(uid, None)
}

fn suspended_scaler() -> Fake {
    scaler_as("uid-1", Some(NotClaiming::Suspended))
}

/// One identity for every write, as through GPUStack's aggregated API.
const PROXY: &str = "system:serviceaccount:gpustack-system:gpustack";

#[tokio::test]
async fn a_users_replica_edit_on_a_bound_target_is_refused_and_passes_after_release() {
    let edited = bound_to(2, 5);
    let response = update(scaler_exists("uid-1"), "alice", &bound(), &edited).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    let text = message(&response);
    assert!(text.starts_with("binding fence (replica counts of a bound target): ModelDeployment \"llm-serving\" is bound to ModelDeploymentScaler \"llm\" (term 3)"), "{text}");
    assert!(
        text.contains("decode 2 -> 5") && text.contains("suspend") && text.contains("delete it"),
        "{text}"
    );

    // Suspend makes the controller release (D20): the same edit on the released target passes.
    let stored = Stored::new(&bound());
    let before = stored.doc();
    let released = stored.write(|shape| patch::release(shape, &binding(3)));
    let response = update(suspended_scaler(), OPERATOR, &before, &released).await;
    assert_eq!(response["allowed"], true, "{response}");
    let edited = unbound(2, 5);
    let response = update(Fake::default(), "alice", &released, &edited).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn other_fields_of_a_bound_target_stay_editable() {
    let mut edited = bound();
    edited["spec"]["engine"]["version"] = json!("0.5.1");
    edited["metadata"]["labels"] = json!({"team": "search"});
    let response = update(Fake::default(), "alice", &bound(), &edited).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn hand_made_ownership_annotations_are_refused() {
    let unbound = unbound(2, 2);
    let response = update(Fake::default(), "alice", &unbound, &bound()).await;
    assert_eq!(response["allowed"], false);
    assert!(message(&response).starts_with("binding fence (a bind names a claiming scaler under a new term): this request binds ModelDeployment \"llm-serving\" to ModelDeploymentScaler \"llm\" (term 3), but no scaler of that name exists"), "{response}");
    let decision_only = target(2, 2).annotation(DECISION_ANNOTATION, "{}").build();
    let response = update(Fake::default(), "alice", &unbound, &decision_only).await;
    assert!(message(&response).starts_with("binding fence (scaler annotations on an unbound target): this request sets modeldeployment.gpustack.ai/scaler-decision"), "{response}");
    // Also when the object is created with it.
    let response = admit(
        app(Fake::default()),
        VALIDATE_TARGETS_PATH,
        &review("CREATE", "ModelDeployment", "alice", Some(&bound()), None),
    )
    .await;
    assert_eq!(response["allowed"], false);
}

#[tokio::test]
async fn orphan_recovery_passes_only_when_the_scaler_is_gone_or_replaced() {
    let removed = unbound(2, 2);
    let response = update(Fake::default(), "alice", &bound(), &removed).await;
    assert_eq!(response["allowed"], true, "absent scaler: {response}");
    let response = update(scaler_exists("uid-2"), "alice", &bound(), &removed).await;
    assert_eq!(response["allowed"], true, "another UID: {response}");
    let response = update(scaler_exists("uid-1"), "alice", &bound(), &removed).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("still exists with UID uid-1 and is Active"),
        "{response}"
    );
    let failing = Fake {
        failure: Some(LookupError::Failed(
            "forbidden: cannot get modeldeploymentscalers".into(),
        )),
        ..Fake::default()
    };
    let response = update(failing, "alice", &bound(), &removed).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("forbidden: cannot get modeldeploymentscalers"),
        "{response}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_scaler_lookup_ends_in_a_refusal_naming_the_timeout() {
    let hanging = Fake {
        hang: true,
        ..Fake::default()
    };
    let response = update(hanging, "alice", &bound(), &unbound(2, 2)).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("the lookup took longer than 2000 ms"),
        "{response}"
    );
}

#[tokio::test]
async fn deletes_and_targets_being_deleted_pass() {
    let response = admit(
        app(Fake::default()),
        VALIDATE_TARGETS_PATH,
        &review("DELETE", "ModelDeployment", "alice", None, Some(&bound())),
    )
    .await;
    assert_eq!(response["allowed"], true);
    let mut going = bound();
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut finalized = unbound(1, 1);
    finalized["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let response = update(Fake::default(), "alice", &going, &finalized).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn the_controllers_writes_and_a_persons_are_told_apart_under_one_identity() {
    // Bind (D19): the first term on a target with no history is 1, for the Active scaler named.
    let stored = Stored::new(&target(2, 2).build());
    let no_map = stored.doc();
    let bound_doc = stored.write(|shape| patch::bind(shape, &binding(1)));
    let response = update(scaler_exists("uid-1"), PROXY, &no_map, &bound_doc).await;
    assert_eq!(response["allowed"], true, "{response}");
    let response = update(suspended_scaler(), PROXY, &no_map, &bound_doc).await;
    assert_eq!(
        response["allowed"], false,
        "a suspended scaler binds nothing"
    );

    // Commit (D3, D24): decode 2 -> 4 with a decision of the binding's term.
    let vector: ReplicaVector = [("prefill".to_string(), 2), ("decode".to_string(), 4)].into();
    let decision = DecisionPayload {
        decision_id: "llm-t1-1767225600000".into(),
        term: 1,
        vector: vector.clone(),
    }
    .to_annotation();
    let committed = stored.write(|shape| patch::commit(shape, &binding(1), &vector, &decision));
    assert_eq!(committed["spec"]["roles"][1]["replicas"], 4);
    let response = update(Fake::default(), PROXY, &bound_doc, &committed).await;
    assert_eq!(response["allowed"], true, "{response}");

    // kubectl scale under the same identity: counts moved, the decision as stored.
    let mut scaled = committed.clone();
    scaled["spec"]["roles"][0]["replicas"] = json!(6);
    let response = update(Fake::default(), PROXY, &committed, &scaled).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("binding fence (replica counts of a bound target)"),
        "{response}"
    );
    // A hand-forged decision whose vector disagrees with the counts.
    let forged_decision = DecisionPayload {
        decision_id: "forged".into(),
        term: 1,
        vector: [("prefill".to_string(), 2), ("decode".to_string(), 4)].into(),
    }
    .to_annotation();
    let mut forged = scaled.clone();
    forged["metadata"]["annotations"][DECISION_ANNOTATION] = json!(forged_decision);
    let response = update(Fake::default(), PROXY, &committed, &forged).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("its vector says prefill=2 but the request sets prefill=6"),
        "{response}"
    );

    // Release (D20): both annotations go, counts stay; only once the scaler stops claiming.
    let released = stored.write(|shape| patch::release(shape, &binding(1)));
    assert_eq!(released["metadata"]["annotations"], json!({}));
    let response = update(scaler_exists("uid-1"), PROXY, &committed, &released).await;
    assert_eq!(
        response["allowed"], false,
        "an Active scaler keeps its binding"
    );
    let response = update(suspended_scaler(), PROXY, &committed, &released).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn an_operator_user_when_configured_is_checked_as_well() {
    let vector: ReplicaVector = [("prefill".to_string(), 2), ("decode".to_string(), 4)].into();
    let decision = DecisionPayload {
        decision_id: "llm-t3-2000".into(),
        term: 3,
        vector: vector.clone(),
    }
    .to_annotation();
    let stored = Stored::new(&bound());
    let before = stored.doc();
    let committed = stored.write(|shape| patch::commit(shape, &binding(3), &vector, &decision));
    let review = |user: &str| {
        review(
            "UPDATE",
            "ModelDeployment",
            user,
            Some(&committed),
            Some(&before),
        )
    };
    let app = || app_with_operator_user(Fake::default(), Some(OPERATOR));
    let response = admit(app(), VALIDATE_TARGETS_PATH, &review(OPERATOR)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let response = admit(app(), VALIDATE_TARGETS_PATH, &review(PROXY)).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("binding fence (operator user)"),
        "{response}"
    );
}

#[tokio::test]
async fn an_unreadable_target_is_refused_only_when_it_carries_scaler_annotations() {
    let mut broken = unbound(2, 2);
    broken["spec"]["roles"][0]["replicas"] = json!("two");
    let response = update(Fake::default(), "alice", &broken, &broken).await;
    assert_eq!(response["allowed"], true, "nothing is bound: {response}");
    let mut broken_bound = bound();
    broken_bound["spec"]["roles"][0]["replicas"] = json!("two");
    let response = update(Fake::default(), "alice", &bound(), &broken_bound).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("spec.roles[0].replicas"),
        "{response}"
    );
    // GPUStack's own write on such an object, leaving counts and annotations alone, passes.
    let mut relabelled = broken_bound.clone();
    relabelled["metadata"]["labels"] = json!({"gpustack.ai/revision": "2"});
    let response = update(Fake::default(), PROXY, &broken_bound, &relabelled).await;
    assert_eq!(response["allowed"], true, "{response}");
    // But not one that drops the binding.
    let mut unbinding = relabelled.clone();
    unbinding["metadata"]["annotations"] = json!({});
    let response = update(Fake::default(), PROXY, &broken_bound, &unbinding).await;
    assert_eq!(response["allowed"], false, "{response}");
}

#[tokio::test]
async fn status_writes_pass() {
    let mut status_write = review(
        "UPDATE",
        "ModelDeployment",
        "gpustack",
        Some(&unbound(9, 9)),
        Some(&bound()),
    );
    status_write["request"]["subResource"] = json!("status");
    let response = admit(app(Fake::default()), VALIDATE_TARGETS_PATH, &status_write).await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn each_refusal_is_counted_by_target_and_rule_on_the_metrics_page() {
    use tower::ServiceExt;
    let app = app(scaler_exists("uid-1"));
    let refused = review(
        "UPDATE",
        "ModelDeployment",
        "alice",
        Some(&bound_to(2, 5)),
        Some(&bound()),
    );
    let allowed = review(
        "UPDATE",
        "ModelDeployment",
        "alice",
        Some(&bound()),
        Some(&bound()),
    );
    for body in [&refused, &refused, &allowed] {
        admit(app.clone(), VALIDATE_TARGETS_PATH, body).await;
    }
    let request = axum::http::Request::get(mds_webhook::metrics::METRICS_PATH)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    for line in [
        r#"mds_webhook_fence_refusals_total{namespace="default",target="llm-serving",rule="BoundCounts"} 2"#,
        r#"mds_webhook_reviews_total{webhook="validate-targets",allowed="false"} 2"#,
        r#"mds_webhook_reviews_total{webhook="validate-targets",allowed="true"} 1"#,
        r#"mds_webhook_fence_last_refusal_timestamp_seconds{namespace="default",target="llm-serving",rule="BoundCounts"} "#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}
