//! The GPUStack stand-in on a real API server: an [`mds_sim::World`] mirrored into Kubernetes.
//!
//! Three tasks share the world behind one lock:
//! - the **watch** applies every ModelDeployment (read at `v1alpha1`, the stored version) to the
//!   world and removes deleted ones; after a watch restart the relist removes what vanished;
//! - the **mirror** steps the world to the wall clock every `tick` (sooner when something
//!   changed) and writes what differs from what it wrote before: Pods (created, ungated and
//!   bound on admission, status, deleted gracefully while terminating), Kueue Workloads (spec,
//!   owners, status conditions) and ModelDeployment `status` through the status subresource. It
//!   adopts the UIDs the API server assigns back into the world;
//! - one **listener** per running Pod serves `/metrics` on the Pod's own loopback address and
//!   annotated port, rendered from the world at the moment it is asked.
//!
//! The stand-in decides nothing: every decision is the world's.

pub mod engines;
mod listeners;
mod mirror;
pub use mds_sim::objects;
mod router;
mod rules;
mod watch;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jiff::Timestamp;
use kube::Client;
use mds_sim::{DeploymentKey, LoadProfile, RoleSettings, World, WorldConfig, WorldEvent};
use tokio::sync::{Notify, watch as channel};
use tokio::task::JoinHandle;

use crate::Error;
use crate::load_syntax::{LoadRule, Selector};
use rules::Rules;

/// How the stand-in runs.
#[derive(Clone, Debug)]
pub struct StandInOptions {
    /// Mirror only this namespace (tests sharing a control plane); `None`: every namespace.
    pub namespace: Option<String>,
    /// Delays, budgets and default role settings of the world. Its `first_ip_slot` is replaced
    /// by [`StandInOptions::first_ip_slot`].
    pub world: WorldConfig,
    /// How often the world steps and the mirror writes.
    pub tick: Duration,
    /// The address slot of the first Pod (`mds_sim::loopback_ip`); `None` takes a range of
    /// 4,048 addresses no other stand-in of this process uses and, very likely, no other
    /// process either.
    pub first_ip_slot: Option<u32>,
    /// GPU quota per instance type (unlisted types are unlimited).
    pub quotas: BTreeMap<String, u32>,
    /// Load offered to the targets; see [`crate::load_syntax`].
    pub loads: Vec<LoadRule>,
    /// How often the mirror lists every Pod and Workload to find what was deleted from outside
    /// or orphaned. Each audit reads every object from etcd, which matters with thousands of
    /// Pods (benchmarks make it rare).
    pub audit_every: Duration,
    /// Real vLLM processes in place of the world's engines, and the router and load client
    /// that go with them; `None`: the world's engines serve the pages (the default).
    pub real_engines: Option<engines::RealEngines>,
}

impl Default for StandInOptions {
    fn default() -> Self {
        StandInOptions {
            namespace: None,
            world: WorldConfig::default(),
            tick: Duration::from_millis(250),
            first_ip_slot: None,
            quotas: BTreeMap::new(),
            loads: Vec::new(),
            audit_every: Duration::from_secs(5),
            real_engines: None,
        }
    }
}

/// How long [`StandIn::start`] waits for the first list of ModelDeployments.
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// Mirror problems kept for [`StandIn::take_errors`].
const KEPT_ERRORS: usize = 200;

/// What the tasks share.
pub(crate) struct State {
    pub world: World,
    pub loads: Rules<LoadProfile>,
    pub settings: Rules<RoleSettings>,
    pub errors: VecDeque<String>,
    /// What the stand-in itself did (real engines started), for [`StandIn::take_events`].
    pub notes: Vec<WorldEvent>,
    /// Real engines running now (`--engines vllm`).
    pub engines: Vec<engines::EngineProcess>,
}

impl State {
    /// Steps the world to the wall clock (never backwards, should the clock be set back).
    pub fn catch_up(&mut self) {
        let now = Timestamp::now().max(self.world.now());
        if let Err(e) = self.world.advance_to(now) {
            self.error(format!("stepping the world: {e}"));
        }
    }

    /// Applies load and settings rules to roles that have not got theirs.
    pub fn resolve_rules(&mut self) {
        let mut refused = self.settings.resolve(&mut self.world);
        refused.extend(self.loads.resolve(&mut self.world));
        for message in refused {
            self.error(message);
        }
    }

    pub fn note(&mut self, deployment: &DeploymentKey, message: String) {
        self.notes.push(WorldEvent {
            at: Timestamp::now(),
            deployment: deployment.clone(),
            message,
        });
    }

    pub fn error(&mut self, message: String) {
        tracing::warn!(target: "mds_lab::standin", "{message}");
        if self.errors.len() == KEPT_ERRORS {
            self.errors.pop_front();
        }
        self.errors
            .push_back(format!("{}: {message}", Timestamp::now()));
    }
}

pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Asks the mirror for a pass now.
    pub wake: Notify,
    /// Passes the mirror has finished.
    pub passes: channel::Sender<u64>,
    pub namespace: Option<String>,
    pub tick: Duration,
    pub audit_every: Duration,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a world that is still consistent per call.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running stand-in. Dropping it stops its tasks and listeners; the objects it wrote stay.
pub struct StandIn {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    router: Option<router::Router>,
    engines_folder: Option<std::path::PathBuf>,
}

impl StandIn {
    /// Starts watching and mirroring on the current Tokio runtime, and returns once the first
    /// list of ModelDeployments is in the world.
    pub async fn start(client: Client, options: StandInOptions) -> Result<StandIn, Error> {
        let mut config = options.world.clone();
        config.first_ip_slot = options.first_ip_slot.unwrap_or_else(own_ip_range);
        let mut state = State {
            world: World::new(config, Timestamp::now())?,
            loads: Rules::default(),
            settings: Rules::default(),
            errors: VecDeque::new(),
            notes: Vec::new(),
            engines: Vec::new(),
        };
        for (instance_type, gpus) in &options.quotas {
            state.world.set_quota(instance_type, Some(*gpus));
        }
        for rule in options.loads {
            state.loads.set(rule.selector, rule.profile);
        }
        let (passes, _) = channel::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Notify::new(),
            passes,
            namespace: options.namespace.clone(),
            tick: options.tick,
            audit_every: options.audit_every,
        });
        let engines_folder = options.real_engines.as_ref().map(|e| e.folder.clone());
        let (router, engines) = match options.real_engines {
            Some(config) => {
                let router = router::Router::start(shared.clone())
                    .await
                    .map_err(|source| Error::Io {
                        context: "starting the lab's router on 127.0.0.1".into(),
                        source,
                    })?;
                let engines = engines::Engines::new(config, router.address);
                (Some(router), Some(engines))
            }
            None => (None, None),
        };
        let (listed_tx, mut listed) = channel::channel(false);
        let tasks = vec![
            tokio::spawn(watch::run(client.clone(), shared.clone(), listed_tx)),
            tokio::spawn(mirror::run(client, shared.clone(), engines)),
        ];
        let standin = StandIn {
            shared,
            tasks,
            router,
            engines_folder,
        };
        let what = "the stand-in's first list of ModelDeployments";
        tokio::time::timeout(FIRST_LIST_TIMEOUT, listed.wait_for(|done| *done))
            .await
            .map_err(|_| Error::Timeout {
                what: what.into(),
                timeout: FIRST_LIST_TIMEOUT,
            })?
            .map_err(|_| Error::Timeout {
                what: format!("{what} (the watch ended)"),
                timeout: FIRST_LIST_TIMEOUT,
            })?;
        Ok(standin)
    }

    /// Offers `profile` to the targets and roles `rule` selects, from now on (or from when they
    /// appear). The most specific rule wins.
    pub fn set_load_rule(&self, rule: LoadRule) {
        self.with_state(|s| {
            s.loads.set(rule.selector, rule.profile);
            s.resolve_rules();
        });
    }

    /// Offers `profile` to one role of one target (`role: None`: every role of it).
    pub fn set_load(&self, namespace: &str, name: &str, role: Option<&str>, profile: LoadProfile) {
        self.set_load_rule(LoadRule {
            selector: selector(namespace, name, role),
            profile,
        });
    }

    /// Cold start, engine capacity and GPUs per Pod of one role (`None`: every role) of one
    /// target, for instances created from now on (and the engine capacity of current ones).
    pub fn set_role_settings(
        &self,
        namespace: &str,
        name: &str,
        role: Option<&str>,
        settings: RoleSettings,
    ) {
        self.with_state(|s| {
            s.settings.set(selector(namespace, name, role), settings);
            s.resolve_rules();
        });
    }

    /// The GPU quota of an instance type (`None`: unlimited).
    pub fn set_quota(&self, instance_type: &str, gpus: Option<u32>) {
        self.with_state(|s| s.world.set_quota(instance_type, gpus));
    }

    /// A copy of the world as it is now, for assertions.
    pub fn world(&self) -> World {
        self.shared.lock().world.clone()
    }

    /// Runs `f` on the world (stepped to now first) and has the mirror write the outcome. Do not
    /// call it from inside `f`'s own stand-in calls (one lock).
    pub fn with_world<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        self.with_state(|s| f(&mut s.world))
    }

    /// Kueue evicts an instance's Workload (see [`World::evict`]).
    pub fn evict(
        &self,
        namespace: &str,
        name: &str,
        role: &str,
        ordinal: u32,
    ) -> Result<(), Error> {
        let key = DeploymentKey::new(namespace, name);
        Ok(self.with_world(|w| w.evict(&key, role, ordinal))?)
    }

    /// The `main` container of one member restarts (see [`World::restart_member`]).
    pub fn restart_member(
        &self,
        namespace: &str,
        name: &str,
        role: &str,
        ordinal: u32,
        member: u32,
    ) -> Result<(), Error> {
        let key = DeploymentKey::new(namespace, name);
        Ok(self.with_world(|w| w.restart_member(&key, role, ordinal, member))?)
    }

    /// A member Pod is lost and recreated (see [`World::delete_pod`]).
    pub fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        role: &str,
        ordinal: u32,
        member: u32,
    ) -> Result<(), Error> {
        let key = DeploymentKey::new(namespace, name);
        Ok(self.with_world(|w| w.delete_pod(&key, role, ordinal, member))?)
    }

    /// Deactivates an instance's Workload (see [`World::park`]).
    pub fn park(&self, namespace: &str, name: &str, role: &str, ordinal: u32) -> Result<(), Error> {
        let key = DeploymentKey::new(namespace, name);
        Ok(self.with_world(|w| w.park(&key, role, ordinal))?)
    }

    /// Reactivates a parked Workload (see [`World::activate`]).
    pub fn activate(
        &self,
        namespace: &str,
        name: &str,
        role: &str,
        ordinal: u32,
    ) -> Result<(), Error> {
        let key = DeploymentKey::new(namespace, name);
        Ok(self.with_world(|w| w.activate(&key, role, ordinal))?)
    }

    /// Waits until a mirror pass that began after this call has finished: everything the world
    /// held when called is then written.
    pub async fn settle(&self) {
        let mut passes = self.shared.passes.subscribe();
        let start = *passes.borrow_and_update();
        self.shared.wake.notify_one();
        // A pass in progress may have begun before the call; the one after it did not.
        let _ = passes.wait_for(|done| *done >= start + 2).await;
    }

    /// World events (instances created, admitted, ready, retired, ...) since the last call.
    pub fn take_events(&self) -> Vec<WorldEvent> {
        let mut state = self.shared.lock();
        let mut events = state.world.take_events();
        events.append(&mut state.notes);
        events.sort_by_key(|e| e.at);
        events
    }

    /// The real engines running now (`--engines vllm`; none otherwise).
    pub fn engines(&self) -> Vec<engines::EngineProcess> {
        self.shared.lock().engines.clone()
    }

    /// Where the real engines and the load client log (`--engines vllm`).
    pub fn engines_folder(&self) -> Option<&std::path::Path> {
        self.engines_folder.as_deref()
    }

    /// The lab's router, when it runs real engines: `http://ADDRESS/NAMESPACE/NAME/v1/...`
    /// reaches a ready replica of that target.
    pub fn router(&self) -> Option<std::net::SocketAddr> {
        self.router.as_ref().map(|r| r.address)
    }

    /// Problems since the last call: writes the API server refused, listeners that could not
    /// bind, ModelDeployments the world refused. Each is retried; none stops the stand-in.
    pub fn take_errors(&self) -> Vec<String> {
        self.shared.lock().errors.drain(..).collect()
    }

    /// Stops the tasks and listeners (the same as dropping it).
    pub fn stop(self) {}

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = {
            let mut state = self.shared.lock();
            state.catch_up();
            f(&mut state)
        };
        self.shared.wake.notify_one();
        out
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn selector(namespace: &str, name: &str, role: Option<&str>) -> Selector {
    Selector {
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        role: role.map(String::from),
    }
}

/// Address slots per stand-in: sixteen `/24` blocks of 253 addresses.
const RANGE_SLOTS: u32 = 16 * 253;
/// Ranges in 127.0.0.0/8 (65,536 blocks of 253 slots), the first left to worlds that use slot 0.
const RANGES: u32 = 65_536 / 16;

/// A range of address slots for one stand-in: distinct within this process, and spread by
/// process id so that concurrent processes (test binaries, labs) rarely meet.
fn own_ip_range() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let spread = std::process::id().wrapping_mul(97).wrapping_add(n);
    (1 + spread % (RANGES - 1)) * RANGE_SLOTS
}
