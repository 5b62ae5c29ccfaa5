//! The series found: the selector that looks for them, their grouping into deployments, and the
//! refusals that say what was found.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::LISTED;
use super::catalog::{Engine, looked_for};
use super::range::{Range, time_text};
use super::selector::{Matcher, selector_text};

/// The discovery selector as messages show it: the names summed up, the matchers as given.
pub(super) fn discovery_text(matchers: &[Matcher]) -> String {
    let mut inner = vec![format!(
        "__name__=~<the {} series looked for>",
        looked_for().len()
    )];
    inner.extend(matchers.iter().map(Matcher::promql));
    format!("{{{}}}", inner.join(","))
}

/// The `match[]` selector of the series looked for, with the user's matchers.
pub(super) fn discovery_selector(matchers: &[Matcher]) -> String {
    let names: Vec<String> = looked_for().iter().map(|n| regex_quote(n)).collect();
    let mut inner = vec![format!("__name__=~\"{}\"", names.join("|"))];
    inner.extend(matchers.iter().map(Matcher::promql));
    format!("{{{}}}", inner.join(","))
}

/// A literal for a PromQL regex inside a double-quoted string (names hold `:` and `_`, which
/// need nothing; anything else is escaped).
fn regex_quote(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            out.push(c);
        } else {
            out.push_str("\\\\");
            out.push(c);
        }
    }
    out
}

/// A series' labels.
pub(super) type Labels = BTreeMap<String, String>;

/// Series of one engine, one model and one namespace: one deployment's, as far as the labels
/// tell.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Group {
    pub engine: Engine,
    pub model: String,
    pub namespace: String,
}

impl Group {
    pub(super) fn text(&self) -> String {
        let mut out = format!("model_name={:?}", self.model);
        if !self.namespace.is_empty() {
            let _ = write!(out, ",namespace={:?}", self.namespace);
        }
        out
    }

    /// The `--match` value that picks this group.
    fn flag(&self) -> String {
        let quote = |v: &str| {
            if v.is_empty() || v.contains([',', '"', '\'', ' ']) {
                format!("{v:?}")
            } else {
                v.to_string()
            }
        };
        let mut out = format!("model_name={}", quote(&self.model));
        if !self.namespace.is_empty() {
            let _ = write!(out, ",namespace={}", quote(&self.namespace));
        }
        out
    }
}

/// What the series the selector matches are.
#[derive(Debug, PartialEq)]
pub(super) enum Discovery {
    /// None of the series looked for.
    Nothing,
    /// One deployment's series, by name.
    One {
        group: Group,
        names: BTreeSet<String>,
    },
    /// Series of several: each with how many series it has.
    Several(Vec<(Group, usize)>),
}

/// Groups the series found by engine, `model_name` and `namespace`.
pub(super) fn discover(found: &[Labels]) -> Discovery {
    let mut groups: BTreeMap<Group, (usize, BTreeSet<String>)> = BTreeMap::new();
    let known = looked_for();
    for labels in found {
        let Some(name) = labels.get("__name__") else {
            continue;
        };
        let Some(engine) = Engine::of(name).filter(|_| known.contains(&name.as_str())) else {
            continue;
        };
        let group = Group {
            engine,
            model: labels.get("model_name").cloned().unwrap_or_default(),
            namespace: labels.get("namespace").cloned().unwrap_or_default(),
        };
        let entry = groups.entry(group).or_default();
        entry.0 += 1;
        entry.1.insert(name.clone());
    }
    match groups.len() {
        0 => Discovery::Nothing,
        1 => {
            let (group, (_, names)) = groups.into_iter().next().expect("one group");
            Discovery::One { group, names }
        }
        _ => Discovery::Several(groups.into_iter().map(|(g, (n, _))| (g, n)).collect()),
    }
}

/// The refusal of a selector that matches several deployments' series.
pub(super) fn several_text(
    matchers: &[Matcher],
    range: &Range,
    groups: &[(Group, usize)],
) -> String {
    let mut listed: Vec<String> = groups
        .iter()
        .take(LISTED)
        .map(|(g, n)| format!("{} ({}, {n} series)", g.text(), g.engine.name()))
        .collect();
    if groups.len() > LISTED {
        listed.push(format!("and {} more", groups.len() - LISTED));
    }
    let example = groups.first().map(|(g, _)| g.flag()).unwrap_or_default();
    let engines: BTreeSet<Engine> = groups.iter().map(|(g, _)| g.engine).collect();
    let same_labels = groups
        .windows(2)
        .all(|w| w[0].0.model == w[1].0.model && w[0].0.namespace == w[1].0.namespace);
    let how = if engines.len() > 1 && same_labels {
        "the same model_name and namespace serve both vLLM and SGLang series: add a label that tells them apart (job, service or pod) to --match".to_string()
    } else {
        format!(
            "their loads are not one deployment's: add the labels of one to --match, such as --match '{example}'"
        )
    };
    format!(
        "{}: the engine series of {} deployments match between {} and {}: {}; {how}",
        selector_flag(matchers),
        groups.len(),
        time_text(range.start),
        time_text(range.end()),
        listed.join(", ")
    )
}

/// How messages name the selector: `--match '{...}'`, or its absence.
fn selector_flag(matchers: &[Matcher]) -> String {
    if matchers.is_empty() {
        "--from-prometheus without --match".into()
    } else {
        format!("--match '{}'", selector_text(matchers))
    }
}

/// The refusal of a selector that matches none of the series looked for; `everywhere` is what
/// the same series names give without the selector over the range.
pub(super) fn nothing_text(matchers: &[Matcher], range: &Range, everywhere: &[Labels]) -> String {
    let mut out = format!(
        "{}: no vLLM or SGLang series match between {} and {} (looked for {})",
        selector_flag(matchers),
        time_text(range.start),
        time_text(range.end()),
        looked_for().join(", ")
    );
    let groups = match discover(everywhere) {
        Discovery::Nothing => {
            out.push_str(
                "; this Prometheus has none of these series in that range: is it the one that scrapes your engines, and is the range right?",
            );
            return out;
        }
        Discovery::One { group, .. } => vec![group],
        Discovery::Several(groups) => groups.into_iter().map(|(g, _)| g).collect(),
    };
    let mut listed: Vec<String> = groups
        .iter()
        .take(LISTED)
        .map(|g| format!("{} ({})", g.text(), g.engine.name()))
        .collect();
    if groups.len() > LISTED {
        listed.push(format!("and {} more", groups.len() - LISTED));
    }
    let _ = write!(out, "; this Prometheus has them for {}", listed.join(", "));
    let labels: BTreeSet<&str> = everywhere
        .iter()
        .flat_map(|l| l.keys())
        .map(String::as_str)
        .filter(|k| *k != "__name__")
        .collect();
    let missing: Vec<&str> = matchers
        .iter()
        .map(|m| m.label.as_str())
        .filter(|l| !labels.contains(l))
        .collect();
    if !missing.is_empty() {
        let _ = write!(
            out,
            "; no such series has the label {}: their labels are {}",
            missing.join(", "),
            labels.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(first) = groups.first() {
        let _ = write!(out, "; pick one with --match '{}'", first.flag());
    }
    out
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
