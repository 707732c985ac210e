//! `manychat-agent plugin new` and `plugin try`: scaffold a tool's entry in `plugins.json`, and
//! make one signed call now to see exactly what is sent and what the model would be given.
//!
//! Invariants: `plugin new` is all or nothing: the file is written (atomically) only when the
//! whole new file passes the loader's own rules, and is untouched on any refusal. `plugin try`
//! performs a write only with `--yes`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::config::{self, BUILT_IN_TOOLS, Parameter, PluginsConfig, ToolKind};
use super::sign::SecretLookup;
use super::{PLUGINS_FILE, PluginClient, READ_TIMEOUT, args, call};
use crate::agent::Fence;
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
    let mut file: Value = match std::fs::read(&path) {
        Ok(bytes) => {
            let parsed: Value = serde_json::from_slice(&bytes)
                .map_err(|_| format!("{PLUGINS_FILE} is not valid JSON; fix it first"))?;
            checked(&parsed)
                .map_err(|issues| format!("{PLUGINS_FILE} is invalid; fix it first:\n{issues}"))?;
            parsed
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => json!({"tools": []}),
        Err(error) => return Err(format!("cannot read {PLUGINS_FILE}: {error}")),
    };
    let tools = file["tools"]
        .as_array_mut()
        .ok_or_else(|| format!("{PLUGINS_FILE} has no tools list"))?;
    if tools.iter().any(|t| t["name"] == name) {
        return Err(format!("{name} is already in {PLUGINS_FILE}"));
    }
    let entry = skeleton(name, kind, url);
    tools.push(entry.clone());
    checked(&file).map_err(|issues| format!("the new entry is refused:\n{issues}"))?;
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    let temporary = dir.join(format!(".{PLUGINS_FILE}.new"));
    std::fs::write(&temporary, &text)
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            format!("cannot write {PLUGINS_FILE}: {error}")
        })?;
    Ok(guide(&entry, kind))
}

/// The loader's own rules over a whole `plugins.json`: its issues as lines.
fn checked(file: &Value) -> Result<PluginsConfig, String> {
    let parsed: PluginsConfig = serde_path_to_error::deserialize(file.clone()).map_err(|e| {
        format!(
            "{PLUGINS_FILE}: $.{}: does not match the plugins.json schema",
            e.path()
        )
    })?;
    let issues = config::validate(PLUGINS_FILE, &parsed);
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

fn skeleton(name: &str, kind: ToolKind, url: Option<&str>) -> Value {
    let url = url.map_or_else(|| format!("http://127.0.0.1:8787/{name}"), str::to_owned);
    let secret_env = format!("PLUGIN_{}_SECRET", name.to_ascii_uppercase());
    match kind {
        ToolKind::Read => json!({
            "name": name,
            "kind": "read",
            "url": url,
            "secretEnv": secret_env,
            "description": "What this looks up, and when to use it.",
            "parameters": {"query": {"type": "query", "maxLength": 200}},
            "result": {"answer": {"type": "text", "maxLength": 200}}
        }),
        ToolKind::Write => json!({
            "name": name,
            "kind": "write",
            "url": url,
            "secretEnv": secret_env,
            "description": "What this records, and when to use it.",
            "parameters": {"summary": {"type": "note", "maxLength": 300}}
        }),
    }
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

/// `plugin try`: one signed call of `name` now, for `subscriber`, with `--arg key=value`s.
/// Returns what to print: the request, then what the model would be given (a read) or what the
/// record of the write would say. A write is performed only when `yes`.
pub async fn try_tool(
    plugins: Option<&PluginsConfig>,
    secrets: SecretLookup,
    name: &str,
    subscriber: &str,
    raw_args: &[String],
    yes: bool,
) -> Result<String, Refusal> {
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
                return Ok(format!(
                    "request: none (the query is empty once cleaned)\nthe model would be given: {}",
                    super::result::unavailable()
                ));
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
                Ok(view) => view.to_string(),
                Err(why) => format!("{} ({why})", super::result::unavailable()),
            };
            Ok(format!(
                "request: POST {}\n{request}\nthe model would be given: {given}",
                tool.url
            ))
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
                    tool.url
                ));
            }
            super::perform_writes(
                &client,
                plugins,
                &subscriber,
                uuid::Uuid::nil(),
                std::slice::from_mut(&mut action),
            )
            .await;
            Ok(format!(
                "request: POST {}\n{request}\nthe record would say: {}",
                tool.url,
                crate::actions::record(std::slice::from_ref(&action))[0]
            ))
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
