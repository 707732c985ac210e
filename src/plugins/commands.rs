//! `manychat-agent plugin new` and `plugin try`: scaffold a tool's entry in `plugins.json`, and
//! make one signed call now to see exactly what is sent and what the model would be given.
//!
//! Invariants: `plugin new` is all or nothing: the file is written (atomically) only when the
//! whole new file passes the loader's own rules, and is untouched on any refusal. `plugin try`
//! performs a write only with `--yes`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::sign::SecretLookup;
use super::{PLUGINS_FILE, PluginClient, READ_TIMEOUT, args, call};
use crate::config::plugins::{self as config, BUILT_IN_TOOLS, Parameter, PluginsConfig, ToolKind};
use crate::fence::Fence;
use crate::ids::SubscriberId;

/// A command's refusal: printed as `error: …`, exit 1.
pub type Refusal = String;

/// `plugin new`: adds a skeleton entry for `name` to `<dir>/plugins.json` (creating the file),
/// and returns what to print: the request the endpoint will receive, the answer it must give,
/// and how to verify the signature.
pub fn new_tool(
    dir: &Path,
    name: &str,
    kind: ToolKind,
    url: Option<&str>,
) -> Result<String, Refusal> {
    if !config::is_valid_name(name) {
        return Err(format!(
            "{name:?} is not a valid tool name (^[a-z][a-z0-9_]{{0,63}}$)"
        ));
    }
    if BUILT_IN_TOOLS.contains(&name) {
        return Err(format!("{name} is a built-in tool's name"));
    }
    let path = dir.join(PLUGINS_FILE);
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let parsed: Value = serde_json::from_str(&text)
                .map_err(|_| format!("{PLUGINS_FILE} is not valid JSON; fix it first"))?;
            checked(&parsed)
                .map_err(|issues| format!("{PLUGINS_FILE} is invalid; fix it first:\n{issues}"))?;
            let tools = parsed["tools"]
                .as_array()
                .ok_or_else(|| format!("{PLUGINS_FILE} has no tools list"))?;
            if tools.iter().any(|t| t["name"] == name) {
                return Err(format!("{name} is already in {PLUGINS_FILE}"));
            }
            Some(text)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(format!("cannot read {PLUGINS_FILE}: {error}")),
    };
    let fields = skeleton(name, kind, url);
    let entry = Value::Object(
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    );
    let text = with_entry(existing.as_deref(), &fields)
        .ok_or_else(|| format!("{PLUGINS_FILE} has no tools list"))?;
    let file: Value = serde_json::from_str(&text)
        .map_err(|_| format!("the new entry could not be added to {PLUGINS_FILE}"))?;
    checked(&file).map_err(|issues| format!("the new entry is refused:\n{issues}"))?;
    let temporary = dir.join(format!(".{PLUGINS_FILE}.new"));
    std::fs::write(&temporary, &text)
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            format!("cannot write {PLUGINS_FILE}: {error}")
        })?;
    Ok(guide(&entry, kind))
}

/// The loader's own rules over a whole `plugins.json`: its issues as lines, but for the
/// placeholder descriptions this command writes (`config check` refuses them until replaced).
fn checked(file: &Value) -> Result<PluginsConfig, String> {
    let parsed: PluginsConfig = serde_path_to_error::deserialize(file.clone()).map_err(|e| {
        format!(
            "{PLUGINS_FILE}: $.{}: does not match the plugins.json schema",
            e.path()
        )
    })?;
    let mut issues = config::validate(PLUGINS_FILE, &parsed);
    issues.retain(|issue| issue.rule != config::PLACEHOLDER_RULE);
    if issues.is_empty() {
        Ok(parsed)
    } else {
        Err(issues
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// The new entry's keys and values, in the documented order: name, kind, url, secretEnv,
/// description, parameters, result.
fn skeleton(name: &str, kind: ToolKind, url: Option<&str>) -> Vec<(&'static str, Value)> {
    let url = url.map_or_else(|| format!("http://127.0.0.1:8787/{name}"), str::to_owned);
    let secret_env = format!("PLUGIN_{}_SECRET", name.to_ascii_uppercase());
    let mut fields = vec![
        ("name", json!(name)),
        ("kind", json!(kind.as_str())),
        ("url", json!(url)),
        ("secretEnv", json!(secret_env)),
    ];
    match kind {
        ToolKind::Read => fields.extend([
            ("description", json!(config::PLACEHOLDER_DESCRIPTIONS[0])),
            (
                "parameters",
                json!({"query": {"type": "query", "maxLength": 200}}),
            ),
            (
                "result",
                json!({"answer": {"type": "text", "maxLength": 200}}),
            ),
        ]),
        ToolKind::Write => fields.extend([
            ("description", json!(config::PLACEHOLDER_DESCRIPTIONS[1])),
            (
                "parameters",
                json!({"summary": {"type": "note", "maxLength": 300}}),
            ),
        ]),
    }
    fields
}

/// The file's text with the entry `fields` appended to its tools list: the existing text kept
/// as it is (its keys in their order), the entry's keys in theirs. `None` when the file has no
/// top-level tools list. A new file is written from scratch.
fn with_entry(existing: Option<&str>, fields: &[(&str, Value)]) -> Option<String> {
    let entry = entry_text(fields, "    ");
    let Some(text) = existing else {
        return Some(format!("{{\n  \"tools\": [\n{entry}\n  ]\n}}\n"));
    };
    let (open, close) = tools_list(text)?;
    let inside = &text[open + 1..close];
    let spliced = match inside.trim_end().len() {
        0 => format!("{}[\n{entry}\n  ]{}", &text[..open], &text[close + 1..]),
        kept => {
            let end = open + 1 + kept;
            format!("{},\n{entry}{}", &text[..end], &text[end..])
        }
    };
    Some(spliced)
}

/// One entry as indented JSON text, its keys in the given order.
fn entry_text(fields: &[(&str, Value)], indent: &str) -> String {
    let inner = format!("{indent}  ");
    let lines: Vec<String> = fields
        .iter()
        .map(|(key, value)| {
            let value = serde_json::to_string_pretty(value)
                .unwrap_or_default()
                .replace('\n', &format!("\n{inner}"));
            format!("{inner}{}: {value}", Value::from(*key))
        })
        .collect();
    format!("{indent}{{\n{}\n{indent}}}", lines.join(",\n"))
}

/// Where the top-level `tools` list opens and closes (its `[` and `]`) in `text`, a JSON
/// object already parsed: strings are skipped whole, so no bracket inside one counts.
fn tools_list(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let (mut depth, mut i, mut open) = (0usize, 0usize, None);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i = crate::config::upgrade::string_close(bytes, start);
                let key = text.get(start..=i.min(bytes.len() - 1));
                if depth == 1 && open.is_none() && key == Some("\"tools\"") {
                    let after = text.get(i + 1..)?.trim_start().strip_prefix(':');
                    if let Some(list) = after.map(str::trim_start).filter(|r| r.starts_with('[')) {
                        i = text.len() - list.len();
                        open = Some(i);
                        continue;
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if let Some(open) = open.filter(|_| depth == 1) {
                    return Some((open, i));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn guide(entry: &Value, kind: ToolKind) -> String {
    let name = entry["name"].as_str().unwrap_or_default();
    let arguments = match kind {
        ToolKind::Read => json!({"query": "…"}),
        ToolKind::Write => json!({"summary": "…"}),
    };
    let request =
        json!({"tool": name, "subscriber_id": "<ManyChat subscriber id>", "arguments": arguments});
    let answer = match kind {
        ToolKind::Read => "HTTP 200 with a JSON object of the declared result keys, e.g. {\"answer\": \"…\"}\n  (undeclared keys are dropped; a type failure, a missing key, a non-2xx status or\n  more than 1500 ms gives the model {\"available\": false})".to_owned(),
        ToolKind::Write => "any 2xx within 10 s (the body is ignored); anything else is recorded as failed,\n  never retried".to_owned(),
    };
    format!(
        "added {name} ({kind}) to {PLUGINS_FILE}: set its description and parameters, then run\n\
         `manychat-agent config check`.\n\n\
         The endpoint receives: POST {url}\n  Content-Type: application/json\n  \
         webhook-id, webhook-timestamp, webhook-signature (Standard Webhooks)\n  {request}\n\n\
         It must answer: {answer}\n\n\
         Verify the signature: HMAC-SHA256, keyed with the base64-decoded part of the secret \
         after whsec_, over\n  \"<webhook-id>.<webhook-timestamp>.<raw body>\"; base64 it and \
         compare with the value after \"v1,\"\n  in webhook-signature (a Standard Webhooks \
         library does this: Webhook::new(secret).verify(body, headers)).\n  Refuse timestamps \
         more than 5 minutes old. The secret: {secret} (whsec_ + base64 of 24-64 random \
         bytes).",
        kind = kind.as_str(),
        url = entry["url"].as_str().unwrap_or_default(),
        request = request,
        secret = entry["secretEnv"].as_str().unwrap_or_default(),
    )
}

/// What `plugin try` did: what to print, and whether the endpoint answered as the tool
/// needs (a read's answer the model would be given; a write's 2xx). The command exits 1 when it
/// did not: a refusal (401, any non-2xx), a timeout or an answer that breaks the tool's result.
#[derive(Debug)]
pub struct Tried {
    pub printed: String,
    pub answered: bool,
}

/// `plugin try`: one signed call of `name` now, for `subscriber`, with `--arg key=value`s.
/// Prints the request, then what the model would be given (a read) or what the record of the
/// write would say. A write is performed only when `yes`.
pub async fn try_tool(
    plugins: Option<&PluginsConfig>,
    secrets: SecretLookup,
    name: &str,
    subscriber: &str,
    raw_args: &[String],
    yes: bool,
) -> Result<Tried, Refusal> {
    let tool = plugins
        .and_then(|p| p.tool(name))
        .ok_or_else(|| format!("{name} is not a tool in {PLUGINS_FILE}"))?;
    let subscriber = SubscriberId::parse(subscriber).map_err(|e| e.to_string())?;
    let arguments = typed_arguments(tool, raw_args)?;
    let client = PluginClient::new(secrets);
    if let Some(problem) = client
        .secret_problems(plugins)
        .into_iter()
        .find(|p| p.starts_with(&format!("{} ", tool.secret_env)))
    {
        return Err(format!("the signing secret {problem}"));
    }
    match tool.kind {
        ToolKind::Read => {
            let checked = args::check(tool, &Value::Object(arguments))
                .map_err(|r| format!("refused ({}): {}", r.reason, r.message))?;
            let request = call::request_body(tool, &subscriber, &checked.sent);
            if checked.empty_query {
                return Ok(Tried {
                    printed: format!(
                        "request: none (the query is empty once cleaned)\nthe model would be \
                         given: {}",
                        super::result::unavailable()
                    ),
                    answered: true,
                });
            }
            let fence = Fence::new();
            let given = match super::view_of(
                &client,
                tool,
                &subscriber,
                &checked.sent,
                &fence,
                READ_TIMEOUT,
            )
            .await
            {
                Ok(view) => (view.to_string(), true),
                Err(why) => (format!("{} ({why})", super::result::unavailable()), false),
            };
            Ok(Tried {
                printed: format!(
                    "request: POST {}\n{request}\nthe model would be given: {}",
                    shown_url(&tool.url),
                    given.0
                ),
                answered: given.1,
            })
        }
        ToolKind::Write => {
            let mut action = super::stage_write(tool, &Value::Object(arguments))
                .map_err(|r| format!("refused ({}): {}", r.reason, r.message))?;
            let crate::actions::Operation::Plugin { arguments, .. } = &action.operation else {
                return Err("the write could not be staged".into());
            };
            let request = call::request_body(tool, &subscriber, arguments);
            if !yes {
                return Err(format!(
                    "a write is performed for real: add --yes to send\nPOST {}\n{request}",
                    shown_url(&tool.url)
                ));
            }
            // A one-off call: its count goes nowhere (no service is serving metrics here).
            super::perform_writes(
                &client,
                plugins,
                &crate::metrics::Metrics::default(),
                &subscriber,
                uuid::Uuid::nil(),
                std::slice::from_mut(&mut action),
            )
            .await;
            Ok(Tried {
                printed: format!(
                    "request: POST {}\n{request}\nthe record would say: {}",
                    shown_url(&tool.url),
                    crate::actions::record(std::slice::from_ref(&action))[0]
                ),
                answered: action.entry.status == crate::actions::ActionStatus::Performed,
            })
        }
    }
}

/// `key=value` pairs typed by the tool's parameters (a number, a boolean, or text).
fn typed_arguments(
    tool: &config::PluginTool,
    raw: &[String],
) -> Result<Map<String, Value>, Refusal> {
    let mut arguments = Map::new();
    for pair in raw {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--arg {pair:?} is not key=value"))?;
        let parameter = tool
            .parameters
            .get(key)
            .ok_or_else(|| format!("{key} is not a parameter of {}", tool.name))?;
        let typed = match parameter {
            Parameter::Number { .. } => value
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| value.parse::<f64>().map(Value::from))
                .map_err(|_| format!("{key} must be a number"))?,
            Parameter::Boolean {} => value
                .parse::<bool>()
                .map(Value::Bool)
                .map_err(|_| format!("{key} must be true or false"))?,
            _ => Value::String(value.to_owned()),
        };
        arguments.insert(key.to_owned(), typed);
    }
    Ok(arguments)
}
/// A tool's URL as printed: without its query, fragment or credentials (an endpoint's key is
/// sometimes put there), so a terminal or a pasted transcript never shows one.
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => "(the configured url)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_try_prints_a_url_without_its_query_or_credentials() {
        assert_eq!(
            shown_url("https://user:pw@shop.example.test/agent/seats?key=sk-123#x"),
            "https://shop.example.test/agent/seats"
        );
        assert_eq!(shown_url("not a url"), "(the configured url)");
    }
}
