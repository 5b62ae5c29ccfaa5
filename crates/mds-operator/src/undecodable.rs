//! Watches that one bad object cannot stall. The watches read objects untyped (JSON, which
//! always decodes) and decode each into our model on its own: an object that does not decode
//! (a GPUStack revision ahead of us, a CRD installed with a looser schema) is left out of the
//! cache and recorded here with what did not decode and where, and every other object goes
//! on. A typed watch would fail its whole list on that one object and stall every scaler
//! behind its backoff. What reads the record: the scaler of an undecodable target (`Blocked`
//! `TargetUnreadable`, through [`crate::kube_cluster::Caches::snapshot`]), and the gauge
//! `mds_undecodable_objects` the alerts and the dashboard read.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use kube::core::DynamicObject;
use kube::runtime::watcher::Event;
use mds_api::decode::typed;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use serde::de::DeserializeOwned;

/// (kind, namespace, name).
pub type ObjectKey = (&'static str, String, String);

/// An object the watch saw that is not (or no longer) in the cache because it does not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gone {
    pub namespace: String,
    pub name: String,
}

/// What one untyped event becomes: the typed event for the cache, the objects that left it
/// because they do not decode, and the records to forget once the cache holds the event
/// ([`Undecodable::settle`]): a record goes only after its object's good version is cached, so
/// a pass never sees the object neither cached nor recorded (it would read as deleted).
pub struct Decoded<K> {
    pub event: Option<Event<K>>,
    pub gone: Vec<Gone>,
    pub forget: Vec<ObjectKey>,
}

#[derive(Default)]
struct Inner {
    /// Objects whose latest version does not decode: why.
    objects: BTreeMap<ObjectKey, String>,
    /// Per kind, the undecodable objects of a relist in progress.
    relists: BTreeMap<&'static str, BTreeMap<ObjectKey, String>>,
}

/// The undecodable objects of every decoding watch.
#[derive(Default)]
pub struct Undecodable(Mutex<Inner>);

impl std::fmt::Debug for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Undecodable")
            .field(&self.lock().objects)
            .finish()
    }
}

fn identity(object: &DynamicObject) -> (String, String) {
    (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

impl Undecodable {
    /// Turns one event of a watch of `kind` into the typed event its cache applies, recording
    /// the objects that do not decode (and forgetting those that do again or are deleted).
    pub fn decode<K: DeserializeOwned>(
        &self,
        kind: &'static str,
        event: Event<DynamicObject>,
    ) -> Decoded<K> {
        let mut inner = self.lock();
        let key = |object: &DynamicObject| {
            let (namespace, name) = identity(object);
            (kind, namespace, name)
        };
        let none = || Decoded {
            event: None,
            gone: vec![],
            forget: vec![],
        };
        match event {
            Event::Init => {
                inner.relists.insert(kind, BTreeMap::new());
                Decoded {
                    event: Some(Event::Init),
                    gone: vec![],
                    forget: vec![],
                }
            }
            Event::InitApply(object) => match typed::<K>(&object) {
                Ok(typed) => Decoded {
                    event: Some(Event::InitApply(typed)),
                    gone: vec![],
                    forget: vec![],
                },
                Err(why) => {
                    warn(kind, &object, &why);
                    let key = key(&object);
                    inner.relists.entry(kind).or_default().insert(key, why);
                    none()
                }
            },
            Event::InitDone => {
                // The relist replaces the kind's record whole, as it replaces the cache: the
                // new records now, the old ones once the cache holds the relist.
                let fresh = inner.relists.remove(&kind).unwrap_or_default();
                let forget = inner
                    .objects
                    .keys()
                    .filter(|key| key.0 == kind && !fresh.contains_key(*key))
                    .cloned()
                    .collect();
                let gone = fresh
                    .keys()
                    .map(|(_, namespace, name)| Gone {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    })
                    .collect();
                inner.objects.extend(fresh);
                Decoded {
                    event: Some(Event::InitDone),
                    gone,
                    forget,
                }
            }
            Event::Apply(object) => {
                let key = key(&object);
                match typed::<K>(&object) {
                    Ok(typed) => Decoded {
                        event: Some(Event::Apply(typed)),
                        gone: vec![],
                        forget: vec![key],
                    },
                    Err(why) => {
                        warn(kind, &object, &why);
                        inner.objects.insert(key, why);
                        let (namespace, name) = identity(&object);
                        Decoded {
                            event: None,
                            gone: vec![Gone { namespace, name }],
                            forget: vec![],
                        }
                    }
                }
            }
            Event::Delete(object) => {
                inner.objects.remove(&key(&object));
                match typed::<K>(&object) {
                    Ok(typed) => Decoded {
                        event: Some(Event::Delete(typed)),
                        gone: vec![],
                        forget: vec![],
                    },
                    Err(_) => {
                        let (namespace, name) = identity(&object);
                        Decoded {
                            event: None,
                            gone: vec![Gone { namespace, name }],
                            forget: vec![],
                        }
                    }
                }
            }
        }
    }

    /// Forgets the records of objects whose good versions the cache now holds.
    pub fn settle(&self, forget: Vec<ObjectKey>) {
        let mut inner = self.lock();
        for key in forget {
            inner.objects.remove(&key);
        }
    }

    /// Why the object does not decode, while it does not.
    pub fn problem(&self, kind: &str, namespace: &str, name: &str) -> Option<String> {
        self.lock()
            .objects
            .iter()
            .find(|((k, ns, n), _)| *k == kind && ns == namespace && n == name)
            .map(|(_, why)| why.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every update completes under the lock; a panic cannot leave half of one.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn warn(kind: &str, object: &DynamicObject, why: &str) {
    let (namespace, name) = identity(object);
    tracing::warn!(kind, %namespace, %name, problem = why, "object does not decode; left out until a version of it does");
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    kind: String,
    namespace: String,
    name: String,
}

impl Collector for Undecodable {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let inner = self.lock();
        let mut metric = encoder.encode_descriptor(
            "undecodable_objects",
            "1 for each watched object whose latest version does not decode into mds's model (left out: its scaler is Blocked TargetUnreadable, or a scaler that does not decode does not plan).",
            None,
            MetricType::Gauge,
        )?;
        for (kind, namespace, name) in inner.objects.keys() {
            let labels = ObjectLabels {
                kind: kind.to_string(),
                namespace: namespace.clone(),
                name: name.clone(),
            };
            ConstGauge::new(1).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mds_api::target::ModelDeployment;
    use serde_json::json;

    fn object(name: &str, replicas: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"roles": [{"name": "server", "replicas": replicas}]}
        }))
        .unwrap()
    }

    fn names(event: &Option<Event<ModelDeployment>>) -> Vec<String> {
        match event {
            Some(Event::Apply(md) | Event::InitApply(md)) => {
                vec![md.metadata.name.clone().unwrap()]
            }
            _ => vec![],
        }
    }

    #[test]
    fn a_bad_object_is_left_out_and_named_and_the_others_decode() {
        let u = Undecodable::default();
        assert!(
            u.decode::<ModelDeployment>("ModelDeployment", Event::Init)
                .event
                .is_some()
        );
        let good = u.decode::<ModelDeployment>(
            "ModelDeployment",
            Event::InitApply(object("good", json!(2))),
        );
        assert_eq!(names(&good.event), ["good"]);
        let bad = u.decode::<ModelDeployment>(
            "ModelDeployment",
            Event::InitApply(object("bad", json!("two"))),
        );
        assert!(bad.event.is_none());
        assert_eq!(
            u.problem("ModelDeployment", "ns", "bad"),
            None,
            "not before the relist ends"
        );
        let done = u.decode::<ModelDeployment>("ModelDeployment", Event::InitDone);
        assert!(matches!(done.event, Some(Event::InitDone)));
        assert_eq!(
            done.gone,
            [Gone {
                namespace: "ns".into(),
                name: "bad".into()
            }]
        );
        let problem = u.problem("ModelDeployment", "ns", "bad").unwrap();
        assert!(
            problem.starts_with("spec.roles[0].replicas: invalid type: string \"two\""),
            "{problem}"
        );
        // The metric names it.
        let mut registry = prometheus_client::registry::Registry::with_prefix("mds");
        let shared = std::sync::Arc::new(u);
        registry.register_collector(Box::new(shared.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"mds_undecodable_objects{kind="ModelDeployment",namespace="ns",name="bad"} 1"#
            ),
            "{text}"
        );
        // A version that decodes releases it; a good object that turns bad leaves the cache.
        let fixed = shared
            .decode::<ModelDeployment>("ModelDeployment", Event::Apply(object("bad", json!(3))));
        assert_eq!(names(&fixed.event), ["bad"]);
        assert!(
            shared.problem("ModelDeployment", "ns", "bad").is_some(),
            "kept until the cache holds the good version"
        );
        shared.settle(fixed.forget);
        assert_eq!(shared.problem("ModelDeployment", "ns", "bad"), None);
        let broken = shared.decode::<ModelDeployment>(
            "ModelDeployment",
            Event::Apply(object("good", json!({"count": 2}))),
        );
        assert!(broken.event.is_none());
        assert_eq!(
            broken.gone,
            [Gone {
                namespace: "ns".into(),
                name: "good".into()
            }]
        );
        assert!(shared.problem("ModelDeployment", "ns", "good").is_some());
        // Deleted: forgotten.
        shared.decode::<ModelDeployment>(
            "ModelDeployment",
            Event::Delete(object("good", json!({"count": 2}))),
        );
        assert_eq!(shared.problem("ModelDeployment", "ns", "good"), None);
    }
}
