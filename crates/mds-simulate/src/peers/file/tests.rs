use super::*;
use crate::peers::testing::{ready, view};
use crate::peers::{Lifecycle, Replica, Sample};

fn read(yaml: &str) -> Result<PeerFile, PeerFileError> {
    let doc: Value = serde_yaml_ng::from_str(yaml).expect("test YAML");
    PeerFile::read("team", &doc)
}

fn waiting(ordinal: u32, waiting: f64) -> Replica {
    Replica {
        ordinal,
        state: Lifecycle::Ready,
        sample: Some(Sample {
            waiting,
            ..Sample::default()
        }),
    }
}

const HPA: &str = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: chat}
spec:
  scaleTargetRef: {apiVersion: gpustack.ai/v1, kind: ModelDeployment, name: chat}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Pods
    pods:
      metric: {name: vllm_num_requests_waiting}
      target: {type: AverageValue, averageValue: "5"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 60
      policies: [{type: Pods, value: 1, periodSeconds: 60}]
"#;

#[test]
fn an_hpa_runs_on_its_metric_target_bounds_and_behaviour() {
    let file = read(HPA).unwrap();
    assert_eq!(file.name, "team");
    assert_eq!(file.object, "HorizontalPodAutoscaler \"chat\"");
    assert_eq!((file.min, file.max), (2, Some(10)));
    assert_eq!(
        file.summary,
        "HPA: waiting requests at 5 per replica, 2..10 replicas, scale-up window 0 s, scale-down window 60 s"
    );
    let mut peer = file.build(1.0);
    assert_eq!(peer.interval(), 15.0);
    // Two replicas with 20 waiting each want 8 at 5 per replica; the default scale-up
    // policy (4 Pods or 100 % per 15 s) allows 6 (the scaler's bounds 1..4 are replaced by
    // the file's 2..10).
    let v = view(15.0, 2, 1, 4, vec![waiting(0, 20.0), waiting(1, 20.0)]);
    assert_eq!(peer.decide(&v)["server"], 6);
    // The scale-down policy removes one replica a minute, after the 60 s window.
    let idle = |t: f64| view(t, 8, 1, 4, (0..8).map(|i| waiting(i, 0.0)).collect());
    assert_eq!(peer.decide(&idle(30.0))["server"], 8);
    assert_eq!(peer.decide(&idle(90.0))["server"], 7);
    // Twice the target at factor 2: the knob the frontier sweeps.
    assert_eq!(file.knob_text(2.0), "target 10 waiting requests");
}

#[test]
fn an_hpa_floor_binds_even_when_the_scaler_allows_less() {
    let file = read(HPA).unwrap();
    let mut peer = file.build(1.0);
    let v = view(15.0, 1, 1, 4, vec![waiting(0, 0.0)]);
    assert_eq!(peer.decide(&v)["server"], 2);
}

#[test]
fn an_hpa_on_cpu_or_without_metrics_is_refused_naming_the_field() {
    let cpu = HPA.replace(
        "  - type: Pods\n    pods:\n      metric: {name: vllm_num_requests_waiting}\n      target: {type: AverageValue, averageValue: \"5\"}\n",
        "  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}\n",
    );
    let e = read(&cpu).unwrap_err();
    assert_eq!(e.field, "spec.metrics[0].type");
    assert!(e.message.contains("not CPU or memory"), "{e}");
    let none = HPA.replace("  metrics:\n", "  metrics: []\n  x:\n");
    let e = read(&none).unwrap_err();
    assert_eq!(e.field, "spec.metrics");
    let v1 = HPA.replace("autoscaling/v2", "autoscaling/v1");
    assert_eq!(read(&v1).unwrap_err().field, "apiVersion");
}

#[test]
fn an_unknown_metric_name_is_named_with_the_closest_we_publish() {
    let typo = HPA.replace("vllm_num_requests_waiting", "vllm:num_request_waiting");
    let e = read(&typo).unwrap_err();
    assert_eq!(e.field, "spec.metrics[0].pods.metric.name");
    assert!(
        e.message
            .contains("did you mean vllm:num_requests_waiting?"),
        "{e}"
    );
}

#[test]
fn behaviour_fields_out_of_range_name_the_field() {
    let bad = HPA.replace(
        "stabilizationWindowSeconds: 60",
        "stabilizationWindowSeconds: 7200",
    );
    let e = read(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.behavior.scaleDown.stabilizationWindowSeconds: 7200 must be 0 to 3600 seconds"
    );
    let disabled = HPA.replace(
        "      stabilizationWindowSeconds: 60\n",
        "      selectPolicy: Disabled\n",
    );
    let file = read(&disabled).unwrap();
    assert!(
        file.summary.ends_with("scale-down disabled"),
        "{}",
        file.summary
    );
    let mut peer = file.build(1.0);
    let idle = |t: f64| view(t, 8, 1, 4, (0..8).map(|i| waiting(i, 0.0)).collect());
    assert_eq!(peer.decide(&idle(15.0))["server"], 8);
    assert_eq!(peer.decide(&idle(900.0))["server"], 8);
}

const KEDA: &str = r#"
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat}
spec:
  scaleTargetRef: {name: chat}
  maxReplicaCount: 12
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus:9090
      query: sum(vllm:num_requests_running{model_name="chat"} + vllm:num_requests_waiting{model_name="chat"})
      threshold: "8"
"#;

#[test]
fn a_keda_prometheus_trigger_is_an_external_average_value_on_its_query() {
    let file = read(KEDA).unwrap();
    assert_eq!((file.min, file.max), (1, Some(12)));
    assert!(
        file.notes[0].starts_with("spec.minReplicaCount is 0: scale to zero"),
        "{:?}",
        file.notes
    );
    assert!(
        file.summary
            .starts_with("KEDA (its HPA): running + waiting requests at 8 per replica"),
        "{}",
        file.summary
    );
    // 3 replicas at 16 requests each: 48 in all over 8 per replica is 6.
    let mut peer = file.build(1.0);
    let v = view(15.0, 3, 1, 4, (0..3).map(|i| ready(i, 16.0, 0.5)).collect());
    assert_eq!(peer.decide(&v)["server"], 6);
}

#[test]
fn a_keda_rate_query_reads_the_counter_over_its_window() {
    let rate = KEDA.replace(
        "sum(vllm:num_requests_running{model_name=\"chat\"} + vllm:num_requests_waiting{model_name=\"chat\"})",
        "sum(rate(vllm:request_success_total[2m]))",
    );
    let file = read(&rate).unwrap();
    assert_eq!(
        file.summary,
        "KEDA (its HPA): requests/s at 8 per replica (rate over 120 s), 1..12 replicas, scale-up window 0 s, scale-down window 300 s"
    );
    let no_rate = KEDA.replace(
        "sum(vllm:num_requests_running{model_name=\"chat\"} + vllm:num_requests_waiting{model_name=\"chat\"})",
        "sum(vllm:request_success_total)",
    );
    let e = read(&no_rate).unwrap_err();
    assert_eq!(e.field, "spec.triggers[0].metadata.query");
    assert!(e.message.contains("without rate()"), "{e}");
    let cpu = KEDA.replace("type: prometheus", "type: cpu");
    assert_eq!(read(&cpu).unwrap_err().field, "spec.triggers[0].type");
}

const KNATIVE: &str = r#"
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: chat}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/target: "10"
        autoscaling.knative.dev/window: 30s
        autoscaling.knative.dev/min-scale: "2"
        autoscaling.knative.dev/max-scale: "6"
    spec:
      containers: [{image: vllm/vllm-openai}]
"#;

#[test]
fn a_knative_service_runs_the_kpa_its_annotations_configure() {
    let file = read(KNATIVE).unwrap();
    assert_eq!((file.min, file.max), (2, Some(6)));
    assert_eq!(
        file.summary,
        "Knative KPA: concurrent requests at 10 per replica x 70 % utilization, window 30 s, panic window 10 %, panic at 200 %, 2..6 replicas"
    );
    assert!(file.notes.is_empty(), "{:?}", file.notes);
    let defaults = KNATIVE.replace("        autoscaling.knative.dev/target: \"10\"\n", "");
    let file = read(&defaults).unwrap();
    assert!(
        file.notes[0].contains("Knative's default 100 concurrent requests"),
        "{:?}",
        file.notes
    );
    let class = KNATIVE.replace(
        "autoscaling.knative.dev/target: \"10\"",
        "autoscaling.knative.dev/class: hpa.autoscaling.knative.dev",
    );
    assert_eq!(
        read(&class).unwrap_err().field,
        "spec.template.metadata.annotations.autoscaling.knative.dev/class"
    );
}

const AIBRIX: &str = r#"
apiVersion: autoscaling.aibrix.ai/v1alpha1
kind: PodAutoscaler
metadata:
  name: chat
  annotations:
    kpa.autoscaling.aibrix.ai/scale-down-delay: 3m
    autoscaling.aibrix.ai/scale-down-cooldown-window: 60s
spec:
  scalingStrategy: KPA
  minReplicas: 1
  maxReplicas: 8
  metricsSources:
  - metricSourceType: pod
    protocolType: http
    port: "8000"
    path: metrics
    targetMetric: gpu_cache_usage_perc
    targetValue: "0.5"
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: chat}
"#;

#[test]
fn an_aibrix_pod_autoscaler_reads_its_metric_and_current_annotations() {
    let file = read(AIBRIX).unwrap();
    assert_eq!((file.min, file.max), (1, Some(8)));
    assert!(
        file.summary
            .starts_with("AIBrix KPA: KV-cache usage at 0.5 per replica")
            && file.summary.ends_with("scale-down cooldown 60 s"),
        "{}",
        file.summary
    );
    assert!(
        file.notes[0].starts_with("kpa.autoscaling.aibrix.ai/scale-down-delay is ignored"),
        "{:?}",
        file.notes
    );
    let percent = AIBRIX.replace("targetValue: \"0.5\"", "targetValue: \"50\"");
    let file = read(&percent).unwrap();
    assert!(
        file.notes.iter().any(|n| n.contains("did you mean 0.5?")),
        "{:?}",
        file.notes
    );
    let counter = AIBRIX.replace("gpu_cache_usage_perc", "vllm:request_success_total");
    assert_eq!(
        read(&counter).unwrap_err().field,
        "spec.metricsSources[0].targetMetric"
    );
}

#[test]
fn a_file_that_is_no_autoscaler_says_what_it_reads() {
    let e = read("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n").unwrap_err();
    assert_eq!(e.field, "kind");
    assert!(e.message.contains("HorizontalPodAutoscaler"), "{e}");
    let e = read("a: 1\n").unwrap_err();
    assert_eq!(e.to_string(), "kind: is missing");
}

#[test]
fn a_knative_rps_target_reads_each_scrapes_request_rate() {
    let rps = KNATIVE.replace(
        "        autoscaling.knative.dev/target: \"10\"\n",
        "        autoscaling.knative.dev/metric: rps\n        autoscaling.knative.dev/target: \"2\"\n",
    );
    let file = read(&rps).unwrap();
    assert!(
        file.summary
            .starts_with("Knative KPA: requests/s at 2 per replica x 70 % utilization"),
        "{}",
        file.summary
    );
    // Two replicas each finishing 7 requests a second for 10 s: 14 requests/s against
    // 2 x 0.7 a replica wants 10 replicas, within the file's 2..6.
    let mut peer = file.build(1.0);
    let at = |t: f64| {
        let replica = |ordinal: u32| Replica {
            ordinal,
            state: Lifecycle::Ready,
            sample: Some(Sample {
                requests: 7.0 * t,
                ..Sample::default()
            }),
        };
        view(t, 2, 1, 8, vec![replica(0), replica(1)])
    };
    for s in 0..=10 {
        peer.observe(&at(f64::from(s)));
    }
    assert_eq!(peer.decide(&at(10.0))["server"], 6);
}
