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
    /// The scaler and target are checked with the same rules as `mds validate` first; a
    /// scaler admission would refuse is not replayed.
    ///
    /// Exit status: 0 replayed, 1 the scaler or target is invalid (the findings are the ones
    /// `mds validate` prints), 2 an input could not be read, holds no document of the needed
    /// kind, or the timeline breaks a rule (the message names the line and field).
    Replay(commands::replay::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => commands::crd::run(),
        Command::Validate(args) => commands::validate::run(&args),
        Command::InspectMetrics(args) => commands::inspect_metrics::run(&args),
        Command::Replay(args) => commands::replay::run(&args),
    }
}
