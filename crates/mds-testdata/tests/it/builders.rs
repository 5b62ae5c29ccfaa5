//! The builders make, to the letter, the objects the tests used to write by hand.

use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;
use mds_testdata::{mk_pod, mk_role, mk_scaler, mk_target, mk_workload};
use serde_json::json;

#[test]
fn a_target_is_a_vllm_deployment_with_the_given_roles() {
    let built = mk_target("llm")
        .stored("default", "target-uid-1", "100")
        .roles(&[("prefill", "Prefill", 2)])
        .role(mk_role("decode").replicas(1).size(2).instance_type("h200"))
        .empty_status()
        .build();
    assert_eq!(
        built,
        json!({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": "llm", "namespace": "default", "uid": "target-uid-1",
                "generation": 1, "resourceVersion": "100"},
            "spec": {"engine": {"name": "vLLM"}, "router": {"name": "vllm-router"}, "roles": [
                {"name": "prefill", "kind": "Prefill", "replicas": 2, "instanceType": "h100"},
                {"name": "decode", "replicas": 1, "size": 2, "instanceType": "h200"}]},
            "status": {"roles": []}
        })
    );
}

#[test]
fn a_target_without_a_router_names_only_its_engine() {
    let built = mk_target("llm").engine("SGLang").router(None).build();
    assert_eq!(
        built["spec"],
        json!({"engine": {"name": "SGLang"}, "roles": []})
    );
    let role = mk_role("dp").field("extraArgs", json!(["--data-parallel-size=2"]));
    assert_eq!(role.build()["extraArgs"], json!(["--data-parallel-size=2"]));
    let md: ModelDeployment = mk_target("llm").role(mk_role("server")).typed();
    assert_eq!(md.spec.roles[0].name, "server");
}

#[test]
fn a_scaler_is_active_on_its_namesake_with_queue_depth_targets_per_bounded_role() {
    let built = mk_scaler("first")
        .target("llm")
        .interval_seconds(5)
        .role_bounds("prefill", 1, 8)
        .role_bounds("decode", 2, 4)
        .queue_depth("10")
        .build();
    let stored = mk_scaler("llm")
        .stored("ns", "scaler-1", "1")
        .finalizer("f")
        .build();
    assert_eq!(
        stored["metadata"],
        json!({"name": "llm", "namespace": "ns", "uid": "scaler-1", "generation": 1,
            "resourceVersion": "1", "finalizers": ["f"]})
    );
    assert_eq!(
        built,
        json!({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
            "metadata": {"name": "first"},
            "spec": {"targetRef": {"name": "llm"}, "mode": "Active",
                "sampling": {"intervalSeconds": 5},
                "roles": [{"name": "prefill", "minReplicas": 1, "maxReplicas": 8},
                    {"name": "decode", "minReplicas": 2, "maxReplicas": 4}],
                "algorithm": {"proportional": {"metric": "QueueDepth", "roleTargets": [
                    {"name": "prefill", "target": "10"}, {"name": "decode", "target": "10"}]}}}
        })
    );
    let typed: ModelDeploymentScaler = mk_scaler("llm")
        .mode("Shadow")
        .role_bounds("server", 1, 8)
        .typed();
    assert_eq!(typed.spec.target_ref.name, "llm");
}

#[test]
fn a_pod_carries_the_instance_labels_and_what_it_was_given() {
    let built = mk_pod("llm", "server", 1)
        .namespace("ns")
        .uid("pod-1")
        .port(8000)
        .ip("127.0.0.11")
        .ready()
        .build();
    assert_eq!(
        built,
        json!({
            "metadata": {"name": "llm-server-1", "namespace": "ns", "uid": "pod-1",
                "labels": {"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "llm",
                    "app.kubernetes.io/component": "server", "modeldeployment.gpustack.ai/pod-ordinal": "1"},
                "annotations": {"prometheus.io/port": "8000"}},
            "status": {"podIP": "127.0.0.11", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
        })
    );
    let serving = mk_pod("llm", "server", 1)
        .namespace("ns")
        .uid("pod-1")
        .serving("127.0.0.11");
    assert_eq!(serving.build(), built);
    assert_eq!(mk_pod("llm", "server", 0).build().get("status"), None);
}

#[test]
fn a_pod_takes_further_labels_and_annotations() {
    let built = mk_pod("llm", "server", 0)
        .label("kueue.x-k8s.io/pod-group-name", "llm-server-0")
        .annotation("prometheus.io/scrape", "true")
        .build();
    let metadata = &built["metadata"];
    assert_eq!(
        metadata["labels"]["kueue.x-k8s.io/pod-group-name"],
        "llm-server-0"
    );
    assert_eq!(metadata["labels"]["app.kubernetes.io/instance"], "llm");
    assert_eq!(
        metadata["annotations"],
        json!({"prometheus.io/scrape": "true"})
    );
}

#[test]
fn a_workload_is_admitted_only_when_asked() {
    let pending = mk_workload("llm-server-0", "h100").build();
    assert_eq!(pending["apiVersion"], "kueue.x-k8s.io/v1beta2");
    assert_eq!(pending["spec"]["queueName"], "h100");
    assert_eq!(pending.get("status"), None);
    let admitted = mk_workload("llm-server-0", "h100").admitted().build();
    assert_eq!(admitted["status"]["conditions"][0]["type"], "Admitted");
    assert_eq!(admitted["status"]["conditions"][0]["status"], "True");
}

#[test]
fn a_role_can_go_without_an_instance_type() {
    let role = mk_role("server").replicas(2).no_instance_type().build();
    assert_eq!(role, json!({"name": "server", "replicas": 2}));
}

#[test]
fn a_target_takes_a_generation_and_annotations() {
    let built = mk_target("llm")
        .stored("default", "t-1", "41")
        .generation(7)
        .annotation("a", "1")
        .annotation("b", "2")
        .build();
    assert_eq!(
        built["metadata"],
        json!({"name": "llm", "namespace": "default", "uid": "t-1", "generation": 7,
            "resourceVersion": "41", "annotations": {"a": "1", "b": "2"}})
    );
    let empty = mk_target("llm").empty_annotations().build();
    assert_eq!(empty["metadata"]["annotations"], json!({}));
    let kept = mk_target("llm").annotation("a", "1").empty_annotations();
    assert_eq!(kept.build()["metadata"]["annotations"], json!({"a": "1"}));
    assert_eq!(mk_target("llm").build()["metadata"], json!({"name": "llm"}));
}

#[test]
fn a_scaler_takes_a_namespace() {
    let built = mk_scaler("chat").namespace("default").build();
    assert_eq!(
        built["metadata"],
        json!({"name": "chat", "namespace": "default"})
    );
}
