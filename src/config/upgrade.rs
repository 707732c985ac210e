//! `manychat-agent config upgrade` (042): renames the pre-offering keys of a tenant's files in
//! place. The loader accepts only the new names; this is the one way to move an old config.
//!
//! | file | old key (where) | new key |
//! |---|---|---|
//! | catalog.json | `courses` (top level) | `offerings` |
//! | catalog.json | `enrollmentUrl` (in each offering) | `url` |
//! | tools.json | `course` (in `fields[]` and `flows[]` entries) | `offering` |
//! | rules.json | `enrolledTag` (in `learning`) | `convertedTag` |
//!
//! Invariants: only the key names change, byte for byte everything else stays (order, spacing,
//! values, comments-free JSON as written); an object that already holds the new key keeps both
//! and is reported, never overwritten; a second run changes nothing; `prompt.md` and every
//! other file are never touched; nothing is invented.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One rename rule: in objects at `parent` (a path of keys, `*` for any array index), `old`
/// becomes `new`.
struct Rename {
    parent: &'static [&'static str],
    old: &'static str,
    new: &'static str,
}

const fn rename(parent: &'static [&'static str], old: &'static str, new: &'static str) -> Rename {
    Rename { parent, old, new }
}

const CATALOG: &[Rename] = &[
    rename(&[], "courses", "offerings"),
    rename(&["courses", "*"], "enrollmentUrl", "url"),
    rename(&["offerings", "*"], "enrollmentUrl", "url"),
];

const TOOLS: &[Rename] = &[
    rename(&["fields", "*"], "course", "offering"),
    rename(&["flows", "*"], "course", "offering"),
];

const RULES: &[Rename] = &[rename(&["learning"], "enrolledTag", "convertedTag")];

/// The keys the loader refuses with a pointer to `config upgrade`: (old, new).
pub const OLD_KEYS: [(&str, &str); 4] = [
    ("courses", "offerings"),
    ("enrollmentUrl", "url"),
    ("course", "offering"),
    ("enrolledTag", "convertedTag"),
];

/// What an upgrade did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUpgrade {
    pub path: PathBuf,
    /// JSON paths of the keys renamed, as `$.courses → offerings`.
    pub renamed: Vec<String>,
    /// Old keys left in place because the object already holds the new one.
    pub kept: Vec<String>,
}

/// Upgrades the tenant files in `dir` (each file, or its `.example` when only that exists).
/// Returns what changed per file; a file that needs nothing is not written.
pub fn upgrade_dir(dir: &Path) -> Result<Vec<FileUpgrade>, String> {
    let mut done = Vec::new();
    for (name, rules) in [
        ("catalog.json", CATALOG),
        ("tools.json", TOOLS),
        ("rules.json", RULES),
    ] {
        let plain = dir.join(name);
        let example = dir.join(format!("{name}.example"));
        let path = if plain.exists() {
            plain
        } else if example.exists() {
            example
        } else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot be read ({})", path.display(), e.kind()))?;
        let (upgraded, renamed, kept) = upgrade_text(&text, rules)
            .map_err(|message| format!("{}: {message}", path.display()))?;
        if upgraded != text {
            std::fs::write(&path, upgraded)
                .map_err(|e| format!("{}: cannot be written ({})", path.display(), e.kind()))?;
        }
        if !renamed.is_empty() || !kept.is_empty() {
            done.push(FileUpgrade {
                path,
                renamed,
                kept,
            });
        }
    }
    Ok(done)
}

#[derive(Debug)]
enum Frame {
    Object { key: Option<String> },
    Array { index: usize },
}

/// Where the JSON string opening with the `"` at `open` closes: the index of its closing
/// `"`, a backslash skipping the byte after it, or `bytes.len()` when it never closes.
pub(crate) fn string_close(bytes: &[u8], open: usize) -> usize {
    let mut i = open + 1;
    while i < bytes.len() && bytes[i] != b'"' {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i
}

/// The text with every key `rules` names renamed in place, and the JSON paths renamed and kept.
fn upgrade_text(
    text: &str,
    rules: &[Rename],
) -> Result<(String, Vec<String>, Vec<String>), String> {
    let document: Value =
        serde_json::from_str(text.trim_start_matches('\u{feff}')).map_err(|_| {
            "is not valid JSON; fix it first (`manychat-agent config check`)".to_owned()
        })?;
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut renamed, mut kept) = (Vec::new(), Vec::new());
    let mut stack: Vec<Frame> = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i = string_close(bytes, start);
                let end = (i + 1).min(bytes.len());
                let is_key = matches!(stack.last(), Some(Frame::Object { key: None }));
                if is_key {
                    let raw = &text[start + 1..end - 1];
                    let key: String = serde_json::from_str(&text[start..end]).unwrap_or_default();
                    let parent = path_of(&stack);
                    if let Some(rule) = rules
                        .iter()
                        .find(|r| r.old == key && matches(r.parent, &parent))
                    {
                        let at = format!(
                            "$.{}",
                            parent
                                .iter()
                                .chain([&key])
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(".")
                        );
                        if holds(&document, &parent, rule.new) {
                            kept.push(at);
                        } else {
                            out.push_str(&text[copied..start]);
                            out.push('"');
                            out.push_str(rule.new);
                            out.push('"');
                            copied = end;
                            renamed.push(format!("{at} → {}", rule.new));
                        }
                    }
                    let _ = raw;
                    if let Some(Frame::Object { key: slot }) = stack.last_mut() {
                        *slot = Some(key);
                    }
                }
                i = end;
                continue;
            }
            b'{' => stack.push(Frame::Object { key: None }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key }) => *key = None,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    Ok((out, renamed, kept))
}

/// The path of the object being read: keys, and `*`-matchable indices.
fn path_of(stack: &[Frame]) -> Vec<String> {
    let mut path = Vec::new();
    // Each frame but the innermost (the object whose key is being read) contributes the key or
    // index under which the next frame sits.
    for frame in &stack[..stack.len().saturating_sub(1)] {
        match frame {
            Frame::Object { key } => path.push(key.clone().unwrap_or_default()),
            Frame::Array { index } => path.push(index.to_string()),
        }
    }
    path
}

fn matches(pattern: &[&str], path: &[String]) -> bool {
    pattern.len() == path.len()
        && pattern
            .iter()
            .zip(path)
            .all(|(p, s)| *p == "*" && s.parse::<usize>().is_ok() || *p == s)
}

/// Whether the object at `path` in `document` already holds `key`.
fn holds(document: &Value, path: &[String], key: &str) -> bool {
    let mut at = document;
    for step in path {
        at = match at {
            Value::Object(map) => match map.get(step) {
                Some(next) => next,
                None => return false,
            },
            Value::Array(items) => match step.parse::<usize>().ok().and_then(|i| items.get(i)) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    at.get(key).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD_CATALOG: &str = r#"{
  "businessName": "Invented Studio",
  "currency": "USD",
  "courses": [
    { "id": "a", "name": "A", "description": "d", "price": { "amount": 100, "currency": "USD" },
      "enrollmentUrl": "https://example.com/a", "schedule": "Mondays" }
  ]
}"#;

    #[test]
    fn spec_042_verification_4_upgrade_renames_in_place_keeps_order_and_is_idempotent() {
        let (once, renamed, kept) = upgrade_text(OLD_CATALOG, CATALOG).unwrap();
        assert_eq!(
            once,
            OLD_CATALOG
                .replace("\"courses\"", "\"offerings\"")
                .replace("\"enrollmentUrl\"", "\"url\""),
            "only the key names change"
        );
        assert_eq!(
            renamed,
            ["$.courses → offerings", "$.courses.0.enrollmentUrl → url"]
        );
        assert!(kept.is_empty());
        let (twice, renamed, _) = upgrade_text(&once, CATALOG).unwrap();
        assert_eq!(twice, once, "a second run changes nothing");
        assert!(renamed.is_empty());
    }

    #[test]
    fn spec_042_upgrade_never_overwrites_a_new_key_and_touches_only_the_listed_places() {
        let tools = r#"{"flows":[{"id":"x","course":"a","offering":"b"}],
            "fields":[{"id":"course","field":"course","course":true,"values":["a"]}],
            "tags":[{"id":"t","tag":"course","description":"course"}]}"#;
        let (out, renamed, kept) = upgrade_text(tools, TOOLS).unwrap();
        assert_eq!(kept, ["$.flows.0.course"]);
        assert_eq!(renamed, ["$.fields.0.course → offering"]);
        assert!(
            out.contains(r#""id":"course","field":"course","offering":true"#),
            "{out}"
        );
        assert!(out.contains(r#""course":"a","offering":"b""#), "{out}");
        let rules = r#"{"learning": {"enrolledTag": "paid", "language": "en"}, "enrolledTag": 1}"#;
        let (out, _, _) = upgrade_text(rules, RULES).unwrap();
        assert_eq!(
            out,
            r#"{"learning": {"convertedTag": "paid", "language": "en"}, "enrolledTag": 1}"#
        );
    }

    #[test]
    fn spec_042_verification_4_upgrade_of_a_folder_loads_and_leaves_prompt_md_alone() {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::config::examples::shipped_examples();
        for name in ["catalog.json", "tools.json", "rules.json", "prompt.md"] {
            std::fs::copy(repo.join(format!("{name}.example")), dir.path().join(name)).unwrap();
        }
        // Make the demo tenant pre-042.
        let downgrade = |name: &str, pairs: &[(&str, &str)]| {
            let path = dir.path().join(name);
            let mut text = std::fs::read_to_string(&path).unwrap();
            for (new, old) in pairs {
                text = text.replace(new, old);
            }
            std::fs::write(&path, text).unwrap();
        };
        downgrade(
            "catalog.json",
            &[
                ("\"offerings\"", "\"courses\""),
                ("\"url\"", "\"enrollmentUrl\""),
            ],
        );
        downgrade("tools.json", &[("\"offering\":", "\"course\":")]);
        let prompt = std::fs::read(dir.path().join("prompt.md")).unwrap();
        let ctx = crate::config::ConfigContext::default();
        let refused = crate::config::load_dir(dir.path(), &ctx)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("`courses`") && refused.contains("manychat-agent config upgrade"),
            "{refused}"
        );

        let done = upgrade_dir(dir.path()).unwrap();
        assert_eq!(done.len(), 2, "{done:?}");
        crate::config::load_dir(dir.path(), &ctx).expect("the upgraded config loads");
        assert!(
            upgrade_dir(dir.path()).unwrap().is_empty(),
            "a second run changes nothing"
        );
        assert_eq!(std::fs::read(dir.path().join("prompt.md")).unwrap(), prompt);
    }

    #[test]
    fn spec_042_verification_3_each_old_key_fails_the_load_naming_it_and_the_upgrade() {
        let repo = crate::config::examples::shipped_examples();
        for (file, from, to, key) in [
            ("catalog.json", "\"offerings\"", "\"courses\"", "courses"),
            (
                "catalog.json",
                "\"url\"",
                "\"enrollmentUrl\"",
                "enrollmentUrl",
            ),
            (
                "tools.json",
                "\"offering\": true",
                "\"course\": true",
                "course",
            ),
            (
                "rules.json",
                "\"handoff\"",
                "\"learning\": {\"enrolledTag\": \"paid\"}, \"handoff\"",
                "enrolledTag",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            for name in ["catalog.json", "tools.json", "rules.json", "prompt.md"] {
                std::fs::copy(repo.join(format!("{name}.example")), dir.path().join(name)).unwrap();
            }
            let path = dir.path().join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains(from), "{file} holds {from}");
            std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
            let errors =
                crate::config::load_dir(dir.path(), &crate::config::ConfigContext::default())
                    .unwrap_err()
                    .to_string();
            assert!(
                errors.contains(&format!("`{key}` is the old name of"))
                    && errors.contains("manychat-agent config upgrade")
                    && errors.contains(file),
                "{key}: {errors}"
            );
        }
    }
}
