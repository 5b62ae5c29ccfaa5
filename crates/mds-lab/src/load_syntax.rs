//! The load-profile syntax of `mds lab up --load`: one line per profile, optionally aimed at one
//! target or role.
//!
//! ```text
//! [NAMESPACE/NAME[/ROLE]=]KIND:FIELD=VALUE,...
//! constant:rps=5,prompt=512,output=128,hit=0.3
//! steps:0=2,2m=8,5m=4,prompt=1024          each rate holds from its time until the next
//! ramp:from=1,to=20,over=10m,after=1m      1 rps for a minute, then up to 20 over ten minutes
//! trace:requests.csv,bin=10s               an Azure CSV or Mooncake JSONL trace, binned
//! idle                                     no load
//! ```
//!
//! `rps` is requests per second; `prompt` and `output` are mean token lengths (default 512 and
//! 128); `hit` is the fraction of prompt tokens served from the prefix cache (default 0).
//! Times are seconds, or a number with `s`, `m` or `h`, counted from when the target appears.
//! Every error names the part it is about.

use std::path::Path;

use mds_sim::load::{items, key_values, parse_seconds};
use mds_sim::{Load, LoadProfile, Trace};

/// Which targets and roles a rule applies to; `None` matches any.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Selector {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub role: Option<String>,
}

impl Selector {
    pub fn matches(&self, namespace: &str, name: &str, role: &str) -> bool {
        let fits = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        fits(&self.namespace, namespace) && fits(&self.name, name) && fits(&self.role, role)
    }

    /// How many parts are pinned down: the more specific rule wins.
    pub fn specificity(&self) -> usize {
        [&self.namespace, &self.name, &self.role]
            .iter()
            .filter(|p| p.is_some())
            .count()
    }
}

/// A profile and the targets it is offered to.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadRule {
    pub selector: Selector,
    pub profile: LoadProfile,
}

/// Reads a trace file named in a profile; the error is a reason (the caller names the file).
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> Result<String, String>;

/// Reads a file from the file system, for [`parse_load_rule`] and [`parse_load_profile`].
pub fn read_file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

const DEFAULT_PROMPT: f64 = 512.0;
const DEFAULT_OUTPUT: f64 = 128.0;
const DEFAULT_BIN_SECONDS: f64 = 10.0;

/// `[NAMESPACE/NAME[/ROLE]=]PROFILE`. A target prefix is recognised by an `=` before the
/// profile's first `:`.
pub fn parse_load_rule(text: &str, read: ReadFile) -> Result<LoadRule, String> {
    let head = text.split(':').next().unwrap_or_default();
    let (selector, profile) = match head.split_once('=') {
        Some((target, _)) => {
            let profile = &text[target.len() + 1..];
            (parse_selector(target)?, profile)
        }
        None => (Selector::default(), text),
    };
    Ok(LoadRule {
        selector,
        profile: parse_load_profile(profile, read)?,
    })
}

fn parse_selector(text: &str) -> Result<Selector, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let bad = || {
        format!(
            "target {text:?}: write NAMESPACE/NAME or NAMESPACE/NAME/ROLE before the '=' (each \
             part a lower-case DNS label)"
        )
    };
    if !(2..=3).contains(&parts.len()) || !parts.iter().all(|p| is_dns_label(p)) {
        return Err(bad());
    }
    Ok(Selector {
        namespace: Some(parts[0].to_string()),
        name: Some(parts[1].to_string()),
        role: parts.get(2).map(|r| r.to_string()),
    })
}

fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !text.starts_with(['-', '.'])
        && !text.ends_with(['-', '.'])
}

/// One profile: `constant:…`, `steps:…`, `ramp:…`, `trace:PATH[,bin=D]` or `idle`.
pub fn parse_load_profile(text: &str, read: ReadFile) -> Result<LoadProfile, String> {
    let text = text.trim();
    let (kind, body) = text.split_once(':').unwrap_or((text, ""));
    let in_profile = |message: String| format!("load profile {text:?}: {message}");
    match kind {
        "idle" if body.is_empty() => Ok(LoadProfile::idle()),
        "constant" => constant(body).map_err(in_profile),
        "steps" => steps(body).map_err(in_profile),
        "ramp" => ramp(body).map_err(in_profile),
        "trace" => trace(body, read).map_err(in_profile),
        _ => Err(in_profile(format!(
            "{kind:?} is not a profile kind; use constant:, steps:, ramp:, trace: or idle"
        ))),
    }
}

const SHAPE_FIELDS: [&str; 3] = ["prompt", "output", "hit"];

/// The `FIELD=VALUE` list of a profile body, each field one of `allowed` (any, for `None`:
/// steps are keyed by their times) and given once.
fn fields<'a>(
    kind: &str,
    body: &'a str,
    allowed: Option<&[&str]>,
) -> Result<Vec<(&'a str, &'a str)>, String> {
    if body.trim().is_empty() {
        return Err("no fields after the ':'".into());
    }
    match allowed {
        Some(allowed) => key_values(kind, body, allowed),
        None => items(
            kind,
            body,
            "TIME=RPS for each step, and prompt, output and hit",
        ),
    }
}

/// The request shape shared by every kind: prompt, output and hit, with their defaults.
struct Shape {
    prompt: f64,
    output: f64,
    hit: f64,
}

impl Shape {
    /// Takes `prompt`, `output` and `hit` out of `pairs`; leaves the rest.
    fn take(pairs: &mut Vec<(&str, &str)>) -> Result<Shape, String> {
        let mut shape = Shape {
            prompt: DEFAULT_PROMPT,
            output: DEFAULT_OUTPUT,
            hit: 0.0,
        };
        let mut rest = Vec::new();
        for (key, value) in pairs.drain(..) {
            match key {
                "prompt" => shape.prompt = number(key, value)?,
                "output" => shape.output = number(key, value)?,
                "hit" => {
                    shape.hit = number(key, value)?;
                    if shape.hit > 1.0 {
                        return Err(format!("hit={value}: the hit fraction must lie in 0..1"));
                    }
                }
                _ => rest.push((key, value)),
            }
        }
        *pairs = rest;
        Ok(shape)
    }

    fn load(&self, rps: f64) -> Result<Load, String> {
        Load::new(rps, self.prompt, self.output, self.hit).map_err(|e| e.to_string())
    }
}

/// A finite number of at least 0.
fn number(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
        _ => Err(format!("{key}={value}: must be a number of at least 0")),
    }
}

/// Seconds: `90`, `90s`, `5m`, `1h`, `1.5m`.
fn duration(key: &str, value: &str) -> Result<f64, String> {
    parse_seconds(value).map_err(|rule| format!("{key}={value}: not a duration; {rule} (90s, 5m)"))
}

fn constant(body: &str) -> Result<LoadProfile, String> {
    let allowed = ["rps", "prompt", "output", "hit"];
    let mut pairs = fields("constant", body, Some(&allowed))?;
    let shape = Shape::take(&mut pairs)?;
    let rps = match pairs.first() {
        Some((key, value)) => number(key, value)?,
        None => return Err("rps is required (requests per second)".into()),
    };
    LoadProfile::constant(shape.load(rps)?).map_err(|e| e.to_string())
}

fn steps(body: &str) -> Result<LoadProfile, String> {
    let mut pairs = fields("steps", body, None)?;
    let shape = Shape::take(&mut pairs)?;
    let mut steps: Vec<(f64, Load)> = Vec::new();
    for (key, value) in pairs {
        let at = duration("time", key).map_err(|_| {
            format!(
                "{key:?} is neither a time (0, 90s, 2m) nor {}; write TIME=RPS for each step",
                SHAPE_FIELDS.join(", ")
            )
        })?;
        if let Some((previous, _)) = steps.last()
            && at <= *previous
        {
            return Err(format!("{key}={value}: step times must increase"));
        }
        steps.push((at, shape.load(number(key, value)?)?));
    }
    if steps.is_empty() {
        return Err("no steps; write TIME=RPS for each, such as 0=2,5m=8".into());
    }
    LoadProfile::steps(&steps).map_err(|e| e.to_string())
}

fn ramp(body: &str) -> Result<LoadProfile, String> {
    let allowed = ["from", "to", "over", "after", "prompt", "output", "hit"];
    let mut pairs = fields("ramp", body, Some(&allowed))?;
    let shape = Shape::take(&mut pairs)?;
    let (mut from, mut to, mut over, mut after) = (None, None, None, 0.0);
    for (key, value) in pairs {
        match key {
            "from" => from = Some(number(key, value)?),
            "to" => to = Some(number(key, value)?),
            "over" => over = Some(duration(key, value)?),
            "after" => after = duration(key, value)?,
            _ => {} // `fields` admits no other
        }
    }
    let from = from.ok_or("from is required (requests per second at the start)")?;
    let to = to.ok_or("to is required (requests per second at the end)")?;
    let over = over.ok_or("over is required (how long the ramp takes, such as 10m)")?;
    if over <= 0.0 {
        return Err("over must be longer than 0".into());
    }
    LoadProfile::ramp(shape.load(from)?, shape.load(to)?, after, over).map_err(|e| e.to_string())
}

fn trace(body: &str, read: ReadFile) -> Result<LoadProfile, String> {
    let mut parts = body.split(',');
    let path = parts.next().unwrap_or_default().trim();
    if path.is_empty() {
        return Err("no file; write trace:PATH".into());
    }
    let mut bin = DEFAULT_BIN_SECONDS;
    for part in parts {
        match part.trim().split_once('=') {
            Some(("bin", value)) => bin = duration("bin", value)?,
            _ => {
                return Err(format!(
                    "{part:?}: the only option of a trace is bin=DURATION"
                ));
            }
        }
    }
    if bin <= 0.0 {
        return Err("bin must be longer than 0".into());
    }
    let text = read(Path::new(path)).map_err(|e| format!("{path}: cannot read: {e}"))?;
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let parsed = if first_line.trim_start().starts_with('{') {
        Trace::parse_mooncake_jsonl(&text)
    } else {
        Trace::parse_azure_csv(&text)
    };
    let trace = parsed.map_err(|e| format!("{path}: {e}"))?;
    trace.to_profile(bin).map_err(|e| format!("{path}: {e}"))
}

#[cfg(test)]
mod tests;
