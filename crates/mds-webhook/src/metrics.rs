//! The webhook's own metrics, served at `/metrics` on its TLS port: reviews answered, and the
//! binding fence's refusals by target and rule (the `MdsFenceRefusedWrite` alert reads them).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Path of the metrics page.
pub const METRICS_PATH: &str = "/metrics";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// `mutate-scalers`, `validate-scalers` or `validate-targets`.
    pub webhook: String,
    pub allowed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub namespace: String,
    pub target: String,
    /// The fence rule that refused (`BoundCounts`, `BoundAnnotations`, ...).
    pub rule: String,
}

/// Every metric the webhook exports (prefix `mds_webhook_`).
pub struct WebhookMetrics {
    registry: Registry,
    pub reviews: Family<ReviewLabels, Counter>,
    pub fence_refusals: Family<RefusalLabels, Counter>,
    /// When the fence last refused, per target and rule: what the alert reads (a counter's
    /// first refusal on a replica shows no `increase()`; a time does not depend on which
    /// replica refused or when Prometheus started).
    pub fence_last_refusal: Family<RefusalLabels, Gauge<f64, AtomicU64>>,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mds_webhook");
        let reviews = Family::<ReviewLabels, Counter>::default();
        let fence_refusals = Family::<RefusalLabels, Counter>::default();
        let fence_last_refusal = Family::<RefusalLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "reviews",
            "Admission reviews answered, by webhook and whether they were allowed",
            reviews.clone(),
        );
        registry.register(
            "fence_refusals",
            "Writes of a ModelDeployment the binding fence refused, by target and rule",
            fence_refusals.clone(),
        );
        registry.register(
            "fence_last_refusal_timestamp_seconds",
            "When the binding fence last refused a write of a ModelDeployment (unix seconds), by target and rule",
            fence_last_refusal.clone(),
        );
        WebhookMetrics {
            registry,
            reviews,
            fence_refusals,
            fence_last_refusal,
        }
    }
}

impl WebhookMetrics {
    /// Counts one answered review.
    pub fn review(&self, webhook: &str, allowed: bool) {
        self.reviews
            .get_or_create(&ReviewLabels {
                webhook: webhook.into(),
                allowed: allowed.to_string(),
            })
            .inc();
    }

    /// Counts one refusal of the fence at unix time `at`.
    pub fn fence_refused(&self, namespace: &str, target: &str, rule: &str, at: f64) {
        let labels = RefusalLabels {
            namespace: namespace.into(),
            target: target.into(),
            rule: rule.into(),
        };
        self.fence_refusals.get_or_create(&labels).inc();
        self.fence_last_refusal.get_or_create(&labels).set(at);
    }

    /// The page in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl std::fmt::Debug for WebhookMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookMetrics").finish_non_exhaustive()
    }
}
