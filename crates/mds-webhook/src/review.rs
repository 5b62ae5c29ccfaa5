//! AdmissionReview v1 in and out, with kube's types (`kube::core::admission`): reading a body,
//! typing the request's objects, and the allow and deny answers.

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, Status};
use serde::de::DeserializeOwned;

/// One admission request; objects stay untyped until a handler asks for its type.
pub type Request = AdmissionRequest<DynamicObject>;

/// Reads an AdmissionReview body. The error says what is wrong with it; the router answers
/// it with HTTP 400, since the API server never sends such a body.
pub fn read(body: &[u8]) -> Result<Request, String> {
    // JSON is UTF-8, and serde_json checks only the strings it reads: a byte that is not
    // UTF-8 in a field nobody reads would be answered as if the body were JSON.
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("the body is not an AdmissionReview: it is not UTF-8 JSON ({e})"))?;
    let review: AdmissionReview<DynamicObject> = serde_json::from_str(text)
        .map_err(|e| format!("the body is not an AdmissionReview: {e}"))?;
    // The answer repeats the request's type; a body of another type would get an answer
    // that is not an AdmissionReview either.
    let types = &review.types;
    if types.api_version != "admission.k8s.io/v1" || types.kind != "AdmissionReview" {
        return Err(format!(
            "the body is a {:?} of {:?}, not an AdmissionReview of admission.k8s.io/v1",
            types.kind, types.api_version
        ));
    }
    review
        .try_into()
        .map_err(|_| "the AdmissionReview has no request".to_string())
}

/// An object of the request as `T`; the error names the field that does not fit.
pub fn typed<T: DeserializeOwned>(object: &DynamicObject) -> Result<T, String> {
    mds_api::decode::typed(object)
}

/// Admits the request as it is.
pub fn allow(request: &Request) -> AdmissionResponse {
    AdmissionResponse::from(request)
}

/// Refuses the request. `reason` and `code` are the Status the API server passes on to the
/// client (`Forbidden`/403 for the fence, `Invalid`/422 for validation); the message is shown
/// after "admission webhook ... denied the request: ".
pub fn deny(request: &Request, message: &str, reason: &str, code: u16) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    response.allowed = false;
    response.result = Status::failure(message, reason).with_code(code);
    response
}

/// Attaches warnings (kubectl prints each as "Warning: ...").
pub fn with_warnings(mut response: AdmissionResponse, warnings: Vec<String>) -> AdmissionResponse {
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// Whether an object of the request is being deleted (finalizers still running).
pub fn being_deleted(object: Option<&DynamicObject>) -> bool {
    object.is_some_and(|o| o.metadata.deletion_timestamp.is_some())
}

/// The response as the body the API server reads. kube's type writes `patch` (Go `[]byte`) as
/// an array of numbers; the API documents base64 text for it, so the patch is rewritten as
/// such here.
pub fn to_wire(response: AdmissionResponse) -> serde_json::Value {
    use base64::Engine as _;
    let patch = response.patch.clone();
    let mut body = serde_json::to_value(response.into_review())
        .unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}));
    if let (Some(patch), Some(slot)) = (patch, body.pointer_mut("/response/patch")) {
        *slot = base64::engine::general_purpose::STANDARD
            .encode(patch)
            .into();
    }
    body
}
