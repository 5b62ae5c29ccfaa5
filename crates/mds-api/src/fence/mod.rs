//! The binding fence (spec *Binding fence*, D24) as a pure decision: given the stored and the
//! requested `ModelDeployment` and what the scaler a write names looks like, allow the write or
//! refuse it naming the rule and what to do. No I/O: the webhook looks the scaler up (only when
//! [`scaler_to_look_up`] says so) and passes the result in.
//!
//! The fence decides by content (D24): through GPUStack's aggregated `v1` API every write may
//! reach the CRD, and so this webhook, under GPUStack's own identity, so who asks cannot tell
//! the controller from a person. What a write carries, and the state of the scaler it names, can:
//! - Deletes, and writes to an object being deleted, pass.
//! - A write that changes neither replica counts (adding or removing a role changes counts) nor
//!   either annotation passes.
//! - Bound target (a readable binding annotation):
//!   - a **commit** changes counts only together with a new decision annotation of the
//!     binding's term whose vector gives exactly the counts written; anything else that moves a
//!     count or rewrites an annotation is refused (`kubectl scale`, a GitOps sync);
//!   - a **release** removes the binding (the decision with it, or left as it is) with counts
//!     unchanged, and passes when the named scaler is gone or replaced (orphan recovery) or no
//!     longer claims the target (Shadow, suspended or being deleted: its own release);
//!   - the binding never changes hands by being rewritten.
//! - Unbound target: counts are free; annotations may be removed. A **bind** installs a
//!   readable binding with counts and decision unchanged, naming an existing scaler (by name
//!   and UID) that targets this deployment and claims it (Active, not suspended, not being
//!   deleted), under a term above every term seen on the target or in that scaler's status for
//!   this target (D19). An unreadable binding leaves the target unclaimed and may be removed or
//!   fixed by such a bind. Nothing else may install an annotation.
//! - The operator's user name is an optional extra check (`--operator-user`): when it is set,
//!   binds of an unbound target, commits and releases by a scaler that still exists must come
//!   from that user too. Orphan recovery and fixing an unreadable binding are users' writes.

mod messages;
mod rules;
mod unreadable;

use std::collections::BTreeMap;
use std::fmt;

use crate::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use crate::spec::{Mode, ModelDeploymentScaler};
use crate::target::ModelDeployment;

use messages::{owner, release_advice};
use rules::{commit, removal, unbound};
pub use unreadable::decide_unreadable;

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// Why a scaler does not claim its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotClaiming {
    Shadow,
    Suspended,
    Deleting,
}

impl fmt::Display for NotClaiming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotClaiming::Shadow => "is in Shadow mode",
            NotClaiming::Suspended => "is suspended",
            NotClaiming::Deleting => "is being deleted",
        })
    }
}

/// What the fence needs to know of a `ModelDeploymentScaler`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalerFacts {
    pub uid: String,
    pub target_name: String,
    /// `None`: it claims its target (Active, not suspended, not being deleted).
    pub not_claiming: Option<NotClaiming>,
    /// `status.binding`'s target UID and term: the terms it has used on that target (D19).
    pub status_target_uid: Option<String>,
    pub status_term: Option<i64>,
}

impl ScalerFacts {
    /// The facts of a scaler read from the API; `None` for an object without a UID.
    pub fn of(scaler: &ModelDeploymentScaler) -> Option<ScalerFacts> {
        let spec = &scaler.spec;
        let not_claiming = if scaler.metadata.deletion_timestamp.is_some() {
            Some(NotClaiming::Deleting)
        } else if spec.suspend.unwrap_or(false) {
            Some(NotClaiming::Suspended)
        } else if spec.mode.unwrap_or_default() != Mode::Active {
            Some(NotClaiming::Shadow)
        } else {
            None
        };
        let binding = scaler.status.as_ref().and_then(|s| s.binding.as_ref());
        Some(ScalerFacts {
            uid: scaler.metadata.uid.clone()?,
            target_name: spec.target_ref.name.clone(),
            not_claiming,
            status_target_uid: binding.and_then(|b| b.target_uid.clone()),
            status_term: binding.and_then(|b| b.term),
        })
    }
}

/// What the webhook found for the scaler a write names: the stored binding's for a removal of
/// the binding, the requested binding's for a bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamedScaler {
    /// Not asked: the request needs no lookup.
    NotLookedUp,
    Absent,
    Present(ScalerFacts),
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
    /// `userInfo.username` of the request.
    pub username: &'a str,
    /// When set, the only user that may bind, commit and release (an extra check, D24).
    pub operator_user: Option<&'a str>,
    pub named_scaler: NamedScaler,
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
    Bind,
    Commit,
    Release,
}

/// The rule that refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Counts of a bound target changed without a matching decision.
    BoundCounts,
    /// An annotation of a bound target changed other than by a commit or a release.
    BoundAnnotations,
    /// An annotation installed on an unbound target other than by a bind.
    UnboundAnnotations,
    /// Removing a binding whose scaler still claims the target, or changing counts with it.
    OrphanRecovery,
    /// A new decision that does not say what the write does.
    CommitContent,
    /// A new binding that does not name a scaler claiming the target under a rising term.
    BindContent,
    /// Content that only the configured operator user may write.
    OperatorUser,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::BoundCounts => "replica counts of a bound target",
            Rule::BoundAnnotations => "scaler annotations of a bound target",
            Rule::UnboundAnnotations => "scaler annotations on an unbound target",
            Rule::OrphanRecovery => "orphan recovery",
            Rule::CommitContent => "a commit carries its decision",
            Rule::BindContent => "a bind names a claiming scaler under a new term",
            Rule::OperatorUser => "operator user",
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

/// One role whose counts a request changes; an empty side is a role added or removed.
struct CountChange {
    role: String,
    before: Vec<i32>,
    after: Vec<i32>,
}

impl CountChange {
    /// The role is added, removed or duplicated, not only given another count.
    fn reshapes(&self) -> bool {
        self.before.len() != self.after.len()
    }
}

/// Roles whose counts differ, counting roles added, removed or renamed: on a bound target a
/// role removed in one write and added back in the next would otherwise move a bound count.
fn count_changes(old: &Counts, new: &Counts) -> Vec<CountChange> {
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .filter_map(|role| {
            let before = old.get(role).cloned().unwrap_or_default();
            let after = new.get(role).cloned().unwrap_or_default();
            (before != after).then(|| CountChange {
                role: role.clone(),
                before,
                after,
            })
        })
        .collect()
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
    target_uid: Option<&'a str>,
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

    /// The decision was added or given another value (removal is neither).
    fn decision_installed(&self) -> bool {
        self.new_decision.is_some() && self.decision_changed()
    }

    fn old_decision_term(&self) -> Option<i64> {
        self.old_decision
            .and_then(|d| DecisionPayload::parse(d).ok())
            .map(|d| d.term)
    }
}

/// The scaler whose state decides this request: the stored binding's when the request removes
/// that binding, the requested binding's when it installs one on a target that is not bound.
/// `None`: no lookup is needed.
pub fn scaler_to_look_up(request: &FenceRequest<'_>) -> Option<String> {
    if request.operation != Operation::Update || deleting(request.old) || deleting(request.new) {
        return None;
    }
    let new_binding = annotation(request.new, BINDING_ANNOTATION);
    match claim(request.old) {
        Claim::Bound(old) if new_binding.is_none() => Some(old.scaler_name),
        Claim::Bound(_) => None,
        Claim::Unbound | Claim::Unreadable(_) => {
            let installed = new_binding
                .filter(|text| Some(*text) != annotation(request.old, BINDING_ANNOTATION))?;
            BindingPayload::parse(installed).ok().map(|b| b.scaler_name)
        }
    }
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
        target_uid: old.and_then(|o| o.metadata.uid.as_deref()),
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
    if request.operation == Operation::Create
        && let Some(key) = [BINDING_ANNOTATION, DECISION_ANNOTATION]
            .into_iter()
            .find(|key| annotation(new, key).is_some())
    {
        return deny(
            Rule::UnboundAnnotations,
            format!(
                "this request creates ModelDeployment {:?} with {key}; a deployment is created \
                 unbound and an Active ModelDeploymentScaler binds it later, so remove the \
                 annotation from the request",
                changes.name
            ),
        );
    }
    match claim(old) {
        Claim::Bound(binding) if changes.new_binding.is_none() => {
            removal(request, &changes, &binding)
        }
        Claim::Bound(binding) if changes.binding_changed() => deny(
            Rule::BoundAnnotations,
            format!(
                "{}; a binding changes hands only through a release, never by being \
                 rewritten. {}",
                owner(&changes, &binding),
                release_advice(&changes, &binding)
            ),
        ),
        Claim::Bound(binding) => commit(request, &changes, &binding),
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

/// The extra identity check (D24), when an operator user is configured.
fn operator_only(request: &FenceRequest<'_>, what: &str) -> Option<Verdict> {
    let operator = request.operator_user.filter(|op| !op.is_empty())?;
    (request.username != operator).then(|| {
        deny(
            Rule::OperatorUser,
            format!(
                "{what} is written only by the mds controller, and this webhook accepts it only \
                 from {operator:?} (--operator-user); this request comes from {:?}",
                request.username
            ),
        )
    })
}
