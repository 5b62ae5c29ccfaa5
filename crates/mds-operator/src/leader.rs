//! Leader election with a `coordination.k8s.io` Lease, through the kube-lease-manager crate
//! (maintained, built for kube 5): only the holder runs passes and writes. The holder renews
//! the lease `grace` seconds before it expires; when it dies, another replica takes over
//! within the lease duration; a graceful shutdown releases the lease at once.
//!
//! The manager keeps saying "leader" while its renewals fail (it logs and retries), so a
//! replica cut off from the API server would go on believing it leads after its lease expired
//! and another replica took over. A gate in front of it therefore confirms the lease: it reads
//! the Lease every few seconds, and the flag the controller sees stays true only while a read
//! within the last lease duration showed this replica holding a lease renewed within that
//! duration. Renewals that keep failing turn the flag false by themselves; a confirmed lease
//! turns it true again.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

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
    /// False while the manager holds the lease but the gate cannot confirm it (a replica cut
    /// off from the API server): what `/readyz` follows.
    pub healthy: watch::Receiver<bool>,
    task: Option<JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>>,
    gate: Option<JoinHandle<()>>,
    /// Keeps the channel open when there is no election.
    _always: Option<watch::Sender<bool>>,
}

impl Election {
    /// No election: this replica always leads (one replica, or a workstation run).
    pub fn single() -> Election {
        let (tx, rx) = watch::channel(true);
        Election {
            leader: rx.clone(),
            healthy: rx,
            task: None,
            gate: None,
            _always: Some(tx),
        }
    }

    /// Seeks and keeps the lease.
    pub async fn start(
        client: Client,
        config: &LeaseConfig,
    ) -> Result<Election, LeaseManagerError> {
        let manager = LeaseManagerBuilder::new(client.clone(), &config.name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(config.duration_seconds)
            .with_grace(config.grace_seconds)
            .build()
            .await?;
        let (held, task) = manager.watch().await;
        let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
        let (name, identity) = (config.name.clone(), config.identity.clone());
        let duration = Duration::from_secs(config.duration_seconds.max(1));
        let read = move || {
            let (leases, name, identity) = (leases.clone(), name.clone(), identity.clone());
            async move {
                let lease = leases.get_opt(&name).await.ok().flatten()?;
                Some(confirms(&lease, &identity, Timestamp::now(), duration))
            }
        };
        let (tx, leader) = watch::channel(*held.borrow());
        let (healthy_tx, healthy) = watch::channel(true);
        let gate = tokio::spawn(confirm_lease(held, tx, healthy_tx, duration, read));
        Ok(Election {
            leader,
            healthy,
            task: Some(task),
            gate: Some(gate),
            _always: None,
        })
    }

    /// Releases the lease (when held) so another replica takes over without waiting for it to
    /// expire. Every other receiver of `leader` must be dropped first.
    pub async fn release(self) {
        let Election {
            leader,
            healthy,
            task,
            gate,
            ..
        } = self;
        drop((leader, healthy));
        // The gate holds the manager's receiver: the manager releases once it is gone.
        if let Some(gate) = gate {
            gate.abort();
            let _ = gate.await;
        }
        if let Some(task) = task {
            match task.await {
                Ok(Ok(_)) => tracing::info!("leader lease released"),
                Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease failed"),
                Err(e) => tracing::warn!(error = %e, "the lease task failed"),
            }
        }
    }
}

/// Whether `lease` shows `identity` holding it, renewed within `duration` of `now`.
pub fn confirms(lease: &Lease, identity: &str, now: Timestamp, duration: Duration) -> bool {
    let Some(spec) = lease.spec.as_ref() else {
        return false;
    };
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref());
    spec.holder_identity.as_deref() == Some(identity)
        && renewed.is_some_and(|t| {
            let age = now.duration_since(t.0);
            age < jiff::SignedDuration::try_from(duration).unwrap_or(jiff::SignedDuration::MAX)
        })
}

/// Whether the flag stays up: the manager says this replica leads, and the lease was last
/// confirmed less than `duration` ago.
pub fn still_leads(
    manager_leads: bool,
    confirmed_at: Option<Instant>,
    now: Instant,
    duration: Duration,
) -> bool {
    manager_leads && confirmed_at.is_some_and(|at| now.saturating_duration_since(at) < duration)
}

/// Mirrors `held` (the manager's flag) into `leader` while reads of the lease (`read`:
/// `Some(true)` confirms, `Some(false)` denies, `None` could not read) keep confirming it,
/// checking a few times per lease duration; `healthy` is false while the manager holds a lease
/// the reads do not confirm. Ends when either channel closes.
pub async fn confirm_lease<F, R>(
    mut held: watch::Receiver<bool>,
    leader: watch::Sender<bool>,
    healthy: watch::Sender<bool>,
    duration: Duration,
    read: R,
) where
    R: Fn() -> F,
    F: Future<Output = Option<bool>>,
{
    let every = (duration / 4).max(Duration::from_millis(250));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The manager has just acquired the lease when it says so: that counts as confirmed.
    let mut confirmed_at = held.borrow().then(Instant::now);
    loop {
        tokio::select! {
            changed = held.changed() => {
                if changed.is_err() {
                    let _ = leader.send(false);
                    return;
                }
                confirmed_at = held.borrow().then(Instant::now);
            }
            _ = ticks.tick() => {
                if *held.borrow() {
                    match read().await {
                        Some(true) => confirmed_at = Some(Instant::now()),
                        Some(false) => confirmed_at = None,
                        None => {}
                    }
                }
            }
            _ = leader.closed() => return,
        }
        let leads = still_leads(*held.borrow(), confirmed_at, Instant::now(), duration);
        if *leader.borrow() != leads {
            if leads {
                tracing::info!("the leader lease is confirmed again");
            } else if *held.borrow() {
                tracing::warn!(
                    "the leader lease could not be confirmed for a lease duration; not leading \
                     until it is"
                );
            }
            let _ = leader.send(leads);
        }
        healthy.send_if_modified(|h| {
            let now = leads || !*held.borrow();
            std::mem::replace(h, now) != now
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU8, Ordering};

    fn lease(holder: &str, renewed: Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_confirms_its_holder_while_renewed_within_the_duration() {
        let now: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let fifteen = Duration::from_secs(15);
        let ago = |s: i64| now - jiff::SignedDuration::from_secs(s);
        assert!(confirms(&lease("a", ago(5)), "a", now, fifteen));
        assert!(
            !confirms(&lease("a", ago(20)), "a", now, fifteen),
            "expired"
        );
        assert!(
            !confirms(&lease("b", ago(1)), "a", now, fifteen),
            "another holder"
        );
        assert!(!confirms(&Lease::default(), "a", now, fifteen));
    }

    /// 0: cannot read, 1: confirms, 2: denies.
    fn reader(answer: Arc<AtomicU8>) -> impl Fn() -> std::future::Ready<Option<bool>> {
        move || {
            std::future::ready(match answer.load(Ordering::SeqCst) {
                1 => Some(true),
                2 => Some(false),
                _ => None,
            })
        }
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_flag_expires_when_the_lease_cannot_be_confirmed_and_returns_when_it_is() {
        let (held_tx, held) = watch::channel(true);
        let (tx, leader) = watch::channel(true);
        let (healthy_tx, healthy) = watch::channel(true);
        let answer = Arc::new(AtomicU8::new(0));
        let duration = Duration::from_secs(15);
        tokio::spawn(confirm_lease(
            held,
            tx,
            healthy_tx,
            duration,
            reader(answer.clone()),
        ));
        // Renewals fail (nothing can be read) while the manager still says it leads.
        tokio::time::sleep(Duration::from_secs(14)).await;
        settle().await;
        assert!(
            *leader.borrow(),
            "within one lease duration of the acquisition"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        settle().await;
        assert!(!*leader.borrow(), "a lease duration without confirmation");
        assert!(
            !*healthy.borrow(),
            "holding a lease it cannot confirm: not ready"
        );
        answer.store(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(4)).await;
        settle().await;
        assert!(*leader.borrow(), "confirmed again");
        assert!(*healthy.borrow());
        // Another holder: down at the next read, whatever the manager says.
        answer.store(2, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(4)).await;
        settle().await;
        assert!(!*leader.borrow());
        // The manager stepping down is followed at once.
        answer.store(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(4)).await;
        settle().await;
        assert!(*leader.borrow());
        held_tx.send(false).unwrap();
        settle().await;
        assert!(!*leader.borrow());
        assert!(*healthy.borrow(), "a standby is healthy");
    }
}
