//! Target 3: a scaler as a user or a GitOps tool writes it, in YAML or JSON, through
//! decoding, defaulting and every admission rule (with and without a target). Oracles: a
//! scaler that admission accepts is unchanged by defaulting it again, and serializes back to
//! an object that decodes to the same scaler, which admission accepts too.

use mds_api::ModelDeploymentScaler;
use mds_api::defaults::default_spec;
use mds_api::target::ModelDeployment;
use mds_api::validation::validate_scaler;
use mds_testdata::mk_target;

pub fn run(data: &[u8]) {
    let Some(text) = super::text(data) else {
        return;
    };
    let target: ModelDeployment = mk_target("llm")
        .roles(&[
            ("prefill", "Prefill", 2),
            ("decode", "Decode", 3),
            ("server", "Server", 1),
        ])
        .typed();
    let decoded = [
        serde_json::from_str::<ModelDeploymentScaler>(text).ok(),
        serde_yaml_ng::from_str::<ModelDeploymentScaler>(text).ok(),
    ];
    for scaler in decoded.into_iter().flatten() {
        for target in [None, Some(&target)] {
            admit(&scaler, target);
        }
    }
}

/// What the webhooks do with a CREATE: default, then validate; and what must hold of a scaler
/// they accept.
fn admit(scaler: &ModelDeploymentScaler, target: Option<&ModelDeployment>) {
    let mut defaulted = scaler.clone();
    default_spec(&mut defaulted.spec);
    let report = validate_scaler(&defaulted, None, target);
    // Every finding names its field.
    for finding in report.errors.iter().chain(&report.warnings) {
        assert!(
            !finding.path.is_empty(),
            "a finding without a field: {finding}"
        );
    }
    if !report.errors.is_empty() {
        return;
    }
    let mut again = defaulted.clone();
    default_spec(&mut again.spec);
    assert_eq!(
        again, defaulted,
        "defaulting an accepted scaler again changed it"
    );
    let json = serde_json::to_string(&defaulted).expect("an accepted scaler serializes");
    let back: ModelDeploymentScaler =
        serde_json::from_str(&json).expect("an accepted scaler decodes from its own JSON");
    assert_eq!(
        back, defaulted,
        "the round trip through JSON changed the scaler"
    );
    let report = validate_scaler(&back, None, target);
    assert!(
        report.errors.is_empty(),
        "admission refuses what it accepted, after a round trip: {:?}",
        report.errors
    );
}
