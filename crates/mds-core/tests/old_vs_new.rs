//! The refactored core decides exactly like the core it replaced (`mds-core-legacy`, a frozen
//! copy): random worlds run sequences of passes through both, each pass's write applied to the
//! target and its status and memory carried forward, and every outcome (write, status, status
//! write, events, plan, wake time) and memory must be the same. Temporary: deleted with the
//! legacy copy once the refactor is done.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use jiff::{SignedDuration, Timestamp};
use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION};
use mds_api::defaults::default_spec;
use mds_api::spec::ModelDeploymentScalerSpec;
use mds_api::status::{ModelDeploymentScalerStatus, ReplicaVector, SignalState};
use mds_api::target::{ModelDeployment, WorkloadAdmission};
use mds_signals::RoleObservation;
use mds_testdata::{mk_role, mk_scaler, mk_target};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

const SCALER_UID: &str = "scaler-uid-1";

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap() + SignedDuration::from_secs(seconds)
}

#[derive(Clone, Copy, Debug)]
enum Algorithm {
    Proportional,
    TokenThroughput,
    Predictive,
}

/// The scaler and target a sequence starts from.
#[derive(Clone, Debug)]
struct Setup {
    algorithm: Algorithm,
    /// Prefill and decode (true) or one server role.
    disaggregated: bool,
    /// Both roles share an instanceType (a rebalance pool).
    same_pool: bool,
    ratio: bool,
    rebalance: &'static str,
    router: bool,
    workload_api: bool,
    shadow: bool,
    replicas: i32,
    /// How many instances admission admits in all (a quota that runs out), if limited.
    quota: Option<i32>,
}

#[derive(Clone, Debug)]
enum Step {
    Wait(i64),
    Want {
        role: usize,
        replicas: i32,
        tokens: f64,
    },
    Signal {
        role: usize,
        state: usize,
        complete: bool,
    },
    Unobserved(usize),
    ObservedEarlier(i64),
    SamplingProblem(bool),
    Mode(bool),
    Suspend(bool),
    Deleting(bool),
    TouchSpec,
    AdmitAll,
    Admission {
        role: usize,
        ordinal: i32,
        state: usize,
    },
    Forget {
        role: usize,
        ordinal: i32,
    },
    Ready {
        role: usize,
        ordinal: i32,
        ready: bool,
    },
    ReadyAll,
    Pods {
        role: usize,
        ordinal: i32,
        present: bool,
    },
    Workload {
        role: usize,
        ordinal: i32,
        present: bool,
    },
    WorkloadApi(bool),
    Retire {
        role: usize,
        ordinal: i32,
        state: usize,
        generation: Option<i64>,
        deadline: Option<i64>,
    },
    RetirementDone,
    /// A retirement of the ordinal our last scale-down removed, aborted or running.
    RetireRemoved {
        aborted: bool,
    },
    /// Instances above the declared counts are gone (Pods, Workloads, admission).
    RemovedGone,
    ReportDesired,
    ExternalEdit {
        role: usize,
        replicas: i32,
    },
    ForeignBinding,
    GarbageBinding,
    GarbageDecision,
    ClearBinding,
    ReplaceTarget,
    RemoveTarget,
    RestoreTarget,
    Refuse(i32),
    ClearRefusal,
    Restart,
    LoseStatusWrite,
    LoseTargetWrite,
    StatusRebalance {
        reason: usize,
        donor: bool,
        attempted: bool,
    },
    StatusScaleDown {
        aborted: bool,
        cooldown: i64,
    },
    StatusCohort {
        grown: i32,
        age: i64,
    },
    StatusDropRecords,
}

const REASONS: [&str; 8] = [
    "ResourceExhausted",
    "DonorRelease",
    "ReceiverAcquire",
    "DonationAttempted",
    "RebalanceNotApplicable",
    "RebalanceBlocked",
    "SomethingElse",
    "",
];
const RETIREMENT_STATES: [&str; 5] = ["Draining", "Settling", "Aborted", "Completed", "Admitted"];
const ADMISSIONS: [WorkloadAdmission; 4] = [
    WorkloadAdmission::Admitted,
    WorkloadAdmission::Pending,
    WorkloadAdmission::Unadmitted,
    WorkloadAdmission::Parked,
];
const SIGNALS: [SignalState; 4] = [
    SignalState::Fresh,
    SignalState::Idle,
    SignalState::Missing,
    SignalState::Stale,
];

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            Just(Algorithm::Proportional),
            Just(Algorithm::TokenThroughput),
            Just(Algorithm::Predictive)
        ],
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.3),
        prop_oneof![Just("Opposing"), Just("Priority"), Just("Disabled")],
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop::bool::weighted(0.15),
        (1i32..=4, prop::option::weighted(0.4, 2i32..8)),
    )
        .prop_map(
            |(
                algorithm,
                disaggregated,
                same_pool,
                ratio,
                rebalance,
                router,
                workload_api,
                shadow,
                (replicas, quota),
            )| Setup {
                algorithm,
                disaggregated,
                same_pool,
                ratio,
                rebalance,
                router,
                workload_api,
                shadow,
                replicas,
                quota,
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    let role = 0usize..2;
    let ordinal = 0i32..8;
    prop_oneof![
        10 => (1i64..=90).prop_map(Step::Wait),
        8 => (role.clone(), 0i32..=10, 0.0f64..5000.0).prop_map(|(role, replicas, tokens)| Step::Want { role, replicas, tokens }),
        2 => (role.clone(), 0usize..4, prop::bool::weighted(0.8)).prop_map(|(role, state, complete)| Step::Signal { role, state, complete }),
        1 => role.clone().prop_map(Step::Unobserved),
        1 => (0i64..120).prop_map(Step::ObservedEarlier),
        1 => any::<bool>().prop_map(Step::SamplingProblem),
        1 => any::<bool>().prop_map(Step::Mode),
        1 => any::<bool>().prop_map(Step::Suspend),
        1 => prop::bool::weighted(0.3).prop_map(Step::Deleting),
        1 => Just(Step::TouchSpec),
        6 => Just(Step::AdmitAll),
        4 => (role.clone(), ordinal.clone(), 0usize..4).prop_map(|(role, ordinal, state)| Step::Admission { role, ordinal, state }),
        1 => (role.clone(), ordinal.clone()).prop_map(|(role, ordinal)| Step::Forget { role, ordinal }),
        2 => (role.clone(), ordinal.clone(), any::<bool>()).prop_map(|(role, ordinal, ready)| Step::Ready { role, ordinal, ready }),
        3 => Just(Step::ReadyAll),
        2 => (role.clone(), ordinal.clone(), any::<bool>()).prop_map(|(role, ordinal, present)| Step::Pods { role, ordinal, present }),
        2 => (role.clone(), ordinal.clone(), any::<bool>()).prop_map(|(role, ordinal, present)| Step::Workload { role, ordinal, present }),
        1 => any::<bool>().prop_map(Step::WorkloadApi),
        3 => (role.clone(), ordinal.clone(), 0usize..5, prop::option::of(0i64..6), prop::option::of(0i64..600))
            .prop_map(|(role, ordinal, state, generation, deadline)| Step::Retire { role, ordinal, state, generation, deadline }),
        3 => Just(Step::RetirementDone),
        3 => any::<bool>().prop_map(|aborted| Step::RetireRemoved { aborted }),
        3 => Just(Step::RemovedGone),
        3 => Just(Step::ReportDesired),
        1 => (role.clone(), 0i32..=9).prop_map(|(role, replicas)| Step::ExternalEdit { role, replicas }),
        1 => Just(Step::ForeignBinding),
        1 => Just(Step::GarbageBinding),
        1 => Just(Step::GarbageDecision),
        1 => Just(Step::ClearBinding),
        1 => Just(Step::ReplaceTarget),
        1 => Just(Step::RemoveTarget),
        1 => Just(Step::RestoreTarget),
        1 => (0i32..3).prop_map(Step::Refuse),
        1 => Just(Step::ClearRefusal),
        1 => Just(Step::Restart),
        1 => Just(Step::LoseStatusWrite),
        1 => Just(Step::LoseTargetWrite),
        2 => (0usize..REASONS.len(), any::<bool>(), any::<bool>()).prop_map(|(reason, donor, attempted)| Step::StatusRebalance { reason, donor, attempted }),
        1 => (any::<bool>(), -30i64..120).prop_map(|(aborted, cooldown)| Step::StatusScaleDown { aborted, cooldown }),
        1 => (1i32..3, 0i64..300).prop_map(|(grown, age)| Step::StatusCohort { grown, age }),
        1 => Just(Step::StatusDropRecords),
    ]
}

/// The scripted world both cores see: one target document, one stored status, and each
/// core's own memory.
struct World {
    roles: Vec<&'static str>,
    spec_value: Value,
    generation: i64,
    status: ModelDeploymentScalerStatus,
    target: Option<Value>,
    removed_target: Option<Value>,
    admission: BTreeMap<(String, i32), WorkloadAdmission>,
    pods: BTreeSet<(String, i32)>,
    workloads: Option<BTreeSet<(String, i32)>>,
    ready: BTreeSet<(String, i32)>,
    observations: BTreeMap<String, RoleObservation>,
    new_memory: mds_core::Memory,
    old_memory: mds_core_legacy::Memory,
    refused_new: Option<mds_core::RefusedWrite>,
    refused_old: Option<mds_core_legacy::RefusedWrite>,
    deleting: bool,
    now: i64,
    observed_at: Option<i64>,
    sampling_problem: Option<String>,
    lose_status_write: bool,
    lose_target_write: bool,
    last_vector: Option<ReplicaVector>,
    uid_counter: i64,
    quota: Option<i32>,
}

fn algorithm_json(algorithm: Algorithm, disaggregated: bool, roles: &[&str]) -> Value {
    let throughput = if disaggregated {
        json!({"prefillTargetTokensPerSecond": "2000", "decodeTargetTokensPerSecond": "800", "stableWindowSeconds": 60, "panicWindowSeconds": 30})
    } else {
        json!({"serverTargetTokensPerSecond": "1000", "itlTargetMilliseconds": "50", "ttftTargetMilliseconds": "500"})
    };
    match algorithm {
        Algorithm::Proportional => {
            let targets: Vec<Value> = roles
                .iter()
                .map(|r| json!({"name": r, "target": "10"}))
                .collect();
            json!({"proportional": {"metric": "QueueDepth", "roleTargets": targets, "tolerance": "0.01"}})
        }
        Algorithm::TokenThroughput => json!({"tokenThroughput": throughput}),
        Algorithm::Predictive if disaggregated => {
            json!({"predictive": {"tokenThroughput": throughput,
            "prefillTokenCapacityPerReplica": "2000", "decodeTokenCapacityPerReplica": "800", "minPoints": 2}})
        }
        Algorithm::Predictive => json!({"predictive": {"tokenThroughput": throughput,
            "serverTokenCapacityPerReplica": "1000", "minPoints": 2}}),
    }
}

fn target_json(setup: &Setup, roles: &[&str], uid: &str) -> Value {
    let kinds = if setup.disaggregated {
        ["Prefill", "Decode"]
    } else {
        ["Server", "Server"]
    };
    let mut builder = mk_target("llm")
        .stored("default", uid, "100")
        .empty_status();
    if !setup.router {
        builder = builder.router(None);
    }
    for (i, role) in roles.iter().enumerate() {
        let pool = if setup.same_pool || i == 0 {
            "h100"
        } else {
            "a100"
        };
        builder = builder.role(
            mk_role(role)
                .kind(kinds[i])
                .replicas(setup.replicas)
                .instance_type(pool),
        );
    }
    builder.build()
}

impl World {
    fn new(setup: &Setup) -> World {
        let roles: Vec<&'static str> = if setup.disaggregated {
            vec!["prefill", "decode"]
        } else {
            vec!["server"]
        };
        let bounded = roles.iter().fold(
            mk_scaler("llm").mode(if setup.shadow { "Shadow" } else { "Active" }),
            |s, r| s.role_bounds(r, 1, 8),
        );
        let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 15, "cooldownAfterAbortSeconds": 60}});
        let mut spec = bounded
            .algorithm(algorithm_json(setup.algorithm, setup.disaggregated, &roles))
            .field(
                "sampling",
                json!({"pendingTimeoutSeconds": 120, "intervalSeconds": 15}),
            )
            .field("behavior", behavior)
            .spec();
        spec["rebalance"] = if setup.rebalance == "Priority" {
            json!({"policy": "Priority", "priority": ["decode", "prefill"]})
        } else {
            json!({"policy": setup.rebalance})
        };
        if setup.ratio && setup.disaggregated {
            spec["ratios"] = json!([{"numeratorRole": "prefill", "denominatorRole": "decode", "min": "0.5", "target": "1", "max": "2"}]);
        }
        let target = target_json(setup, &roles, "target-uid-1");
        let mut world = World {
            roles,
            spec_value: spec,
            generation: 1,
            status: ModelDeploymentScalerStatus::default(),
            target: Some(target),
            removed_target: None,
            admission: BTreeMap::new(),
            pods: BTreeSet::new(),
            workloads: setup.workload_api.then(BTreeSet::new),
            ready: BTreeSet::new(),
            observations: BTreeMap::new(),
            new_memory: mds_core::Memory::default(),
            old_memory: mds_core_legacy::Memory::default(),
            refused_new: None,
            refused_old: None,
            deleting: false,
            now: 0,
            observed_at: None,
            sampling_problem: None,
            lose_status_write: false,
            lose_target_write: false,
            last_vector: None,
            uid_counter: 1,
            quota: setup.quota,
        };
        world.settle_all();
        for i in 0..world.roles.len() {
            world.want(i, setup.replicas, 500.0);
        }
        world
    }

    fn role(&self, i: usize) -> String {
        self.roles[i % self.roles.len()].to_string()
    }

    fn spec(&self) -> ModelDeploymentScalerSpec {
        let mut spec: ModelDeploymentScalerSpec =
            serde_json::from_value(self.spec_value.clone()).expect("spec");
        default_spec(&mut spec);
        spec
    }

    fn edit(&mut self, f: impl FnOnce(&mut Value)) {
        f(&mut self.spec_value);
        self.generation += 1;
    }

    fn replicas(&self) -> ReplicaVector {
        let Some(target) = self.target.as_ref() else {
            return ReplicaVector::new();
        };
        target["spec"]["roles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["replicas"].as_i64().unwrap_or(1) as i32,
                )
            })
            .collect()
    }

    /// Every declared ordinal admitted, with Pods, a Workload and ready.
    fn settle_all(&mut self) {
        for (role, n) in self.replicas() {
            for o in 0..n {
                let key = (role.clone(), o);
                self.admission
                    .insert(key.clone(), WorkloadAdmission::Admitted);
                self.pods.insert(key.clone());
                if let Some(w) = self.workloads.as_mut() {
                    w.insert(key.clone());
                }
                self.ready.insert(key);
            }
        }
    }

    fn want(&mut self, i: usize, replicas: i32, tokens: f64) {
        let role = self.role(i);
        let ready = self.replicas().get(&role).copied().unwrap_or(0).max(0) as u32;
        let observation = RoleObservation {
            ready_replicas: ready,
            sampled_replicas: ready,
            coverage_complete: true,
            signal_state: SignalState::Fresh,
            prompt_tokens_per_second: Some(tokens * replicas as f64),
            generation_tokens_per_second: Some(tokens * replicas as f64 / 3.0),
            running_requests: Some(replicas as f64 * 10.0),
            waiting_requests: Some(0.0),
            kv_cache_usage: Some(0.5),
            ttft_milliseconds: Some(100.0 + tokens / 10.0),
            itl_milliseconds: Some(10.0 + tokens / 100.0),
            ttft_observations: None,
            itl_observations: None,
            prompt_paths: vec![],
        };
        self.observations.insert(role, observation);
    }

    fn annotations(&mut self) -> Option<&mut serde_json::Map<String, Value>> {
        let meta = self.target.as_mut()?["metadata"].as_object_mut()?;
        meta.entry("annotations")
            .or_insert(json!({}))
            .as_object_mut()
    }

    fn bump_generation(target: &mut Value) {
        let g = target["metadata"]["generation"].as_i64().unwrap_or(1);
        target["metadata"]["generation"] = json!(g + 1);
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Wait(s) => self.now += s,
            Step::Want {
                role,
                replicas,
                tokens,
            } => self.want(role, replicas, tokens),
            Step::Signal {
                role,
                state,
                complete,
            } => {
                if let Some(o) = self.observations.get_mut(&self.role(role)) {
                    o.signal_state = SIGNALS[state];
                    o.coverage_complete = complete;
                }
            }
            Step::Unobserved(role) => {
                let role = self.role(role);
                self.observations.remove(&role);
            }
            Step::ObservedEarlier(s) => self.observed_at = Some(self.now - s),
            Step::SamplingProblem(on) => {
                self.sampling_problem =
                    on.then(|| "engine \"Unknown\" is not supported".to_string());
            }
            Step::Mode(active) => {
                self.edit(|s| s["mode"] = json!(if active { "Active" } else { "Shadow" }))
            }
            Step::Suspend(on) => self.edit(|s| s["suspend"] = json!(on)),
            Step::Deleting(on) => self.deleting = on,
            Step::TouchSpec => self.edit(|s| s["sampling"]["pendingTimeoutSeconds"] = json!(120)),
            Step::AdmitAll => {
                let mut budget = self.quota.unwrap_or(i32::MAX);
                for (role, n) in self.replicas() {
                    for o in 0..n {
                        let admitted = budget > 0;
                        budget -= 1;
                        let state = if admitted {
                            WorkloadAdmission::Admitted
                        } else {
                            WorkloadAdmission::Unadmitted
                        };
                        self.admission.insert((role.clone(), o), state);
                    }
                }
            }
            Step::Admission {
                role,
                ordinal,
                state,
            } => {
                self.admission
                    .insert((self.role(role), ordinal), ADMISSIONS[state]);
            }
            Step::Forget { role, ordinal } => {
                self.admission.remove(&(self.role(role), ordinal));
            }
            Step::Ready {
                role,
                ordinal,
                ready,
            } => {
                let key = (self.role(role), ordinal);
                if ready {
                    self.ready.insert(key);
                } else {
                    self.ready.remove(&key);
                }
            }
            Step::ReadyAll => {
                let ready: Vec<_> = self
                    .replicas()
                    .into_iter()
                    .flat_map(|(r, n)| (0..n).map(move |o| (r.clone(), o)))
                    .collect();
                self.ready.extend(ready);
            }
            Step::Pods {
                role,
                ordinal,
                present,
            } => {
                let key = (self.role(role), ordinal);
                if present {
                    self.pods.insert(key);
                } else {
                    self.pods.remove(&key);
                }
            }
            Step::Workload {
                role,
                ordinal,
                present,
            } => {
                let key = (self.role(role), ordinal);
                if let Some(w) = self.workloads.as_mut() {
                    if present {
                        w.insert(key);
                    } else {
                        w.remove(&key);
                    }
                }
            }
            Step::WorkloadApi(on) => {
                if on != self.workloads.is_some() {
                    self.workloads = on.then(|| self.pods.clone());
                }
            }
            Step::Retire {
                role,
                ordinal,
                state,
                generation,
                deadline,
            } => {
                let role = self.role(role);
                let now = self.now;
                if let Some(target) = self.target.as_mut() {
                    let mut r = json!({"roleName": role, "replicaOrdinal": ordinal, "state": RETIREMENT_STATES[state]});
                    if let Some(g) = generation {
                        r["observedGeneration"] = json!(g);
                    }
                    if let Some(d) = deadline {
                        r["deadline"] = json!(t(now + d).to_string());
                    }
                    target["status"]["retirement"] = r;
                }
            }
            Step::RetirementDone => {
                if let Some(s) = self
                    .target
                    .as_mut()
                    .and_then(|t| t["status"].as_object_mut())
                {
                    s.remove("retirement");
                }
            }
            Step::RetireRemoved { aborted } => {
                let Some(last) = self.status.last_scale_down.clone() else {
                    return;
                };
                if let Some(target) = self.target.as_mut() {
                    let state = if aborted { "Aborted" } else { "Draining" };
                    target["status"]["retirement"] = json!({"roleName": last.role, "replicaOrdinal": last.ordinal, "state": state});
                }
            }
            Step::RemovedGone => {
                let replicas = self.replicas();
                let above = |key: &(String, i32)| replicas.get(&key.0).is_some_and(|n| key.1 >= *n);
                self.pods.retain(|k| !above(k));
                self.admission.retain(|k, _| !above(k));
                if let Some(w) = self.workloads.as_mut() {
                    w.retain(|k| !above(k));
                }
            }
            Step::ReportDesired => {
                let replicas = self.replicas();
                let ready = self.ready.clone();
                if let Some(target) = self.target.as_mut() {
                    let roles: Vec<Value> = replicas
                        .iter()
                        .map(|(r, n)| {
                            let ready =
                                (0..*n).filter(|o| ready.contains(&(r.clone(), *o))).count();
                            json!({"name": r, "desired": n, "ready": ready})
                        })
                        .collect();
                    target["status"]["roles"] = json!(roles);
                }
            }
            Step::ExternalEdit { role, replicas } => {
                let i = role % self.roles.len();
                if let Some(target) = self.target.as_mut() {
                    target["spec"]["roles"][i]["replicas"] = json!(replicas);
                    Self::bump_generation(target);
                }
            }
            Step::ForeignBinding => {
                if let Some(a) = self.annotations() {
                    a.insert(
                        BINDING_ANNOTATION.into(),
                        json!(r#"{"scalerName":"other","scalerUID":"other","term":7}"#),
                    );
                }
            }
            Step::GarbageBinding => {
                if let Some(a) = self.annotations() {
                    a.insert(BINDING_ANNOTATION.into(), json!("{not json"));
                }
            }
            Step::GarbageDecision => {
                if let Some(a) = self.annotations() {
                    a.insert(DECISION_ANNOTATION.into(), json!("garbage"));
                }
            }
            Step::ClearBinding => {
                if let Some(a) = self.annotations() {
                    a.remove(BINDING_ANNOTATION);
                }
            }
            Step::ReplaceTarget => {
                self.uid_counter += 1;
                let uid = format!("target-uid-{}", self.uid_counter);
                if let Some(target) = self.target.as_mut() {
                    target["metadata"]["uid"] = json!(uid);
                    target["metadata"]["generation"] = json!(1);
                    if let Some(meta) = target["metadata"].as_object_mut() {
                        meta.remove("annotations");
                    }
                }
            }
            Step::RemoveTarget => {
                if self.target.is_some() {
                    self.removed_target = self.target.take();
                }
            }
            Step::RestoreTarget => {
                if self.target.is_none() {
                    self.target = self.removed_target.take();
                }
            }
            Step::Refuse(which) => {
                let mut vector = self.last_vector.clone().unwrap_or_else(|| self.replicas());
                if which > 0 {
                    for n in vector.values_mut() {
                        *n += which;
                    }
                }
                let message = "admission webhook \"policy\" denied the request".to_string();
                self.refused_new = Some(mds_core::RefusedWrite {
                    vector: vector.clone(),
                    message: message.clone(),
                });
                self.refused_old = Some(mds_core_legacy::RefusedWrite { vector, message });
            }
            Step::ClearRefusal => {
                self.refused_new = None;
                self.refused_old = None;
            }
            Step::Restart => {
                self.new_memory = mds_core::Memory::default();
                self.old_memory = mds_core_legacy::Memory::default();
            }
            Step::LoseStatusWrite => self.lose_status_write = true,
            Step::LoseTargetWrite => self.lose_target_write = true,
            Step::StatusRebalance {
                reason,
                donor,
                attempted,
            } => self.status_rebalance(reason, donor, attempted),
            Step::StatusScaleDown { aborted, cooldown } => {
                let role = self.role(0);
                let current = self.replicas();
                let mut pre = current.clone();
                *pre.entry(role.clone()).or_insert(1) += 1;
                let mut record = json!({"role": role, "ordinal": pre[&role] - 1, "preScaleDownVector": pre,
                    "outcome": if aborted { "Aborted" } else { "Committed" }});
                if aborted {
                    record["abortedAt"] = json!(t(self.now).to_string());
                    record["cooldownUntil"] = json!(t(self.now + cooldown).to_string());
                }
                self.status.last_scale_down = Some(serde_json::from_value(record).unwrap());
            }
            Step::StatusCohort { grown, age } => {
                let current = self.replicas();
                let mut baseline = current.clone();
                for n in baseline.values_mut() {
                    *n = (*n - grown).max(0);
                }
                let cohort = json!({"decisionID": format!("llm-t1-{}", t(self.now - age).as_millisecond()), "term": 1,
                    "baselineVector": baseline, "targetVector": current, "startedAt": t(self.now - age).to_string()});
                self.status.pending_cohort = Some(serde_json::from_value(cohort).unwrap());
            }
            Step::StatusDropRecords => {
                self.status.pending_cohort = None;
                self.status.last_scale_down = None;
                self.status.last_commit = None;
                self.status.rebalance = None;
            }
        }
    }

    /// A hand-set rebalance record with the reason's exact wire text (an unknown one
    /// included), as a stored status may hold it.
    fn status_rebalance(&mut self, reason: usize, donor: bool, attempted: bool) {
        let receiver = self.role(1);
        let donor_role = self.role(0);
        let current = self.replicas();
        let mut rb = json!({"receiverRole": receiver, "exhaustionEpisodeGeneration": self.generation,
            "donationAttempted": attempted});
        if !REASONS[reason].is_empty() {
            rb["reason"] = json!(REASONS[reason]);
        }
        if donor {
            rb["donorRole"] = json!(donor_role);
            rb["donorTargetReplicas"] = json!(current.get(&donor_role).copied().unwrap_or(1));
            rb["receiverTargetReplicas"] = json!(current.get(&receiver).copied().unwrap_or(1) + 1);
            rb["startedAt"] = json!(t(self.now - 30).to_string());
        }
        let status = json!({"rebalance": rb});
        let parsed: ModelDeploymentScalerStatus = serde_json::from_value(status).unwrap();
        self.status.rebalance = parsed.rebalance;
    }
}

/// One core's pass over the world, without applying anything.
macro_rules! decide {
    ($core:ident, $world:expr, $spec:expr, $md:expr, $memory:expr, $refused:expr) => {{
        let w = $world;
        let input = $core::Input {
            scaler: $core::Scaler {
                name: "llm",
                uid: SCALER_UID,
                generation: w.generation,
                spec: $spec,
                status: &w.status,
                deleting: w.deleting,
            },
            target: $md.map(|md| $core::Target {
                deployment: md,
                admission: w.admission.clone(),
                ordinals_with_pods: w.pods.clone(),
                workloads: w.workloads.clone(),
                ready_ordinals: w.ready.clone(),
            }),
            observations: &w.observations,
            observed_at: t(w.observed_at.unwrap_or(w.now)),
            sampling_problem: w.sampling_problem.as_deref(),
            now: t(w.now),
            refused: $refused,
        };
        $core::reconcile(&input, $memory)
    }};
}

static PASSES: AtomicUsize = AtomicUsize::new(0);
/// How often each write kind and event reason came up, to show what the passes exercised.
static SEEN: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn tally(outcome: &mds_core::Outcome) {
    let mut seen = SEEN.lock().unwrap();
    for e in &outcome.events {
        *seen.entry(format!("event {}", e.reason)).or_default() += 1;
    }
    if let Some(w) = &outcome.write {
        *seen.entry(format!("write {:?}", w.kind)).or_default() += 1;
    }
    if let Some(reason) = outcome
        .status
        .rebalance
        .as_ref()
        .map(|r| format!("{:?}", r.reason))
    {
        *seen.entry(format!("rebalance {reason}")).or_default() += 1;
    }
}

/// Runs one pass through both cores, compares, and applies the new core's write and status.
fn pass(w: &mut World) -> Result<(), TestCaseError> {
    let spec = w.spec();
    let md: Option<ModelDeployment> = w
        .target
        .as_ref()
        .map(|v| serde_json::from_value(v.clone()).expect("target"));
    let mut new_memory = std::mem::take(&mut w.new_memory);
    let mut old_memory = std::mem::take(&mut w.old_memory);
    let new = decide!(
        mds_core,
        &*w,
        &spec,
        md.as_ref(),
        &mut new_memory,
        w.refused_new.as_ref()
    );
    let old = decide!(
        mds_core_legacy,
        &*w,
        &spec,
        md.as_ref(),
        &mut old_memory,
        w.refused_old.as_ref()
    );
    PASSES.fetch_add(1, Ordering::Relaxed);
    tally(&new);
    prop_assert_eq!(
        format!("{new:#?}"),
        format!("{old:#?}"),
        "outcomes differ at t={}",
        w.now
    );
    prop_assert_eq!(
        format!("{new_memory:#?}"),
        format!("{old_memory:#?}"),
        "memories differ at t={}",
        w.now
    );
    w.new_memory = new_memory;
    w.old_memory = old_memory;
    let mut write_ok = true;
    if let Some(write) = &new.write {
        let doc = w.target.as_mut().expect("writes need a target");
        let ops: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&write.ops).unwrap()).expect("valid patch");
        let mut candidate = doc.clone();
        if std::mem::take(&mut w.lose_target_write)
            || json_patch::patch(&mut candidate, &ops).is_err()
        {
            write_ok = false;
        } else {
            if candidate["spec"] != doc["spec"] {
                World::bump_generation(&mut candidate);
            }
            let rv: i64 = candidate["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            candidate["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
            *doc = candidate;
            if write.vector.is_some() {
                w.last_vector = write.vector.clone();
            }
        }
    }
    if new.write_status && write_ok && !std::mem::take(&mut w.lose_status_write) {
        w.status = new.status.clone();
    }
    w.observed_at = None;
    Ok(())
}

/// A start that reaches a rebalance: prefill and decode on one instance type, decode's
/// growth never admitted and rolled back, then prefill wanting one fewer and decode one more.
fn exhaustion_prelude(setup: &mut Setup) -> Vec<Step> {
    setup.algorithm = Algorithm::Proportional;
    setup.disaggregated = true;
    setup.same_pool = true;
    setup.router = true;
    setup.shadow = false;
    setup.quota = None;
    setup.replicas = setup.replicas.max(2) + 1;
    let n = setup.replicas;
    let want = |role, replicas| Step::Want {
        role,
        replicas,
        tokens: 500.0,
    };
    vec![
        Step::Wait(15),
        want(1, n + 1),
        Step::Wait(135),
        Step::Wait(15),
        want(0, n - 1),
        want(1, n + 1),
        Step::Wait(15),
        Step::Wait(15),
    ]
}

#[test]
fn the_new_core_decides_like_the_legacy_core() {
    let mut runner = TestRunner::new(Config {
        // More for a one-off long run: OLD_VS_NEW_CASES=2000.
        cases: std::env::var("OLD_VS_NEW_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(300),
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        setup(),
        prop::bool::weighted(0.3),
        prop::collection::vec(step(), 10..45),
    );
    runner
        .run(&strategy, |(mut setup, exhaust, steps)| {
            let prelude = if exhaust {
                exhaustion_prelude(&mut setup)
            } else {
                vec![]
            };
            let mut w = World::new(&setup);
            pass(&mut w)?;
            for step in prelude.into_iter().chain(steps) {
                w.apply(step);
                pass(&mut w)?;
            }
            Ok(())
        })
        .unwrap();
    let passes = PASSES.load(Ordering::Relaxed);
    eprintln!("old_vs_new: {passes} passes compared");
    for (what, n) in SEEN.lock().unwrap().iter() {
        eprintln!("  {what}: {n}");
    }
    assert!(passes >= 3000, "only {passes} passes");
}
