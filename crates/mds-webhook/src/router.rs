//! The HTTP routes: one per webhook, plus `/healthz`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::core::admission::AdmissionResponse;

use crate::metrics::{METRICS_PATH, WebhookMetrics};
use crate::ports::Lookups;
use crate::review;
use crate::{scaler, target};

/// Liveness: answers 200 while the server accepts connections.
pub const HEALTHZ_PATH: &str = "/healthz";
/// Mutating webhook for ModelDeploymentScaler: stores defaults and the algorithm type.
pub const MUTATE_SCALERS_PATH: &str = "/mutate/modeldeploymentscalers";
/// Validating webhook for ModelDeploymentScaler: every admission rule.
pub const VALIDATE_SCALERS_PATH: &str = "/validate/modeldeploymentscalers";
/// Validating webhook for ModelDeployment: the binding fence.
pub const VALIDATE_TARGETS_PATH: &str = "/validate/modeldeployments";

/// An AdmissionReview carries the object and the old object, each up to etcd's 1.5 MiB, plus
/// the request's own fields; anything larger is not from the API server.
pub const MAX_REVIEW_BYTES: usize = 4 * 1024 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct WebhookState {
    pub lookups: Lookups,
    /// The operator's service account user name (`system:serviceaccount:NS:NAME`, D24).
    pub operator_user: Option<String>,
    /// How long one target or scaler lookup may take.
    pub lookup_timeout: Duration,
    /// Reviews answered and the fence's refusals.
    pub metrics: Arc<WebhookMetrics>,
}

pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route(HEALTHZ_PATH, get(|| async { "ok\n" }))
        .route(METRICS_PATH, get(metrics))
        .route(MUTATE_SCALERS_PATH, post(mutate_scalers))
        .route(VALIDATE_SCALERS_PATH, post(validate_scalers))
        .route(VALIDATE_TARGETS_PATH, post(validate_targets))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(Arc::new(state))
}

/// The response wrapped in a review, as the API server expects it.
fn reply(response: AdmissionResponse) -> Response {
    axum::Json(review::to_wire(response)).into_response()
}

/// A body that is not an AdmissionReview: the API server never sends one.
fn bad_request(why: String) -> Response {
    (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response()
}

async fn metrics(State(state): State<Arc<WebhookState>>) -> Response {
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    (
        [(axum::http::header::CONTENT_TYPE, content_type)],
        state.metrics.encode(),
    )
        .into_response()
}

async fn mutate_scalers(State(state): State<Arc<WebhookState>>, body: Bytes) -> Response {
    match review::read(&body) {
        Ok(request) => {
            let response = scaler::mutate(&request);
            state.metrics.review("mutate-scalers", response.allowed);
            reply(response)
        }
        Err(why) => bad_request(why),
    }
}

async fn validate_scalers(State(state): State<Arc<WebhookState>>, body: Bytes) -> Response {
    match review::read(&body) {
        Ok(request) => {
            let targets = state.lookups.targets.as_ref();
            let response = scaler::validate(&request, targets, state.lookup_timeout).await;
            state.metrics.review("validate-scalers", response.allowed);
            reply(response)
        }
        Err(why) => bad_request(why),
    }
}

async fn validate_targets(State(state): State<Arc<WebhookState>>, body: Bytes) -> Response {
    match review::read(&body) {
        Ok(request) => {
            let scalers = state.lookups.scalers.as_ref();
            let operator = state.operator_user.as_deref();
            let (response, refused) =
                target::fence(&request, scalers, operator, state.lookup_timeout).await;
            state.metrics.review("validate-targets", response.allowed);
            if let Some(rule) = refused {
                let namespace = request.namespace.as_deref().unwrap_or_default();
                let at = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                let rule = format!("{rule:?}");
                state
                    .metrics
                    .fence_refused(namespace, &request.name, &rule, at);
            }
            reply(response)
        }
        Err(why) => bad_request(why),
    }
}
