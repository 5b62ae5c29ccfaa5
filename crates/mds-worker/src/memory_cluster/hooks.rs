//! Hooks that tests drive the cluster with: answers of a given shape for the next write or for
//! every write of a kind, edits that land just before a write (a user racing the worker) or at
//! once, all without admission, counts of the writes tried, a cluster without the fence
//! webhook, and a lost watch (snapshots frozen until it is back).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use serde_json::{Value, json};

use super::{Kind, MemoryCluster, Objects, State, WriteKind, key_of};
use crate::ports::WriteError;

type PendingEdit = Box<dyn FnOnce(&mut Edit<'_>) + Send>;

#[derive(Default)]
pub(super) struct Hooks {
    next_errors: BTreeMap<WriteKind, VecDeque<WriteError>>,
    every_error: BTreeMap<WriteKind, WriteError>,
    edits_before: BTreeMap<WriteKind, VecDeque<PendingEdit>>,
    attempts: BTreeMap<WriteKind, usize>,
    /// The objects a lost watch still shows.
    frozen: Option<Objects>,
    fence_off: bool,
}

impl Hooks {
    pub(super) fn fences(&self) -> bool {
        !self.fence_off
    }

    pub(super) fn frozen(&self) -> Option<&Objects> {
        self.frozen.as_ref()
    }

    pub(super) fn count_attempt(&mut self, kind: WriteKind) {
        *self.attempts.entry(kind).or_default() += 1;
    }

    /// The error set for this write of `kind`, if any.
    pub(super) fn error_for(&mut self, kind: WriteKind) -> Option<WriteError> {
        self.next_errors
            .get_mut(&kind)
            .and_then(VecDeque::pop_front)
            .or_else(|| self.every_error.get(&kind).cloned())
    }
}

/// The stored objects, edited as no admission sees them: what a change leaves is stored as it
/// is (its generation too), and only the resource version moves, as on every write.
pub struct Edit<'a>(&'a mut State);

impl Edit<'_> {
    /// The stored object.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Value> {
        let key = (kind, namespace.to_string(), name.to_string());
        self.0.objects.get(&key)
    }

    /// Changes the stored object; returns it as stored, `None` when there is none. A change
    /// that changes nothing is no write (the API server's no-op update).
    pub fn edit(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let (_, old, doc) = self.changed(kind, namespace, name, change)?;
        Some(if doc == old { doc } else { self.put(kind, doc) })
    }

    /// Changes the stored object as the API server stores any update: the generation moves
    /// when the spec changed (`edit` keeps it as the change leaves it). A recorded user edit
    /// (`mds replay`'s `target.replicas`). Returns it as stored, `None` when there is none.
    pub fn update(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let (key, old, doc) = self.changed(kind, namespace, name, change)?;
        Some(if doc == old {
            doc
        } else {
            self.0.store(key, Some(&old), doc, Value::clone)
        })
    }

    /// The stored object and what `change` makes of it.
    fn changed(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Option<((Kind, String, String), Value, Value)> {
        let old = self.get(kind, namespace, name)?.clone();
        let mut doc = old.clone();
        change(&mut doc);
        Some(((kind, namespace.to_string(), name.to_string()), old, doc))
    }

    /// Creates or replaces an object as it is (a missing generation starts at 1).
    pub fn put(&mut self, kind: Kind, mut doc: Value) -> Value {
        let (ns, name) = key_of(&doc);
        let st = &mut *self.0;
        if doc["metadata"]["generation"].is_null() {
            doc["metadata"]["generation"] = json!(1);
        }
        doc["metadata"]["resourceVersion"] = json!((st.resource_version + 1).to_string());
        st.objects.insert((kind, ns, name), doc.clone());
        st.commit_write();
        doc
    }
}

impl State {
    /// Lets the edit waiting for a write of `kind` land (the write itself was not refused).
    pub(super) fn edit_before(&mut self, kind: WriteKind) {
        let pending = self
            .hooks
            .edits_before
            .get_mut(&kind)
            .and_then(VecDeque::pop_front);
        if let Some(edit) = pending {
            edit(&mut Edit(self));
        }
    }
}

/// Drives one of the cluster's futures, which are ready at once, from synchronous code.
///
/// # Panics
/// When the future is not ready (it is not one of this cluster's).
pub fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a MemoryCluster future was not ready"),
    }
}

impl MemoryCluster {
    /// The next write of `kind` is answered with `error`, as it is (after scripted faults;
    /// errors queue in order).
    pub fn fail_next(&self, kind: WriteKind, error: WriteError) {
        let mut st = self.state();
        let queue = st.hooks.next_errors.entry(kind).or_default();
        queue.push_back(error);
    }

    /// Every write of `kind` is answered with `error` (after those set for the next writes)
    /// until this is called with `None`.
    pub fn fail_every(&self, kind: WriteKind, error: Option<WriteError>) {
        let mut st = self.state();
        match error {
            Some(e) => st.hooks.every_error.insert(kind, e),
            None => st.hooks.every_error.remove(&kind),
        };
    }

    /// Runs `edit` just before the next write of `kind` that no fault answers is applied: a
    /// user's write that lands between the worker's read and its write.
    pub fn before_next_write(
        &self,
        kind: WriteKind,
        edit: impl FnOnce(&mut Edit<'_>) + Send + 'static,
    ) {
        let mut st = self.state();
        let queue = st.hooks.edits_before.entry(kind).or_default();
        queue.push_back(Box::new(edit));
    }

    /// Edits the stored objects now, as no admission sees it (a cluster without our webhooks,
    /// or a state set up by hand).
    pub fn edit<R>(&self, change: impl FnOnce(&mut Edit<'_>) -> R) -> R {
        change(&mut Edit(&mut self.state()))
    }

    /// Writes of `kind` tried through the port, answered by a fault or not.
    pub fn attempts(&self, kind: WriteKind) -> usize {
        self.state().hooks.attempts.get(&kind).copied().unwrap_or(0)
    }

    /// Whether target writes pass the binding fence (they do unless told): `false` is a
    /// cluster without the fence webhook.
    pub fn set_fence(&self, on: bool) {
        self.state().hooks.fence_off = !on;
    }

    /// The watch is lost: snapshots show what they show now until [`Self::watch_again`].
    pub fn lose_watch(&self) {
        let mut st = self.state();
        let seen = st.history.front().unwrap_or(&st.objects).clone();
        st.hooks.frozen = Some(seen);
    }

    /// The watch is back: snapshots follow the writes again.
    pub fn watch_again(&self) {
        self.state().hooks.frozen = None;
    }
}
