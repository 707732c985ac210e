//! JSON Schemas for `catalog.json`, `rules.json` and `tools.json`, generated from the Rust types
//! so editors can complete and check a tenant's files (SYSTEM 5.1, beyond).
//!
//! Invariant: the committed `config/schema/*.schema.json` equal what [`schemas`] generates; the
//! test `config_schemas_are_in_sync` fails otherwise (run it with `UPDATE_SCHEMAS=1` to rewrite
//! them). The schemas describe types only; the cross-checks of `validate` are not expressible
//! in them, so a file that passes its schema can still be refused at load.

use schemars::schema_for;

use super::tenant::{Catalog, Rules, ToolsConfig};

/// `(file name under config/schema/, schema)` for each JSON config file. Each schema's `$id` is
/// its own file name (a reference resolved where the file lies), and each allows the top-level
/// `"$schema"` key an editor writes to find it (`config/README.md` "Editor support").
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("catalog.schema.json", schema_for!(Catalog).to_value()),
        ("rules.schema.json", schema_for!(Rules).to_value()),
        ("tools.schema.json", schema_for!(ToolsConfig).to_value()),
        (
            "plugins.schema.json",
            schema_for!(super::plugins::PluginsConfig).to_value(),
        ),
    ]
    .into_iter()
    .map(|(name, mut schema)| {
        schema["$id"] = serde_json::Value::from(name);
        if let Some(properties) = schema["properties"].as_object_mut() {
            properties.insert(
                "$schema".to_owned(),
                serde_json::json!({
                    "description": format!(
                        "This file's JSON Schema, for editors (e.g. ./schema/{name}); not read \
                         by the service."
                    ),
                    "type": "string"
                }),
            );
        }
        (name, schema)
    })
    .collect()
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

    /// An editor finds each schema from the `"$schema"` key of the shipped examples (copied to
    /// `config/`, `./schema/<name>` resolves to the committed file), and each schema's `$id` is
    /// that file's name.
    #[test]
    fn each_example_names_its_schema_whose_id_is_its_file_name() {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for (name, schema) in schemas() {
            assert_eq!(schema["$id"], name);
            assert!(config.join("schema").join(name).is_file(), "{name}");
            let file = name.replace(".schema.json", ".json.example");
            if name == "plugins.schema.json" {
                continue;
            }
            let text = std::fs::read_to_string(config.join(&file)).expect("example exists");
            let example: serde_json::Value = serde_json::from_str(&text).expect("example parses");
            assert_eq!(example["$schema"], format!("./schema/{name}"), "{file}");
        }
    }

    /// Validates `<dir>/<file>` for each schema, where `suffix` maps `catalog` to a file name.
    fn assert_files_satisfy_schemas(dir: &Path, suffix: &str) {
        for (name, schema) in schemas() {
            let file = name.replace(".schema.json", suffix);
            if name == "plugins.schema.json" && !dir.join(&file).exists() {
                // plugins.json is optional, and the demo tenant has none in its folder.
                continue;
            }
            let text = std::fs::read_to_string(dir.join(&file)).expect("config file exists");
            let instance: serde_json::Value = serde_json::from_str(&text).expect("file parses");
            let validator = jsonschema::validator_for(&schema).expect("schema compiles");
            // Instance paths and error kinds only: the messages would quote file values.
            let errors: Vec<String> = validator
                .iter_errors(&instance)
                .map(|e| e.instance_path().to_string())
                .collect();
            assert!(errors.is_empty(), "{file} breaks its schema at {errors:?}");
        }
    }

    #[test]
    fn system_5_1_demo_examples_and_spanish_tenant_satisfy_their_schemas() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_files_satisfy_schemas(&root.join("config"), ".json.example");
        assert_files_satisfy_schemas(&root.join("tests/fixtures/tenant-es"), ".json");
    }

    #[test]
    fn system_5_1_reference_config_satisfies_the_schemas() {
        // A fictional tenant shaped exactly like the reference implementation's example.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat-config");
        assert_files_satisfy_schemas(&dir, ".json.example");
    }

    #[test]
    fn system_5_1_schema_refuses_an_unknown_key_and_a_bad_id() {
        let (_, tools) = schemas()
            .into_iter()
            .find(|(name, _)| *name == "tools.schema.json")
            .expect("tools schema");
        let validator = jsonschema::validator_for(&tools).expect("schema compiles");
        let bad = serde_json::json!({
            "flows": [{"id": "Not An Id", "flowNs": "x", "description": "d", "colour": 1}]
        });
        let paths: Vec<String> = validator
            .iter_errors(&bad)
            .map(|e| e.instance_path().to_string())
            .collect();
        assert!(paths.contains(&"/flows/0".to_owned()), "{paths:?}");
        assert!(paths.contains(&"/flows/0/id".to_owned()), "{paths:?}");
    }
}
