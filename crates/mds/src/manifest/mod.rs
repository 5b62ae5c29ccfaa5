//! Reading Kubernetes manifests as a user wrote them: YAML streams split into documents,
//! picked by kind, and typed with every problem named by its path in the user's words.
//! Shared by `mds validate` and `mds replay`, so both refuse the same input the same way.

pub mod collect;
pub mod scaler;
pub mod schema;

use std::fmt;

use mds_api::spec::GROUP;
use serde::de::{self, Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess};
use serde_yaml_ng::value::{Tag, TaggedValue};
use serde_yaml_ng::{Mapping, Value};

/// One step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// `spec.roles[0].maxReplicas`; the empty path is the whole document.
pub fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        "(document)".to_string()
    } else {
        out
    }
}

/// Whether `path` (rendered) is `scope` or lies inside it.
pub fn within(path: &str, scope: &str) -> bool {
    path.strip_prefix(scope)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// The value at `path`, if the document has one.
pub fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    path.iter().try_fold(value, |node, seg| match (seg, node) {
        (Seg::Key(k), Value::Mapping(m)) => m.get(k.as_str()),
        (Seg::Index(i), Value::Sequence(s)) => s.get(*i),
        _ => None,
    })
}

/// The tag that marks an integer too large for any machine integer (see [`Loose`]).
const BIG_INTEGER: &str = "mds-big-integer";

/// The digits of an integer that no machine integer holds, when `value` is one.
pub fn big_integer(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(t) if t.tag == BIG_INTEGER => t.value.as_str(),
        _ => None,
    }
}

/// A YAML value read without refusing huge integers: `maxReplicas: 99999999999999999999` is
/// a value out of range (a finding at its path), not unreadable YAML. Such integers are kept
/// as their digits under a private tag.
struct Loose(Value);

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor).map(Loose)
    }
}

struct LooseVisitor;

fn big(digits: String) -> Value {
    Value::Tagged(Box::new(TaggedValue {
        tag: Tag::new(BIG_INTEGER),
        value: Value::String(digits),
    }))
}

impl<'de> de::Visitor<'de> for LooseVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or_else(|_| big(v.to_string()), |v| Value::Number(v.into())))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| big(v.to_string()), |v| Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Loose::deserialize(d).map(|l| l.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Loose(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Sequence(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut mapping = Mapping::new();
        while let Some((Loose(key), Loose(value))) = map.next_entry()? {
            if mapping.contains_key(&key) {
                let shown = serde_yaml_ng::to_string(&key).unwrap_or_default();
                return Err(de::Error::custom(format!(
                    "the key {} appears twice in one mapping; keep one",
                    shown.trim_end()
                )));
            }
            mapping.insert(key, value);
        }
        Ok(Value::Mapping(mapping))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (tag, contents) = data.variant::<String>()?;
        let Loose(value) = contents.newtype_variant()?;
        Ok(Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(tag),
            value,
        })))
    }
}

/// One YAML document of an input.
pub struct Document {
    pub source: String,
    pub index: usize,
    pub value: Value,
}

impl Document {
    /// `FILE: document N`, the prefix of every line about this document.
    pub fn label(&self) -> String {
        format!("{}: document {}", self.source, self.index + 1)
    }

    fn text(&self, path: &[&str]) -> Option<&str> {
        path.iter()
            .try_fold(&self.value, |v, key| v.get(*key))
            .and_then(Value::as_str)
    }

    pub fn kind(&self) -> Option<&str> {
        self.text(&["kind"])
    }

    pub fn name(&self) -> Option<&str> {
        self.text(&["metadata", "name"])
    }

    pub fn namespace(&self) -> Option<&str> {
        self.text(&["metadata", "namespace"])
    }

    /// The API group of `apiVersion` (`""` for the core group).
    pub fn api_group(&self) -> Option<&str> {
        let api_version = self.text(&["apiVersion"])?;
        Some(api_version.split_once('/').map_or("", |(group, _)| group))
    }

    /// Whether this document is a `kind` of our API group.
    pub fn is(&self, kind: &str) -> bool {
        self.kind() == Some(kind) && self.api_group() == Some(GROUP)
    }

    /// `ModelDeployment "md" in namespace "prod"`, for messages that list what a file holds.
    pub fn describe(&self) -> String {
        let mut out = match self.kind() {
            Some(kind) if self.api_group() == Some(GROUP) || self.api_group().is_none() => {
                kind.to_string()
            }
            Some(kind) => format!(
                "{kind} of apiVersion {:?}",
                self.text(&["apiVersion"]).unwrap_or("")
            ),
            None => "a document without kind".to_string(),
        };
        if let Some(name) = self.name() {
            out.push_str(&format!(" {name:?}"));
        }
        if let Some(namespace) = self.namespace() {
            out.push_str(&format!(" in namespace {namespace:?}"));
        }
        out
    }
}

/// Splits a YAML stream into non-empty documents; a syntax error names the line.
pub fn parse_documents(source: &str, bytes: &[u8]) -> Result<Vec<Document>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "{source}: not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    let mut documents = Vec::new();
    for (index, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let Loose(value) = Loose::deserialize(de).map_err(|e| {
            let place = e
                .location()
                .map(|l| format!("line {} column {}", l.line(), l.column()))
                .unwrap_or_else(|| format!("document {}", index + 1));
            format!("{source}: {place}: not readable YAML: {e}")
        })?;
        if value.is_null() {
            continue;
        }
        if !value.is_mapping() {
            return Err(format!(
                "{source}: document {}: not readable as a manifest: expected a mapping with apiVersion and kind",
                index + 1
            ));
        }
        documents.push(Document {
            source: source.to_string(),
            index,
            value,
        });
    }
    Ok(documents)
}

/// What a list of documents holds, for "found instead" messages: `ModelDeployment "a",
/// ConfigMap "b"`, or `nothing`.
pub fn holdings(documents: &[&Document]) -> String {
    if documents.is_empty() {
        return "nothing".to_string();
    }
    documents
        .iter()
        .map(|d| d.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_integers_are_values_not_syntax_errors() {
        let docs = parse_documents(
            "a.yaml",
            b"a: 99999999999999999999\nb: -99999999999999999999\nc: 7\n",
        )
        .expect("readable");
        let value = &docs[0].value;
        assert_eq!(big_integer(&value["a"]), Some("99999999999999999999"));
        assert_eq!(big_integer(&value["b"]), Some("-99999999999999999999"));
        assert_eq!(value["c"].as_i64(), Some(7));
    }

    #[test]
    fn tags_and_duplicates() {
        let docs = parse_documents("a.yaml", b"a: !custom 5\n").expect("readable");
        assert!(matches!(docs[0].value["a"], Value::Tagged(_)));
        let err = parse_documents("a.yaml", b"a: 1\na: 2\n")
            .err()
            .expect("refused");
        assert!(err.contains("a.yaml: "), "{err}");
    }

    #[test]
    fn paths_render_and_nest() {
        let path = [
            Seg::Key("spec".into()),
            Seg::Key("roles".into()),
            Seg::Index(0),
            Seg::Key("maxReplicas".into()),
        ];
        assert_eq!(render(&path), "spec.roles[0].maxReplicas");
        assert_eq!(render(&[]), "(document)");
        assert!(within("spec.roles[0].maxReplicas", "spec.roles[0]"));
        assert!(within("spec.roles[0]", "spec.roles[0]"));
        assert!(!within("spec.roles[01]", "spec.roles[0]"));
        assert!(!within("spec.rolesX", "spec.roles"));
    }
}
