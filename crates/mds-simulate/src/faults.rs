//! Faults on cue (`mds simulate --fault KIND:key=value,...`): the chaos a controller meets,
//! injected where it would meet it. API answers (409, 503, a failing-closed webhook) come from
//! the in-memory cluster the worker writes through; scrape timeouts, garbage pages and
//! counters that restart come from the pages the worker scrapes, so the production parser
//! and signal code see them; a frozen quota and aborted retirements come from the world; an
//! operator restart or a change of leader replaces the worker by a new one that has only
//! what the cluster's status holds. Every draw is keyed on `--seed`, the fault's place in the
//! list, the moment and the object, so a run with faults repeats byte for byte.
//!
//! A run reports each fault applied: its window and how often it struck ([`AppliedFault`]).

mod inject;
mod pages;

use mds_sim::load::parse_seconds;
use serde::Serialize;

pub(crate) use inject::Injector;
pub(crate) use pages::FaultyPages;

/// What kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The worker's writes answered HTTP 409 (someone else moved the object).
    ApiConflict,
    /// The worker's writes answered HTTP 503.
    ApiUnavailable,
    /// The admission webhook is down: writes it intercepts fail as a `failurePolicy: Fail`
    /// webhook that cannot be called fails them (HTTP 500, "failed calling webhook").
    WebhookOutage,
    /// Some Pods' pages do not answer in time.
    ScrapeTimeout,
    /// Some Pods' pages are not an exposition a parser can read.
    ScrapeGarbage,
    /// Some Pods' counters restart from zero, once, with no sign of it on the Pod.
    CounterReset,
    /// The quota of the target's instance types is frozen at what they hold: growth is never
    /// admitted.
    QuotaNeverAdmits,
    /// The stand-in operator aborts retirements.
    RetirementAbort,
    /// The operator restarts: a new worker with only what status holds.
    OperatorRestart,
    /// The leader dies and another replica takes the lease once it expires.
    LeaderChange,
}

impl FaultKind {
    pub const ALL: [FaultKind; 10] = [
        FaultKind::ApiConflict,
        FaultKind::ApiUnavailable,
        FaultKind::WebhookOutage,
        FaultKind::ScrapeTimeout,
        FaultKind::ScrapeGarbage,
        FaultKind::CounterReset,
        FaultKind::QuotaNeverAdmits,
        FaultKind::RetirementAbort,
        FaultKind::OperatorRestart,
        FaultKind::LeaderChange,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::ApiConflict => "api-conflict",
            FaultKind::ApiUnavailable => "api-unavailable",
            FaultKind::WebhookOutage => "webhook-outage",
            FaultKind::ScrapeTimeout => "scrape-timeout",
            FaultKind::ScrapeGarbage => "scrape-garbage",
            FaultKind::CounterReset => "counter-reset",
            FaultKind::QuotaNeverAdmits => "quota-never-admits",
            FaultKind::RetirementAbort => "retirement-abort",
            FaultKind::OperatorRestart => "operator-restart",
            FaultKind::LeaderChange => "leader-change",
        }
    }

    fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The keys the kind takes.
    fn keys(self) -> &'static [&'static str] {
        match self {
            FaultKind::ApiConflict | FaultKind::ApiUnavailable => {
                &["from", "until", "rate", "writes"]
            }
            FaultKind::WebhookOutage => &["from", "until"],
            FaultKind::ScrapeTimeout | FaultKind::ScrapeGarbage => {
                &["from", "until", "rate", "ordinals", "role"]
            }
            FaultKind::CounterReset => &["at", "rate", "ordinals", "role"],
            FaultKind::QuotaNeverAdmits => &["from", "until", "type"],
            FaultKind::RetirementAbort => &["from", "until", "rate"],
            FaultKind::OperatorRestart => &["at", "down"],
            FaultKind::LeaderChange => &["at", "lease"],
        }
    }

    /// What [`AppliedFault::events`] counts.
    pub fn unit(self) -> &'static str {
        match self {
            FaultKind::ApiConflict | FaultKind::ApiUnavailable | FaultKind::WebhookOutage => {
                "writes refused"
            }
            FaultKind::ScrapeTimeout => "pages timed out",
            FaultKind::ScrapeGarbage => "garbage pages",
            FaultKind::CounterReset => "Pods reset",
            FaultKind::QuotaNeverAdmits => "cohorts rolled back",
            FaultKind::RetirementAbort => "retirements aborted",
            FaultKind::OperatorRestart => "restarts",
            FaultKind::LeaderChange => "leader changes",
        }
    }

    /// Faults that strike once, at `at`.
    fn at_once(self) -> bool {
        matches!(
            self,
            FaultKind::CounterReset | FaultKind::OperatorRestart | FaultKind::LeaderChange
        )
    }
}

/// The seconds the controller's lease lasts by default (`mds controller
/// --lease-duration-seconds`): a dead leader is replaced within it.
pub const DEFAULT_LEASE_SECONDS: f64 = 15.0;

/// One `--fault`, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// As given.
    pub text: String,
    /// Seconds since the start: the window's start, or `at`.
    pub from: f64,
    /// The window's end (`None`: the end of the run; always `None` for faults at once).
    pub until: Option<f64>,
    /// The share of operations struck (writes, pages, retirements, Pods), 1 unless given.
    pub rate: f64,
    /// Pages of these ordinals only (scrape faults and counter resets).
    pub ordinals: Option<Vec<u32>>,
    /// Pages of this role only.
    pub role: Option<String>,
    /// The instance type whose quota freezes (`None`: every type the target's roles use).
    pub instance_type: Option<String>,
    /// API faults: target patches are struck.
    pub target_writes: bool,
    /// API faults: status writes are struck.
    pub status_writes: bool,
    /// Seconds from `at` to the new worker's term: the restart's downtime, or the lease a new
    /// leader waits out.
    pub gap: f64,
}

impl FaultSpec {
    /// Parses `KIND:key=value,...`; the error is the rule broken.
    pub fn parse(text: &str) -> Result<FaultSpec, String> {
        let text = text.trim();
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let name = name.trim();
        let Some(kind) = FaultKind::parse(name) else {
            let known: Vec<&str> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
            return Err(format!(
                "unknown fault {name:?}; known faults: {}",
                known.join(", ")
            ));
        };
        let allowed = kind.keys();
        let given = mds_sim::load::key_values(name, rest, allowed)?;
        let get = |key: &str| given.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let time = |key: &str| -> Result<Option<f64>, String> {
            get(key)
                .map(|v| parse_seconds(v).map_err(|rule| format!("{name}: {key}={v}: {rule}")))
                .transpose()
        };
        let mut spec = FaultSpec {
            kind,
            text: text.to_string(),
            from: 0.0,
            until: None,
            rate: 1.0,
            ordinals: None,
            role: get("role").map(String::from),
            instance_type: get("type").map(String::from),
            target_writes: true,
            status_writes: true,
            gap: 0.0,
        };
        if kind.at_once() {
            spec.from = time("at")?.ok_or_else(|| format!("{name}: at=TIME is required"))?;
        } else {
            spec.from = time("from")?.unwrap_or(0.0);
            spec.until = time("until")?;
            if let Some(until) = spec.until
                && until <= spec.from
            {
                return Err(format!(
                    "{name}: until ({until} s) must come after from ({} s)",
                    spec.from
                ));
            }
        }
        if let Some(v) = get("rate") {
            spec.rate = v
                .parse::<f64>()
                .ok()
                .filter(|r| *r > 0.0 && *r <= 1.0)
                .ok_or_else(|| {
                    format!("{name}: rate={v}: it must be a share above 0 and at most 1")
                })?;
        }
        if let Some(v) = get("ordinals") {
            let list: Option<Vec<u32>> = v.split('+').map(|o| o.trim().parse().ok()).collect();
            spec.ordinals = Some(list.ok_or_else(|| {
                format!("{name}: ordinals={v}: it must be whole numbers joined by + (0+2)")
            })?);
        }
        if let Some(v) = get("writes") {
            let mut target = false;
            let mut status = false;
            for w in v.split('+').map(str::trim) {
                match w {
                    "target" => target = true,
                    "status" => status = true,
                    _ => {
                        return Err(format!(
                            "{name}: writes={v}: it must be target, status or target+status"
                        ));
                    }
                }
            }
            (spec.target_writes, spec.status_writes) = (target, status);
        }
        spec.gap = match kind {
            FaultKind::OperatorRestart => time("down")?.unwrap_or(0.0),
            FaultKind::LeaderChange => time("lease")?.unwrap_or(DEFAULT_LEASE_SECONDS),
            _ => 0.0,
        };
        Ok(spec)
    }

    /// Whether the fault's window holds `t` seconds.
    pub(crate) fn holds(&self, t: f64) -> bool {
        t >= self.from && self.until.is_none_or(|u| t < u)
    }

    /// Whether the kind strikes a share of operations (and so has a rate to show).
    fn rated(&self) -> bool {
        self.kind.keys().contains(&"rate")
    }
}

/// Faults whose window begins after the run's last second are refused: they would never
/// strike.
pub fn check_windows(faults: &[FaultSpec], end_seconds: f64) -> Result<(), String> {
    for f in faults {
        if f.from >= end_seconds {
            return Err(format!(
                "--fault {:?}: it starts at {} s, but the run ends at {:.0} s",
                f.text, f.from, end_seconds
            ));
        }
    }
    Ok(())
}

/// A fault as the run applied it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppliedFault {
    pub kind: FaultKind,
    /// The `--fault` text.
    pub spec: String,
    /// Seconds since the start. For a restart or a change of leader, `from` is when the old
    /// worker stopped and `until` the new worker's first pass: the time no operator ran.
    pub from: f64,
    pub until: f64,
    /// The share of operations struck, for kinds that take one.
    pub rate: Option<f64>,
    /// How often it struck, counted in `unit`.
    pub events: u64,
    pub unit: &'static str,
    /// What else is worth knowing (where it struck, what status held at a restart).
    pub note: Option<String>,
}

impl AppliedFault {
    /// One line for the summary: `api-conflict 10 % 600-1200 s: 17 writes refused`.
    pub fn describe(&self) -> String {
        let rate = match self.rate {
            Some(r) if r < 1.0 => format!(" {} %", round(r * 100.0)),
            _ => String::new(),
        };
        let window = if self.kind.at_once() && self.kind != FaultKind::CounterReset {
            format!(
                "at {} s, first pass of the new worker {} s",
                round(self.from),
                round(self.until)
            )
        } else if self.kind == FaultKind::CounterReset {
            format!("at {} s", round(self.from))
        } else {
            format!("{}-{} s", round(self.from), round(self.until))
        };
        let note = self
            .note
            .as_ref()
            .map_or(String::new(), |n| format!(" ({n})"));
        format!(
            "{}{rate} {window}: {} {}{note}",
            self.kind.as_str(),
            self.events,
            self.unit
        )
    }
}

/// A number as a short text: whole when it is, else to one decimal.
fn round(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{:.0}", v)
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_its_window_rate_and_keys() {
        let f = FaultSpec::parse("api-conflict:rate=0.1,from=10m,until=1200").unwrap();
        assert_eq!(
            (f.kind, f.from, f.until, f.rate),
            (FaultKind::ApiConflict, 600.0, Some(1200.0), 0.1)
        );
        assert!(f.target_writes && f.status_writes);
        let f = FaultSpec::parse("api-unavailable:writes=status").unwrap();
        assert!(!f.target_writes && f.status_writes);
        let f = FaultSpec::parse("scrape-timeout:ordinals=0+2,role=server").unwrap();
        assert_eq!(f.ordinals, Some(vec![0, 2]));
        let f = FaultSpec::parse("leader-change:at=15m").unwrap();
        assert_eq!((f.from, f.gap), (900.0, DEFAULT_LEASE_SECONDS));
        let f = FaultSpec::parse("operator-restart:at=300,down=20s").unwrap();
        assert_eq!((f.from, f.gap), (300.0, 20.0));
    }

    #[test]
    fn a_bad_spec_names_the_rule() {
        for (text, says) in [
            (
                "chaos",
                "unknown fault \"chaos\"; known faults: api-conflict",
            ),
            (
                "api-conflict:rate=2",
                "rate=2: it must be a share above 0 and at most 1",
            ),
            ("api-conflict:rate", "\"rate\" is not key=value"),
            (
                "webhook-outage:rate=0.5",
                "unknown key \"rate\"; webhook-outage takes from, until",
            ),
            ("operator-restart", "at=TIME is required"),
            (
                "webhook-outage:from=20m,until=10m",
                "until (600 s) must come after from (1200 s)",
            ),
            ("scrape-garbage:from=x", "from=x: it must be a time"),
            (
                "scrape-timeout:ordinals=a",
                "it must be whole numbers joined by +",
            ),
            (
                "api-conflict:writes=pods",
                "it must be target, status or target+status",
            ),
            ("api-conflict:from=1,from=2", "from is given twice"),
        ] {
            let e = FaultSpec::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_fault_is_described_in_one_line() {
        let f = AppliedFault {
            kind: FaultKind::ApiConflict,
            spec: "api-conflict:rate=0.1,from=600,until=1200".into(),
            from: 600.0,
            until: 1200.0,
            rate: Some(0.1),
            events: 17,
            unit: FaultKind::ApiConflict.unit(),
            note: None,
        };
        assert_eq!(
            f.describe(),
            "api-conflict 10 % 600-1200 s: 17 writes refused"
        );
    }
}
