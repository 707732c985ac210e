//! Reading `config/knowledge/`, the business's own documents (optional): each `.md`,
//! `.markdown` or `.txt` file read as UTF-8 text and split into passages ([`super::passages`]).
//!
//! Rules (config/README.md "`knowledge/`"), each refusal an issue naming the file
//! (`knowledge/returns.md`), `$` or the line, and the rule, never the file's text (C5, C9):
//! - At most [`MAX_DOCUMENTS`] files, each at most [`MAX_DOCUMENT_BYTES`], all together at most
//!   [`MAX_KNOWLEDGE_BYTES`]; regular files only (a FIFO is refused without blocking).
//! - Another extension is refused, a PDF with the advice to export it as text; so is a
//!   subfolder. A name starting with `.` (`.DS_Store`, an editor's swap file) is skipped.
//! - UTF-8 only (a leading byte order mark is dropped): UTF-16, NUL bytes (binary) or any
//!   invalid sequence is refused with its line. An empty file, or one with headings but no
//!   text, is refused.
//! - Text that looks like markup or instructions is stored as written: it is business text,
//!   given to the model inside the fence, never obeyed.
//! - A passage's id is `<stem>#<n>`: the stem is the file's name without its extension as an id
//!   (`crate::config::slug`: `Política de Devolução.md` → `politica-de-devolucao`), or
//!   `doc-` and 8 hex digits of the name's SHA-256 when the name has no Latin letter or digit;
//!   two files with one stem are refused. `n` counts the file's passages from 1.
//! - With examples allowed (the demo) and no `knowledge/`, `knowledge.example/` stands in.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::passages::{split_markdown, split_plain};
use super::*;
use crate::config::knowledge::Passage;

/// The documents' folder inside the config folder.
pub const KNOWLEDGE_DIR: &str = "knowledge";
/// The largest document read.
pub const MAX_DOCUMENT_BYTES: u64 = 1024 * 1024;
/// The most the documents may hold together: the index and the prompt are built from them.
pub const MAX_KNOWLEDGE_BYTES: u64 = 8 * 1024 * 1024;
/// The most documents read: a business's policy pages, not a website's archive.
pub const MAX_DOCUMENTS: usize = 200;
/// The longest stem, so that `<stem>#<n>` stays within the id length the record shows.
const MAX_STEM_CHARS: usize = 48;

/// The extensions read, lowercase.
const EXTENSIONS: [&str; 3] = ["md", "markdown", "txt"];

/// The documents' folder `load_dir` reads under `ctx`, by the name it is read under
/// (`knowledge` or `knowledge.example`), and how many documents it holds (files whose name does
/// not start with `.`); `None` without one.
pub fn knowledge_read(dir: &Path, ctx: &ConfigContext) -> Option<(String, usize)> {
    let (name, folder) = resolve_folder(dir, ctx)?;
    let count = std::fs::read_dir(folder).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
            .count()
    });
    Some((name, count))
}

fn resolve_folder(dir: &Path, ctx: &ConfigContext) -> Option<(String, PathBuf)> {
    let plain = dir.join(KNOWLEDGE_DIR);
    if plain.exists() {
        return Some((KNOWLEDGE_DIR.to_owned(), plain));
    }
    let example_name = format!("{KNOWLEDGE_DIR}.example");
    let example = dir.join(&example_name);
    (ctx.allow_examples && example.is_dir()).then_some((example_name, example))
}

/// Every passage of the documents, in file-name then text order; each problem pushed to
/// `issues`. Without the folder: none.
pub(super) fn read_knowledge(
    dir: &Path,
    ctx: &ConfigContext,
    issues: &mut Vec<ConfigIssue>,
) -> Vec<Passage> {
    let Some((folder_name, folder)) = resolve_folder(dir, ctx) else {
        return Vec::new();
    };
    let folder_issue = |rule: String| ConfigIssue::new(format!("{folder_name}/"), "$", rule);
    if !folder.is_dir() {
        issues.push(folder_issue(
            "must be a folder of documents (.md, .markdown, .txt)".to_owned(),
        ));
        return Vec::new();
    }
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) => {
            issues.push(folder_issue(format!("cannot be read ({})", e.kind())));
            return Vec::new();
        }
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                issues.push(folder_issue(format!("cannot be read ({})", e.kind())));
                return Vec::new();
            }
        };
        let raw = entry.file_name();
        if raw.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        match raw.into_string() {
            Ok(name) => names.push(name),
            Err(raw) => issues.push(ConfigIssue::new(
                format!("{folder_name}/{}", raw.to_string_lossy()),
                "$",
                "has a file name that is not UTF-8: rename it",
            )),
        }
    }
    names.sort();
    if names.len() > MAX_DOCUMENTS {
        issues.push(folder_issue(format!(
            "holds {} files; at most {MAX_DOCUMENTS} documents are read (join related pages \
             into one document)",
            names.len()
        )));
        return Vec::new();
    }

    // What each accepted file is, checked before any is read, so the total is known first.
    let mut accepted: Vec<(String, PathBuf, bool)> = Vec::new();
    let mut total: u64 = 0;
    for name in names {
        let file = format!("{folder_name}/{name}");
        let path = folder.join(&name);
        if path.is_dir() {
            issues.push(ConfigIssue::new(
                file,
                "$",
                "is a folder: subfolders are not read (put documents directly in knowledge/)",
            ));
            continue;
        }
        let extension = Path::new(&name)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        let markdown = match extension.as_deref() {
            Some("md" | "markdown") => true,
            Some("txt") => false,
            Some("pdf") => {
                issues.push(ConfigIssue::new(
                    file,
                    "$",
                    "is a PDF, which is not read: export it as text (.md or .txt) and put that \
                     here instead",
                ));
                continue;
            }
            _ => {
                issues.push(ConfigIssue::new(
                    file,
                    "$",
                    format!(
                        "is not read: documents are {} files (export a Word, HTML or other \
                         document as text)",
                        EXTENSIONS.map(|e| format!(".{e}")).join(", ")
                    ),
                ));
                continue;
            }
        };
        total = total.saturating_add(std::fs::metadata(&path).map_or(0, |m| m.len()));
        accepted.push((name, path, markdown));
    }
    if total > MAX_KNOWLEDGE_BYTES {
        issues.push(folder_issue(format!(
            "holds more than {} MiB of documents together (the limit; each file at most {} MiB)",
            MAX_KNOWLEDGE_BYTES >> 20,
            MAX_DOCUMENT_BYTES >> 20
        )));
        return Vec::new();
    }

    let mut passages = Vec::new();
    let mut stems: HashMap<String, String> = HashMap::new();
    for (name, path, markdown) in accepted {
        let file = format!("{folder_name}/{name}");
        let bytes = match read_bounded(&path, MAX_DOCUMENT_BYTES, || {
            format!(
                "is larger than the {} MiB limit for a document (split it into several)",
                MAX_DOCUMENT_BYTES >> 20
            )
        }) {
            Ok(bytes) => bytes,
            Err(rule) => {
                issues.push(ConfigIssue::new(file, "$", rule));
                continue;
            }
        };
        let text = match document_text(&bytes) {
            Ok(text) => text,
            Err((at, rule)) => {
                issues.push(ConfigIssue::new(file, at, rule));
                continue;
            }
        };
        let stem = stem_of(&name);
        if let Some(first) = stems.get(&stem) {
            issues.push(ConfigIssue::new(
                file,
                "$",
                format!(
                    "makes the same passage ids ({stem}#…) as {folder_name}/{first}: rename one \
                     of them"
                ),
            ));
            continue;
        }
        stems.insert(stem.clone(), name.clone());
        let pieces = if markdown {
            split_markdown(&text)
        } else {
            split_plain(&text)
        };
        if pieces.is_empty() {
            issues.push(ConfigIssue::new(
                file,
                "$",
                "has no text (only headings or blank lines)",
            ));
            continue;
        }
        for (n, (heading, text)) in pieces.into_iter().enumerate() {
            passages.push(Passage {
                id: format!("{stem}#{}", n + 1),
                file: name.clone(),
                heading,
                text,
            });
        }
    }
    passages
}

/// The file's name without its extension, as an id (see the module's rules).
pub(super) fn stem_of(name: &str) -> String {
    let base = Path::new(name)
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    let stem = crate::config::slug::slug(&base, MAX_STEM_CHARS);
    if stem.is_empty() {
        let hash = Sha256::digest(name.as_bytes());
        format!(
            "doc-{:02x}{:02x}{:02x}{:02x}",
            hash[0], hash[1], hash[2], hash[3]
        )
    } else {
        stem
    }
}

/// A document's bytes as text, or where and why not: (`$` or `line N`, rule).
pub(super) fn document_text(bytes: &[u8]) -> Result<String, (String, String)> {
    let whole = |rule: &str| ("$".to_owned(), rule.to_owned());
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return Err(whole(
            "is UTF-16 text: save it as UTF-8 (documents are read as UTF-8 only)",
        ));
    }
    let bytes = without_bom(bytes);
    let line_at = |offset: usize| {
        format!(
            "line {}",
            bytes[..offset].iter().filter(|b| **b == b'\n').count() + 1
        )
    };
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        return Err((
            line_at(at),
            "is binary (it holds NUL bytes), not text: only UTF-8 text documents are read"
                .to_owned(),
        ));
    }
    match std::str::from_utf8(bytes) {
        Err(e) => Err((
            line_at(e.valid_up_to()),
            "is not valid UTF-8 text: save it as UTF-8".to_owned(),
        )),
        Ok(text) if text.trim().is_empty() => Err(whole("is empty")),
        Ok(text) => Ok(text.to_owned()),
    }
}

#[cfg(test)]
#[path = "knowledge_tests.rs"]
mod tests;
