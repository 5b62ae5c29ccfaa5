//! The validating webhook for `ModelDeployment`: the binding fence (spec *Binding fence*,
//! D24), decided by `mds_api::fence`; this shell types the objects and looks the scaler up.

use std::time::Duration;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, Operation};
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{self, FenceRequest, NamedScaler, Verdict};
use mds_api::target::ModelDeployment;
use serde_json::Value;

use crate::ports::{self, ScalerLookup};
use crate::review::{self, Request};

/// Decides one request on a ModelDeployment.
/// `operator_user`, when set, is the extra identity check of binds, commits and releases (D24);
/// a scaler lookup may take at most `timeout`.
pub async fn fence(
    request: &Request,
    scalers: &dyn ScalerLookup,
    operator_user: Option<&str>,
    timeout: Duration,
) -> AdmissionResponse {
    let operation = match request.operation {
        Operation::Create => fence::Operation::Create,
        Operation::Update => fence::Operation::Update,
        Operation::Delete => fence::Operation::Delete,
        Operation::Connect => return review::allow(request),
    };
    // Status is GPUStack's, and neither counts nor annotations live there.
    if request.sub_resource.is_some() {
        return review::allow(request);
    }
    let read =
        |object: Option<&DynamicObject>| object.map(review::typed::<ModelDeployment>).transpose();
    let (old, new) = match (
        read(request.old_object.as_ref()),
        read(request.object.as_ref()),
    ) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(why), _) | (_, Err(why)) => return unreadable(request, &why),
    };
    let mut fence_request = FenceRequest {
        operation,
        old: old.as_ref(),
        new: new.as_ref(),
        username: request.user_info.username.as_deref().unwrap_or_default(),
        operator_user,
        named_scaler: NamedScaler::NotLookedUp,
    };
    if let Some(scaler) = fence::scaler_to_look_up(&fence_request) {
        let namespace = request.namespace.as_deref().unwrap_or_default();
        fence_request.named_scaler =
            match ports::within(timeout, scalers.scaler(namespace, &scaler)).await {
                Ok(None) => NamedScaler::Absent,
                Ok(Some(facts)) => NamedScaler::Present(facts),
                Err(e) => NamedScaler::Failed(e.to_string()),
            };
    }
    match fence::decide(&fence_request) {
        Verdict::Allowed(why) => {
            tracing::debug!(target_name = %request.name, user = fence_request.username, ?why, "fence admitted");
            review::allow(request)
        }
        Verdict::Denied { rule, message } => {
            tracing::info!(target_name = %request.name, user = fence_request.username, %rule, "fence refused");
            review::deny(request, &message, "Forbidden", 403)
        }
    }
}

fn scaler_annotation<'a>(object: Option<&'a DynamicObject>, key: &str) -> Option<&'a str> {
    object?
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `spec.roles[].name` and `.replicas` read leniently from the raw object, or `None` when even
/// that shape is not there.
fn raw_counts(object: Option<&DynamicObject>) -> Option<Vec<(Value, Value)>> {
    let roles = object?.data.get("spec")?.get("roles")?.as_array()?;
    Some(
        roles
            .iter()
            .map(|r| {
                let field = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
                (field("name"), field("replicas"))
            })
            .collect(),
    )
}

/// An object that does not read as a ModelDeployment: the fence cannot judge it fully. Such a
/// write passes while it leaves both scaler annotations as they are and moves no count that can
/// still be read (GPUStack's own writes on an object whose shape this build does not know, and
/// nothing the scaler could plan on anyway); otherwise it is refused.
fn unreadable(request: &Request, why: &str) -> AdmissionResponse {
    let (old, new) = (request.old_object.as_ref(), request.object.as_ref());
    let untouched = |key| scaler_annotation(old, key) == scaler_annotation(new, key);
    let annotations_kept = untouched(BINDING_ANNOTATION) && untouched(DECISION_ANNOTATION);
    let unclaimed = scaler_annotation(new, BINDING_ANNOTATION).is_none();
    let counts_kept = match (raw_counts(old), raw_counts(new)) {
        (Some(before), Some(after)) => before == after,
        _ => true,
    };
    if annotations_kept && (unclaimed || counts_kept) {
        tracing::warn!(target_name = %request.name, %why, "ModelDeployment does not read; scaler annotations and counts untouched, so admitted");
        return review::allow(request);
    }
    let message = format!(
        "binding fence: ModelDeployment {:?} does not read as a ModelDeployment ({why}), and \
         this write changes a scaler annotation or the replica counts of a bound target, so \
         the fence cannot tell whether it is allowed; fix the field named",
        request.name
    );
    review::deny(request, &message, "Forbidden", 403)
}
