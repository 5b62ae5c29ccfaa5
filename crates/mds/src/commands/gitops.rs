//! `mds gitops`: the ignore block a GitOps tool needs so that its syncs leave a bound target's
//! replica counts and the scaler's two annotations alone (the binding fence refuses syncs that
//! would restore them from Git).

use mds_api::validation::is_dns1123_label;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use mds_api::annotations::{BINDING_ANNOTATION, DECISION_ANNOTATION, annotation_pointer};
use mds_api::spec::GROUP;
use serde::Serialize;

use crate::manifest::scaler::{read_target, write_report};
use crate::manifest::{Document, holdings, parse_documents};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Tool {
    /// An Argo CD Application: `spec.ignoreDifferences` and `RespectIgnoreDifferences=true`.
    Argocd,
    /// A Flux Kustomization (`kustomize.toolkit.fluxcd.io/v1`): `spec.ignore`.
    Flux,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ModelDeployment manifests the GitOps tool applies (YAML, multi-document; '-' is
    /// standard input). Every ModelDeployment in it gets an entry; other kinds are skipped.
    #[arg(long, value_name = "FILE")]
    pub target: PathBuf,
    /// The GitOps tool whose configuration to print.
    #[arg(long = "for", value_enum, value_name = "TOOL")]
    pub tool: Tool,
    /// The namespace the tool applies manifests without metadata.namespace to. Without it,
    /// their entries name no namespace and match the name in every namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// One target the block covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub namespace: Option<String>,
    /// `spec.roles` in the manifest; each role's count gets its own pointer.
    pub roles: usize,
}

/// The pointers of one target: each role's replica count, then both annotations.
pub fn pointers(roles: usize) -> Vec<String> {
    (0..roles)
        .map(|i| format!("/spec/roles/{i}/replicas"))
        .chain([BINDING_ANNOTATION, DECISION_ANNOTATION].map(annotation_pointer))
        .collect()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArgoApplication {
    spec: ArgoSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArgoSpec {
    ignore_differences: Vec<ArgoIgnore>,
    sync_policy: ArgoSyncPolicy,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArgoIgnore {
    group: &'static str,
    kind: &'static str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    json_pointers: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArgoSyncPolicy {
    sync_options: Vec<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FluxKustomization {
    api_version: &'static str,
    kind: &'static str,
    spec: FluxSpec,
}

#[derive(Serialize)]
struct FluxSpec {
    ignore: Vec<FluxIgnore>,
}

#[derive(Serialize)]
struct FluxIgnore {
    target: FluxTarget,
    paths: Vec<String>,
}

#[derive(Serialize)]
struct FluxTarget {
    group: &'static str,
    kind: &'static str,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

/// Flux matches target names as regular expressions (anchored at both ends); a Kubernetes
/// name's only special character is the dot.
fn flux_name(name: &str) -> String {
    name.replace('.', "\\.")
}

/// The block to merge into the tool's configuration, as YAML with a comment saying where.
pub fn ignore_block(tool: Tool, entries: &[Entry]) -> String {
    let (header, body) = match tool {
        Tool::Argocd => (
            "# Merge into the Argo CD Application that syncs these ModelDeployments.\n",
            serde_yaml_ng::to_string(&ArgoApplication {
                spec: ArgoSpec {
                    ignore_differences: entries
                        .iter()
                        .map(|e| ArgoIgnore {
                            group: GROUP,
                            kind: "ModelDeployment",
                            name: e.name.clone(),
                            namespace: e.namespace.clone(),
                            json_pointers: pointers(e.roles),
                        })
                        .collect(),
                    sync_policy: ArgoSyncPolicy {
                        sync_options: vec!["RespectIgnoreDifferences=true"],
                    },
                },
            }),
        ),
        Tool::Flux => (
            "# Merge into the Flux Kustomization that applies these ModelDeployments.\n",
            serde_yaml_ng::to_string(&FluxKustomization {
                api_version: "kustomize.toolkit.fluxcd.io/v1",
                kind: "Kustomization",
                spec: FluxSpec {
                    ignore: entries
                        .iter()
                        .map(|e| FluxIgnore {
                            target: FluxTarget {
                                group: GROUP,
                                kind: "ModelDeployment",
                                name: flux_name(&e.name),
                                namespace: e.namespace.as_deref().map(flux_name),
                            },
                            paths: pointers(e.roles),
                        })
                        .collect(),
                },
            }),
        ),
    };
    // Plain structs of strings always serialize.
    format!("{header}{}", body.unwrap_or_default())
}

/// Why nothing was printed: the exit status and the message.
struct Stop {
    code: u8,
    text: String,
}

fn unusable(message: String) -> Stop {
    Stop {
        code: 2,
        text: super::error_line(&message),
    }
}

pub fn run(args: &Args) -> ExitCode {
    let mut notes = String::new();
    match entries(args, &mut notes) {
        Ok(entries) => {
            super::emit(&ignore_block(args.tool, &entries), &notes);
            ExitCode::SUCCESS
        }
        Err(stop) => {
            super::emit("", &(notes + &stop.text));
            ExitCode::from(stop.code)
        }
    }
}

fn entries(args: &Args, notes: &mut String) -> Result<Vec<Entry>, Stop> {
    let file = args.target.display().to_string();
    let bytes = super::read_input(&args.target, super::MAX_INPUT_BYTES)
        .map_err(|e| unusable(format!("{file}: cannot read: {e}")))?;
    let documents = parse_documents(&file, &bytes).map_err(unusable)?;
    let targets: Vec<&Document> = documents
        .iter()
        .filter(|d| d.is("ModelDeployment"))
        .collect();
    if targets.is_empty() {
        let all: Vec<&Document> = documents.iter().collect();
        return Err(unusable(format!(
            "{file} holds no ModelDeployment of apiVersion {GROUP}/*; it holds {}",
            holdings(&all)
        )));
    }
    if let Some(namespace) = &args.namespace
        && !is_dns1123_label(namespace)
    {
        return Err(unusable(format!(
            "--namespace {namespace:?} is not a namespace name: lowercase letters, digits and \
             '-', at most 63 characters, starting and ending with a letter or digit"
        )));
    }
    let mut problems = String::new();
    let mut entries = Vec::new();
    for doc in targets {
        match entry(doc, args.namespace.as_deref(), notes) {
            Ok(entry) => entries.push(entry),
            Err(lines) => problems.push_str(&lines),
        }
    }
    if !problems.is_empty() {
        return Err(Stop {
            code: 1,
            text: super::error_line(problems.trim_end()),
        });
    }
    Ok(entries)
}

/// One document's entry, or the lines saying why it has none.
fn entry(doc: &Document, namespace: Option<&str>, notes: &mut String) -> Result<Entry, String> {
    let label = format!("{}: {}", doc.label(), doc.describe());
    let target = read_target(doc).map_err(|findings| {
        let report = mds_api::validation::Report {
            errors: findings,
            warnings: vec![],
        };
        let mut lines = String::new();
        write_report(&mut lines, &format!("{label}: cannot be read"), &report);
        lines
    })?;
    let name = match target.metadata.name.as_deref() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => {
            return Err(format!(
                "{label}: metadata.name is missing; an ignore entry matches its target by name\n"
            ));
        }
    };
    if target.spec.roles.is_empty() {
        return Err(format!(
            "{label}: spec.roles is empty; a target without roles has no replica counts to ignore\n"
        ));
    }
    let own = target.metadata.namespace.clone().filter(|n| !n.is_empty());
    let namespace = match (own, namespace) {
        (Some(own), Some(given)) if own != given => {
            let _ = write!(
                notes,
                "{}",
                super::note_line(&format!(
                    "{label}: the manifest's namespace {own:?} is used; --namespace {given:?} \
                     applies to manifests without one"
                ))
            );
            Some(own)
        }
        (Some(own), _) => Some(own),
        (None, Some(given)) => Some(given.to_string()),
        (None, None) => {
            let _ = write!(
                notes,
                "{}",
                super::note_line(&format!(
                    "{label}: no namespace in the manifest and no --namespace; the entry matches \
                     {name:?} in every namespace"
                ))
            );
            None
        }
    };
    Ok(Entry {
        name,
        namespace,
        roles: target.spec.roles.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, namespace: Option<&str>, roles: usize) -> Entry {
        Entry {
            name: name.into(),
            namespace: namespace.map(str::to_string),
            roles,
        }
    }

    #[test]
    fn one_replica_pointer_per_role_then_both_annotations_escaped() {
        assert_eq!(
            pointers(2),
            [
                "/spec/roles/0/replicas",
                "/spec/roles/1/replicas",
                "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-binding",
                "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-decision",
            ]
        );
    }

    #[test]
    fn argo_cd_block_has_the_entries_and_respects_ignore_differences() {
        let block = ignore_block(Tool::Argocd, &[entry("llm-serving", Some("default"), 1)]);
        assert_eq!(
            block,
            "# Merge into the Argo CD Application that syncs these ModelDeployments.
spec:
  ignoreDifferences:
  - group: worker.gpustack.ai
    kind: ModelDeployment
    name: llm-serving
    namespace: default
    jsonPointers:
    - /spec/roles/0/replicas
    - /metadata/annotations/modeldeployment.gpustack.ai~1scaler-binding
    - /metadata/annotations/modeldeployment.gpustack.ai~1scaler-decision
  syncPolicy:
    syncOptions:
    - RespectIgnoreDifferences=true
"
        );
    }

    #[test]
    fn flux_block_escapes_dots_and_leaves_out_an_unknown_namespace() {
        let block = ignore_block(Tool::Flux, &[entry("llm.v2", None, 1)]);
        let value: serde_json::Value = serde_yaml_ng::from_str(&block).unwrap();
        assert_eq!(value["kind"], "Kustomization");
        let target = &value["spec"]["ignore"][0]["target"];
        assert_eq!(target["name"], "llm\\.v2");
        assert!(target.get("namespace").is_none());
        assert_eq!(
            value["spec"]["ignore"][0]["paths"][0],
            "/spec/roles/0/replicas"
        );
    }

    #[test]
    fn namespace_names_are_dns_labels() {
        assert!(is_dns1123_label("team-a"));
        for bad in ["", "-a", "a-", "Team", "a.b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
        }
    }
}
