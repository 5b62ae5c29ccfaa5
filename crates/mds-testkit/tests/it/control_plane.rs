//! The shared control plane: CRDs established and served, the GPUStack stand-in CRD's two
//! versions and defaults, Kueue Workloads, ServiceAccount impersonation, and the pinned kubectl.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

const OUR_CRDS: [&str; 3] = [
    "modeldeploymentscalers.worker.gpustack.ai",
    "modeldeployments.worker.gpustack.ai",
    "workloads.kueue.x-k8s.io",
];

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("a well-formed object")
}

/// JSON pointers where two documents differ.
fn json_differences(at: &str, left: &Value, right: &Value) -> Vec<String> {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            let keys: std::collections::BTreeSet<&String> = l.keys().chain(r.keys()).collect();
            keys.into_iter()
                .flat_map(|k| {
                    let (a, b) = (
                        l.get(k).unwrap_or(&Value::Null),
                        r.get(k).unwrap_or(&Value::Null),
                    );
                    json_differences(&format!("{at}/{k}"), a, b)
                })
                .collect()
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => l
            .iter()
            .zip(r)
            .enumerate()
            .flat_map(|(i, (a, b))| json_differences(&format!("{at}/{i}"), a, b))
            .collect(),
        _ if left == right => vec![],
        _ => vec![at.to_string()],
    }
}

#[tokio::test]
async fn the_crds_are_established() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let crds: Api<CustomResourceDefinition> = Api::all(plane.client());
    for name in OUR_CRDS {
        let crd = crds.get(name).await.unwrap();
        let conditions = crd.status.unwrap().conditions.unwrap_or_default();
        let established = conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{name}: {conditions:?}");
    }
    // The server fills in `conversion: None` and `listKind`; all else is as generated.
    let mut installed = crds.get(OUR_CRDS[0]).await.unwrap().spec;
    assert_eq!(installed.conversion.take().unwrap().strategy, "None");
    assert_eq!(
        installed.names.list_kind.take().unwrap(),
        "ModelDeploymentScalerList"
    );
    let generated = mds_testkit::crds::model_deployment_scaler().spec;
    let differences = json_differences(
        "",
        &serde_json::to_value(&installed).unwrap(),
        &serde_json::to_value(&generated).unwrap(),
    );
    assert!(
        differences.is_empty(),
        "the installed CRD differs from what `mds crd` prints at {differences:?}"
    );
    let workload = crds.get(OUR_CRDS[2]).await.unwrap();
    let storage: Vec<&str> = workload
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(storage, ["v1beta2"], "D1: Workloads are v1beta2");
}

#[tokio::test]
async fn a_model_deployment_is_served_as_v1_and_v1alpha1_with_defaults() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("model-deployment").await.unwrap();
    let group = "worker.gpustack.ai";
    let v1 = resource(group, "v1", "ModelDeployment", "modeldeployments");
    let v1alpha1 = resource(group, "v1alpha1", "ModelDeployment", "modeldeployments");
    let created: Api<DynamicObject> = Api::namespaced_with(plane.client(), &namespace, &v1);
    let md = object(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "llm-serving"},
        "spec": {
            "model": {"name": "acme/vision-70b"},
            "engine": {"name": "SGLang"},
            "router": {"name": "sglang-gateway", "image": "router:1"},
            "roles": [
                {"name": "prefill", "kind": "Prefill", "replicas": 2, "instanceType": "h200"},
                {"name": "decode", "size": 2, "instanceType": "h200"}
            ]
        }
    }));
    created.create(&PostParams::default(), &md).await.unwrap();

    let read: Api<DynamicObject> = Api::namespaced_with(plane.client(), &namespace, &v1alpha1);
    let stored = read.get("llm-serving").await.unwrap();
    assert_eq!(
        stored.types.unwrap().api_version,
        "worker.gpustack.ai/v1alpha1"
    );
    let decode = &stored.data["spec"]["roles"][1];
    assert_eq!(decode["kind"], "Server", "kind defaults to Server");
    assert_eq!(decode["replicas"], 1, "replicas defaults to 1");
    assert_eq!(stored.data["spec"]["router"]["image"], "router:1");
    assert_eq!(
        stored.data["spec"]["model"]["name"], "acme/vision-70b",
        "fields mds does not read are kept"
    );

    let mut zero = md.clone();
    zero.data["spec"]["roles"][0]["replicas"] = json!(0);
    zero.metadata.name = Some("zero-replicas".into());
    let refused = created.create(&PostParams::default(), &zero).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422),
        "replicas 0 is refused: {refused:?}"
    );
}

#[tokio::test]
async fn a_kueue_workload_is_served_as_v1beta2() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("workload").await.unwrap();
    let v1beta2 = resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads");
    let workloads: Api<DynamicObject> = Api::namespaced_with(plane.client(), &namespace, &v1beta2);
    let workload = object(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "gpustack-fnv64-0123456789abcdef"},
        "spec": {
            "queueName": "h200",
            "podSets": [{
                "name": "decode",
                "count": 2,
                "template": {"spec": {"containers": [{"name": "main", "image": "engine:1"}]}}
            }]
        }
    }));
    workloads
        .create(&PostParams::default(), &workload)
        .await
        .unwrap();
    let listed = workloads.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["podSets"][0]["count"], 2);
}

#[tokio::test]
async fn a_service_account_client_is_subject_to_rbac() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("rbac").await.unwrap();
    let as_operator = plane.service_account_client(&namespace, "mds");
    let refused = Api::<Namespace>::all(as_operator)
        .list(&ListParams::default())
        .await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            let user = format!("system:serviceaccount:{namespace}:mds");
            assert!(status.message.contains(&user), "{}", status.message);
        }
        other => panic!("a ServiceAccount without roles listed namespaces: {other:?}"),
    }
    let admin = Api::<Namespace>::all(plane.client());
    assert!(admin.list(&ListParams::default()).await.is_ok());
}

#[tokio::test]
async fn the_pinned_kubectl_talks_to_the_control_plane() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let version = plane
        .kubectl()
        .unwrap()
        .args(["version", "--output=json"])
        .output()
        .unwrap();
    assert!(version.status.success(), "{version:?}");
    let version: Value = serde_json::from_slice(&version.stdout).unwrap();
    let client = version["clientVersion"]["gitVersion"].as_str().unwrap();
    let server = version["serverVersion"]["gitVersion"].as_str().unwrap();
    assert_eq!(client, server, "kubectl and kube-apiserver are one version");
    assert!(client.starts_with("v1."), "{client}");

    let folder = tempfile::tempdir().unwrap();
    let kubeconfig = folder.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig).unwrap();
    let crds = std::process::Command::new(mds_testkit::kubectl_path().unwrap())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "crd", "--output=name"])
        .output()
        .unwrap();
    assert!(crds.status.success(), "{crds:?}");
    let listed = String::from_utf8(crds.stdout).unwrap();
    for name in OUR_CRDS {
        assert!(listed.contains(name), "{name} missing from:\n{listed}");
    }
}

#[tokio::test]
async fn the_examples_apply_to_the_api_server() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("examples").await.unwrap();
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let applied = plane
        .kubectl()
        .unwrap()
        .args([
            "apply",
            "--dry-run=server",
            "--namespace",
            &namespace,
            "--filename",
        ])
        .arg(examples)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        applied.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    // The scalers of every example and the prefill/decode/encode target.
    assert!(
        stdout.contains("modeldeployment.worker.gpustack.ai/vl-serving created (server dry run)"),
        "{stdout}"
    );
    assert_eq!(
        stdout
            .matches("modeldeploymentscaler.worker.gpustack.ai/")
            .count(),
        4,
        "{stdout}"
    );
}
