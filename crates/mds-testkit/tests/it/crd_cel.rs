//! The invalid-scaler corpus of the admission tests, applied to a real API server: the CRD's
//! structural schema and CEL rules must refuse every manifest whose broken rule they encode, with
//! the same verdict as `mds validate`, and admit the rest (rules only admission can check).

#[path = "../../../mds-api/tests/it/common/mod.rs"]
mod common;

use common::invalid_scalers::cases;
use common::{md, predictive, proportional, spec, token_throughput};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::Status;
use mds_api::defaults::default_spec;
use mds_api::validation::validate_scaler;
use mds_api::{ModelDeploymentScaler, ModelDeploymentScalerSpec};
use serde_json::{Value, json};

/// Corpus cases the API server admits, because the CRD does not carry their rule (docs/DESIGN.md,
/// "The API types": the CRD holds ranges, enums, required fields, list keys and the CEL rules the
/// API server can check alone). Only admission (`mds validate`, the webhook) refuses them. Cases
/// that need the target are admission-only without being listed. A change either way fails.
const ADMISSION_ONLY: &[&str] = &[
    // Name syntax: the schema bounds lengths only.
    "targetRef.name is a DNS name",
    "role names are DNS labels",
    // Which algorithm block a type needs: only Proportional's is a CEL rule.
    "TokenThroughput needs its block",
    "omitted algorithm selects TokenThroughput",
    "Predictive needs its block",
    "TokenThroughput needs a capacity",
    "Predictive needs a forecast capacity",
    // Quantity values: the schema checks the syntax; CEL compares only ratio min with max.
    "tolerance positive",
    "tolerance at most 1",
    "roleTargets targets are positive",
    "panicThreshold positive",
    "ttftTargetMilliseconds positive",
    "itlTargetMilliseconds positive",
    "capacities positive",
    "forecast capacities positive",
    "ratio min positive",
    "ratio target positive",
    "ratio target not below min",
    "ratio target not above max",
    // Lookups across lists, and the ratio feasibility search (D17).
    "roleTargets name scaled roles",
    "every scaled role has a target or a direct ratio to a targeted role",
    "ratio roles are scaled roles",
    "priority names scaled roles",
    "ratio bands feasible within bounds (D17)",
];

/// `mds validate`'s verdict: the stored defaults, then every admission rule; the error paths.
fn mds_validate_paths(spec_value: &Value, target: Option<&Value>) -> Vec<String> {
    let mut defaulted: ModelDeploymentScalerSpec = spec(spec_value);
    default_spec(&mut defaulted);
    let scaler = ModelDeploymentScaler::new("llm-serving", defaulted);
    let target = target.map(md);
    let report = validate_scaler(&scaler, None, target.as_ref());
    let mut paths: Vec<String> = report.errors.iter().map(|e| e.path.clone()).collect();
    paths.sort();
    paths.dedup();
    paths
}

fn scaler_resource() -> ApiResource {
    ApiResource::erase::<ModelDeploymentScaler>(&())
}

/// A server-side dry-run create: the full validation chain, nothing stored.
async fn dry_run_create(api: &Api<DynamicObject>, name: &str, spec: &Value) -> Result<(), Status> {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": name},
        "spec": spec
    }))
    .expect("a scaler object");
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(*status),
        Err(other) => panic!("dry-run create of {name} failed outside validation: {other}"),
    }
}

/// The field paths the API server names in a refusal (a cause without a field is dropped).
fn refused_fields(status: &Status) -> Vec<String> {
    let mut fields: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.field.clone())
        .filter(|f| !f.is_empty() && f != "<nil>")
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

/// Whether one path is the other or lies inside it (`spec.roles[0]` and
/// `spec.roles[0].minReplicas`): the API server reports a CEL rule at the object that carries it.
fn related(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
    };
    inside(a, b) || inside(b, a)
}

#[tokio::test]
async fn the_crd_rules_refuse_what_mds_validate_refuses() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("crd-cel").await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(plane.client(), &namespace, &scaler_resource());

    for (name, base) in [
        ("proportional", proportional()),
        ("token-throughput", token_throughput()),
        ("predictive", predictive()),
    ] {
        if let Err(status) = dry_run_create(&api, name, &base).await {
            panic!("the API server refused the valid {name} base: {status:?}");
        }
    }

    let mut mismatches = Vec::new();
    let mut report = Vec::new();
    for (index, case) in cases().iter().enumerate() {
        let (spec, target) = case.build();
        let validate = mds_validate_paths(&spec, case.with_target.then_some(&target));
        assert!(
            !validate.is_empty(),
            "corpus case {:?} is valid for mds validate; the corpus holds only invalid ones",
            case.name
        );
        let server = dry_run_create(&api, &format!("case-{index}"), &spec).await;
        let admission_only = case.with_target || ADMISSION_ONLY.contains(&case.name);
        match (&server, admission_only) {
            (Err(status), false) => {
                let fields = refused_fields(status);
                // The same place, not necessarily every consequence: `mds validate` applies the
                // stored defaults first and may report a follow-on error the server does not.
                let same_place = validate
                    .iter()
                    .any(|path| fields.iter().any(|field| related(path, field)));
                if !same_place {
                    mismatches.push(format!(
                        "{:?}: the API server refused at {fields:?}, mds validate at {validate:?}",
                        case.name
                    ));
                }
                report.push(format!("refused  {:?} at {fields:?}", case.name));
            }
            (Ok(()), true) => report.push(format!("admitted {:?} (admission only)", case.name)),
            (Err(status), true) => mismatches.push(format!(
                "{:?} is admission-only but the API server refused it: {}",
                case.name, status.message
            )),
            (Ok(()), false) => mismatches.push(format!(
                "{:?}: mds validate refuses it at {validate:?}, the API server admitted it",
                case.name
            )),
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[tokio::test]
async fn the_api_server_keeps_target_ref_immutable() {
    let Some(plane) = mds_testkit::e2e() else {
        return;
    };
    let namespace = plane.namespace("immutable").await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(plane.client(), &namespace, &scaler_resource());
    let scaler: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeploymentScaler",
        "metadata": {"name": "llm-serving"},
        "spec": proportional()
    }))
    .unwrap();
    let mut stored = api.create(&PostParams::default(), &scaler).await.unwrap();
    stored.data["spec"]["targetRef"]["name"] = json!("other");
    match api
        .replace("llm-serving", &PostParams::default(), &stored)
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert!(status.message.contains("immutable"), "{}", status.message);
        }
        other => panic!("changing targetRef.name was not refused: {other:?}"),
    }
    // mds validate says the same about the same change.
    let old = spec(&proportional());
    let mut new = proportional();
    new["targetRef"]["name"] = json!("other");
    let report = mds_api::validation::validate(&spec(&new), Some(&old), None);
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.path == "spec.targetRef.name")
    );
}
