//! The validating webhook for `ModelDeployment`: the binding fence (spec *Binding fence*,
//! D24), decided by `mds_api::fence`; this shell types the objects and looks the scaler up.

use std::time::Duration;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, Operation};
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{self, BoundScaler, FenceRequest, Verdict};
use mds_api::target::ModelDeployment;

use crate::ports::{self, ScalerLookup};
use crate::review::{self, Request};

fn has_scaler_annotation(object: Option<&DynamicObject>) -> bool {
    object
        .and_then(|o| o.metadata.annotations.as_ref())
        .is_some_and(|a| a.contains_key(BINDING_ANNOTATION) || a.contains_key(DECISION_ANNOTATION))
}

/// Decides one request on a ModelDeployment.
/// `operator_user` is the operator's service account user name (D24); a scaler lookup may take
/// at most `timeout`.
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
        bound_scaler: BoundScaler::NotLookedUp,
    };
    if let Some(scaler) = fence::scaler_to_look_up(&fence_request) {
        let namespace = request.namespace.as_deref().unwrap_or_default();
        fence_request.bound_scaler =
            match ports::within(timeout, scalers.scaler_uid(namespace, &scaler)).await {
                Ok(None) => BoundScaler::Absent,
                Ok(Some(uid)) => BoundScaler::Present { uid },
                Err(e) => BoundScaler::Failed(e.to_string()),
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

/// An object that does not read as a ModelDeployment: the fence cannot judge its counts. Such
/// a write passes while neither object carries a scaler annotation (nothing is bound, and no
/// write of another component should fail on our read model); otherwise it is refused.
fn unreadable(request: &Request, why: &str) -> AdmissionResponse {
    if !has_scaler_annotation(request.old_object.as_ref())
        && !has_scaler_annotation(request.object.as_ref())
    {
        tracing::warn!(target_name = %request.name, %why, "ModelDeployment does not read; unbound, so admitted");
        return review::allow(request);
    }
    let message = format!(
        "binding fence: ModelDeployment {:?} carries a scaler annotation but does not read as a \
         ModelDeployment ({why}), so the fence cannot tell whether this write moves a bound \
         target's counts; fix the field named",
        request.name
    );
    review::deny(request, &message, "Forbidden", 403)
}
