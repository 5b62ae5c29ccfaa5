//! The two scaler webhooks as the API server runs them: validation words its refusal exactly as
//! `mds validate` does, and the mutating webhook's defaults are what the API server stores.

use kube::api::PostParams;
use mds_api::ModelDeploymentScaler;
use mds_webhook::configuration::VALIDATION_WEBHOOK;
use serde_json::{Value, json};

use super::lab::{Lab, refusal, scaler_manifest, target_manifest};
use crate::common::{Scratch, mds, text};
use crate::deploy_support::kubectl;

fn yaml(value: &Value) -> String {
    serde_yaml_ng::to_string(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_scaler_is_refused_with_the_lines_mds_validate_prints() {
    let Some(lab) = Lab::new("invalid-scaler").await else {
        return;
    };
    let target = target_manifest("llm", &[("prefill", 1), ("decode", 1)]);
    lab.create_target("llm", &[("prefill", 1), ("decode", 1)])
        .await;
    // Two mistakes only admission finds: a zero target (the schema cannot read quantities) and
    // a target role without bounds (it needs the target, which the webhook reads from the
    // cluster).
    let mut scaler = scaler_manifest("broken", "llm", &["prefill"]);
    scaler["spec"]["algorithm"]["proportional"]["roleTargets"][0]["target"] = json!("0");
    let scratch = Scratch::new("fence-invalid");
    let scaler_file = scratch.file("scaler.yaml", &yaml(&scaler));
    let target_file = scratch.file("target.yaml", &yaml(&target));

    let cli = mds(
        &["validate", "-f", &scaler_file, "--target", &target_file],
        None,
    );
    assert_eq!(cli.status.code(), Some(1), "{}", text(&cli.stderr));
    let printed = text(&cli.stdout);
    let report = printed
        .strip_prefix(&format!("{scaler_file}: document 1: "))
        .unwrap_or_else(|| panic!("mds validate printed {printed:?}"))
        .trim_end();
    assert!(
        report.contains("checked against ModelDeployment \"llm\""),
        "{report}"
    );
    assert_eq!(
        report.lines().count(),
        3,
        "a verdict and two findings: {report}"
    );

    let object: ModelDeploymentScaler = serde_json::from_value(scaler).unwrap();
    let answer = lab.scalers().create(&PostParams::default(), &object).await;
    assert_eq!(
        refusal(answer),
        format!("admission webhook \"{VALIDATION_WEBHOOK}\" denied the request: {report}")
    );
    assert!(
        lab.scalers().get_opt("broken").await.unwrap().is_none(),
        "nothing stored"
    );
    lab.finish().await;
}

/// The spec `mds validate --show-defaults` prints for `file`.
fn defaulted_by_the_cli(file: &str) -> mds_api::spec::ModelDeploymentScalerSpec {
    let cli = mds(&["validate", "-f", file, "--show-defaults"], None);
    assert_eq!(cli.status.code(), Some(0), "{}", text(&cli.stderr));
    let printed: ModelDeploymentScaler = serde_yaml_ng::from_str(&text(&cli.stdout)).unwrap();
    printed.spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_are_stored_and_a_switch_of_blocks_under_the_stored_type_is_inferred_again() {
    let Some(lab) = Lab::new("defaults").await else {
        return;
    };
    lab.create_target("chat", &[("server", 1)]).await;
    // Written as people write it: no algorithm type and none of the stored defaults.
    let proportional = json!({
        "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeploymentScaler",
        "metadata": {"name": "chat", "namespace": lab.namespace},
        "spec": {"targetRef": {"name": "chat"},
            "roles": [{"name": "server", "maxReplicas": 4}],
            "algorithm": {"proportional": {"metric": "QueueDepth",
                "roleTargets": [{"name": "server", "target": "8"}]}}}
    });
    let scratch = Scratch::new("fence-defaults");
    let file = scratch.file("v1.yaml", &yaml(&proportional));
    let applied = kubectl(lab.plane, &["apply", "-f", &file], None);
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    let stored = lab.scalers().get("chat").await.unwrap();
    assert_eq!(
        stored.spec,
        defaulted_by_the_cli(&file),
        "stored as mds validate --show-defaults prints it (D25)"
    );
    let stored_value = serde_json::to_value(&stored.spec).unwrap();
    assert_eq!(stored_value["algorithm"]["type"], "Proportional", "D28");
    assert_eq!(
        stored_value["algorithm"]["proportional"]["tolerance"],
        "0.1"
    );

    // The manifest switches to a tokenThroughput block, still without a type. kubectl apply
    // sends the stored type Proportional along with the new block (the type was never in the
    // applied manifest, so apply leaves it); the webhook infers the type again (D28).
    let mut token = proportional.clone();
    token["spec"]["algorithm"] =
        json!({"tokenThroughput": {"serverTargetTokensPerSecond": "2000"}});
    let file = scratch.file("v2.yaml", &yaml(&token));
    let applied = kubectl(lab.plane, &["apply", "-f", &file], None);
    assert!(
        applied.status.success(),
        "{}{}",
        text(&applied.stdout),
        text(&applied.stderr)
    );
    let switched = lab.scalers().get("chat").await.unwrap();
    assert_eq!(switched.spec, defaulted_by_the_cli(&file));
    let switched_value = serde_json::to_value(&switched.spec).unwrap();
    assert_eq!(switched_value["algorithm"]["type"], "TokenThroughput");
    assert!(switched_value["algorithm"].get("proportional").is_none());
    assert!(
        switched.metadata.generation > stored.metadata.generation,
        "an UPDATE, not a new object"
    );
    lab.finish().await;
}
