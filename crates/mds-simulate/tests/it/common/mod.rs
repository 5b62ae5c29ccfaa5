//! Helpers the simulator's integration tests share.

use mds_api::ModelDeploymentScaler;
use mds_api::target::ModelDeployment;

/// A scaler and its target from a manifest holding both (as `mds simulate` reads one).
pub fn manifests(text: &str) -> (ModelDeploymentScaler, ModelDeployment) {
    let mut scaler = None;
    let mut target = None;
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        match value["kind"].as_str() {
            Some("ModelDeploymentScaler") => scaler = serde_json::from_value(value).ok(),
            Some("ModelDeployment") => target = serde_json::from_value(value).ok(),
            _ => {}
        }
    }
    (scaler.unwrap(), target.unwrap())
}
