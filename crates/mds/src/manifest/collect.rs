//! Typing a YAML document and listing every problem, not just the first: each value that does
//! not fit is reported at its path in the user's words, then removed (optional fields) or
//! replaced by a valid stand-in (required fields and list items), and typing is retried, so
//! the rest of the document is still checked and no field is reported twice.

use mds_api::suggest::closest;
use mds_api::validation::Finding;
use serde::de::DeserializeOwned;
use serde_json::Value as Json;
use serde_yaml_ng::Value;

use super::{Seg, big_integer, get, render, schema, within};

/// The outcome of typing one document.
pub struct Collected<T> {
    /// The typed value, when the document (with its stand-ins) could be typed.
    pub value: Option<T>,
    /// One finding per value that does not fit.
    pub errors: Vec<Finding>,
    /// Values that were removed or replaced: findings of later rules about them describe the
    /// stand-in, not the user's document.
    pub scopes: Vec<Scope>,
    /// Fields the type does not know, with the schema's own fields nearby for suggestions.
    pub unknown: Vec<Vec<Seg>>,
}

/// A value removed or stood in for.
pub struct Scope {
    path: String,
    parent: String,
    /// The field name of a stand-in (removed values have none: nothing reads them).
    stand_in: Option<String>,
}

impl Scope {
    fn new(path: &[Seg], stood_in: bool) -> Scope {
        let parent = path.split_last().map_or(&[][..], |(_, p)| p);
        Scope {
            path: render(path),
            parent: render(parent),
            stand_in: match path.last() {
                Some(Seg::Key(k)) if stood_in => Some(k.clone()),
                _ => None,
            },
        }
    }

    /// Whether a rule's finding is about this value: it sits at or inside it, or, for a
    /// stand-in, next to it and names it (`minReplicas: 8 is greater than maxReplicas 1024`).
    pub fn covers(&self, finding: &Finding) -> bool {
        within(&finding.path, &self.path)
            || (within(&finding.path, &self.parent)
                && self
                    .stand_in
                    .as_ref()
                    .is_some_and(|k| mentions(&finding.message, k)))
    }
}

/// Whether `text` names `word` as a word of its own (`maxReplicas`, not `maxReplicasX`).
fn mentions(text: &str, word: &str) -> bool {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(i, _)| {
        !is_word(text[..i].chars().next_back()) && !is_word(text[i + word.len()..].chars().next())
    })
}

/// More rounds than any real document has problems; each round removes or replaces one.
const MAX_ROUNDS: usize = 256;

/// Types `value` as `T`; `root` is the schema of `T` when there is one (the scaler's CRD).
pub fn collect<T: DeserializeOwned>(value: &Value, root: Option<&Json>) -> Collected<T> {
    let mut doc = value.clone();
    let mut out = Collected {
        value: None,
        errors: vec![],
        scopes: vec![],
        unknown: vec![],
    };
    let mut replaced: Vec<Vec<Seg>> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let mut unknown = Vec::new();
        let parsed: Result<T, _> = serde_path_to_error::deserialize(
            serde_ignored::Deserializer::new(doc.clone(), &mut |path: serde_ignored::Path| {
                unknown.push(ignored_path(&path))
            }),
        );
        out.unknown = unknown;
        let error = match parsed {
            Ok(typed) => {
                out.value = Some(typed);
                return out;
            }
            Err(e) => e,
        };
        let mut path: Vec<Seg> = error.path().iter().filter_map(segment).collect();
        let message = error.inner().to_string();
        let missing = missing_field(&message);
        if let Some(field) = &missing {
            path.push(Seg::Key(field.clone()));
        }
        let node = root.and_then(|r| schema::node(r, &path));
        let rendered = render(&path);
        if replaced.contains(&path) {
            // A stand-in of ours did not fit: nothing more can be learned safely.
            return out;
        }
        let finding = match &missing {
            Some(_) => match node {
                Some(node) => format!("is required; give {}", schema::expected(node)),
                None => "is required".to_string(),
            },
            None => problem(get(&doc, &path), node, &message),
        };
        if !out.errors.iter().any(|f| f.path == rendered) {
            out.errors.push(Finding {
                path: rendered.clone(),
                message: finding,
            });
        }
        let required = missing.is_some()
            || matches!(path.last(), Some(Seg::Index(_)))
            || match (path.split_last(), root) {
                (Some((Seg::Key(key), parent)), Some(r)) => {
                    schema::node(r, parent).is_some_and(|p| schema::requires(p, key))
                }
                _ => false,
            };
        let fixed = if required {
            match node.and_then(schema::placeholder) {
                Some(stand_in) => set(&mut doc, &path, stand_in),
                None => false,
            }
        } else {
            remove(&mut doc, &path)
        };
        out.scopes.push(Scope::new(&path, required));
        if !fixed {
            return out;
        }
        replaced.push(path);
    }
    out
}

/// A path segment as a key or index, when it names a place in the document.
fn segment(s: &serde_path_to_error::Segment) -> Option<Seg> {
    match s {
        serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
        serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
        _ => None,
    }
}

/// A serde_ignored path without its `?` steps (they mark optional values, not places).
fn ignored_path(path: &serde_ignored::Path) -> Vec<Seg> {
    use serde_ignored::Path;
    match path {
        Path::Root => vec![],
        Path::Seq { parent, index } => {
            let mut p = ignored_path(parent);
            p.push(Seg::Index(*index));
            p
        }
        Path::Map { parent, key } => {
            let mut p = ignored_path(parent);
            p.push(Seg::Key(key.clone()));
            p
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

fn missing_field(message: &str) -> Option<String> {
    message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next())
        .map(str::to_string)
}

/// serde's own messages, which speak of Rust types; anything else was written for users.
fn is_serde_wording(message: &str) -> bool {
    [
        "invalid type",
        "invalid value",
        "invalid length",
        "unknown variant",
    ]
    .iter()
    .any(|p| message.starts_with(p))
}

/// What is wrong with `found`, for a field described by `node` (or, without a schema, by
/// serde's expectation translated to plain words).
fn problem(found: Option<&Value>, node: Option<&Json>, serde_message: &str) -> String {
    // A timestamp the date parser refused: say the format, not the parser's words.
    let date_time =
        node.is_some_and(|n| n.get("format").and_then(Json::as_str) == Some("date-time"));
    if let Some(text) = found.and_then(Value::as_str)
        && (date_time || serde_message.starts_with("failed to parse"))
    {
        return format!(
            "{text:?} is not a timestamp; give one in RFC 3339, such as 2026-12-03T09:21:43Z"
        );
    }
    if !is_serde_wording(serde_message) {
        return serde_message.to_string();
    }
    let expected = match node {
        Some(node) => schema::expected(node),
        None => plain_expectation(serde_message),
    };
    let Some(found) = found else {
        return format!("is not {expected}");
    };
    let integer_field = node.map_or_else(
        || expected.starts_with("a whole number"),
        schema::is_integer,
    );
    if integer_field && let Some(n) = integral(found) {
        return format!("{n} is out of range; allowed is {expected}");
    }
    let mut message = format!("{} is not {expected}", describe(found));
    if let (Some(text), Some(node)) = (found.as_str(), node)
        && let Some(near) = closest(text, schema::variants(node))
    {
        message.push_str(&format!("; did you mean {near}?"));
    }
    message
}

/// A whole number as written, when `value` is one (of any size).
fn integral(value: &Value) -> Option<String> {
    if let Some(digits) = big_integer(value) {
        return Some(digits.to_string());
    }
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.is_finite() && f.fract() == 0.0)
            .map(|_| n.to_string()),
        _ => None,
    }
}

/// A value as the user wrote it, short.
pub fn describe(value: &Value) -> String {
    if let Some(digits) = big_integer(value) {
        return digits.to_string();
    }
    match value {
        Value::Null => "an empty value".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => {
            format!("{:?}", s.chars().take(40).collect::<String>() + "…")
        }
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// serde's "expected …" for types without a schema (the target ModelDeployment), in words.
fn plain_expectation(serde_message: &str) -> String {
    let expected = serde_message.rsplit_once("expected ").map_or("", |(_, e)| {
        e.trim_end_matches(|c: char| c == '.' || c.is_whitespace())
    });
    match expected {
        "i32" => "a whole number from -2147483648 to 2147483647".into(),
        "i64" => "a whole number from -9223372036854775808 to 9223372036854775807".into(),
        "u32" => "a whole number from 0 to 4294967295".into(),
        "u64" | "usize" => "a whole number, 0 or more".into(),
        "f64" | "f32" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" | "a borrowed string" => "text".into(),
        "a sequence" => "a list".into(),
        e if e.starts_with("struct ") || e.starts_with("a map") => "a mapping of fields".into(),
        e if e.starts_with("one of ") || e.starts_with('`') => {
            format!(
                "one of {}",
                e.trim_start_matches("one of ").replace('`', "")
            )
        }
        _ => "a value of the documented form".into(),
    }
}

fn parent_mut<'v>(value: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |node, seg| match (seg, node) {
        (Seg::Key(k), Value::Mapping(m)) => m.get_mut(k.as_str()),
        (Seg::Index(i), Value::Sequence(s)) => s.get_mut(*i),
        _ => None,
    })
}

/// Puts `new` at `path`; false when the path's parent is not there.
fn set(value: &mut Value, path: &[Seg], new: Value) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    match (last, parent_mut(value, parents)) {
        (Seg::Key(k), Some(Value::Mapping(m))) => {
            m.insert(Value::String(k.clone()), new);
            true
        }
        (Seg::Index(i), Some(Value::Sequence(s))) if *i < s.len() => {
            s[*i] = new;
            true
        }
        _ => false,
    }
}

/// Removes the mapping entry at `path`; false when there is none.
fn remove(value: &mut Value, path: &[Seg]) -> bool {
    let Some((Seg::Key(key), parents)) = path.split_last() else {
        return false;
    };
    match parent_mut(value, parents) {
        Some(Value::Mapping(m)) => m.remove(key.as_str()).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_mentions_a_field_only_as_a_word() {
        assert!(mentions(
            "8 is greater than maxReplicas 1024",
            "maxReplicas"
        ));
        assert!(mentions("maxReplicas", "maxReplicas"));
        assert!(!mentions("see maxReplicasX", "maxReplicas"));
        assert!(!mentions("the model serves", "mode"));
    }

    #[test]
    fn serde_expectations_become_words() {
        let doc: Value = serde_yaml_ng::from_str("replicas: lots\nsize: 3000000000\n").unwrap();
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Role {
            replicas: i32,
            size: i32,
        }
        let collected = collect::<Role>(&doc, None);
        let messages: Vec<String> = collected.errors.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            messages,
            [
                "replicas: \"lots\" is not a whole number from -2147483648 to 2147483647",
                "size: 3000000000 is out of range; allowed is a whole number from -2147483648 to 2147483647"
            ],
            "every problem once, and no 'is required' for a value already reported"
        );
        assert!(
            collected.value.is_none(),
            "without a schema nothing stands in"
        );
    }
}
