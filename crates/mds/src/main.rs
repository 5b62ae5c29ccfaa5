//! `mds`: the ModelDeploymentScaler operator and its offline tools.

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mds plans the replica counts of GPUStack ModelDeployments from vLLM and SGLang engine
/// metrics. One ModelDeploymentScaler (short name mds) owns one target's counts.
#[derive(Parser, Debug)]
#[command(name = "mds", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the ModelDeploymentScaler CustomResourceDefinition as YAML.
    ///
    /// The same file is checked in as deploy/crds/modeldeploymentscalers.worker.gpustack.ai.yaml.
    /// Apply it with: mds crd | kubectl apply -f -
    Crd,
    /// Check ModelDeploymentScaler manifests offline with the admission rules.
    ///
    /// Reads YAML files (multi-document; '-' is standard input), applies the stored defaults
    /// and runs every admission rule. ModelDeployment documents given with --target, or found
    /// among the inputs, are used as targets for scalers whose targetRef names them, which
    /// enables the target-dependent rules (bounds for every target role, role kinds, generated
    /// name lengths). Documents of other kinds are skipped.
    ///
    /// Exit status: 0 all scalers valid (warnings are printed), 1 at least one scaler is
    /// invalid (every error is listed as `path: message`), 2 an input could not be read or
    /// parsed as YAML, or held no ModelDeploymentScaler at all.
    Validate(commands::validate::Args),
    /// Show what the scaler reads from a saved engine /metrics page.
    ///
    /// With one page: the parsed engine sample after the rank rule (running and waiting
    /// requests, KV usage per scheduler, counters, histograms) and which series were used or
    /// ignored and why. With two successive pages of the same Pod and --interval: the
    /// cache-missed prompt rate, generation rate and p95 TTFT and ITL exactly as the scaler
    /// computes them. Skipped lines are reported on standard error.
    ///
    /// Exit status: 0 printed, 2 a page could not be read or holds no samples.
    InspectMetrics(commands::inspect_metrics::Args),
    /// Replay a recorded timeline through the scaler's decision core.
    ///
    /// Answers "what would the scaler have done on last week's metrics?": each timeline line
    /// is one sampling pass with the roles' observations and what changed on the target; the
    /// scaler's writes are applied to the replayed target so later passes see them. Prints,
    /// per pass, each role's raw recommendation, constrained count and reason, the target
    /// write, and the conditions that changed. The timeline format is in docs/REPLAY.md.
    ///
    /// Exit status: 0 replayed, 2 an input could not be read or parsed.
    Replay(commands::replay::Args),
    /// Serve the admission webhooks over TLS.
    ///
    /// Three endpoints for the API server: /mutate/modeldeploymentscalers stores the defaults
    /// and the inferred algorithm type; /validate/modeldeploymentscalers runs every admission
    /// rule (messages as `mds validate` prints them); /validate/modeldeployments is the binding
    /// fence, which keeps users off the replica counts and scaler annotations of a bound
    /// target. /healthz answers 200 while serving. The certificate files are checked every
    /// --cert-check-seconds and a new pair serves new connections without a restart.
    /// docs/webhooks.md describes each endpoint and what failurePolicy Fail means.
    ///
    /// Stops on SIGTERM or Ctrl-C after open requests finish. Exit status: 0 stopped, 2 the
    /// certificate, the address or the cluster access could not be used.
    Webhook(commands::webhook::Args),
    /// Write a self-signed CA and a serving certificate for the webhook.
    ///
    /// For installs without cert-manager. Writes ca.crt and ca.key (a new CA, unless --ca-cert
    /// and --ca-key name one to reuse), tls.crt and tls.key (the pair `mds webhook --cert
    /// --key` serves, valid for the --dns names and --ip addresses) into --out-dir, and prints
    /// the caBundle: the CA certificate, base64-encoded, as webhook configurations carry it.
    /// With --service or --url it also writes webhooks.yaml, both webhook configurations with
    /// that caBundle. Reusing the CA to renew the pair keeps the caBundle valid.
    ///
    /// Exit status: 0 written, 2 bad arguments or a file could not be read or written.
    Certs(commands::certs::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => commands::crd::run(),
        Command::Validate(args) => commands::validate::run(&args),
        Command::InspectMetrics(args) => commands::inspect_metrics::run(&args),
        Command::Replay(args) => commands::replay::run(&args),
        Command::Webhook(args) => commands::webhook::run(&args),
        Command::Certs(args) => commands::certs::run(&args),
    }
}
