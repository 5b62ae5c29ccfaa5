//! The two ports a worker reaches the world through (ARCHITECTURE: the worker and its ports).
//! `Cluster` reads one scaler's snapshot and makes its writes; `MetricsSource` reads one Pod's
//! `/metrics` page. The production adapters are kube-rs and reqwest; the simulator serves both
//! from its world model. Only API objects cross these ports, never kube-rs client types.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use mds_api::ModelDeploymentScaler;
use mds_api::status::ModelDeploymentScalerStatus;
use mds_api::target::{ModelDeployment, Workload};
use mds_core::{Event, PatchOp};

/// Names one scaler.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScalerKey {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ScalerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What one pass reads of the cluster: the scaler, its target and the target's Pods and
/// Workloads, as the watch caches hold them.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub scaler: Arc<ModelDeploymentScaler>,
    pub target: Option<Arc<ModelDeployment>>,
    /// The target's Pods (label `app.kubernetes.io/instance=<target>`).
    pub pods: Vec<Arc<Pod>>,
    /// The Workloads of the target's namespace that its Pods name; `None` when the Kueue
    /// Workload API is not served (D4 then reads admission from `PodScheduled`).
    pub workloads: Option<Vec<Arc<Workload>>>,
    /// The target, or a Workload of its instances, exists but does not decode: which, what did
    /// not, and where. An undecodable target is `None` in `target`.
    pub target_problem: Option<String>,
}

/// Why a write did not land. The worker treats each class differently: a conflict is
/// re-planned next pass and not reported; a refusal is reported at once and retried with
/// backoff (a refused commit's counts are held until the scaler spec or the target changes);
/// an unavailable API server is retried with backoff and reported once it has failed for a
/// sampling interval.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Someone else moved the object (a JSON Patch that does not apply, such as a failed
    /// `test`, or a stale resource version, HTTP 409): drop the plan and re-plan from the new
    /// state next pass (D3). Never retried blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The API server refused the write as it stands: an admission webhook's denial (our
    /// fence's 403 included), a schema or CEL rule (422 naming the field), another 4xx.
    #[error("refused: {0}")]
    Refused(String),
    /// The object is gone.
    #[error("not found: {0}")]
    NotFound(String),
    /// The write may land if tried again: no answer (connection, timeout), 5xx (a webhook that
    /// could not be called included), 429, 401, an authorizer's 403 (RBAC still propagating),
    /// or this controller no longer leads.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl WriteError {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            WriteError::Conflict(_) => "conflict",
            WriteError::Refused(_) => "refused",
            WriteError::NotFound(_) => "not_found",
            WriteError::Unavailable(_) => "unavailable",
        }
    }

    /// What the API server (or the port) said.
    pub fn message(&self) -> &str {
        match self {
            WriteError::Conflict(m)
            | WriteError::Refused(m)
            | WriteError::NotFound(m)
            | WriteError::Unavailable(m) => m,
        }
    }
}

/// The cluster as one worker sees it.
pub trait Cluster: Send + Sync {
    /// The scaler and what it plans over; `None` once the scaler is gone.
    fn snapshot(&self, key: &ScalerKey) -> impl Future<Output = Option<Snapshot>> + Send;

    /// Applies a JSON Patch to the target (its `test` operations guard it, D3); returns the
    /// target as written.
    fn patch_target(
        &self,
        namespace: &str,
        target: &str,
        ops: &[PatchOp],
    ) -> impl Future<Output = Result<ModelDeployment, WriteError>> + Send;

    /// Replaces the scaler's status, guarded by the resource version the snapshot read, so a
    /// status computed from an old spec never lands; returns the scaler as written.
    fn write_status(
        &self,
        scaler: &ModelDeploymentScaler,
        status: &ModelDeploymentScalerStatus,
    ) -> impl Future<Output = Result<ModelDeploymentScaler, WriteError>> + Send;

    /// Adds (`true`) or removes (`false`) the scaler's finalizer, guarded by its resource
    /// version; returns the scaler as written (its new resource version guards later writes).
    fn set_finalizer(
        &self,
        scaler: &ModelDeploymentScaler,
        present: bool,
    ) -> impl Future<Output = Result<ModelDeploymentScaler, WriteError>> + Send;

    /// Emits an event about the scaler (best effort).
    fn emit(
        &self,
        scaler: &ModelDeploymentScaler,
        event: &Event,
    ) -> impl Future<Output = ()> + Send;
}

/// Why a Pod's page could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    #[error("timed out after {0} ms")]
    Timeout(u64),
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("HTTP status {0}")]
    Status(u16),
    /// The engine answered with a redirect; the scraper never follows one (a Pod must not
    /// send it elsewhere).
    #[error("HTTP status {status} redirects to {location:?}; redirects are not followed")]
    Redirect { status: u16, location: String },
    #[error("body larger than the page cap of {0} bytes")]
    TooLarge(u64),
    #[error("body is not UTF-8")]
    NotText,
    #[error("{0}")]
    Other(String),
}

impl ScrapeError {
    /// A short label for the scrape-error metric.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Connect(_) => "connect",
            ScrapeError::Status(_) => "http_status",
            ScrapeError::Redirect { .. } => "redirect",
            ScrapeError::TooLarge(_) => "too_large",
            ScrapeError::NotText => "not_text",
            ScrapeError::Other(_) => "other",
        }
    }
}

/// Reads engine pages.
pub trait MetricsSource: Send + Sync {
    /// The source's clock, read when a pass starts sampling and when each page is asked for
    /// and has arrived: a page counts as read at its arrival, and a read's duration is taken
    /// on it. Monotonic in the shell (`HttpSource` reads tokio's clock, so paused time keeps
    /// tests deterministic). `None`, the default, is a source without a clock: every page
    /// counts as read at the pass's `now`, in no time.
    fn now(&self) -> Option<Timestamp> {
        None
    }

    /// The text of the page at `url`, at most `mds_signals::scrape::MAX_PAGE_BYTES`.
    fn fetch(&self, url: &str) -> impl Future<Output = Result<String, ScrapeError>> + Send;

    /// Reads the page at `url` and hands its text to `parse` as soon as it has arrived; the
    /// text lives only as long as the parse. The sampler reads every page this way, so a pass
    /// holds parsed samples, never the pages of all its Pods at once. `HttpSource` overrides
    /// it to count the page against its bound on bytes in flight until `parse` returns.
    fn fetch_with<T, F>(
        &self,
        url: &str,
        parse: F,
    ) -> impl Future<Output = Result<T, ScrapeError>> + Send
    where
        T: Send,
        F: FnOnce(&str) -> T + Send,
    {
        async move {
            let text = self.fetch(url).await?;
            Ok(parse(&text))
        }
    }
}
