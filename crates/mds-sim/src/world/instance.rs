//! One instance (ordinal) of a role: its member Pods, its Kueue Workload and its engine, and
//! the lifecycle Composing → Gated → Starting → Ready → Terminating.

use jiff::Timestamp;
use mds_api::target::{LoadBalance, RoleKind, TargetRole};

use crate::engine::request::{RequestEngine, RequestProfile};
use crate::engine::{EngineFlavor, EngineState, WorkKind};

/// Where an instance's Pods are in their life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Pods exist (gated); the Workload is created at the given time.
    Composing {
        workload_at: Timestamp,
    },
    /// The Workload exists; Pods wait for Kueue (quota, admission checks, or unparking).
    Gated,
    /// Admitted and ungated: engines load until the given time.
    Starting {
        ready_at: Timestamp,
    },
    Ready,
    /// Deleted with its Workload by a retirement; the Pods are gone at the given time.
    Terminating {
        gone_at: Timestamp,
    },
}

/// A member Pod.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Member {
    pub index: u32,
    pub name: String,
    pub uid: String,
    pub ip_slot: u32,
    /// Restarts of the `main` container since the Pod was created.
    pub restart_count: u32,
    pub created_at: Timestamp,
}

/// The instance's Kueue Workload.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WorkloadState {
    pub uid: String,
    pub created_at: Timestamp,
    /// Queue order: creation order across the world; kept through evictions.
    pub sequence: u64,
    /// `spec.active`; false is parked.
    pub active: bool,
    pub quota_reserved_at: Option<Timestamp>,
    pub admitted_at: Option<Timestamp>,
    /// Evicted (preempted) and not re-reserved since.
    pub evicted: bool,
    /// Since when it has waited for quota (for parking).
    pub waiting_since: Timestamp,
}

impl WorkloadState {
    pub fn holds_quota(&self) -> bool {
        self.quota_reserved_at.is_some()
    }

    /// Releases quota and admission (eviction, deactivation).
    pub fn release(&mut self, now: Timestamp) {
        self.quota_reserved_at = None;
        self.admitted_at = None;
        self.waiting_since = now;
    }
}

/// What an instance was created with (later spec edits do not roll it).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shape {
    pub kind: RoleKind,
    pub size: u32,
    pub instance_type: String,
    pub port: u16,
    pub gpus: u32,
    pub flavor: Option<EngineFlavor>,
    pub managed: bool,
    pub load_balance: LoadBalance,
}

/// The engine arguments that make each member a data-parallel engine with its own endpoint.
const DATA_PARALLEL_FLAGS: &[&str] = &["--data-parallel-size", "--dp-size", "--dp"];

/// How a role's members serve, as this world's GPUStack reports it: `External` when its engine
/// arguments ask for data parallelism (every member runs its own engine and HTTP server),
/// `Internal` otherwise (the leader serves for the whole instance).
pub(crate) fn load_balance_of(role: &TargetRole) -> LoadBalance {
    let data_parallel = role.extra_args.iter().any(|arg| {
        let flag = arg.split('=').next().unwrap_or_default();
        DATA_PARALLEL_FLAGS.contains(&flag)
    });
    if data_parallel {
        LoadBalance::External
    } else {
        LoadBalance::Internal
    }
}

/// The status value of a [`LoadBalance`].
pub(crate) fn load_balance_name(load_balance: LoadBalance) -> &'static str {
    match load_balance {
        LoadBalance::Internal => "Internal",
        LoadBalance::External => "External",
        LoadBalance::Other => "Unknown",
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Instance {
    pub ordinal: u32,
    pub group_name: String,
    pub shape: Shape,
    pub created_at: Timestamp,
    pub phase: Phase,
    pub members: Vec<Member>,
    /// `None` while composing and after deletion.
    pub workload: Option<WorkloadState>,
    /// The leader's engine process while it runs: the fluid model, or the page source of the
    /// request-level one.
    pub engine: Option<EngineState>,
    /// The request-level engine while it runs, when the deployment is offered requests.
    pub requests: Option<Box<RequestEngine>>,
    /// Withdrawn from routing by a retirement (no `endpoint-eligible`, no new load).
    pub withdrawn: bool,
}

impl Instance {
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Receives a share of the role's load: ready and routed.
    pub fn is_routed(&self) -> bool {
        self.is_ready() && !self.withdrawn
    }

    pub fn is_terminating(&self) -> bool {
        matches!(self.phase, Phase::Terminating { .. })
    }

    pub fn member_uids(&self) -> Vec<String> {
        self.members.iter().map(|m| m.uid.clone()).collect()
    }

    pub fn restarted(&self) -> bool {
        self.members.iter().any(|m| m.restart_count > 0)
    }

    /// Starts the leader's engine process; with `requests`, the request-level engine too, its
    /// clock at the given second of the deployment's request timeline.
    pub fn start_engine(&mut self, now: Timestamp, requests: Option<(&RequestProfile, f64)>) {
        self.engine = self
            .shape
            .flavor
            .map(|flavor| EngineState::new(flavor, WorkKind::of(&self.shape.kind), now));
        self.requests = match (self.shape.flavor, requests) {
            (Some(flavor), Some((profile, clock))) => {
                let (ttft, itl) = flavor.layouts();
                RequestEngine::with_layouts(*profile, ttft, itl)
                    .ok()
                    .map(|mut engine| {
                        engine.advance_to(clock);
                        Box::new(engine)
                    })
            }
            _ => None,
        };
    }

    /// Stops the engine process; returns the requests it held, which are lost.
    #[must_use]
    pub fn stop_engine(&mut self) -> Vec<u64> {
        self.engine = None;
        self.requests
            .take()
            .map(|e| e.unfinished_ids())
            .unwrap_or_default()
    }
}

/// The Kueue pod-group (and Workload) name: `gpustack-fnv64-` and 16 hex digits of FNV-1a
/// over namespace, deployment, role and ordinal (31 characters; the exact input GPUStack
/// hashes is not published, so names match in shape only).
pub(crate) fn pod_group_name(
    namespace: &str,
    deployment: &str,
    role: &str,
    ordinal: u32,
) -> String {
    let text = format!("{namespace}/{deployment}/{role}/{ordinal}");
    format!("gpustack-fnv64-{:016x}", fnv1a(text.as_bytes()))
}

pub(crate) use mds_api::target::fnv1a;

/// A member Pod's name: `<md>-<role>-r<ordinal>-m<member>` above `size: 1`; at `size: 1` a
/// `generateName` of `<md>-<role>-` (cut to 58 characters) plus five characters from the
/// Kubernetes suffix alphabet, derived from the Pod's serial so names are deterministic.
pub(crate) fn pod_name(
    deployment: &str,
    role: &str,
    size: u32,
    ordinal: u32,
    member: u32,
    serial: u64,
) -> String {
    if size > 1 {
        return format!("{deployment}-{role}-r{ordinal}-m{member}");
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut base: String = format!("{deployment}-{role}-");
    base.truncate(58);
    let mut hash = fnv1a(format!("{deployment}/{role}/{serial}").as_bytes());
    for _ in 0..5 {
        base.push(ALPHABET[(hash % ALPHABET.len() as u64) as usize] as char);
        hash /= ALPHABET.len() as u64;
    }
    base
}

/// A loopback address for an address slot: slots 0..=252 are `127.0.0.2`..`127.0.0.254`, later
/// slots continue in `127.0.1.x` and so on (x in 2..=254), so `127.0.0.1` stays free.
pub fn loopback_ip(slot: u32) -> String {
    let block = slot / 253;
    let host = 2 + slot % 253;
    format!("127.{}.{}.{host}", (block / 256) % 256, block % 256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_have_the_gpustack_shape() {
        let name = pod_group_name("serving", "llm", "decode", 3);
        assert_eq!(name.len(), 31);
        assert!(name.starts_with("gpustack-fnv64-"));
        assert_ne!(name, pod_group_name("serving", "llm", "decode", 4));
    }

    #[test]
    fn pod_names_by_size() {
        assert_eq!(pod_name("llm", "decode", 2, 15, 1, 7), "llm-decode-r15-m1");
        let generated = pod_name("llm", "server", 1, 0, 0, 7);
        assert_eq!(generated.len(), "llm-server-".len() + 5);
        assert_ne!(generated, pod_name("llm", "server", 1, 0, 0, 8));
        let long = pod_name(&"a".repeat(60), "server", 1, 0, 0, 1);
        assert_eq!(long.len(), 63);
    }

    #[test]
    fn loopback_slots_skip_the_first_address() {
        assert_eq!(loopback_ip(0), "127.0.0.2");
        assert_eq!(loopback_ip(252), "127.0.0.254");
        assert_eq!(loopback_ip(253), "127.0.1.2");
    }
}
