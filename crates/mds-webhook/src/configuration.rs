//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that send requests to
//! this server, for a URL (the API server calls an address directly) or a Service, with the CA
//! the API server must trust.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mds_api::spec::{GROUP, VERSION};

use crate::router::{MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH, VALIDATE_TARGETS_PATH};

/// The name of both configuration objects.
pub const CONFIGURATION_NAME: &str = "mds";
pub const DEFAULTS_WEBHOOK: &str = "defaults.modeldeploymentscalers.worker.gpustack.ai";
pub const VALIDATION_WEBHOOK: &str = "validation.modeldeploymentscalers.worker.gpustack.ai";
pub const FENCE_WEBHOOK: &str = "fence.modeldeployments.worker.gpustack.ai";
/// The version of the ModelDeployment CRD, which the fence is registered on.
pub const TARGET_CRD_VERSION: &str = "v1alpha1";

/// How the API server reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL such as `https://127.0.0.1:8443`; each webhook's path is appended.
    Url(String),
    /// A Service in the cluster; `port` defaults to 443 on the API server's side.
    Service {
        namespace: String,
        name: String,
        port: Option<i32>,
    },
}

/// What both configurations share.
#[derive(Clone, Debug)]
pub struct Settings {
    pub endpoint: Endpoint,
    /// The PEM of the CA that signed the serving certificate.
    pub ca_bundle_pem: Vec<u8>,
    /// `Fail` (the default and our choice): a write that needs the webhook is refused while it
    /// is down, so the fence can never be skipped. `Ignore` admits such writes unchecked.
    pub failure_policy: String,
    /// Seconds the API server waits for one call (1 to 30).
    pub timeout_seconds: i32,
}

impl Settings {
    pub fn new(endpoint: Endpoint, ca_bundle_pem: Vec<u8>) -> Settings {
        Settings {
            endpoint,
            ca_bundle_pem,
            failure_policy: "Fail".into(),
            timeout_seconds: 10,
        }
    }

    fn client(&self, path: &str) -> WebhookClientConfig {
        let ca_bundle = Some(ByteString(self.ca_bundle_pem.clone()));
        match &self.endpoint {
            Endpoint::Url(base) => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_string()),
                    port: *port,
                }),
                ca_bundle,
                url: None,
            },
        }
    }
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| s.to_string()).collect())
}

/// Creates and updates of the resource itself (never its status).
fn rule(api_versions: &[&str], resource: &str) -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: strings(&[GROUP]),
        api_versions: strings(api_versions),
        operations: strings(&["CREATE", "UPDATE"]),
        resources: strings(&[resource]),
        scope: Some("Namespaced".into()),
    }]
}

fn metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(CONFIGURATION_NAME.into()),
        labels: Some([("app.kubernetes.io/name".to_string(), "mds".to_string())].into()),
        ..ObjectMeta::default()
    }
}

/// The defaults webhook for ModelDeploymentScaler.
pub fn mutating(settings: &Settings) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: metadata(),
        webhooks: Some(vec![MutatingWebhook {
            name: DEFAULTS_WEBHOOK.into(),
            client_config: settings.client(MUTATE_SCALERS_PATH),
            rules: Some(rule(&[VERSION], "modeldeploymentscalers")),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some(settings.failure_policy.clone()),
            match_policy: Some("Equivalent".into()),
            // Defaulting is idempotent; run again if a later webhook changed the object.
            reinvocation_policy: Some("IfNeeded".into()),
            timeout_seconds: Some(settings.timeout_seconds),
            ..MutatingWebhook::default()
        }]),
    }
}

/// The scaler validation and the binding fence. The fence is registered on the
/// `ModelDeployment` CRD's `v1alpha1`, where the writes really arrive: GPUStack's `v1` is an
/// aggregated API whose server writes through to the CRD storage, and the kube-apiserver runs no
/// admission webhook on a request it hands to an aggregated server, only on the CRD write that
/// follows. `matchPolicy: Equivalent` also sends writes of any other version the CRD itself
/// serves (a `v1` CRD version in clusters without the aggregated server), converted to
/// `v1alpha1`. The fence reads only names, counts and annotations; DELETE is not sent, since
/// the fence lets deletes pass anyway.
pub fn validating(settings: &Settings) -> ValidatingWebhookConfiguration {
    let webhook = |name: &str, path: &str, rules| ValidatingWebhook {
        name: name.into(),
        client_config: settings.client(path),
        rules: Some(rules),
        admission_review_versions: vec!["v1".into()],
        side_effects: "None".into(),
        failure_policy: Some(settings.failure_policy.clone()),
        match_policy: Some("Equivalent".into()),
        timeout_seconds: Some(settings.timeout_seconds),
        ..ValidatingWebhook::default()
    };
    ValidatingWebhookConfiguration {
        metadata: metadata(),
        webhooks: Some(vec![
            webhook(
                VALIDATION_WEBHOOK,
                VALIDATE_SCALERS_PATH,
                rule(&[VERSION], "modeldeploymentscalers"),
            ),
            webhook(
                FENCE_WEBHOOK,
                VALIDATE_TARGETS_PATH,
                rule(&[TARGET_CRD_VERSION], "modeldeployments"),
            ),
        ]),
    }
}
