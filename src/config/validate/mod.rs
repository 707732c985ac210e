//! The rules a parsed config must satisfy beyond its types (SYSTEM 5.1, 012 § "The flow set may
//! not include the reply flow or field", 024 § "Three free-text notes", 023–034).
//!
//! Invariants:
//! - Every check runs; nothing stops at the first issue, so a tenant sees all of them at once.
//! - Pure: no IO. Each function takes the file name it reports under, so an issue names the file
//!   actually read (`tools.json` or `tools.json.example`).
//! - Issues name paths, ids and rules, never values that could be customer copy (C5, C9). Ids
//!   are named freely: they are configured identifiers, not copy.

use std::collections::{HashMap, HashSet};

use super::context::ConfigContext;
use super::error::ConfigIssue;
use super::tenant::{
    Burst, Catalog, FUNNEL_STAGES, FieldConfig, FlowRole, INTENT_VALUES, MAX_NOTE_LENGTH,
    MAX_NUDGE_MINUTES, MAX_SETTLE_SECONDS, Rules, TagConfig, ToolsConfig,
};

mod catalog;
mod rules;
mod tools;
pub use catalog::*;
pub use rules::*;
pub use tools::*;

const ID_RULE: &str = "must match ^[a-z0-9_-]+$ (lowercase letters, digits, _ and -)";
const NOT_EMPTY: &str = "must not be empty";
/// The longest name the prompt quotes (`businessName`, an offering's name), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest description, FAQ entry, schedule or payment option the prompt or a tool's spec
/// quotes, in characters: a few paragraphs. Every such text is bounded, so what the prompt is
/// built from is bounded too.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;
/// The longest configured id, in characters (the prompt's history shows ids up to this).
pub const MAX_ID_CHARS: usize = 64;
const REPLY_FLOW_RULE: &str =
    "must not equal MANYCHAT_REPLY_FLOW_NS (the reply flow renders the reply field)";
const REPLY_FIELD_RULE: &str =
    "must not equal MANYCHAT_REPLY_FIELD (a write would overwrite a reply in flight)";
const HANDSHAKE_FIELD_RULE: &str = "must not equal MANYCHAT_DELIVERED_FIELD or \
     MANYCHAT_DELIVERY_ID_FIELD (a write would break the delivery handshake)";
const TOKEN_FIELD_RULE: &str =
    "must not equal MANYCHAT_TOKEN_FIELD (a write would replace the contact's token)";

/// Whether `id` is a configured identifier: `^[a-z0-9_-]+$`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Collects issues for one file.
struct Report<'a> {
    file: &'a str,
    issues: Vec<ConfigIssue>,
}

impl<'a> Report<'a> {
    fn new(file: &'a str) -> Self {
        Self {
            file,
            issues: Vec::new(),
        }
    }

    fn push(&mut self, path: impl Into<String>, rule: impl Into<String>) {
        self.issues.push(ConfigIssue::new(self.file, path, rule));
    }

    fn non_empty(&mut self, path: impl Into<String>, value: &str) {
        if value.trim().is_empty() {
            self.push(path, NOT_EMPTY);
        }
    }

    /// A text the prompt quotes: not empty and at most `max` characters.
    fn text(&mut self, path: impl Into<String>, value: &str, max: usize) {
        let path = path.into();
        if value.trim().is_empty() {
            self.push(path, NOT_EMPTY);
        } else if value.chars().count() > max {
            self.push(path, format!("must be at most {max} characters"));
        }
    }

    fn id(&mut self, path: impl Into<String>, id: &str) {
        if !is_valid_id(id) {
            self.push(path, ID_RULE);
        } else if id.chars().count() > MAX_ID_CHARS {
            self.push(path, format!("must be at most {MAX_ID_CHARS} characters"));
        }
    }
}

/// Tracks ids already seen in one namespace (which may span several lists), reporting a repeat
/// at the repeat's path.
struct Unique<'s> {
    seen: HashMap<&'s str, String>,
}

impl<'s> Unique<'s> {
    fn new() -> Self {
        Self {
            seen: HashMap::new(),
        }
    }

    /// `id` at `path` follows the id rule and is unique `scope`.
    fn id(&mut self, report: &mut Report<'_>, path: String, id: &'s str, scope: &str) {
        report.id(path.clone(), id);
        match self.seen.get(id) {
            Some(first) => report.push(
                path,
                format!("duplicate id `{id}`: ids must be unique {scope} (first at {first})"),
            ),
            None => {
                self.seen.insert(id, path);
            }
        }
    }
}

/// ManyChat names compared for collisions: trimmed and case-folded, since a near-identical name
/// is as likely to reach the same field and refusing it costs a tenant only a rename.
fn same_name(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

fn reply_flow(ctx: &ConfigContext) -> Option<&str> {
    ctx.reply_flow_ns
        .as_deref()
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
}

#[cfg(test)]
mod tests;
