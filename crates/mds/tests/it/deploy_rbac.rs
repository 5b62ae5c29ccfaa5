//! deploy/'s RBAC is exactly what the code uses. A table lists every API call of the controller
//! and the webhook (with where it lives); the ClusterRole and the leader-election Role must grant
//! those and nothing else. Then, on a real API server, deploy/'s ServiceAccount makes each call
//! through the operator's own code (leader election, the watches, the writes, events, the webhook
//! lookups), and a few calls the operator never needs are refused.

use crate::deploy_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deploy_support::{NAMESPACE, apply, install_operator_identity, md_resource, objects, repo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::resources::TargetApiVersion;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_core::patch::{TargetShape, bind};
use mds_operator::Cluster as _;
use mds_operator::api_client::ApiClients;
use mds_operator::http_source::ScrapeConfig;
use mds_operator::kube_cluster::{Caches, KubeCluster};
use mds_operator::leader::{Election, LeaseConfig};
use mds_operator::runtime::ControllerConfig;
use mds_operator::{Leadership, Operator, OperatorConfig};
use mds_webhook::kube_lookups::KubeLookups;
use serde_json::{Value, json};
use tokio::sync::watch;

/// Every API call of the operator, cluster-wide: (API group, resource, verb), and where.
const USED: &[(&str, &str, &str)] = &[
    // mds-operator runtime.rs `run`: the scaler watch (a watcher lists, then watches).
    ("worker.gpustack.ai", "modeldeploymentscalers", "list"),
    ("worker.gpustack.ai", "modeldeploymentscalers", "watch"),
    // kube_cluster.rs `set_finalizer`: a merge patch of metadata.finalizers.
    ("worker.gpustack.ai", "modeldeploymentscalers", "patch"),
    // lookups.rs `ScalerLookup::scaler` (the fence's bind and release checks): get.
    ("worker.gpustack.ai", "modeldeploymentscalers", "get"),
    // kube_cluster.rs `write_status`: replace_status.
    (
        "worker.gpustack.ai",
        "modeldeploymentscalers/status",
        "update",
    ),
    // runtime.rs `run`: the target watch, at --target-api-version.
    ("worker.gpustack.ai", "modeldeployments", "list"),
    ("worker.gpustack.ai", "modeldeployments", "watch"),
    // kube_cluster.rs `patch_target`: bind, commit and release as JSON Patches.
    ("worker.gpustack.ai", "modeldeployments", "patch"),
    // lookups.rs `TargetLookup::target` (the webhook's scaler validation): get.
    ("worker.gpustack.ai", "modeldeployments", "get"),
    // runtime.rs `run`: Pods labelled app.kubernetes.io/name=model-deployment.
    ("", "pods", "list"),
    ("", "pods", "watch"),
    // runtime.rs `run`: Kueue Workloads, when discovery finds them.
    ("kueue.x-k8s.io", "workloads", "list"),
    ("kueue.x-k8s.io", "workloads", "watch"),
    // kube_cluster.rs `emit`: kube's Recorder creates an event, and patches it when it repeats.
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
];

/// The calls in the operator's own namespace: leader.rs through kube-lease-manager creates the
/// Lease when it is missing, then reads and patches (renews, takes, releases) it by name.
const LEASE_NAME: &str = "mds-controller";
const USED_IN_OWN_NAMESPACE: &[(&str, &str, &str, Option<&str>)] = &[
    ("coordination.k8s.io", "leases", "create", None),
    ("coordination.k8s.io", "leases", "get", Some(LEASE_NAME)),
    ("coordination.k8s.io", "leases", "patch", Some(LEASE_NAME)),
];

/// (group, resource, verb, resource name) for every combination a role's rules grant.
fn grants(role: &Value) -> BTreeSet<(String, String, String, Option<String>)> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "no URL rules: {rule}"
        );
        let names = strings(&rule["resourceNames"]);
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.into_iter().map(Some).collect()
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        assert!(
                            !group.contains('*') && !resource.contains('*') && verb != "*",
                            "no wildcards: {rule}"
                        );
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}

fn expected(
    table: &[(&str, &str, &str, Option<&str>)],
) -> BTreeSet<(String, String, String, Option<String>)> {
    table
        .iter()
        .map(|(g, r, v, n)| {
            (
                g.to_string(),
                r.to_string(),
                v.to_string(),
                n.map(str::to_string),
            )
        })
        .collect()
}

fn cluster_wide() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
)> {
    USED.iter().map(|&(g, r, v)| (g, r, v, None)).collect()
}

fn role<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Names what one side has and the other lacks.
fn assert_grants(
    what: &str,
    granted: &BTreeSet<(String, String, String, Option<String>)>,
    used: &BTreeSet<(String, String, String, Option<String>)>,
) {
    let unused: Vec<_> = granted.difference(used).collect();
    let missing: Vec<_> = used.difference(granted).collect();
    assert!(
        unused.is_empty() && missing.is_empty(),
        "{what}:\n  granted but never used by the code: {unused:?}\n  used by the code but not granted: {missing:?}"
    );
}

#[test]
fn the_roles_grant_exactly_the_calls_the_code_makes() {
    let text = std::fs::read_to_string(repo().join("deploy/manifests/rbac.yaml")).unwrap();
    let rbac = objects(&text);
    assert_grants(
        "ClusterRole mds",
        &grants(role(&rbac, "ClusterRole", "mds")),
        &expected(&cluster_wide()),
    );
    let leases = role(&rbac, "Role", "mds-leader-election");
    assert_eq!(leases["metadata"]["namespace"], NAMESPACE);
    assert_grants(
        "Role mds-leader-election",
        &grants(leases),
        &expected(USED_IN_OWN_NAMESPACE),
    );
    // The Lease the Role names is the one the controller is told to hold.
    let deployment =
        std::fs::read_to_string(repo().join("deploy/manifests/deployment.yaml")).unwrap();
    let deployment = &objects(&deployment)[0];
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!(format!("--leader-election-id={LEASE_NAME}"))),
        "{args}"
    );
    // Every binding names the ServiceAccount the Pods run as.
    for binding in rbac
        .iter()
        .filter(|o| o["kind"].as_str().unwrap().ends_with("Binding"))
    {
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "mds", "namespace": NAMESPACE}])
        );
    }
}

/// Whether `user` (a ServiceAccount, with the groups the API server gives one) may do `verb`
/// on `resource` in `namespace` ("" for every namespace).
async fn may(
    admin: &Client,
    account: (&str, &str),
    (group, resource, verb, name): (&str, &str, &str, Option<&str>),
    namespace: &str,
) -> bool {
    let (subresource, resource) = match resource.split_once('/') {
        Some((resource, sub)) => (Some(sub.to_string()), resource),
        None => (None, resource),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{}:{}", account.0, account.1)),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", account.0),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                verb: Some(verb.into()),
                name: name.map(str::to_string),
                namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

/// A target with one Server role and its scaler, made by the admin.
async fn target_and_scaler(
    admin: &Client,
    namespace: &str,
) -> (DynamicObject, ModelDeploymentScaler) {
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "llm-serving"},
        "spec": {"engine": {"name": "vLLM"}, "roles": [{"name": "server", "replicas": 2, "instanceType": "h100"}]}
    }))
    .unwrap();
    let md = Api::<DynamicObject>::namespaced_with(admin.clone(), namespace, &md_resource())
        .create(&PostParams::default(), &md)
        .await
        .unwrap();
    let text = std::fs::read_to_string(repo().join("examples/proportional.yaml")).unwrap();
    let scaler: ModelDeploymentScaler = serde_yaml_ng::from_str(&text).unwrap();
    let scaler = Api::<ModelDeploymentScaler>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &scaler)
        .await
        .unwrap();
    (md, scaler)
}

/// Runs the operator (`Operator::start`, never leading: no passes, no writes) as `client`
/// until every watch cache has its first list.
async fn watches_sync(client: Client, namespace: Option<String>) {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let config = OperatorConfig {
        controller: ControllerConfig {
            namespace,
            target_version: TargetApiVersion::V1,
            scrape: ScrapeConfig::default(),
            max_concurrent_passes: 1,
            instance: "rbac-test".into(),
        },
        leadership: Leadership::Never,
        listeners: Vec::new(),
    };
    let running = Operator::start(ApiClients::shared(client), config, shutdown_rx)
        .await
        .expect("the operator starts");
    let telemetry = running.telemetry().clone();
    let synced = mds_testkit::eventually(
        "the controller's watches (scalers, targets, Pods, Workloads) to list as the operator",
        Duration::from_secs(60),
        || {
            let telemetry = telemetry.clone();
            async move { telemetry.ready.load(Ordering::Acquire).then_some(()) }
        },
    )
    .await;
    let _ = shutdown_tx.send(true);
    let stopped = running.wait().await;
    synced.unwrap();
    stopped.expect("the runtime ends cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_account_may_make_every_call_of_the_operator_and_no_other() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("operator-rbac").await.unwrap();
    install_operator_identity(plane, &namespace);
    let admin = plane.client();
    let operator = plane.service_account_client(&namespace, "mds");
    let account = (namespace.as_str(), "mds");

    // Leader election, through the operator's own code: the Lease is created, held, released.
    let election = Election::start(
        operator.clone(),
        &LeaseConfig {
            namespace: namespace.clone(),
            name: LEASE_NAME.into(),
            identity: "rbac-test".into(),
            duration_seconds: 15,
            grace_seconds: 5,
        },
    )
    .await
    .expect("the operator starts leader election");
    let mut leader = election.leader.clone();
    let led = tokio::time::timeout(Duration::from_secs(60), leader.wait_for(|l| *l))
        .await
        .is_ok_and(|waited| waited.is_ok());
    assert!(
        led,
        "the operator did not take Lease {LEASE_NAME} (create, get, patch)"
    );
    drop(leader);
    election.release().await;
    let lease = Api::<Lease>::namespaced(admin.clone(), &namespace)
        .get(LEASE_NAME)
        .await
        .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        None,
        "the release patched the Lease"
    );

    // The watches, cluster-wide as deployed, with discovery of Kueue.
    let (md, scaler) = target_and_scaler(&admin, &namespace).await;
    watches_sync(operator.clone(), None).await;

    // The writes, through the operator's Cluster adapter.
    let cluster = KubeCluster::new(
        operator.clone(),
        Arc::new(Caches::new(true)),
        TargetApiVersion::V1,
        "rbac-test".into(),
        Arc::new(AtomicBool::new(true)),
    );
    let finalized = cluster
        .set_finalizer(&scaler, true)
        .await
        .expect("patch modeldeploymentscalers");
    let status = ModelDeploymentScalerStatus {
        observed_generation: finalized.metadata.generation,
        ..ModelDeploymentScalerStatus::default()
    };
    cluster
        .write_status(&finalized, &status)
        .await
        .expect("update modeldeploymentscalers/status");
    let shape = TargetShape {
        roles: vec![("server".into(), 2)],
        has_annotations: false,
        has_decision: false,
        resource_version: md.metadata.resource_version.clone(),
    };
    let binding = mds_api::annotations::BindingPayload {
        scaler_name: "llm-serving".into(),
        scaler_uid: scaler.metadata.uid.clone().unwrap(),
        term: 1,
    };
    cluster
        .patch_target(
            &namespace,
            "llm-serving",
            &bind(&shape, &binding.to_annotation()),
        )
        .await
        .expect("patch modeldeployments");
    let event = mds_core::Event {
        warning: false,
        reason: "RbacCheck",
        action: "Bind",
        message: "the operator may publish events".into(),
    };
    // The second one is a repeat, which kube's Recorder sends as a patch of the first.
    cluster.emit(&scaler, &event).await;
    cluster.emit(&scaler, &event).await;
    let events = Api::<KubeEvent>::namespaced(admin.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .unwrap();
    let published = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("RbacCheck"))
        .expect("the operator created an event (events.k8s.io create)");
    assert_eq!(
        published.series.as_ref().map(|s| s.count),
        Some(2),
        "the repeat patched the event (events.k8s.io patch)"
    );
    let latest = Api::<ModelDeploymentScaler>::namespaced(admin.clone(), &namespace)
        .get("llm-serving")
        .await
        .unwrap();
    cluster
        .set_finalizer(&latest, false)
        .await
        .expect("the finalizer comes off again");

    // The webhook's lookups.
    let lookups = KubeLookups::ports(operator.clone(), TargetApiVersion::V1);
    let target = lookups.targets.target(&namespace, "llm-serving").await;
    assert!(
        matches!(target, Ok(Some(_))),
        "get modeldeployments: {target:?}"
    );
    let uid = lookups
        .scalers
        .scaler(&namespace, "llm-serving")
        .await
        .map(|found| found.map(|facts| facts.uid));
    assert_eq!(
        uid,
        Ok(scaler.metadata.uid.clone()),
        "get modeldeploymentscalers"
    );

    // Cluster-wide grants hold in any namespace; the Lease grants only in the operator's own.
    for &(group, resource, verb) in USED {
        assert!(
            may(&admin, account, (group, resource, verb, None), "elsewhere").await,
            "{verb} {group}/{resource} in another namespace"
        );
    }
    for &(group, resource, verb, name) in USED_IN_OWN_NAMESPACE {
        assert!(may(&admin, account, (group, resource, verb, name), &namespace).await);
        assert!(
            !may(&admin, account, (group, resource, verb, name), "elsewhere").await,
            "{verb} {resource} outside the operator's namespace"
        );
    }
    // A few things the operator never does.
    let never: [(&str, &str, &str, Option<&str>); 14] = [
        ("", "secrets", "list", None),
        ("", "secrets", "get", Some("mds-webhook-tls")),
        ("", "pods", "create", None),
        ("", "pods", "delete", None),
        ("", "pods/exec", "create", None),
        ("", "events", "create", None),
        ("", "namespaces", "list", None),
        ("worker.gpustack.ai", "modeldeployments", "update", None),
        ("worker.gpustack.ai", "modeldeployments", "delete", None),
        (
            "worker.gpustack.ai",
            "modeldeploymentscalers",
            "create",
            None,
        ),
        (
            "worker.gpustack.ai",
            "modeldeploymentscalers",
            "delete",
            None,
        ),
        (
            "coordination.k8s.io",
            "leases",
            "patch",
            Some("someone-elses-lease"),
        ),
        ("coordination.k8s.io", "leases", "list", None),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "patch",
            None,
        ),
    ];
    for call in never {
        assert!(
            !may(&admin, account, call, &namespace).await,
            "the operator may {call:?}, which it never needs"
        );
    }
    // And refused for real, not only in review.
    let refused = Api::<Secret>::namespaced(operator.clone(), &namespace)
        .list(&ListParams::default())
        .await;
    assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_namespace_the_operator_reaches_that_namespace_only() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let home = plane.namespace("operator-home").await.unwrap();
    let watched = plane.namespace("team").await.unwrap();
    let objects: Vec<Value> =
        deploy_support::helm_template_in(&home, &["--set", &format!("watchNamespace={watched}")])
            .into_iter()
            .filter(|o| {
                let kind = o["kind"].as_str().unwrap();
                kind == "ServiceAccount" || kind.starts_with("Role")
            })
            .collect();
    apply(plane, &objects, &[]);
    let admin = plane.client();
    let operator = plane.service_account_client(&home, "mds");
    let account = (home.as_str(), "mds");
    watches_sync(operator, Some(watched.clone())).await;
    for &(group, resource, verb) in USED {
        assert!(
            may(&admin, account, (group, resource, verb, None), &watched).await,
            "{verb} {group}/{resource} in the watched namespace"
        );
        assert!(
            !may(&admin, account, (group, resource, verb, None), "").await,
            "{verb} {group}/{resource} across namespaces"
        );
    }
    for &(group, resource, verb, name) in USED_IN_OWN_NAMESPACE {
        assert!(may(&admin, account, (group, resource, verb, name), &home).await);
    }
}
