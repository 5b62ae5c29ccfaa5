//! The YAML users paste into a scaler's spec: one builder for every suggestion the simulator
//! prints (`--suggest`, `--suggest --metrics`), from the JSON the scaler's own types
//! serialise to, so a fragment always reads back as the field it names.

use serde_json::Value;

/// `spec.algorithm` as YAML under `  algorithm:`, ready to paste into a scaler's spec.
pub fn algorithm(algorithm: &Value) -> String {
    spec_blocks(&[("algorithm", algorithm)])
}

/// Blocks of a scaler's spec (`algorithm`, `behavior`) as YAML, each under its key, ready to
/// paste into the spec.
pub fn spec_blocks(blocks: &[(&str, &Value)]) -> String {
    let mut out = String::new();
    for (key, value) in blocks {
        out.push_str(&format!("  {key}:\n"));
        yaml(&mut out, value, 4);
    }
    out
}

fn yaml(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Object(_) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        yaml(out, v, indent + 2);
                    }
                    Value::Array(items) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        for item in items {
                            let mut inner = String::new();
                            yaml(&mut inner, item, indent + 4);
                            let inner = inner.trim_start().to_string();
                            out.push_str(&format!("{pad}  - {inner}"));
                        }
                    }
                    _ => out.push_str(&format!("{pad}{k}: {}\n", scalar(v))),
                }
            }
        }
        _ => out.push_str(&format!("{pad}{}\n", scalar(v))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_fragment_reads_back_as_the_algorithm_it_was_made_from() {
        let algorithm = json!({
            "type": "Proportional",
            "proportional": {"metric": "QueueDepth", "roleTargets": [
                {"name": "prefill", "target": "2.5"}, {"name": "decode", "target": "12"}
            ]}
        });
        let text = super::algorithm(&algorithm);
        let back: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(back["algorithm"], algorithm, "{text}");
    }
}
