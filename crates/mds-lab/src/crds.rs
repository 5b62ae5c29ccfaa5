//! The CRDs every test control plane carries, and installing CRDs until they serve.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Client, CustomResourceExt};
use mds_api::ModelDeploymentScaler;

use crate::{Error, eventually};

/// Our stand-in for GPUStack's ModelDeployment CRD (see the file's header).
pub const MODEL_DEPLOYMENT_CRD_YAML: &str =
    include_str!("../crds/modeldeployments.worker.gpustack.ai.yaml");

/// The ModelDeploymentScaler CRD exactly as `mds crd` prints it (the same generator).
pub fn model_deployment_scaler() -> CustomResourceDefinition {
    ModelDeploymentScaler::crd()
}

/// GPUStack's ModelDeployment: v1alpha1 stored, v1 served with conversion None.
pub fn model_deployment() -> Result<CustomResourceDefinition, Error> {
    serde_yaml_ng::from_str(MODEL_DEPLOYMENT_CRD_YAML).map_err(|e| Error::Crd {
        name: "modeldeployments.worker.gpustack.ai".into(),
        message: format!("the stand-in CRD's YAML does not parse: {e}"),
    })
}

/// Kueue's Workload CRD, read from the file the build script took from the Kueue module.
pub fn kueue_workload(path: &Path) -> Result<CustomResourceDefinition, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        context: format!("reading the Kueue Workload CRD {}", path.display()),
        source: e,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|e| Error::Crd {
        name: "workloads.kueue.x-k8s.io".into(),
        message: format!("{} does not parse: {e}", path.display()),
    })
}

/// Creates `crds`, then waits until each is `Established` with its names accepted and every
/// served version answers a list (discovery lags the condition a little).
///
/// A CRD the API server refuses (schema, CEL syntax or cost budget) is an [`Error::Crd`]
/// carrying the server's message.
pub async fn install(
    client: &Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), crd)
            .await
            .map_err(|e| Error::Crd {
                name: name.clone(),
                message: match e {
                    kube::Error::Api(status) => status.message,
                    other => other.to_string(),
                },
            })?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        eventually(&format!("CRD {name} to be Established"), timeout, || {
            let api = api.clone();
            let name = name.clone();
            async move { api.get(&name).await.ok().filter(is_established) }
        })
        .await?;
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let resource = ApiResource {
                group: crd.spec.group.clone(),
                version: version.name.clone(),
                api_version: format!("{}/{}", crd.spec.group, version.name),
                kind: crd.spec.names.kind.clone(),
                plural: crd.spec.names.plural.clone(),
            };
            let what = format!(
                "{}/{} to answer a list",
                resource.api_version, resource.plural
            );
            eventually(&what, timeout, || {
                let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                async move { objects.list(&ListParams::default().limit(1)).await.ok() }
            })
            .await?;
        }
    }
    Ok(())
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    let conditions = crd.status.as_ref().and_then(|s| s.conditions.as_ref());
    let is_true = |kind: &str| {
        conditions
            .into_iter()
            .flatten()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    is_true("Established") && is_true("NamesAccepted")
}
