//! The two `ModelDeploymentScaler` webhooks: stored defaults as a JSON Patch (D25, D28) and
//! every admission rule with the target looked up (messages as `mds validate` prints them).

use std::time::Duration;

use json_patch::Patch;
use kube::core::admission::{AdmissionResponse, Operation};
use mds_api::ModelDeploymentScaler;
use mds_api::defaults::{default_spec, default_spec_on_update};
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::validation::{TargetCheck, validate_scaler};
use serde_json::{Value, json};

use crate::ports::{self, TargetLookup};
use crate::review::{self, Request};

/// Whether a request is one the scaler webhooks judge: a write of the object itself (not its
/// status) that is not part of a deletion.
fn judged(request: &Request) -> bool {
    matches!(request.operation, Operation::Create | Operation::Update)
        && request.sub_resource.is_none()
        && request.object.is_some()
        && !review::being_deleted(request.object.as_ref())
}

/// The stored object of an UPDATE, when it reads as a scaler.
fn old_scaler(request: &Request) -> Option<ModelDeploymentScaler> {
    if request.operation != Operation::Update {
        return None;
    }
    review::typed(request.old_object.as_ref()?).ok()
}

/// The spec as the API server will store it: defaults written, the algorithm type inferred
/// (on UPDATE inferred again when the blocks switched, D28).
fn defaulted(
    spec: &ModelDeploymentScalerSpec,
    old: Option<&ModelDeploymentScaler>,
) -> ModelDeploymentScalerSpec {
    let mut spec = spec.clone();
    match old {
        Some(old) => default_spec_on_update(&mut spec, &old.spec),
        None => default_spec(&mut spec),
    }
    spec
}

/// The mutating webhook: a JSON Patch that stores the defaults.
pub fn mutate(request: &Request) -> AdmissionResponse {
    let allow = review::allow(request);
    if !judged(request) {
        return allow;
    }
    let Some(object) = request.object.as_ref() else {
        return allow;
    };
    // Mutation runs before the schema check; an object that does not read as a scaler is left
    // for the API server to refuse with its own type error.
    let Ok(scaler) = review::typed::<ModelDeploymentScaler>(object) else {
        return allow;
    };
    let stored = defaulted(&scaler.spec, old_scaler(request).as_ref());
    let raw = match serde_json::to_value(object) {
        Ok(raw) => raw,
        Err(e) => return review::deny(request, &e.to_string(), "InternalError", 500),
    };
    match defaults_patch(&raw, &scaler.spec, &stored) {
        Ok(None) => allow,
        Ok(Some(patch)) => match allow.with_patch(patch) {
            Ok(response) => response,
            Err(e) => review::deny(request, &e.to_string(), "InternalError", 500),
        },
        Err(why) => review::deny(
            request,
            &format!("the defaults of ModelDeploymentScaler could not be stored: {why}"),
            "InternalError",
            500,
        ),
    }
}

/// The patch from the request's spec to the stored one, checked against the request's own
/// object: applied to it, the spec must read back as `after`. `None` when nothing changes.
pub fn defaults_patch(
    raw: &Value,
    before: &ModelDeploymentScalerSpec,
    after: &ModelDeploymentScalerSpec,
) -> Result<Option<Patch>, String> {
    let to_value = |spec| serde_json::to_value(spec).map_err(|e: serde_json::Error| e.to_string());
    let patch = json_patch::diff(
        &json!({ "spec": to_value(before)? }),
        &json!({ "spec": to_value(after)? }),
    );
    if patch.0.is_empty() {
        return Ok(None);
    }
    let mut applied = raw.clone();
    json_patch::patch(&mut applied, &patch)
        .map_err(|e| format!("the patch does not apply: {e}"))?;
    let read_back: ModelDeploymentScalerSpec =
        serde_json::from_value(applied["spec"].clone()).map_err(|e| e.to_string())?;
    if read_back != *after {
        return Err("the patched spec differs from the defaulted one".into());
    }
    Ok(Some(patch))
}

/// The validating webhook: every admission rule, the target looked up through `targets`.
pub async fn validate(
    request: &Request,
    targets: &dyn TargetLookup,
    timeout: Duration,
) -> AdmissionResponse {
    if !judged(request) {
        return review::allow(request);
    }
    let Some(object) = request.object.as_ref() else {
        return review::allow(request);
    };
    let name = object.metadata.name.clone().unwrap_or_default();
    let mut scaler: ModelDeploymentScaler = match review::typed(object) {
        Ok(scaler) => scaler,
        Err(why) => {
            let message = format!(
                "ModelDeploymentScaler {name}: invalid (the object does not read as a scaler)\n  {why}"
            );
            return review::deny(request, &message, "Invalid", 422);
        }
    };
    let old = old_scaler(request);
    scaler.spec = defaulted(&scaler.spec, old.as_ref());
    // A write that leaves the spec as stored (labels, finalizers, the controller's own
    // metadata) is not judged again: a target that changed since must not block it. The old
    // spec is defaulted too, in case it was stored before this webhook was installed.
    if old
        .as_ref()
        .is_some_and(|o| defaulted(&o.spec, None) == scaler.spec)
    {
        return review::allow(request);
    }
    let namespace = request
        .namespace
        .clone()
        .or_else(|| object.metadata.namespace.clone())
        .unwrap_or_default();
    let target_name = scaler.spec.target_ref.name.clone();
    let lookup = ports::within(timeout, targets.target(&namespace, &target_name)).await;
    let lookup_error = lookup.as_ref().err().map(ToString::to_string);
    let (target, check) = match (&lookup, &lookup_error) {
        (Ok(Some(target)), _) => (Some(target), TargetCheck::Checked(&target_name)),
        (Ok(None), _) => (None, TargetCheck::NotFound(&target_name)),
        (Err(_), reason) => (
            None,
            TargetCheck::Unavailable {
                name: &target_name,
                reason: reason.as_deref().unwrap_or_default(),
            },
        ),
    };
    let report = validate_scaler(&scaler, old.as_ref(), target);
    let mut warnings = Vec::new();
    if lookup_error.is_some() {
        // Not silent: the client sees that the target-dependent rules did not run.
        warnings.push(check.to_string());
    }
    warnings.extend(report.warnings.iter().map(ToString::to_string));
    let response = if report.is_valid() {
        review::allow(request)
    } else {
        review::deny(
            request,
            &report.render(&name, &check, false),
            "Invalid",
            422,
        )
    };
    review::with_warnings(response, warnings)
}
