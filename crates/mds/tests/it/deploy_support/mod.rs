//! What the tests of deploy/ share: rendering the manifests (kustomize through the pinned
//! kubectl, the chart through the pinned helm), comparing objects semantically, applying objects
//! with kubectl, installing deploy/'s ServiceAccount and RBAC into a test namespace, and
//! running mds-webhook's server in the test process ([`webhook`]).

#![allow(dead_code)]

pub mod webhook;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mds_testkit::ControlPlane;
use serde_json::{Value, json};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GPUStack's ModelDeployment at `worker.gpustack.ai/v1`, for dynamic objects (our read model
/// carries no apiVersion and kind, so targets are created as dynamic objects).
pub fn md_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "worker.gpustack.ai".into(),
        version: "v1".into(),
        api_version: "worker.gpustack.ai/v1".into(),
        kind: "ModelDeployment".into(),
        plural: "modeldeployments".into(),
    }
}

/// The namespace deploy/ installs into.
pub const NAMESPACE: &str = "mds-system";

/// Whether a test that needs the pinned Go-built tools is to be skipped (`MDS_SKIP_E2E=1`, said
/// loudly); the same switch as the end-to-end tests, since the tools come from the same build.
pub fn skip() -> bool {
    mds_testkit::skip_e2e()
}

/// The objects of a YAML stream as JSON values; empty documents are dropped and `List`s are
/// opened.
pub fn objects(yaml: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let value: Value = serde::Deserialize::deserialize(document)
            .unwrap_or_else(|e| panic!("not YAML: {e}\n{yaml}"));
        match value {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind") == Some(&json!("List")) => {
                out.extend(o["items"].as_array().cloned().unwrap_or_default());
            }
            other => out.push(other),
        }
    }
    out
}

/// Runs `command`, feeding it `stdin`, and returns its output.
pub fn run(mut command: Command, stdin: Option<&str>) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn succeeded(what: &str, output: Output) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// `kubectl kustomize` of a folder of the repository, with the pinned kubectl.
pub fn kustomize(folder: &str) -> Vec<Value> {
    let kubectl = mds_testkit::kubectl_path().unwrap_or_else(|e| panic!("{e}"));
    let mut command = Command::new(kubectl);
    command.arg("kustomize").arg(repo().join(folder));
    objects(&succeeded(
        &format!("kubectl kustomize {folder}"),
        run(command, None),
    ))
}

/// `helm template` of deploy/helm/mds as release `mds` in mds-system, CRDs included, with
/// extra arguments (`--set ...`), with the pinned helm and a private Helm home.
pub fn helm_template(extra: &[&str]) -> Vec<Value> {
    helm_template_in(NAMESPACE, extra)
}

/// [`helm_template`] with the release in `namespace`.
pub fn helm_template_in(namespace: &str, extra: &[&str]) -> Vec<Value> {
    let helm = mds_testkit::helm_path().unwrap_or_else(|e| panic!("{e}"));
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(helm);
    command
        .args(["template", "mds"])
        .arg(repo().join("deploy/helm/mds"))
        .args(["--namespace", namespace, "--include-crds"])
        .args(extra);
    for var in ["HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"] {
        command.env(var, home.path());
    }
    objects(&succeeded(
        &format!("helm template {extra:?}"),
        run(command, None),
    ))
}

/// `kind apiVersion namespace/name`, the identity of an object in a set.
pub fn key(object: &Value) -> String {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    format!(
        "{} {} {}/{}",
        field("/kind"),
        field("/apiVersion"),
        field("/metadata/namespace"),
        field("/metadata/name")
    )
}

pub fn by_key(objects: &[Value]) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for object in objects {
        let previous = out.insert(key(object), object.clone());
        assert!(previous.is_none(), "{} appears twice", key(object));
    }
    out
}

/// JSON pointers where two documents differ (a missing member counts as null).
pub fn json_differences(at: &str, left: &Value, right: &Value) -> Vec<String> {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            let keys: std::collections::BTreeSet<&String> = l.keys().chain(r.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    let (a, b) = (
                        l.get(k).unwrap_or(&Value::Null),
                        r.get(k).unwrap_or(&Value::Null),
                    );
                    let escaped = k.replace('~', "~0").replace('/', "~1");
                    json_differences(&format!("{at}/{escaped}"), a, b)
                })
                .collect()
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => l
            .iter()
            .zip(r)
            .enumerate()
            .flat_map(|(i, (a, b))| json_differences(&format!("{at}/{i}"), a, b))
            .collect(),
        (Value::Number(l), Value::Number(r)) if same_number(l, r) => vec![],
        _ if left == right => vec![],
        _ => vec![at.to_string()],
    }
}

/// YAML writers differ in how they print a whole number (`600` or `600.0`); it is one value.
fn same_number(left: &serde_json::Number, right: &serde_json::Number) -> bool {
    let whole = |n: &serde_json::Number| {
        n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        })
    };
    left == right || whole(left).is_some_and(|l| Some(l) == whole(right))
}

/// Asserts two sets of objects are the same objects with the same content, naming every
/// object only one side has and every field where a shared one differs.
pub fn assert_same_objects(left_name: &str, left: &[Value], right_name: &str, right: &[Value]) {
    let (left, right) = (by_key(left), by_key(right));
    let mut problems = Vec::new();
    for key in left.keys().filter(|k| !right.contains_key(*k)) {
        problems.push(format!("only in {left_name}: {key}"));
    }
    for key in right.keys().filter(|k| !left.contains_key(*k)) {
        problems.push(format!("only in {right_name}: {key}"));
    }
    for (key, object) in &left {
        if let Some(other) = right.get(key) {
            for pointer in json_differences("", object, other) {
                problems.push(format!(
                    "{key} differs at {pointer}: {left_name} has {}, {right_name} has {}",
                    object.pointer(&pointer).unwrap_or(&Value::Null),
                    other.pointer(&pointer).unwrap_or(&Value::Null)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A `kind: List` of objects as JSON text, which kubectl reads from standard input.
pub fn list(objects: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()
}

/// Runs the pinned kubectl against `plane` with `input` on standard input.
pub fn kubectl(plane: &ControlPlane, args: &[&str], input: Option<&str>) -> Output {
    let command = plane.kubectl().unwrap_or_else(|e| panic!("{e}"));
    let mut command = command;
    command.args(args);
    run(command, input)
}

/// `kubectl apply -f -` of `objects`, asserting success; returns kubectl's output.
pub fn apply(plane: &ControlPlane, objects: &[Value], extra: &[&str]) -> String {
    let mut args = vec!["apply", "-f", "-"];
    args.extend_from_slice(extra);
    let output = kubectl(plane, &args, Some(&list(objects)));
    succeeded(&format!("kubectl {}", args.join(" ")), output)
}

/// The kinds deploy/ gives the operator its identity and permissions with.
const IDENTITY_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// deploy/'s ServiceAccount, roles and bindings among `objects`, moved into `namespace`: every
/// namespaced object and subject goes there, and cluster-scoped objects get `-<namespace>` after
/// their name, so each test has an identity of its own. Nothing else changes.
pub fn identity_in(objects: &[Value], namespace: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if !IDENTITY_KINDS.contains(&kind) {
            continue;
        }
        let mut object = object.clone();
        let metadata = object["metadata"].as_object_mut().unwrap();
        if metadata.contains_key("namespace") {
            metadata.insert("namespace".into(), json!(namespace));
        }
        if kind.starts_with("Cluster") {
            let name = format!("{}-{namespace}", metadata["name"].as_str().unwrap());
            metadata.insert("name".into(), json!(name));
        }
        if object["roleRef"]["kind"] == "ClusterRole" {
            let name = format!(
                "{}-{namespace}",
                object["roleRef"]["name"].as_str().unwrap()
            );
            object["roleRef"]["name"] = json!(name);
        }
        if let Some(subjects) = object["subjects"].as_array_mut() {
            for subject in subjects {
                subject["namespace"] = json!(namespace);
            }
        }
        out.push(object);
    }
    out
}

/// Installs deploy/manifests' ServiceAccount `mds`, roles and bindings into `namespace` (see
/// [`identity_in`]); `plane.service_account_client(namespace, "mds")` then acts as the operator.
pub fn install_operator_identity(plane: &ControlPlane, namespace: &str) {
    let objects = identity_in(&kustomize("deploy/manifests"), namespace);
    assert!(
        objects.len() >= 5,
        "deploy/manifests lost its RBAC: {objects:?}"
    );
    apply(plane, &objects, &[]);
}

/// Files of a folder with a given extension, sorted.
pub fn files(folder: &Path, extension: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    out.sort();
    out
}
