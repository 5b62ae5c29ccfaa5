//! Real vLLM engines in place of the world's (`--engines vllm`): one process per running
//! replica, started when Kueue admits it (its start-up is the cold start: the replica turns
//! Ready when `/health` answers), stopped when the replica goes, on the leader Pod's own address
//! and port. A process that dies is not restarted: the Pod stops answering, as a crashed
//! engine's does, until the world restarts its container or replaces the Pod (a new
//! restart count or address starts a new process). At most [`MAX_ENGINES`] run at once.
//!
//! The load client runs here too: one per target with a load, sending the load profile of the
//! target's first role through the lab's router (see [`super::router`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use mds_sim::{DeploymentKey, LoadProfile, PodPhase, PodView};
use tokio::task::JoinHandle;

use super::Shared;
use crate::process::ManagedChild;
use crate::vllm::{MAX_ENGINES, VllmInstall, phases};

/// How often a starting engine's `/health` is asked.
const HEALTH_EVERY: Duration = Duration::from_millis(500);

/// Real engines: what they run and where their logs go.
#[derive(Clone, Debug)]
pub struct RealEngines {
    pub install: VllmInstall,
    /// Engine and load client logs, and the load client script.
    pub folder: PathBuf,
    /// How much load is sent of a profile that never ends.
    pub load_horizon: Duration,
}

/// One replica's engine process, as tests and `mds lab up` see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineProcess {
    pub deployment: DeploymentKey,
    pub role: String,
    pub ordinal: u32,
    pub pid: u32,
    pub address: String,
    pub log: PathBuf,
}

/// A replica's leader Pod incarnation: a new address or container restart is a new process.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Incarnation {
    ip_slot: u32,
    restart_count: u32,
}

struct Running {
    child: ManagedChild,
    view: EngineProcess,
    health: JoinHandle<()>,
    /// Its end was reported.
    ended: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.health.abort();
        self.child.kill();
    }
}

struct LoadClient {
    _child: ManagedChild,
    profile: LoadProfile,
    origin: Timestamp,
}

/// The processes of one stand-in; dropping it stops them all.
pub(crate) struct Engines {
    config: RealEngines,
    /// The lab's router, which the load client sends to.
    router: std::net::SocketAddr,
    running: BTreeMap<Incarnation, Running>,
    /// Replicas refused for want of room, reported once each.
    refused: BTreeSet<Incarnation>,
    clients: BTreeMap<DeploymentKey, LoadClient>,
    script: Option<PathBuf>,
}

impl Engines {
    pub fn new(config: RealEngines, router: std::net::SocketAddr) -> Engines {
        Engines {
            config,
            router,
            running: BTreeMap::new(),
            refused: BTreeSet::new(),
            clients: BTreeMap::new(),
            script: None,
        }
    }

    /// Starts an engine for every running leader Pod that has none, stops those whose Pod is
    /// gone, terminating or replaced, reports engines that ended, and keeps each target's load
    /// client on its current profile.
    pub fn reconcile(&mut self, pods: &[PodView], shared: &Arc<Shared>) {
        let wanted: BTreeMap<Incarnation, &PodView> = pods
            .iter()
            .filter(|p| {
                p.member_index == 0
                    && p.phase == PodPhase::Running
                    && p.pod_ip.is_some()
                    && p.metadata.deletion_timestamp.is_none()
            })
            .map(|p| {
                let key = Incarnation {
                    ip_slot: p.ip_slot,
                    restart_count: p.restart_count,
                };
                (key, p)
            })
            .collect();
        self.running.retain(|key, _| wanted.contains_key(key));
        self.refused.retain(|key| wanted.contains_key(key));
        for running in self.running.values_mut() {
            if !running.ended
                && let Ok(Some(status)) = running.child.try_wait()
            {
                running.ended = true;
                let v = &running.view;
                shared.lock().error(format!(
                    "{} {} ordinal {}: the engine (pid {}) ended ({status}); the Pod no longer \
                     answers until its container restarts. Log: {}",
                    v.deployment,
                    v.role,
                    v.ordinal,
                    v.pid,
                    v.log.display()
                ));
            }
        }
        for (key, pod) in wanted {
            if self.running.contains_key(&key) || self.refused.contains(&key) {
                continue;
            }
            if self.running.len() >= MAX_ENGINES {
                self.refused.insert(key);
                shared.lock().error(format!(
                    "{} {} ordinal {}: not started: at most {MAX_ENGINES} real engines run at once \
                     on this machine; the replica stays starting until one stops",
                    pod.deployment, pod.role, pod.ordinal
                ));
                continue;
            }
            match self.start(pod, shared) {
                Ok(running) => {
                    self.running.insert(key, running);
                }
                Err(message) => {
                    self.refused.insert(key);
                    shared.lock().error(message);
                }
            }
        }
        // A replica refused for room is retried once room is made.
        if self.running.len() < MAX_ENGINES {
            self.refused.clear();
        }
        self.publish(shared);
        self.reconcile_load_clients(shared);
    }

    fn start(&self, pod: &PodView, shared: &Arc<Shared>) -> Result<Running, String> {
        let ip = pod.pod_ip.clone().unwrap_or_default();
        let address = format!("{ip}:{}", pod.metrics_port);
        let what = format!("{} {} ordinal {}", pod.deployment, pod.role, pod.ordinal);
        let log = self.config.folder.join(format!(
            "engine-{}-{}-{}-{}-r{}.log",
            pod.deployment.namespace, pod.deployment.name, pod.role, pod.ordinal, pod.restart_count
        ));
        let out = File::create(&log).map_err(|e| format!("{what}: {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{what}: {}: {e}", log.display()))?;
        let mut command = self.config.install.engine_command(
            &ip,
            pod.metrics_port,
            &served_name(&pod.deployment),
        );
        command.stdout(out).stderr(err).stdin(Stdio::null());
        let child = ManagedChild::spawn_group(&what, command)
            .map_err(|e| format!("{what}: cannot start the engine: {e}"))?;
        let view = EngineProcess {
            deployment: pod.deployment.clone(),
            role: pod.role.clone(),
            ordinal: pod.ordinal,
            pid: child.id(),
            address: address.clone(),
            log,
        };
        shared.lock().note(
            &pod.deployment,
            format!(
                "{} ordinal {} engine started: pid {}, {address}, log {}",
                pod.role,
                pod.ordinal,
                view.pid,
                view.log.display()
            ),
        );
        let health = tokio::spawn(wait_healthy(shared.clone(), view.clone()));
        Ok(Running {
            child,
            view,
            health,
            ended: false,
        })
    }

    fn publish(&self, shared: &Arc<Shared>) {
        let processes = self
            .running
            .values()
            .filter(|r| !r.ended)
            .map(|r| r.view.clone())
            .collect();
        shared.lock().engines = processes;
    }

    fn reconcile_load_clients(&mut self, shared: &Arc<Shared>) {
        let wanted: BTreeMap<DeploymentKey, (LoadProfile, Timestamp)> = {
            let state = shared.lock();
            state
                .world
                .deployment_keys()
                .into_iter()
                .filter_map(|key| {
                    let role = first_role(&state.world, &key)?;
                    let (profile, origin) = state.world.load_of(&key, &role)?;
                    Some((key, (profile.clone(), origin)))
                })
                .collect()
        };
        self.clients.retain(|key, client| {
            wanted
                .get(key)
                .is_some_and(|(p, o)| *p == client.profile && *o == client.origin)
        });
        for (key, (profile, origin)) in wanted {
            if self.clients.contains_key(&key) {
                continue;
            }
            match self.start_client(&key, &profile, origin) {
                Ok(Some(child)) => {
                    self.clients.insert(
                        key,
                        LoadClient {
                            _child: child,
                            profile,
                            origin,
                        },
                    );
                }
                Ok(None) => {}
                Err(message) => shared.lock().error(message),
            }
        }
    }

    fn start_client(
        &mut self,
        key: &DeploymentKey,
        profile: &LoadProfile,
        origin: Timestamp,
    ) -> Result<Option<ManagedChild>, String> {
        let origin_seconds = origin.as_millisecond() as f64 / 1000.0;
        let phases = phases(
            profile,
            origin_seconds,
            self.config.load_horizon.as_secs_f64(),
        );
        if phases.is_empty() {
            return Ok(None);
        }
        let script = match &self.script {
            Some(script) => script.clone(),
            None => {
                let script = self.config.folder.join("load_client.py");
                std::fs::write(&script, crate::vllm::LOAD_CLIENT)
                    .map_err(|e| format!("writing {}: {e}", script.display()))?;
                self.script = Some(script.clone());
                script
            }
        };
        let log = self
            .config
            .folder
            .join(format!("load-{}-{}.log", key.namespace, key.name));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let base_url = format!("http://{}/{}/{}", self.router, key.namespace, key.name);
        let mut command =
            self.config
                .install
                .load_client_command(&script, &base_url, &served_name(key), &phases);
        command.stdout(out).stderr(err).stdin(Stdio::null());
        ManagedChild::spawn_group(&format!("load client of {key}"), command)
            .map(Some)
            .map_err(|e| format!("{key}: cannot start the load client: {e}"))
    }
}

/// The model name the engines of a target serve, and requests and metrics carry: the target's
/// name (GPUStack serves a deployment under its model's name; the lab's model has none).
pub fn served_name(key: &DeploymentKey) -> String {
    key.name.clone()
}

/// The target's first role, which the router and the load client serve.
pub(crate) fn first_role(world: &mds_sim::World, key: &DeploymentKey) -> Option<String> {
    let md = world.deployment(key)?;
    md.spec.roles.first().map(|r| r.name.clone())
}

/// Asks `/health` until it answers 200, then tells the world the replica is Ready.
async fn wait_healthy(shared: Arc<Shared>, engine: EngineProcess) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build();
    let Ok(client) = client else {
        return;
    };
    let url = format!("http://{}/health", engine.address);
    loop {
        tokio::time::sleep(HEALTH_EVERY).await;
        let healthy = client
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if healthy {
            break;
        }
    }
    {
        let mut state = shared.lock();
        state.catch_up();
        if let Err(e) = state
            .world
            .engine_ready(&engine.deployment, &engine.role, engine.ordinal)
        {
            state.error(format!("{}: marking ready: {e}", engine.deployment));
        }
    }
    shared.wake.notify_one();
}
