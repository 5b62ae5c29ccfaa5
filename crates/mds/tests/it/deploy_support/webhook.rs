//! mds-webhook's server run inside a test process on 127.0.0.1 and registered with the API
//! server by URL and `caBundle`, as `mds certs --url` would register it; and the operator's
//! own target writes, made through its adapter as deploy/'s ServiceAccount.
//!
//! The configurations are scoped to one namespace (a `namespaceSelector` on
//! `kubernetes.io/metadata.name`, as the chart's `watchNamespace` does) and named after it, so
//! tests of one binary can each run a webhook of their own beside the others, and stop theirs
//! without failing anyone else's writes.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::{BINDING_ANNOTATION, BindingPayload};
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_core::patch::{TargetShape, bind};
use mds_operator::Cluster as _;
use mds_operator::kube_cluster::{Caches, KubeCluster};
use mds_webhook::certs::{IssueRequest, issue};
use mds_webhook::configuration::{self, Endpoint, Settings};
use mds_webhook::kube_lookups::KubeLookups;
use mds_webhook::router::{WebhookState, router};
use mds_webhook::tls::{CertificateFiles, ReloadingCertificate};
use serde_json::json;
use tokio::sync::oneshot;

use super::md_resource;

/// One serving run of the server: stopped by `stop`, finished when `task` ends.
struct Serving {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// mds-webhook's server on 127.0.0.1, looking targets and scalers up as `lookups_client`;
/// stops when dropped. It can be stopped and started again on the same port, so the
/// registered configurations stay valid.
pub struct InProcessWebhook {
    pub port: u16,
    pub ca_pem: String,
    files: tempfile::TempDir,
    lookups_client: Client,
    operator_user: Option<String>,
    serving: Option<Serving>,
}

impl InProcessWebhook {
    /// `operator_user`: the fence's optional identity check; `None` as deploy/ runs it (the fence
    /// decides by content alone).
    pub async fn start(lookups_client: Client, operator_user: Option<&str>) -> InProcessWebhook {
        let issued = issue(&IssueRequest {
            dns_names: vec![],
            ips: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
            valid_days: 1,
            ca_valid_days: 1,
            ca: None,
            now: jiff::Timestamp::now(),
        })
        .unwrap();
        let files = tempfile::tempdir().unwrap();
        std::fs::write(files.path().join("tls.crt"), &issued.cert_pem).unwrap();
        std::fs::write(files.path().join("tls.key"), &issued.key_pem).unwrap();
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap();
        let mut webhook = InProcessWebhook {
            port: listener.local_addr().unwrap().port(),
            ca_pem: issued.ca_cert_pem,
            files,
            lookups_client,
            operator_user: operator_user.map(str::to_string),
            serving: None,
        };
        webhook.serve(listener);
        webhook
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let certificate = ReloadingCertificate::load(CertificateFiles {
            cert: self.files.path().join("tls.crt"),
            key: self.files.path().join("tls.key"),
        })
        .unwrap();
        let tls = certificate.server_config().unwrap();
        let app = router(WebhookState {
            lookups: KubeLookups::ports(self.lookups_client.clone(), TargetApiVersion::V1),
            operator_user: self.operator_user.clone(),
            lookup_timeout: Duration::from_secs(3),
            metrics: Default::default(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(mds_webhook::server::serve(listener, app, tls, async {
            let _ = stopped.await;
        }));
        self.serving = Some(Serving { stop, task });
    }

    /// Stops the server as SIGTERM stops `mds webhook`: the port closes, open requests finish.
    pub async fn stop(&mut self) {
        if let Some(serving) = self.serving.take() {
            let _ = serving.stop.send(());
            tokio::time::timeout(Duration::from_secs(40), serving.task)
                .await
                .expect("the webhook server stops")
                .unwrap()
                .unwrap();
        }
    }

    /// Serves again on the same port with the same certificate.
    pub async fn resume(&mut self) {
        assert!(self.serving.is_none(), "the webhook is already serving");
        let port = self.port;
        let listener = mds_testkit::eventually(
            &format!("127.0.0.1:{port} to be free again"),
            Duration::from_secs(10),
            || async move {
                tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
                    .await
                    .ok()
            },
        )
        .await
        .unwrap();
        self.serve(listener);
    }

    /// The name of both configurations for `namespace`.
    pub fn configuration_name(namespace: &str) -> String {
        format!("{}-{namespace}", configuration::CONFIGURATION_NAME)
    }

    /// Both configurations, pointing the API server at this server for writes in `namespace`.
    pub async fn register(&self, admin: &Client, namespace: &str) {
        let settings = Settings::new(
            Endpoint::Url(format!("https://127.0.0.1:{}", self.port)),
            self.ca_pem.clone().into_bytes(),
        );
        let name = Self::configuration_name(namespace);
        let selector = Some(LabelSelector {
            match_labels: Some([("kubernetes.io/metadata.name".into(), namespace.into())].into()),
            ..LabelSelector::default()
        });
        let mut mutating = configuration::mutating(&settings);
        mutating.metadata.name = Some(name.clone());
        for webhook in mutating.webhooks.iter_mut().flatten() {
            webhook.namespace_selector = selector.clone();
        }
        let mut validating = configuration::validating(&settings);
        validating.metadata.name = Some(name);
        for webhook in validating.webhooks.iter_mut().flatten() {
            webhook.namespace_selector = selector.clone();
        }
        Api::<MutatingWebhookConfiguration>::all(admin.clone())
            .create(&PostParams::default(), &mutating)
            .await
            .unwrap();
        Api::<ValidatingWebhookConfiguration>::all(admin.clone())
            .create(&PostParams::default(), &validating)
            .await
            .unwrap();
    }

    pub async fn unregister(admin: &Client, namespace: &str) {
        let name = Self::configuration_name(namespace);
        let _ = Api::<MutatingWebhookConfiguration>::all(admin.clone())
            .delete(&name, &DeleteParams::default())
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
            .delete(&name, &DeleteParams::default())
            .await;
    }

    /// Waits until the API server calls all three webhooks for `namespace` (its informer
    /// picks the configurations up a moment after they are created): a dry-run scaler gets
    /// its algorithm type stored, one with a zero quantity (a rule of admission alone) is
    /// refused by the validation, and a target with a hand-made binding by the fence.
    pub async fn wait_until_called(admin: &Client, namespace: &str) {
        let scalers: Api<ModelDeploymentScaler> = Api::namespaced(admin.clone(), namespace);
        let targets: Api<DynamicObject> =
            Api::namespaced_with(admin.clone(), namespace, &md_resource());
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let probe = |target: &str| -> ModelDeploymentScaler {
            serde_json::from_value(json!({
                "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
                "metadata": {"name": "webhook-probe"},
                "spec": {"targetRef": {"name": "webhook-probe"},
                    "roles": [{"name": "server", "maxReplicas": 2}],
                    "algorithm": {"proportional": {"metric": "QueueDepth",
                        "roleTargets": [{"name": "server", "target": target}]}}}
            }))
            .unwrap()
        };
        let (valid, invalid) = (probe("10"), probe("0"));
        let bound: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment",
            "metadata": {"name": "webhook-probe", "annotations": {BINDING_ANNOTATION:
                BindingPayload { scaler_name: "webhook-probe".into(), scaler_uid: "u".into(), term: 1 }.to_annotation()}},
            "spec": {"roles": [{"name": "server", "instanceType": "h100"}]}
        }))
        .unwrap();
        let answers = || async {
            let defaulted = scalers.create(&dry_run, &valid).await;
            let refused = scalers.create(&dry_run, &invalid).await;
            let fenced = targets.create(&dry_run, &bound).await;
            format!(
                "defaults: {:?}; validation: {}; fence: {}",
                defaulted
                    .map(|s| serde_json::to_value(s.spec).unwrap()["algorithm"]["type"].clone()),
                denied_by(refused.err(), configuration::VALIDATION_WEBHOOK),
                denied_by(fenced.err(), configuration::FENCE_WEBHOOK),
            )
        };
        let all = "defaults: Ok(String(\"Proportional\")); validation: true; fence: true";
        let called = mds_testkit::eventually(
            "the API server to call the in-process webhooks",
            Duration::from_secs(30),
            || async { (answers().await == all).then_some(()) },
        )
        .await;
        if let Err(e) = called {
            panic!("{e}; the last answers: {}", answers().await);
        }
    }
}

/// Whether `error` is `webhook`'s denial.
pub fn denied_by(error: Option<kube::Error>, webhook: &str) -> bool {
    let denial = format!("admission webhook \"{webhook}\" denied the request: ");
    matches!(error, Some(kube::Error::Api(s)) if s.message.starts_with(&denial))
}

impl Drop for InProcessWebhook {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            let _ = serving.stop.send(());
        }
    }
}

/// What a target looks like to the operator's patches.
pub fn target_shape(md: &ModelDeployment) -> TargetShape {
    TargetShape::of(md)
}

/// The operator's own adapter as `operator` (deploy/'s ServiceAccount), as the leader.
pub fn operator_cluster(operator: Client, instance: &str) -> KubeCluster {
    KubeCluster::new(
        operator,
        Arc::new(Caches::new(true)),
        TargetApiVersion::V1,
        instance.into(),
        Arc::new(AtomicBool::new(true)),
    )
}

/// Binds `target` to `scaler` (term 1) through the operator's adapter, as the controller's
/// bind does; returns the binding annotation's text and the target as written.
pub async fn bind_as_operator(
    operator: Client,
    admin: &Client,
    scaler: &ModelDeploymentScaler,
    target: &str,
) -> (String, ModelDeployment) {
    let namespace = scaler.metadata.namespace.clone().unwrap();
    let targets: Api<ModelDeployment> =
        Api::namespaced_with(admin.clone(), &namespace, &TargetApiVersion::V1);
    let binding = BindingPayload {
        scaler_name: scaler.metadata.name.clone().unwrap(),
        scaler_uid: scaler.metadata.uid.clone().unwrap(),
        term: 1,
    }
    .to_annotation();
    let live = targets.get(target).await.unwrap();
    let written = operator_cluster(operator, "test-operator")
        .patch_target(&namespace, target, &bind(&target_shape(&live), &binding))
        .await
        .expect("the operator binds");
    (binding, written)
}
