//! Kubernetes resource identities of the target read model, so the shells can list, watch and
//! patch `ModelDeployment`s and Kueue `Workload`s with the same types the pure code reads.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::target::{ModelDeployment, Workload};

/// The served version the scaler reads and writes `ModelDeployment`s through (D1): GPUStack
/// serves `v1` as an alias of the `v1alpha1` custom resource; clusters serving only the custom
/// resource need `v1alpha1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TargetApiVersion {
    #[default]
    V1,
    V1Alpha1,
}

impl TargetApiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetApiVersion::V1 => "v1",
            TargetApiVersion::V1Alpha1 => "v1alpha1",
        }
    }

    /// `v1` or `v1alpha1`.
    pub fn parse(text: &str) -> Option<TargetApiVersion> {
        match text {
            "v1" => Some(TargetApiVersion::V1),
            "v1alpha1" => Some(TargetApiVersion::V1Alpha1),
            _ => None,
        }
    }
}

pub const TARGET_GROUP: &str = "worker.gpustack.ai";
pub const WORKLOAD_GROUP: &str = "kueue.x-k8s.io";
pub const WORKLOAD_VERSION: &str = "v1beta2";

impl kube::Resource for ModelDeployment {
    type DynamicType = TargetApiVersion;
    // Namespaced, but the version is chosen at run time (D1), which kube's API types model
    // as a dynamic scope.
    type Scope = kube::core::DynamicResourceScope;

    fn kind(_: &TargetApiVersion) -> Cow<'_, str> {
        "ModelDeployment".into()
    }
    fn group(_: &TargetApiVersion) -> Cow<'_, str> {
        TARGET_GROUP.into()
    }
    fn version(v: &TargetApiVersion) -> Cow<'_, str> {
        v.as_str().into()
    }
    fn plural(_: &TargetApiVersion) -> Cow<'_, str> {
        "modeldeployments".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::Resource for Workload {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Workload".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        WORKLOAD_GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        WORKLOAD_VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "workloads".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn urls_name_the_served_versions() {
        assert_eq!(
            ModelDeployment::url_path(&TargetApiVersion::V1, Some("ns")),
            "/apis/worker.gpustack.ai/v1/namespaces/ns/modeldeployments"
        );
        assert_eq!(
            ModelDeployment::api_version(&TargetApiVersion::V1Alpha1),
            "worker.gpustack.ai/v1alpha1"
        );
        assert_eq!(
            Workload::url_path(&(), Some("ns")),
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads"
        );
    }
}
