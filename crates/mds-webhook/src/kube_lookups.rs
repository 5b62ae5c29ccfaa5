//! The webhook's lookups backed by the API server: the target a scaler names (for the
//! target-dependent admission rules) and the scaler a write's binding names (for the fence).

use crate::ports::{LookupError, LookupFuture, Lookups, ScalerLookup, TargetLookup};
use kube::Api;
use kube::Client;
use mds_api::ModelDeploymentScaler;
use mds_api::fence::ScalerFacts;
use mds_api::resources::TargetApiVersion;
use mds_api::target::ModelDeployment;
use std::sync::Arc;

/// Reads through a kube client, at the configured `ModelDeployment` version (D1).
pub struct KubeLookups {
    client: Client,
    target_version: TargetApiVersion,
}

impl KubeLookups {
    /// Both webhook ports over one client.
    pub fn ports(client: Client, target_version: TargetApiVersion) -> Lookups {
        let lookups = Arc::new(KubeLookups {
            client,
            target_version,
        });
        Lookups {
            targets: lookups.clone(),
            scalers: lookups,
        }
    }
}

fn failed(e: kube::Error) -> LookupError {
    LookupError::Failed(e.to_string())
}

impl TargetLookup for KubeLookups {
    fn target<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ModelDeployment>> {
        Box::pin(async move {
            let api: Api<ModelDeployment> =
                Api::namespaced_with(self.client.clone(), namespace, &self.target_version);
            api.get_opt(name).await.map_err(failed)
        })
    }
}

impl ScalerLookup for KubeLookups {
    fn scaler<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ScalerFacts>> {
        Box::pin(async move {
            let api: Api<ModelDeploymentScaler> = Api::namespaced(self.client.clone(), namespace);
            let scaler = api.get_opt(name).await.map_err(failed)?;
            Ok(scaler.as_ref().and_then(ScalerFacts::of))
        })
    }
}
