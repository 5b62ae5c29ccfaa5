//! Target 4: the binding fence over arbitrary (old, new) ModelDeployment pairs with arbitrary
//! binding and decision annotations, operations, users and lookups (structure-aware: the
//! bytes choose from the shapes that matter, so coverage goes to the rules, not to JSON
//! syntax). Oracles: `decide` and `scaler_to_look_up` never panic; a commit the fence allows
//! carries a readable decision whose vector gives the counts written; an update that changes
//! no count and no annotation is allowed; a refusal names its rule.

use std::collections::BTreeMap;

use arbitrary::{Result, Unstructured};
use mds_api::annotations::{
    BINDING_ANNOTATION, BindingPayload, DECISION_ANNOTATION, DecisionPayload,
};
use mds_api::fence::{
    Allowance, FenceRequest, NamedScaler, NotClaiming, Operation, ScalerFacts, Verdict, decide,
    scaler_to_look_up,
};
use mds_api::target::ModelDeployment;
use mds_testdata::{mk_role, mk_target};
use serde_json::json;

const OPERATOR: &str = "system:serviceaccount:mds-system:mds";

pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    // An input too short for a whole case is one case fewer, not a finding.
    let Ok(case) = Case::arbitrary(&mut u) else {
        return;
    };
    case.check();
}

struct Case {
    operation: Operation,
    old: Option<ModelDeployment>,
    new: Option<ModelDeployment>,
    username: &'static str,
    operator_user: Option<&'static str>,
    named: NamedScaler,
}

impl Case {
    fn arbitrary(u: &mut Unstructured<'_>) -> Result<Case> {
        let operation = *u.choose(&[
            Operation::Update,
            Operation::Update,
            Operation::Create,
            Operation::Delete,
        ])?;
        Ok(Case {
            operation,
            old: target(u)?,
            new: target(u)?,
            username: u.choose(&[OPERATOR, "alice", "system:serviceaccount:argocd:argocd"])?,
            operator_user: if u.arbitrary()? { Some(OPERATOR) } else { None },
            named: named_scaler(u)?,
        })
    }

    fn check(&self) {
        let request = FenceRequest {
            operation: self.operation,
            old: self.old.as_ref(),
            new: self.new.as_ref(),
            username: self.username,
            operator_user: self.operator_user,
            named_scaler: self.named.clone(),
        };
        let _ = scaler_to_look_up(&request);
        let verdict = decide(&request);
        match &verdict {
            Verdict::Allowed(Allowance::Commit) => {
                commit_matches_counts(self.old.as_ref(), self.new.as_ref())
            }
            Verdict::Allowed(_) => {}
            Verdict::Denied { message, .. } => {
                assert!(message.starts_with("binding fence ("), "{message}");
            }
        }
        if self.operation == Operation::Update
            && let (Some(old), Some(new)) = (&self.old, &self.new)
            && counts(old) == counts(new)
            && annotations(old) == annotations(new)
        {
            assert!(
                verdict.is_allowed(),
                "an update that changes no count and no annotation was refused: {verdict:?}"
            );
        }
    }
}

/// An allowed commit's decision says what the write does: every role of the target its vector
/// names has exactly that count, and every role whose count changes is named. (A role the
/// vector names that the target lacks is ignored, as the controller's commit patch skips it:
/// the fence's rule, see `fence/rules.rs`.)
fn commit_matches_counts(old: Option<&ModelDeployment>, new: Option<&ModelDeployment>) {
    let new = new.expect("a commit writes an object");
    let text = annotation(new, DECISION_ANNOTATION).expect("an allowed commit has a decision");
    let decision = DecisionPayload::parse(text).expect("an allowed commit's decision reads");
    let before: Vec<(String, i32)> = old.map(counts).unwrap_or_default();
    for (role, count) in counts(new) {
        match decision.vector.get(&role) {
            Some(wanted) => assert_eq!(
                *wanted, count,
                "an allowed commit's vector says {role}={wanted}, the write sets {count}"
            ),
            None => assert!(
                before.contains(&(role.clone(), count)),
                "an allowed commit changes {role} without naming it in its vector"
            ),
        }
    }
}

/// Every role's (name, replicas), sorted.
fn counts(md: &ModelDeployment) -> Vec<(String, i32)> {
    let mut counts: Vec<(String, i32)> = md
        .spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.replicas()))
        .collect();
    counts.sort();
    counts
}

fn annotation<'a>(md: &'a ModelDeployment, key: &str) -> Option<&'a str> {
    md.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn annotations(md: &ModelDeployment) -> (Option<&str>, Option<&str>) {
    (
        annotation(md, BINDING_ANNOTATION),
        annotation(md, DECISION_ANNOTATION),
    )
}

/// A target of up to three roles from a few names (duplicates possible), each with 0 to 5
/// replicas or the default; maybe bound, maybe with a decision, maybe being deleted.
fn target(u: &mut Unstructured<'_>) -> Result<Option<ModelDeployment>> {
    if u.ratio(1, 8)? {
        return Ok(None);
    }
    let mut t = mk_target("llm").uid(u.choose(&["target-uid-1", "target-uid-2"])?);
    let mut roles: Vec<(String, i32)> = Vec::new();
    for _ in 0..u.int_in_range(0..=3)? {
        let name = *u.choose(&["prefill", "decode", "server"])?;
        let kind = match name {
            "prefill" => "Prefill",
            "decode" => "Decode",
            _ => "Server",
        };
        let mut role = mk_role(name).kind(kind);
        let replicas = if u.ratio(1, 6)? {
            1 // left to the default
        } else {
            let n = u.int_in_range(0..=5)?;
            role = role.replicas(n);
            n
        };
        roles.push((name.to_string(), replicas));
        t = t.role(role);
    }
    if u.arbitrary()? {
        t = t.annotation(BINDING_ANNOTATION, &binding(u)?);
    }
    if u.arbitrary()? {
        t = t.annotation(DECISION_ANNOTATION, &decision(u, &roles)?);
    }
    let mut value = t.build();
    if u.ratio(1, 10)? {
        value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    Ok(serde_json::from_value(value).ok())
}

fn term(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(*u.choose(&[0, 1, 2, 3, 7, -1, i64::MAX])?)
}

/// A binding annotation: readable, naming one of two scalers, or bytes of the input.
fn binding(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 5)? {
        return u.arbitrary::<String>();
    }
    Ok(BindingPayload {
        scaler_name: u.choose(&["llm", "other"])?.to_string(),
        scaler_uid: u.choose(&["scaler-uid-1", "scaler-uid-2"])?.to_string(),
        term: term(u)?,
    }
    .to_annotation())
}

/// A decision annotation: the roles' own counts, or other counts, or bytes of the input.
fn decision(u: &mut Unstructured<'_>, roles: &[(String, i32)]) -> Result<String> {
    if u.ratio(1, 5)? {
        return u.arbitrary::<String>();
    }
    let mut vector = BTreeMap::new();
    let own = u.arbitrary::<bool>()?;
    for (name, n) in roles {
        let count = if own { *n } else { u.int_in_range(0..=5)? };
        vector.insert(name.clone(), count);
    }
    if u.ratio(1, 6)? {
        vector.insert("encode".into(), 1);
    }
    Ok(DecisionPayload {
        decision_id: u.choose(&["d-1", "d-2", ""])?.to_string(),
        term: term(u)?,
        vector,
    }
    .to_annotation())
}

fn named_scaler(u: &mut Unstructured<'_>) -> Result<NamedScaler> {
    Ok(match u.int_in_range(0..=3)? {
        0 => NamedScaler::NotLookedUp,
        1 => NamedScaler::Absent,
        2 => NamedScaler::Failed("the lookup timed out".into()),
        _ => NamedScaler::Present(ScalerFacts {
            uid: u.choose(&["scaler-uid-1", "scaler-uid-2"])?.to_string(),
            target_name: u.choose(&["llm", "other-target"])?.to_string(),
            not_claiming: *u.choose(&[
                None,
                Some(NotClaiming::Shadow),
                Some(NotClaiming::Suspended),
                Some(NotClaiming::Deleting),
            ])?,
            status_target_uid: if u.arbitrary()? {
                Some(u.choose(&["target-uid-1", "target-uid-2"])?.to_string())
            } else {
                None
            },
            status_term: if u.arbitrary()? { Some(term(u)?) } else { None },
        }),
    })
}
