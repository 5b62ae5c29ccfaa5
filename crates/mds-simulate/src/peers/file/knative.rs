//! A Knative Service, Configuration or Revision: the KPA as its `autoscaling.knative.dev/`
//! annotations configure it (on a Service or Configuration, those of `spec.template`).

use super::fields::{Field, PeerFileError};
use super::names::number;
use super::{Policy, Spec, floor_of};
use crate::peers::knative::KnativeConfig;

const PREFIX: &str = "autoscaling.knative.dev/";

pub(super) fn read(root: &Field, kind: &str) -> Result<Policy, PeerFileError> {
    let template = if kind == "Revision" {
        root.clone()
    } else {
        root.get("spec").get("template")
    };
    let annotations_field = template.get("metadata").get("annotations");
    let annotations = annotations_field.strings()?;
    let at = |key: &str| annotations_field.get(&format!("{PREFIX}{key}"));
    let get = |key: &str| annotations.get(&format!("{PREFIX}{key}"));
    let mut notes = Vec::new();
    if let Some(class) = get("class")
        && !class.starts_with("kpa.")
    {
        return Err(at("class").error(format!(
            "{class:?}: only the KPA class (kpa.autoscaling.knative.dev) is simulated; Knative's hpa class scales on CPU or memory"
        )));
    }
    let rps = match get("metric").map(String::as_str) {
        None | Some("concurrency") => false,
        Some("rps") => true,
        Some(other) => {
            return Err(at("metric").error(format!(
                "{other:?}: the KPA scales on concurrency or rps (cpu and memory belong to the hpa class)"
            )));
        }
    };
    let container_concurrency = template
        .get("spec")
        .get("containerConcurrency")
        .opt_int()?
        .filter(|c| *c > 0)
        .map(|c| c as f64);
    let annotated = at("target").opt_quantity()?;
    // Knative's resolution: the annotation, capped by a hard containerConcurrency limit; else
    // that limit; else the defaults (100 concurrent requests, 200 requests/s).
    let target = match (annotated, container_concurrency, rps) {
        (Some(t), Some(c), false) => t.min(c),
        (Some(t), _, _) => t,
        (None, Some(c), false) => c,
        (None, _, rps) => {
            let default = if rps { 200.0 } else { 100.0 };
            notes.push(format!(
                "{}target is not set: Knative's default {} {} per replica applies",
                PREFIX,
                default,
                if rps {
                    "requests/s"
                } else {
                    "concurrent requests"
                }
            ));
            default
        }
    };
    let defaults = KnativeConfig::default();
    let percent = |key: &str, lo: f64, hi: f64| -> Result<Option<f64>, PeerFileError> {
        match at(key).opt_number()? {
            Some(v) if (lo..=hi).contains(&v) => Ok(Some(v)),
            Some(v) => Err(at(key).error(format!("{v} must be {lo} to {hi}"))),
            None => Ok(None),
        }
    };
    let window = match at("window").opt_seconds()? {
        Some(w) if (6.0..=3600.0).contains(&w) => w,
        Some(w) => return Err(at("window").error(format!("{w} s must be 6 s to 1 h"))),
        None => defaults.stable_window_seconds,
    };
    let config = KnativeConfig {
        stable_window_seconds: window,
        target_utilization: percent("target-utilization-percentage", 1.0, 100.0)?
            .map_or(defaults.target_utilization, |p| p / 100.0),
        panic_window_percentage: percent("panic-window-percentage", 1.0, 100.0)?
            .unwrap_or(defaults.panic_window_percentage),
        panic_threshold: percent("panic-threshold-percentage", 110.0, 1000.0)?
            .map_or(defaults.panic_threshold, |p| p / 100.0),
        scale_down_delay_seconds: at("scale-down-delay")
            .opt_seconds()?
            .unwrap_or(defaults.scale_down_delay_seconds),
        ..defaults
    };
    let bound = |new: &str, old: &str| {
        if annotations.contains_key(&format!("{PREFIX}{new}")) {
            at(new)
        } else {
            at(old)
        }
    };
    let min_field = bound("min-scale", "minScale");
    let min = floor_of(min_field.opt_int()?.unwrap_or(0), &min_field, &mut notes);
    let max_field = bound("max-scale", "maxScale");
    let max = match max_field.opt_int()? {
        None | Some(0) => None,
        Some(n) if n > 0 => Some((n.min(i64::from(i32::MAX)) as i32).max(min)),
        Some(n) => return Err(max_field.error(format!("{n} must be 0 (no limit) or more"))),
    };
    if max.is_none() {
        notes.push(format!(
            "{} is not set (no limit): the scaler's maxReplicas bounds it",
            max_field.path()
        ));
    }
    if get("metric-aggregation-algorithm").is_some_and(|a| a != "linear") {
        notes.push(format!(
            "{PREFIX}metric-aggregation-algorithm: the weighted-exponential window is not modelled; read as Knative's default plain mean"
        ));
    }
    let unit = if rps {
        "requests/s"
    } else {
        "concurrent requests"
    };
    let summary = format!(
        "Knative KPA: {unit} at {} per replica x {} % utilization, window {} s, panic window {} %, panic at {} %, {min}..{} replicas",
        number(target),
        number(config.target_utilization * 100.0),
        number(config.stable_window_seconds),
        number(config.panic_window_percentage),
        number(config.panic_threshold * 100.0),
        max.map_or("maxReplicas".to_string(), |m| m.to_string())
    );
    Ok(Policy {
        summary,
        notes,
        min,
        max,
        spec: Spec::Knative {
            rps,
            target,
            config,
        },
    })
}
