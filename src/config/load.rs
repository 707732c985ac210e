//! Reading the tenant's folder: `prompt.md`, `catalog.json`, `rules.json` and the optional
//! `tools.json` (SYSTEM 5.1), parsed strictly and validated whole.
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
//! - No file larger than [`MAX_FILE_BYTES`] is read into memory.
//! - Only regular files (or links to them) are read: a FIFO, socket or device in the folder is
//!   an issue naming the file, and opening it never blocks (a FIFO would wait for a writer).
//! - Issues name file, JSON path and rule, never a value from the file (C5, C9): serde's messages
//!   quote the offending value, so they are scrubbed here before they become an issue.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::de::DeserializeOwned;

use super::error::{ConfigErrors, ConfigIssue};
use super::tenant::{Catalog, Rules, TenantConfig, ToolsConfig};
use super::validate;

/// The largest config file read: tenant files are a few KiB; anything near this is a mistake
/// (a log or a binary in the wrong place), and refusing it keeps a reload cheap.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

pub const PROMPT_FILE: &str = "prompt.md";
pub const CATALOG_FILE: &str = "catalog.json";
pub const RULES_FILE: &str = "rules.json";
pub const TOOLS_FILE: &str = "tools.json";

/// The placeholder in `prompt.md` filled with the catalog's `businessName`.
pub const BUSINESS_NAME_PLACEHOLDER: &str = "{{businessName}}";

/// What the loader needs from the environment (SYSTEM 5.2) to run the cross-checks of 012 and
/// 019: the names the server itself writes, which the tenant's tools must never touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigContext {
    /// `MANYCHAT_REPLY_FLOW_NS`: the flow that renders a deferred reply. `None` when unset.
    pub reply_flow_ns: Option<String>,
    /// `MANYCHAT_REPLY_FIELD` (default `ai_message`): the field a deferred reply is written to.
    pub reply_field: String,
    /// `MANYCHAT_TOKEN_FIELD` (default `ai_token`): the field the contact's token lives in.
    pub token_field: String,
    /// Whether `<name>.example` may stand in for an absent `<name>` (the demo only).
    pub allow_examples: bool,
}

impl Default for ConfigContext {
    fn default() -> Self {
        Self {
            reply_flow_ns: None,
            reply_field: "ai_message".to_owned(),
            token_field: "ai_token".to_owned(),
            allow_examples: false,
        }
    }
}

/// Loads and validates the tenant's folder. Returns every issue at once on failure.
pub fn load_dir(dir: &Path, ctx: &ConfigContext) -> Result<TenantConfig, ConfigErrors> {
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

    let catalog = read_required(dir, CATALOG_FILE, ctx, &mut issues).map(|(name, bytes)| {
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

    let plugins = match read_optional(dir, crate::plugins::PLUGINS_FILE, ctx, &mut issues) {
        Optional::Absent => None,
        Optional::Unreadable => Some((crate::plugins::PLUGINS_FILE.to_owned(), Parsed::failed())),
        Optional::Read(name, bytes) => {
            let parsed = parse_json::<crate::plugins::PluginsConfig>(&name, &bytes, &mut issues);
            Some((name, parsed))
        }
    };
    if let Some((name, parsed @ Parsed { value: Some(p), .. })) = &plugins {
        issues.extend(kept(crate::plugins::config::validate(name, p), Some(parsed)));
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

    let tools_ok = match tools {
        None => Ok(None),
        Some((_, parsed)) => parsed.complete().map(Some).ok_or(()),
    };
    let plugins_ok = match plugins {
        None => Ok(None),
        Some((_, parsed)) => parsed.complete().map(Some).ok_or(()),
    };
    match (prompt, complete(catalog), complete(rules), tools_ok, plugins_ok) {
        (Some(prompt), Some(catalog), Some(rules), Ok(tools), Ok(plugins)) if issues.is_empty() => {
            let prompt = prompt.replace(BUSINESS_NAME_PLACEHOLDER, &catalog.business_name);
            Ok(TenantConfig {
                prompt,
                catalog,
                rules,
                tools,
                plugins,
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

enum Optional {
    Absent,
    Unreadable,
    Read(String, Vec<u8>),
}

/// Which file stands for `name`: the plain file, else its example when allowed.
fn resolve(dir: &Path, name: &str, ctx: &ConfigContext) -> Option<(String, PathBuf)> {
    let plain = dir.join(name);
    if plain.exists() {
        return Some((name.to_owned(), plain));
    }
    let example_name = format!("{name}.example");
    let example = dir.join(&example_name);
    if ctx.allow_examples && example.exists() {
        return Some((example_name, example));
    }
    None
}

fn read_required(
    dir: &Path,
    name: &str,
    ctx: &ConfigContext,
    issues: &mut Vec<ConfigIssue>,
) -> Option<(String, Vec<u8>)> {
    match read_optional(dir, name, ctx, issues) {
        Optional::Read(file, bytes) => Some((file, bytes)),
        Optional::Unreadable => None,
        Optional::Absent => {
            let rule = if dir.join(format!("{name}.example")).exists() {
                "required file is missing (its .example is used only when examples are allowed, as in the demo)"
            } else {
                "required file is missing"
            };
            issues.push(ConfigIssue::new(name, "$", rule));
            None
        }
    }
}

fn read_optional(
    dir: &Path,
    name: &str,
    ctx: &ConfigContext,
    issues: &mut Vec<ConfigIssue>,
) -> Optional {
    let Some((file, path)) = resolve(dir, name, ctx) else {
        return Optional::Absent;
    };
    match read_bounded(&path) {
        Ok(bytes) => Optional::Read(file, bytes),
        Err(rule) => {
            issues.push(ConfigIssue::new(file, "$", rule));
            Optional::Unreadable
        }
    }
}

/// Reads at most [`MAX_FILE_BYTES`]; the `take` guards against a file that grows between the
/// size check and the read. The file is opened non-blocking and checked to be a regular file on
/// the open handle, so a FIFO swapped in at any moment is refused instead of waited on.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let too_large = || "is larger than the 1 MiB limit for a config file".to_owned();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if !metadata.is_file() {
        return Err(
            "is not a regular file (a FIFO, socket, device or folder is refused; use a plain file)"
                .to_owned(),
        );
    }
    let len = metadata.len();
    if len > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A UTF-8 byte order mark, which some editors write at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The file's bytes without a leading byte order mark: it is not part of the content.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// At most this many type errors are reported per file (each one costs a parse).
const MAX_TYPE_ISSUES: usize = 50;

/// One JSON file after parsing: the typed value when the syntax held, with the parts that
/// failed their types set aside (each reported), and the file as written.
struct Parsed<T> {
    value: Option<T>,
    /// JSON paths (as written in the file) of the parts removed to parse the rest.
    set_aside: Vec<String>,
    /// The document as written, when its syntax held and its types did not.
    raw: Option<serde_json::Value>,
}

impl<T> Parsed<T> {
    fn failed() -> Self {
        Self {
            value: None,
            set_aside: Vec::new(),
            raw: None,
        }
    }

    /// The value, only when the whole file parsed.
    fn complete(self) -> Option<T> {
        self.value
            .filter(|_| self.set_aside.is_empty() && self.raw.is_none())
    }

    /// For a catalog that failed its types: a stand-in carrying only the offering ids as
    /// written, for the other files' cross-checks.
    fn offering_ids_stand_in(&self) -> Option<Catalog> {
        let offerings = self.raw.as_ref()?.get("offerings")?.as_array()?;
        let offering = |id: &str| super::tenant::Offering {
            id: id.to_owned(),
            name: String::new(),
            description: String::new(),
            price: super::tenant::Price {
                amount: 0,
                currency: String::new(),
            },
            duration_hours: None,
            schedule: None,
            url: None,
        };
        Some(Catalog {
            business_name: String::new(),
            currency: String::new(),
            offerings: offerings
                .iter()
                .filter_map(|o| o.get("id")?.as_str().map(offering))
                .collect(),
            faq: Vec::new(),
            payment_options: Vec::new(),
        })
    }
}

/// A step of a path into the document.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Parses one JSON file strictly, pushing an issue (file, JSON path, rule in plain words) for
/// each problem. A syntax error ends the file's parse. A type error does not: the member that
/// failed is set aside and the rest parsed again, so that every type error in the file is
/// reported and what remains is still validated and cross-checked.
fn parse_json<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    issues: &mut Vec<ConfigIssue>,
) -> Parsed<T> {
    let bytes = without_bom(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        issues.push(ConfigIssue::new(
            file,
            "$",
            "is empty (it must hold a JSON object)",
        ));
        return Parsed::failed();
    }
    // The typed parse of the bytes themselves: the common case, and the only one that sees a
    // key written twice (a parsed document keeps one of them).
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let first = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(value) => match de.end() {
            Ok(()) => {
                return Parsed {
                    value: Some(value),
                    set_aside: Vec::new(),
                    raw: None,
                };
            }
            Err(err) => {
                issues.push(ConfigIssue::new(file, "$", plain_syntax(&err.to_string())));
                return Parsed::failed();
            }
        },
        Err(err) => err,
    };
    if first.inner().is_syntax() || first.inner().is_eof() {
        issues.push(ConfigIssue::new(
            file,
            "$",
            plain_syntax(&first.inner().to_string()),
        ));
        return Parsed::failed();
    }
    let steps: Vec<Step> = first.path().iter().filter_map(step).collect();
    push_type_issue(file, &steps, &first.inner().to_string(), issues);
    let before = issues.len();

    // A later syntax error, after the first type error, ends the parse here.
    let mut raw: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(raw) => raw,
        Err(err) => {
            issues.push(ConfigIssue::new(file, "$", plain_syntax(&err.to_string())));
            return Parsed::failed();
        }
    };
    let written = raw.clone();
    let mut set_aside = Vec::new();
    // Arrays (by path as written) and the indices, as written, removed from them.
    let mut removed: Vec<(Vec<Step>, usize)> = Vec::new();
    // Keys removed from objects (object path as written, key).
    let mut removed_keys: Vec<(Vec<Step>, String)> = Vec::new();
    // Paths (as the document now stands) where a stand-in value was written.
    let mut stood_in: Vec<Vec<Step>> = Vec::new();
    let mut pending = Some((steps, first.inner().to_string()));
    while issues.len() - before < MAX_TYPE_ISSUES {
        let (current, message) = match pending.take() {
            Some(first) => first,
            None => match serde_path_to_error::deserialize::<_, T>(&raw) {
                Ok(value) => {
                    return Parsed {
                        value: Some(value),
                        set_aside,
                        raw: Some(written),
                    };
                }
                Err(err) => {
                    let Some(steps) = err.path().iter().map(step).collect::<Option<Vec<_>>>()
                    else {
                        break;
                    };
                    let as_written = as_written(&steps, &removed);
                    let message = err.inner().to_string();
                    // "missing field" where this loop removed that very field, or inside an
                    // empty stand-in object it wrote: a consequence of setting aside, not a
                    // problem of the file.
                    let ours = missing_field(&message).is_some_and(|key| {
                        removed_keys.contains(&(as_written.clone(), key.to_owned()))
                            || stood_in.contains(&steps)
                    });
                    if !ours {
                        push_type_issue(file, &as_written, &message, issues);
                    }
                    (steps, message)
                }
            },
        };
        // A value of the wrong type is replaced by a stand-in of the right type, so that the
        // entry holding it keeps its place (other rules refer to entries: the funnel field, an
        // offering). Where no stand-in fits, or one already failed here, the member is removed.
        if !stood_in.contains(&current)
            && let Some(stand_in) = stand_in_for(&message)
            && let Some(node) = navigate(&mut raw, &current)
        {
            *node = stand_in;
            set_aside.push(json_path_of(&as_written(&current, &removed)));
            stood_in.push(current);
            continue;
        }
        // The first error's path is as written already (nothing was removed yet).
        let Some((last, parent)) = current.split_last() else {
            break;
        };
        let parent_as_written = as_written(parent, &removed);
        let Some(node) = navigate(&mut raw, parent) else {
            break;
        };
        match (last, node) {
            (Step::Key(key), serde_json::Value::Object(map)) => {
                map.remove(key);
                removed_keys.push((parent_as_written.clone(), key.clone()));
                let mut at = parent_as_written;
                at.push(Step::Key(key.clone()));
                set_aside.push(json_path_of(&at));
            }
            (Step::Index(index), serde_json::Value::Array(items)) if *index < items.len() => {
                items.remove(*index);
                let original = original_index(&removed, &parent_as_written, *index);
                removed.push((parent_as_written.clone(), original));
                let mut at = parent_as_written;
                at.push(Step::Index(original));
                set_aside.push(json_path_of(&at));
            }
            _ => break,
        }
    }
    Parsed {
        value: None,
        set_aside,
        raw: Some(written),
    }
}

/// A value of the type a type error expected (`invalid type: …, expected u32` → `0`), to stand
/// in for the wrong one; `None` for an enumeration or anything else without an obvious empty
/// value.
fn stand_in_for(message: &str) -> Option<serde_json::Value> {
    use serde_json::{Value, json};
    let rest = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let (_, expected) = rest.split_once(", expected ")?;
    let value = match expected.split_whitespace().next().unwrap_or_default() {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize" => {
            json!(0)
        }
        "f32" | "f64" => json!(0.0),
        "struct" | "map" => Value::Object(serde_json::Map::new()),
        "sequence" => Value::Array(Vec::new()),
        "string" => json!(""),
        "boolean" | "bool" => json!(false),
        _ => match expected.split(" at line").next().unwrap_or_default() {
            "a string" => json!(""),
            "a sequence" => Value::Array(Vec::new()),
            "a map" => Value::Object(serde_json::Map::new()),
            "a boolean" => json!(false),
            _ => return None,
        },
    };
    Some(value)
}

fn step(segment: &serde_path_to_error::Segment) -> Option<Step> {
    use serde_path_to_error::Segment;
    match segment {
        Segment::Seq { index } => Some(Step::Index(*index)),
        Segment::Map { key } => Some(Step::Key(key.clone())),
        Segment::Enum { .. } | Segment::Unknown => None,
    }
}

/// The index, as written, of the `current` index of the array at `array` (as written), given
/// the indices already removed from it.
fn original_index(removed: &[(Vec<Step>, usize)], array: &[Step], current: usize) -> usize {
    let gone: Vec<usize> = removed
        .iter()
        .filter(|(at, _)| at == array)
        .map(|(_, i)| *i)
        .collect();
    let mut seen = 0;
    let mut index = 0;
    loop {
        if !gone.contains(&index) {
            if seen == current {
                return index;
            }
            seen += 1;
        }
        index += 1;
    }
}

/// A path in the document being pruned, as it was written in the file.
fn as_written(steps: &[Step], removed: &[(Vec<Step>, usize)]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let next = match step {
            Step::Index(i) => Step::Index(original_index(removed, &out, *i)),
            key => key.clone(),
        };
        out.push(next);
    }
    out
}

fn navigate<'v>(
    value: &'v mut serde_json::Value,
    steps: &[Step],
) -> Option<&'v mut serde_json::Value> {
    steps.iter().try_fold(value, |node, step| match step {
        Step::Key(key) => node.get_mut(key.as_str()),
        Step::Index(index) => node.get_mut(*index),
    })
}

/// The key a "missing field `x`" message names.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Pushes a type error at `steps`. An unknown key is reported at the object that holds it
/// (`$.flows[0]`), the key itself being named in the rule: the path then points at something
/// that exists.
fn push_type_issue(file: &str, steps: &[Step], message: &str, issues: &mut Vec<ConfigIssue>) {
    let mut at = steps;
    if let Some((Step::Key(key), parent)) = steps.split_last()
        && message.starts_with(&format!("unknown field `{key}`"))
    {
        at = parent;
    }
    let issue = ConfigIssue::new(file, json_path_of(at), plain_type(&scrub(message)));
    if !issues.contains(&issue) {
        issues.push(issue);
    }
}

fn json_path_of(steps: &[Step]) -> String {
    let segments: Vec<serde_path_to_error::Segment> = steps
        .iter()
        .map(|s| match s {
            Step::Key(key) => serde_path_to_error::Segment::Map { key: key.clone() },
            Step::Index(index) => serde_path_to_error::Segment::Seq { index: *index },
        })
        .collect();
    json_path(&segments.iter().collect::<Vec<_>>())
}

/// A JSON syntax error in plain words, keeping serde's line and column.
fn plain_syntax(message: &str) -> String {
    const PLAIN: &[(&str, &str)] = &[
        (
            "EOF while parsing a value",
            "the file ends where a value was expected",
        ),
        (
            "EOF while parsing an object",
            "the file ends before an object is closed with }",
        ),
        (
            "EOF while parsing a list",
            "the file ends before a list is closed with ]",
        ),
        (
            "EOF while parsing a string",
            "the file ends inside a string",
        ),
        (
            "trailing characters",
            "has trailing content after the JSON document",
        ),
        ("trailing comma", "a comma before a closing bracket"),
        ("expected value", "a value was expected"),
        (
            "key must be a string",
            "a key must be a string in double quotes",
        ),
        ("expected `:`", "a : was expected after a key"),
        ("expected `,` or `}`", "a , or } was expected"),
        ("expected `,` or `]`", "a , or ] was expected"),
        (
            "control character (\\u0000-\\u001F) found while parsing a string",
            "a line break or control character inside a string (write it as \\n)",
        ),
    ];
    let mut text = message.to_owned();
    for (from, to) in PLAIN {
        if let Some(rest) = text.strip_prefix(from) {
            text = format!("{to}{rest}");
            break;
        }
    }
    format!("is not valid JSON: {text}")
}

/// What a type is, in plain words, from serde's name for it.
fn plain_kind(kind: &str) -> String {
    const OBJECT: &str = "an object ({…})";
    const LIST: &str = "a list ([…])";
    const STRING: &str = "a string (text in double quotes)";
    let kind = kind.trim();
    let plain = match kind.split_whitespace().next().unwrap_or_default() {
        // The key's own range, if narrower, is checked once the type is right.
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" | "integer" => "a whole number",
        "f32" | "f64" => "a number",
        "floating" => "a decimal number",
        "struct" | "map" => OBJECT,
        "sequence" => LIST,
        "boolean" | "bool" => "true or false",
        "null" | "unit" => "null",
        "string" => STRING,
        _ => match kind {
            "a string" => STRING,
            "a map" => OBJECT,
            "a sequence" => LIST,
            "a boolean" => "true or false",
            other => other,
        },
    };
    plain.to_owned()
}

/// A type error in plain words (after `scrub`: no value from the file is in it).
fn plain_type(message: &str) -> String {
    static AT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" at line \d+ column \d+$").expect("static regex compiles"));
    // The path names the place; the typed parse of a parsed document has no line anyway.
    let message = AT.replace(message, "");
    let message = message.as_ref();
    if let Some(rest) = message.strip_prefix("invalid type: ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        let got = plain_kind(got);
        let got = got.split(" (").next().unwrap_or_default();
        return format!("must be {}, not {got}", plain_kind(expected));
    }
    if let Some(rest) = message.strip_prefix("invalid value: ")
        && let Some((_, expected)) = rest.split_once(", expected ")
    {
        return format!("must be {}", plain_kind(expected));
    }
    if let Some(rest) = message.strip_prefix("invalid length ")
        && let Some((_, expected)) = rest.split_once(", expected ")
    {
        if expected.starts_with("struct ") {
            return "must be an object ({…}), not a list".to_owned();
        }
        return format!("has the wrong number of entries (expected {expected})");
    }
    if let Some(key) = missing_field(message) {
        return format!("the required key `{key}` is missing");
    }
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((key, allowed)) = rest.split_once('`')
    {
        // 042: a key from before the sales layer sold offerings; the upgrade renames it.
        if let Some((_, new)) = super::upgrade::OLD_KEYS.iter().find(|(old, _)| *old == key) {
            return format!(
                "`{key}` is the old name of `{new}`: run `manychat-agent config upgrade` to rename it in place"
            );
        }
        let allowed = allowed.trim_start_matches(", ");
        return match allowed.strip_prefix("expected ") {
            Some(list) => format!(
                "unknown key `{key}` (allowed here: {})",
                list.trim_start_matches("one of ").replace('`', "")
            ),
            None => format!("unknown key `{key}` (no keys are allowed here)"),
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant, expected ") {
        return match rest.strip_prefix("one of ") {
            Some(list) => format!("must be one of: {}", list.replace('`', "")),
            None => format!("must be {}", rest.replace('`', "")),
        };
    }
    if let Some(rest) = message.strip_prefix("duplicate field `") {
        let key = rest.split('`').next().unwrap_or_default();
        return format!("the key `{key}` is written twice");
    }
    message.to_owned()
}

/// `serde_path_to_error`'s path as a JSON path: `$`, `$.flows[2].flowNs`.
fn json_path(segments: &[&serde_path_to_error::Segment]) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::from("$");
    for segment in segments {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    out.push('.');
                    out.push_str(key);
                } else {
                    out.push_str(&format!("[{key:?}]"));
                }
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// Removes the values serde quotes in its messages (`invalid type: string "…"`,
/// `unknown variant `…``, numbers), keeping the kind, the expectation, key names and the
/// line/column. A config value may be customer copy or a price (C1, C5).
fn scrub(message: &str) -> String {
    static QUOTED_STRING: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"string "(?:[^"\\]|\\.)*""#).expect("static regex compiles"));
    static VARIANT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"unknown variant `.*?`(, expected|$| at line)").expect("static regex compiles")
    });
    static SCALAR: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(integer|floating point|character) `[^`]*`").expect("static regex compiles")
    });
    let out = QUOTED_STRING.replace_all(message, "a string");
    let out = VARIANT.replace_all(&out, "unknown variant$1");
    let out = SCALAR.replace_all(&out, "$1");
    out.into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn example_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
    }

    fn examples_ctx() -> ConfigContext {
        ConfigContext {
            allow_examples: true,
            ..ConfigContext::default()
        }
    }

    /// A temp folder holding the demo tenant's examples under their real names, so one file can
    /// be replaced per test.
    fn demo_copy() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
            let src = example_dir().join(format!("{name}.example"));
            fs::copy(&src, dir.path().join(name)).expect("copy example");
        }
        dir
    }

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) {
        fs::write(dir.path().join(name), text).expect("write fixture");
    }

    #[test]
    fn issue_13_item_9_a_fifo_or_folder_in_config_is_refused_by_name_without_blocking() {
        let dir = demo_copy();
        let rules = dir.path().join(RULES_FILE);
        fs::remove_file(&rules).expect("remove");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &rules,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        fs::remove_file(dir.path().join(TOOLS_FILE)).expect("remove");
        fs::create_dir(dir.path().join(TOOLS_FILE)).expect("a folder named like a file");

        // Run on a thread: before the fix, opening the FIFO waited for a writer forever.
        let (done, loaded) = std::sync::mpsc::channel();
        let path = dir.path().to_owned();
        std::thread::spawn(move || {
            let _ = done.send(load_dir(&path, &ConfigContext::default()));
        });
        let errors = loaded
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the load returns instead of blocking on the FIFO")
            .expect_err("a FIFO is refused");
        let rule =
            "is not a regular file (a FIFO, socket, device or folder is refused; use a plain file)";
        for file in [RULES_FILE, TOOLS_FILE] {
            assert!(
                errors
                    .issues()
                    .iter()
                    .any(|i| i.file == file && i.path == "$" && i.rule == rule),
                "{file}: {errors}"
            );
        }
    }

    fn load_err(dir: &tempfile::TempDir) -> ConfigErrors {
        load_dir(dir.path(), &ConfigContext::default()).expect_err("config must be refused")
    }

    #[test]
    fn system_5_1_compat_reference_config_is_accepted() {
        // A fictional tenant shaped exactly like the reference implementation's example.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat-config");
        let config = match load_dir(&dir, &examples_ctx()) {
            Ok(config) => config,
            Err(errors) => panic!("reference config refused:\n{errors}"),
        };
        assert_eq!(config.catalog.offerings.len(), 3);
        assert!(!config.prompt.contains(BUSINESS_NAME_PLACEHOLDER));
        let tools = config.tools.expect("tools.json.example is read");
        assert_eq!(tools.notes.len(), 3);
    }

    #[test]
    fn system_5_5_demo_examples_load_when_examples_are_allowed() {
        let config = match load_dir(&example_dir(), &examples_ctx()) {
            Ok(config) => config,
            Err(errors) => panic!("demo examples refused:\n{errors}"),
        };
        assert!(config.prompt.contains(&config.catalog.business_name));
        assert!(!config.prompt.contains(BUSINESS_NAME_PLACEHOLDER));
        assert!(config.tools.is_some());
    }

    #[test]
    fn system_5_1_examples_are_not_read_unless_allowed() {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
            let example = format!("{name}.example");
            fs::copy(example_dir().join(&example), dir.path().join(&example)).expect("copy");
        }
        let errors = load_err(&dir);
        let missing: Vec<_> = errors.issues().iter().map(|i| i.file.as_str()).collect();
        assert_eq!(missing, [PROMPT_FILE, CATALOG_FILE, RULES_FILE]);
    }

    #[test]
    fn system_5_6_spanish_tenant_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tenant-es");
        let config = match load_dir(&dir, &ConfigContext::default()) {
            Ok(config) => config,
            Err(errors) => panic!("Spanish tenant refused:\n{errors}"),
        };
        assert!(config.prompt.contains(&config.catalog.business_name));
        assert!(config.tools.is_some());
    }

    #[test]
    fn system_5_1_prompt_business_name_is_filled_from_catalog() {
        let dir = demo_copy();
        write(
            &dir,
            PROMPT_FILE,
            "You work for {{businessName}}. {{businessName}} sells.",
        );
        let config = load_dir(dir.path(), &ConfigContext::default()).expect("loads");
        let name = &config.catalog.business_name;
        assert_eq!(config.prompt, format!("You work for {name}. {name} sells."));
    }

    #[test]
    fn system_5_1_tools_json_absent_means_no_tools() {
        let dir = demo_copy();
        fs::remove_file(dir.path().join(TOOLS_FILE)).expect("remove");
        let config = load_dir(dir.path(), &ConfigContext::default()).expect("loads");
        assert_eq!(config.tools, None);
    }

    #[test]
    fn system_9_missing_required_file_is_named() {
        let dir = demo_copy();
        fs::remove_file(dir.path().join(RULES_FILE)).expect("remove");
        let errors = load_err(&dir);
        assert_eq!(
            errors.issues(),
            [ConfigIssue::new(
                RULES_FILE,
                "$",
                "required file is missing"
            )]
        );
        assert_eq!(
            errors.to_string(),
            "rules.json: $: required file is missing"
        );
    }

    #[test]
    fn system_5_2_missing_config_folder_is_one_clear_issue() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("no-such-folder");
        let errors = load_dir(&missing, &ConfigContext::default()).expect_err("must fail");
        assert_eq!(errors.len(), 1, "{errors}");
        assert_eq!(errors.issues()[0].file, missing.display().to_string());
    }

    #[test]
    fn system_9_bad_json_names_file_line_and_column() {
        let dir = demo_copy();
        write(
            &dir,
            CATALOG_FILE,
            "{\n  \"businessName\": \"X\",\n  \"currency\": \n}",
        );
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        let issue = &errors.issues()[0];
        assert_eq!(issue.file, CATALOG_FILE);
        assert!(issue.rule.contains("line 4 column 1"), "{}", issue.rule);
    }

    #[test]
    fn system_9_trailing_content_after_the_document_is_refused() {
        let dir = demo_copy();
        write(&dir, TOOLS_FILE, "{} {}");
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        assert_eq!(errors.issues()[0].file, TOOLS_FILE);
        assert!(errors.issues()[0].rule.contains("trailing"), "{errors}");
    }

    #[test]
    fn system_5_1_unknown_key_is_refused_with_its_path() {
        let dir = demo_copy();
        write(
            &dir,
            TOOLS_FILE,
            r#"{"flows":[{"id":"a","flowNs":"x","description":"d","colour":1}]}"#,
        );
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        let line = errors.to_string();
        assert!(
            line.starts_with("tools.json: $.flows[0]: unknown key `colour`"),
            "{line}"
        );
    }

    #[test]
    fn system_9_wrong_type_names_path_and_does_not_quote_the_value() {
        let dir = demo_copy();
        write(
            &dir,
            RULES_FILE,
            r#"{"messages":{"acknowledgement":"One moment","escalation":"A person will reply"},
                "maxTurnsPerConversation":"Secret customer copy"}"#,
        );
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        let issue = &errors.issues()[0];
        assert_eq!(issue.file, RULES_FILE);
        assert_eq!(issue.path, "$.maxTurnsPerConversation");
        assert_eq!(
            issue.rule,
            "must be a whole number, 0 or more, not a string"
        );
        assert!(!issue.rule.contains("Secret"), "{}", issue.rule);
    }

    #[test]
    fn system_9_unknown_enum_variant_does_not_quote_the_value() {
        let dir = demo_copy();
        write(
            &dir,
            TOOLS_FILE,
            r#"{"flows":[{"id":"a","flowNs":"x","description":"d","role":"Private words"}]}"#,
        );
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        let issue = &errors.issues()[0];
        assert_eq!(issue.path, "$.flows[0].role");
        assert_eq!(issue.rule, "must be payment_link or opening");
        assert!(!issue.rule.contains("Private"), "{}", issue.rule);
    }

    #[test]
    fn system_9_price_must_be_an_integer_of_minor_units() {
        let dir = demo_copy();
        let catalog = fs::read_to_string(dir.path().join(CATALOG_FILE)).expect("read");
        let mut value: serde_json::Value = serde_json::from_str(&catalog).expect("json");
        value["offerings"][1]["price"]["amount"] = serde_json::json!(123.45);
        write(&dir, CATALOG_FILE, &value.to_string());
        let errors = load_err(&dir);
        assert_eq!(errors.len(), 1, "{errors}");
        assert_eq!(errors.issues()[0].path, "$.offerings[1].price.amount");
        assert!(!errors.issues()[0].rule.contains("123"), "{errors}");
    }

    #[test]
    fn system_9_huge_file_is_refused_with_a_clear_error() {
        let dir = demo_copy();
        let huge = format!(
            "{{\"flows\":[], \"pad\":\"{}\"}}",
            "x".repeat(2 * 1024 * 1024)
        );
        write(&dir, TOOLS_FILE, &huge);
        let errors = load_err(&dir);
        assert_eq!(
            errors.issues(),
            [ConfigIssue::new(
                TOOLS_FILE,
                "$",
                "is larger than the 1 MiB limit for a config file"
            )]
        );
    }

    #[test]
    fn system_5_1_empty_or_non_utf8_prompt_is_refused() {
        let dir = demo_copy();
        write(&dir, PROMPT_FILE, "  \n");
        assert_eq!(
            load_err(&dir).issues(),
            [ConfigIssue::new(PROMPT_FILE, "$", "must not be empty")]
        );
        fs::write(dir.path().join(PROMPT_FILE), [0xff, 0xfe, 0x00]).expect("write");
        assert_eq!(
            load_err(&dir).issues(),
            [ConfigIssue::new(
                PROMPT_FILE,
                "$",
                "is not valid UTF-8 text"
            )]
        );
    }

    #[test]
    fn system_5_1_issues_from_every_file_are_reported_in_one_load() {
        let dir = demo_copy();
        fs::remove_file(dir.path().join(PROMPT_FILE)).expect("remove");
        write(&dir, CATALOG_FILE, "{");
        write(
            &dir,
            RULES_FILE,
            r#"{"messages":{"acknowledgement":"","escalation":"A person will reply"}}"#,
        );
        write(
            &dir,
            TOOLS_FILE,
            r#"{"flows":[{"id":"Bad Id","flowNs":"content1","description":"d"}]}"#,
        );
        let errors = load_err(&dir);
        let files: Vec<_> = errors.issues().iter().map(|i| i.file.as_str()).collect();
        assert_eq!(
            files,
            [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE],
            "{errors}"
        );
    }

    #[test]
    fn issue_19_item_3_a_parse_error_does_not_hide_other_files() {
        let dir = demo_copy();
        // catalog.json: a wrong type in one offering, a bad currency elsewhere in the file.
        let catalog = fs::read_to_string(dir.path().join(CATALOG_FILE)).expect("read");
        let mut value: serde_json::Value = serde_json::from_str(&catalog).expect("json");
        value["offerings"][0]["price"]["amount"] = serde_json::json!("a lot");
        value["currency"] = serde_json::json!("dollars");
        let kept_id = value["offerings"][1]["id"].clone();
        write(&dir, CATALOG_FILE, &value.to_string());
        // rules.json: two type errors at once.
        write(
            &dir,
            RULES_FILE,
            r#"{"messages":{"acknowledgement":"One moment","escalation":"A person will reply"},
                "maxTurnsPerConversation":"many","historyDays":-3}"#,
        );
        // tools.json: a flow naming an offering the catalog does not have (a cross-file check
        // that needs the catalog, whose types failed).
        let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
        let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
        tools["flows"][0]["offering"] = serde_json::json!("no_such_offering");
        write(&dir, TOOLS_FILE, &tools.to_string());

        let errors = load_err(&dir);
        let found: Vec<(&str, &str)> = errors
            .issues()
            .iter()
            .map(|i| (i.file.as_str(), i.path.as_str()))
            .collect();
        for expected in [
            (CATALOG_FILE, "$.offerings[0].price.amount"),
            (CATALOG_FILE, "$.currency"),
            (RULES_FILE, "$.maxTurnsPerConversation"),
            (RULES_FILE, "$.historyDays"),
            (TOOLS_FILE, "$.flows[0].offering"),
        ] {
            assert!(
                found.contains(&expected),
                "{expected:?} missing from:\n{errors}"
            );
        }
        // The offering kept its place in the cross-check: no false alarm about its id.
        assert!(!errors.to_string().contains(kept_id.as_str().unwrap_or("?")));
        assert!(
            errors
                .issues()
                .iter()
                .all(|i| !i.rule.contains("invalid type") && !i.rule.contains("expected i64")),
            "{errors}"
        );
    }

    #[test]
    fn issue_19_item_3_messages_are_plain_words() {
        let dir = demo_copy();
        write(&dir, CATALOG_FILE, "[]");
        let errors = load_err(&dir);
        assert_eq!(
            errors.issues(),
            [ConfigIssue::new(
                CATALOG_FILE,
                "$",
                "must be an object ({…}), not a list"
            )]
        );
        write(
            &dir,
            CATALOG_FILE,
            &fs::read_to_string(example_dir().join("catalog.json.example"))
                .expect("read")
                .replace("\"currency\"", "\"curency\""),
        );
        let text = load_err(&dir).to_string();
        assert!(text.contains("unknown key `curency`"), "{text}");
        assert!(
            text.contains("the required key `currency` is missing"),
            "{text}"
        );
    }

    #[test]
    fn issue_19_item_3_a_byte_order_mark_is_accepted() {
        let dir = demo_copy();
        for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
            let path = dir.path().join(name);
            let mut bytes = b"\xEF\xBB\xBF".to_vec();
            bytes.extend(fs::read(&path).expect("read"));
            fs::write(&path, bytes).expect("write");
        }
        let config = match load_dir(dir.path(), &ConfigContext::default()) {
            Ok(config) => config,
            Err(errors) => panic!("refused with a byte order mark:\n{errors}"),
        };
        assert!(!config.prompt.starts_with('\u{feff}'));
    }

    #[test]
    fn issue_19_item_3_no_spec_number_in_any_rule() {
        let dir = demo_copy();
        let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
        let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
        tools["notes"][0]["maxLength"] = serde_json::json!(900);
        tools["notes"][0]["neverRendered"] = serde_json::json!(false);
        tools["fields"][0]["values"] = serde_json::json!(["x"]);
        write(&dir, TOOLS_FILE, &tools.to_string());
        let errors = load_err(&dir);
        let spec_label = Regex::new(r"\(0\d\d\)").expect("regex");
        for issue in errors.issues() {
            assert!(!spec_label.is_match(&issue.rule), "{issue}");
        }
    }

    #[test]
    fn issue_19_item_3_a_type_error_in_an_entry_raises_no_false_alarm_about_it() {
        // The funnel field's values have the wrong type: the field keeps its place, so the
        // flows and events that refer to the funnel are not reported as lacking one.
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat-config");
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
            fs::copy(
                fixture.join(format!("{name}.example")),
                dir.path().join(name),
            )
            .expect("copy");
        }
        let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
        let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
        let funnel = tools["fields"]
            .as_array()
            .and_then(|fields| fields.iter().position(|f| f["funnel"] == true))
            .expect("a funnel field");
        tools["fields"][funnel]["values"] = serde_json::json!("new");
        write(&dir, TOOLS_FILE, &tools.to_string());
        let errors = load_err(&dir);
        assert_eq!(
            errors.issues(),
            [ConfigIssue::new(
                TOOLS_FILE,
                format!("$.fields[{funnel}].values"),
                "must be a list ([…]), not a string"
            )]
        );
    }

    #[test]
    fn spec_030_verification_1_settle_seconds_loads_from_0_to_30_and_fails_otherwise() {
        let with_settle = |value: serde_json::Value| {
            let dir = demo_copy();
            let path = dir.path().join(TOOLS_FILE);
            let mut tools: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(&path).expect("read")).expect("json");
            tools["flows"][1]["settleSeconds"] = value;
            write(&dir, TOOLS_FILE, &tools.to_string());
            (load_dir(dir.path(), &ConfigContext::default()), dir)
        };
        for seconds in [0, 12, 30] {
            let (loaded, _dir) = with_settle(serde_json::json!(seconds));
            let config = loaded.unwrap_or_else(|errors| panic!("{seconds}: {errors}"));
            let flow = &config.tools.expect("tools").flows[1];
            assert_eq!(flow.settle_seconds, Some(seconds), "{seconds}");
        }
        for bad in [
            serde_json::json!(31),
            serde_json::json!(-1),
            serde_json::json!(2.5),
            serde_json::json!("5"),
        ] {
            let (loaded, _dir) = with_settle(bad.clone());
            let errors = loaded.expect_err("refused");
            assert!(
                errors
                    .issues()
                    .iter()
                    .any(|i| i.file == TOOLS_FILE && i.path == "$.flows[1].settleSeconds"),
                "{bad}: {errors}"
            );
        }
    }
}
