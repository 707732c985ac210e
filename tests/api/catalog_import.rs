//! `manychat-agent catalog import` (issue: catalogs as businesses keep them), run as an operator
//! runs it, on the invented exports of `tests/fixtures/catalog-import/`: what it writes, and that
//! a refused import writes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::helpers::*;

/// The demo tenant in a fresh `config/` folder, without `tools.json` (its offering field must
/// list exactly the catalog's ids, which an import that adds offerings changes).
fn tenant() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    std::fs::remove_file(config.join("tools.json")).unwrap();
    (dir, config)
}

fn fixture(name: &str) -> PathBuf {
    repo_path("tests/fixtures/catalog-import").join(name)
}

/// `catalog import <file> --config <config>` and `extra`, in an empty environment.
fn import(config: &Path, file: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .env_clear()
        .args(["catalog", "import"])
        .arg(file)
        .arg("--config")
        .arg(config)
        .args(extra)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn catalog(config: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(config.join("catalog.json")).unwrap()).unwrap()
}

fn ids(config: &Path) -> Vec<String> {
    catalog(config)["offerings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

/// `config check` on `config` passes: the written catalog loads.
fn assert_config_check_passes(config: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .env_clear()
        .env("CONFIG_DIR", config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

/// The import was refused, wrote nothing, and said so.
fn assert_nothing_written(output: &Output, config: &Path, before: &[u8]) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = stderr(output);
    assert!(
        errors.ends_with("catalog import: nothing was written\n"),
        "{errors}"
    );
    assert_eq!(std::fs::read(config.join("catalog.json")).unwrap(), before);
    assert_no_temporary_file(config);
    errors
}

fn assert_no_temporary_file(config: &Path) {
    let names: Vec<String> = std::fs::read_dir(config)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".import-")), "{names:?}");
}

#[test]
fn catalog_import_adds_new_offerings_replaces_by_id_and_keeps_the_others() {
    let (_dir, config) = tenant();
    let csv = config.join("../update.csv");
    std::fs::write(
        &csv,
        "id,name,price,description\n\
         wheel-basics,Wheel Throwing Basics (new term),260,Six evenings at the wheel.\n\
         raku-weekend,Raku Weekend,180.00,Two days of raku firing.\n",
    )
    .unwrap();
    let output = import(&config, &csv, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).contains("2 offerings from ")
            && stdout(&output)
                .contains("(generic layout): 1 added, 1 replaced, 2 kept; 4 offerings in all"),
        "{}",
        stdout(&output)
    );
    assert_eq!(
        ids(&config),
        ["wheel-basics", "handbuilding", "glaze-lab", "raku-weekend"],
        "replaced in place, added at the end, the others kept"
    );
    let written = catalog(&config);
    assert_eq!(
        written["offerings"][0]["name"],
        "Wheel Throwing Basics (new term)"
    );
    assert_eq!(written["offerings"][0]["price"]["amount"], 26000);
    assert_eq!(written["offerings"][3]["price"]["amount"], 18000);
    assert_eq!(written["offerings"][3]["price"]["currency"], "GBP");
    assert_eq!(
        written["$schema"], "./schema/catalog.schema.json",
        "the file's $schema key is kept"
    );
    assert!(
        !written["paymentOptions"].as_array().unwrap().is_empty(),
        "the rest is kept"
    );
    assert_config_check_passes(&config);
    assert_no_temporary_file(&config);

    let output = import(&config, &csv, &["--replace"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).contains("2 dropped (--replace)"),
        "{}",
        stdout(&output)
    );
    assert_eq!(ids(&config), ["wheel-basics", "raku-weekend"]);
    assert_config_check_passes(&config);
}

#[test]
fn catalog_import_builds_a_new_catalog_json_from_a_shopify_export() {
    let (_dir, config) = tenant();
    std::fs::remove_file(config.join("catalog.json")).unwrap();
    let refused = import(&config, &fixture("shopify.csv"), &[]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        stderr(&refused).contains("does not exist: pass --business-name and --currency"),
        "{refused:?}"
    );
    assert!(!config.join("catalog.json").exists());

    let output = import(
        &config,
        &fixture("shopify.csv"),
        &["--business-name", "Lakeview Clay Co", "--currency", "EUR"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = stdout(&output);
    assert!(
        said.contains("(shopify layout): 3 added, 0 replaced, 0 kept"),
        "{said}"
    );
    assert!(
        said.contains("note: skipped 1 products not on sale"),
        "{said}"
    );
    let written = catalog(&config);
    assert_eq!(written["businessName"], "Lakeview Clay Co");
    assert_eq!(written["currency"], "EUR");
    assert_eq!(
        ids(&config),
        [
            "glaze-sampler",
            "throwing-tools-standard-sand",
            "throwing-tools-deluxe-charcoal"
        ]
    );
    assert_eq!(written["offerings"][1]["price"]["amount"], 2490);
    assert_config_check_passes(&config);
}

#[test]
fn catalog_import_reads_a_woocommerce_export_and_the_result_loads() {
    let (_dir, config) = tenant();
    let output = import(
        &config,
        &fixture("woocommerce.csv"),
        &["--format", "woocommerce"],
    );
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("4 added"), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("Regular price was imported"),
        "{}",
        stdout(&output)
    );
    assert_eq!(ids(&config).len(), 7);
    assert_config_check_passes(&config);
}

#[test]
fn catalog_import_any_refused_row_writes_nothing_and_every_row_is_named_by_line_and_column() {
    let (_dir, config) = tenant();
    let before = std::fs::read(config.join("catalog.json")).unwrap();
    let output = import(&config, &fixture("bad-price.csv"), &[]);
    let errors = assert_nothing_written(&output, &config, &before);
    for expected in [
        "bad-price.csv: line 3, column `price`: must be a price written as a plain decimal",
        "bad-price.csv: line 4, column `id`: must be an id",
        "bad-price.csv: line 5, column `price`: must have at most 2 decimals",
        "bad-price.csv: line 6, column `id`: makes the id `raku-weekend` that line 2 already made",
        "4 problems in ",
    ] {
        assert!(errors.contains(expected), "{expected} in:\n{errors}");
    }
    assert!(!errors.contains("1,299"), "never a cell's text: {errors}");
}

#[test]
fn catalog_import_an_empty_binary_badly_encoded_or_price_less_file_writes_nothing() {
    let (_dir, config) = tenant();
    let before = std::fs::read(config.join("catalog.json")).unwrap();
    for (file, says) in [
        ("empty.csv", "empty.csv: is empty"),
        (
            "binary.csv",
            "binary.csv: line 2: is binary (it holds NUL bytes)",
        ),
        ("latin1.csv", "latin1.csv: line 2: is not valid UTF-8"),
        (
            "missing-price.csv",
            "missing-price.csv: line 1: the header row matches no layout",
        ),
    ] {
        let errors =
            assert_nothing_written(&import(&config, &fixture(file), &[]), &config, &before);
        assert!(errors.contains(says), "{says} in:\n{errors}");
    }
    let errors = assert_nothing_written(
        &import(
            &config,
            &fixture("missing-price.csv"),
            &["--format", "generic"],
        ),
        &config,
        &before,
    );
    assert!(
        errors.contains("line 1: the header row has no price column"),
        "{errors}"
    );
}

#[test]
fn catalog_import_refuses_a_catalog_the_loader_would_refuse_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let before = std::fs::read(config.join("catalog.json")).unwrap();
    // tools.json's flows name the demo's offerings; --replace would drop them.
    let output = import(&config, &fixture("generic.csv"), &["--replace"]);
    let errors = assert_nothing_written(&output, &config, &before);
    assert!(
        errors.contains(
            "tools.json: $.flows[0].offering: `wheel-basics` is not an offering id in the catalog"
        ),
        "{errors}"
    );
}

#[test]
fn catalog_import_a_csv_over_its_64_mib_limit_is_refused_unread() {
    let (dir, config) = tenant();
    let before = std::fs::read(config.join("catalog.json")).unwrap();
    let huge = dir.path().join("huge.csv");
    // Sparse: the size is refused before a byte is read.
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(manychat_agent::config::import::MAX_CSV_BYTES + 1)
        .unwrap();
    let errors = assert_nothing_written(&import(&config, &huge, &[]), &config, &before);
    assert!(
        errors.contains("huge.csv: is larger than the 64 MiB limit for an import"),
        "{errors}"
    );
}
