//! `mds controller`: the operator loop. Argument handling and wiring only; the work is in
//! mds-operator.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mds_api::resources::TargetApiVersion;
use mds_operator::api_client::{ApiClients, ApiTimeouts};
use mds_operator::http_source::ScrapeConfig;
use mds_operator::leader::LeaseConfig;
use mds_operator::runtime::ControllerConfig;
use mds_operator::telemetry::Endpoints;
use mds_operator::{Leadership, Operator, OperatorConfig};
use tokio::sync::watch;

use super::service::{LogFormat, init_logging, kube_config, stop_signal};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Kubeconfig to use. Without it: the in-cluster service account when running in a Pod,
    /// else $KUBECONFIG or ~/.kube/config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Manage only the ModelDeploymentScalers of this namespace (and watch only its
    /// ModelDeployments, Pods and Workloads). Default: every namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of the Prometheus /metrics endpoint.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_bind_address: SocketAddr,
    /// Address of the /healthz (alive) and /readyz (watch caches synced) probes; may equal
    /// the metrics address.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8081")]
    pub health_probe_bind_address: SocketAddr,
    /// Elect a leader with a Lease so that only one replica plans and writes. Turn off only
    /// when exactly one controller runs.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (the operator's own namespace).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "POD_NAMESPACE",
        default_value = "mds-system"
    )]
    pub leader_election_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, value_name = "NAME", default_value = "mds-controller")]
    pub leader_election_id: String,
    /// Seconds a lease stays valid without renewal: a dead leader is replaced within it.
    #[arg(long, value_name = "SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=300))]
    pub lease_duration_seconds: u64,
    /// Seconds before expiry the leader renews its lease (less than the duration).
    #[arg(long, value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=299))]
    pub lease_renew_grace_seconds: u64,
    /// This replica's identity as lease holder and event reporter. Default: $POD_NAME, else
    /// the host name.
    #[arg(long, value_name = "NAME", env = "POD_NAME")]
    pub identity: Option<String>,
    /// Version the ModelDeployment API is read and written through: v1 (GPUStack's alias,
    /// the default) or v1alpha1 (clusters serving only the custom resource).
    #[arg(long, value_name = "VERSION", default_value = "v1", value_parser = ["v1", "v1alpha1"])]
    pub target_api_version: String,
    /// Scaler passes running at once across all scalers.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_concurrent_passes: u64,
    /// Per-Pod budget for reading an engine's /metrics page, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..=60000))]
    pub scrape_timeout_ms: u64,
    /// Accept any certificate from engines that serve /metrics over https (their Pod IPs are
    /// rarely in their certificates). Prefer --scrape-ca-file.
    #[arg(long)]
    pub scrape_tls_insecure: bool,
    /// A PEM CA bundle trusted for engines that serve /metrics over https.
    #[arg(long, value_name = "FILE")]
    pub scrape_ca_file: Option<PathBuf>,
    /// Engine pages read at once across all scalers.
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub scrape_concurrency: u64,
    /// Engine page bytes held in memory at once across all scrapes, in MiB: each page counts
    /// from its first byte until it is parsed, and a scrape waits (within its timeout) for
    /// room. At least the 16 MiB page cap.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(16..=4096))]
    pub scrape_max_mib_in_flight: u64,
    /// Also serve the admission webhooks in this process (one-process installs), with this
    /// PEM certificate chain; needs --webhook-key. See `mds webhook --help`.
    #[arg(long, value_name = "FILE", requires = "webhook_key")]
    pub webhook_cert: Option<PathBuf>,
    /// PEM private key of --webhook-cert.
    #[arg(long, value_name = "FILE", requires = "webhook_cert")]
    pub webhook_key: Option<PathBuf>,
    /// Address of the webhooks (with --webhook-cert).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub webhook_listen: SocketAddr,
    /// The controller's own user name for the binding fence
    /// (system:serviceaccount:NAMESPACE:NAME), with --webhook-cert.
    #[arg(long, value_name = "NAME")]
    pub operator_user: Option<String>,
    /// Log format. Fields carry the scaler, its target and decision IDs. The level comes
    /// from RUST_LOG (default info).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

fn identity(args: &Args) -> String {
    args.identity.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "mds".into())
    })
}

/// Tells everything to stop once `signal` completes.
async fn shutdown_on(signal: impl std::future::Future<Output = ()>, tx: watch::Sender<bool>) {
    signal.await;
    tracing::info!("shutting down: finishing passes in flight, then releasing the lease");
    let _ = tx.send(true);
}

async fn serve(args: &Args) -> Result<(), String> {
    if args.lease_renew_grace_seconds >= args.lease_duration_seconds {
        return Err(format!(
            "--lease-renew-grace-seconds ({}) must be less than --lease-duration-seconds ({})",
            args.lease_renew_grace_seconds, args.lease_duration_seconds
        ));
    }
    // Watches without a read timeout (kube's watcher ends a silent one), writes with connect
    // and read timeouts and a deadline each: a stalled API server delays, never stops, passes.
    let clients = ApiClients::new(
        kube_config(args.kubeconfig.as_ref()).await?,
        ApiTimeouts::default(),
    )
    .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // The handlers are installed here, before any port is bound.
    let webhook_shutdown = shutdown_tx.clone();
    let webhook_failure: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    tokio::spawn(shutdown_on(stop_signal(), shutdown_tx));
    let config = operator_config(args, identity(args))?;
    tracing::info!(
        namespace = args.namespace.as_deref().unwrap_or("<all>"),
        leader_elect = args.leader_elect,
        "controller starting"
    );
    // A certificate that does not load or a port that cannot be bound stops the start.
    let webhooks = bind_webhooks(args, &clients.write).await?;
    let operator = Operator::start(clients, config, shutdown_rx.clone())
        .await
        .map_err(|e| e.to_string())?;
    if let Some(bound) = webhooks {
        let mut stop = shutdown_rx.clone();
        let failed = webhook_failure.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = bound.serve(stopped).await {
                // The webhooks this process was asked to serve are gone: stop, and exit 1.
                tracing::error!(error = %e, "the webhooks stopped; the controller stops too");
                *failed.lock().expect("webhook failure lock") = Some(e);
                let _ = webhook_shutdown.send(true);
            }
        });
    }
    let result = operator.wait().await.map_err(|e| e.to_string());
    let webhook_failed = webhook_failure.lock().expect("webhook failure lock").take();
    match webhook_failed {
        Some(e) => Err(e),
        None => result,
    }
}

/// The admission webhooks of a one-process install (`--webhook-cert`), bound; `None` without.
async fn bind_webhooks(
    args: &Args,
    client: &kube::Client,
) -> Result<Option<super::webhook::BoundWebhooks>, String> {
    let (Some(cert), Some(key)) = (&args.webhook_cert, &args.webhook_key) else {
        return Ok(None);
    };
    let options = super::webhook::WebhookOptions {
        cert: cert.clone(),
        key: key.clone(),
        listen: args.webhook_listen,
        operator_user: args.operator_user.clone(),
        cert_check_seconds: 10,
        lookup_timeout_ms: 3000,
    };
    let lookups = mds_webhook::kube_lookups::KubeLookups::ports(
        client.clone(),
        TargetApiVersion::parse(&args.target_api_version).unwrap_or_default(),
    );
    super::webhook::BoundWebhooks::bind(&options, lookups)
        .await
        .map(Some)
}

/// `/metrics` and the probes on their addresses: one listener when both are the same.
fn listeners(args: &Args) -> Vec<(SocketAddr, Endpoints)> {
    if args.metrics_bind_address == args.health_probe_bind_address {
        return vec![(
            args.metrics_bind_address,
            Endpoints {
                metrics: true,
                probes: true,
            },
        )];
    }
    vec![
        (
            args.metrics_bind_address,
            Endpoints {
                metrics: true,
                probes: false,
            },
        ),
        (
            args.health_probe_bind_address,
            Endpoints {
                metrics: false,
                probes: true,
            },
        ),
    ]
}

/// The lease election with `--leader-elect`, else a lone leader.
fn leadership(args: &Args, identity: &str) -> Leadership {
    if !args.leader_elect {
        return Leadership::Single;
    }
    Leadership::Lease(LeaseConfig {
        namespace: args.leader_election_namespace.clone(),
        name: args.leader_election_id.clone(),
        identity: identity.to_string(),
        duration_seconds: args.lease_duration_seconds,
        grace_seconds: args.lease_renew_grace_seconds,
    })
}

/// The operator's configuration from the flags (the scrape CA read from its file).
fn operator_config(args: &Args, identity: String) -> Result<OperatorConfig, String> {
    Ok(OperatorConfig {
        leadership: leadership(args, &identity),
        listeners: listeners(args),
        controller: controller_config(args, identity)?,
    })
}

/// The runtime's configuration from the flags (the scrape CA read from its file).
fn controller_config(args: &Args, identity: String) -> Result<ControllerConfig, String> {
    let ca_pem = match &args.scrape_ca_file {
        Some(path) => {
            Some(std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?)
        }
        None => None,
    };
    Ok(ControllerConfig {
        namespace: args.namespace.clone(),
        target_version: TargetApiVersion::parse(&args.target_api_version).unwrap_or_default(),
        scrape: ScrapeConfig {
            timeout: Duration::from_millis(args.scrape_timeout_ms),
            concurrency: args.scrape_concurrency as usize,
            max_bytes_in_flight: args.scrape_max_mib_in_flight * 1024 * 1024,
            tls_insecure: args.scrape_tls_insecure,
            ca_pem,
            ..ScrapeConfig::default()
        },
        max_concurrent_passes: args.max_concurrent_passes as usize,
        instance: identity,
    })
}

pub fn run(args: &Args) -> ExitCode {
    init_logging(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mds controller: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mds controller: {e}");
            ExitCode::from(1)
        }
    }
}
