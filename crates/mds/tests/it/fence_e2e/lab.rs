//! One test's world on the shared control plane: a namespace with deploy/'s ServiceAccount and
//! RBAC, mds-webhook's server in this process registered for that namespace (its lookups made
//! as the ServiceAccount, as in the Pod), the objects the scenarios write, and the controller
//! run in-process as the ServiceAccount.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::fence::{self, FenceRequest, NamedScaler, Operation, Verdict};
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use mds_operator::api_client::ApiClients;
use mds_operator::runtime::ControllerConfig;
use mds_operator::telemetry::Telemetry;
use mds_operator::{Leadership, Operator, OperatorConfig};
use mds_testdata::{mk_scaler, mk_target};
use mds_testkit::ControlPlane;
use mds_webhook::configuration::FENCE_WEBHOOK;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::deploy_support::webhook::InProcessWebhook;
use crate::deploy_support::{install_operator_identity, md_resource};

/// How long a scenario waits for the controller or the API server. Passes come every 5 s here.
pub const WAIT: Duration = Duration::from_secs(30);

/// The admin's user name on the test control plane (a client certificate in `system:masters`).
pub const ADMIN_USER: &str = "admin";

pub struct Lab {
    pub plane: &'static ControlPlane,
    pub namespace: String,
    /// The cluster administrator: "a user" in every scenario.
    pub admin: Client,
    /// deploy/'s ServiceAccount `mds`, impersonated.
    pub operator: Client,
    /// The fence decides by content (no `--operator-user`, as deploy/ runs it), so a person
    /// writing as this same identity is still told apart from the controller.
    pub webhook: InProcessWebhook,
}

impl Lab {
    /// `None` when the end-to-end tests are skipped.
    pub async fn new(hint: &str) -> Option<Lab> {
        let plane = mds_testkit::e2e()?;
        let namespace = plane.namespace(hint).await.unwrap();
        install_operator_identity(plane, &namespace);
        let operator = plane.service_account_client(&namespace, "mds");
        let admin = plane.client();
        let webhook = InProcessWebhook::start(operator.clone(), None).await;
        webhook.register(&admin, &namespace).await;
        InProcessWebhook::wait_until_called(&admin, &namespace).await;
        Some(Lab {
            plane,
            namespace,
            admin,
            operator,
            webhook,
        })
    }

    /// Removes this test's webhook configurations (they refuse every write in the namespace
    /// once the server is gone).
    pub async fn finish(self) {
        InProcessWebhook::unregister(&self.admin, &self.namespace).await;
    }

    pub fn targets(&self) -> Api<ModelDeployment> {
        self.targets_as(self.admin.clone())
    }

    /// Targets as `client` reads and writes them.
    pub fn targets_as(&self, client: Client) -> Api<ModelDeployment> {
        Api::namespaced_with(client, &self.namespace, &TargetApiVersion::V1)
    }

    /// Targets as the API server stores them, every field kept.
    pub fn dynamic_targets(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.admin.clone(), &self.namespace, &md_resource())
    }

    pub fn scalers(&self) -> Api<ModelDeploymentScaler> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    /// Creates a vLLM target with Server roles of the given names and counts, as a user.
    pub async fn create_target(&self, name: &str, roles: &[(&str, i32)]) -> ModelDeployment {
        let object: DynamicObject = serde_json::from_value(target_manifest(name, roles)).unwrap();
        self.dynamic_targets()
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        self.targets().get(name).await.unwrap()
    }

    /// Creates an Active Proportional scaler (QueueDepth, 10 per replica, a pass every 5 s)
    /// over roles of at most 8 replicas.
    pub async fn create_scaler(
        &self,
        name: &str,
        target: &str,
        roles: &[&str],
    ) -> ModelDeploymentScaler {
        let scaler: ModelDeploymentScaler =
            serde_json::from_value(scaler_manifest(name, target, roles)).unwrap();
        self.scalers()
            .create(&PostParams::default(), &scaler)
            .await
            .expect("the scaler is admitted")
    }

    /// A user's JSON Patch of a target.
    pub async fn patch_target(
        &self,
        name: &str,
        ops: Value,
    ) -> Result<ModelDeployment, kube::Error> {
        let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
        self.targets()
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
    }

    /// A user's merge patch of a scaler.
    pub async fn patch_scaler(
        &self,
        name: &str,
        patch: Value,
    ) -> Result<ModelDeploymentScaler, kube::Error> {
        self.scalers()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
    }

    /// Waits until target `name` satisfies `ready`, and returns it.
    pub async fn wait_target(
        &self,
        name: &str,
        what: &str,
        ready: impl Fn(&ModelDeployment) -> bool,
    ) -> ModelDeployment {
        let targets = self.targets();
        eventually(&format!("{name}: {what}"), || async {
            let md = targets.get(name).await.ok()?;
            ready(&md).then_some(md)
        })
        .await
    }

    /// The refusal the API server gives a user's write of `new` over `old` (a CREATE when
    /// there is none) when the fence decides it, worded as the fence words it.
    pub fn fence_refusal(
        &self,
        old: Option<&ModelDeployment>,
        new: &ModelDeployment,
        named_scaler: NamedScaler,
    ) -> String {
        let verdict = fence::decide(&FenceRequest {
            operation: if old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            old,
            new: Some(new),
            username: ADMIN_USER,
            operator_user: None,
            named_scaler,
        });
        match verdict {
            Verdict::Denied { message, .. } => {
                format!("admission webhook \"{FENCE_WEBHOOK}\" denied the request: {message}")
            }
            Verdict::Allowed(why) => panic!("the fence would allow this write ({why:?})"),
        }
    }

    /// The operator (`Operator::start`, as `mds controller` starts it) for this namespace as
    /// deploy/'s ServiceAccount, leader election off.
    pub async fn start_controller(&self) -> Controller {
        let (stop, shutdown) = watch::channel(false);
        let config = OperatorConfig {
            controller: ControllerConfig {
                namespace: Some(self.namespace.clone()),
                target_version: TargetApiVersion::V1,
                scrape: Default::default(),
                max_concurrent_passes: 4,
                instance: "fence-e2e".into(),
            },
            leadership: Leadership::Single,
            listeners: Vec::new(),
        };
        let operator = Operator::start(ApiClients::shared(self.operator.clone()), config, shutdown)
            .await
            .expect("the operator starts");
        Controller {
            stop,
            telemetry: operator.telemetry().clone(),
            operator,
        }
    }
}

/// A running in-process controller.
pub struct Controller {
    stop: watch::Sender<bool>,
    operator: Operator,
    pub telemetry: Arc<Telemetry>,
}

impl Controller {
    /// Stops it as SIGTERM does: passes in flight finish, nothing is released.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(WAIT, self.operator.wait())
            .await
            .expect("the controller stops")
            .expect("the controller ran");
    }

    /// Target writes of `kind` that did not land for `reason`.
    pub fn write_failures(&self, kind: &str, reason: &str) -> u64 {
        use mds_operator::telemetry::FailureLabels;
        self.telemetry
            .write_failures
            .get_or_create(&FailureLabels {
                kind: kind.into(),
                reason: reason.into(),
            })
            .get()
    }
}

/// [`mds_testkit::eventually`] with [`WAIT`], panicking on timeout.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    mds_testkit::eventually(what, WAIT, check)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

pub fn target_manifest(name: &str, roles: &[(&str, i32)]) -> Value {
    let servers: Vec<(&str, &str, i32)> = roles.iter().map(|(r, n)| (*r, "Server", *n)).collect();
    mk_target(name).roles(&servers).build()
}

pub fn scaler_manifest(name: &str, target: &str, roles: &[&str]) -> Value {
    let scaler = mk_scaler(name).target(target).interval_seconds(5);
    let bounded = roles.iter().fold(scaler, |s, r| s.role_bounds(r, 1, 8));
    bounded
        .queue_depth("10")
        .algorithm_type("Proportional")
        .build()
}

pub fn annotations(md: &ModelDeployment) -> std::collections::BTreeMap<String, String> {
    md.metadata.annotations.clone().unwrap_or_default()
}

pub fn bound(md: &ModelDeployment) -> bool {
    annotations(md).contains_key(BINDING_ANNOTATION)
}

pub fn has_decision(md: &ModelDeployment) -> bool {
    annotations(md).contains_key(DECISION_ANNOTATION)
}

pub fn replicas(md: &ModelDeployment) -> Vec<(String, i32)> {
    md.spec
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.replicas()))
        .collect()
}

/// The message of an API refusal; panics on success.
pub fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The JSON Patch a user sends to set `spec.roles[index].replicas`.
pub fn set_replicas(index: usize, replicas: i32) -> Value {
    json!([{"op": "replace", "path": format!("/spec/roles/{index}/replicas"), "value": replicas}])
}

/// `md` as it would be after [`set_replicas`].
pub fn with_replicas(md: &ModelDeployment, index: usize, replicas: i32) -> ModelDeployment {
    let mut edited = md.clone();
    edited.spec.roles[index].replicas = Some(replicas);
    edited
}
