//! The validating webhook for `ModelDeployment`: the binding fence (spec *Binding fence*,
//! D24), decided by `mds_api::fence`; this shell types the objects and looks the scaler up.

use std::time::Duration;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, Operation};
use mds_api::fence::{self, FenceRequest, NamedScaler, Rule, Verdict};
use mds_api::target::ModelDeployment;

use crate::ports::{self, ScalerLookup};
use crate::review::{self, Request};

/// Decides one request on a ModelDeployment, and the rule that refused it, if one did.
/// `operator_user`, when set, is the extra identity check of binds, commits and releases (D24);
/// a scaler lookup may take at most `timeout`.
pub async fn fence(
    request: &Request,
    scalers: &dyn ScalerLookup,
    operator_user: Option<&str>,
    timeout: Duration,
) -> (AdmissionResponse, Option<Rule>) {
    let operation = match request.operation {
        Operation::Create => fence::Operation::Create,
        Operation::Update => fence::Operation::Update,
        Operation::Delete => fence::Operation::Delete,
        Operation::Connect => return (review::allow(request), None),
    };
    // Status is GPUStack's, and neither counts nor annotations live there.
    if request.sub_resource.is_some() {
        return (review::allow(request), None);
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
            (review::allow(request), None)
        }
        Verdict::Denied { rule, message } => {
            tracing::info!(target_name = %request.name, user = fence_request.username, %rule, "fence refused");
            (
                review::deny(request, &message, "Forbidden", 403),
                Some(rule),
            )
        }
    }
}

/// An object that does not read as a ModelDeployment: the fence judges what still reads of it
/// (`mds_api::fence::decide_unreadable`).
fn unreadable(request: &Request, why: &str) -> (AdmissionResponse, Option<Rule>) {
    let raw = |object: Option<&DynamicObject>| object.and_then(|o| serde_json::to_value(o).ok());
    let (old, new) = (
        raw(request.old_object.as_ref()),
        raw(request.object.as_ref()),
    );
    match fence::decide_unreadable(old.as_ref(), new.as_ref(), &request.name, why) {
        Verdict::Allowed(_) => {
            tracing::warn!(target_name = %request.name, %why, "ModelDeployment does not read; scaler annotations and counts untouched, so admitted");
            (review::allow(request), None)
        }
        Verdict::Denied { rule, message } => (
            review::deny(request, &message, "Forbidden", 403),
            Some(rule),
        ),
    }
}
