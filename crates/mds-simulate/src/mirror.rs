//! The world's objects in the in-memory cluster, as the lab's stand-in writes them to an API
//! server (`mds_sim::objects`): Pods with their status, Workloads with theirs, and the
//! target's status; the other way, the target's spec as the worker wrote it goes back into
//! the world. Only what changed is written.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use mds_api::target::{ModelDeployment, TargetRole, Workload};
use mds_sim::{DeploymentKey, PodView, World, objects};
use mds_worker::memory_cluster::{Kind, MemoryCluster};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::SimError;

#[derive(Default)]
pub(crate) struct Mirror {
    /// What was last put, by kind and name.
    written: BTreeMap<(Kind, String), Value>,
    /// The target status last written.
    status: Option<Value>,
    /// The world's views the written Pods and Workloads were made from: an unchanged view
    /// makes the same object (a Pod's condition times move only when its view does), so it
    /// is neither made nor compared again.
    pod_views: BTreeMap<String, PodView>,
    workload_views: BTreeMap<String, Workload>,
    /// The target generation the world last took.
    adopted: Option<i64>,
    /// The world's revision the objects were last mirrored at: while it stands, Pods,
    /// Workloads and the target's status are what was written.
    synced: Option<u64>,
}

impl Mirror {
    pub(crate) fn sync(
        &mut self,
        world: &World,
        key: &DeploymentKey,
        cluster: &MemoryCluster,
        now: Timestamp,
    ) {
        let ns = key.namespace.as_str();
        if self.synced == Some(world.revision()) {
            self.restore_status(key, cluster);
            return;
        }
        self.synced = Some(world.revision());
        let mut present: BTreeSet<(Kind, String)> = BTreeSet::new();
        let mut wanted: BTreeMap<(Kind, String), Value> = BTreeMap::new();
        for view in world.pods(key) {
            let name = view.metadata.name.clone().unwrap_or_default();
            let k = (Kind::Pod, name.clone());
            present.insert(k.clone());
            if self.written.contains_key(&k) && self.pod_views.get(&name) == Some(&view) {
                continue;
            }
            let previous = self
                .written
                .get(&k)
                .map(|p| p["status"].clone())
                .unwrap_or(Value::Null);
            let mut pod = objects::pod_manifest(&view);
            let meta = &view.metadata;
            pod["metadata"]["uid"] = json!(meta.uid);
            if let Some(t) = &meta.creation_timestamp {
                pod["metadata"]["creationTimestamp"] = json!(objects::rfc3339(t.0));
            }
            if let Some(t) = &meta.deletion_timestamp {
                pod["metadata"]["deletionTimestamp"] = json!(objects::rfc3339(t.0));
            }
            pod["status"] = objects::pod_status(&view, &previous, now);
            wanted.insert(k, pod);
            self.pod_views.insert(name, view);
        }
        for workload in world.workloads(key) {
            let name = workload.metadata.name.clone().unwrap_or_default();
            let k = (Kind::Workload, name.clone());
            present.insert(k.clone());
            if self.written.contains_key(&k) && self.workload_views.get(&name) == Some(&workload) {
                continue;
            }
            let mut doc = objects::workload_manifest(&workload);
            doc["metadata"]["namespace"] = json!(ns);
            doc["metadata"]["uid"] = json!(workload.metadata.uid);
            doc["status"] = objects::workload_status(&workload);
            wanted.insert(k, doc);
            self.workload_views.insert(name, workload);
        }
        let gone: BTreeSet<(Kind, String)> = self
            .written
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for (kind, name) in &gone {
            let _ = cluster.delete(*kind, ns, name, now);
            self.written.remove(&(*kind, name.clone()));
            if *kind == Kind::Pod {
                self.pod_views.remove(name);
            } else {
                self.workload_views.remove(name);
            }
        }
        for (k, doc) in wanted {
            if self.written.get(&k) == Some(&doc) {
                continue;
            }
            cluster.edit(|e| e.put(k.0, doc.clone()));
            self.written.insert(k, doc);
        }
        if let Some(status) = world.deployment(key).and_then(|d| d.status.as_ref()) {
            self.status = Some(objects::deployment_status(status));
        }
        self.restore_status(key, cluster);
    }

    /// Writes the target status last mirrored where the cluster's differs (a write of the
    /// target may have replaced it).
    fn restore_status(&self, key: &DeploymentKey, cluster: &MemoryCluster) {
        let Some(status) = &self.status else {
            return;
        };
        let stored = cluster.read(Kind::Target, &key.namespace, &key.name, |doc| {
            &doc["status"] == status
        });
        if stored == Some(false) {
            cluster.edit(|e| {
                e.edit(Kind::Target, &key.namespace, &key.name, |doc| {
                    doc["status"] = status.clone()
                });
            });
        }
    }

    /// Ready replicas per role, as the world's status reports them.
    pub(crate) fn ready(&self, world: &World, key: &DeploymentKey) -> BTreeMap<String, i32> {
        world
            .deployment(key)
            .and_then(|d| d.status.as_ref())
            .map(|s| {
                s.roles
                    .iter()
                    .map(|r| (r.name.clone(), r.ready.unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The target as the cluster holds it.
    fn target(cluster: &MemoryCluster, key: &DeploymentKey) -> Option<ModelDeployment> {
        cluster
            .read(Kind::Target, &key.namespace, &key.name, |doc| {
                ModelDeployment::deserialize(doc).ok()
            })
            .flatten()
    }

    /// The world takes the target's spec when its generation moved (the worker's writes).
    pub(crate) fn adopt_target(
        &mut self,
        world: &mut World,
        cluster: &MemoryCluster,
        key: &DeploymentKey,
    ) -> Result<(), SimError> {
        let generation = cluster.read(Kind::Target, &key.namespace, &key.name, |doc| {
            doc["metadata"]["generation"].as_i64()
        });
        if generation.is_none() || generation.flatten() == self.adopted {
            return Ok(());
        }
        let Some(md) = Self::target(cluster, key) else {
            return Ok(());
        };
        let generation = md.metadata.generation;
        world.apply_deployment(md)?;
        self.adopted = generation;
        Ok(())
    }

    /// The target's counts.
    pub(crate) fn counts(
        &self,
        cluster: &MemoryCluster,
        key: &DeploymentKey,
    ) -> BTreeMap<String, i32> {
        // Only the roles: the whole target decoded twice a pass cost more than the pass's
        // own planning.
        cluster
            .read(Kind::Target, &key.namespace, &key.name, |doc| {
                Vec::<TargetRole>::deserialize(&doc["spec"]["roles"]).ok()
            })
            .flatten()
            .map(|roles| {
                roles
                    .iter()
                    .map(|r| (r.name.clone(), r.replicas()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Each role's declared replicas.
pub(crate) fn role_counts(md: &ModelDeployment) -> BTreeMap<String, i32> {
    md.spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.replicas()))
        .collect()
}
