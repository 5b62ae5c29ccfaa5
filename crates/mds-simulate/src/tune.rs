//! `--suggest` beyond the capacity: a coordinate search, seeded from the cheapest capacity
//! factor, over the windows and thresholds the spec exposes (the scale-down window and step
//! policy, the scale-up window, the stable and panic windows and the panic threshold,
//! Proportional's tolerance, Predictive's horizon and noises), then the capacity again around
//! the tuned setting and each role's capacity on its own. One pass, knob by knob in a fixed
//! order: every candidate value of a knob runs side by side with the production code on the
//! same world and seed, and the cheapest that still meets the goal is kept when it saves at
//! least half a percent of GPU-hours. Candidates admission would refuse are skipped.

use serde::Serialize;
use serde_json::{Value, json};

use mds_api::ModelDeploymentScaler;

use crate::SimError;
use crate::compare::{self, Case, Contender};
use crate::run::RunReport;

/// A change must save this share of GPU-hours to be kept: below it, run-to-run texture.
const MIN_SAVING: f64 = 0.005;

/// One knob: where it sits under `spec`, and the values tried.
struct Knob {
    path: Vec<String>,
    candidates: Vec<Value>,
}

fn knob(path: &[&str], candidates: Vec<Value>) -> Knob {
    Knob {
        path: path.iter().map(|s| s.to_string()).collect(),
        candidates,
    }
}

/// The knobs of `spec`'s algorithm, in search order: pacing first (it shapes every
/// algorithm), then the algorithm's own.
fn knobs(spec: &Value) -> Vec<Knob> {
    let mut out = vec![
        knob(
            &["behavior", "scaleDown", "stabilizationWindowSeconds"],
            vec![json!(60), json!(150), json!(300), json!(600)],
        ),
        knob(
            &["behavior", "scaleDown", "stepPolicy"],
            vec![
                json!({"type": "Pods", "value": 1}),
                json!({"type": "Pods", "value": 2}),
                json!({"type": "Percent", "value": 50}),
            ],
        ),
        knob(
            &["behavior", "scaleUp", "stabilizationWindowSeconds"],
            vec![json!(0), json!(60)],
        ),
    ];
    let kind = spec["algorithm"]["type"]
        .as_str()
        .unwrap_or("TokenThroughput");
    let throughput = |base: &[&'static str], out: &mut Vec<Knob>| {
        let at = |field: &'static str| [base, &[field]].concat();
        out.push(knob(
            &at("stableWindowSeconds"),
            vec![json!(60), json!(120), json!(180), json!(300)],
        ));
        out.push(knob(&at("panicWindowSeconds"), vec![json!(30), json!(60)]));
        out.push(knob(
            &at("panicThreshold"),
            vec![json!("1.5"), json!("2"), json!("3")],
        ));
    };
    match kind {
        "Proportional" => out.push(knob(
            &["algorithm", "proportional", "tolerance"],
            vec![json!("0.05"), json!("0.1"), json!("0.2")],
        )),
        "Predictive" => {
            out.push(knob(
                &["algorithm", "predictive", "horizonSeconds"],
                vec![json!(120), json!(300), json!(600)],
            ));
            out.push(knob(
                &["algorithm", "predictive", "qLevel"],
                vec![json!("0.25"), json!("1"), json!("4")],
            ));
            out.push(knob(
                &["algorithm", "predictive", "measurementNoise"],
                vec![json!("2.5"), json!("10"), json!("40")],
            ));
            throughput(&["algorithm", "predictive", "tokenThroughput"], &mut out);
        }
        _ => throughput(&["algorithm", "tokenThroughput"], &mut out),
    }
    out
}

/// A knob's dotted name under `spec`.
fn dotted(path: &[String]) -> String {
    path.join(".")
}

fn get<'a>(spec: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(spec, |at, key| &at[key.as_str()])
}

/// A value as the report prints it.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "default".into(),
        Value::String(s) => s.clone(),
        Value::Object(m) => match (m.get("type"), m.get("value")) {
            (Some(t), Some(n)) => format!("{} {n}", t.as_str().unwrap_or("?")),
            _ => v.to_string(),
        },
        other => other.to_string(),
    }
}

/// One accepted change and what it bought.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// The field under `spec`, dotted.
    pub field: String,
    pub from: String,
    pub to: String,
    pub gpu_hours_before: f64,
    pub gpu_hours_after: f64,
    pub attainment: f64,
}

/// The tuned setting.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tuned {
    /// The changes kept, in the order the search made them.
    pub steps: Vec<Step>,
    pub gpu_hours: f64,
    pub attainment: f64,
    /// Settings run by the search.
    pub trials: usize,
    /// The tuned scaler.
    #[serde(skip)]
    pub scaler: ModelDeploymentScaler,
    /// The run of the tuned scaler (`None` when no change was kept).
    #[serde(skip)]
    pub report: Option<RunReport>,
}

impl Tuned {
    /// The changes kept, in words (`field -> value, ...`).
    pub fn changes(&self) -> String {
        let changes: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} {}", s.field, s.to))
            .collect();
        changes.join(", ")
    }
}

/// What one run of a candidate gave.
struct Outcome {
    gpu_hours: f64,
    attainment: f64,
    report: Option<RunReport>,
}

/// Runs each candidate spec (`None`: admission refuses it) and returns their outcomes.
fn run_specs(
    case: &Case,
    base: &ModelDeploymentScaler,
    specs: &[Value],
    threads: usize,
) -> Result<Vec<Option<Outcome>>, SimError> {
    let mut contenders = Vec::new();
    let mut slots = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let mut doc = serde_json::to_value(base)
            .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
        doc["spec"] = spec.clone();
        let Ok(scaler) = serde_json::from_value::<ModelDeploymentScaler>(doc) else {
            continue;
        };
        let report = mds_api::validation::validate_scaler(&scaler, None, Some(case.target));
        if !report.errors.is_empty() {
            continue;
        }
        contenders.push(Contender::Mds {
            name: format!("tune{i}"),
            scaler: Box::new(scaler),
        });
        slots.push(i);
    }
    let reports: Vec<RunReport> = compare::run_all(case, &contenders, threads, &|_| {})?;
    let mut out: Vec<Option<Outcome>> = specs.iter().map(|_| None).collect();
    for (slot, report) in slots.into_iter().zip(reports) {
        if !report.violations.is_empty() {
            continue;
        }
        out[slot] = report.summary.totals.attainment.map(|a| Outcome {
            gpu_hours: report.summary.totals.gpu_hours,
            attainment: a,
            report: Some(report),
        });
    }
    Ok(out)
}

/// The coordinate search from `start`, which meets `goal` at `gpu_hours` and `attainment`
/// (module documentation).
pub fn tune(
    case: &Case,
    start: &ModelDeploymentScaler,
    (gpu_hours, attainment): (f64, f64),
    goal: f64,
    ceiling: &crate::suggest::Ceiling,
    threads: usize,
) -> Result<Tuned, SimError> {
    let mut spec = serde_json::to_value(&start.spec)
        .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
    let mut best = Outcome {
        gpu_hours,
        attainment,
        report: None,
    };
    let mut steps = Vec::new();
    let mut trials = 0;
    // One candidate set at a time: the cheapest that meets the goal and saves enough wins.
    let mut try_set = |spec: &mut Value,
                       best: &mut Outcome,
                       (field, from): (String, String),
                       candidates: Vec<(Value, String)>|
     -> Result<(), SimError> {
        // A capacity above the knee is never suggested (module `suggest`).
        let candidates: Vec<(Value, String)> = candidates
            .into_iter()
            .filter(|(s, _)| !crate::suggest::above_knee(&s["algorithm"], ceiling))
            .collect();
        let specs: Vec<Value> = candidates.iter().map(|(s, _)| s.clone()).collect();
        let outcomes = run_specs(case, start, &specs, threads)?;
        trials += outcomes.iter().flatten().count();
        let winner = outcomes
            .into_iter()
            .zip(candidates)
            .filter_map(|(o, c)| Some((o?, c)))
            .filter(|(o, _)| o.attainment >= goal)
            .filter(|(o, _)| o.gpu_hours < best.gpu_hours * (1.0 - MIN_SAVING))
            .min_by(|a, b| {
                a.0.gpu_hours
                    .total_cmp(&b.0.gpu_hours)
                    .then(b.0.attainment.total_cmp(&a.0.attainment))
            });
        if let Some((outcome, (candidate, to))) = winner {
            steps.push(Step {
                field,
                from,
                to,
                gpu_hours_before: best.gpu_hours,
                gpu_hours_after: outcome.gpu_hours,
                attainment: outcome.attainment,
            });
            *spec = candidate;
            *best = outcome;
        }
        Ok(())
    };
    for k in knobs(&spec) {
        let current = get(&spec, &k.path).clone();
        let candidates: Vec<(Value, String)> = k
            .candidates
            .iter()
            .filter(|v| **v != current)
            .map(|v| {
                let mut s = spec.clone();
                crate::suggest::put(&mut s, &k.path, v.clone());
                (s, shown(v))
            })
            .collect();
        let name = (dotted(&k.path), shown(&current));
        try_set(&mut spec, &mut best, name, candidates)?;
    }
    // The capacity again around the tuned setting, then each role's on its own.
    let fields = crate::suggest::target_fields(&spec["algorithm"]);
    let mut rounds: Vec<Option<usize>> = vec![None];
    if fields.len() > 1 {
        rounds.extend((0..fields.len()).map(Some));
    }
    for only in rounds {
        let fields = crate::suggest::target_fields(&spec["algorithm"]);
        let name = match only {
            None => ("every role's capacity".to_string(), "x1".to_string()),
            Some(i) => (
                format!("algorithm.{}", dotted(&fields[i].0)),
                crate::suggest::format_quantity(fields[i].1),
            ),
        };
        let candidates = [0.85, 1.18]
            .iter()
            .map(|factor| {
                let mut s = spec.clone();
                let mut to = format!("x{factor}");
                for (i, (path, value)) in fields.iter().enumerate() {
                    if only.is_none_or(|o| o == i) {
                        let v = value * factor;
                        crate::suggest::set(&mut s["algorithm"], path, v);
                        if only.is_some() {
                            to = crate::suggest::format_quantity(v);
                        }
                    }
                }
                (s, to)
            })
            .collect();
        try_set(&mut spec, &mut best, name, candidates)?;
    }
    let mut doc = serde_json::to_value(start)
        .map_err(|e| SimError::Input(format!("the scaler does not serialise: {e}")))?;
    doc["spec"] = spec;
    let scaler = serde_json::from_value(doc)
        .map_err(|e| SimError::Input(format!("the tuned scaler does not parse: {e}")))?;
    Ok(Tuned {
        steps,
        gpu_hours: best.gpu_hours,
        attainment: best.attainment,
        trials,
        scaler,
        report: best.report,
    })
}
