//! The controller's Kubernetes clients and their timeouts. Without them, kube-rs connects for
//! up to 30 s and waits for an answer forever: one half-open connection to the API server
//! would hold a pass permit for good, and sixteen of them every scaler.
//!
//! Two clients from one configuration, because watches and writes need different bounds:
//! - **watch**: connect timeout only. A watch is silent for as long as nothing changes, so a
//!   read timeout would cut healthy watches; kube's watcher ends a watch that has been silent
//!   past its server-side timeout (290 s) and a margin, and starts it again.
//! - **write**: connect and read timeouts (the read timeout counts from the request, not from
//!   when its pooled connection went idle), for the target and status writes, finalizers,
//!   events, the leader Lease and the webhooks' lookups. On top of it every write of the
//!   `Cluster` port has a deadline of its own (`KubeCluster::with_write_deadline`): a write
//!   that has not been answered by then is reported as `WriteError::Unavailable`, so the
//!   worker retries it with backoff like any other outage.

use std::time::Duration;

use kube::Client;

/// Bounds on talking to the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiTimeouts {
    /// Establishing a connection (TCP and TLS).
    pub connect: Duration,
    /// Waiting for the API server's next bytes once a request is sent (write client only).
    pub read: Duration,
    /// A whole write through the `Cluster` port, from sending it to its answer. Longer than
    /// the API server's admission webhooks may take (ours answer in milliseconds; a webhook's
    /// `timeoutSeconds` is at most 30 s, 10 s by default), short against an interval.
    pub write_deadline: Duration,
}

/// Connect 5 s, read 15 s, write deadline 20 s.
pub const DEFAULT_TIMEOUTS: ApiTimeouts = ApiTimeouts {
    connect: Duration::from_secs(5),
    read: Duration::from_secs(15),
    write_deadline: Duration::from_secs(20),
};

impl Default for ApiTimeouts {
    fn default() -> Self {
        DEFAULT_TIMEOUTS
    }
}

/// The clients a controller runs with.
#[derive(Clone)]
pub struct ApiClients {
    /// Watches and discovery.
    pub watch: Client,
    /// Writes, the Lease and lookups.
    pub write: Client,
    pub write_deadline: Duration,
}

impl ApiClients {
    /// One client for everything, as built by the caller, with the default write deadline
    /// (tests and embedders that bring their own client).
    pub fn shared(client: Client) -> ApiClients {
        ApiClients {
            watch: client.clone(),
            write: client,
            write_deadline: DEFAULT_TIMEOUTS.write_deadline,
        }
    }

    /// Both clients from one configuration, with `timeouts` applied.
    pub fn new(config: kube::Config, timeouts: ApiTimeouts) -> Result<ApiClients, kube::Error> {
        let (watch, write) = configs(config, timeouts);
        Ok(ApiClients {
            watch: Client::try_from(watch)?,
            write: Client::try_from(write)?,
            write_deadline: timeouts.write_deadline,
        })
    }
}

/// The watch and write configurations made from `config`.
pub fn configs(config: kube::Config, timeouts: ApiTimeouts) -> (kube::Config, kube::Config) {
    let mut watch = config;
    watch.connect_timeout = Some(timeouts.connect);
    let mut write = watch.clone();
    write.read_timeout = Some(timeouts.read);
    // A pooled connection's idle time must not count against the next answer.
    write.reset_reader_on_write = true;
    write.write_timeout = Some(timeouts.read);
    (watch, write)
}
