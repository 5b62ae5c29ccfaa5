//! Admission validation as pure functions.
//!
//! [`validate`] takes the new spec, the old one on update and the target when it exists, and
//! returns every error and warning at once. Each finding names the JSON path of the field
//! (`spec.ratios[1].target`) and says in one sentence what is wrong and what is allowed.
//! Target-dependent rules are skipped while the target is absent: a scaler may precede it.

mod algorithm;
mod names;
mod ratios;
mod spec_rules;
mod target_rules;

use std::fmt;

use crate::quantity::{Decimal, Quantity};
use crate::spec::{ModelDeploymentScaler, ModelDeploymentScalerSpec};
use crate::target::ModelDeployment;

pub use names::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};

/// One finding: the JSON path of the field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The outcome of admission: errors refuse the scaler, warnings admit it with a note.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub errors: Vec<Finding>,
    pub warnings: Vec<Finding>,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Finding {
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Finding {
            path: path.into(),
            message: message.into(),
        });
    }

    /// Checks an optional integer against an inclusive range.
    pub(crate) fn check_range(&mut self, path: &str, value: Option<i32>, min: i32, max: i32) {
        if let Some(v) = value
            && !(min..=max).contains(&v)
        {
            self.error(
                path,
                format!("{v} is out of range; allowed is {min} to {max}"),
            );
        }
    }

    /// Parses an optional quantity that must be positive; reports and returns `None` when it
    /// is not.
    pub(crate) fn positive_quantity(
        &mut self,
        path: &str,
        value: Option<&Quantity>,
    ) -> Option<Decimal> {
        let quantity = value?;
        match quantity.value() {
            Err(e) => {
                self.error(path, format!("the quantity {e}"));
                None
            }
            Ok(v) if !v.is_positive() => {
                self.error(
                    path,
                    format!("\"{quantity}\" must be a positive quantity, such as \"1\" or \"0.5\""),
                );
                None
            }
            Ok(v) => Some(v),
        }
    }
}

/// Whether the target-dependent rules ran, as the verdict line says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetCheck<'a> {
    /// Checked against the ModelDeployment of this name.
    Checked(&'a str),
    /// No target was given (`mds validate` without `--target`).
    NotGiven,
    /// The target was looked up and does not exist (yet): a scaler may precede it.
    NotFound(&'a str),
    /// The target could not be read; the reason says why.
    Unavailable { name: &'a str, reason: &'a str },
}

impl fmt::Display for TargetCheck<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetCheck::Checked(name) => write!(f, "checked against ModelDeployment {name:?}"),
            TargetCheck::NotGiven => f.write_str("no target given: target-dependent rules skipped"),
            TargetCheck::NotFound(name) => write!(
                f,
                "ModelDeployment {name:?} not found: target-dependent rules skipped"
            ),
            TargetCheck::Unavailable { name, reason } => write!(
                f,
                "ModelDeployment {name:?} could not be read ({reason}): target-dependent rules skipped"
            ),
        }
    }
}

impl Report {
    /// The one text form of a verdict, shared by `mds validate` (which prints it after the
    /// document's label) and the admission webhook (which returns it as the refusal):
    /// `ModelDeploymentScaler NAME: valid|invalid (TARGET)`, then one indented line per error
    /// and, with `warnings`, per warning (`warning: PATH: MESSAGE`).
    pub fn render(&self, name: &str, target: &TargetCheck<'_>, warnings: bool) -> String {
        let verdict = if self.is_valid() { "valid" } else { "invalid" };
        let mut text = format!("ModelDeploymentScaler {name}: {verdict} ({target})");
        self.write_findings(&mut text, warnings);
        text
    }

    /// The finding lines under a verdict: `\n  path: message` for each error, then
    /// `\n  warning: path: message` for each warning when asked.
    pub fn write_findings(&self, text: &mut String, warnings: bool) {
        for error in &self.errors {
            text.push_str(&format!("\n  {error}"));
        }
        if warnings {
            for warning in &self.warnings {
                text.push_str(&format!("\n  warning: {warning}"));
            }
        }
    }
}

/// Validates a scaler spec (after defaulting, though undefaulted specs are judged the same).
/// `old` is the stored spec on update; `target` the ModelDeployment when it exists.
pub fn validate(
    spec: &ModelDeploymentScalerSpec,
    old: Option<&ModelDeploymentScalerSpec>,
    target: Option<&ModelDeployment>,
) -> Report {
    let mut report = Report::default();
    spec_rules::check(spec, old, &mut report);
    let kinds = target.map(target_rules::role_kinds);
    algorithm::check(spec, kinds.as_ref(), &mut report);
    ratios::check(spec, &mut report);
    if let Some(target) = target {
        target_rules::check(spec, target, &mut report);
    }
    report
}

/// Validates a whole scaler object: its name, then its spec (see [`validate`]).
pub fn validate_scaler(
    scaler: &ModelDeploymentScaler,
    old: Option<&ModelDeploymentScaler>,
    target: Option<&ModelDeployment>,
) -> Report {
    let mut report = validate(&scaler.spec, old.map(|o| &o.spec), target);
    let meta = &scaler.metadata;
    if meta.name.as_deref().unwrap_or("").is_empty() && meta.generate_name.is_none() {
        report.errors.insert(
            0,
            Finding {
                path: "metadata.name".into(),
                message: "is required; name the scaler".into(),
            },
        );
    }
    report
}
