//! Objects put into the cluster as they were recorded, not as a client would write them:
//! `mds replay` resumes from a scaler with its status and generation, and plays the changes
//! its timeline records (a user's edit of the counts, GPUStack's retirement status, the Pods
//! and Workloads that exist). No admission and no fence: these changes happened.

use serde_json::{Value, json};

use super::{Kind, MemoryCluster, key_of};

impl MemoryCluster {
    /// Stores `doc` as given, its UID, generation and status included (a missing UID is
    /// assigned); only the resource version is the cluster's. Returns it as stored.
    pub fn restore(&self, kind: Kind, mut doc: Value) -> Value {
        let mut st = self.state();
        let (ns, name) = key_of(&doc);
        if doc["metadata"]["uid"].is_null() {
            st.uids += 1;
            doc["metadata"]["uid"] = json!(format!("uid-{}", st.uids));
        }
        doc["metadata"]["resourceVersion"] = json!((st.resource_version + 1).to_string());
        st.objects.insert((kind, ns, name), doc.clone());
        st.commit_write();
        doc
    }

    /// Applies a recorded change to a stored object: the generation moves when the spec
    /// changed, as on any write. `None` when there is no such object.
    pub fn edit(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let mut st = self.state();
        let key = (kind, namespace.to_string(), name.to_string());
        let old = st.objects.get(&key).cloned()?;
        let mut doc = old.clone();
        change(&mut doc);
        if doc == old {
            return Some(doc);
        }
        Some(st.store(key, Some(old), doc))
    }
}
