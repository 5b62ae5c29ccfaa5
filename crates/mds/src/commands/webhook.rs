//! `mds webhook`: serves the admission webhooks over TLS until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mds_api::resources::TargetApiVersion;
use mds_webhook::kube_lookups::KubeLookups;
use mds_webhook::ports::Lookups;
use mds_webhook::router::{WebhookState, router};
use mds_webhook::tls::{CertificateFiles, ReloadingCertificate};

use super::service::{LogFormat, init_logging, kube_client, stop_signal};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// PEM certificate chain to serve, serving certificate first. Rewriting the file (with
    /// --key) swaps the certificate for new connections without a restart.
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// PEM private key of --cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Address and port to listen on; port 0 picks a free one (printed at start).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// An extra check of the binding fence, off by default: binds, commits and releases must
    /// also come from this user (system:serviceaccount:NAMESPACE:NAME). The fence decides by
    /// what a write carries; set this only where the target's writes reach the API server under
    /// the controller's own identity (the CRD alone, --target-api-version v1alpha1). Through
    /// GPUStack's aggregated v1 API every write arrives as GPUStack's and would be refused.
    #[arg(long, value_name = "NAME")]
    pub operator_user: Option<String>,
    /// Kubeconfig for reading targets and scalers (default: the in-cluster service account,
    /// then $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH", conflicts_with = "no_api_lookups")]
    pub kubeconfig: Option<PathBuf>,
    /// FOR TESTS ONLY: answer without reading the cluster. Scaler validation then skips the
    /// target-dependent rules (with a warning on every request) and the fence refuses every
    /// bind, release and orphan recovery, since it cannot check the scaler they name.
    #[arg(long)]
    pub no_api_lookups: bool,
    /// Seconds between checks of --cert and --key for new content.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub cert_check_seconds: u64,
    /// Version ModelDeployments are read through: v1 (default) or v1alpha1, as for the
    /// controller.
    #[arg(long, value_name = "VERSION", default_value = "v1", value_parser = ["v1", "v1alpha1"])]
    pub target_api_version: String,
    /// Milliseconds one target or scaler lookup may take before the webhook answers without it.
    #[arg(long, value_name = "MS", default_value_t = 3000, value_parser = clap::value_parser!(u64).range(100..=25_000))]
    pub lookup_timeout_ms: u64,
    /// Log format: text lines, or one JSON object per line (as the controller's). The level
    /// comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

pub fn run(args: &Args) -> ExitCode {
    init_logging(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    runtime.block_on(serve(args))
}

fn fail(message: &str) -> ExitCode {
    super::emit("", &format!("mds webhook: {message}\n"));
    ExitCode::from(2)
}

/// What a webhook server needs, from `mds webhook` or `mds controller --webhook-cert`.
pub struct WebhookOptions {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub listen: SocketAddr,
    pub operator_user: Option<String>,
    pub cert_check_seconds: u64,
    pub lookup_timeout_ms: u64,
}

/// Webhooks whose certificate loaded and whose port is bound: what can fail at start has.
pub struct BoundWebhooks {
    listener: tokio::net::TcpListener,
    address: String,
    certificate: std::sync::Arc<ReloadingCertificate>,
    state: WebhookState,
    cert_check_seconds: u64,
}

impl BoundWebhooks {
    /// Loads the certificate and binds the port.
    pub async fn bind(options: &WebhookOptions, lookups: Lookups) -> Result<BoundWebhooks, String> {
        match &options.operator_user {
            Some(user) => tracing::info!(%user, "the binding fence also checks the operator user"),
            None => tracing::debug!("the binding fence decides by content alone"),
        }
        let files = CertificateFiles {
            cert: options.cert.clone(),
            key: options.key.clone(),
        };
        let certificate = ReloadingCertificate::load(files).map_err(|e| e.to_string())?;
        // Built here too, so a pair that loads but makes no server configuration fails now.
        certificate.server_config().map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
        let address = listener
            .local_addr()
            .map_or_else(|_| options.listen.to_string(), |a| a.to_string());
        let state = WebhookState {
            lookups,
            operator_user: options.operator_user.clone(),
            lookup_timeout: Duration::from_millis(options.lookup_timeout_ms),
            metrics: Default::default(),
        };
        tracing::info!(%address, cert = %options.cert.display(), "webhooks listening");
        Ok(BoundWebhooks {
            listener,
            address,
            certificate,
            state,
            cert_check_seconds: options.cert_check_seconds,
        })
    }

    /// Serves until `stop` completes.
    pub async fn serve(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), String> {
        let tls = self
            .certificate
            .server_config()
            .map_err(|e| e.to_string())?;
        let reloader = tokio::spawn(
            self.certificate
                .watch(Duration::from_secs(self.cert_check_seconds)),
        );
        let app = router(self.state);
        let served = mds_webhook::server::serve(self.listener, app, tls, stop).await;
        reloader.abort();
        served.map_err(|e| format!("serving the webhooks on {} failed: {e}", self.address))
    }
}

/// Serves the webhooks until `stop` completes.
pub async fn serve_webhooks(
    options: &WebhookOptions,
    lookups: Lookups,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    BoundWebhooks::bind(options, lookups)
        .await?
        .serve(stop)
        .await
}

async fn serve(args: &Args) -> ExitCode {
    // Before the port is bound: a SIGTERM sent once the listening line is out always stops
    // the server cleanly.
    let stop = stop_signal();
    let lookups = if args.no_api_lookups {
        tracing::warn!("API lookups disabled (--no-api-lookups): for tests only");
        Lookups::disabled()
    } else {
        let client = match kube_client(args.kubeconfig.as_ref()).await {
            Ok(client) => client,
            Err(e) => return fail(&e),
        };
        let version = TargetApiVersion::parse(&args.target_api_version).unwrap_or_default();
        KubeLookups::ports(client, version)
    };
    let options = WebhookOptions {
        cert: args.cert.clone(),
        key: args.key.clone(),
        listen: args.listen,
        operator_user: args.operator_user.clone(),
        cert_check_seconds: args.cert_check_seconds,
        lookup_timeout_ms: args.lookup_timeout_ms,
    };
    let stopping = async move {
        stop.await;
        tracing::info!("stopping: no new connections, open requests finish");
    };
    match serve_webhooks(&options, lookups, stopping).await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
