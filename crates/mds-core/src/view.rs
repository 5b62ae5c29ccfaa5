//! What a pass reads from its input, read once before anything is decided, and the case the
//! pass is in. Rules that must see the pass's own records (an external change after our own
//! rollback, say) ask the view with the status as it stands then.

use std::collections::BTreeMap;

use mds_api::annotations::{BINDING_ANNOTATION, BindingPayload};
use mds_api::spec::Mode;
use mds_api::status::{ModelDeploymentScalerStatus, ReplicaVector};
use mds_api::target::{ModelDeployment, Retirement, WorkloadAdmission};

use crate::conditions::BOUND;
use crate::patch::TargetShape;
use crate::protocol;
use crate::{Input, Target};

/// A pass that cannot look at the target.
pub(crate) enum Unreadable {
    NoTarget,
    /// The binding annotation does not parse: why.
    InvalidBinding(String),
}

/// The case a pass with a readable target is in, in the order the cases are tested.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Case {
    /// The scaler is being deleted: release, let the finalizer go.
    Deleting,
    /// The target was recreated and no spec edit acknowledged it yet.
    Replaced,
    Suspended,
    /// Bound to another scaler: report recommendations only.
    Foreign {
        owner: String,
    },
    Shadow,
    /// Active and bound by us, under this term.
    Owner {
        term: i64,
    },
    /// Active and unbound: bind.
    Acquiring,
}

/// The target recreated under the same name: the UID the status knows.
pub(crate) struct Replacement {
    pub(crate) known_uid: String,
    /// The scaler generation `TargetReplaced` was first reported at.
    pub(crate) reported_at: Option<i64>,
    /// A spec edit since that report acknowledges the replacement.
    pub(crate) acknowledged: bool,
}

pub(crate) struct View<'a> {
    pub(crate) target: &'a Target<'a>,
    pub(crate) md: &'a ModelDeployment,
    pub(crate) uid: String,
    /// The target's replica counts by role.
    pub(crate) current: ReplicaVector,
    pub(crate) shape: TargetShape,
    pub(crate) binding: Option<BindingPayload>,
    /// The binding annotation's exact text: writes test it (D3), not a re-encoding of it.
    pub(crate) binding_text: String,
    /// The binding names this scaler.
    pub(crate) ours: bool,
    pub(crate) replacement: Option<Replacement>,
    /// The retirement the target reports, any ordinal, any state.
    pub(crate) retirement: Option<&'a Retirement>,
    /// D18: an ordinal is not admitted anywhere in the target (ours or not).
    pub(crate) unadmitted_anywhere: bool,
    /// Without a router GPUStack never confirms a retirement (TARGET.md section 5).
    pub(crate) router_missing: bool,
    /// Role name → instanceType (empty when unset).
    pub(crate) instance_types: BTreeMap<String, String>,
    /// The scaler generation moved past the status's `observedGeneration`: the spec changed
    /// since the status we read was written.
    pub(crate) spec_changed_since_status: bool,
}

impl<'a> View<'a> {
    pub(crate) fn read(input: &'a Input<'a>) -> Result<View<'a>, Unreadable> {
        let target = input.target.as_ref().ok_or(Unreadable::NoTarget)?;
        let md = target.deployment;
        let binding = match protocol::annotation(md, BINDING_ANNOTATION).map(BindingPayload::parse)
        {
            None => None,
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => return Err(Unreadable::InvalidBinding(e.to_string())),
        };
        let scaler = &input.scaler;
        let uid = md.metadata.uid.clone().unwrap_or_default();
        Ok(View {
            target,
            md,
            current: protocol::current_vector(md),
            shape: shape(md),
            ours: binding.as_ref().is_some_and(|b| b.scaler_uid == scaler.uid),
            binding,
            binding_text: protocol::annotation(md, BINDING_ANNOTATION)
                .unwrap_or_default()
                .to_string(),
            replacement: replacement(input, &uid),
            uid,
            retirement: md.status.as_ref().and_then(|s| s.retirement.as_ref()),
            unadmitted_anywhere: target
                .admission
                .values()
                .any(|a| *a != WorkloadAdmission::Admitted),
            router_missing: !md.has_router(),
            instance_types: md
                .spec
                .roles
                .iter()
                .map(|r| (r.name.clone(), r.instance_type.clone().unwrap_or_default()))
                .collect(),
            spec_changed_since_status: scaler
                .status
                .observed_generation
                .is_some_and(|g| scaler.generation > g),
        })
    }

    pub(crate) fn case(&self, input: &Input) -> Case {
        let spec = input.scaler.spec;
        if input.scaler.deleting {
            Case::Deleting
        } else if self.replacement.as_ref().is_some_and(|r| !r.acknowledged) {
            Case::Replaced
        } else if spec.suspend.unwrap_or(false) {
            Case::Suspended
        } else if let Some(other) = self.binding.as_ref().filter(|_| !self.ours) {
            Case::Foreign {
                owner: other.scaler_name.clone(),
            }
        } else if spec.mode.unwrap_or_default() != Mode::Active {
            Case::Shadow
        } else if let Some(ours) = self.owned() {
            Case::Owner { term: ours.term }
        } else {
            Case::Acquiring
        }
    }

    /// The binding, when it is ours.
    pub(crate) fn owned(&self) -> Option<&BindingPayload> {
        self.binding.as_ref().filter(|_| self.ours)
    }

    /// The target's generation moved past what `status.lastCommit` expects: someone else
    /// changed it (D22). Asked with the status as it stands, so our own record counts.
    pub(crate) fn external_change(&self, status: &ModelDeploymentScalerStatus) -> bool {
        self.md
            .metadata
            .generation
            .zip(
                status
                    .last_commit
                    .as_ref()
                    .and_then(|c| c.target_generation),
            )
            .is_some_and(|(now, ours)| now > ours)
    }
}

fn shape(md: &ModelDeployment) -> TargetShape {
    TargetShape::of(md)
}

/// A target whose UID differs from the one the status knows; acknowledged by a spec edit
/// after `TargetReplaced` was first reported.
fn replacement(input: &Input, uid: &str) -> Option<Replacement> {
    let scaler = &input.scaler;
    let known_uid = scaler
        .status
        .binding
        .as_ref()
        .and_then(|b| b.target_uid.clone())
        .filter(|known| known != uid)?;
    let reported_at = scaler
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == BOUND && c.reason == "TargetReplaced")
        .and_then(|c| c.observed_generation);
    Some(Replacement {
        known_uid,
        reported_at,
        acknowledged: reported_at.is_some_and(|g| scaler.generation > g),
    })
}
