//! `mds lab`: a local lab to try mds without a GPU cluster. Argument handling and printing only;
//! the lab is mds-lab's.

mod up;

use std::process::ExitCode;

use clap::Subcommand;

use super::{emit, error_line};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// Start a lab and keep it running until Ctrl-C or SIGTERM
    ///
    /// Starts kube-apiserver and etcd on free 127.0.0.1 ports with fresh certificates,
    /// installs the ModelDeploymentScaler CRD (as `mds crd` prints it), a ModelDeployment
    /// CRD that stands in for GPUStack's and Kueue's Workload CRD, and creates the
    /// namespace mds-system. Then it plays GPUStack, Kueue and the engines. For every
    /// ModelDeployment you apply it creates Pods, each with its own 127.x.y.z address,
    /// and Kueue Workloads, admitted within the --quota of the role's instanceType; runs
    /// an engine per instance and serves its vLLM or SGLang /metrics page on the Pod's
    /// address and annotated port; writes the ModelDeployment status; and retires an
    /// instance when replicas go down. Retirements complete only with spec.router; without
    /// one, and for Prefill and Decode roles, they end Aborted, as GPUStack's do.
    ///
    /// The kubeconfig is written once the API server is ready and the CRDs are established;
    /// then the commands to try next are printed, followed by what happens to the targets.
    /// Ctrl-C or SIGTERM stops everything this command started and removes the lab's data
    /// folder and the kubeconfig. The binaries come from tools/control-plane/build.sh (the
    /// first run builds them from Go modules: 15 to 20 minutes, then cached) or from the
    /// folder KUBEBUILDER_ASSETS names.
    ///
    /// Load profiles (--load, repeatable), offered from the moment a target appears:
    ///
    ///   constant:rps=5,prompt=512,output=128,hit=0.3   the same load for ever
    ///   steps:0=2,2m=8,5m=4                            2 rps, 8 from minute 2, 4 from minute 5
    ///   ramp:from=1,to=20,over=10m,after=1m            1 rps for a minute, then up to 20 in 10m
    ///   trace:requests.csv,bin=10s                     a request trace, averaged per bin
    ///   idle                                           no load
    ///
    /// rps is requests per second. prompt and output are mean lengths in tokens (default
    /// 512 and 128) and hit is the fraction of prompt tokens served from the prefix cache
    /// (default 0); constant, steps and ramp take them. Times are seconds, or a number with
    /// s, m or h. A trace is an Azure LLM inference CSV (TIMESTAMP,ContextTokens,
    /// GeneratedTokens) or a Mooncake JSONL file (timestamp, input_length, output_length,
    /// hash_ids), told apart by the first line; bin defaults to 10s.
    ///
    /// A profile goes to every role of every target, unless prefixed NAMESPACE/NAME=
    /// (every role of one target) or NAMESPACE/NAME/ROLE= (one role); the most specific
    /// profile wins. Each role of a prefill/decode target sees the whole request stream.
    /// Without --load the engines are idle.
    ///
    /// Exit status: 0 stopped by Ctrl-C or SIGTERM, 1 the lab could not start or failed
    /// while running, 2 a bad argument (the message names it) or a --kubeconfig file that
    /// mds lab did not write.
    #[command(verbatim_doc_comment)]
    Up(up::Args),
    /// Print the path of the kubectl that matches the lab's API server version.
    ///
    /// Builds it first if the cache is cold (see `mds lab up`). Debian's kubectl is far
    /// older than the lab's API server; use this one. Exit status: 0 printed, 1 not available
    /// (the message says why).
    KubectlPath,
}

pub fn run(args: &Args) -> ExitCode {
    match &args.command {
        LabCommand::Up(args) => up::run(args),
        LabCommand::KubectlPath => match mds_lab::kubectl_path() {
            Ok(path) => {
                emit(&format!("{}\n", path.display()), "");
                ExitCode::SUCCESS
            }
            Err(e) => {
                emit("", &error_line(&e.to_string()));
                ExitCode::from(1)
            }
        },
    }
}
