//! A small world for planner tests: policies from spec JSON, observations, and passes.
#![allow(dead_code)]

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::status::SignalState;
use mds_api::target::RoleKind;
use mds_planner::{Guards, Plan, PlanInput, PlannerState, Policy, RoleInput, plan};
use mds_signals::RoleObservation;
use serde_json::{Value, json};

pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

pub fn policy(spec: Value, kinds: &[(&str, RoleKind)]) -> Policy {
    let spec: ModelDeploymentScalerSpec = serde_json::from_value(spec).expect("spec");
    let kinds: BTreeMap<String, RoleKind> = kinds
        .iter()
        .map(|(n, k)| (n.to_string(), k.clone()))
        .collect();
    Policy::from_spec(&spec, &kinds).expect("policy")
}

/// A healthy observation with the given rates and ready count.
pub fn obs(ready: u32) -> RoleObservation {
    RoleObservation {
        ready_replicas: ready,
        sampled_replicas: ready,
        coverage_complete: true,
        signal_state: SignalState::Fresh,
        prompt_tokens_per_second: Some(0.0),
        generation_tokens_per_second: Some(0.0),
        running_requests: Some(0.0),
        waiting_requests: Some(0.0),
        kv_cache_usage: Some(0.5),
        ttft_milliseconds: Some(100.0),
        itl_milliseconds: Some(10.0),
        ttft_observations: None,
        itl_observations: None,
        prompt_paths: vec![],
    }
}

pub fn prompt(mut o: RoleObservation, rate: f64) -> RoleObservation {
    o.prompt_tokens_per_second = Some(rate);
    o
}

pub fn generation(mut o: RoleObservation, rate: f64) -> RoleObservation {
    o.generation_tokens_per_second = Some(rate);
    o
}

pub fn requests(mut o: RoleObservation, running: f64, waiting: f64) -> RoleObservation {
    o.running_requests = Some(running);
    o.waiting_requests = Some(waiting);
    o
}

pub fn latency(mut o: RoleObservation, ttft: Option<f64>, itl: Option<f64>) -> RoleObservation {
    o.ttft_milliseconds = ttft;
    o.itl_milliseconds = itl;
    o
}

/// A running world: the policy, current counts and planner memory.
pub struct World {
    pub policy: Policy,
    pub current: Vec<i32>,
    pub state: PlannerState,
    pub guards: Guards,
    /// Per role: our own growth is still starting (D13).
    pub growth_in_flight: Vec<bool>,
    /// Per role: regrowth waits after a rollback (D29).
    pub growth_backoff: Vec<bool>,
    pub now: i64,
}

impl World {
    pub fn new(policy: Policy, current: &[i32]) -> World {
        World {
            policy,
            current: current.to_vec(),
            state: PlannerState::default(),
            guards: Guards::default(),
            growth_in_flight: vec![false; current.len()],
            growth_backoff: vec![false; current.len()],
            now: 0,
        }
    }

    /// One pass at the current time with these observations; does not apply the result.
    pub fn pass(&mut self, observations: &[Option<RoleObservation>]) -> Plan {
        let roles: Vec<RoleInput> = self
            .current
            .iter()
            .zip(observations)
            .enumerate()
            .map(|(i, (&current, o))| RoleInput {
                current,
                observation: o.clone(),
                growth_in_flight: self.growth_in_flight[i],
                readings_predate_growth: false,
                growth_backoff: self.growth_backoff[i],
            })
            .collect();
        let input = PlanInput {
            policy: &self.policy,
            roles: &roles,
            guards: &self.guards,
            now: t(self.now),
            observed_at: t(self.now),
        };
        plan(&input, &mut self.state)
    }

    /// Passes every `interval` seconds for `seconds`, without applying results; returns the last.
    pub fn run(
        &mut self,
        seconds: i64,
        interval: i64,
        observations: &[Option<RoleObservation>],
    ) -> Plan {
        let mut last = self.pass(observations);
        let mut elapsed = 0;
        while elapsed + interval <= seconds {
            self.now += interval;
            elapsed += interval;
            last = self.pass(observations);
        }
        last
    }

    /// Applies a plan's constrained vector as if committed.
    pub fn apply(&mut self, plan: &Plan) {
        self.current = plan.vector();
    }
}

/// A TokenThroughput spec over the given roles.
pub fn token_spec(roles: Value, ratios: Value, token: Value) -> Value {
    json!({
        "targetRef": {"name": "md"},
        "roles": roles,
        "ratios": ratios,
        "algorithm": {"tokenThroughput": token}
    })
}
