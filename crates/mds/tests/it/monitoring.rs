//! The chart's monitoring objects: the ServiceMonitor, PodMonitor and PrometheusRule render as
//! asked, and the alert rules pass `promtool check rules` and the unit tests of
//! `deploy/monitoring/rules-test.yaml` (one firing and one quiet case per alert, on series named
//! as the controller and the webhook export them). promtool comes from Debian's `prometheus`
//! package through `tools/prometheus/install.sh`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::deploy_support::{helm_template, repo};

/// promtool and prometheus, found or installed by the project's script.
pub fn prometheus_tools() -> (PathBuf, PathBuf) {
    let output = Command::new("bash")
        .arg(repo().join("tools/prometheus/install.sh"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "tools/prometheus/install.sh failed: {}{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    let path = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("no {name}= line in {stdout}"))
    };
    (path("promtool"), path("prometheus"))
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The rule groups as the chart renders them with `extra` values.
pub fn rule_groups(extra: &[&str]) -> Value {
    let mut args = vec!["--set", "monitoring.rules.enabled=true"];
    args.extend_from_slice(extra);
    let rendered = helm_template(&args);
    let rules = of_kind(&rendered, "PrometheusRule");
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    json!({"groups": rules[0]["spec"]["groups"]})
}

#[test]
fn monitoring_objects_render_only_when_asked_and_carry_the_given_labels() {
    let defaults = helm_template(&[]);
    for kind in [
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
        "ConfigMap",
    ] {
        assert!(
            of_kind(&defaults, kind).is_empty(),
            "{kind} is off by default"
        );
    }
    let rendered = helm_template(&[
        "--set",
        "monitoring.serviceMonitor.enabled=true",
        "--set",
        "monitoring.podMonitor.enabled=true",
        "--set",
        "monitoring.rules.enabled=true",
        "--set",
        "monitoring.dashboard.enabled=true",
        "--set",
        "monitoring.labels.release=kube-prometheus-stack",
    ]);
    // The dashboard ConfigMap carries the sidecar's label and the dashboard file as it is.
    let maps = of_kind(&rendered, "ConfigMap");
    assert_eq!(maps.len(), 1);
    assert_eq!(maps[0]["metadata"]["labels"]["grafana_dashboard"], "1");
    let file = std::fs::read_to_string(repo().join("deploy/helm/mds/dashboards/mds.json")).unwrap();
    let shipped: Value =
        serde_json::from_str(maps[0]["data"]["mds.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, serde_json::from_str::<Value>(&file).unwrap());
    for kind in ["ServiceMonitor", "PodMonitor", "PrometheusRule"] {
        let objects = of_kind(&rendered, kind);
        assert_eq!(objects.len(), 1, "{kind}");
        let object = objects[0];
        assert_eq!(object["apiVersion"], "monitoring.coreos.com/v1", "{kind}");
        assert_eq!(object["metadata"]["namespace"], "mds-system", "{kind}");
        assert_eq!(
            object["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{kind}"
        );
    }
    let monitor = of_kind(&rendered, "ServiceMonitor")[0];
    let ports: Vec<&str> = monitor["spec"]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["port"].as_str().unwrap())
        .collect();
    assert_eq!(ports, ["metrics", "webhook"]);
    // The series' own namespace label is kept, not replaced by the scraped Pod's.
    for (kind, endpoints) in [
        ("ServiceMonitor", "endpoints"),
        ("PodMonitor", "podMetricsEndpoints"),
    ] {
        for endpoint in of_kind(&rendered, kind)[0]["spec"][endpoints]
            .as_array()
            .unwrap()
        {
            assert_eq!(endpoint["honorLabels"], true, "{kind}: {endpoint}");
        }
    }
    // The ports it names exist on the Services and the Pods.
    let services = of_kind(&rendered, "Service");
    for port in ports {
        assert!(
            services.iter().any(|s| s["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == port)),
            "a Service has port {port}"
        );
    }
    // A ServiceMonitor without the metrics Service is refused at render time.
    let helm = mds_testkit::helm_path().unwrap();
    let refused = Command::new(helm)
        .args(["template", "mds"])
        .arg(repo().join("deploy/helm/mds"))
        .args([
            "--set",
            "monitoring.serviceMonitor.enabled=true",
            "--set",
            "metrics.enabled=false",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("needs metrics.enabled"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn the_alert_rules_pass_promtool() {
    let (promtool, _) = prometheus_tools();
    let dir = tempfile::tempdir().unwrap();
    let groups = rule_groups(&[]);
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    // Every alert the runbook documents, and no other.
    let runbook = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    for name in &names {
        assert!(
            runbook.contains(&format!("### {name}\n")),
            "docs/operations.md has no runbook section for {name}"
        );
    }
    // Every alert has a firing case in the promtool tests.
    let tests = std::fs::read_to_string(repo().join("deploy/monitoring/rules-test.yaml")).unwrap();
    for name in &names {
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "deploy/monitoring/rules-test.yaml does not test {name}"
        );
    }
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml_ng::to_string(&groups).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("rules-test.yaml"), tests).unwrap();
    for args in [
        ["check", "rules", "rules.yaml"],
        ["test", "rules", "rules-test.yaml"],
    ] {
        let output = Command::new(&promtool)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn thresholds_are_values() {
    let groups = rule_groups(&[
        "--set",
        "monitoring.rules.flapping.reversals=7",
        "--set",
        "monitoring.rules.blocked.for=1h",
        "--set",
        "monitoring.rules.criticalSeverity=page",
    ]);
    let rule = |name: &str| {
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .find(|r| r["alert"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(
        rule("MdsScalerFlapping")["expr"]
            .as_str()
            .unwrap()
            .trim_end()
            .ends_with("> 7")
    );
    assert_eq!(rule("MdsScalerBlocked")["for"], "1h");
    assert_eq!(rule("MdsNoLeader")["labels"]["severity"], "page");
    // A threshold that is not a duration is refused at render time, naming it.
    let refused = Command::new(mds_testkit::helm_path().unwrap())
        .args(["template", "mds"])
        .arg(repo().join("deploy/helm/mds"))
        .args(["--set", "monitoring.rules.blocked.for=soon"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("/monitoring/rules/blocked/for"),
        "{stderr}"
    );
}
