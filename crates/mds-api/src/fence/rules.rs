//! The fence's rules for a write that touches counts or annotations: a bound target's
//! release or orphan recovery (`removal`), a bound target's commit (`commit`), and an unbound
//! or unreadably bound target's bind (`unbound`, `bind`).

use super::messages::{describe, list, owner, release_advice};
use super::{
    Allowance, BINDING_ANNOTATION, BindingPayload, Changes, DECISION_ANNOTATION, DecisionPayload,
    FenceRequest, NamedScaler, Rule, Verdict, deny, operator_only,
};

/// A bound target whose binding the request removes: the scaler's own release, or orphan
/// recovery when that scaler is gone or replaced.
pub(super) fn removal(
    request: &FenceRequest<'_>,
    changes: &Changes<'_>,
    b: &BindingPayload,
) -> Verdict {
    if !changes.counts.is_empty() {
        return deny(
            Rule::OrphanRecovery,
            format!(
                "removing the binding of ModelDeploymentScaler {:?} must leave the replica \
                 counts unchanged (this request changes {}); remove the annotation in one \
                 write and change the counts in the next",
                b.scaler_name,
                describe(&changes.counts)
            ),
        );
    }
    if changes.decision_installed() {
        return deny(
            Rule::OrphanRecovery,
            format!(
                "removing the binding of ModelDeploymentScaler {:?} may remove \
                 {DECISION_ANNOTATION} as well but not change it; drop that change",
                b.scaler_name
            ),
        );
    }
    let retry = |detail: String| {
        deny(
            Rule::OrphanRecovery,
            format!("{detail}; the binding may be removed only when it is gone. Retry"),
        )
    };
    match &request.named_scaler {
        NamedScaler::Absent => Verdict::Allowed(Allowance::OrphanRecovery),
        NamedScaler::Present(s) if s.uid != b.scaler_uid => {
            Verdict::Allowed(Allowance::OrphanRecovery)
        }
        NamedScaler::Present(s) => match s.not_claiming {
            Some(_) => operator_only(request, "a release of a scaler that still exists")
                .unwrap_or(Verdict::Allowed(Allowance::Release)),
            None => deny(
                Rule::OrphanRecovery,
                format!(
                    "{}, and that scaler still exists with UID {} and is Active, so the binding \
                     is not orphaned. Suspend the scaler (spec.suspend: true), switch it to \
                     Shadow, or delete it; each releases the binding and removes both \
                     annotations",
                    owner(changes, b),
                    b.scaler_uid
                ),
            ),
        },
        NamedScaler::Failed(why) => retry(format!(
            "could not check whether ModelDeploymentScaler {:?} still exists ({why})",
            b.scaler_name
        )),
        NamedScaler::NotLookedUp => retry(format!(
            "ModelDeploymentScaler {:?} was not looked up, so the binding cannot be shown to \
             be released or orphaned",
            b.scaler_name
        )),
    }
}

/// A bound target whose binding stays: counts or the decision change only as a commit (D3).
pub(super) fn commit(
    request: &FenceRequest<'_>,
    changes: &Changes<'_>,
    b: &BindingPayload,
) -> Verdict {
    let advice = release_advice(changes, b);
    if !changes.decision_installed() {
        // No new decision: a person's or a sync's write (kubectl scale, an apply from Git).
        return if changes.counts.is_empty() {
            deny(
                Rule::BoundAnnotations,
                format!(
                    "{}; only that scaler writes {DECISION_ANNOTATION}. {advice}",
                    owner(changes, b)
                ),
            )
        } else {
            deny(
                Rule::BoundCounts,
                format!(
                    "{}, which owns spec.roles[].replicas (this request changes {}). {advice}",
                    owner(changes, b),
                    describe(&changes.counts)
                ),
            )
        };
    }
    let refuse = |why: String| {
        deny(
            Rule::CommitContent,
            format!(
                "{}; a replica change on it must carry a new {DECISION_ANNOTATION} of the \
                 binding's term {} whose vector gives exactly the counts written, and {why}. \
                 {advice}",
                owner(changes, b),
                b.term
            ),
        )
    };
    if let Some(change) = changes.counts.iter().find(|c| c.reshapes()) {
        return refuse(format!(
            "a commit never adds, removes or renames a role (this request changes role {} \
             from {} to {})",
            change.role,
            list(&change.before),
            list(&change.after)
        ));
    }
    let text = changes.new_decision.unwrap_or_default();
    let decision = match DecisionPayload::parse(text) {
        Ok(decision) => decision,
        Err(e) => return refuse(format!("its decision cannot be read: {e}")),
    };
    if decision.term != b.term {
        return refuse(format!("its decision has term {}", decision.term));
    }
    let previous_id = changes
        .old_decision
        .and_then(|d| DecisionPayload::parse(d).ok())
        .map(|d| d.decision_id);
    if previous_id.as_deref() == Some(decision.decision_id.as_str()) {
        return refuse(format!(
            "decision {} is already on the target",
            decision.decision_id
        ));
    }
    // Every role the vector names and the target has gets exactly that count, and every role
    // whose count changes is named. Roles it names that the target lacks are ignored, as the
    // commit patch skips them.
    for (role, counts) in &changes.new_counts {
        match decision.vector.get(role) {
            Some(wanted) if counts.iter().any(|c| c != wanted) => {
                return refuse(format!(
                    "its vector says {role}={wanted} but the request sets {role}={}",
                    list(counts)
                ));
            }
            None if changes.counts.iter().any(|c| c.role == *role) => {
                return refuse(format!(
                    "its vector does not name role {role}, whose count changes"
                ));
            }
            _ => {}
        }
    }
    operator_only(request, "a commit").unwrap_or(Verdict::Allowed(Allowance::Commit))
}

/// A target no readable binding claims.
pub(super) fn unbound(
    request: &FenceRequest<'_>,
    changes: &Changes<'_>,
    unreadable: Option<&str>,
) -> Verdict {
    let new_binding = changes.new_binding.filter(|_| changes.binding_changed());
    if let Some(text) = new_binding
        && let Ok(binding) = BindingPayload::parse(text)
    {
        return bind(request, changes, &binding, unreadable.is_some());
    }
    let installed = if new_binding.is_some() {
        Some(BINDING_ANNOTATION)
    } else if changes.decision_installed() {
        Some(DECISION_ANNOTATION)
    } else {
        None
    };
    let Some(key) = installed else {
        return Verdict::Allowed(Allowance::Unbound);
    };
    let state = match unreadable {
        Some(why) => format!(
            "has a binding annotation that cannot be read ({why}), so no scaler owns it; \
             remove that annotation, or replace it with a readable binding of the Active \
             scaler that targets this deployment"
        ),
        None => "has no scaler binding; only an Active ModelDeploymentScaler binds a target, \
                 so remove the annotation from the request (create a scaler with mode: Active \
                 to let one own the counts)"
            .to_string(),
    };
    deny(
        Rule::UnboundAnnotations,
        format!(
            "this request sets {key}, but ModelDeployment {:?} {state}",
            changes.name
        ),
    )
}

/// A readable binding installed on a target no readable binding claims: the scaler's bind, or
/// a person fixing an unreadable binding (`repair`).
fn bind(
    request: &FenceRequest<'_>,
    changes: &Changes<'_>,
    binding: &BindingPayload,
    repair: bool,
) -> Verdict {
    let refuse = |why: String| {
        deny(
            Rule::BindContent,
            format!(
                "this request binds ModelDeployment {:?} to ModelDeploymentScaler {:?} (term {}), \
                 but {why}",
                changes.name, binding.scaler_name, binding.term
            ),
        )
    };
    if !changes.counts.is_empty() {
        return refuse(format!(
            "a bind leaves the counts unchanged (this request changes {})",
            describe(&changes.counts)
        ));
    }
    if changes.decision_changed() {
        return refuse(format!(
            "a bind writes {BINDING_ANNOTATION} alone and leaves {DECISION_ANNOTATION} as it is"
        ));
    }
    let scaler = match &request.named_scaler {
        NamedScaler::Present(s) => s,
        NamedScaler::Absent => {
            return refuse(
                "no scaler of that name exists; remove the binding from the request, or create \
                 that scaler in Active mode and let it bind"
                    .into(),
            );
        }
        NamedScaler::Failed(why) => {
            return refuse(format!("the scaler could not be looked up ({why}). Retry"));
        }
        NamedScaler::NotLookedUp => return refuse("the scaler was not looked up. Retry".into()),
    };
    if scaler.uid != binding.scaler_uid {
        return refuse(format!(
            "that scaler has UID {}, not {}: a binding must carry its scaler's UID (a scaler \
             deleted and created again under the same name is another scaler); remove the \
             binding from the request and let the Active scaler bind",
            scaler.uid, binding.scaler_uid
        ));
    }
    if scaler.target_name != changes.name {
        return refuse(format!(
            "that scaler targets {:?}; remove the binding from the request, or point that \
             scaler's targetRef here and let it bind",
            scaler.target_name
        ));
    }
    if let Some(why) = scaler.not_claiming {
        return refuse(format!(
            "that scaler {why} and claims no target; remove the binding from the request, or \
             make that scaler Active and let it bind"
        ));
    }
    let status_term = scaler.status_term.filter(|_| {
        changes.target_uid.is_some() && scaler.status_target_uid.as_deref() == changes.target_uid
    });
    let seen = [
        changes
            .old_decision_term()
            .map(|t| (t, "the decision annotation")),
        status_term.map(|t| (t, "the scaler's status for this target")),
    ];
    if let Some((term, source)) = seen.into_iter().flatten().max_by_key(|(t, _)| *t)
        && binding.term <= term
    {
        return refuse(format!(
            "its term must be above term {term}, already seen in {source}: terms never move \
             backwards (D19)"
        ));
    }
    if repair {
        return Verdict::Allowed(Allowance::Bind);
    }
    operator_only(request, "a bind").unwrap_or(Verdict::Allowed(Allowance::Bind))
}
