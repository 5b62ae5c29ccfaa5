//! deploy/ as shipped: the webhook configurations are what mds-webhook builds, the Helm chart
//! renders the plain manifests with its default values (and the cert-manager overlay with
//! `source: certManager`), and every variant passes a server-side dry run on a real API server,
//! the Pod template under the restricted Pod Security Standard included.

use crate::deploy_support;

use deploy_support::{
    NAMESPACE, apply, assert_same_objects, helm_template, kubectl, kustomize, objects, repo, skip,
    text,
};
use mds_webhook::configuration::{self, Endpoint, Settings};
use serde_json::{Value, json};

/// The objects of a kind among `objects`.
fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// Drops every `caBundle` of a webhook configuration: deploy/ leaves it to the certificates.
fn without_ca_bundles(mut configuration: Value) -> Value {
    for webhook in configuration["webhooks"].as_array_mut().unwrap() {
        webhook["clientConfig"]
            .as_object_mut()
            .unwrap()
            .remove("caBundle");
    }
    configuration
}

#[test]
fn the_webhook_configurations_are_what_mds_webhook_builds_for_the_service() {
    let text = std::fs::read_to_string(repo().join("deploy/manifests/webhooks.yaml")).unwrap();
    let checked_in = objects(&text);
    // The same objects `mds certs --service mds-system/mds-webhook` writes, less the caBundle.
    let settings = Settings::new(
        Endpoint::Service {
            namespace: NAMESPACE.into(),
            name: "mds-webhook".into(),
            port: None,
        },
        Vec::new(),
    );
    let built = [
        serde_json::to_value(configuration::mutating(&settings)).unwrap(),
        serde_json::to_value(configuration::validating(&settings)).unwrap(),
    ]
    .map(without_ca_bundles)
    .to_vec();
    assert_same_objects(
        "deploy/manifests/webhooks.yaml",
        &checked_in,
        "mds_webhook::configuration",
        &built,
    );
}

#[test]
fn the_chart_carries_the_generated_crd() {
    let name = "modeldeploymentscalers.worker.gpustack.ai.yaml";
    let generated = std::fs::read_to_string(repo().join("deploy/crds").join(name)).unwrap();
    let in_chart = std::fs::read_to_string(repo().join("deploy/helm/mds/crds").join(name)).unwrap();
    assert!(
        generated == in_chart,
        "deploy/helm/mds/crds/{name} differs from deploy/crds/{name}; copy it over"
    );
}

#[test]
fn the_chart_with_default_values_renders_the_plain_manifests() {
    if skip() {
        return;
    }
    let plain: Vec<Value> = kustomize("deploy/manifests")
        .into_iter()
        // Helm installs into a namespace it is given (--create-namespace); charts make none.
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    let rendered = helm_template(&[]);
    assert_same_objects(
        "deploy/manifests",
        &plain,
        "helm template deploy/helm/mds",
        &rendered,
    );
}

#[test]
fn the_chart_with_cert_manager_renders_the_cert_manager_overlay() {
    if skip() {
        return;
    }
    let plain: Vec<Value> = kustomize("deploy/cert-manager")
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    let rendered = helm_template(&["--set", "webhook.certificates.source=certManager"]);
    assert_same_objects(
        "deploy/cert-manager",
        &plain,
        "helm template --set webhook.certificates.source=certManager",
        &rendered,
    );
    for configuration in of_kind(&rendered, "ValidatingWebhookConfiguration")
        .into_iter()
        .chain(of_kind(&rendered, "MutatingWebhookConfiguration"))
    {
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "mds-system/mds-webhook"
        );
    }
}

#[test]
fn the_chart_adds_the_fences_identity_check_only_when_asked() {
    if skip() {
        return;
    }
    let webhook_args = |rendered: &[Value]| {
        let deployment = of_kind(rendered, "Deployment")[0];
        deployment["spec"]["template"]["spec"]["containers"][1]["args"].clone()
    };
    let user = "system:serviceaccount:mds-system:mds";
    let rendered = helm_template(&["--set", &format!("webhook.operatorUser={user}")]);
    let args = webhook_args(&rendered);
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!(format!("--operator-user={user}"))),
        "{args}"
    );
    let args = webhook_args(&helm_template(&[]));
    assert!(!args.to_string().contains("--operator-user"), "{args}");
}

#[test]
fn the_chart_scopes_to_one_namespace_and_refuses_what_does_not_fit() {
    if skip() {
        return;
    }
    let rendered = helm_template(&["--set", "watchNamespace=team-a"]);
    assert!(of_kind(&rendered, "ClusterRole").is_empty());
    assert!(of_kind(&rendered, "ClusterRoleBinding").is_empty());
    let role = of_kind(&rendered, "Role")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "mds")
        .expect("a Role mds");
    assert_eq!(role["metadata"]["namespace"], "team-a");
    let cluster_role = &of_kind(&kustomize("deploy/manifests"), "ClusterRole")[0].clone();
    assert_eq!(
        role["rules"], cluster_role["rules"],
        "the same permissions, in one namespace"
    );
    let deployment = of_kind(&rendered, "Deployment")[0];
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--namespace=team-a")),
        "{args}"
    );
    for configuration in of_kind(&rendered, "ValidatingWebhookConfiguration")
        .into_iter()
        .chain(of_kind(&rendered, "MutatingWebhookConfiguration"))
    {
        for webhook in configuration["webhooks"].as_array().unwrap() {
            assert_eq!(
                webhook["namespaceSelector"],
                json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}),
                "{}",
                webhook["name"]
            );
        }
    }

    // Values that do not fit are refused with a message naming them.
    let helm = mds_testkit::helm_path().unwrap();
    for (set, expected) in [
        ("leaderElection.enabled=false", "needs replicas: 1"),
        ("logFormat=xml", "logFormat"),
        ("webhook.certificates.source=vault", "source"),
    ] {
        let output = std::process::Command::new(&helm)
            .args(["template", "mds"])
            .arg(repo().join("deploy/helm/mds"))
            .args(["--set", set])
            .env("HELM_CONFIG_HOME", std::env::temp_dir())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{set} rendered");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(expected), "{set}: {stderr}");
    }
}

/// Installs cert-manager's Certificate and Issuer CRDs (once per control plane), so that the
/// cert-manager variant can be dry-run.
fn install_cert_manager_crds(plane: &mds_testkit::ControlPlane) {
    let folder = mds_testkit::cert_manager_crds().unwrap_or_else(|e| panic!("{e}"));
    let mut crds = Vec::new();
    for file in ["certificates.yaml", "issuers.yaml"] {
        crds.extend(objects(
            &std::fs::read_to_string(folder.join(file)).unwrap(),
        ));
    }
    apply(plane, &crds, &["--server-side"]);
    let waited = kubectl(
        plane,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/certificates.cert-manager.io",
            "crd/issuers.cert-manager.io",
        ],
        None,
    );
    assert!(waited.status.success(), "{}", text(&waited.stderr));
}

/// `kubectl apply --dry-run=server` of one variant, asserting the API server takes every object.
fn dry_run(plane: &mds_testkit::ControlPlane, variant: &str, objects: &[Value]) {
    let output = kubectl(
        plane,
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&deploy_support::list(objects)),
    );
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{variant}: the API server refused it:\n{stdout}{}",
        text(&output.stderr)
    );
    for object in objects {
        let name = object["metadata"]["name"].as_str().unwrap();
        assert!(
            stdout.contains(&format!("/{name} ")),
            "{variant}: no line for {name}:\n{stdout}"
        );
    }
}

#[tokio::test]
async fn every_variant_passes_a_server_side_dry_run() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    install_cert_manager_crds(plane);
    // The namespace for real, labels included, so the namespaced objects have a home and Pod
    // Security admission enforces its level below.
    let base = kustomize("deploy/manifests");
    apply(
        plane,
        &of_kind(&base, "Namespace")
            .into_iter()
            .cloned()
            .collect::<Vec<_>>(),
        &[],
    );

    // Self-signed certificates as docs/operations.md makes them: mds certs writes the
    // configurations with the caBundle.
    let certs = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(["certs", "--out-dir"])
        .arg(certs.path())
        .args([
            "--dns",
            "mds-webhook.mds-system.svc",
            "--service",
            "mds-system/mds-webhook",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let ca_bundle = text(&made.stdout).trim().to_string();
    let self_signed =
        objects(&std::fs::read_to_string(certs.path().join("webhooks.yaml")).unwrap());

    let variants: Vec<(&str, Vec<Value>)> = vec![
        ("deploy/manifests", base.clone()),
        ("deploy/cert-manager", kustomize("deploy/cert-manager")),
        ("mds certs webhooks.yaml", self_signed),
        ("helm template (defaults)", helm_template(&[])),
        (
            "helm template (cert-manager)",
            helm_template(&["--set", "webhook.certificates.source=certManager"]),
        ),
        (
            "helm template (one namespace, caBundle given)",
            helm_template(&[
                "--set",
                "watchNamespace=mds-system",
                "--set",
                &format!("webhook.certificates.caBundle={ca_bundle}"),
            ]),
        ),
    ];
    for (variant, objects) in &variants {
        dry_run(plane, variant, objects);
    }

    // The Deployment admits no Pod by itself here (no controller-manager), so its Pod template
    // goes through admission as a Pod: the namespace enforces the restricted standard.
    let deployment = of_kind(&base, "Deployment")[0];
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mds-template-check", "namespace": NAMESPACE,
                     "labels": deployment["spec"]["template"]["metadata"]["labels"]},
        "spec": deployment["spec"]["template"]["spec"],
    });
    dry_run(
        plane,
        "the Deployment's Pod template",
        std::slice::from_ref(&pod),
    );
    let mut privileged = pod;
    privileged["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] =
        json!(true);
    let refused = kubectl(
        plane,
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&deploy_support::list(&[privileged])),
    );
    assert!(
        !refused.status.success() && text(&refused.stderr).contains("restricted"),
        "the namespace enforces the restricted standard: {}",
        text(&refused.stderr)
    );
}

#[test]
fn the_deployment_runs_both_containers_as_one_service_account_with_a_content_fence() {
    let text = std::fs::read_to_string(repo().join("deploy/manifests/deployment.yaml")).unwrap();
    let deployment = &objects(&text)[0];
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "mds");
    let containers = spec["containers"].as_array().unwrap();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["controller", "webhook"]);
    // The fence decides by content: through GPUStack's aggregated v1 API the controller's
    // writes arrive under GPUStack's identity, and an identity check would refuse them all.
    let webhook_args = containers[1]["args"].as_array().unwrap();
    assert!(
        !webhook_args
            .iter()
            .any(|a| a.as_str().is_some_and(|a| a.starts_with("--operator-user"))),
        "{webhook_args:?}"
    );
    for container in containers {
        let security = &container["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert!(container["livenessProbe"].is_object() && container["readinessProbe"].is_object());
        assert!(container["resources"]["requests"].is_object());
    }
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        containers[1]["lifecycle"]["preStop"]["sleep"]["seconds"], 5,
        "a terminating webhook leaves the endpoints before it stops accepting"
    );
    // The args parse: every flag is one `mds controller` / `mds webhook` knows.
    for container in containers {
        let mut args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        args.push("--help".into());
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            deploy_support::text(&output.stderr)
        );
    }
}
