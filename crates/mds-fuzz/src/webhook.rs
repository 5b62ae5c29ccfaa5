//! Target 5: AdmissionReview bodies through the webhook router, in process (no TLS): the first
//! byte picks the path (scaler defaults, scaler validation, the fence), the rest is the body.
//! Oracles: every body gets an answer within the deadline (no hang), either 200 with an
//! AdmissionReview that answers the request's UID or a 4xx naming why, never a panic or a
//! 5xx. The lookups answer from memory: one target and one claiming scaler named `llm`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, header};
use mds_api::fence::ScalerFacts;
use mds_api::target::ModelDeployment;
use mds_testdata::mk_target;
use mds_webhook::ports::{LookupFuture, Lookups, ScalerLookup, TargetLookup};
use mds_webhook::router::{
    MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH, VALIDATE_TARGETS_PATH, WebhookState, router,
};
use tower::ServiceExt;

const PATHS: [&str; 3] = [
    MUTATE_SCALERS_PATH,
    VALIDATE_SCALERS_PATH,
    VALIDATE_TARGETS_PATH,
];

/// Far beyond any answer from memory; reaching it is a hang.
const DEADLINE: Duration = Duration::from_secs(10);

pub fn run(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let path = PATHS[usize::from(pick) % PATHS.len()];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let (status, answer) = runtime.block_on(async {
        let request = Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_vec()))
            .expect("a request");
        let response = tokio::time::timeout(DEADLINE, app().oneshot(request))
            .await
            .unwrap_or_else(|_| panic!("{path} did not answer within {DEADLINE:?}"))
            .expect("the router's service never fails");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the answer's body reads");
        (status, bytes)
    });
    if status.is_client_error() {
        assert!(!answer.is_empty(), "{path}: a {status} without a reason");
        return;
    }
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&answer));
    let review: serde_json::Value = serde_json::from_slice(&answer).expect("a 200 carries JSON");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    let asked: serde_json::Value = serde_json::from_slice(body).expect("a 200 answered JSON");
    assert_eq!(
        review["response"]["uid"], asked["request"]["uid"],
        "the answer is for another request"
    );
}

fn app() -> axum::Router {
    router(WebhookState {
        lookups: Lookups {
            targets: Arc::new(Known),
            scalers: Arc::new(Known),
        },
        operator_user: Some("system:serviceaccount:mds-system:mds".into()),
        lookup_timeout: Duration::from_secs(1),
        metrics: Default::default(),
    })
}

/// The cluster the lookups read: target `llm` and the scaler `llm` that claims it.
struct Known;

impl TargetLookup for Known {
    fn target<'a>(
        &'a self,
        _: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ModelDeployment>> {
        let found = (name == "llm").then(|| {
            mk_target("llm")
                .roles(&[("prefill", "Prefill", 2), ("decode", "Decode", 3)])
                .typed()
        });
        Box::pin(async move { Ok(found) })
    }
}

impl ScalerLookup for Known {
    fn scaler<'a>(&'a self, _: &'a str, name: &'a str) -> LookupFuture<'a, Option<ScalerFacts>> {
        let found = (name == "llm").then(|| ScalerFacts {
            uid: "scaler-uid-1".into(),
            target_name: "llm".into(),
            not_claiming: None,
            status_target_uid: None,
            status_term: None,
        });
        Box::pin(async move { Ok(found) })
    }
}
