//! The words of the fence's refusals: who owns the target and how to get the counts back.

use super::{Changes, CountChange};
use crate::annotations::{BINDING_ANNOTATION, BindingPayload};

/// `decode 4 -> 6, prefill 2 -> 3`; a role added or removed shows as `(none)`.
pub(super) fn describe(changes: &[CountChange]) -> String {
    let parts: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {} -> {}", c.role, list(&c.before), list(&c.after)))
        .collect();
    parts.join(", ")
}

pub(super) fn list(counts: &[i32]) -> String {
    if counts.is_empty() {
        return "(none)".into();
    }
    let parts: Vec<String> = counts.iter().map(i32::to_string).collect();
    parts.join(",")
}

pub(super) fn owner(changes: &Changes<'_>, binding: &BindingPayload) -> String {
    format!(
        "ModelDeployment {:?} is bound to ModelDeploymentScaler {:?} (term {})",
        changes.name, binding.scaler_name, binding.term
    )
}

/// What a user can do to get the counts back: the same advice for every bound-target refusal.
pub(super) fn release_advice(changes: &Changes<'_>, binding: &BindingPayload) -> String {
    let namespace = changes
        .namespace
        .as_deref()
        .map(|ns| format!(" -n {ns}"))
        .unwrap_or_default();
    format!(
        "To change counts or these annotations by hand, release the binding first: suspend \
         the scaler (kubectl patch mds {name}{namespace} --type merge -p \
         '{{\"spec\":{{\"suspend\":true}}}}') or delete it, then retry once the \
         {BINDING_ANNOTATION} annotation is gone. A GitOps sync must ignore the replica counts \
         and both scaler annotations",
        name = binding.scaler_name
    )
}
