//! An AIBrix `PodAutoscaler`: KPA or APA on its pod metric, configured by its
//! `autoscaling.aibrix.ai/` annotations (or labels, which older releases read).

use super::fields::{Field, PeerFileError};
use super::names::{self, number};
use super::{FileMetric, Policy, Spec, floor_of};
use crate::peers::aibrix::{AibrixAlgorithm, AibrixConfig};
use crate::peers::hpa::{HpaBehavior, MetricSource};

const PREFIX: &str = "autoscaling.aibrix.ai/";

pub(super) fn read(root: &Field) -> Result<Policy, PeerFileError> {
    let spec = root.get("spec");
    let mut notes = Vec::new();
    let strategy_field = spec.get("scalingStrategy");
    let strategy = strategy_field.opt_text()?.unwrap_or_else(|| "KPA".into());
    let sources = spec.get("metricsSources").items()?;
    let Some(source) = sources.first() else {
        return Err(spec
            .get("metricsSources")
            .error("is empty: a PodAutoscaler scales on its first metric source"));
    };
    if sources.len() > 1 {
        notes.push(format!(
            "{}: only the first metric source is read, as AIBrix's scaling context does",
            spec.get("metricsSources").path()
        ));
    }
    let source_type = source.get("metricSourceType").opt_text()?;
    if let Some(t) = source_type.as_deref().filter(|t| *t != "pod") {
        return Err(source.get("metricSourceType").error(format!(
            "{t:?}: only pod sources (the engines' own pages) are simulated; a {t} source reads a server outside the engines"
        )));
    }
    let name_field = source.get("targetMetric");
    let name = name_field.text()?;
    let metric = names::pod_metric(&name).ok_or_else(|| name_field.error(names::unknown(&name)))?;
    if metric.is_rate() {
        return Err(name_field.error(format!(
            "{name:?} is a counter: AIBrix reads a pod metric's value as it is, so it only grows; use a gauge such as num_requests_waiting or kv_cache_usage_perc"
        )));
    }
    let target_field = source.get("targetValue");
    let target = target_field.quantity()?;
    if metric == crate::peers::metric::PodMetric::KvUsage && target > 1.0 {
        notes.push(format!(
            "{}: {} for KV-cache usage, a share from 0 to 1, is never reached, so it only scales down (did you mean {}?)",
            target_field.path(),
            number(target),
            number(target / 100.0)
        ));
    }
    let min_field = spec.get("minReplicas");
    let min = floor_of(min_field.opt_int()?.unwrap_or(1), &min_field, &mut notes);
    let max_field = spec.get("maxReplicas");
    let max = match max_field.opt_int()? {
        Some(n) if n >= 1 => (n.min(i64::from(i32::MAX)) as i32).max(min),
        Some(n) => return Err(max_field.error(format!("{n} must be at least 1"))),
        None => return Err(max_field.error("is missing")),
    };
    let algorithm = match strategy.as_str() {
        "KPA" => AibrixAlgorithm::Kpa,
        "APA" => AibrixAlgorithm::Apa,
        "HPA" => {
            notes.push(format!(
                "{}: HPA, so AIBrix makes a Kubernetes HPA on the metric at its target with the default behaviour",
                strategy_field.path()
            ));
            let metrics = vec![FileMetric {
                source: MetricSource::Pods,
                metric,
                target,
                rate_window: 60.0,
            }];
            return Ok(Policy {
                summary: format!(
                    "AIBrix HPA: {} at {} per replica, {min}..{max} replicas, default behaviour",
                    metric.describe(),
                    number(target)
                ),
                notes,
                min,
                max: Some(max),
                spec: Spec::Hpa {
                    metrics,
                    behavior: HpaBehavior::default(),
                },
            });
        }
        other => {
            return Err(strategy_field.error(format!(
                "{other:?}: the strategies simulated are KPA, APA and HPA"
            )));
        }
    };
    let config = config(&root.get("metadata"), algorithm, &mut notes)?;
    let summary = format!(
        "AIBrix {strategy}: {} at {} per replica, {min}..{max} replicas, windows {} s / {} s, up {} / down {} per pass, tolerance {} / {}, scale-down cooldown {} s",
        metric.describe(),
        number(target),
        number(config.stable_window_seconds),
        number(config.panic_window_seconds),
        number(config.max_scale_up_rate),
        number(config.max_scale_down_rate),
        number(config.up_tolerance),
        number(config.down_tolerance),
        number(config.scale_down_cooldown_seconds),
    );
    Ok(Policy {
        summary,
        notes,
        min,
        max: Some(max),
        spec: Spec::Aibrix {
            algorithm,
            metric,
            target,
            config,
        },
    })
}

/// The scaling context from the annotations (labels where an annotation is absent).
fn config(
    metadata: &Field,
    algorithm: AibrixAlgorithm,
    notes: &mut Vec<String>,
) -> Result<AibrixConfig, PeerFileError> {
    let annotations = metadata.get("annotations");
    let labels = metadata.get("labels");
    let (a, l) = (annotations.strings()?, labels.strings()?);
    let field = |key: &str| {
        let full = format!("{PREFIX}{key}");
        if a.contains_key(&full) || !l.contains_key(&full) {
            annotations.get(&full)
        } else {
            labels.get(&full)
        }
    };
    for key in a.keys().chain(l.keys()) {
        let legacy = key.starts_with("kpa.autoscaling.aibrix.ai/")
            || (key.starts_with("apa.autoscaling.aibrix.ai/")
                && key != "apa.autoscaling.aibrix.ai/window");
        if legacy {
            notes.push(format!(
                "{key} is ignored: current AIBrix reads {PREFIX}... keys (a scale-down delay is {PREFIX}scale-down-cooldown-window), so its default applies"
            ));
        }
    }
    let mut config = AibrixConfig::default();
    let number = |key: &str| field(key).opt_number();
    if let Some(v) = number("max-scale-up-rate")? {
        config.max_scale_up_rate = v;
    }
    if let Some(v) = number("max-scale-down-rate")? {
        config.max_scale_down_rate = v;
    }
    if let Some(v) = number("scale-up-tolerance")? {
        config.up_tolerance = v;
    }
    if let Some(v) = number("scale-down-tolerance")? {
        config.down_tolerance = v;
    }
    if let Some(v) = number("panic-threshold")? {
        config.panic_threshold = v;
    }
    if let Some(s) = field("scale-up-cooldown-window").opt_seconds()? {
        config.scale_up_cooldown_seconds = s;
    }
    if let Some(s) = field("scale-down-cooldown-window").opt_seconds()? {
        config.scale_down_cooldown_seconds = s;
    }
    if algorithm == AibrixAlgorithm::Apa {
        let window = annotations.get("apa.autoscaling.aibrix.ai/window");
        if let Some(s) = window.opt_seconds()? {
            if s < 1.0 {
                return Err(window.error(format!("{s} s must be at least 1 s")));
            }
            config.stable_window_seconds = s;
        }
    }
    Ok(config)
}
