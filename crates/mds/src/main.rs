//! `mds`: the ModelDeploymentScaler operator and its offline tools.

mod commands;
mod manifest;

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
    /// Simulate a scaler on a request trace: what it would have done and what it would cost.
    ///
    /// Runs the operator's own worker and decision core at virtual time against a simulated
    /// GPUStack target (ordinals, Kueue quota, cold starts, retirements) whose engines serve
    /// the trace request by request as vLLM's scheduler does (or as fluid queues with
    /// --engine fluid), and reads the engines' /metrics pages through the production parser.
    /// Prints SLO attainment, TTFT and ITL percentiles, GPU-hours, replicas, scale actions and
    /// flaps; --json writes everything, one-minute bins included. The spec's invariants are
    /// checked after every pass. With no arguments it draws the frontier of the bundled
    /// example: every policy (our three algorithms, the --suggest scaler and the peers) at its
    /// cheapest setting for 90, 95 and 99 % of requests within the SLO, on one hour of the
    /// Azure conversation trace. --scaler FILE runs your scaler alone; --compare all or
    /// --frontier sets it against the peers. The scaler and target go through the same checks as
    /// `mds validate` first. docs/simulator.md explains the model, its limits and the output.
    ///
    /// Exit status: 0 simulated, every invariant held; 1 an invariant was broken (each on
    /// standard error with its moment and rule), or the scaler or target is invalid; 2 an
    /// input could not be read or breaks a rule (the message names the flag, file or line);
    /// 3 the run finished no request (the error line says why).
    Simulate(Box<commands::simulate::Args>),
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
    /// name lengths). Documents of other kinds are skipped. Every problem is listed as
    /// `path: message`, type problems, rule errors and unknown fields in one run.
    ///
    /// Exit status: 0 all scalers valid (warnings are printed; --strict makes them errors),
    /// 1 at least one scaler is invalid, or --target was given and a scaler's target is not in
    /// it (unless --allow-missing-target), 2 an input could not be read or parsed as YAML, or
    /// held no ModelDeploymentScaler at all.
    Validate(commands::validate::Args),
    /// Show what the scaler reads from a saved engine /metrics page.
    ///
    /// With one page: the parsed engine sample after the rank rule (running and waiting
    /// requests, KV usage per scheduler, counters, histograms) and which series were used or
    /// ignored and why. With two successive pages of the same Pod and --interval: the
    /// cache-missed prompt rate, generation rate and p95 TTFT and ITL exactly as the scaler
    /// computes them. Skipped lines are reported on standard error.
    ///
    /// Every reading shown as missing and every series shown as ignored says why. The engine
    /// name is taken in any case (vLLM, SGLang, as the target spells it).
    ///
    /// Exit status: 0 printed, 1 a page holds no series of the given engine (the message
    /// names the engine it does hold), 2 a page could not be read or holds no samples.
    InspectMetrics(commands::inspect_metrics::Args),
    /// Replay a recorded timeline through the scaler's decision core.
    ///
    /// Answers "what would the scaler have done on last week's metrics?": each timeline line
    /// is one sampling pass with the roles' observations and what changed on the target; the
    /// scaler's writes are applied to the replayed target so later passes see them. Prints,
    /// per pass, each role's raw recommendation, constrained count and reason, the target
    /// write, and the conditions that changed. The timeline format is in docs/REPLAY.md.
    ///
    /// The scaler and target are checked with the same rules as `mds validate` first; a
    /// scaler admission would refuse is not replayed.
    ///
    /// Exit status: 0 replayed, 1 the scaler or target is invalid (the findings are the ones
    /// `mds validate` prints), 2 an input could not be read, holds no document of the needed
    /// kind, or the timeline breaks a rule (the message names the line and field).
    Replay(commands::replay::Args),
    /// Run the operator: plan and commit replica counts for every ModelDeploymentScaler.
    ///
    /// Watches ModelDeploymentScalers, their ModelDeployments, the targets' Pods and Kueue
    /// Workloads; samples each target's engines every sampling.intervalSeconds; runs the
    /// decision core; writes the target (JSON Patch with test operations), the status and
    /// events. Serves Prometheus metrics and health probes. With leader election (the
    /// default) only the Lease holder plans and writes.
    ///
    /// Exit status: 0 after a clean shutdown (SIGTERM or Ctrl-C), 1 when it cannot start.
    Controller(Box<commands::controller::Args>),
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
    /// Print what a GitOps tool must ignore on the targets of scalers.
    ///
    /// A bound target's replica counts belong to its scaler: the binding fence refuses a sync
    /// that would restore them from Git, or touch the scaler's two annotations. This prints the
    /// block that keeps a sync off them, for every ModelDeployment in --target: one
    /// /spec/roles/<i>/replicas pointer per role and both annotation pointers (`~1` escapes
    /// the `/` in the keys). For Argo CD, `spec.ignoreDifferences` of the Application plus the
    /// `RespectIgnoreDifferences=true` sync option, without which a sync still writes the
    /// ignored fields; for Flux, `spec.ignore` of the Kustomization. Merge the output into
    /// that object. docs/gitops.md explains it.
    ///
    /// Exit status: 0 printed, 1 a ModelDeployment cannot be read or has no name or roles,
    /// 2 the file cannot be read, is not YAML, or holds no ModelDeployment.
    Gitops(commands::gitops::Args),
    /// A local lab to try mds without a GPU cluster: a real Kubernetes API server with a
    /// stand-in for GPUStack, Kueue and the engines.
    ///
    /// `mds lab up` starts it and keeps it running until Ctrl-C; `mds lab kubectl-path` prints
    /// the kubectl that matches it. docs/lab.md walks through it.
    Lab(commands::lab::Args),
}

/// mimalloc rather than the C library's allocator (glibc's, or musl's in the image): a pass
/// and a simulated scrape allocate many small short-lived values, which it serves faster. The
/// controller's CPU per pass fell 4 % at 100 scalers and 22 % at 1,000 at the same steady
/// memory there (10 MiB more at 100); the simulator runs 1.17 times faster
/// (docs/PERFORMANCE.md, "The allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match cli.command {
        Command::Simulate(args) => commands::simulate::run_command(&args),
        Command::Crd => commands::crd::run(),
        Command::Validate(args) => commands::validate::run(&args),
        Command::InspectMetrics(args) => commands::inspect_metrics::run(&args),
        Command::Replay(args) => commands::replay::run(&args),
        Command::Controller(args) => commands::controller::run(&args),
        Command::Webhook(args) => commands::webhook::run(&args),
        Command::Certs(args) => commands::certs::run(&args),
        Command::Gitops(args) => commands::gitops::run(&args),
        Command::Lab(args) => commands::lab::run(&args),
    }
}

/// Help and version go to standard output as clap writes them; a usage mistake gets the same
/// `mds: error:` prefix as every other error of every command, and exit status 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { 2 } else { 0 })
        }
        _ => {
            let text = e.to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text);
            commands::emit("", &commands::error_line(text.trim_end()));
            ExitCode::from(2)
        }
    }
}
