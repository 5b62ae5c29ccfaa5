//! What the API server's admission does to a write: the stored schema's check, our scaler
//! webhook's defaults and validation, and the binding fence on a target write (its scaler
//! looked up in the cluster), each refusal shaped as the API server answers it.

use mds_api::ModelDeploymentScaler;
use mds_api::fence::{self, FenceRequest, NamedScaler, Operation, ScalerFacts, Verdict};
use mds_api::target::ModelDeployment;
use serde_json::Value;

use super::{Kind, State, key_of, typed};
use crate::ports::WriteError;

pub(super) fn check<T: serde::de::DeserializeOwned>(
    doc: Value,
    what: &str,
) -> Result<Value, WriteError> {
    typed::<T>(&doc, what).map_err(|e| WriteError::Refused(format!("{e} (HTTP 422)")))?;
    Ok(doc)
}

/// Defaults and validates a scaler as our webhook does; the status is the stored one's.
pub(super) fn admit_scaler(
    st: &State,
    doc: Value,
    old: Option<&Value>,
) -> Result<Value, WriteError> {
    let refused = |e: String| WriteError::Refused(format!("{e} (HTTP 422)"));
    let mut scaler: ModelDeploymentScaler =
        typed(&doc, "ModelDeploymentScaler").map_err(refused)?;
    let old_typed: Option<ModelDeploymentScaler> = old
        .map(|o| typed(o, "stored scaler"))
        .transpose()
        .map_err(refused)?;
    match &old_typed {
        Some(o) => mds_api::defaults::default_spec_on_update(&mut scaler.spec, &o.spec),
        None => mds_api::defaults::default_spec(&mut scaler.spec),
    }
    let ns = scaler.metadata.namespace.clone().unwrap_or_default();
    let target_key = (Kind::Target, ns, scaler.spec.target_ref.name.clone());
    let target: Option<ModelDeployment> = st
        .objects
        .get(&target_key)
        .and_then(|t| typed(t, "target").ok());
    let report = mds_api::validation::validate_scaler(&scaler, old_typed.as_ref(), target.as_ref());
    if let Some(first) = report.errors.first() {
        return Err(WriteError::Refused(format!(
            "{}: {} (HTTP 422)",
            first.path, first.message
        )));
    }
    scaler.status = old_typed.and_then(|o| o.status);
    serde_json::to_value(&scaler).map_err(|e| refused(e.to_string()))
}

/// Runs the binding fence on a target write, looking the named scaler up in the cluster.
pub(super) fn fence_target(st: &State, old: Option<&Value>, new: &Value) -> Result<(), WriteError> {
    let refused = |e: String| WriteError::Refused(format!("{e} (HTTP 422)"));
    let new_md: ModelDeployment = typed(new, "ModelDeployment").map_err(refused)?;
    let old_md: Option<ModelDeployment> = old
        .map(|o| typed(o, "stored target"))
        .transpose()
        .map_err(refused)?;
    let mut request = FenceRequest {
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        old: old_md.as_ref(),
        new: Some(&new_md),
        username: "",
        operator_user: None,
        named_scaler: NamedScaler::NotLookedUp,
    };
    if let Some(name) = fence::scaler_to_look_up(&request) {
        let (ns, _) = key_of(new);
        request.named_scaler = match st.objects.get(&(Kind::Scaler, ns, name)) {
            None => NamedScaler::Absent,
            Some(doc) => match typed::<ModelDeploymentScaler>(doc, "scaler") {
                Ok(s) => ScalerFacts::of(&s).map_or(NamedScaler::Absent, NamedScaler::Present),
                Err(e) => NamedScaler::Failed(e),
            },
        };
    }
    match fence::decide(&request) {
        Verdict::Allowed(_) => Ok(()),
        Verdict::Denied { message, .. } => Err(WriteError::Refused(format!(
            "admission webhook \"fence.modeldeployments.worker.gpustack.ai\" denied the request: {message} (HTTP 403)"
        ))),
    }
}
