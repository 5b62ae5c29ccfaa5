//! Admission webhooks for mds, as a library the `mds webhook` command (and later the
//! controller's one-process mode) serves:
//!
//! - mutating for ModelDeploymentScaler: stores the defaults and the inferred algorithm type
//!   as a JSON Patch (D25, D28);
//! - validating for ModelDeploymentScaler: every admission rule of `mds_api::validation`, the
//!   target looked up through [`ports::TargetLookup`], messages as `mds validate` prints them;
//! - validating for ModelDeployment: the binding fence of `mds_api::fence` (D24), the scaler
//!   looked up through [`ports::ScalerLookup`].
//!
//! [`server::serve`] runs the [`router::router`] over TLS with a certificate that
//! [`tls::ReloadingCertificate`] swaps when its files change; [`certs`] makes a CA and a
//! serving pair, and [`configuration`] builds the webhook configuration objects for them.
//! With the `kube` feature, `kube_lookups::KubeLookups` answers both lookups from the API
//! server.

pub mod certs;
pub mod configuration;
#[cfg(feature = "kube")]
pub mod kube_lookups;
pub mod metrics;
pub mod ports;
pub mod review;
pub mod router;
pub mod scaler;
pub mod server;
pub mod target;
pub mod tls;
