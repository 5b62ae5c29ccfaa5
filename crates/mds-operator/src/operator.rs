//! One operator start for every caller: `mds controller` and the end-to-end tests run the
//! same [`Operator::start`], so what the tests exercise is the operator users run: its
//! `/metrics` and probe listeners, its leader election, its controller runtime, and a stop
//! that finishes passes in flight before it releases the lease.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api_client::ApiClients;
use crate::leader::{Election, LeaseConfig};
use crate::runtime::{self, ControllerConfig, RuntimeError};
use crate::telemetry::{self, Endpoints, Telemetry};

/// Who plans and writes.
#[derive(Clone, Debug)]
pub enum Leadership {
    /// Elect a leader with this Lease: only the holder plans and writes.
    Lease(LeaseConfig),
    /// The only replica: it leads from the start (`--leader-elect=false`).
    Single,
    /// Never leads: watches, `/metrics` and the probes run, nothing is planned or written (a
    /// check of the operator's access, or a standby kept out of an election).
    Never,
}

/// How the operator runs.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    pub controller: ControllerConfig,
    pub leadership: Leadership,
    /// Listeners of `/metrics` and the probes, each with the endpoints it serves; none when
    /// the caller reads [`Operator::telemetry`] itself.
    pub listeners: Vec<(SocketAddr, Endpoints)>,
}

/// Why the operator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("leader election cannot start: {0}")]
    Election(#[from] kube_lease_manager::LeaseManagerError),
}

/// A running operator. It runs until its `shutdown` receiver turns true; [`Operator::wait`]
/// then returns once passes in flight have finished and the lease (if held) is released.
pub struct Operator {
    telemetry: Arc<Telemetry>,
    task: JoinHandle<Result<(), RuntimeError>>,
}

impl Operator {
    /// Binds the listeners, starts the election and the controller; returns at once (the
    /// watch caches sync in the background: `/readyz` and [`Telemetry::ready`] say when). A
    /// listener that cannot bind or an election that cannot start fails the start.
    pub async fn start(
        clients: ApiClients,
        config: OperatorConfig,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Operator, StartError> {
        let telemetry = Arc::new(Telemetry::new());
        // The listeners answer from the start (probes are served while the lease is sought)
        // and stop with the shutdown, or when this start fails: `started` is dropped on the
        // way out of a failed start, or with the runtime's task after a good one.
        let (started, start_alive) = watch::channel(());
        for (addr, endpoints) in &config.listeners {
            let listener = telemetry::bind(*addr)
                .await
                .map_err(|source| StartError::Listen {
                    addr: *addr,
                    source,
                })?;
            let (mut stop, mut alive) = (shutdown.clone(), start_alive.clone());
            tokio::spawn(telemetry::serve(
                listener,
                telemetry.clone(),
                *endpoints,
                async move {
                    tokio::select! {
                        _ = stop.wait_for(|s| *s) => {}
                        // Nothing is ever sent: this ends only when `started` is dropped.
                        _ = alive.changed() => {}
                    }
                },
            ));
        }
        // Never leads: the sender stays with the runtime (a closed channel would end its
        // workers' wait for leadership).
        let (never_leads, never) = watch::channel(false);
        let (election, leader) = match &config.leadership {
            Leadership::Lease(lease) => {
                let election = Election::start(clients.write.clone(), lease).await?;
                let leader = election.leader.clone();
                (Some(election), leader)
            }
            Leadership::Single => {
                let election = Election::single();
                let leader = election.leader.clone();
                (Some(election), leader)
            }
            Leadership::Never => (None, never),
        };
        if let Some(election) = &election {
            mirror_lease_health(election, &telemetry);
        }
        let t = telemetry.clone();
        let task = tokio::spawn(async move {
            let result = runtime::run_with(clients, config.controller, t, leader, shutdown).await;
            drop((never_leads, started));
            if let Some(election) = election {
                election.release().await;
            }
            result
        });
        Ok(Operator { telemetry, task })
    }

    /// The operator's metrics, readiness and leadership.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// Until the operator has stopped: its `shutdown` turned true, passes in flight finished,
    /// the lease released. The runtime's error, if it could not run.
    pub async fn wait(self) -> Result<(), RuntimeError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

/// `/readyz` turns false while a lease this replica holds cannot be confirmed.
fn mirror_lease_health(election: &Election, telemetry: &Arc<Telemetry>) {
    let (mut healthy, telemetry) = (election.healthy.clone(), telemetry.clone());
    tokio::spawn(async move {
        loop {
            let now = *healthy.borrow_and_update();
            telemetry.lease_healthy.store(now, Ordering::Release);
            if healthy.changed().await.is_err() {
                return;
            }
        }
    });
}
