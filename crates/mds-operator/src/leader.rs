//! Leader election with a `coordination.k8s.io` Lease, through the kube-lease-manager crate
//! (maintained, built for kube 5): only the holder runs passes and writes. The holder renews
//! the lease `grace` seconds before it expires; when it dies, another replica takes over
//! within the lease duration; a graceful shutdown releases the lease at once.

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the lease is held.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// Seconds a lease stays valid without renewal.
    pub duration_seconds: u64,
    /// Seconds before expiry the holder renews.
    pub grace_seconds: u64,
}

/// Whether this replica leads, and the task that keeps or seeks the lease.
pub struct Election {
    pub leader: watch::Receiver<bool>,
    task: Option<JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>>,
    /// Keeps the channel open when there is no election.
    _always: Option<watch::Sender<bool>>,
}

impl Election {
    /// No election: this replica always leads (one replica, or a workstation run).
    pub fn single() -> Election {
        let (tx, rx) = watch::channel(true);
        Election {
            leader: rx,
            task: None,
            _always: Some(tx),
        }
    }

    /// Seeks and keeps the lease.
    pub async fn start(
        client: Client,
        config: &LeaseConfig,
    ) -> Result<Election, LeaseManagerError> {
        let manager = LeaseManagerBuilder::new(client, &config.name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(config.duration_seconds)
            .with_grace(config.grace_seconds)
            .build()
            .await?;
        let (leader, task) = manager.watch().await;
        Ok(Election {
            leader,
            task: Some(task),
            _always: None,
        })
    }

    /// Releases the lease (when held) so another replica takes over without waiting for it to
    /// expire. Every other receiver of `leader` must be dropped first.
    pub async fn release(self) {
        let Election { leader, task, .. } = self;
        drop(leader);
        if let Some(task) = task {
            match task.await {
                Ok(Ok(_)) => tracing::info!("leader lease released"),
                Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease failed"),
                Err(e) => tracing::warn!(error = %e, "the lease task failed"),
            }
        }
    }
}
