//! Which profile a target runs on: its model (`spec.model.name`), its roles' GPU
//! (`instanceType`) and tensor parallelism (the engine's arguments), and its engine
//! (`spec.engine`). When the target says what no profile serves, the answer is a refusal
//! naming the profiles that would, never a silent stand-in.

use mds_api::target::{Engine, EngineKind, TargetRole};

use super::{DEFAULT_PROFILE, Gpu, Precision, Profile, Reading, profile, profiles};

/// The profile a run uses and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen {
    pub profile: Profile,
    pub why: String,
}

/// The target names a model, GPU or parallelism no profile serves; the message says which
/// profiles come nearest and how to pick one (`--profile`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoProfile(pub String);

/// The engine arguments that set tensor parallelism (vLLM's and SGLang's spellings).
const TENSOR_PARALLEL_FLAGS: &[&str] = &["--tensor-parallel-size", "-tp", "--tp-size", "--tp"];

/// The value a role's engine arguments give one of `flags` (`--flag value` or
/// `--flag=value`), the first one set.
fn flag_value<'a>(role: &'a TargetRole, flags: &[&str]) -> Option<&'a str> {
    let args = &role.extra_args;
    args.iter().enumerate().find_map(|(i, arg)| {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (arg.as_str(), None),
        };
        if !flags.contains(&flag) {
            return None;
        }
        inline.or_else(|| args.get(i + 1).map(String::as_str))
    })
}

/// The tensor parallelism a role's engine arguments ask for (`--tensor-parallel-size 4`,
/// `--tp-size=8`), `None` when they do not say.
pub fn tensor_parallel(role: &TargetRole) -> Option<u32> {
    flag_value(role, TENSOR_PARALLEL_FLAGS)?.trim().parse().ok()
}

/// The weights' precision a role's engine arguments ask for (`--quantization fp8`).
fn quantization(role: &TargetRole) -> Option<Precision> {
    let value = flag_value(role, &["--quantization", "-q"])?;
    Some(if value.trim().eq_ignore_ascii_case("fp8") {
        Precision::Fp8
    } else {
        Precision::Bf16
    })
}

/// The profile of the target: see the module doc. `roles` give the GPU (the first role naming
/// one) and the tensor parallelism (the first role setting it).
pub fn for_target(
    model: Option<&str>,
    engine: Option<&Engine>,
    roles: &[TargetRole],
) -> Result<Chosen, NoProfile> {
    let kind = engine.and_then(|e| EngineKind::from_name(&e.name).ok());
    let engine_name = engine.map_or("an unnamed engine", |e| e.name.as_str());
    let Some(model) = model.filter(|m| !m.trim().is_empty()) else {
        return Ok(Chosen {
            profile: profile(DEFAULT_PROFILE).expect("the default profile exists"),
            why: "the default: the target names no model".into(),
        });
    };
    let key = model_key(model);
    // An fp8 checkpoint is its model too: a bf16 profile serves it when no fp8 one does.
    let base = key.strip_suffix("-fp8").unwrap_or(&key);
    let serving: Vec<Profile> = profiles()
        .into_iter()
        .filter(|p| p.serves.contains(&key.as_str()) || p.serves.contains(&base))
        .collect();
    if serving.is_empty() {
        return Err(NoProfile(format!(
            "no engine profile serves {model}; profiles serve {}; --profile NAME simulates it \
             on one of them (--profile list shows every profile)",
            served_models()
        )));
    }
    let instance_type = roles.iter().find_map(|r| r.instance_type.as_deref());
    let mut notes = Vec::new();
    let on_gpu: Vec<Profile> = match instance_type {
        None => serving.clone(),
        Some(named) => match Gpu::from_instance_type(named) {
            None => {
                return Err(NoProfile(format!(
                    "instanceType {named:?} names no GPU with a profile of {model}; {}",
                    nearest(&serving, kind)
                )));
            }
            Some((gpu, reading)) => {
                let mut on: Vec<Profile> = serving
                    .iter()
                    .filter(|p| p.gpu == gpu.label())
                    .copied()
                    .collect();
                if reading == Reading::Ambiguous {
                    // `h100` alone: the SXM card first, the PCIe one when only it is profiled.
                    if on.is_empty() {
                        on = serving
                            .iter()
                            .filter(|p| p.gpu == Gpu::H100Pcie.label())
                            .copied()
                            .collect();
                    }
                    if let Some(p) = on.first() {
                        notes.push(format!(
                            "instanceType {named:?} does not say SXM or PCIe: read as {}",
                            p.gpu
                        ));
                    }
                }
                if on.is_empty() {
                    return Err(NoProfile(format!(
                        "no engine profile of {model} on {} (instanceType {named:?}); {}",
                        gpu.label(),
                        nearest(&serving, kind)
                    )));
                }
                on
            }
        },
    };
    let parallel = roles.iter().find_map(tensor_parallel);
    let sized: Vec<Profile> = match parallel {
        Some(tp) => {
            let at: Vec<Profile> = on_gpu
                .iter()
                .filter(|p| p.gpus_per_pod == tp)
                .copied()
                .collect();
            if at.is_empty() {
                return Err(NoProfile(format!(
                    "no engine profile of {model} at tensor parallelism {tp} on {}; {}",
                    on_gpu[0].gpu,
                    nearest(&on_gpu, kind)
                )));
            }
            at
        }
        None => {
            let fewest = on_gpu.iter().map(|p| p.gpus_per_pod).min().unwrap_or(1);
            on_gpu
                .into_iter()
                .filter(|p| p.gpus_per_pod == fewest)
                .collect()
        }
    };
    // The weights' precision: an fp8 checkpoint's name or the engine's own quantization.
    let fp8 = key.ends_with("-fp8") || roles.iter().find_map(quantization) == Some(Precision::Fp8);
    let wanted = if fp8 { Precision::Fp8 } else { Precision::Bf16 };
    let precise: Vec<Profile> = sized
        .iter()
        .filter(|p| p.precision == wanted)
        .copied()
        .collect();
    if precise.is_empty() {
        notes.push(format!(
            "no {} profile of it there: {} weights",
            wanted.label(),
            sized[0].precision.label()
        ));
    }
    let sized = if precise.is_empty() { sized } else { precise };
    let (chosen, same_engine) = match sized.iter().find(|p| Some(p.engine) == kind) {
        Some(p) => (*p, true),
        None => (sized[0], false),
    };
    let mut why = if same_engine {
        format!("the target serves {model} on {engine_name}")
    } else {
        format!("the target serves {model}; no profile of it on {engine_name}")
    };
    if let Some(named) = instance_type {
        why.push_str(&format!(", instanceType {named}"));
    }
    if let Some(tp) = parallel {
        why.push_str(&format!(", tensor parallelism {tp}"));
    }
    for note in notes {
        why.push_str("; ");
        why.push_str(&note);
    }
    Ok(Chosen {
        profile: chosen,
        why,
    })
}

/// `meta-llama/Meta-Llama-3-8B-Instruct` is `meta-llama-3-8b-instruct`.
fn model_key(model: &str) -> String {
    model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .trim()
        .to_ascii_lowercase()
}

/// The models some profile serves, one name each.
fn served_models() -> String {
    let mut names: Vec<&str> = profiles()
        .iter()
        .filter_map(|p| p.serves.first().copied())
        .collect();
    names.dedup();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// The profiles that serve the model, where, for the refusal's last words: those on the
/// target's engine when there are any.
fn nearest(candidates: &[Profile], kind: Option<EngineKind>) -> String {
    let same_engine = candidates.iter().any(|p| Some(p.engine) == kind);
    let listed: Vec<String> = candidates
        .iter()
        .filter(|p| !same_engine || Some(p.engine) == kind)
        .map(|p| format!("{} ({} x{})", p.name, p.gpu, p.gpus_per_pod))
        .collect();
    format!(
        "these would serve it: {}; --profile NAME picks one",
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(name: &str) -> Engine {
        Engine {
            name: name.into(),
            version: None,
        }
    }

    fn role(instance_type: Option<&str>, args: &[&str]) -> TargetRole {
        serde_json::from_value(serde_json::json!({
            "name": "server",
            "kind": "Server",
            "instanceType": instance_type,
            "extraArgs": args,
        }))
        .unwrap()
    }

    fn pick(model: &str, e: &str, roles: &[TargetRole]) -> Result<Chosen, NoProfile> {
        for_target(Some(model), Some(&engine(e)), roles)
    }

    #[test]
    fn the_model_engine_and_gpu_pick_the_profile() {
        let c = pick("meta-llama/Meta-Llama-3-8B-Instruct", "vLLM", &[]).unwrap();
        assert_eq!(c.profile.name, "llama3-8b-h100-vllm");
        assert!(
            c.why.contains("Meta-Llama-3-8B-Instruct on vLLM"),
            "{}",
            c.why
        );
        let sxm = [role(Some("h100-sxm"), &[])];
        let c = pick("meta-llama/Llama-3.1-8B-Instruct", "vLLM", &sxm).unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-h100sxm-vllm");
        let c = pick("meta-llama/Llama-3.1-8B-Instruct", "sglang", &sxm).unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-h100sxm-sglang");
        let c = pick(
            "meta-llama/Llama-3.1-8B-Instruct",
            "vLLM",
            &[role(Some("nvidia-h200-141gb"), &[])],
        )
        .unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-h200-vllm");
        let c = pick(
            "meta-llama/Llama-3.1-8B-Instruct",
            "vLLM",
            &[role(Some("a100-80g"), &[])],
        )
        .unwrap();
        assert_eq!(c.profile.gpu, "A100 SXM");
        // No SGLang profile of Llama-3 8B: the vLLM one, said so.
        let c = pick("meta-llama/Meta-Llama-3-8B-Instruct", "SGLang", &[]).unwrap();
        assert_eq!(c.profile.name, "llama3-8b-h100-vllm");
        assert!(c.why.contains("no profile of it on SGLang"), "{}", c.why);
        assert!(
            for_target(None, Some(&engine("vLLM")), &[])
                .unwrap()
                .why
                .contains("names no model")
        );
    }

    #[test]
    fn a_bare_h100_is_the_sxm_card_said_so() {
        let h100 = [role(Some("h100"), &[])];
        let c = pick("meta-llama/Llama-3.1-8B-Instruct", "vLLM", &h100).unwrap();
        assert_eq!(c.profile.gpu, "H100 SXM");
        assert!(c.why.contains("does not say SXM or PCIe"), "{}", c.why);
        // Llama-3 8B has only the PCIe calibration: that one, said so.
        let c = pick("meta-llama/Meta-Llama-3-8B-Instruct", "vLLM", &h100).unwrap();
        assert_eq!(c.profile.name, "llama3-8b-h100-vllm");
        assert!(c.why.contains("read as H100 PCIe"), "{}", c.why);
    }

    #[test]
    fn tensor_parallelism_comes_from_the_engine_arguments() {
        let tp8 = [role(Some("h200"), &["--tensor-parallel-size", "8"])];
        let c = pick("meta-llama/Llama-3.1-70B-Instruct", "vLLM", &tp8).unwrap();
        assert_eq!(c.profile.name, "llama3.1-70b-h200-tp8-vllm");
        assert_eq!(c.profile.gpus_per_pod, 8);
        let tp4 = [role(Some("h100-sxm"), &["--tp-size=4"])];
        let c = pick("meta-llama/Llama-3.1-70B-Instruct", "vLLM", &tp4).unwrap();
        assert_eq!(c.profile.name, "llama3.1-70b-h100sxm-tp4-vllm");
        // Unsaid: the fewest GPUs a profile of it uses.
        let c = pick(
            "meta-llama/Llama-3.1-70B-Instruct",
            "vLLM",
            &[role(Some("h100-sxm"), &[])],
        )
        .unwrap();
        assert_eq!(c.profile.gpus_per_pod, 4);
    }

    #[test]
    fn fp8_weights_come_from_the_checkpoint_or_the_engine_arguments() {
        let h200 = [role(Some("h200"), &[])];
        let c = pick("nvidia/Llama-3.1-8B-Instruct-FP8", "vLLM", &h200).unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-fp8-h200-vllm");
        let c = pick("meta-llama/Llama-3.1-8B-Instruct", "vLLM", &h200).unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-h200-vllm");
        let online = [role(
            Some("h100-sxm"),
            &["--quantization", "fp8", "--tensor-parallel-size=8"],
        )];
        let c = pick("meta-llama/Llama-3.1-70B-Instruct", "vLLM", &online).unwrap();
        assert_eq!(c.profile.name, "llama3.1-70b-fp8-h100sxm-tp8-vllm");
        // No fp8 profile of the 8B on an A100: the bf16 one, said so.
        let c = pick(
            "nvidia/Llama-3.1-8B-Instruct-FP8",
            "vLLM",
            &[role(Some("a100"), &[])],
        )
        .unwrap();
        assert_eq!(c.profile.name, "llama3.1-8b-a100-vllm");
        assert!(c.why.contains("no fp8 profile of it there"), "{}", c.why);
    }

    #[test]
    fn what_no_profile_serves_is_refused_naming_what_would() {
        let e = pick(
            "meta-llama/Llama-3.1-70B-Instruct",
            "vLLM",
            &[role(Some("h100-sxm"), &["-tp", "2"])],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("tensor parallelism 2"), "{e}");
        assert!(e.contains("llama3.1-70b-h100sxm-tp4-vllm"), "{e}");
        assert!(e.contains("--profile"), "{e}");
        let e = pick(
            "meta-llama/Llama-3.1-70B-Instruct",
            "vLLM",
            &[role(Some("a100-80g"), &[])],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("on A100 SXM"), "{e}");
        assert!(e.contains("llama3.1-70b-h200-tp4-vllm"), "{e}");
        let e = pick("acme/chat-8b", "vLLM", &[]).unwrap_err().0;
        assert!(e.contains("no engine profile serves acme/chat-8b"), "{e}");
        assert!(e.contains("llama-3.1-70b-instruct"), "{e}");
        let e = pick(
            "meta-llama/Llama-3.1-8B-Instruct",
            "vLLM",
            &[role(Some("l40s-48g"), &[])],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("\"l40s-48g\" names no GPU"), "{e}");
        assert!(!e.contains("sglang"), "the target's engine only: {e}");
        // Sized past the pool: the 8B's single-GPU profiles say TP1 is all there is.
        let e = pick(
            "meta-llama/Llama-3.1-8B-Instruct",
            "vLLM",
            &[role(Some("h100-sxm"), &["--tensor-parallel-size", "2"])],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("llama3.1-8b-h100sxm-vllm (H100 SXM x1)"), "{e}");
    }
}
