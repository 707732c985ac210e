//! Which tenant files a command read, printed by every command that reads them, so an operator
//! sees at once whether their own `config/*.json` or the demo's examples answered.
//!
//! The rule (config/README.md "How files are found"): `demo`, `report` and `eval` read each
//! file from `CONFIG_DIR`, and its `.example` when the file is absent, as do `release` on the
//! demo's database and `manychat check` against the demo's sandbox; every other command reads
//! only the files themselves and refuses to start when a required one is missing.

use std::path::Path;

use crate::config::ConfigContext;
use crate::config::load::{files_read, knowledge_read};

/// `tenant config: config/ (prompt.md, catalog.json, rules.json, tools.json, plugins.json: 2
/// tools, knowledge/: 3 documents)`, saying when the demo's examples stood in. `plugins.json` is
/// named when present, with its tools counted as written, and the documents' folder with the
/// files it holds (`config check` says whether they load).
pub(super) fn line(dir: &Path, ctx: &ConfigContext) -> String {
    let mut files = files_read(dir, ctx);
    let knowledge = knowledge_read(dir, ctx);
    let documents = knowledge.as_ref().map(|(folder, count)| match count {
        1 => format!("{folder}/: 1 document"),
        n => format!("{folder}/: {n} documents"),
    });
    files.extend(documents);
    let examples = files
        .iter()
        .filter(|f| f.ends_with(".example") || f.starts_with("knowledge.example/"))
        .count();
    let note = match examples {
        0 => String::new(),
        n if n == files.len() => "; the demo tenant's examples, not your own files".to_owned(),
        _ => "; a .example stands in for each file you have not written".to_owned(),
    };
    let plugins = dir.join(crate::plugins::PLUGINS_FILE);
    if plugins.is_file() {
        let tools = std::fs::read(&plugins)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|file| file.get("tools")?.as_array().map(Vec::len));
        files.push(match tools {
            Some(1) => format!("{}: 1 tool", crate::plugins::PLUGINS_FILE),
            Some(n) => format!("{}: {n} tools", crate::plugins::PLUGINS_FILE),
            None => crate::plugins::PLUGINS_FILE.to_owned(),
        });
    }
    format!(
        "tenant config: {} ({}{note})",
        crate::config::printable(&dir.display().to_string()),
        files.join(", ")
    )
}

/// [`line`] on stderr, so a command's own output (a report, JSON) stays as it was.
pub(super) fn print(dir: &Path, ctx: &ConfigContext) {
    eprintln!("{}", line(dir, ctx));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_line_names_the_files_read_and_when_the_examples_stood_in() {
        let examples = crate::config::examples::shipped_examples();
        let allowed = ConfigContext {
            allow_examples: true,
            ..ConfigContext::default()
        };
        assert_eq!(
            line(&examples, &allowed),
            format!(
                "tenant config: {} (prompt.md.example, catalog.json.example, \
                 rules.json.example, tools.json.example, knowledge.example/: 1 document; the \
                 demo tenant's examples, not your own files)",
                examples.display()
            )
        );
        let own = tempfile::tempdir().unwrap();
        std::fs::write(own.path().join("prompt.md"), "x").unwrap();
        std::fs::write(own.path().join("catalog.json"), "{}").unwrap();
        assert_eq!(
            line(own.path(), &ConfigContext::default()),
            format!(
                "tenant config: {} (prompt.md, catalog.json)",
                own.path().display()
            )
        );
        std::fs::create_dir(own.path().join("knowledge")).unwrap();
        std::fs::write(own.path().join("knowledge/a.md"), "a").unwrap();
        std::fs::write(own.path().join("knowledge/.DS_Store"), "").unwrap();
        assert_eq!(
            line(own.path(), &ConfigContext::default()),
            format!(
                "tenant config: {} (prompt.md, catalog.json, knowledge/: 1 document)",
                own.path().display()
            )
        );
        std::fs::remove_dir_all(own.path().join("knowledge")).unwrap();
        std::fs::write(
            own.path().join("plugins.json"),
            r#"{"tools": [{"name": "a"}, {"name": "b"}]}"#,
        )
        .unwrap();
        assert_eq!(
            line(own.path(), &ConfigContext::default()),
            format!(
                "tenant config: {} (prompt.md, catalog.json, plugins.json: 2 tools)",
                own.path().display()
            )
        );
    }
}
