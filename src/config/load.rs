//! Reading the tenant's folder: `prompt.md`, `catalog.json`, `rules.json` and the optional
//! `tools.json` (SYSTEM 5.1), parsed strictly and validated whole.
//!
//! Invariants:
//! - A load returns a complete, valid [`TenantConfig`] or every issue found, never a partial
//!   config. Each file is parsed even when another failed, so one run reports them all.
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
        match String::from_utf8(bytes) {
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

    let catalog = read_required(dir, CATALOG_FILE, ctx, &mut issues).and_then(|(name, bytes)| {
        parse_json::<Catalog>(&name, &bytes, &mut issues).map(|c| (name, c))
    });
    let rules = read_required(dir, RULES_FILE, ctx, &mut issues).and_then(|(name, bytes)| {
        parse_json::<Rules>(&name, &bytes, &mut issues).map(|r| (name, r))
    });
    let tools = match read_optional(dir, TOOLS_FILE, ctx, &mut issues) {
        Optional::Absent => Ok(None),
        Optional::Unreadable => Err(()),
        Optional::Read(name, bytes) => {
            match parse_json::<ToolsConfig>(&name, &bytes, &mut issues) {
                Some(tools) => Ok(Some((name, tools))),
                None => Err(()),
            }
        }
    };

    // Validate whatever parsed, even when a sibling did not, so every issue is reported at once.
    // The cross-checks against the catalog run only when the catalog parsed.
    if let Some((name, catalog)) = &catalog {
        issues.extend(validate::catalog(name, catalog));
    }
    if let Some((name, rules)) = &rules {
        issues.extend(validate::rules(name, rules, ctx));
    }
    if let Ok(Some((name, tools))) = &tools {
        let catalog = catalog.as_ref().map(|(_, c)| c);
        issues.extend(validate::tools(name, tools, catalog, ctx));
    }

    match (prompt, catalog, rules, tools) {
        (Some(prompt), Some((_, catalog)), Some((_, rules)), Ok(tools)) if issues.is_empty() => {
            let prompt = prompt.replace(BUSINESS_NAME_PLACEHOLDER, &catalog.business_name);
            Ok(TenantConfig {
                prompt,
                catalog,
                rules,
                tools: tools.map(|(_, t)| t),
            })
        }
        _ => {
            // Every path that yields `None` or `Err` above pushed an issue first.
            debug_assert!(!issues.is_empty());
            Err(ConfigErrors(issues))
        }
    }
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

/// Parses one JSON file strictly, pushing an issue with the JSON path on failure.
fn parse_json<T: DeserializeOwned>(
    file: &str,
    bytes: &[u8],
    issues: &mut Vec<ConfigIssue>,
) -> Option<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(value) => value,
        Err(err) => {
            let message = err.inner().to_string();
            let mut segments: Vec<_> = err.path().iter().collect();
            // An unknown key is reported at the object that holds it (`$.flows[0]`), the key
            // itself being named in the rule: the path then points at something that exists.
            if let Some(serde_path_to_error::Segment::Map { key }) = segments.last()
                && message.starts_with(&format!("unknown field `{key}`"))
            {
                segments.pop();
            }
            issues.push(ConfigIssue::new(
                file,
                json_path(&segments),
                scrub(&message),
            ));
            return None;
        }
    };
    // Trailing content after the document (a second object, a stray bracket) is an error too.
    if let Err(err) = de.end() {
        issues.push(ConfigIssue::new(file, "$", scrub(&err.to_string())));
        return None;
    }
    Some(value)
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
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/compat/reference-config");
        if !dir.exists() {
            println!("skipped: {} is absent", dir.display());
            return;
        }
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
            line.starts_with("tools.json: $.flows[0]: unknown field `colour`"),
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
        assert!(
            issue
                .rule
                .starts_with("invalid type: a string, expected u32"),
            "{}",
            issue.rule
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
        assert!(
            issue.rule.starts_with("unknown variant, expected"),
            "{}",
            issue.rule
        );
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
}
