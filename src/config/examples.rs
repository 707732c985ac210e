//! The demo tenant as shipped (`config/*.example`), on its own: the test suites load the demo
//! from here, never from the repo's `config/` itself, where an operator who follows the README
//! keeps their own `*.json` (which the loader would read before the examples).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

/// The tenant files the examples cover.
const FILES: [&str; 4] = ["prompt.md", "catalog.json", "rules.json", "tools.json"];

/// The demo's documents: `knowledge.example/` (the loader's stand-in for `knowledge/`).
const KNOWLEDGE_EXAMPLE: &str = "knowledge.example";

/// The demo's documents as (file name, bytes), in name order.
fn example_documents(repo: &Path) -> Vec<(String, Vec<u8>)> {
    let folder = repo.join(KNOWLEDGE_EXAMPLE);
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("config/{KNOWLEDGE_EXAMPLE} cannot be read: {e}"))
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(folder.join(&name))
                .unwrap_or_else(|e| panic!("config/{KNOWLEDGE_EXAMPLE}/{name}: {e}"));
            (name, bytes)
        })
        .collect()
}

/// A folder holding only the repo's `<name>.example` files and its `knowledge.example/`
/// documents, under those names (so a loader that allows examples reads them, and one that does
/// not reports them missing). One folder per content, under the system's temp folder, written
/// once and shared by every test process.
///
/// # Panics
/// When an example file cannot be read or the folder cannot be written (a test setup failure).
#[doc(hidden)]
pub fn shipped_examples() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let files: Vec<(String, Vec<u8>)> = FILES
        .iter()
        .map(|name| {
            let example = format!("{name}.example");
            let bytes = std::fs::read(repo.join(&example))
                .unwrap_or_else(|e| panic!("config/{example} cannot be read: {e}"));
            (example, bytes)
        })
        .collect();
    let documents = example_documents(&repo);
    let mut hasher = DefaultHasher::new();
    files.hash(&mut hasher);
    documents.hash(&mut hasher);
    let dir =
        std::env::temp_dir().join(format!("manychat-agent-examples-{:016x}", hasher.finish()));
    if dir.is_dir() {
        return dir;
    }
    // Written aside, then moved into place whole: a racing process finds it complete or absent.
    let aside = std::env::temp_dir().join(format!(
        "manychat-agent-examples-{:016x}.{}.partial",
        hasher.finish(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&aside);
    std::fs::create_dir_all(&aside).expect("temp folder for the examples");
    for (name, bytes) in &files {
        std::fs::write(aside.join(name), bytes).expect("copy of an example");
    }
    std::fs::create_dir(aside.join(KNOWLEDGE_EXAMPLE)).expect("the example documents' folder");
    for (name, bytes) in &documents {
        std::fs::write(aside.join(KNOWLEDGE_EXAMPLE).join(name), bytes)
            .expect("copy of an example document");
    }
    if std::fs::rename(&aside, &dir).is_err() {
        // Another process moved its copy in first.
        let _ = std::fs::remove_dir_all(&aside);
        assert!(dir.is_dir(), "{} could not be written", dir.display());
    }
    dir
}

/// The demo tenant loaded from [`shipped_examples`], as a loader that allows the examples reads
/// it.
///
/// # Panics
/// When the examples do not load (a test setup failure).
#[doc(hidden)]
pub fn demo_tenant() -> super::TenantConfig {
    let context = super::ConfigContext {
        allow_examples: true,
        ..super::ConfigContext::default()
    };
    super::load_dir(&shipped_examples(), &context).expect("the demo tenant loads")
}

/// Copies the demo tenant's example files into `dir` (created if missing) under their own names
/// (`rules.json`, …, its documents into `knowledge/`), as an operator's files that a test may
/// then edit.
///
/// # Panics
/// When a file cannot be copied (a test setup failure).
#[doc(hidden)]
pub fn copy_demo_into(dir: &Path) {
    std::fs::create_dir_all(dir)
        .unwrap_or_else(|e| panic!("{} cannot be created: {e}", dir.display()));
    let examples = shipped_examples();
    for name in FILES {
        std::fs::copy(examples.join(format!("{name}.example")), dir.join(name))
            .unwrap_or_else(|e| panic!("config/{name}.example cannot be copied: {e}"));
    }
    let knowledge = dir.join(super::load::KNOWLEDGE_DIR);
    std::fs::create_dir_all(&knowledge)
        .unwrap_or_else(|e| panic!("{} cannot be created: {e}", knowledge.display()));
    for (name, bytes) in example_documents(&examples) {
        std::fs::write(knowledge.join(&name), bytes)
            .unwrap_or_else(|e| panic!("config/{KNOWLEDGE_EXAMPLE}/{name} cannot be copied: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_examples_are_the_example_files_alone() {
        let dir = shipped_examples();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "catalog.json.example",
                "knowledge.example",
                "prompt.md.example",
                "rules.json.example",
                "tools.json.example"
            ]
        );
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for name in names.iter().filter(|n| *n != KNOWLEDGE_EXAMPLE) {
            assert_eq!(
                std::fs::read(dir.join(name)).unwrap(),
                std::fs::read(repo.join(name)).unwrap(),
                "{name}"
            );
        }
        assert_eq!(
            example_documents(&dir),
            example_documents(&repo),
            "the example documents"
        );
    }
}
