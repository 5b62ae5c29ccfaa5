//! An `autoscaling/v2` HorizontalPodAutoscaler, and a KEDA `ScaledObject` (an HPA on an
//! External metric KEDA serves from its triggers, with the HPA `behavior` under
//! `spec.advanced`).

use super::fields::{Field, PeerFileError};
use super::names::{self, number};
use super::{FileMetric, Policy, Spec, floor_of};
use crate::peers::hpa::{
    Aggregate, HpaBehavior, MetricSource, ScalingPolicy, ScalingRules, SelectPolicy,
};

/// The window the Prometheus adapter's usual rule takes a counter's rate over.
const ADAPTER_RATE_SECONDS: f64 = 120.0;

pub(super) fn read_hpa(root: &Field, api: &str) -> Result<Policy, PeerFileError> {
    if api == "autoscaling/v1" {
        return Err(root.get("apiVersion").error(
            "autoscaling/v1 scales on CPU only, which the simulator does not model; write the HPA as autoscaling/v2 with a Pods or External metric on the engine's series",
        ));
    }
    let spec = root.get("spec");
    let mut notes = Vec::new();
    let min_field = spec.get("minReplicas");
    let min = floor_of(min_field.opt_int()?.unwrap_or(1), &min_field, &mut notes);
    let max = positive(&spec.get("maxReplicas"), None)?;
    let items = spec.get("metrics").items()?;
    if items.is_empty() {
        return Err(spec.get("metrics").error(
            "is empty: an HPA without metrics scales on CPU at 80 %, which the simulator does not model; name a Pods or External metric on the engine's series",
        ));
    }
    let mut metrics = Vec::new();
    for item in &items {
        metrics.push(hpa_metric(item, &mut notes)?);
    }
    let behavior = behavior(&spec.get("behavior"))?;
    Ok(Policy {
        summary: summary("HPA", &metrics, &behavior, min, max),
        notes,
        min,
        max: Some(max),
        spec: Spec::Hpa { metrics, behavior },
    })
}

fn hpa_metric(item: &Field, notes: &mut Vec<String>) -> Result<FileMetric, PeerFileError> {
    let kind = item.get("type").text()?;
    let key = match kind.as_str() {
        "Pods" => "pods",
        "External" => "external",
        "Object" => "object",
        "Resource" | "ContainerResource" => {
            let resource = item
                .get(if kind == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                })
                .get("name")
                .text()
                .unwrap_or_else(|_| "cpu".into());
            return Err(item.get("type").error(format!(
                "{kind} ({resource}): the simulator models the engines' series, not CPU or memory (an LLM server's CPU says little of its load); use a Pods metric such as vllm:num_requests_waiting"
            )));
        }
        other => {
            return Err(item.get("type").error(format!(
                "{other:?} is not a metric type; autoscaling/v2 has Pods, External, Object, Resource and ContainerResource"
            )));
        }
    };
    let block = item.get(key);
    let name_field = block.get("metric").get("name");
    let name = name_field.text()?;
    let metric = names::pod_metric(&name).ok_or_else(|| {
        let keda = name.starts_with('s') && name.contains('-') && kind == "External";
        let hint = if keda {
            " (KEDA names its metrics s0-..., so this HPA is KEDA's: give --peer the ScaledObject)"
        } else {
            ""
        };
        name_field.error(format!("{}{hint}", names::unknown(&name)))
    })?;
    let target = block.get("target");
    let target_type = target.get("type").text()?;
    let (source, value_field) = match (kind.as_str(), target_type.as_str()) {
        ("Pods", "AverageValue") => (MetricSource::Pods, "averageValue"),
        ("Pods", _) => {
            return Err(target.get("type").error(format!(
                "{target_type:?}: a Pods metric's target is an AverageValue"
            )));
        }
        (_, "AverageValue" | "Value") => {
            notes.push(format!(
                "{}: an {kind} metric is one number for the workload; read as the sum over the ready replicas",
                name_field.path()
            ));
            (
                MetricSource::External {
                    aggregate: Aggregate::Sum,
                    average_value: target_type == "AverageValue",
                },
                if target_type == "Value" {
                    "value"
                } else {
                    "averageValue"
                },
            )
        }
        _ => {
            return Err(target.get("type").error(format!(
                "{target_type:?}: an {kind} metric's target is a Value or an AverageValue"
            )));
        }
    };
    if metric.is_rate() {
        notes.push(format!(
            "{}: a counter, read as its per-second rate over 2 minutes (the Prometheus adapter's usual rate(...[2m]) rule)",
            name_field.path()
        ));
    }
    Ok(FileMetric {
        source,
        metric,
        target: target.get(value_field).quantity()?,
        rate_window: ADAPTER_RATE_SECONDS,
    })
}

pub(super) fn read_keda(root: &Field) -> Result<Policy, PeerFileError> {
    let spec = root.get("spec");
    let mut notes = Vec::new();
    let min_field = spec.get("minReplicaCount");
    let min = floor_of(min_field.opt_int()?.unwrap_or(0), &min_field, &mut notes);
    let max = positive(&spec.get("maxReplicaCount"), Some(100))?;
    let advanced = spec.get("advanced");
    if advanced.get("scalingModifiers").present() {
        return Err(advanced
            .get("scalingModifiers")
            .error("a formula over the triggers is not simulated; give each trigger on its own"));
    }
    let triggers = spec.get("triggers").items()?;
    if triggers.is_empty() {
        return Err(spec
            .get("triggers")
            .error("is empty: a ScaledObject scales on its triggers"));
    }
    let mut metrics = Vec::new();
    for trigger in &triggers {
        let kind = trigger.get("type").text()?;
        if kind != "prometheus" {
            let why = if kind == "cpu" || kind == "memory" {
                "the simulator models the engines' series, not CPU or memory"
            } else {
                "the simulator reads prometheus triggers over the engines' series"
            };
            return Err(trigger
                .get("type")
                .error(format!("a {kind:?} trigger is not simulated: {why}")));
        }
        let metadata = trigger.get("metadata");
        let query_field = metadata.get("query");
        let query = names::read_query(&query_field.text()?).map_err(|e| query_field.error(e))?;
        if let Some(note) = query.note {
            notes.push(format!("{}: {note}", query_field.path()));
        }
        let metric_type = trigger.get("metricType").opt_text()?;
        let average_value = match metric_type.as_deref() {
            None | Some("AverageValue") => true,
            Some("Value") => false,
            Some(other) => {
                return Err(trigger.get("metricType").error(format!(
                    "{other:?}: a prometheus trigger's metricType is AverageValue (the default) or Value"
                )));
            }
        };
        metrics.push(FileMetric {
            source: MetricSource::External {
                aggregate: query.aggregate,
                average_value,
            },
            metric: query.metric,
            target: metadata.get("threshold").quantity()?,
            rate_window: query.window,
        });
    }
    let behavior = behavior(
        &advanced
            .get("horizontalPodAutoscalerConfig")
            .get("behavior"),
    )?;
    Ok(Policy {
        summary: summary("KEDA (its HPA)", &metrics, &behavior, min, max),
        notes,
        min,
        max: Some(max),
        spec: Spec::Hpa { metrics, behavior },
    })
}

/// A count of at least one (`default` when missing; `None`: required).
fn positive(field: &Field, default: Option<i64>) -> Result<i32, PeerFileError> {
    let n = match (field.opt_int()?, default) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => return Err(field.error("is missing")),
    };
    if n < 1 {
        return Err(field.error(format!("{n} must be at least 1")));
    }
    Ok(n.min(i64::from(i32::MAX)) as i32)
}

/// An HPA `behavior`: each direction's missing parts keep upstream's defaults.
fn behavior(field: &Field) -> Result<HpaBehavior, PeerFileError> {
    let defaults = HpaBehavior::default();
    Ok(HpaBehavior {
        scale_up: rules(&field.get("scaleUp"), defaults.scale_up)?,
        scale_down: rules(&field.get("scaleDown"), defaults.scale_down)?,
        ..defaults
    })
}

fn rules(field: &Field, default: ScalingRules) -> Result<ScalingRules, PeerFileError> {
    if !field.present() {
        return Ok(default);
    }
    let window = field.get("stabilizationWindowSeconds");
    let stabilization_seconds = match window.opt_int()? {
        Some(s) if (0..=3600).contains(&s) => s as f64,
        Some(s) => return Err(window.error(format!("{s} must be 0 to 3600 seconds"))),
        None => default.stabilization_seconds,
    };
    let mut policies = Vec::new();
    for p in field.get("policies").items()? {
        let value = p.get("value");
        let value = match value.opt_int()? {
            Some(v) if v > 0 => v.min(i64::from(i32::MAX)) as i32,
            Some(v) => return Err(value.error(format!("{v} must be above zero"))),
            None => return Err(value.error("is missing")),
        };
        let period = p.get("periodSeconds");
        let period_seconds = match period.opt_int()? {
            Some(s) if (1..=1800).contains(&s) => s as f64,
            Some(s) => return Err(period.error(format!("{s} must be 1 to 1800 seconds"))),
            None => return Err(period.error("is missing")),
        };
        policies.push(match p.get("type").text()?.as_str() {
            "Pods" => ScalingPolicy::Pods {
                value,
                period_seconds,
            },
            "Percent" => ScalingPolicy::Percent {
                value,
                period_seconds,
            },
            other => {
                return Err(p
                    .get("type")
                    .error(format!("{other:?}: a policy's type is Pods or Percent")));
            }
        });
    }
    if policies.is_empty() {
        policies = default.policies;
    }
    let select = field.get("selectPolicy");
    let select = match select.opt_text()?.as_deref() {
        None | Some("Max") => SelectPolicy::Max,
        Some("Min") => SelectPolicy::Min,
        Some("Disabled") => {
            policies.clear();
            SelectPolicy::Max
        }
        Some(other) => {
            return Err(select.error(format!("{other:?}: selectPolicy is Max, Min or Disabled")));
        }
    };
    Ok(ScalingRules {
        stabilization_seconds,
        select,
        policies,
    })
}

/// `HPA: running + waiting requests at 8 per replica, 2..10 replicas, ...`.
fn summary(
    what: &str,
    metrics: &[FileMetric],
    behavior: &HpaBehavior,
    min: i32,
    max: i32,
) -> String {
    let each: Vec<String> = metrics
        .iter()
        .map(|m| {
            let per = match m.source {
                MetricSource::Pods
                | MetricSource::External {
                    average_value: true,
                    ..
                } => " per replica",
                MetricSource::External { .. } => " in all",
            };
            let rate = if m.metric.is_rate() {
                format!(" (rate over {} s)", number(m.rate_window))
            } else {
                String::new()
            };
            format!("{} at {}{per}{rate}", m.metric.describe(), number(m.target))
        })
        .collect();
    let direction = |r: &ScalingRules| {
        if r.policies.is_empty() {
            "disabled".to_string()
        } else {
            format!("window {} s", number(r.stabilization_seconds))
        }
    };
    format!(
        "{what}: {}, {min}..{max} replicas, scale-up {}, scale-down {}",
        each.join(" or "),
        direction(&behavior.scale_up),
        direction(&behavior.scale_down)
    )
}
