//! Typed copies of stored objects, parsed once per resource version: a snapshot hands out
//! the same `Arc` for an object that did not change, so a pass over a target with a thousand
//! Pods does not parse a thousand Pods again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parsed objects of one kind by (namespace, name), with the resource version they were
/// parsed at.
pub(super) struct Parsed<T> {
    by_key: BTreeMap<(String, String), (String, Arc<T>)>,
}

impl<T> Default for Parsed<T> {
    fn default() -> Self {
        Parsed {
            by_key: BTreeMap::new(),
        }
    }
}

impl<T: DeserializeOwned> Parsed<T> {
    /// The typed objects of `docs`, parsed where the cached copy is of another version; an
    /// object that does not parse is left out.
    pub(super) fn of<'a>(
        &mut self,
        docs: impl Iterator<Item = (&'a (String, String), &'a Value)>,
    ) -> Vec<Arc<T>> {
        let mut out = Vec::new();
        for (key, doc) in docs {
            let version = doc["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            match self.by_key.get(key) {
                Some((v, typed)) if v == version => out.push(typed.clone()),
                _ => {
                    let Ok(typed) = T::deserialize(doc) else {
                        self.by_key.remove(key);
                        continue;
                    };
                    let typed = Arc::new(typed);
                    self.by_key
                        .insert(key.clone(), (version.to_string(), typed.clone()));
                    out.push(typed);
                }
            }
        }
        out
    }

    /// One object, as [`Parsed::of`] gives it.
    pub(super) fn one(&mut self, key: &(String, String), doc: &Value) -> Option<Arc<T>> {
        self.of(std::iter::once((key, doc))).pop()
    }

    /// Drops the copies of objects that are gone. A snapshot reads one target's Pods, so
    /// what it did not read may still be another's.
    pub(super) fn retain(&mut self, live: impl Fn(&(String, String)) -> bool) {
        self.by_key.retain(|k, _| live(k));
    }
}
