//! JSON Schemas for `catalog.json`, `rules.json` and `tools.json`, generated from the Rust types
//! so editors can complete and check a tenant's files (SYSTEM 5.1, beyond).
//!
//! Invariant: the committed `config/schema/*.schema.json` equal what [`schemas`] generates; the
//! test `config_schemas_are_in_sync` fails otherwise (run it with `UPDATE_SCHEMAS=1` to rewrite
//! them). The schemas describe types only; the cross-checks of `validate` are not expressible
//! in them, so a file that passes its schema can still be refused at load.

use schemars::schema_for;

use super::tenant::{Catalog, Rules, ToolsConfig};

/// `(file name under config/schema/, schema)` for each JSON config file.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("catalog.schema.json", schema_for!(Catalog).to_value()),
        ("rules.schema.json", schema_for!(Rules).to_value()),
        ("tools.schema.json", schema_for!(ToolsConfig).to_value()),
    ]
}

/// A schema as committed: pretty JSON with a trailing newline.
pub fn render(schema: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn config_schemas_are_in_sync() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/schema");
        let update = std::env::var("UPDATE_SCHEMAS").is_ok_and(|v| v == "1");
        for (name, schema) in schemas() {
            let path = dir.join(name);
            let generated = render(&schema);
            if update {
                std::fs::create_dir_all(&dir).expect("create config/schema");
                std::fs::write(&path, &generated).expect("write schema");
                continue;
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == generated,
                "{} is out of date: run `UPDATE_SCHEMAS=1 cargo test --lib config_schemas_are_in_sync` and commit it",
                path.display()
            );
        }
    }

    #[test]
    fn system_5_1_demo_examples_satisfy_their_schemas() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for (name, schema) in schemas() {
            let file = name.replace(".schema.json", ".json.example");
            let text = std::fs::read_to_string(dir.join(&file)).expect("example exists");
            let instance: serde_json::Value = serde_json::from_str(&text).expect("example parses");
            let validator = jsonschema::validator_for(&schema).expect("schema compiles");
            let errors: Vec<String> = validator
                .iter_errors(&instance)
                .map(|e| format!("{}: {e}", e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{file}: {errors:?}");
        }
    }
}
