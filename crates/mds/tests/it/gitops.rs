//! `mds gitops`: what it prints and refuses, and what a sync does with it. The end-to-end test
//! runs mds-webhook's server in this process on 127.0.0.1 and registers it with the API server
//! (url and caBundle), binds a target as the operator (deploy/'s ServiceAccount), then syncs the
//! Git manifest as a GitOps tool would: as is, the fence refuses it; with the printed pointers
//! taken from the live object, as Argo CD's RespectIgnoreDifferences does, it passes. It also
//! checks that the API server takes our mutating webhook's patches.
//! The webhook and its registration are deploy_support's (`webhook.rs`), shared with the fence's
//! end-to-end tests.

use crate::common;
use crate::deploy_support;

use common::{Scratch, mds, text};
use deploy_support::webhook::{InProcessWebhook, bind_as_operator, operator_cluster, target_shape};
use deploy_support::{install_operator_identity, kubectl, md_resource, repo};
use kube::api::{Api, DynamicObject, PostParams};
use mds_api::ModelDeploymentScaler;
use mds_api::annotations::DecisionPayload;
use mds_core::patch::commit;
use mds_operator::Cluster as _;
use serde_json::{Value, json};

const EXAMPLE: &str = "examples/prefill-decode-encode.yaml";

fn gitops(args: &[&str]) -> (i32, String, String) {
    let out = mds(args, None);
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// The pointers of the first entry of a printed block.
fn printed_pointers(block: &str, tool: &str) -> Vec<String> {
    let value: Value = serde_yaml_ng::from_str(block).unwrap();
    let list = match tool {
        "argocd" => &value["spec"]["ignoreDifferences"][0]["jsonPointers"],
        _ => &value["spec"]["ignore"][0]["paths"],
    };
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_block_has_one_pointer_per_role_and_both_annotations() {
    let (code, argocd, notes) = gitops(&["gitops", "--target", EXAMPLE, "--for", "argocd"]);
    assert_eq!(code, 0, "{notes}");
    let pointers = printed_pointers(&argocd, "argocd");
    assert_eq!(
        pointers,
        [
            "/spec/roles/0/replicas",
            "/spec/roles/1/replicas",
            "/spec/roles/2/replicas",
            "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-binding",
            "/metadata/annotations/modeldeployment.gpustack.ai~1scaler-decision",
        ]
    );
    let value: Value = serde_yaml_ng::from_str(&argocd).unwrap();
    assert_eq!(
        value["spec"]["syncPolicy"]["syncOptions"],
        json!(["RespectIgnoreDifferences=true"])
    );
    let entry = &value["spec"]["ignoreDifferences"][0];
    assert_eq!(entry["group"], "worker.gpustack.ai");
    assert_eq!(entry["kind"], "ModelDeployment");
    assert_eq!(entry["name"], "vl-serving");
    assert!(entry.get("namespace").is_none());
    assert!(
        notes.contains("matches \"vl-serving\" in every namespace"),
        "{notes}"
    );

    let (code, flux, notes) = gitops(&[
        "gitops",
        "--target",
        EXAMPLE,
        "--for",
        "flux",
        "--namespace",
        "prod",
    ]);
    assert_eq!(code, 0, "{notes}");
    assert!(notes.is_empty(), "{notes}");
    assert_eq!(printed_pointers(&flux, "flux"), pointers);
    let value: Value = serde_yaml_ng::from_str(&flux).unwrap();
    assert_eq!(value["apiVersion"], "kustomize.toolkit.fluxcd.io/v1");
    assert_eq!(value["spec"]["ignore"][0]["target"]["namespace"], "prod");

    // A file of several targets gets an entry each; other kinds are skipped.
    let scratch = Scratch::new("gitops-many");
    let two = scratch.file(
        "two.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n\
         apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\n\
         metadata: {name: a, namespace: ns-a}\nspec: {roles: [{name: server, instanceType: t}]}\n---\n\
         apiVersion: worker.gpustack.ai/v1alpha1\nkind: ModelDeployment\n\
         metadata: {name: b, namespace: ns-b}\n\
         spec: {roles: [{name: p, instanceType: t}, {name: d, instanceType: t}]}\n",
    );
    let (code, out, notes) = gitops(&["gitops", "--target", &two, "--for", "argocd"]);
    assert_eq!(code, 0, "{notes}");
    let value: Value = serde_yaml_ng::from_str(&out).unwrap();
    let entries = value["spec"]["ignoreDifferences"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["namespace"], "ns-b");
    assert_eq!(entries[1]["jsonPointers"].as_array().unwrap().len(), 4);
}

#[test]
fn bad_input_is_refused_with_what_is_wrong() {
    let scratch = Scratch::new("gitops-bad");
    let md = |metadata: &str, roles: &str| {
        format!(
            "apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nmetadata: {metadata}\nspec: {{roles: {roles}}}\n"
        )
    };
    let cases: [(&str, String, &[&str], i32, &str); 7] = [
        (
            "missing.yaml",
            String::new(),
            &[],
            2,
            "missing.yaml: cannot read",
        ),
        (
            "broken.yaml",
            "kind: [unclosed\n".into(),
            &[],
            2,
            "not readable YAML",
        ),
        (
            "scaler.yaml",
            std::fs::read_to_string(repo().join("examples/proportional.yaml")).unwrap(),
            &[],
            2,
            "holds no ModelDeployment of apiVersion worker.gpustack.ai/*; it holds ModelDeploymentScaler \"llm-serving\"",
        ),
        (
            "nameless.yaml",
            md("{}", "[{name: s, instanceType: t}]"),
            &[],
            1,
            "metadata.name is missing",
        ),
        (
            "roleless.yaml",
            md("{name: a}", "[]"),
            &[],
            1,
            "spec.roles is empty",
        ),
        (
            "typo.yaml",
            md("{name: a}", "[{name: s, replicas: many}]"),
            &[],
            1,
            "spec.roles[0].replicas",
        ),
        (
            "ok.yaml",
            md("{name: a}", "[{name: s, instanceType: t}]"),
            &["--namespace", "Prod"],
            2,
            "--namespace \"Prod\" is not a namespace name",
        ),
    ];
    for (file, content, extra, expected_code, expected) in cases {
        let path = if content.is_empty() {
            scratch.0.join(file).display().to_string()
        } else {
            scratch.file(file, &content)
        };
        let mut args = vec!["gitops", "--target", path.as_str(), "--for", "argocd"];
        args.extend_from_slice(extra);
        let (code, out, err) = gitops(&args);
        assert_eq!(code, expected_code, "{file}: {err}");
        assert!(out.is_empty(), "{file}: nothing printed on refusal: {out}");
        assert!(err.starts_with("mds: error: "), "{file}: {err}");
        assert!(err.contains(expected), "{file}: {err}");
    }
    let (code, _, err) = gitops(&["gitops", "--target", EXAMPLE, "--for", "jenkins"]);
    assert_eq!(code, 2);
    assert!(err.contains("argocd") && err.contains("flux"), "{err}");
}

#[test]
fn help_explains_the_pointers_and_the_sync_option() {
    let (code, help, _) = gitops(&["gitops", "--help"]);
    assert_eq!(code, 0);
    for phrase in [
        "--target <FILE>",
        "--for <TOOL>",
        "--namespace <NAMESPACE>",
        "/spec/roles/<i>/replicas",
        "~1",
        "RespectIgnoreDifferences=true",
        "spec.ignore",
        "docs/gitops.md",
    ] {
        assert!(help.contains(phrase), "missing {phrase:?} in:\n{help}");
    }
}

/// Sets the value at a JSON Pointer, making the objects on the way; `None` removes it.
fn set_at(document: &mut Value, pointer: &str, value: Option<Value>) {
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    let (last, path) = parts.split_last().unwrap();
    let mut node = document;
    for part in path {
        node = match node {
            Value::Array(items) => &mut items[part.parse::<usize>().unwrap()],
            other => other
                .as_object_mut()
                .unwrap()
                .entry(part.clone())
                .or_insert_with(|| json!({})),
        };
    }
    match (node, value) {
        (Value::Array(items), Some(value)) => items[last.parse::<usize>().unwrap()] = value,
        (Value::Object(map), Some(value)) => {
            map.insert(last.clone(), value);
        }
        (Value::Object(map), None) => {
            map.remove(last);
        }
        (other, value) => panic!("cannot set {pointer} in {other} to {value:?}"),
    }
}

/// The Git manifest with every ignored pointer taken from the live object, which is what Argo CD
/// applies with RespectIgnoreDifferences=true.
fn with_live_values(git: &Value, live: &Value, pointers: &[String]) -> Value {
    let mut synced = git.clone();
    for pointer in pointers {
        set_at(&mut synced, pointer, live.pointer(pointer).cloned());
    }
    synced
}

/// Applies a file as a GitOps tool would (client-side apply, or server-side apply as the given
/// field manager); returns the exit status and kubectl's messages.
fn sync(plane: &mds_testkit::ControlPlane, file: &str, server_side: bool) -> (bool, String) {
    let mut args = vec!["apply", "-f", file];
    if server_side {
        args.extend([
            "--server-side",
            "--force-conflicts",
            "--field-manager=gitops",
        ]);
    }
    let output = kubectl(plane, &args, None);
    (
        output.status.success(),
        format!("{}{}", text(&output.stdout), text(&output.stderr)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_over_a_bound_target_passes_only_with_the_printed_pointers() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("gitops").await.unwrap();
    install_operator_identity(plane, &namespace);
    let admin = plane.client();
    let operator = plane.service_account_client(&namespace, "mds");
    let webhook = InProcessWebhook::start(operator.clone(), None).await;
    webhook.register(&admin, &namespace).await;
    InProcessWebhook::wait_until_called(&admin, &namespace).await;

    let documents =
        deploy_support::objects(&std::fs::read_to_string(repo().join(EXAMPLE)).unwrap());
    let (mut git, mut scaler) = (documents[0].clone(), documents[1].clone());
    git["metadata"]["namespace"] = json!(namespace);
    scaler["metadata"]["namespace"] = json!(namespace);
    let scalers: Api<ModelDeploymentScaler> = Api::namespaced(admin.clone(), &namespace);

    // The Git manifest creates the target (an unbound target takes any user write).
    let scratch = Scratch::new("gitops-sync");
    let git_file = scratch.file("git.yaml", &serde_yaml_ng::to_string(&git).unwrap());
    let (created, said) = sync(plane, &git_file, false);
    assert!(created, "{said}");

    // The API server takes the mutating webhook's patch: the scaler, written without defaults
    // and without algorithm.type, is stored with them (D25, D28).
    scaler["spec"]["algorithm"]
        .as_object_mut()
        .unwrap()
        .remove("type");
    let written: ModelDeploymentScaler = serde_json::from_value(scaler.clone()).unwrap();
    let stored = scalers
        .create(&PostParams::default(), &written)
        .await
        .expect("the scaler is admitted");
    let mut expected = written.spec.clone();
    mds_api::defaults::default_spec(&mut expected);
    assert_eq!(
        stored.spec, expected,
        "the stored spec carries every default"
    );
    assert_eq!(
        serde_json::to_value(&stored.spec).unwrap()["algorithm"]["type"],
        "TokenThroughput"
    );

    // The operator binds the target and commits a count, through its own adapter, as deploy/'s
    // ServiceAccount; the fence lets both through.
    let (binding, live) = bind_as_operator(operator.clone(), &admin, &stored, "vl-serving").await;
    let vector: mds_api::status::ReplicaVector = [
        ("encode".to_string(), 1),
        ("prefill".to_string(), 4),
        ("decode".to_string(), 3),
    ]
    .into();
    let decision = DecisionPayload {
        decision_id: "gitops-test-1".into(),
        term: 1,
        vector: vector.clone(),
    }
    .to_annotation();
    operator_cluster(operator, "gitops-test")
        .patch_target(
            &namespace,
            "vl-serving",
            &commit(&target_shape(&live), &binding, &vector, &decision),
        )
        .await
        .expect("the operator commits");

    // What to ignore, as printed for this manifest.
    let (code, block, notes) = gitops(&["gitops", "--target", &git_file, "--for", "argocd"]);
    assert_eq!(code, 0, "{notes}");
    let pointers = printed_pointers(&block, "argocd");
    let (_, flux, _) = gitops(&["gitops", "--target", &git_file, "--for", "flux"]);
    assert_eq!(printed_pointers(&flux, "flux"), pointers);

    // A sync of the manifest as it is in Git would put the counts back: refused, both ways.
    for server_side in [false, true] {
        let (passed, said) = sync(plane, &git_file, server_side);
        assert!(
            !passed,
            "server-side {server_side}: the fence let it through: {said}"
        );
        assert!(
            said.contains("denied the request: binding fence (replica counts of a bound target)"),
            "server-side {server_side}: {said}"
        );
    }

    // The same manifest with the ignored pointers taken from the live object passes, and what
    // Git changes elsewhere lands.
    let targets_dynamic: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), &namespace, &md_resource());
    git["metadata"]["labels"] = json!({"team": "search"});
    for (round, server_side) in [false, true].into_iter().enumerate() {
        let live = serde_json::to_value(targets_dynamic.get("vl-serving").await.unwrap()).unwrap();
        let mut synced = with_live_values(&git, &live, &pointers);
        synced["metadata"]["labels"]["round"] = json!(round.to_string());
        let synced_file = scratch.file("synced.json", &synced.to_string());
        let (passed, said) = sync(plane, &synced_file, server_side);
        assert!(passed, "server-side {server_side}: {said}");
        let after = serde_json::to_value(targets_dynamic.get("vl-serving").await.unwrap()).unwrap();
        assert_eq!(after["metadata"]["labels"]["round"], round.to_string());
        for pointer in &pointers {
            assert_eq!(
                after.pointer(pointer),
                live.pointer(pointer),
                "{pointer} stays"
            );
        }
        assert_eq!(
            after["spec"]["roles"][1]["replicas"], 4,
            "the committed count"
        );
    }

    InProcessWebhook::unregister(&admin, &namespace).await;
    drop(webhook);
}
