//! The ModelDeploymentScaler webhooks over HTTP, in-process: stored defaults as a JSON Patch
//! (D25, D28) and validation with the target looked up.

use crate::common;

use common::*;
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_webhook::ports::LookupError;
use mds_webhook::router::{HEALTHZ_PATH, MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH};
use serde_json::{Value, json};

fn with_target(target: &Value) -> Fake {
    let mut fake = Fake::default();
    fake.targets
        .insert(("default".into(), "llm-serving".into()), md(target));
    fake
}

#[tokio::test]
async fn healthz_answers_ok() {
    let request = axum::http::Request::get(HEALTHZ_PATH)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(app(Fake::default()), request)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn create_stores_every_default_and_the_inferred_type() {
    let object = scaler(proportional_spec());
    let response = admit(
        app(Fake::default()),
        MUTATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], true);
    let stored = patched(&response, &object);
    assert_eq!(stored["spec"]["algorithm"]["type"], "Proportional", "D28");
    assert_eq!(stored["spec"]["mode"], "Shadow");
    assert_eq!(stored["spec"]["roles"][0]["minReplicas"], 1);
    assert_eq!(
        stored["spec"]["algorithm"]["proportional"]["tolerance"],
        "0.1"
    );
    assert_eq!(stored["spec"]["behavior"]["scaleUp"]["maxStepReplicas"], 4);
    // Exactly what `mds validate --show-defaults` stores (D25).
    let mut expected: ModelDeploymentScaler = serde_json::from_value(object.clone()).unwrap();
    default_spec(&mut expected.spec);
    let stored: ModelDeploymentScaler = serde_json::from_value(stored).unwrap();
    assert_eq!(stored.spec, expected.spec);
}

#[tokio::test]
async fn zero_step_limits_are_replaced_and_a_defaulted_object_gets_no_patch() {
    let mut spec = proportional_spec();
    spec["behavior"] = json!({"scaleUp": {"maxStepReplicas": 0}});
    let object = scaler(spec);
    let response = admit(
        app(Fake::default()),
        MUTATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    let stored = patched(&response, &object);
    assert_eq!(
        stored["spec"]["behavior"]["scaleUp"]["maxStepReplicas"], 4,
        "zero stores 4"
    );
    // Defaulting is idempotent: the stored object needs no second patch.
    let again = admit(
        app(Fake::default()),
        MUTATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&stored),
            None,
        ),
    )
    .await;
    assert_eq!(again["allowed"], true);
    assert!(again.get("patch").is_none(), "{again}");
}

#[tokio::test]
async fn update_infers_the_type_again_when_the_blocks_switch() {
    // Stored: Proportional, with its type written by the webhook. The new manifest names no
    // type (client-side apply keeps the stored one) and carries a tokenThroughput block (D28).
    let mut old_spec = proportional_spec();
    old_spec["algorithm"]["type"] = json!("Proportional");
    let old = scaler(old_spec);
    let mut new_spec = proportional_spec();
    new_spec["algorithm"] = json!({
        "type": "Proportional",
        "tokenThroughput": {"serverTargetTokensPerSecond": "2000"}
    });
    let new = scaler(new_spec);
    let response = admit(
        app(Fake::default()),
        MUTATE_SCALERS_PATH,
        &review(
            "UPDATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&new),
            Some(&old),
        ),
    )
    .await;
    let stored = patched(&response, &new);
    assert_eq!(stored["spec"]["algorithm"]["type"], "TokenThroughput");
    assert_eq!(
        stored["spec"]["algorithm"]["tokenThroughput"]["stableWindowSeconds"],
        180
    );
}

#[tokio::test]
async fn mutation_leaves_status_writes_deletions_and_ill_typed_objects_alone() {
    let object = scaler(proportional_spec());
    let mut status_review = review(
        "UPDATE",
        "ModelDeploymentScaler",
        OPERATOR,
        Some(&object),
        Some(&object),
    );
    status_review["request"]["subResource"] = json!("status");
    let mut going = object.clone();
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut ill_typed = object.clone();
    ill_typed["spec"]["roles"][0]["maxReplicas"] = json!("many");
    for case in [
        status_review,
        review(
            "UPDATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&going),
            Some(&going),
        ),
        // Mutation runs before the schema check, which refuses this one with its own error.
        review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&ill_typed),
            None,
        ),
    ] {
        let response = admit(app(Fake::default()), MUTATE_SCALERS_PATH, &case).await;
        assert_eq!(response["allowed"], true);
        assert!(response.get("patch").is_none(), "{response}");
    }
}

#[tokio::test]
async fn an_invalid_scaler_is_refused_with_every_finding() {
    let mut spec = proportional_spec();
    spec["roles"][0]["minReplicas"] = json!(9);
    spec["sampling"] = json!({"intervalSeconds": 1});
    let object = scaler(spec);
    let response = admit(
        app(Fake::default()),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(response["status"]["reason"], "Invalid");
    assert_eq!(
        message(&response),
        "ModelDeploymentScaler llm: invalid (ModelDeployment \"llm-serving\" not found: target-dependent rules skipped)\n  \
         spec.roles[0].minReplicas: 9 is greater than maxReplicas 8; the minimum must not exceed the maximum\n  \
         spec.sampling.intervalSeconds: 1 is out of range; allowed is 5 to 300"
    );
}

#[tokio::test]
async fn the_target_is_looked_up_and_its_rules_apply() {
    let mut target = server_target();
    target["spec"]["roles"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "extra", "replicas": 1}));
    let object = scaler(proportional_spec());
    let response = admit(
        app(with_target(&target)),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], false);
    let text = message(&response);
    assert!(
        text.starts_with("ModelDeploymentScaler llm: invalid (checked against ModelDeployment \"llm-serving\")\n  spec.roles: target role \"extra\""),
        "{text}"
    );
    // With the matching target, the same scaler passes.
    let response = admit(
        app(with_target(&server_target())),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn warnings_travel_in_the_warnings_field() {
    let mut target = server_target();
    target["spec"]["roles"][0]["kind"] = json!("Reranker");
    let object = scaler(proportional_spec());
    let response = admit(
        app(with_target(&target)),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(
        response["allowed"], true,
        "an unknown kind under Proportional is a warning (D31)"
    );
    // The finding as `mds validate` words it, without its "warning: " (kubectl adds its own).
    assert_eq!(
        warnings(&response),
        vec![
            "spec.roles[0]: role \"server\" has kind \"Reranker\" on the target, which the scaler \
             does not know; Proportional plans it from its own metric, but a token algorithm could not"
        ]
    );
}

#[tokio::test]
async fn a_failed_target_lookup_skips_target_rules_and_says_so() {
    let fake = Fake {
        failure: Some(LookupError::Failed("connection refused".into())),
        ..Fake::default()
    };
    let object = scaler(proportional_spec());
    let response = admit(
        app(fake),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        warnings(&response),
        vec![
            "ModelDeployment \"llm-serving\" could not be read (connection refused): target-dependent rules skipped"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_target_lookup_ends_in_a_timeout_warning() {
    let fake = Fake {
        hang: true,
        ..Fake::default()
    };
    let object = scaler(proportional_spec());
    let response = admit(
        app(fake),
        VALIDATE_SCALERS_PATH,
        &review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        ),
    )
    .await;
    assert_eq!(response["allowed"], true);
    assert!(
        warnings(&response)[0].contains("the lookup took longer than 2000 ms"),
        "{response}"
    );
}

#[tokio::test]
async fn updates_are_judged_against_the_old_object_unless_the_spec_is_unchanged() {
    let mut stored: ModelDeploymentScaler =
        serde_json::from_value(scaler(proportional_spec())).unwrap();
    default_spec(&mut stored.spec);
    let old = serde_json::to_value(&stored).unwrap();
    // Retargeting is refused: the reference is immutable.
    let mut moved = old.clone();
    moved["spec"]["targetRef"]["name"] = json!("other");
    let response = admit(
        app(Fake::default()),
        VALIDATE_SCALERS_PATH,
        &review(
            "UPDATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&moved),
            Some(&old),
        ),
    )
    .await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("spec.targetRef.name"),
        "{response}"
    );
    // A label or finalizer change passes even though the target now breaks a rule.
    let mut target = server_target();
    target["spec"]["roles"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "extra"}));
    let mut labelled = old.clone();
    labelled["metadata"]["finalizers"] = json!(["worker.gpustack.ai/binding"]);
    let response = admit(
        app(with_target(&target)),
        VALIDATE_SCALERS_PATH,
        &review(
            "UPDATE",
            "ModelDeploymentScaler",
            OPERATOR,
            Some(&labelled),
            Some(&old),
        ),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    // Also for a scaler stored before the webhook defaulted it.
    let undefaulted = scaler(proportional_spec());
    let mut labelled = undefaulted.clone();
    labelled["metadata"]["labels"] = json!({"team": "search"});
    let response = admit(
        app(with_target(&target)),
        VALIDATE_SCALERS_PATH,
        &review(
            "UPDATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&labelled),
            Some(&undefaulted),
        ),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    // A spec change is judged against the target as it is now.
    let mut resized = old.clone();
    resized["spec"]["roles"][0]["maxReplicas"] = json!(10);
    let response = admit(
        app(with_target(&target)),
        VALIDATE_SCALERS_PATH,
        &review(
            "UPDATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&resized),
            Some(&old),
        ),
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).contains("target role \"extra\""),
        "{response}"
    );
}

/// Found by the `webhook` fuzz target: a review whose kind was not `AdmissionReview` was
/// answered, and the answer repeated that kind, so it was no AdmissionReview either.
#[tokio::test]
async fn a_review_of_another_kind_or_version_gets_400_naming_it() {
    let object = scaler(proportional_spec());
    for (field, value) in [
        ("kind", "AdmissyonReview"),
        ("apiVersion", "admission.k8s.io/v1beta1"),
    ] {
        let mut body = review(
            "CREATE",
            "ModelDeploymentScaler",
            "alice",
            Some(&object),
            None,
        );
        body[field] = json!(value);
        for path in [MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH] {
            let (status, said) = post(
                app(Fake::default()),
                path,
                serde_json::to_vec(&body).unwrap(),
            )
            .await;
            assert_eq!(status, 400, "{said}");
            let said = said.as_str().unwrap();
            assert!(
                said.contains(value)
                    && said.contains("not an AdmissionReview of admission.k8s.io/v1"),
                "{said}"
            );
        }
    }
}

/// Found by the webhook fuzz target: a byte that is not UTF-8 inside a string the webhook
/// does not read was answered 200, as if the body were JSON.
#[tokio::test]
async fn a_body_that_is_not_utf8_gets_400_naming_it() {
    let object = scaler(proportional_spec());
    let mut body = review(
        "CREATE",
        "ModelDeploymentScaler",
        "alice",
        Some(&object),
        None,
    );
    // A field no reader knows, so only a check of the whole body sees the byte.
    body["request"]["unread"] = json!("PLACEHOLDER");
    let text = serde_json::to_vec(&body).unwrap();
    let at = text.windows(11).position(|w| w == b"PLACEHOLDER").unwrap();
    let mut bytes = text.clone();
    bytes[at] = 0xE9; // Latin-1 'é', not UTF-8
    for path in [MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH] {
        let (status, said) = post(app(Fake::default()), path, bytes.clone()).await;
        assert_eq!(status, 400, "{said}");
        assert!(said.as_str().unwrap().contains("not UTF-8 JSON"), "{said}");
        // The same body in UTF-8 is answered.
        let (status, said) = post(app(Fake::default()), path, text.clone()).await;
        assert_eq!(status, 200, "{said}");
    }
}

#[tokio::test]
async fn bodies_that_are_not_reviews_get_400_with_the_reason() {
    for path in [MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH] {
        let (status, body) = post(app(Fake::default()), path, b"{not json".to_vec()).await;
        assert_eq!(status, 400);
        assert!(
            body.as_str()
                .unwrap()
                .starts_with("the body is not an AdmissionReview"),
            "{body}"
        );
        let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        let (status, body) = post(
            app(Fake::default()),
            path,
            serde_json::to_vec(&no_request).unwrap(),
        )
        .await;
        assert_eq!(status, 400);
        assert_eq!(
            body,
            Value::String("the AdmissionReview has no request\n".into())
        );
    }
}
