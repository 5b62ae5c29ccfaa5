//! Builders of the objects tests write by hand: a `ModelDeployment` target ([`mk_target`],
//! [`mk_role`]), a `ModelDeploymentScaler` ([`mk_scaler`]), a serving Pod ([`mk_pod`]) and a
//! Kueue `Workload` ([`mk_workload`]). Dev-only: each builder starts from the smallest object
//! the tests share, takes a few chained options, and ends in `build()` (a `serde_json::Value`,
//! to edit further or hand to a fake) or `typed()` (any type that deserializes from it).
//!
//! ```
//! use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target};
//! let target = mk_target("llm").role(mk_role("server").kind("Server").replicas(2)).build();
//! let scaler = mk_scaler("llm").role_bounds("server", 1, 8).queue_depth("10").build();
//! let pod = mk_pod("llm", "server", 0).ip("127.0.0.10").ready().build();
//! assert_eq!(target["spec"]["roles"][0]["replicas"], 2);
//! assert_eq!(scaler["spec"]["mode"], "Active");
//! assert_eq!(pod["metadata"]["name"], "llm-server-0");
//! ```

use mds_api::resources::{WORKLOAD_GROUP, WORKLOAD_VERSION};
use mds_api::target::{annotation_keys, labels};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// The API version of both the target and the scaler.
pub const API_VERSION: &str = "worker.gpustack.ai/v1";

/// Deserializes a built object; a builder that cannot make a `T` is a broken test.
fn typed<T: DeserializeOwned>(what: &str, value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{what} does not deserialize: {e}"))
}

/// Object metadata: a name and the optional fields tests set on it.
#[derive(Clone, Debug)]
struct Meta(Map<String, Value>);

impl Meta {
    fn named(name: &str) -> Meta {
        let mut map = Map::new();
        map.insert("name".into(), json!(name));
        Meta(map)
    }

    fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.into(), value);
    }

    /// The metadata of an object read back from a cluster: namespace, uid, generation 1.
    fn stored(&mut self, namespace: &str, uid: &str, resource_version: &str) {
        self.set("namespace", json!(namespace));
        self.set("uid", json!(uid));
        self.set("generation", json!(1));
        self.set("resourceVersion", json!(resource_version));
    }
}

/// A role of a target: `instanceType: h100` unless told, no kind, replicas or size.
pub fn mk_role(name: &str) -> Role {
    let mut role = Map::new();
    role.insert("name".into(), json!(name));
    role.insert("instanceType".into(), json!("h100"));
    Role(role)
}

#[derive(Clone, Debug)]
pub struct Role(Map<String, Value>);

impl Role {
    pub fn kind(mut self, kind: &str) -> Role {
        self.0.insert("kind".into(), json!(kind));
        self
    }

    pub fn replicas(mut self, replicas: impl Into<i64>) -> Role {
        let replicas: i64 = replicas.into();
        self.0.insert("replicas".into(), json!(replicas));
        self
    }

    pub fn size(mut self, size: impl Into<i64>) -> Role {
        let size: i64 = size.into();
        self.0.insert("size".into(), json!(size));
        self
    }

    pub fn instance_type(mut self, instance_type: &str) -> Role {
        self.0.insert("instanceType".into(), json!(instance_type));
        self
    }

    /// Without `instanceType`, as a role written with none.
    pub fn no_instance_type(mut self) -> Role {
        self.0.remove("instanceType");
        self
    }

    /// Sets any other field of the role (`extraArgs`...).
    pub fn field(mut self, key: &str, value: Value) -> Role {
        self.0.insert(key.into(), value);
        self
    }

    pub fn build(self) -> Value {
        Value::Object(self.0)
    }
}

/// A `ModelDeployment` named `name` on vLLM behind `vllm-router`, with no roles yet.
pub fn mk_target(name: &str) -> Target {
    Target {
        meta: Meta::named(name),
        engine: "vLLM".into(),
        router: Some("vllm-router".into()),
        roles: vec![],
        status: None,
    }
}

#[derive(Clone, Debug)]
pub struct Target {
    meta: Meta,
    engine: String,
    router: Option<String>,
    roles: Vec<Value>,
    status: Option<Value>,
}

impl Target {
    pub fn role(mut self, role: Role) -> Target {
        self.roles.push(role.build());
        self
    }

    /// One role a tuple: (name, kind, replicas), `instanceType: h100`.
    pub fn roles(self, roles: &[(&str, &str, i32)]) -> Target {
        roles.iter().fold(self, |target, (name, kind, replicas)| {
            target.role(mk_role(name).kind(kind).replicas(*replicas))
        })
    }

    pub fn engine(mut self, engine: &str) -> Target {
        self.engine = engine.into();
        self
    }

    pub fn router(mut self, router: Option<&str>) -> Target {
        self.router = router.map(str::to_string);
        self
    }

    /// As read back from a cluster: in `namespace` with `uid`, generation 1 and
    /// `resource_version`.
    pub fn stored(mut self, namespace: &str, uid: &str, resource_version: &str) -> Target {
        self.meta.stored(namespace, uid, resource_version);
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Target {
        self.meta.set("namespace", json!(namespace));
        self
    }

    pub fn uid(mut self, uid: &str) -> Target {
        self.meta.set("uid", json!(uid));
        self
    }

    /// `metadata.generation` (after [`Target::stored`], which sets 1).
    pub fn generation(mut self, generation: i64) -> Target {
        self.meta.set("generation", json!(generation));
        self
    }

    /// An annotations map with no entries yet (`metadata.annotations: {}`), as on a target
    /// whose last annotation was removed; [`Target::annotation`] adds to it.
    pub fn empty_annotations(mut self) -> Target {
        self.meta.0.entry("annotations").or_insert(json!({}));
        self
    }

    /// Annotates the target with `key: value`.
    pub fn annotation(mut self, key: &str, value: &str) -> Target {
        self.meta.0.entry("annotations").or_insert(json!({}))[key] = json!(value);
        self
    }

    /// `status: {roles: []}`, a target whose operator has not reported yet.
    pub fn empty_status(mut self) -> Target {
        self.status = Some(json!({"roles": []}));
        self
    }

    pub fn build(self) -> Value {
        let mut spec = json!({"engine": {"name": self.engine}});
        if let Some(router) = self.router {
            spec["router"] = json!({"name": router});
        }
        spec["roles"] = Value::Array(self.roles);
        let mut target = json!({
            "apiVersion": API_VERSION, "kind": "ModelDeployment",
            "metadata": Value::Object(self.meta.0), "spec": spec,
        });
        if let Some(status) = self.status {
            target["status"] = status;
        }
        target
    }

    pub fn typed<T: DeserializeOwned>(self) -> T {
        typed("mk_target", self.build())
    }
}

/// An Active `ModelDeploymentScaler` named `name` on the target of the same name, with no
/// roles and no algorithm yet.
pub fn mk_scaler(name: &str) -> Scaler {
    let mut spec = Map::new();
    spec.insert("targetRef".into(), json!({"name": name}));
    spec.insert("mode".into(), json!("Active"));
    Scaler {
        meta: Meta::named(name),
        spec,
        roles: vec![],
    }
}

#[derive(Clone, Debug)]
pub struct Scaler {
    meta: Meta,
    spec: Map<String, Value>,
    /// The roles' names, in the order their bounds were given.
    roles: Vec<String>,
}

impl Scaler {
    pub fn target(mut self, target: &str) -> Scaler {
        self.spec
            .insert("targetRef".into(), json!({"name": target}));
        self
    }

    pub fn mode(mut self, mode: &str) -> Scaler {
        self.spec.insert("mode".into(), json!(mode));
        self
    }

    /// Bounds `role` to `min..=max` replicas.
    pub fn role_bounds(mut self, role: &str, min: impl Into<i64>, max: impl Into<i64>) -> Scaler {
        let (min, max): (i64, i64) = (min.into(), max.into());
        let bound = json!({"name": role, "minReplicas": min, "maxReplicas": max});
        match self.spec.get_mut("roles") {
            Some(Value::Array(roles)) => roles.push(bound),
            _ => {
                self.spec.insert("roles".into(), json!([bound]));
            }
        }
        self.roles.push(role.into());
        self
    }

    pub fn interval_seconds(mut self, seconds: i64) -> Scaler {
        let sampling = self.spec.entry("sampling").or_insert(json!({}));
        sampling["intervalSeconds"] = json!(seconds);
        self
    }

    /// Proportional on QueueDepth with `target` per replica for every bounded role (give the
    /// bounds first).
    pub fn queue_depth(self, target: &str) -> Scaler {
        let targets: Vec<Value> = self
            .roles
            .iter()
            .map(|role| json!({"name": role, "target": target}))
            .collect();
        self.algorithm(json!({"proportional": {"metric": "QueueDepth", "roleTargets": targets}}))
    }

    /// Names the algorithm's `type` (after [`Scaler::queue_depth`] or [`Scaler::algorithm`]).
    pub fn algorithm_type(mut self, kind: &str) -> Scaler {
        let algorithm = self.spec.entry("algorithm").or_insert(json!({}));
        algorithm["type"] = json!(kind);
        self
    }

    pub fn algorithm(self, algorithm: Value) -> Scaler {
        self.field("algorithm", algorithm)
    }

    /// Sets any other spec field (`behavior`, `rebalance`...) to `value`.
    pub fn field(mut self, key: &str, value: Value) -> Scaler {
        self.spec.insert(key.into(), value);
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Scaler {
        self.meta.set("namespace", json!(namespace));
        self
    }

    /// As read back from a cluster: in `namespace` with `uid`, generation 1 and
    /// `resource_version`.
    pub fn stored(mut self, namespace: &str, uid: &str, resource_version: &str) -> Scaler {
        self.meta.stored(namespace, uid, resource_version);
        self
    }

    pub fn finalizer(mut self, finalizer: &str) -> Scaler {
        self.meta.set("finalizers", json!([finalizer]));
        self
    }

    /// The spec alone.
    pub fn spec(self) -> Value {
        Value::Object(self.spec)
    }

    pub fn build(self) -> Value {
        json!({
            "apiVersion": API_VERSION, "kind": "ModelDeploymentScaler",
            "metadata": Value::Object(self.meta.0), "spec": Value::Object(self.spec),
        })
    }

    pub fn typed<T: DeserializeOwned>(self) -> T {
        typed("mk_scaler", self.build())
    }
}

/// Pod `ordinal` of `role` of `target`, named `<target>-<role>-<ordinal>` and labelled the way
/// GPUStack labels an instance's Pods; no IP, no conditions, no scrape annotations yet.
pub fn mk_pod(target: &str, role: &str, ordinal: u32) -> PodBuilder {
    let name = format!("{target}-{role}-{ordinal}");
    let mut meta = Meta::named(&name);
    meta.set(
        "labels",
        json!({
            labels::NAME: "model-deployment",
            labels::INSTANCE: target,
            labels::COMPONENT: role,
            labels::POD_ORDINAL: ordinal.to_string(),
        }),
    );
    PodBuilder {
        meta,
        annotations: Map::new(),
        status: Map::new(),
    }
}

#[derive(Clone, Debug)]
pub struct PodBuilder {
    meta: Meta,
    annotations: Map<String, Value>,
    status: Map<String, Value>,
}

impl PodBuilder {
    pub fn namespace(mut self, namespace: &str) -> PodBuilder {
        self.meta.set("namespace", json!(namespace));
        self
    }

    pub fn uid(mut self, uid: &str) -> PodBuilder {
        self.meta.set("uid", json!(uid));
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> PodBuilder {
        self.meta.0.entry("labels").or_insert(json!({}))[key] = json!(value);
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> PodBuilder {
        self.annotations.insert(key.into(), json!(value));
        self
    }

    /// The port its engine's page is scraped on (`prometheus.io/port`).
    pub fn port(mut self, port: u16) -> PodBuilder {
        let port = port.to_string();
        self.annotations
            .insert(annotation_keys::SCRAPE_PORT.into(), json!(port));
        self
    }

    pub fn ip(mut self, ip: &str) -> PodBuilder {
        self.status.insert("podIP".into(), json!(ip));
        self
    }

    /// Ready and scheduled: both conditions `True`.
    pub fn ready(mut self) -> PodBuilder {
        let conditions = json!([
            {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}
        ]);
        self.status.insert("conditions".into(), conditions);
        self
    }

    /// Serving at `ip`: its page scraped on port 8000, Ready and scheduled.
    pub fn serving(self, ip: &str) -> PodBuilder {
        self.port(8000).ip(ip).ready()
    }

    pub fn build(self) -> Value {
        let mut meta = self.meta;
        if !self.annotations.is_empty() {
            meta.set("annotations", Value::Object(self.annotations));
        }
        let mut pod = json!({"metadata": Value::Object(meta.0)});
        if !self.status.is_empty() {
            pod["status"] = Value::Object(self.status);
        }
        pod
    }

    pub fn typed<T: DeserializeOwned>(self) -> T {
        typed("mk_pod", self.build())
    }
}

/// A Kueue `Workload` named `name` asking for one Pod of `queue`; not admitted yet.
pub fn mk_workload(name: &str, queue: &str) -> Workload {
    Workload {
        name: name.into(),
        queue: queue.into(),
        admitted: false,
    }
}

#[derive(Clone, Debug)]
pub struct Workload {
    name: String,
    queue: String,
    admitted: bool,
}

impl Workload {
    /// With an `Admitted: True` condition.
    pub fn admitted(mut self) -> Workload {
        self.admitted = true;
        self
    }

    pub fn build(self) -> Value {
        let container = json!({"name": "main", "image": "vllm/vllm-openai:v0.10.2"});
        let mut workload = json!({
            "apiVersion": format!("{WORKLOAD_GROUP}/{WORKLOAD_VERSION}"), "kind": "Workload",
            "metadata": {"name": self.name},
            "spec": {"queueName": self.queue, "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [container]}}}]}
        });
        if self.admitted {
            workload["status"] = admitted_status();
        }
        workload
    }

    pub fn typed<T: DeserializeOwned>(self) -> T {
        typed("mk_workload", self.build())
    }
}

/// The status of an admitted Workload.
pub fn admitted_status() -> Value {
    json!({"conditions": [{
        "type": "Admitted", "status": "True", "reason": "Admitted",
        "message": "admitted by the test",
    }]})
}
