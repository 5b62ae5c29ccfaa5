//! Request-level serving: a deployment offered a stream of requests routes each one, at its
//! arrival, to a routed instance of its entry role, whose [`RequestEngine`] runs it step by step.
//!
//! - A target with a `Prefill` and a `Decode` role serves disaggregated: the prefill instance
//!   computes the prompt and its first token, the KV travels for `prompt × kv_bytes_per_token /
//!   link_bytes_per_second`, then a decode instance (routed at that moment) generates the
//!   output. The request's TTFT is the decode instance's first token, measured from the
//!   original arrival.
//! - Otherwise the first role doing both (`Server`, or a kind the model does not know) serves.
//! - With no routed instance at a request's arrival (or its hand-off) the router refuses it:
//!   the request is never served. A request whose engine stops (restart, deletion after an
//!   expired drain) is lost.
//!
//! Every request ends as one [`ServedRequest`], taken with
//! [`World::take_served`](crate::World::take_served).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use mds_api::target::RoleKind;

use super::deployment::{Deployment, RoleInstances};
use crate::engine::gaps::GapLog;
use crate::engine::request::{FinishedRequest, Outcome, RequestEngine};
use crate::load::Trace;

/// How a target's router picks an instance for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Router {
    /// In turn, by ordinal.
    RoundRobin,
    /// The instance with the fewest requests running and queued (ties: the lowest ordinal).
    #[default]
    LeastOutstanding,
    /// The instance whose prefix cache holds the longest leading run of the prompt's blocks
    /// (ties: least outstanding).
    PrefixAware,
}

impl Router {
    pub const NAMES: &'static [&'static str] =
        &["round-robin", "least-outstanding", "prefix-aware"];

    pub fn parse(name: &str) -> Option<Router> {
        match name {
            "round-robin" => Some(Router::RoundRobin),
            "least-outstanding" => Some(Router::LeastOutstanding),
            "prefix-aware" => Some(Router::PrefixAware),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Router::RoundRobin => "round-robin",
            Router::LeastOutstanding => "least-outstanding",
            Router::PrefixAware => "prefix-aware",
        }
    }
}

/// How requests are offered: the router, and the KV hand-off of disaggregated serving.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestServing {
    pub router: Router,
    /// KV bytes per prompt token (2 × layers × KV heads × head size × bytes per value).
    pub kv_bytes_per_token: f64,
    /// The prefill-to-decode link.
    pub link_bytes_per_second: f64,
    /// The ITL objective the engines count each request's gaps against.
    pub itl_objective_seconds: f64,
}

impl Default for RequestServing {
    /// Llama-3-8B's 128 KiB per token over one 400 Gb/s RDMA link (50 GB/s).
    fn default() -> Self {
        RequestServing {
            router: Router::default(),
            kv_bytes_per_token: 131_072.0,
            link_bytes_per_second: 50e9,
            itl_objective_seconds: crate::engine::request::DEFAULT_ITL_OBJECTIVE_SECONDS,
        }
    }
}

impl RequestServing {
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("kv_bytes_per_token", self.kv_bytes_per_token),
            ("link_bytes_per_second", self.link_bytes_per_second),
            ("itl_objective_seconds", self.itl_objective_seconds),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("{field} is {value}; it must be a positive number"));
            }
        }
        Ok(())
    }

    fn transfer_seconds(&self, prompt_tokens: u64) -> f64 {
        prompt_tokens as f64 * self.kv_bytes_per_token / self.link_bytes_per_second
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServedOutcome {
    /// Every output token generated.
    Finished,
    /// The engine refused it (an empty prompt, or longer than the model's context).
    Rejected,
    /// No instance was routed when it arrived (or when its KV was ready for decode).
    Unrouted,
    /// Its engine stopped with it inside (restart, or deletion after an expired drain).
    Lost,
}

impl ServedOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ServedOutcome::Finished => "finished",
            ServedOutcome::Rejected => "rejected",
            ServedOutcome::Unrouted => "unrouted",
            ServedOutcome::Lost => "lost",
        }
    }
}

/// One offered request's life as its user saw it, in seconds on the requests' time axis (0 is
/// when they were offered).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServedRequest {
    pub id: u64,
    pub outcome: ServedOutcome,
    pub arrival: f64,
    /// When it finished, was refused or was lost.
    pub end: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    pub ttft_seconds: Option<f64>,
    /// Mean gap between output tokens after the first.
    pub itl_seconds: Option<f64>,
    /// Gaps between its output tokens, and how many were over the ITL objective.
    pub gaps: u64,
    pub slow_gaps: u64,
    pub preemptions: u32,
}

#[derive(Clone, Debug, PartialEq)]
struct InFlight {
    arrival: f64,
    prompt: u64,
    output: u64,
}

#[derive(Clone, Debug, PartialEq)]
struct Handoff {
    at: f64,
    id: u64,
    prompt: u64,
    output: u64,
}

/// A deployment's offered requests and what became of them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RequestLoad {
    trace: Arc<Trace>,
    next: usize,
    origin: Timestamp,
    serving: RequestServing,
    round_robin: BTreeMap<String, u64>,
    in_flight: BTreeMap<u64, InFlight>,
    handoffs: Vec<Handoff>,
    served: Vec<ServedRequest>,
    /// Gaps between output tokens the engines observed, not yet taken.
    gaps: GapLog,
}

impl RequestLoad {
    pub fn new(trace: Arc<Trace>, origin: Timestamp, serving: RequestServing) -> RequestLoad {
        RequestLoad {
            trace,
            next: 0,
            origin,
            serving,
            round_robin: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            handoffs: Vec::new(),
            served: Vec::new(),
            gaps: GapLog::default(),
        }
    }

    /// Seconds on the requests' time axis at `t`.
    pub fn seconds_at(&self, t: Timestamp) -> f64 {
        t.duration_since(self.origin).as_secs_f64()
    }

    pub fn take_served(&mut self) -> Vec<ServedRequest> {
        std::mem::take(&mut self.served)
    }

    pub fn take_gaps(&mut self) -> GapLog {
        self.gaps.take()
    }

    /// Requests offered and not yet ended, and requests not yet offered.
    pub fn pending(&self) -> (usize, usize) {
        (self.in_flight.len(), self.trace.requests.len() - self.next)
    }

    /// Arrival times of the requests offered and not yet ended.
    pub fn unfinished_arrivals(&self) -> Vec<f64> {
        self.in_flight.values().map(|f| f.arrival).collect()
    }

    fn end(&mut self, id: u64, outcome: ServedOutcome, end: f64) {
        if let Some(f) = self.in_flight.remove(&id) {
            self.served.push(ServedRequest {
                id,
                outcome,
                arrival: f.arrival,
                end,
                prompt_tokens: f.prompt,
                output_tokens: f.output,
                cached_tokens: 0,
                ttft_seconds: None,
                itl_seconds: None,
                gaps: 0,
                slow_gaps: 0,
                preemptions: 0,
            });
        }
    }
}

/// Which roles a request passes through.
enum Path {
    Single(String),
    Disaggregated { prefill: String, decode: String },
}

fn path_of(dep: &Deployment) -> Option<Path> {
    let roles = &dep.object.spec.roles;
    let first = |kind: RoleKind| {
        roles
            .iter()
            .find(|r| r.kind() == kind)
            .map(|r| r.name.clone())
    };
    if let (Some(prefill), Some(decode)) = (first(RoleKind::Prefill), first(RoleKind::Decode)) {
        return Some(Path::Disaggregated { prefill, decode });
    }
    roles
        .iter()
        .find(|r| matches!(r.kind(), RoleKind::Server | RoleKind::Unknown(_)))
        .or(roles.first())
        .map(|r| Path::Single(r.name.clone()))
}

/// Serves the requests that arrive before `to`, and runs every engine to `to`.
pub(crate) fn serve(dep: &mut Deployment, load: &mut RequestLoad, to: f64) {
    for id in std::mem::take(&mut dep.lost_requests) {
        load.end(id, ServedOutcome::Lost, to);
    }
    let path = path_of(dep);
    let entry = match &path {
        Some(Path::Single(role)) => role.clone(),
        Some(Path::Disaggregated { prefill, .. }) => prefill.clone(),
        None => String::new(),
    };
    let trace = load.trace.clone();
    while let Some(r) = trace.requests.get(load.next).filter(|r| r.at_seconds < to) {
        let id = load.next as u64;
        load.next += 1;
        let (prompt, output) = (u64::from(r.prompt_tokens), u64::from(r.output_tokens));
        load.in_flight.insert(
            id,
            InFlight {
                arrival: r.at_seconds,
                prompt,
                output,
            },
        );
        let disaggregated = matches!(path, Some(Path::Disaggregated { .. })) && output > 1;
        let stage_output = if disaggregated { 1 } else { output };
        let hashes = r.block_hashes.as_deref();
        let cursor = load.round_robin.entry(entry.clone()).or_default();
        match dep.roles.get_mut(&entry).and_then(|role| {
            pick(
                role,
                r.at_seconds,
                load.serving.router,
                cursor,
                prompt,
                hashes,
            )
        }) {
            Some(engine) => {
                engine.itl_objective_seconds = load.serving.itl_objective_seconds;
                engine.submit(id, r.at_seconds, prompt, stage_output, hashes);
            }
            None => load.end(id, ServedOutcome::Unrouted, r.at_seconds),
        }
    }
    if let Some(role) = dep.roles.get_mut(&entry) {
        for finished in run_role(role, to) {
            // A disaggregated request with more than one output token goes on to decode.
            let handoff = matches!(path, Some(Path::Disaggregated { .. }))
                && finished.outcome == Outcome::Finished
                && load
                    .in_flight
                    .get(&finished.id)
                    .is_some_and(|f| f.output > 1);
            if handoff {
                let f = &load.in_flight[&finished.id];
                load.handoffs.push(Handoff {
                    at: finished.finish + load.serving.transfer_seconds(f.prompt),
                    id: finished.id,
                    prompt: f.prompt,
                    output: f.output,
                });
            } else {
                record(load, &finished, None);
            }
        }
    }
    if let Some(Path::Disaggregated { decode, .. }) = &path {
        load.handoffs
            .sort_by(|a, b| a.at.total_cmp(&b.at).then(a.id.cmp(&b.id)));
        let due = load.handoffs.partition_point(|h| h.at < to);
        let cursor = load.round_robin.entry(decode.clone()).or_default();
        let mut unrouted = Vec::new();
        for h in load.handoffs.drain(..due) {
            match dep
                .roles
                .get_mut(decode)
                .and_then(|role| pick(role, h.at, load.serving.router, cursor, h.prompt, None))
            {
                Some(engine) => {
                    engine.itl_objective_seconds = load.serving.itl_objective_seconds;
                    engine.submit_prefilled(h.id, h.at, h.prompt, h.output);
                }
                None => unrouted.push((h.id, h.at)),
            }
        }
        for (id, at) in unrouted {
            load.end(id, ServedOutcome::Unrouted, at);
        }
        if let Some(role) = dep.roles.get_mut(decode) {
            for finished in run_role(role, to) {
                let arrival = load.in_flight.get(&finished.id).map(|f| f.arrival);
                record(load, &finished, arrival);
            }
        }
    }
    // Roles no request passes through still run their (idle) engines' clocks.
    for role in dep.roles.values_mut() {
        for instance in role.instances.values_mut() {
            if let Some(engine) = instance.requests.as_deref_mut() {
                engine.advance_to(to);
                for finished in engine.take_finished() {
                    record(load, &finished, None);
                }
                load.gaps.merge(engine.take_gaps());
                if let Some(state) = instance.engine.as_mut() {
                    engine.write_page_state(state);
                }
            }
        }
    }
}

/// Runs every engine of a role to `to` and returns what finished, in finishing order.
fn run_role(role: &mut RoleInstances, to: f64) -> Vec<FinishedRequest> {
    let mut finished = Vec::new();
    for instance in role.instances.values_mut() {
        if let Some(engine) = instance.requests.as_deref_mut() {
            engine.advance_to(to);
            finished.extend(engine.take_finished());
        }
    }
    finished.sort_by(|a, b| a.finish.total_cmp(&b.finish).then(a.id.cmp(&b.id)));
    finished
}

/// Ends a request from its engine's record; `arrival` is the original arrival of a request a
/// decode engine finished (its record counts from the hand-off).
fn record(load: &mut RequestLoad, finished: &FinishedRequest, arrival: Option<f64>) {
    let Some(f) = load.in_flight.remove(&finished.id) else {
        return;
    };
    let offset = arrival.map_or(0.0, |a| finished.arrival - a);
    load.served.push(ServedRequest {
        id: finished.id,
        outcome: match finished.outcome {
            Outcome::Finished => ServedOutcome::Finished,
            Outcome::Rejected => ServedOutcome::Rejected,
        },
        arrival: f.arrival,
        end: finished.finish,
        prompt_tokens: f.prompt,
        output_tokens: f.output,
        cached_tokens: finished.cached_tokens,
        ttft_seconds: finished.ttft_seconds.map(|t| t + offset),
        itl_seconds: finished.tpot_seconds,
        gaps: finished.gaps,
        slow_gaps: finished.slow_gaps,
        preemptions: finished.preemptions,
    });
}

/// The routed instance of `role` a request arriving at `at` goes to, its engine brought to
/// `at` first so the router sees the moment's queues.
fn pick<'a>(
    role: &'a mut RoleInstances,
    at: f64,
    router: Router,
    cursor: &mut u64,
    prompt: u64,
    hashes: Option<&[u64]>,
) -> Option<&'a mut RequestEngine> {
    let mut candidates: Vec<&'a mut RequestEngine> = role
        .instances
        .values_mut()
        .filter(|i| i.is_routed())
        .filter_map(|i| i.requests.as_deref_mut())
        .collect();
    if candidates.is_empty() {
        return None;
    }
    for engine in candidates.iter_mut() {
        engine.advance_to(at);
    }
    let index = match router {
        Router::RoundRobin => {
            let i = (*cursor % candidates.len() as u64) as usize;
            *cursor = cursor.wrapping_add(1);
            i
        }
        Router::LeastOutstanding => least_outstanding(&candidates, |_| 0),
        Router::PrefixAware => match hashes {
            Some(h) => least_outstanding(&candidates, |e| e.cached_prefix_tokens(prompt, h)),
            None => least_outstanding(&candidates, |_| 0),
        },
    };
    Some(candidates.swap_remove(index))
}

/// The candidate with the most `affinity`, then the fewest outstanding, then the first.
fn least_outstanding(
    candidates: &[&mut RequestEngine],
    affinity: impl Fn(&RequestEngine) -> u64,
) -> usize {
    let mut best = 0;
    let mut best_key = (0, usize::MAX);
    for (i, engine) in candidates.iter().enumerate() {
        let key = (affinity(engine), engine.outstanding());
        if i == 0 || key.0 > best_key.0 || (key.0 == best_key.0 && key.1 < best_key.1) {
            best = i;
            best_key = key;
        }
    }
    best
}
