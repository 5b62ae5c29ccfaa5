//! What the long-running commands share: the logs of `mds controller` and `mds webhook`, the
//! signal that stops them and `mds lab up`, and their Kubernetes client.

use std::future::Future;
use std::io::IsTerminal as _;
use std::path::PathBuf;

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs to standard error at the level RUST_LOG sets (default info). Text lines are coloured
/// only on a terminal: a Pod's log, a file or a pipe gets plain text.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Installs the SIGTERM (Kubernetes stopping the Pod) and Ctrl-C handlers at once, and returns
/// a future that completes on the first of them. Installed before the command binds its ports,
/// a signal sent as soon as the command says it listens is never lost (the handler of a lazy
/// future would only be installed when first polled).
///
/// Must be called inside the Tokio runtime.
pub fn stop_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let watch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch {name}");
                None
            }
        };
        let mut terminate = watch(SignalKind::terminate(), "SIGTERM");
        let mut interrupt = watch(SignalKind::interrupt(), "SIGINT");
        async move {
            tokio::select! {
                () = received(terminate.as_mut()) => {}
                () = received(interrupt.as_mut()) => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The next delivery of `signal`; never, without one.
#[cfg(unix)]
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// A Kubernetes client from `kubeconfig` (see [`kube_config`]).
pub async fn kube_client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = kube_config(kubeconfig).await?;
    kube::Client::try_from(config).map_err(|e| format!("cannot build a Kubernetes client: {e}"))
}

/// The cluster configuration: `kubeconfig`, else the in-cluster service account or
/// $KUBECONFIG / ~/.kube/config.
pub async fn kube_config(kubeconfig: Option<&PathBuf>) -> Result<kube::Config, String> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster configuration found: {e}"))?,
    })
}
