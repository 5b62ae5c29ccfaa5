//! Reading an object of the API server (JSON) into our model, naming the field that does not fit.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// `object` as `T`; the error names the field that does not decode (`spec.roles[0].replicas:
/// invalid type: ...`).
pub fn typed<T: DeserializeOwned>(object: &impl Serialize) -> Result<T, String> {
    let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}
