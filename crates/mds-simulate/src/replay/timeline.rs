//! The replay timeline (JSON Lines, docs/REPLAY.md): reading each line into typed entries,
//! refusing anything a recording cannot mean (times out of range, negative readings, role
//! names and states the target does not have) with the line, the field and the rule.

use std::collections::{BTreeMap, BTreeSet};

use mds_api::status::SignalState;
use mds_api::suggest::{and_list, closest, or_list};
use mds_signals::RoleObservation;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ReplayError;

/// The latest `t`: ten years of seconds. Far beyond any recording, and far inside the
/// calendar, so every pass's time and every deadline derived from it exist.
pub const MAX_T_SECONDS: f64 = 315_360_000.0;
/// The most replicas a role can have in a replay: the largest maxReplicas admission allows.
pub const MAX_REPLICAS: i64 = 1024;
/// The states a retirement of the target passes through.
pub const RETIREMENT_STATES: [&str; 8] = [
    "Admitted",
    "Disqualified",
    "Withdrawing",
    "Draining",
    "Deleting",
    "Settling",
    "Completed",
    "Aborted",
];

/// One line of a timeline.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineEntry {
    /// The line of the timeline file (set by [`parse_timeline`]).
    #[serde(skip)]
    pub line: usize,
    /// Seconds from the start.
    pub t: f64,
    #[serde(default)]
    pub roles: BTreeMap<String, ObservedRole>,
    #[serde(default)]
    pub target: Option<TargetChange>,
    /// A user's edit of the scaler's spec before this pass: a JSON merge patch (RFC 7386) onto
    /// `spec`, admitted as the webhook would admit it, moving the generation.
    #[serde(default)]
    pub scaler: Option<Value>,
    /// The operator restarts before this pass: a new process with only what the cluster holds.
    #[serde(default)]
    pub restart: bool,
}

/// A role's observation with the status's field names; an absent field is a missing signal.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedRole {
    pub ready_replicas: Option<u32>,
    pub sampled_replicas: Option<u32>,
    pub signal_state: Option<SignalState>,
    pub prompt_tokens_per_second: Option<f64>,
    pub generation_tokens_per_second: Option<f64>,
    pub running_requests: Option<f64>,
    pub waiting_requests: Option<f64>,
    pub kv_cache_usage: Option<f64>,
    pub ttft_milliseconds: Option<f64>,
    pub itl_milliseconds: Option<f64>,
    /// Observations behind the p95 TTFT and ITL (not status fields): absent means enough, so
    /// a recording without them replays as before (D32).
    pub ttft_observations: Option<f64>,
    pub itl_observations: Option<f64>,
}

impl ObservedRole {
    /// The readings with their field names, present or not.
    fn readings(&self) -> [(&'static str, Option<f64>, &'static str); 7] {
        [
            (
                "promptTokensPerSecond",
                self.prompt_tokens_per_second,
                " tok/s",
            ),
            (
                "generationTokensPerSecond",
                self.generation_tokens_per_second,
                " tok/s",
            ),
            ("runningRequests", self.running_requests, ""),
            ("waitingRequests", self.waiting_requests, ""),
            ("kvCacheUsage", self.kv_cache_usage, ""),
            ("ttftMilliseconds", self.ttft_milliseconds, " ms"),
            ("itlMilliseconds", self.itl_milliseconds, " ms"),
        ]
    }

    /// A one-line summary: only the signals present.
    pub(super) fn summary(&self) -> String {
        let mut parts = vec![format!("ready {}", self.ready_replicas.unwrap_or(0))];
        let short = [
            "prompt",
            "generation",
            "running",
            "waiting",
            "kv",
            "ttft",
            "itl",
        ];
        for ((_, value, unit), name) in self.readings().into_iter().zip(short) {
            if let Some(v) = value {
                parts.push(format!("{name} {v}{unit}"));
            }
        }
        for (name, count) in [
            ("ttft", self.ttft_observations),
            ("itl", self.itl_observations),
        ] {
            if let Some(n) = count {
                parts.push(format!("{name} from {n} observations"));
            }
        }
        if let Some(state) = self.signal_state {
            parts.push(format!("{state:?}"));
        }
        parts.join(", ")
    }

    pub(super) fn observation(&self) -> RoleObservation {
        let ready = self.ready_replicas.unwrap_or(0);
        let sampled = self.sampled_replicas.unwrap_or(ready);
        let any_reading = self.readings().iter().any(|(_, v, _)| v.is_some());
        RoleObservation {
            ready_replicas: ready,
            sampled_replicas: sampled,
            coverage_complete: ready > 0 && sampled >= ready,
            signal_state: self.signal_state.unwrap_or(if any_reading {
                SignalState::Fresh
            } else {
                SignalState::Missing
            }),
            prompt_tokens_per_second: self.prompt_tokens_per_second,
            generation_tokens_per_second: self.generation_tokens_per_second,
            running_requests: self.running_requests,
            waiting_requests: self.waiting_requests,
            kv_cache_usage: self.kv_cache_usage,
            ttft_milliseconds: self.ttft_milliseconds,
            itl_milliseconds: self.itl_milliseconds,
            ttft_observations: self.ttft_observations,
            itl_observations: self.itl_observations,
            prompt_paths: vec![],
        }
    }
}

/// What changed on the target at this time.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetChange {
    /// An external edit of replica counts.
    pub replicas: Option<BTreeMap<String, i32>>,
    /// Ordinals not admitted yet, per role (replaces the previous list of that role).
    pub unadmitted: Option<BTreeMap<String, Vec<i32>>>,
    /// Ordinals whose Pods stay behind Terminating (on a lost node, say) with no Workload,
    /// per role (replaces the previous list of that role).
    pub terminating: Option<BTreeMap<String, Vec<i32>>>,
    /// A retirement in progress (`{role, ordinal, state, reason}`), or `null` when it is gone.
    #[serde(default, deserialize_with = "present")]
    pub retirement: Option<Option<RetirementChange>>,
    /// Someone's edit of a role's engine arguments (`spec.roles[].extraArgs`), per role
    /// (replaces the role's list): a change of how the role is served.
    #[serde(rename = "extraArgs")]
    pub extra_args: Option<BTreeMap<String, Vec<String>>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetirementChange {
    pub role: String,
    pub ordinal: i32,
    pub state: String,
    /// GPUStack's free-text reason.
    pub reason: Option<String>,
}

/// Tells a present `null` (Some(None)) from an absent field (None).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A problem on one line: `timeline line N: FIELD: MESSAGE`.
fn at(line: usize, field: &str, message: impl std::fmt::Display) -> ReplayError {
    if field.is_empty() {
        ReplayError(format!("timeline line {line}: {message}"))
    } else {
        ReplayError(format!("timeline line {line}: {field}: {message}"))
    }
}

/// Parses a JSON Lines timeline; an error names the line, the field and the rule.
pub fn parse_timeline(text: &str) -> Result<Vec<TimelineEntry>, ReplayError> {
    let mut entries: Vec<TimelineEntry> = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let line = i + 1;
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| at(line, "", format!("not a JSON object: {e}")))?;
        let mut entry: TimelineEntry =
            serde_path_to_error::deserialize(&value).map_err(|e| type_problem(line, &value, &e))?;
        entry.line = line;
        check_values(&entry)?;
        if let Some(prev) = entries.last()
            && entry.t <= prev.t
        {
            return Err(at(
                line,
                "t",
                format!(
                    "{} does not come after {} (line {}); times increase line by line",
                    entry.t, prev.t, prev.line
                ),
            ));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// A serde error as `FIELD: what was found is not what is allowed`.
fn type_problem(
    line: usize,
    value: &Value,
    error: &serde_path_to_error::Error<serde_json::Error>,
) -> ReplayError {
    let mut path: Vec<String> = Vec::new();
    for segment in error.path().iter() {
        match segment {
            serde_path_to_error::Segment::Map { key } => path.push(key.clone()),
            serde_path_to_error::Segment::Seq { index } => path.push(index.to_string()),
            _ => {}
        }
    }
    let message = error.inner().to_string();
    let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    if message.starts_with("unknown field") {
        // The path ends at the unknown name; the rest of serde's message lists the known ones.
        let (name, known) = quoted.split_first().map_or(("", &[][..]), |(n, k)| (*n, k));
        let hint = closest(name, known.iter().copied())
            .map(|near| format!("did you mean {near}? "))
            .unwrap_or_default();
        let parent = path.len().saturating_sub(1);
        return at(
            line,
            &field_name(&path[..parent]),
            format!(
                "{name:?} is not a field here; {hint}the fields are {}",
                and_list(known)
            ),
        );
    }
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next())
    {
        path.push(field.to_string());
        return at(
            line,
            &field_name(&path),
            format!("is required; give {}", expected(&path)),
        );
    }
    let found = path
        .iter()
        .try_fold(value, |v, key| match v {
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => v.get(key),
        })
        .map_or_else(|| "the value".to_string(), describe);
    let wanted = expected(&path);
    let whole = matches!(found.parse::<f64>(), Ok(n) if n.fract() == 0.0);
    let mut text = if whole && wanted.contains("a whole number") {
        format!("{found} is out of range; allowed is {wanted}")
    } else {
        format!("{found} is not {wanted}")
    };
    if message.starts_with("unknown variant")
        && let Some((name, known)) = quoted.split_first()
        && let Some(near) = closest(name, known.iter().copied())
    {
        text.push_str(&format!("; did you mean {near}?"));
    }
    at(line, &field_name(&path), text)
}

/// `roles.prefill.readyReplicas`, `target.unadmitted.decode[0]`.
fn field_name(path: &[String]) -> String {
    let mut out = String::new();
    for (i, key) in path.iter().enumerate() {
        let in_list = i > 0 && path[i - 1] != "roles" && key.parse::<usize>().is_ok();
        if in_list {
            out.push_str(&format!("[{key}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(key);
        }
    }
    out
}

/// What the field at `path` accepts, in words.
fn expected(path: &[String]) -> String {
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    match keys.as_slice() {
        [] => "an object with t, roles and target".into(),
        ["t"] => format!("a number of seconds from 0 to {MAX_T_SECONDS}"),
        ["roles"] => "an object from role name to its observation".into(),
        ["roles", _] => "an object of readings (readyReplicas, promptTokensPerSecond, ...)".into(),
        [.., "readyReplicas" | "sampledReplicas"] => {
            format!("a whole number from 0 to {MAX_REPLICAS}")
        }
        [.., "signalState"] => "one of Fresh, Idle, Missing or Stale".into(),
        [.., "kvCacheUsage"] => "a number from 0 to 1".into(),
        ["roles", _, _] => "a number, 0 or more".into(),
        ["target"] => {
            "an object with replicas, unadmitted, terminating, retirement or extraArgs".into()
        }
        [
            "target",
            "replicas" | "unadmitted" | "terminating" | "extraArgs",
        ] => "an object keyed by role name".into(),
        ["target", "replicas", _] => format!("a whole number from 0 to {MAX_REPLICAS}"),
        ["target", "unadmitted" | "terminating", _] => "a list of ordinals".into(),
        ["target", "unadmitted" | "terminating", _, _] | ["target", "retirement", "ordinal"] => {
            format!("an ordinal: a whole number from 0 to {}", MAX_REPLICAS - 1)
        }
        ["target", "extraArgs", _] => "a list of engine arguments".into(),
        ["target", "extraArgs", _, _] => "an engine argument (a string)".into(),
        ["target", "retirement"] => "an object {role, ordinal, state, reason}, or null".into(),
        ["target", "retirement", "role"] => "a role name".into(),
        ["target", "retirement", "reason"] => "GPUStack's reason text (a string)".into(),
        ["target", "retirement", "state"] => format!("one of {}", or_list(&RETIREMENT_STATES)),
        _ => "a value of the documented form".into(),
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Ranges the types alone do not enforce.
fn check_values(entry: &TimelineEntry) -> Result<(), ReplayError> {
    let line = entry.line;
    if !(0.0..=MAX_T_SECONDS).contains(&entry.t) {
        return Err(at(
            line,
            "t",
            format!(
                "{} is out of range; allowed is 0 to {MAX_T_SECONDS} seconds from the start of the recording (t counts seconds, not milliseconds or a Unix time)",
                entry.t
            ),
        ));
    }
    for (role, observed) in &entry.roles {
        let counts = [
            ("readyReplicas", observed.ready_replicas),
            ("sampledReplicas", observed.sampled_replicas),
        ];
        for (field, count) in counts {
            if let Some(n) = count
                && i64::from(n) > MAX_REPLICAS
            {
                let path = format!("roles.{role}.{field}");
                return Err(at(
                    line,
                    &path,
                    format!("{n} is out of range; allowed is 0 to {MAX_REPLICAS}"),
                ));
            }
        }
        let observations = [
            ("ttftObservations", observed.ttft_observations),
            ("itlObservations", observed.itl_observations),
        ];
        for (field, count) in observations {
            if let Some(n) = count.filter(|n| *n < 0.0) {
                let path = format!("roles.{role}.{field}");
                return Err(at(
                    line,
                    &path,
                    format!("{n} is negative; a count of observations is 0 or more"),
                ));
            }
        }
        for (field, value, _) in observed.readings() {
            let Some(v) = value else { continue };
            let path = format!("roles.{role}.{field}");
            if field == "kvCacheUsage" && !(0.0..=1.0).contains(&v) {
                return Err(at(
                    line,
                    &path,
                    format!("{v} is out of range; a usage fraction lies from 0 to 1"),
                ));
            }
            if v < 0.0 {
                return Err(at(
                    line,
                    &path,
                    format!(
                        "{v} is negative; a reading is 0 or more (leave the field out for a missing reading)"
                    ),
                ));
            }
        }
    }
    let Some(change) = &entry.target else {
        return Ok(());
    };
    for (role, count) in change.replicas.iter().flatten() {
        if !(0..=MAX_REPLICAS).contains(&i64::from(*count)) {
            let path = format!("target.replicas.{role}");
            return Err(at(
                line,
                &path,
                format!("{count} is out of range; allowed is 0 to {MAX_REPLICAS}"),
            ));
        }
    }
    let ordinal_ok = |o: i32| (0..MAX_REPLICAS).contains(&i64::from(o));
    let lists = [
        ("unadmitted", &change.unadmitted),
        ("terminating", &change.terminating),
    ];
    for (field, role, ordinals) in lists
        .iter()
        .flat_map(|(f, m)| m.iter().flatten().map(move |(r, o)| (f, r, o)))
    {
        if let Some((i, o)) = ordinals.iter().enumerate().find(|(_, o)| !ordinal_ok(**o)) {
            let path = format!("target.{field}.{role}[{i}]");
            return Err(at(
                line,
                &path,
                format!(
                    "{o} is out of range; an ordinal is 0 to {}",
                    MAX_REPLICAS - 1
                ),
            ));
        }
    }
    if let Some(Some(retirement)) = &change.retirement {
        if !ordinal_ok(retirement.ordinal) {
            let message = format!(
                "{} is out of range; an ordinal is 0 to {}",
                retirement.ordinal,
                MAX_REPLICAS - 1
            );
            return Err(at(line, "target.retirement.ordinal", message));
        }
        if !RETIREMENT_STATES.contains(&retirement.state.as_str()) {
            let hint = closest(&retirement.state, RETIREMENT_STATES)
                .map(|near| format!("did you mean {near}? "))
                .unwrap_or_default();
            let message = format!(
                "{:?} is not a retirement state; {hint}use one of {}",
                retirement.state,
                or_list(&RETIREMENT_STATES)
            );
            return Err(at(line, "target.retirement.state", message));
        }
    }
    Ok(())
}

/// Every role a timeline names must be a role of the target: a misspelt role would otherwise
/// read as a role with no observation.
pub fn check_roles(
    timeline: &[TimelineEntry],
    roles: &BTreeSet<String>,
) -> Result<(), ReplayError> {
    let known: Vec<&str> = roles.iter().map(String::as_str).collect();
    let unknown = |line: usize, field: &str, name: &str| {
        let hint = closest(name, known.iter().copied())
            .map(|near| format!("did you mean {near}? "))
            .unwrap_or_default();
        at(
            line,
            field,
            format!(
                "{name:?} is not a role of the target; {hint}its roles are {}",
                and_list(&known)
            ),
        )
    };
    for entry in timeline {
        for name in entry.roles.keys() {
            if !roles.contains(name) {
                return Err(unknown(entry.line, "roles", name));
            }
        }
        let Some(change) = &entry.target else {
            continue;
        };
        for (field, names) in [
            (
                "target.replicas",
                change
                    .replicas
                    .as_ref()
                    .map(|m| m.keys().collect::<Vec<_>>()),
            ),
            (
                "target.unadmitted",
                change.unadmitted.as_ref().map(|m| m.keys().collect()),
            ),
            (
                "target.terminating",
                change.terminating.as_ref().map(|m| m.keys().collect()),
            ),
            (
                "target.extraArgs",
                change.extra_args.as_ref().map(|m| m.keys().collect()),
            ),
        ] {
            if let Some(name) = names.into_iter().flatten().find(|n| !roles.contains(*n)) {
                return Err(unknown(entry.line, field, name));
            }
        }
        if let Some(Some(r)) = &change.retirement
            && !roles.contains(&r.role)
        {
            return Err(unknown(entry.line, "target.retirement.role", &r.role));
        }
    }
    Ok(())
}
