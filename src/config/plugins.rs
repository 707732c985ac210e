//! `config/plugins.json`: the business's own tools, each an HTTPS endpoint of its own, as typed
//! values (strict: an unknown key is an error) and the rules beyond types.
//!
//! Invariants:
//! - A tool's name matches [`NAME_PATTERN`], is unique, and is never a built-in tool's name.
//! - `url` is `https://`, or `http://` on a loopback address only.
//! - A read tool declares `result` and may take one `query`; a write tool declares no `result`
//!   and may take `note`s. Every limit is within the bounds below.
//! - Issues name the file, the JSON path and the rule, never a value from the file.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigIssue;

/// `plugins.json`'s name in the config folder.
pub const PLUGINS_FILE: &str = "plugins.json";

/// What a plugin tool's name (and each of its parameter and result keys) must match.
pub const NAME_PATTERN: &str = "^[a-z][a-z0-9_]{0,63}$";

/// The built-in tools' names (012, 024, 025): a plugin tool may take none of them.
pub const BUILT_IN_TOOLS: [&str; 7] = [
    "send_flow",
    "add_tag",
    "remove_tag",
    "set_field",
    "get_contact",
    "write_note",
    "schedule_nudge",
];

/// The largest `maxLength` of a write tool's `note` (as `write_note`'s).
pub const MAX_NOTE_LENGTH: u32 = 500;
/// The largest `maxLength` of a read tool's `query`.
pub const MAX_QUERY_LENGTH: u32 = 200;
/// The largest `maxLength` of a `text` result.
pub const MAX_TEXT_LENGTH: u32 = 1000;
/// The most items a `list` result keeps, and the longest each item may be.
pub const MAX_LIST_ITEMS: u32 = 5;
pub const MAX_LIST_ITEM_LENGTH: u32 = 200;
/// The most values an `enum` (parameter or result) may list.
pub const MAX_ENUM_VALUES: usize = 100;

/// `plugins.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginsConfig {
    /// The business's tools, each an HTTPS endpoint signed with the Standard Webhooks scheme.
    pub tools: Vec<PluginTool>,
}

impl PluginsConfig {
    /// The tool named `name`, if configured.
    pub fn tool(&self, name: &str) -> Option<&PluginTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Whether a tool reads (performed during the step, its answer given to the model) or writes
/// (staged, performed after the reply's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Read,
    Write,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Write => "write",
        }
    }
}

/// One tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginTool {
    /// The tool's name as the model calls it; never a built-in tool's.
    #[schemars(pattern("^[a-z][a-z0-9_]{0,63}$"))]
    pub name: String,
    pub kind: ToolKind,
    /// `https://…`, or `http://` on a loopback address only.
    pub url: String,
    /// The environment variable holding the tool's signing secret (`whsec_` + base64).
    #[schemars(pattern("^[A-Z_][A-Z0-9_]*$"))]
    pub secret_env: String,
    /// What the tool does and when to use it, as the model reads it.
    #[schemars(length(min = 1))]
    pub description: String,
    /// The arguments the model fills, all required.
    #[serde(default)]
    pub parameters: BTreeMap<String, Parameter>,
    /// Read tools only (required there): the keys of the endpoint's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<BTreeMap<String, ResultField>>,
}

/// A parameter the model fills.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Parameter {
    /// One of the configured values (1–100).
    Enum {
        values: Vec<String>,
    },
    /// A number, optionally whole and bounded.
    Number {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        integer: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
    Boolean {},
    /// Write tools only: free text, cleaned like `write_note` text when staged.
    Note {
        #[serde(rename = "maxLength")]
        #[schemars(range(min = 1, max = 500))]
        max_length: u32,
    },
    /// Read tools only, at most one: free text, cleaned; empty after cleaning, no call.
    Query {
        #[serde(rename = "maxLength")]
        #[schemars(range(min = 1, max = 200))]
        max_length: u32,
    },
}

/// A key of a read tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ResultField {
    Enum {
        values: Vec<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        optional: bool,
    },
    Number {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        integer: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        optional: bool,
    },
    Boolean {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        optional: bool,
    },
    /// Untrusted text, cut to `maxLength` (≤ 1000); given to the model inside the fence.
    Text {
        #[serde(rename = "maxLength")]
        #[schemars(range(min = 1, max = 1000))]
        max_length: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        optional: bool,
    },
    /// Untrusted strings, cut to `maxItems` (≤ 5) of `maxLength` (≤ 200) each; fenced.
    List {
        #[serde(rename = "maxItems")]
        #[schemars(range(min = 1, max = 5))]
        max_items: u32,
        #[serde(rename = "maxLength")]
        #[schemars(range(min = 1, max = 200))]
        max_length: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        optional: bool,
    },
}

impl ResultField {
    pub fn optional(&self) -> bool {
        match self {
            ResultField::Enum { optional, .. }
            | ResultField::Number { optional, .. }
            | ResultField::Boolean { optional }
            | ResultField::Text { optional, .. }
            | ResultField::List { optional, .. } => *optional,
        }
    }

    /// Text and list values are the endpoint's words: untrusted, so fenced.
    pub fn fenced(&self) -> bool {
        matches!(self, ResultField::Text { .. } | ResultField::List { .. })
    }
}

/// Whether `name` matches [`NAME_PATTERN`].
pub fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether `name` is a valid environment variable name as `secretEnv` takes it.
fn is_valid_env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && !bytes[0].is_ascii_digit()
        && bytes
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether `url` is one a tool may be called at: `https://` with a host, or `http://` on a
/// loopback address (`localhost`, `127.0.0.0/8`, `::1`).
pub fn url_rule(url: &str) -> Option<&'static str> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Some("must be an absolute URL");
    };
    let host = parsed.host_str().unwrap_or_default();
    if host.is_empty() {
        return Some("must name a host");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some("must not hold credentials (sign with secretEnv instead)");
    }
    match parsed.scheme() {
        "https" => None,
        "http" if is_loopback(&parsed) => None,
        "http" => Some("must be https:// (http:// only on a loopback address)"),
        _ => Some("must be https:// (http:// only on a loopback address)"),
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Every rule of `plugins.json` beyond types, all reported at once.
/// The descriptions `plugin new` writes, one per kind: placeholders the model would read as the
/// tool's purpose, so the config is refused until each is replaced.
pub const PLACEHOLDER_DESCRIPTIONS: [&str; 2] = [
    "What this looks up, and when to use it.",
    "What this records, and when to use it.",
];

/// The rule a placeholder description breaks (`plugin new` itself lets it pass: it writes it).
pub const PLACEHOLDER_RULE: &str = "is still the placeholder `plugin new` wrote: say what the tool \
     does and when to use it (the model reads only this)";

pub fn validate(file: &str, config: &PluginsConfig) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut issue = |path: String, rule: &str| issues.push(ConfigIssue::new(file, path, rule));
    for (i, tool) in config.tools.iter().enumerate() {
        let at = format!("$.tools[{i}]");
        if !is_valid_name(&tool.name) {
            issue(
                format!("{at}.name"),
                "must match ^[a-z][a-z0-9_]{0,63}$ (a lowercase letter, then letters, digits or _)",
            );
        } else if BUILT_IN_TOOLS.contains(&tool.name.as_str()) {
            issue(format!("{at}.name"), "is a built-in tool's name");
        } else if config.tools[..i].iter().any(|t| t.name == tool.name) {
            issue(format!("{at}.name"), "is already another tool's name");
        }
        if let Some(rule) = url_rule(&tool.url) {
            issue(format!("{at}.url"), rule);
        }
        if !is_valid_env_name(&tool.secret_env) {
            issue(
                format!("{at}.secretEnv"),
                "must be an environment variable name (A-Z, 0-9 and _, not starting with a digit)",
            );
        }
        if tool.description.trim().is_empty() {
            issue(format!("{at}.description"), "must not be empty");
        } else if tool.description.chars().count() > crate::config::MAX_DESCRIPTION_CHARS {
            issue(
                format!("{at}.description"),
                &format!(
                    "must be at most {} characters",
                    crate::config::MAX_DESCRIPTION_CHARS
                ),
            );
        } else if PLACEHOLDER_DESCRIPTIONS.contains(&tool.description.trim()) {
            issue(format!("{at}.description"), PLACEHOLDER_RULE);
        }
        let mut queries = 0;
        for (key, parameter) in &tool.parameters {
            let at = format!("{at}.parameters.{key}");
            if !is_valid_name(key) {
                issue(
                    at.clone(),
                    "a parameter's name must match ^[a-z][a-z0-9_]{0,63}$",
                );
            }
            match parameter {
                Parameter::Enum { values } => enum_rules(&mut issue, &at, values),
                Parameter::Number { min, max, .. } => number_rules(&mut issue, &at, *min, *max),
                Parameter::Boolean {} => {}
                Parameter::Note { max_length } => {
                    if tool.kind == ToolKind::Read {
                        issue(
                            at.clone(),
                            "a note is a write tool's parameter, not a read's",
                        );
                    }
                    if !(1..=MAX_NOTE_LENGTH).contains(max_length) {
                        issue(format!("{at}.maxLength"), "must be 1 to 500");
                    }
                }
                Parameter::Query { max_length } => {
                    queries += 1;
                    if tool.kind == ToolKind::Write {
                        issue(
                            at.clone(),
                            "a query is a read tool's parameter, not a write's",
                        );
                    } else if queries > 1 {
                        issue(at.clone(), "a read tool takes at most one query");
                    }
                    if !(1..=MAX_QUERY_LENGTH).contains(max_length) {
                        issue(format!("{at}.maxLength"), "must be 1 to 200");
                    }
                }
            }
        }
        match (tool.kind, &tool.result) {
            (ToolKind::Write, Some(_)) => issue(
                format!("{at}.result"),
                "a write tool has no result (only read tools answer the model)",
            ),
            (ToolKind::Read, None) => issue(
                format!("{at}.result"),
                "a read tool must declare its result's keys",
            ),
            (ToolKind::Read, Some(result)) if result.is_empty() => issue(
                format!("{at}.result"),
                "a read tool must declare at least one result key",
            ),
            (ToolKind::Read, Some(result)) => {
                for (key, field) in result {
                    let at = format!("{at}.result.{key}");
                    if !is_valid_name(key) {
                        issue(at.clone(), "a result key must match ^[a-z][a-z0-9_]{0,63}$");
                    }
                    if key == "available" {
                        issue(at.clone(), "available is the server's own result key");
                    }
                    result_rules(&mut issue, &at, field);
                }
            }
            (ToolKind::Write, None) => {}
        }
    }
    issues
}

fn enum_rules(issue: &mut impl FnMut(String, &str), at: &str, values: &[String]) {
    if values.is_empty() || values.len() > MAX_ENUM_VALUES {
        issue(format!("{at}.values"), "must list 1 to 100 values");
    }
    for (j, value) in values.iter().enumerate() {
        if value.trim().is_empty() {
            issue(format!("{at}.values[{j}]"), "must not be empty");
        } else if values[..j].contains(value) {
            issue(format!("{at}.values[{j}]"), "is listed twice");
        }
    }
}

fn number_rules(
    issue: &mut impl FnMut(String, &str),
    at: &str,
    min: Option<f64>,
    max: Option<f64>,
) {
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        issue(format!("{at}.max"), "must not be less than min");
    }
}

fn result_rules(issue: &mut impl FnMut(String, &str), at: &str, field: &ResultField) {
    match field {
        ResultField::Enum { values, .. } => enum_rules(issue, at, values),
        ResultField::Number { min, max, .. } => number_rules(issue, at, *min, *max),
        ResultField::Boolean { .. } => {}
        ResultField::Text { max_length, .. } => {
            if !(1..=MAX_TEXT_LENGTH).contains(max_length) {
                issue(format!("{at}.maxLength"), "must be 1 to 1000");
            }
        }
        ResultField::List {
            max_items,
            max_length,
            ..
        } => {
            if !(1..=MAX_LIST_ITEMS).contains(max_items) {
                issue(format!("{at}.maxItems"), "must be 1 to 5");
            }
            if !(1..=MAX_LIST_ITEM_LENGTH).contains(max_length) {
                issue(format!("{at}.maxLength"), "must be 1 to 200");
            }
        }
    }
}
