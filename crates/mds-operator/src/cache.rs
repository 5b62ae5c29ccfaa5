//! Watch caches grouped the way passes read them: scalers and targets by namespace and name,
//! Pods by namespace and target (their instance label), Workloads by namespace and name. Fed
//! by watch events, so a pass never lists anything. A relist replaces the contents at once
//! when it completes, never piecemeal.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::runtime::watcher::Event;
use tokio::time::Instant;

/// How long after a watch error a cache counts as behind when no event has come since: a
/// watch that keeps failing reports again within kube's backoff (at most 30 s), and one that
/// resumed quietly is trusted again after this.
pub const WATCH_ERROR_GRACE: Duration = Duration::from_secs(60);

/// The group an object belongs to: (namespace, key).
pub type GroupKey = (String, String);

/// Objects by group, then by name.
pub struct Cache<K> {
    /// Which group an object is filed under, from the object.
    group_of: fn(&K) -> Option<GroupKey>,
    inner: RwLock<Inner<K>>,
    synced: AtomicBool,
    /// The last watch error not followed by an event.
    failed_at: Mutex<Option<Instant>>,
}

struct Inner<K> {
    groups: HashMap<GroupKey, BTreeMap<String, Arc<K>>>,
    /// (namespace, name) -> group, so a deletion or a moved label finds the old entry.
    filed: HashMap<(String, String), GroupKey>,
    /// Objects of a relist in progress.
    relist: Option<Vec<K>>,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Inner {
            groups: HashMap::new(),
            filed: HashMap::new(),
            relist: None,
        }
    }
}

fn identity<K: kube::Resource>(object: &K) -> Option<(String, String)> {
    let meta = object.meta();
    Some((
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone()?,
    ))
}

impl<K: kube::Resource + Clone> Cache<K> {
    pub fn new(group_of: fn(&K) -> Option<GroupKey>) -> Cache<K> {
        Cache {
            group_of,
            inner: RwLock::new(Inner::default()),
            synced: AtomicBool::new(false),
            failed_at: Mutex::new(None),
        }
    }

    /// Files objects by their own namespace and name.
    pub fn by_name() -> Cache<K> {
        Cache::new(identity)
    }

    /// A first complete list has arrived.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Keeps up with the API server: synced, no relist in progress, and no watch error in the
    /// last [`WATCH_ERROR_GRACE`] without an event since.
    pub fn current(&self, now: Instant) -> bool {
        let relisting = self.inner.read().expect("cache lock").relist.is_some();
        let failed_at = *self.failed_at.lock().expect("cache error lock");
        self.synced()
            && !relisting
            && failed_at.is_none_or(|at| now.saturating_duration_since(at) >= WATCH_ERROR_GRACE)
    }

    /// The watch failed at `now` (it retries with backoff).
    pub fn watch_failed(&self, now: Instant) {
        *self.failed_at.lock().expect("cache error lock") = Some(now);
    }

    /// Applies one watch event; returns the objects it touched (for wake-ups).
    pub fn apply(&self, event: Event<K>) -> Vec<K> {
        // Any event means the watch is flowing again.
        *self.failed_at.lock().expect("cache error lock") = None;
        let mut inner = self.inner.write().expect("cache lock");
        match event {
            Event::Init => {
                inner.relist = Some(Vec::new());
                vec![]
            }
            Event::InitApply(object) => {
                if let Some(buffer) = inner.relist.as_mut() {
                    buffer.push(object);
                }
                vec![]
            }
            Event::InitDone => {
                let objects = inner.relist.take().unwrap_or_default();
                let mut fresh = Inner::default();
                for object in &objects {
                    insert(&mut fresh, self.group_of, object.clone());
                }
                *inner = fresh;
                self.synced.store(true, Ordering::Release);
                objects
            }
            Event::Apply(object) => {
                insert(&mut inner, self.group_of, object.clone());
                vec![object]
            }
            Event::Delete(object) => {
                if let Some(id) = identity(&object) {
                    remove(&mut inner, &id);
                }
                vec![object]
            }
        }
    }

    /// Drops the object of that namespace and name (it no longer decodes, or it was deleted
    /// in a form that does not).
    pub fn remove(&self, namespace: &str, name: &str) {
        let mut inner = self.inner.write().expect("cache lock");
        remove(&mut inner, &(namespace.to_string(), name.to_string()));
        if let Some(relist) = inner.relist.as_mut() {
            relist.retain(|o| {
                identity(o).is_none_or(|id| id != (namespace.to_string(), name.to_string()))
            });
        }
    }

    /// Every object of a group.
    pub fn group(&self, namespace: &str, key: &str) -> Vec<Arc<K>> {
        let inner = self.inner.read().expect("cache lock");
        inner
            .groups
            .get(&(namespace.to_string(), key.to_string()))
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The object of that namespace and name, for caches filed by name.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let inner = self.inner.read().expect("cache lock");
        let group = inner
            .filed
            .get(&(namespace.to_string(), name.to_string()))?;
        inner.groups.get(group)?.get(name).cloned()
    }

    /// Every object in the cache.
    pub fn all(&self) -> Vec<Arc<K>> {
        let inner = self.inner.read().expect("cache lock");
        inner
            .groups
            .values()
            .flat_map(|g| g.values().cloned())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.inner.read().expect("cache lock").filed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn insert<K: kube::Resource>(
    inner: &mut Inner<K>,
    group_of: fn(&K) -> Option<GroupKey>,
    object: K,
) {
    let Some(id) = identity(&object) else {
        return;
    };
    remove(inner, &id);
    let Some(group) = group_of(&object) else {
        return;
    };
    inner.filed.insert(id.clone(), group.clone());
    inner
        .groups
        .entry(group)
        .or_default()
        .insert(id.1, Arc::new(object));
}

fn remove<K>(inner: &mut Inner<K>, id: &(String, String)) {
    if let Some(group) = inner.filed.remove(id)
        && let Some(g) = inner.groups.get_mut(&group)
    {
        g.remove(&id.1);
        if g.is_empty() {
            inner.groups.remove(&group);
        }
    }
}

/// What a cached Pod keeps: its metadata without the field managers, and its status. Passes
/// read labels, annotations, the deletion mark, conditions, the address and restart counts;
/// the spec (containers, volumes, environment) and `managedFields` are most of a Pod's size,
/// and at thousands of Pods most of the controller's memory.
pub fn trim_pod(pod: &mut k8s_openapi::api::core::v1::Pod) {
    pod.metadata.managed_fields = None;
    pod.spec = None;
}

/// Drops the field managers, which no pass reads.
pub fn trim_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(name: &str, instance: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {"app.kubernetes.io/instance": instance}}}))
        .unwrap()
    }

    fn by_instance(p: &Pod) -> Option<GroupKey> {
        let instance = p
            .metadata
            .labels
            .as_ref()?
            .get("app.kubernetes.io/instance")?;
        Some((p.metadata.namespace.clone()?, instance.clone()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_cache_is_current_while_it_keeps_up_with_the_api_server() {
        let cache = Cache::new(by_instance);
        let now = Instant::now;
        assert!(!cache.current(now()), "before the first list");
        cache.apply(Event::Init);
        cache.apply(Event::InitApply(pod("a", "llm")));
        assert!(!cache.current(now()), "while the first list arrives");
        cache.apply(Event::InitDone);
        assert!(cache.current(now()));
        // A relist (after the watch desynced) leaves it behind until it completes.
        cache.apply(Event::Init);
        assert!(!cache.current(now()));
        cache.apply(Event::InitDone);
        assert!(cache.current(now()));
        // A failing watch: behind until an event arrives, or the grace passes without a
        // further error (a watch that resumed quietly).
        cache.watch_failed(now());
        assert!(!cache.current(now()));
        cache.apply(Event::Apply(pod("b", "llm")));
        assert!(cache.current(now()), "events flow again");
        cache.watch_failed(now());
        tokio::time::advance(WATCH_ERROR_GRACE - Duration::from_secs(1)).await;
        assert!(!cache.current(now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(cache.current(now()));
    }

    #[test]
    fn events_file_objects_by_group_and_relists_replace_at_once() {
        let cache = Cache::new(by_instance);
        cache.apply(Event::Apply(pod("a", "llm")));
        cache.apply(Event::Apply(pod("b", "llm")));
        cache.apply(Event::Apply(pod("c", "other")));
        assert_eq!(cache.group("ns", "llm").len(), 2);
        // A label change moves the Pod.
        cache.apply(Event::Apply(pod("b", "other")));
        assert_eq!(cache.group("ns", "llm").len(), 1);
        assert_eq!(cache.group("ns", "other").len(), 2);
        cache.apply(Event::Delete(pod("a", "llm")));
        assert!(cache.group("ns", "llm").is_empty());
        // During a relist the old contents stay until it completes.
        assert!(!cache.synced());
        cache.apply(Event::Init);
        cache.apply(Event::InitApply(pod("d", "llm")));
        assert_eq!(cache.group("ns", "other").len(), 2);
        cache.apply(Event::InitDone);
        assert!(cache.synced());
        assert!(cache.group("ns", "other").is_empty());
        assert_eq!(cache.group("ns", "llm").len(), 1);
        assert_eq!(cache.len(), 1);
    }

    /// A Pod as the API server returns it: spec, field managers, status.
    fn full_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "llm-server-0", "namespace": "ns", "uid": "u0",
                "labels": {"app.kubernetes.io/instance": "llm", "app.kubernetes.io/component": "server",
                    "modeldeployment.gpustack.ai/pod-ordinal": "0", "kueue.x-k8s.io/pod-group-name": "g0"},
                "annotations": {"prometheus.io/port": "8000"},
                "managedFields": [{"manager": "gpustack", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.10.0",
                "env": [{"name": "HF_HOME", "value": "/cache"}]}]},
            "status": {"podIP": "10.0.0.7", "conditions": [
                    {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "main", "restartCount": 2, "ready": true, "image": "i",
                    "imageID": "", "started": true}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_trimmed_pod_keeps_every_fact_a_pass_reads() {
        use crate::facts::{place, pod_facts, pod_ready, restart_count};
        let full = full_pod();
        let mut trimmed = full.clone();
        trim_pod(&mut trimmed);
        assert!(trimmed.spec.is_none() && trimmed.metadata.managed_fields.is_none());
        assert_eq!(place(&trimmed), place(&full));
        assert_eq!(pod_ready(&trimmed), pod_ready(&full));
        assert_eq!(restart_count(&trimmed), Some(2));
        let facts = |p: &Pod| pod_facts(&[Arc::new(p.clone())], "server");
        assert_eq!(facts(&trimmed), facts(&full));
        assert_eq!(facts(&trimmed)[0].pod_ip.as_deref(), Some("10.0.0.7"));
        assert_eq!(trimmed.metadata.labels, full.metadata.labels);
        assert_eq!(trimmed.metadata.annotations, full.metadata.annotations);
    }
}
