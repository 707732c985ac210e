//! Reading the tenant's folder: `prompt.md`, `catalog.json`, `rules.json`, the optional
//! `tools.json` and `plugins.json` (SYSTEM 5.1), parsed strictly and validated whole, and the
//! optional `knowledge/` folder of the business's documents, split into passages
//! ([`knowledge`], [`passages`]).
//!
//! Invariants:
//! - A load returns a complete, valid [`TenantConfig`] or every issue found, never a partial
//!   config. Each file is parsed even when another failed, and a value of the wrong type is
//!   reported and set aside (replaced by a stand-in, or removed) so that the rest of its file is
//!   still parsed, validated and cross-checked: one run reports them all.
//! - Issues are in plain words (`must be a whole number, 0 or more, not a string`), not serde's.
//! - A UTF-8 byte order mark at the start of a file is ignored.
//! - `<name>.example` is read only when the plain file is absent and the caller allows examples
//!   (the demo from a fresh checkout, § 5.5); a real deployment never runs on example data by
//!   accident.
//! - No file larger than its limit is read into memory: [`MAX_CATALOG_BYTES`] for `catalog.json`
//!   (a shop's product list), [`MAX_FILE_BYTES`] for every other file, and the documents'
//!   limits of [`knowledge`].
//! - Only regular files (or links to them) are read: a FIFO, socket or device in the folder is
//!   an issue naming the file, and opening it never blocks (a FIFO would wait for a writer).
//! - Issues name file, JSON path and rule, never a value from the file (C5, C9): serde's messages
//!   quote the offending value, so they are scrubbed here before they become an issue.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::de::DeserializeOwned;

use super::context::ConfigContext;
use super::error::{ConfigErrors, ConfigIssue};
use super::tenant::{Catalog, Rules, TenantConfig, ToolsConfig};
use super::validate;

pub mod knowledge;
mod parse;
pub mod passages;
mod read;
mod schema_key;
mod wording;
pub use knowledge::{
    KNOWLEDGE_DIR, MAX_DOCUMENT_BYTES, MAX_DOCUMENTS, MAX_KNOWLEDGE_BYTES, knowledge_read,
};
use parse::*;
use read::*;
use wording::*;

/// The largest config file read, `catalog.json` aside: tenant files are a few KiB; anything near
/// this is a mistake (a log or a binary in the wrong place), and refusing it keeps a reload
/// cheap.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The largest `catalog.json` read: a shop's thousands of products with their descriptions
/// (about 2,400 offerings fit in 1 MiB; 32 MiB holds tens of thousands).
pub const MAX_CATALOG_BYTES: u64 = 32 * 1024 * 1024;

/// The limit of the file read as `name` (its `.example` too).
pub fn max_bytes(name: &str) -> u64 {
    if name.trim_end_matches(".example") == CATALOG_FILE {
        MAX_CATALOG_BYTES
    } else {
        MAX_FILE_BYTES
    }
}

pub const PROMPT_FILE: &str = "prompt.md";
pub const CATALOG_FILE: &str = "catalog.json";
pub const RULES_FILE: &str = "rules.json";
pub const TOOLS_FILE: &str = "tools.json";

/// The placeholder in `prompt.md` filled with the catalog's `businessName`.
pub const BUSINESS_NAME_PLACEHOLDER: &str = "{{businessName}}";

/// The largest prompt, `{{businessName}}` filled in, in bytes: no more than a prompt file may
/// hold. Checked before the placeholder is filled, so nothing large is ever allocated.
pub const MAX_PROMPT_BYTES: usize = MAX_FILE_BYTES as usize;

/// The length of `prompt` with every placeholder replaced by `name`, computed without building
/// it (saturating: an absurd count cannot wrap around to a small number).
fn expanded_len(prompt: &str, name: &str) -> usize {
    let count = prompt.matches(BUSINESS_NAME_PLACEHOLDER).count();
    (prompt.len() - count * BUSINESS_NAME_PLACEHOLDER.len())
        .saturating_add(count.saturating_mul(name.len()))
}

/// The files [`load_dir`] reads in `dir` under `ctx`, each by the name it is read under
/// (`catalog.json`, or `catalog.json.example` when the example stands in), in load order.
pub fn files_read(dir: &Path, ctx: &ConfigContext) -> Vec<String> {
    [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE]
        .into_iter()
        .filter_map(|name| read::resolve(dir, name, ctx).map(|(read, _)| read))
        .collect()
}

/// Loads and validates the tenant's folder. Returns every issue at once on failure.
pub fn load_dir(dir: &Path, ctx: &ConfigContext) -> Result<TenantConfig, ConfigErrors> {
    load(dir, ctx, None)
}

/// Loads and validates the tenant's folder as it would be with `catalog` (the bytes of a
/// `catalog.json` not yet written) in place of its `catalog.json`: what `catalog import` checks
/// before it writes, so the file it writes passes the loader.
pub fn load_dir_with_catalog(
    dir: &Path,
    ctx: &ConfigContext,
    catalog: &[u8],
) -> Result<TenantConfig, ConfigErrors> {
    load(dir, ctx, Some(catalog))
}

fn load(
    dir: &Path,
    ctx: &ConfigContext,
    catalog_bytes: Option<&[u8]>,
) -> Result<TenantConfig, ConfigErrors> {
    // One clear line for a wrong CONFIG_DIR, rather than one "missing" line per file.
    if !dir.is_dir() {
        return Err(ConfigErrors(vec![ConfigIssue::new(
            dir.display().to_string(),
            "$",
            "config folder does not exist or is not a folder (check CONFIG_DIR)",
        )]));
    }
    let mut issues = Vec::new();

    let prompt = read_required(dir, PROMPT_FILE, ctx, &mut issues).and_then(|(name, bytes)| {
        match String::from_utf8(without_bom(&bytes).to_vec()) {
            Ok(text) if text.trim().is_empty() => {
                issues.push(ConfigIssue::new(name, "$", "must not be empty"));
                None
            }
            Ok(text) => Some(text),
            Err(_) => {
                issues.push(ConfigIssue::new(name, "$", "is not valid UTF-8 text"));
                None
            }
        }
    });

    let catalog_read = match catalog_bytes {
        None => read_required(dir, CATALOG_FILE, ctx, &mut issues),
        Some(bytes) if bytes.len() as u64 > MAX_CATALOG_BYTES => {
            issues.push(ConfigIssue::new(CATALOG_FILE, "$", too_large(CATALOG_FILE)));
            None
        }
        Some(bytes) => Some((CATALOG_FILE.to_owned(), bytes.to_vec())),
    };
    let catalog = catalog_read.map(|(name, bytes)| {
        let parsed = parse_json::<Catalog>(&name, &bytes, &mut issues);
        (name, parsed)
    });
    let rules = read_required(dir, RULES_FILE, ctx, &mut issues).map(|(name, bytes)| {
        let parsed = parse_json::<Rules>(&name, &bytes, &mut issues);
        (name, parsed)
    });
    let tools = match read_optional(dir, TOOLS_FILE, ctx, &mut issues) {
        Optional::Absent => None,
        Optional::Unreadable => Some((TOOLS_FILE.to_owned(), Parsed::failed())),
        Optional::Read(name, bytes) => {
            let parsed = parse_json::<ToolsConfig>(&name, &bytes, &mut issues);
            Some((name, parsed))
        }
    };

    let plugins = match read_optional(dir, super::plugins::PLUGINS_FILE, ctx, &mut issues) {
        Optional::Absent => None,
        Optional::Unreadable => Some((super::plugins::PLUGINS_FILE.to_owned(), Parsed::failed())),
        Optional::Read(name, bytes) => {
            let parsed = parse_json::<super::plugins::PluginsConfig>(&name, &bytes, &mut issues);
            Some((name, parsed))
        }
    };
    if let Some((name, parsed @ Parsed { value: Some(p), .. })) = &plugins {
        issues.extend(kept(super::plugins::validate(name, p), Some(parsed)));
    }

    // Validate whatever parsed, even when a sibling did not, and even the part of a file that
    // parsed when another part did not (the part set aside was reported), so every issue is
    // reported at once.
    if let Some((name, parsed @ Parsed { value: Some(c), .. })) = &catalog {
        issues.extend(kept(validate::catalog(name, c), Some(parsed)));
    }
    if let Some((name, parsed @ Parsed { value: Some(r), .. })) = &rules {
        issues.extend(kept(validate::rules(name, r, ctx), Some(parsed)));
    }
    if let Some((name, parsed @ Parsed { value: Some(t), .. })) = &tools {
        // The cross-checks against the catalog need only its offering ids: read from the
        // file as written when part of it (or all of it) failed its types.
        let stand_in = catalog
            .as_ref()
            .and_then(|(_, p)| p.offering_ids_stand_in());
        let against = match &catalog {
            Some((
                _,
                Parsed {
                    value: Some(c),
                    set_aside,
                    ..
                },
            )) if set_aside.is_empty() => Some(c),
            _ => stand_in.as_ref(),
        };
        issues.extend(kept(validate::tools(name, t, against, ctx), Some(parsed)));
    }

    if let Some((name, Parsed { value: Some(r), .. })) = &rules {
        // A tools.json that failed to parse was reported; its funnel field is not judged.
        match &tools {
            None => issues.extend(validate::learning_needs_funnel(name, r, None)),
            Some((_, Parsed { value: Some(t), .. })) => {
                issues.extend(validate::learning_needs_funnel(name, r, Some(t)))
            }
            Some(_) => {}
        }
    }

    // The prompt as the model gets it, `{{businessName}}` filled, is bounded like the file it
    // comes from: each file under its limit must not expand into something far larger.
    if let (Some(prompt), Some((_, Parsed { value: Some(c), .. }))) = (&prompt, &catalog) {
        let expanded = expanded_len(prompt, &c.business_name);
        if expanded > MAX_PROMPT_BYTES {
            issues.push(ConfigIssue::new(
                PROMPT_FILE,
                "$",
                format!(
                    "with {BUSINESS_NAME_PLACEHOLDER} filled from catalog.json's businessName it \
                     would be {expanded} bytes; it must be at most {MAX_PROMPT_BYTES} (use the \
                     placeholder fewer times)"
                ),
            ));
        }
    }

    let knowledge = knowledge::read_knowledge(dir, ctx, &mut issues);

    let tools_ok = match tools {
        None => Ok(None),
        Some((_, parsed)) => parsed.complete().map(Some).ok_or(()),
    };
    let plugins_ok = match plugins {
        None => Ok(None),
        Some((_, parsed)) => parsed.complete().map(Some).ok_or(()),
    };
    match (
        prompt,
        complete(catalog),
        complete(rules),
        tools_ok,
        plugins_ok,
    ) {
        (Some(prompt), Some(catalog), Some(rules), Ok(tools), Ok(plugins)) if issues.is_empty() => {
            let prompt = prompt.replace(BUSINESS_NAME_PLACEHOLDER, &catalog.business_name);
            Ok(TenantConfig {
                prompt,
                catalog,
                rules,
                tools,
                plugins,
                knowledge,
            })
        }
        _ => {
            // Every path that yields `None` or `Err` above pushed an issue first.
            debug_assert!(!issues.is_empty());
            Err(ConfigErrors(issues))
        }
    }
}

/// The value of a file that parsed whole.
fn complete<T>(parsed: Option<(String, Parsed<T>)>) -> Option<T> {
    parsed.and_then(|(_, p)| p.complete())
}

/// Drops the validation issues that fall inside (or contain) a part of the file set aside
/// because it failed its types: that part's own issue is already reported, and a rule over
/// what remains (an empty list, a missing id) would be a false alarm.
fn kept<T>(found: Vec<ConfigIssue>, parsed: Option<&Parsed<T>>) -> Vec<ConfigIssue> {
    let Some(parsed) = parsed else {
        return found;
    };
    found
        .into_iter()
        .filter(|issue| {
            !parsed
                .set_aside
                .iter()
                .any(|aside| overlaps(aside, &issue.path))
        })
        .collect()
}

/// Whether one JSON path lies within the other (or they are equal).
fn overlaps(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    within(a, b) || within(b, a)
}

#[cfg(test)]
mod tests;
