//! What the webhooks need to read from the cluster, as two small ports. The handlers take them
//! as trait objects, so tests pass fakes and the binary passes a kube-backed adapter.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mds_api::fence::ScalerFacts;
use mds_api::target::ModelDeployment;

/// A lookup's answer arrives later; boxed so the ports stay object-safe.
pub type LookupFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LookupError>> + Send + 'a>>;

/// Why a lookup gave no answer (not "absent": absence is `Ok(None)`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The webhook was started without API lookups (`mds webhook --no-api-lookups`).
    #[error("API lookups are disabled in this webhook (--no-api-lookups)")]
    Disabled,
    #[error("the lookup took longer than {0} ms")]
    TimedOut(u64),
    #[error("{0}")]
    Failed(String),
}

/// Reads the `ModelDeployment` a scaler targets.
pub trait TargetLookup: Send + Sync {
    /// The target `name` in `namespace`; `Ok(None)` when it does not exist.
    fn target<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ModelDeployment>>;
}

/// Reads what the fence needs of a `ModelDeploymentScaler`: the one a write's binding names.
pub trait ScalerLookup: Send + Sync {
    /// Scaler `name` in `namespace` ([`ScalerFacts::of`]); `Ok(None)` when it does not exist.
    fn scaler<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> LookupFuture<'a, Option<ScalerFacts>>;
}

/// Both ports, as the router holds them.
#[derive(Clone)]
pub struct Lookups {
    pub targets: Arc<dyn TargetLookup>,
    pub scalers: Arc<dyn ScalerLookup>,
}

impl Lookups {
    /// Lookups that always answer [`LookupError::Disabled`]: target-dependent rules are skipped
    /// with a warning, and the fence refuses every bind and every removal of a binding, since
    /// it cannot check the scaler they name. For tests of the binary only.
    pub fn disabled() -> Lookups {
        Lookups {
            targets: Arc::new(Disabled),
            scalers: Arc::new(Disabled),
        }
    }
}

struct Disabled;

impl TargetLookup for Disabled {
    fn target<'a>(&'a self, _: &'a str, _: &'a str) -> LookupFuture<'a, Option<ModelDeployment>> {
        Box::pin(async { Err(LookupError::Disabled) })
    }
}

impl ScalerLookup for Disabled {
    fn scaler<'a>(&'a self, _: &'a str, _: &'a str) -> LookupFuture<'a, Option<ScalerFacts>> {
        Box::pin(async { Err(LookupError::Disabled) })
    }
}

/// Awaits a lookup for at most `timeout`: the API server gives the whole webhook call only a
/// few seconds, so a slow lookup must end in an answer of ours, not in its timeout.
pub async fn within<T>(
    timeout: std::time::Duration,
    lookup: LookupFuture<'_, T>,
) -> Result<T, LookupError> {
    match tokio::time::timeout(timeout, lookup).await {
        Ok(answer) => answer,
        Err(_) => Err(LookupError::TimedOut(timeout.as_millis() as u64)),
    }
}
