//! The binding fence (spec *Binding fence*, D24) as a pure decision: given the stored and the
//! requested `ModelDeployment`, who asks and what the scaler named in the binding looks like,
//! allow the write or refuse it naming the rule and what to do. No I/O: the webhook looks the
//! scaler up (only when [`scaler_to_look_up`] says so) and passes the result in.
//!
//! The rules:
//! - Deletes, and writes to an object being deleted, pass (D24).
//! - A write that changes neither replica counts nor either annotation passes (D24).
//! - Bound target (a readable binding annotation): users may not change counts or either
//!   annotation, except orphan recovery: removing the binding (and the decision with it) when
//!   the named scaler is absent or has another UID, with counts unchanged.
//! - Unbound target: counts are free; users may remove annotations but never add or change
//!   one. An unreadable binding leaves the target unclaimed (spec), so it counts as unbound.
//! - The operator (its service account user name, D24) is recognised by identity and content:
//!   it may bind an unbound target (term above any decision's term, D19), commit counts on its
//!   binding together with a new decision of the binding's term whose vector matches the new
//!   counts, and release (remove the binding and the decision, counts unchanged, D20).

use std::collections::BTreeMap;
use std::fmt;

use crate::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use crate::target::ModelDeployment;

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// What the webhook found for the scaler named in the stored binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundScaler {
    /// Not asked: the request is not an orphan recovery.
    NotLookedUp,
    Absent,
    Present {
        uid: String,
    },
    /// The lookup failed; the reason is shown to the user.
    Failed(String),
}

/// One admission request to the fence.
#[derive(Clone, Debug)]
pub struct FenceRequest<'a> {
    pub operation: Operation,
    /// The stored object (UPDATE, DELETE).
    pub old: Option<&'a ModelDeployment>,
    /// The requested object (CREATE, UPDATE).
    pub new: Option<&'a ModelDeployment>,
    /// `userInfo.username` of the request. Groups grant nothing: D24 names the operator by its
    /// user name alone, and cluster administrators go through suspend like everyone else.
    pub username: &'a str,
    /// The operator's service account user name (`system:serviceaccount:NS:NAME`), if set.
    pub operator_user: Option<&'a str>,
    pub bound_scaler: BoundScaler,
}

/// Why a write passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowance {
    Deleting,
    /// Neither counts nor annotations change.
    Untouched,
    /// Counts changed, or annotations removed, on an unbound target.
    Unbound,
    OrphanRecovery,
    OperatorBind,
    OperatorCommit,
    OperatorRelease,
}

/// The rule that refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A user changed the counts of a bound target.
    BoundCounts,
    /// A user changed an annotation of a bound target.
    BoundAnnotations,
    /// Someone other than the binding operator added or changed an annotation on an unbound
    /// target.
    UnboundAnnotations,
    /// Removing a binding whose scaler still lives, or changing counts in the same write.
    OrphanRecovery,
    /// The operator's write does not carry what its kind of write must carry.
    OperatorContent,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::BoundCounts => "replica counts of a bound target",
            Rule::BoundAnnotations => "scaler annotations of a bound target",
            Rule::UnboundAnnotations => "scaler annotations on an unbound target",
            Rule::OrphanRecovery => "orphan recovery",
            Rule::OperatorContent => "operator writes carry their decision",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed(Allowance),
    Denied { rule: Rule, message: String },
}

impl Verdict {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Verdict::Allowed(_))
    }
}

/// How the stored object is claimed.
enum Claim {
    Unbound,
    /// A binding annotation that cannot be parsed: unclaimed (spec), with the parse error.
    Unreadable(String),
    Bound(BindingPayload),
}

/// The counts of each role by name (a list per name, so duplicated names are still compared).
type Counts = BTreeMap<String, Vec<i32>>;

fn counts(md: &ModelDeployment) -> Counts {
    let mut counts = Counts::new();
    for role in &md.spec.roles {
        counts
            .entry(role.name.clone())
            .or_default()
            .push(role.replicas());
    }
    counts
}

/// One role whose count a request changes.
struct CountChange {
    role: String,
    before: Vec<i32>,
    after: Vec<i32>,
}

/// Roles present before and after whose count changed. Adding or removing a role is a change
/// of the target's shape, not of a count: it passes, and the scaler reports the role it has no
/// bounds for.
fn count_changes(old: &Counts, new: &Counts) -> Vec<CountChange> {
    old.iter()
        .filter_map(|(role, before)| {
            let after = new.get(role)?;
            (before != after).then(|| CountChange {
                role: role.clone(),
                before: before.clone(),
                after: after.clone(),
            })
        })
        .collect()
}

/// `decode 4 -> 6, prefill 2 -> 3`.
fn describe(changes: &[CountChange]) -> String {
    let parts: Vec<String> = changes
        .iter()
        .map(|c| format!("{} {} -> {}", c.role, list(&c.before), list(&c.after)))
        .collect();
    parts.join(", ")
}

fn list(counts: &[i32]) -> String {
    let parts: Vec<String> = counts.iter().map(i32::to_string).collect();
    parts.join(",")
}

fn annotation<'a>(md: Option<&'a ModelDeployment>, key: &str) -> Option<&'a str> {
    md?.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn claim(md: Option<&ModelDeployment>) -> Claim {
    match annotation(md, BINDING_ANNOTATION) {
        None => Claim::Unbound,
        Some(text) => match BindingPayload::parse(text) {
            Ok(binding) => Claim::Bound(binding),
            Err(e) => Claim::Unreadable(e.to_string()),
        },
    }
}

fn deleting(md: Option<&ModelDeployment>) -> bool {
    md.is_some_and(|m| m.metadata.deletion_timestamp.is_some())
}

/// The request seen as changes of the fenced fields.
struct Changes<'a> {
    name: String,
    namespace: Option<String>,
    counts: Vec<CountChange>,
    new_counts: Counts,
    old_binding: Option<&'a str>,
    new_binding: Option<&'a str>,
    old_decision: Option<&'a str>,
    new_decision: Option<&'a str>,
}

impl Changes<'_> {
    fn binding_changed(&self) -> bool {
        self.old_binding != self.new_binding
    }

    fn decision_changed(&self) -> bool {
        self.old_decision != self.new_decision
    }

    /// An annotation was added or given another value (removal is neither).
    fn annotation_installed(&self) -> Option<&'static str> {
        let installed = |old: Option<&str>, new: Option<&str>| new.is_some() && new != old;
        if installed(self.old_binding, self.new_binding) {
            Some(BINDING_ANNOTATION)
        } else if installed(self.old_decision, self.new_decision) {
            Some(DECISION_ANNOTATION)
        } else {
            None
        }
    }
}

/// The scaler whose existence decides this request: the one named in the stored binding when
/// a user removes that binding (orphan recovery). `None`: no lookup is needed.
pub fn scaler_to_look_up(request: &FenceRequest<'_>) -> Option<String> {
    if request.operation != Operation::Update
        || deleting(request.old)
        || deleting(request.new)
        || is_operator(request)
        || annotation(request.new, BINDING_ANNOTATION).is_some()
    {
        return None;
    }
    match claim(request.old) {
        Claim::Bound(binding) => Some(binding.scaler_name),
        Claim::Unbound | Claim::Unreadable(_) => None,
    }
}

fn is_operator(request: &FenceRequest<'_>) -> bool {
    request.operation == Operation::Update
        && request
            .operator_user
            .is_some_and(|op| !op.is_empty() && op == request.username)
}

/// Decides one admission request.
pub fn decide(request: &FenceRequest<'_>) -> Verdict {
    let (old, new) = (request.old, request.new);
    if request.operation == Operation::Delete || deleting(old) || deleting(new) {
        return Verdict::Allowed(Allowance::Deleting);
    }
    let Some(new_md) = new else {
        // CREATE and UPDATE always carry the object; without one there is nothing to fence.
        return Verdict::Allowed(Allowance::Untouched);
    };
    let new_counts = counts(new_md);
    let changes = Changes {
        name: new_md.metadata.name.clone().unwrap_or_default(),
        namespace: new_md.metadata.namespace.clone(),
        counts: old.map_or_else(Vec::new, |o| count_changes(&counts(o), &new_counts)),
        new_counts,
        old_binding: annotation(old, BINDING_ANNOTATION),
        new_binding: annotation(new, BINDING_ANNOTATION),
        old_decision: annotation(old, DECISION_ANNOTATION),
        new_decision: annotation(new, DECISION_ANNOTATION),
    };
    if changes.counts.is_empty() && !changes.binding_changed() && !changes.decision_changed() {
        return Verdict::Allowed(Allowance::Untouched);
    }
    let operator = is_operator(request);
    match claim(old) {
        Claim::Bound(binding) if operator => operator_on_bound(&changes, &binding),
        Claim::Bound(binding) => user_on_bound(request, &changes, &binding),
        Claim::Unbound if operator && changes.new_binding.is_some() => operator_bind(&changes),
        Claim::Unbound => unbound(request, &changes, None),
        Claim::Unreadable(why) => unbound(request, &changes, Some(&why)),
    }
}

fn deny(rule: Rule, detail: String) -> Verdict {
    Verdict::Denied {
        message: format!("binding fence ({rule}): {detail}"),
        rule,
    }
}

/// What a user can do to get the counts back: the same advice for every bound-target refusal.
fn release_advice(changes: &Changes<'_>, binding: &BindingPayload) -> String {
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

fn owner(changes: &Changes<'_>, binding: &BindingPayload) -> String {
    format!(
        "ModelDeployment {:?} is bound to ModelDeploymentScaler {:?} (term {})",
        changes.name, binding.scaler_name, binding.term
    )
}

fn user_on_bound(request: &FenceRequest<'_>, changes: &Changes<'_>, b: &BindingPayload) -> Verdict {
    if changes.new_binding.is_none() {
        return orphan_recovery(request, changes, b);
    }
    if changes.binding_changed() {
        return deny(
            Rule::BoundAnnotations,
            format!(
                "{}; only that scaler writes {BINDING_ANNOTATION}. {}",
                owner(changes, b),
                release_advice(changes, b)
            ),
        );
    }
    if !changes.counts.is_empty() {
        return deny(
            Rule::BoundCounts,
            format!(
                "{}, which owns spec.roles[].replicas (this request changes {}). {}{}",
                owner(changes, b),
                describe(&changes.counts),
                release_advice(changes, b),
                operator_hint(request)
            ),
        );
    }
    deny(
        Rule::BoundAnnotations,
        format!(
            "{}; only that scaler writes {DECISION_ANNOTATION}. {}{}",
            owner(changes, b),
            release_advice(changes, b),
            operator_hint(request)
        ),
    )
}

/// Said when a service account is refused while no operator identity is configured: the
/// likeliest cause is a webhook started without `--operator-user`.
fn operator_hint(request: &FenceRequest<'_>) -> String {
    if request.operator_user.is_none() && request.username.starts_with("system:serviceaccount:") {
        " (no operator user is configured on the webhook, so no write is recognised as the \
         mds controller's; set --operator-user to its service account user name)"
            .to_string()
    } else {
        String::new()
    }
}

fn orphan_recovery(
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
    if changes.annotation_installed().is_some() {
        return deny(
            Rule::OrphanRecovery,
            format!(
                "removing the binding of ModelDeploymentScaler {:?} may remove \
                 {DECISION_ANNOTATION} as well but not change it; drop that change",
                b.scaler_name
            ),
        );
    }
    match &request.bound_scaler {
        BoundScaler::Absent => Verdict::Allowed(Allowance::OrphanRecovery),
        BoundScaler::Present { uid } if *uid != b.scaler_uid => {
            Verdict::Allowed(Allowance::OrphanRecovery)
        }
        BoundScaler::Present { .. } => deny(
            Rule::OrphanRecovery,
            format!(
                "{}, and that scaler still exists with UID {}, so the binding is not orphaned. \
                 Suspend the scaler (spec.suspend: true) or delete it; either releases the \
                 binding and removes both annotations",
                owner(changes, b),
                b.scaler_uid
            ),
        ),
        BoundScaler::Failed(why) => deny(
            Rule::OrphanRecovery,
            format!(
                "could not check whether ModelDeploymentScaler {:?} still exists ({why}); \
                 the binding may be removed only when it is gone. Retry",
                b.scaler_name
            ),
        ),
        BoundScaler::NotLookedUp => deny(
            Rule::OrphanRecovery,
            format!(
                "ModelDeploymentScaler {:?} was not looked up, so the binding cannot be shown \
                 to be orphaned. Retry",
                b.scaler_name
            ),
        ),
    }
}

fn unbound(request: &FenceRequest<'_>, changes: &Changes<'_>, unreadable: Option<&str>) -> Verdict {
    let Some(key) = changes.annotation_installed() else {
        return Verdict::Allowed(Allowance::Unbound);
    };
    let state = match unreadable {
        Some(why) => format!(
            "has a binding annotation that cannot be read ({why}), so no scaler owns it; \
             remove that annotation instead of rewriting it, and an Active scaler binds again \
             by itself"
        ),
        None => "has no scaler binding; only the mds controller writes it when an Active \
                 ModelDeploymentScaler binds the target, so remove the annotation from the \
                 request (create a scaler with mode: Active to let one own the counts)"
            .to_string(),
    };
    deny(
        Rule::UnboundAnnotations,
        format!(
            "this request sets {key}, but ModelDeployment {:?} {state}{}",
            changes.name,
            operator_hint(request)
        ),
    )
}

fn operator_bind(changes: &Changes<'_>) -> Verdict {
    let text = changes.new_binding.unwrap_or_default();
    let binding = match BindingPayload::parse(text) {
        Ok(binding) => binding,
        Err(e) => {
            return deny(
                Rule::OperatorContent,
                format!("a bind must write a readable binding: {e}"),
            );
        }
    };
    if !changes.counts.is_empty() {
        return deny(
            Rule::OperatorContent,
            format!(
                "a bind must leave the counts unchanged (this request changes {})",
                describe(&changes.counts)
            ),
        );
    }
    if changes.decision_changed() {
        return deny(
            Rule::OperatorContent,
            format!(
                "a bind writes {BINDING_ANNOTATION} alone and must leave {DECISION_ANNOTATION} as it is"
            ),
        );
    }
    let seen = changes
        .old_decision
        .and_then(|d| DecisionPayload::parse(d).ok())
        .map_or(0, |d| d.term);
    if binding.term <= seen {
        return deny(
            Rule::OperatorContent,
            format!(
                "a new binding's term {} must be above the term {seen} already on the target (D19)",
                binding.term
            ),
        );
    }
    Verdict::Allowed(Allowance::OperatorBind)
}

fn operator_on_bound(changes: &Changes<'_>, b: &BindingPayload) -> Verdict {
    match changes.new_binding {
        None => {
            // Release (D20): both annotations go, counts stay.
            if !changes.counts.is_empty() {
                return deny(
                    Rule::OperatorContent,
                    format!(
                        "a release must leave the counts unchanged (this request changes {})",
                        describe(&changes.counts)
                    ),
                );
            }
            if changes.annotation_installed().is_some() {
                return deny(
                    Rule::OperatorContent,
                    format!("a release removes {DECISION_ANNOTATION}; it may not rewrite it"),
                );
            }
            Verdict::Allowed(Allowance::OperatorRelease)
        }
        Some(_) if changes.binding_changed() => deny(
            Rule::OperatorContent,
            format!(
                "{}; a binding changes hands only through a release, not by rewriting it",
                owner(changes, b)
            ),
        ),
        Some(_) => operator_commit(changes, b),
    }
}

/// A commit (D3, D24): a new decision of the binding's term whose vector equals the new counts.
fn operator_commit(changes: &Changes<'_>, b: &BindingPayload) -> Verdict {
    let refuse = |why: String| {
        deny(
            Rule::OperatorContent,
            format!(
                "a replica change on a bound target must carry a new {DECISION_ANNOTATION} of \
                 the binding's term {} whose vector equals the new counts; {why}",
                b.term
            ),
        )
    };
    let Some(text) = changes.new_decision else {
        return refuse("this request has no decision".into());
    };
    if !changes.decision_changed() {
        return refuse("this request keeps the previous decision".into());
    }
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
    // The vector must say what the write sets: every role it names and the target has gets
    // exactly that count, and every role whose count changes is named. Roles it names that the
    // target lacks are ignored, as the commit patch skips them.
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
    Verdict::Allowed(Allowance::OperatorCommit)
}
