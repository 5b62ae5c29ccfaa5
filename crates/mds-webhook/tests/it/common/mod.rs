//! Shared by the webhook tests: AdmissionReview bodies shaped like the API server's, fake
//! lookups, and a helper that posts a body to the router in-process.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use mds_api::fence::ScalerFacts;
use mds_api::target::ModelDeployment;
use mds_testdata::{mk_role, mk_target};
use mds_webhook::ports::{LookupError, LookupFuture, Lookups, ScalerLookup, TargetLookup};
use mds_webhook::router::{WebhookState, router};
use serde_json::{Value, json};
use tower::ServiceExt as _;

pub const OPERATOR: &str = "system:serviceaccount:mds-system:mds";

/// Targets and scalers by (namespace, name); a missing entry is absent.
#[derive(Default, Clone)]
pub struct Fake {
    pub targets: BTreeMap<(String, String), ModelDeployment>,
    pub scalers: BTreeMap<(String, String), ScalerFacts>,
    /// Every lookup fails with this, when set.
    pub failure: Option<LookupError>,
    /// Every lookup never answers, when set (the handler's timeout must end it).
    pub hang: bool,
}

impl Fake {
    fn answer<'a, T: Send + 'a>(&'a self, value: Option<T>) -> LookupFuture<'a, Option<T>> {
        let failure = self.failure.clone();
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            match failure {
                Some(e) => Err(e),
                None => Ok(value),
            }
        })
    }
}

impl TargetLookup for Fake {
    fn target<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ModelDeployment>> {
        let found = self
            .targets
            .get(&(namespace.to_string(), name.to_string()))
            .cloned();
        self.answer(found)
    }
}

impl ScalerLookup for Fake {
    fn scaler<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ScalerFacts>> {
        let found = self
            .scalers
            .get(&(namespace.to_string(), name.to_string()))
            .cloned();
        self.answer(found)
    }
}

/// The webhook as deployed by default: the fence decides by content, no operator user.
pub fn app(fake: Fake) -> axum::Router {
    app_with_operator_user(fake, None)
}

pub fn app_with_operator_user(fake: Fake, operator_user: Option<&str>) -> axum::Router {
    let fake = Arc::new(fake);
    router(WebhookState {
        lookups: Lookups {
            targets: fake.clone(),
            scalers: fake,
        },
        operator_user: operator_user.map(str::to_string),
        lookup_timeout: Duration::from_secs(2),
        metrics: Default::default(),
    })
}

/// A review of `operation` on `kind` as the API server sends it (admission.k8s.io/v1).
pub fn review(
    operation: &str,
    kind: &str,
    user: &str,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let resource = format!("{}s", kind.to_lowercase());
    let source = object.or(old).expect("a review carries an object");
    let options_kind = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "worker.gpustack.ai", "version": "v1", "kind": kind},
            "resource": {"group": "worker.gpustack.ai", "version": "v1", "resource": resource},
            "requestKind": {"group": "worker.gpustack.ai", "version": "v1", "kind": kind},
            "requestResource": {"group": "worker.gpustack.ai", "version": "v1", "resource": resource},
            "name": source["metadata"]["name"],
            "namespace": "default",
            "operation": operation,
            "userInfo": {
                "username": user,
                "uid": "014fbff9a07c",
                "groups": ["system:authenticated"]
            },
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options_kind}
        }
    })
}

/// Posts `body` to `path`; returns the status and the body (JSON, or a string when it is not).
pub async fn post(app: axum::Router, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    let response = app
        .oneshot(request)
        .await
        .expect("the router always answers");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// Posts a review and returns its `response`, checking the envelope on the way.
pub async fn admit(app: axum::Router, path: &str, review: &Value) -> Value {
    let (status, body) = post(app, path, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{body}");
    assert_eq!(body["kind"], "AdmissionReview", "{body}");
    let response = body["response"].clone();
    assert_eq!(
        response["uid"], review["request"]["uid"],
        "the answer names the request"
    );
    response
}

/// The refusal message of a response (empty when allowed).
pub fn message(response: &Value) -> String {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON Patch of a mutating response (base64 text on the wire), applied to `object`.
pub fn patched(response: &Value, object: &Value) -> Value {
    use base64::Engine as _;
    let text = response["patch"]
        .as_str()
        .expect("the patch is base64 text");
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
    let mut doc = object.clone();
    json_patch::patch(&mut doc, &patch).expect("the patch applies");
    doc
}

/// A scaler object as stored in the cluster.
pub fn scaler(spec: Value) -> Value {
    json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm", "namespace": "default", "uid": "uid-1"},
        "spec": spec
    })
}

/// One Server role scaled on queue depth, with nothing defaulted.
pub fn proportional_spec() -> Value {
    json!({
        "targetRef": {"name": "llm-serving"},
        "roles": [{"name": "server", "maxReplicas": 8}],
        "algorithm": {"proportional": {
            "metric": "QueueDepth",
            "roleTargets": [{"name": "server", "target": "8"}]
        }}
    })
}

/// The target of [`proportional_spec`].
pub fn server_target() -> Value {
    mk_target("llm-serving")
        .router(None)
        .namespace("default")
        .uid("t-1")
        .role(mk_role("server").replicas(2).no_instance_type())
        .build()
}

pub fn md(value: &Value) -> ModelDeployment {
    serde_json::from_value(value.clone()).expect("a ModelDeployment")
}
