//! Anthropic Messages, checked against Anthropic's published request types and documentation.
//! Sources, named per rule: "SDK params" is `MessageCreateParams` and the block/tool param types
//! of the official Python SDK (github.com/anthropics/anthropic-sdk-python, generated from
//! Anthropic's OpenAPI spec; snapshot of 2026-08-07); "SO guide" is
//! platform.claude.com/docs/en/build-with-claude/structured-outputs; "tool use guide" is
//! platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use; "errors" is
//! platform.claude.com/docs/en/api/errors; "thinking guide" is
//! platform.claude.com/docs/en/build-with-claude/extended-thinking (read 2026-12-01: thinking
//! blocks of a tool-using turn go back unmodified; a budget of at least 1024 below `max_tokens`;
//! no temperature change and only `auto`/`none` tool choice beside thinking).

use std::sync::Arc;

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer};

use super::{
    RefusesWhatTheApiRefuses, assert_a_problem, assert_real_steps_answered,
    assert_real_steps_conform, assert_refused_as, assert_route_turn_conforms, missing_keys,
    real_steps, refusing_fake_at, schema_keywords, unknown_keys,
};
use crate::ids::Secret;
use crate::model::anthropic::{AnthropicModel, parse_response};
use crate::model::reasoning::Effort;
use crate::model::reply::agent_reply_schema;
use crate::model::test_support::*;
use crate::model::wire_schema::ANTHROPIC_FORMATS;
use crate::model::{Message, Model, ProviderEcho, StopReason, ToolArguments, ToolChoice};

/// SDK params `MessageCreateParams`: every documented body field.
const REQUEST_FIELDS: &[&str] = &[
    "max_tokens",
    "messages",
    "model",
    "cache_control",
    "container",
    "inference_geo",
    "metadata",
    "output_config",
    "service_tier",
    "stop_sequences",
    "stream",
    "system",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
];

/// Models that no longer take sampling parameters: Claude Opus 4.7 migration guide ("sampling
/// parameters removed") and the Opus 5.5 migration guide ("What every request must satisfy").
fn refuses_sampling(model: &str) -> bool {
    [
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-haiku-5",
        "claude-fable",
        "claude-mythos",
    ]
    .iter()
    .any(|p| model.starts_with(p))
}

/// Models without structured outputs: SO guide (available from the 4.5 generation on).
fn lacks_structured_output(model: &str) -> bool {
    let newer = [
        "claude-opus-4-5",
        "claude-opus-4-6",
        "claude-sonnet-4-5",
        "claude-sonnet-4-6",
        "claude-haiku-4-5",
    ];
    let older = ["claude-opus-4", "claude-sonnet-4", "claude-3"];
    older.iter().any(|p| model.starts_with(p))
        && !newer.iter().any(|p| model.starts_with(p))
        && !refuses_sampling(model)
}

/// SO guide, "JSON Schema limitations": the supported features, and `description`/`title`,
/// which the official SDK's schema transform keeps.
pub(crate) fn schema_keyword_allowed(keyword: &str, value: &Value) -> bool {
    match keyword {
        "type" => value.is_string(),
        "properties" | "required" | "items" | "enum" | "const" | "anyOf" | "allOf" | "$ref"
        | "$defs" | "definitions" | "default" | "description" | "title" => true,
        "additionalProperties" => value == &json!(false),
        "format" => value
            .as_str()
            .is_some_and(|f| ANTHROPIC_FORMATS.contains(&f)),
        "minItems" => matches!(value.as_u64(), Some(0 | 1)),
        _ => false,
    }
}

/// SDK params `ToolParam.name` / tool use guide: `^[a-zA-Z0-9_-]{1,64}$`.
fn valid_tool_name(name: &Value) -> bool {
    name.as_str().is_some_and(|n| {
        (1..=64).contains(&n.len())
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

fn block_problems(block: &Value, at: &str) -> Vec<String> {
    // SDK params `TextBlockParam`, `ToolUseBlockParam`, `ToolResultBlockParam`.
    let (allowed, required): (&[&str], &[&str]) = match block["type"].as_str() {
        Some("text") => (
            &["type", "text", "cache_control", "citations"],
            &["type", "text"],
        ),
        Some("tool_use") => (
            &["type", "id", "name", "input", "cache_control"],
            &["type", "id", "name", "input"],
        ),
        Some("tool_result") => (
            &[
                "type",
                "tool_use_id",
                "content",
                "is_error",
                "cache_control",
            ],
            &["type", "tool_use_id"],
        ),
        // `ThinkingBlockParam` / `RedactedThinkingBlockParam`.
        Some("thinking") => (
            &["type", "thinking", "signature"],
            &["type", "thinking", "signature"],
        ),
        Some("redacted_thinking") => (&["type", "data"], &["type", "data"]),
        // `ImageBlockParam`: `source` is a `Base64ImageSource` {type: base64, media_type one of
        // image/jpeg, image/png, image/gif, image/webp, data} (vision guide).
        Some("image") => (&["type", "source", "cache_control"], &["type", "source"]),
        _ => return vec![format!("{at}.type: not a block type we should send")],
    };
    if block["type"] == json!("image") {
        let source = &block["source"];
        let mut problems = unknown_keys(block, allowed, at);
        problems.extend(missing_keys(block, required, at));
        let at = format!("{at}.source");
        problems.extend(unknown_keys(source, &["type", "media_type", "data"], &at));
        problems.extend(missing_keys(source, &["type", "media_type", "data"], &at));
        if source["type"] != json!("base64") {
            problems.push(format!("{at}.type: base64"));
        }
        if !matches!(
            source["media_type"].as_str(),
            Some("image/jpeg" | "image/png" | "image/gif" | "image/webp")
        ) {
            problems.push(format!("{at}.media_type: image/jpeg, png, gif or webp"));
        }
        if source["data"]
            .as_str()
            .is_none_or(|d| d.is_empty() || d.starts_with("data:"))
        {
            problems.push(format!("{at}.data: base64 data, no data: prefix"));
        }
        return problems;
    }
    let mut problems = unknown_keys(block, allowed, at);
    problems.extend(missing_keys(block, required, at));
    if block["type"] == json!("text") && block["text"].as_str().is_some_and(str::is_empty) {
        problems.push(format!("{at}.text: text content blocks must be non-empty"));
    }
    if block["type"] == json!("tool_use") && !block["input"].is_object() {
        problems.push(format!("{at}.input: an object"));
    }
    problems
}

/// Every block's `cache_control` in a request: the tools', the system blocks' and the messages'.
fn cache_controls(body: &Value) -> Vec<Value> {
    let blocks = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(body["system"].as_array().into_iter().flatten())
        .chain(
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|m| m["content"].as_array().into_iter().flatten()),
        );
    blocks
        .filter_map(|block| block.get("cache_control").cloned())
        .collect()
}

/// Everything the documentation says is wrong with a Messages request body.
pub(crate) fn request_problems(body: &Value) -> Vec<String> {
    let mut problems = unknown_keys(body, REQUEST_FIELDS, "body");
    problems.extend(missing_keys(
        body,
        &["model", "max_tokens", "messages"],
        "body",
    ));
    let model = body["model"].as_str().unwrap_or_default();

    // SDK params `temperature`: 0.0 to 1.0; none at all for models without sampling parameters.
    if let Some(temperature) = body.get("temperature") {
        if !temperature
            .as_f64()
            .is_some_and(|t| (0.0..=1.0).contains(&t))
        {
            problems.push("temperature: a number from 0 to 1".into());
        }
        if refuses_sampling(model) {
            problems.push(format!("temperature: not supported by {model}"));
        }
    }
    if !body["max_tokens"].is_u64() {
        problems.push("max_tokens: an integer".into());
    }

    // SDK params `system`: a string or text blocks.
    if let Some(system) = body.get("system")
        && !system.is_string()
    {
        for (i, block) in system.as_array().into_iter().flatten().enumerate() {
            let at = format!("system[{i}]");
            if block["type"] != json!("text") {
                problems.push(format!("{at}: only text blocks"));
            }
            problems.extend(block_problems(block, &at));
        }
    }

    // SDK params `MessageParam`: role user or assistant, content text or blocks.
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut uses_tools = false;
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        problems.extend(unknown_keys(message, &["role", "content"], &at));
        if !matches!(message["role"].as_str(), Some("user" | "assistant")) {
            problems.push(format!("{at}.role: user or assistant"));
        }
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        for (j, block) in blocks.iter().enumerate() {
            problems.extend(block_problems(block, &format!("{at}.content[{j}]")));
        }
        // Tool use guide: every tool_use is answered in the next (user) message, whose
        // tool_result blocks come first.
        let use_ids: Vec<&Value> = blocks
            .iter()
            .filter(|b| b["type"] == json!("tool_use"))
            .map(|b| &b["id"])
            .collect();
        if !use_ids.is_empty() {
            uses_tools = true;
            let next = messages
                .get(i + 1)
                .map(|m| m["content"].clone())
                .unwrap_or_default();
            let next_blocks = next.as_array().cloned().unwrap_or_default();
            let leading: Vec<&Value> = next_blocks
                .iter()
                .take_while(|b| b["type"] == json!("tool_result"))
                .map(|b| &b["tool_use_id"])
                .collect();
            for id in use_ids {
                if !leading.contains(&id) {
                    problems.push(format!(
                        "{at}: tool_use {id} has no tool_result first in the next message"
                    ));
                }
            }
        }
    }

    // SDK params `ToolParam`.
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        problems.extend(unknown_keys(
            tool,
            &[
                "name",
                "description",
                "input_schema",
                "cache_control",
                "strict",
                "type",
                "input_examples",
            ],
            &at,
        ));
        problems.extend(missing_keys(tool, &["name", "input_schema"], &at));
        if !valid_tool_name(&tool["name"]) {
            problems.push(format!("{at}.name: ^[a-zA-Z0-9_-]{{1,64}}$"));
        }
        if tool["input_schema"]["type"] != json!("object") {
            problems.push(format!("{at}.input_schema.type: object"));
        }
    }
    // Tool use guide: a conversation holding tool_use/tool_result blocks must define tools.
    if uses_tools && tools.is_empty() {
        problems.push("tools: required when the messages hold tool_use blocks".into());
    }
    // SDK params `ToolChoiceParam`.
    if let Some(choice) = body.get("tool_choice") {
        match choice["type"].as_str() {
            Some("auto" | "any" | "none") => problems.extend(unknown_keys(
                choice,
                &["type", "disable_parallel_tool_use"],
                "tool_choice",
            )),
            Some("tool") => problems.extend(missing_keys(choice, &["name"], "tool_choice")),
            _ => problems.push("tool_choice.type: auto, any, none or tool".into()),
        }
    }

    // SDK params `CacheControlEphemeralParam`: `{type: ephemeral}` and an optional `ttl` of 5m
    // or 1h. Prompt caching guide: at most 4 blocks may carry a breakpoint in one request.
    let marks = cache_controls(body);
    for mark in &marks {
        if mark["type"] != json!("ephemeral")
            || !unknown_keys(mark, &["type", "ttl"], "cache_control").is_empty()
            || mark
                .get("ttl")
                .is_some_and(|ttl| !matches!(ttl.as_str(), Some("5m" | "1h")))
        {
            problems.push(format!(
                "cache_control: {{type: ephemeral, ttl?}}, not {mark}"
            ));
        }
    }
    if marks.len() > 4 {
        problems.push(format!(
            "cache_control: at most 4 breakpoints in a request, not {}",
            marks.len()
        ));
    }

    // SDK params `ThinkingConfigParam`; thinking guide.
    let thinking = body.get("thinking").cloned().unwrap_or(Value::Null);
    let thinking_on = match thinking["type"].as_str() {
        None if thinking.is_null() => false,
        Some("disabled") => false,
        Some("enabled") => {
            problems.extend(unknown_keys(
                &thinking,
                &["type", "budget_tokens", "display"],
                "thinking",
            ));
            let budget = thinking["budget_tokens"].as_u64();
            let max = body["max_tokens"].as_u64().unwrap_or(0);
            if !budget.is_some_and(|b| b >= 1024 && b < max) {
                problems
                    .push("thinking.budget_tokens: must be ≥1024 and less than max_tokens".into());
            }
            true
        }
        Some("adaptive") => {
            problems.extend(unknown_keys(&thinking, &["type", "display"], "thinking"));
            if !refuses_sampling(model) {
                problems.push(format!(
                    "thinking.type: adaptive is not supported by {model}"
                ));
            }
            true
        }
        _ => {
            problems.push("thinking.type: enabled, disabled or adaptive".into());
            false
        }
    };
    if thinking_on {
        if body.get("temperature").is_some() {
            problems.push("temperature: may not be changed when thinking is enabled".into());
        }
        if body
            .get("tool_choice")
            .is_some_and(|c| !matches!(c["type"].as_str(), Some("auto" | "none")))
        {
            problems.push("tool_choice: only auto or none when thinking is enabled".into());
        }
        // Thinking guide: the assistant turn that called tools starts with its thinking blocks.
        if let Some(last) = messages.iter().rev().find(|m| {
            m["role"] == json!("assistant")
                && m["content"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b["type"] == json!("tool_use")))
        }) && !matches!(
            last["content"][0]["type"].as_str(),
            Some("thinking" | "redacted_thinking")
        ) {
            problems.push(
                "messages: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When \
                 `thinking` is enabled, a final `assistant` message must start with a thinking block"
                    .into(),
            );
        }
    }
    for message in &messages {
        if message["role"] != json!("assistant")
            && message["content"].as_array().is_some_and(|b| {
                b.iter()
                    .any(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
            })
        {
            problems.push("messages: thinking blocks only in assistant messages".into());
        }
    }

    // SDK params `OutputConfigParam` / `JSONOutputFormatParam`, and the SO guide's limits.
    if let Some(config) = body.get("output_config") {
        problems.extend(unknown_keys(config, &["effort", "format"], "output_config"));
        if let Some(effort) = config.get("effort")
            && !matches!(
                effort.as_str(),
                Some("low" | "medium" | "high" | "xhigh" | "max")
            )
        {
            problems.push("output_config.effort: low, medium, high, xhigh or max".into());
        }
        if let Some(format) = config.get("format") {
            problems.extend(unknown_keys(
                format,
                &["type", "schema"],
                "output_config.format",
            ));
            if format["type"] != json!("json_schema") {
                problems.push("output_config.format.type: json_schema".into());
            }
            if lacks_structured_output(model) {
                problems.push(format!("output_config.format: not supported by {model}"));
            }
            for (keyword, value) in schema_keywords(&format["schema"]) {
                if !schema_keyword_allowed(&keyword, &value) {
                    problems.push(format!(
                        "output_format.schema: property '{keyword}' is not supported"
                    ));
                }
            }
        }
    }
    problems
}

/// Errors page: `{"type": "error", "error": {"type": "invalid_request_error", "message"}}`.
pub(crate) fn error_body(problems: &[String]) -> Value {
    json!({"type": "error",
           "error": {"type": "invalid_request_error", "message": problems.join("; ")},
           "request_id": "req_conformance"})
}

/// A Messages response in the documented shape (Messages API reference, "Response").
fn official_message(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_conformance",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": 40,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 1900,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 300,
                "ephemeral_1h_input_tokens": 0
            },
            "output_tokens": 70,
            "server_tool_use": null,
            "service_tier": "standard"
        }
    })
}

#[test]
fn spec_020_anthropic_an_image_is_an_image_block_with_a_base64_source() {
    let body = model("claude-sonnet-4-5", "http://localhost").request_body(&image_step());
    let problems = request_problems(&body);
    assert!(problems.is_empty(), "{problems:?}");
    // Merged into the user turn that carries the contact's message, after its text.
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    let blocks = messages[0]["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "text");
    assert_eq!(
        blocks[1],
        json!({"type": "image", "source":
            {"type": "base64", "media_type": "image/png", "data": image_base64()}})
    );
    let mut wrong = body.clone();
    wrong["messages"][0]["content"][1]["source"]["media_type"] = json!("image/bmp");
    assert!(!request_problems(&wrong).is_empty());
}

fn model(name: &str, base: &str) -> AnthropicModel {
    AnthropicModel::new(name, &Secret::new("sk-ant-test"), base).expect("model")
}

#[test]
fn anthropic_requests_conform_field_by_field_for_every_model_family() {
    for name in [
        "claude-sonnet-4-5",
        "claude-haiku-4-5-20251001",
        "claude-opus-5-5",
        "claude-sonnet-5-5",
        "claude-sonnet-4-20250514",
        "claude-future-9",
    ] {
        for operator_temperature in [false, true] {
            let provider = model(name, "https://api.anthropic.com")
                .with_operator_temperature(operator_temperature);
            assert_real_steps_conform(name, |step| provider.request_body(step), request_problems);
        }
    }
}

#[test]
fn anthropic_fake_refuses_the_bounded_schema_every_old_request_carried() {
    let mut body =
        model("claude-sonnet-4-5", "https://api.anthropic.com").request_body(&real_steps()[0]);
    body["output_config"]["format"]["schema"] = (**agent_reply_schema()).clone();
    let problems = request_problems(&body);
    for keyword in ["maxItems", "maxLength", "minimum", "maximum"] {
        assert!(
            problems.iter().any(|p| p.contains(&format!("'{keyword}'"))),
            "{keyword}: {problems:?}"
        );
    }
    let mut body =
        model("claude-opus-5-5", "https://api.anthropic.com").request_body(&real_steps()[0]);
    body["temperature"] = json!(0.3);
    assert_a_problem(&request_problems(&body), |p| p.starts_with("temperature"));
}

#[tokio::test]
async fn anthropic_turn_passes_a_fake_that_refuses_what_anthropic_refuses() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(RefusesWhatTheApiRefuses {
            check: request_problems,
            error_body,
            ok: official_message(json!([{"type": "text", "text": VALID_REPLY}]), "end_turn"),
        })
        .mount(&server)
        .await;
    for name in [
        "claude-sonnet-4-5",
        "claude-opus-5-5",
        "claude-sonnet-4-20250514",
    ] {
        let provider = model(name, &server.uri()).with_operator_temperature(true);
        assert_real_steps_answered(&provider, name).await;
    }
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/messages", server.uri()))
        .header("anthropic-version", "2023-06-01")
        .json(
            &json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [],
                      "output_config": {"format": {"type": "json_schema",
                          "schema": {"type": "number", "minimum": 0}}}}),
        )
        .send()
        .await
        .expect("send");
    assert_refused_as(refused, "invalid_request_error").await;
}

#[tokio::test]
async fn anthropic_turn_through_the_http_route_passes_a_fake_that_refuses_what_anthropic_refuses() {
    let fake = RefusesWhatTheApiRefuses {
        check: request_problems,
        error_body,
        ok: official_message(
            json!([{"type": "text", "text": super::route::route_reply()}]),
            "end_turn",
        ),
    };
    let server = refusing_fake_at("/v1/messages", fake).await;
    let provider: Arc<dyn Model> = Arc::new(model("claude-haiku-4-5", &server.uri()));

    assert_route_turn_conforms(provider, &server, request_problems).await;
}

/// A final answer whose thinking block (`thinking`) comes before the valid reply, parsed.
fn thought_then_replied(thinking: &str) -> crate::model::ModelResponse {
    let answer = official_message(
        json!([
            {"type": "thinking", "thinking": thinking, "signature": "sig"},
            {"type": "text", "text": VALID_REPLY}
        ]),
        "end_turn",
    );
    parse_response(answer.to_string().as_bytes()).expect("parse")
}

#[test]
fn anthropic_official_response_shapes_parse() {
    // Text with cache reads; thinking blocks (adaptive thinking models) are skipped.
    let parsed = thought_then_replied("…");
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
    // Usage object: `input_tokens` is what followed the last breakpoint; the reads and the
    // writes (`cache_creation` splits them by lifetime) are counted beside it.
    assert_eq!(parsed.usage.cached_tokens, 1900);
    assert_eq!(parsed.usage.cache_write_tokens, 300);
    assert_eq!(parsed.usage.input_tokens, 40 + 300 + 1900);

    // Several tool_use blocks in one message, one with empty input.
    let calls = official_message(
        json!([
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01", "name": "send_flow", "input": {"id": "brochure"}},
            {"type": "tool_use", "id": "toolu_02", "name": "get_contact", "input": {}}
        ]),
        "tool_use",
    );
    let parsed = parse_response(calls.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.stop, StopReason::ToolCalls);
    assert_eq!(parsed.tool_calls.len(), 2);
    assert_eq!(
        parsed.tool_calls[1].arguments,
        ToolArguments::Valid(json!({}))
    );

    // SO guide, "Invalid outputs": refusal and max_tokens.
    let refusal = official_message(json!([{"type": "text", "text": "I can't"}]), "refusal");
    let parsed = parse_response(refusal.to_string().as_bytes()).expect("parse");
    assert_eq!((parsed.stop, parsed.output), (StopReason::Refused, None));
    let cut = official_message(json!([{"type": "text", "text": "{\"mess"}]), "max_tokens");
    assert_eq!(
        parse_response(cut.to_string().as_bytes()).unwrap().stop,
        StopReason::Length
    );
}

#[test]
fn cache_anthropic_breakpoints_on_tools_system_and_history_conform() {
    let model = model("claude-sonnet-4-5", "https://api.anthropic.com");
    let mut request = second_step();
    request.tools = super::demo_tenant_tools();
    request.messages.insert(
        0,
        Message::User {
            text: "[history] Hi".into(),
        },
    );
    request.cache.stable_messages = 1;
    let body = model.request_body(&request);
    assert_eq!(request_problems(&body), Vec::<String>::new());
    assert_eq!(cache_controls(&body).len(), 3);
    // The rule holds: a fifth breakpoint, or another kind, is refused.
    let mut five = body.clone();
    for message in five["messages"].as_array_mut().unwrap() {
        for block in message["content"].as_array_mut().unwrap() {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    assert!(
        request_problems(&five)
            .iter()
            .any(|p| p.contains("at most 4"))
    );
    let mut persistent = body;
    persistent["system"][0]["cache_control"] = json!({"type": "persistent"});
    assert!(!request_problems(&persistent).is_empty());
}

#[test]
fn anthropic_compatible_absent_usage_and_null_content_parse() {
    let mut answer = official_message(json!([{"type": "text", "text": VALID_REPLY}]), "end_turn");
    answer.as_object_mut().unwrap().remove("usage");
    let parsed = parse_response(answer.to_string().as_bytes()).expect("no usage");
    assert_eq!(parsed.usage.total(), 0);
    answer["content"] = Value::Null;
    let parsed = parse_response(answer.to_string().as_bytes()).expect("content null");
    assert_eq!(parsed.output, None);
}

#[test]
fn anthropic_reasoning_effort_is_extended_thinking_with_a_budget_under_max_tokens_and_no_temperature()
 {
    let provider = model("claude-sonnet-4-5", "https://api.anthropic.com")
        .with_operator_temperature(true)
        .with_reasoning_effort(Some(Effort::Low));
    for (i, mut step) in real_steps().into_iter().enumerate() {
        step.max_output_tokens = 4000;
        let body = provider.request_body(&step);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(body.get("temperature").is_none(), "{body}");
        // The fixture's tool turns (steps 1 and 3) have no thinking blocks (none were returned):
        // the first step and the reply step are the ones to check whole.
        if i % 2 == 0 {
            let problems = request_problems(&body);
            assert!(problems.is_empty(), "step {i}: {problems:?}");
        }
    }
    // A budget that does not fit below max_tokens is what the API refuses.
    let mut step = first_step(ToolChoice::Auto);
    step.max_output_tokens = 2048;
    let body = provider.request_body(&step);
    assert_a_problem(&request_problems(&body), |p| {
        p.starts_with("thinking.budget_tokens")
    });
    // Unset sends nothing.
    let plain = model("claude-sonnet-4-5", "https://api.anthropic.com").request_body(&step);
    assert!(plain.get("thinking").is_none());
}

#[test]
fn anthropic_reasoning_effort_on_an_adaptive_model_is_adaptive_thinking_with_output_config_effort()
{
    let provider = model("claude-opus-5-5", "https://api.anthropic.com")
        .with_reasoning_effort(Some(Effort::High));
    let body = provider.request_body(&real_steps()[0]);
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"]["effort"], json!("high"));
    assert_eq!(
        body["output_config"]["format"]["type"],
        json!("json_schema")
    );
    let problems = request_problems(&body);
    assert!(problems.is_empty(), "{problems:?}");
    let mut wrong = body.clone();
    wrong["model"] = json!("claude-sonnet-4-5");
    assert!(
        !request_problems(&wrong).is_empty(),
        "adaptive on an older model"
    );
}

/// A tool-calling answer with thinking on: a thinking block, a redacted one, a tool call.
fn thinking_tool_answer() -> Value {
    official_message(
        json!([
            {"type": "thinking", "thinking": "The contact asks about the course; read the contact first.",
             "signature": "EqQBCkYIARgCIkD-conformance-signature"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy-conformance-redacted"},
            {"type": "tool_use", "id": "toolu_01", "name": "get_contact", "input": {}}
        ]),
        "tool_use",
    )
}

#[test]
fn anthropic_thinking_blocks_of_a_tool_turn_are_sent_back_unchanged_first_on_the_next_step() {
    let answer = thinking_tool_answer();
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.output, None, "thinking text is never output");
    assert_eq!(parsed.echo.items().len(), 2);
    let mut request = first_step(ToolChoice::Auto);
    request.max_output_tokens = 4000;
    request.messages.push(Message::Assistant {
        text: parsed.output.clone(),
        tool_calls: parsed.tool_calls.clone(),
        echo: parsed.echo.clone(),
    });
    request.messages.push(results(vec![ok_result(
        "toolu_01",
        "get_contact",
        json!({"name": null}),
    )]));
    let provider = model("claude-sonnet-4-5", "https://api.anthropic.com")
        .with_reasoning_effort(Some(Effort::Low));
    let body = provider.request_body(&request);
    let returned = answer["content"].as_array().unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([returned[0], returned[1],
               {"type": "tool_use", "id": "toolu_01", "name": "get_contact", "input": {}}])
    );
    let problems = request_problems(&body);
    assert!(problems.is_empty(), "{problems:?}");
    // Dropping them is what the API refuses.
    if let Message::Assistant { echo, .. } = &mut request.messages[1] {
        *echo = ProviderEcho::default();
    }
    let body = provider.request_body(&request);
    assert_a_problem(&request_problems(&body), |p| {
        p.contains("must start with a thinking block")
    });
    // A final answer's thinking is not kept: there is no next step.
    let parsed = thought_then_replied("Done.");
    assert!(parsed.echo.is_empty());
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
}

/// A fake Messages API for a thinking turn: refuses what the API refuses, answers a tool call
/// with thinking first, then the reply once the tool result came back.
struct ThinkingFake;

impl wiremock::Respond for ThinkingFake {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return wiremock::ResponseTemplate::new(400)
                .set_body_json(error_body(&["json".into()]));
        };
        let problems = request_problems(&body);
        if !problems.is_empty() {
            return wiremock::ResponseTemplate::new(400).set_body_json(error_body(&problems));
        }
        let answered = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["content"][0]["type"] == json!("tool_result"));
        let answer = if answered {
            official_message(
                json!([
                    {"type": "thinking", "thinking": "SECRET-THOUGHT reply now.", "signature": "s2"},
                    {"type": "text", "text": super::route::route_reply()}
                ]),
                "end_turn",
            )
        } else {
            thinking_tool_answer()
        };
        wiremock::ResponseTemplate::new(200).set_body_json(answer)
    }
}

#[tokio::test]
async fn anthropic_thinking_turn_through_the_http_route_echoes_the_thinking_and_never_shows_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ThinkingFake)
        .mount(&server)
        .await;
    let provider: Arc<dyn Model> = Arc::new(
        model("claude-haiku-4-5", &server.uri()).with_reasoning_effort(Some(Effort::Minimal)),
    );

    let (status, body) = super::route::answer_text_through_the_route(
        provider,
        "When does the pottery course start?",
        &[("AGENT_MAX_OUTPUT_TOKENS", "2000".into())],
    )
    .await;

    super::route::assert_the_route_reply(status, &body);
    assert!(!body.to_string().contains("SECRET-THOUGHT"));
    let sent = received_bodies(&server).await;
    assert_eq!(sent.len(), 2, "a tool step, then the reply");
    let returned = thinking_tool_answer()["content"].clone();
    assert_eq!(sent[1]["messages"][1]["content"][0], returned[0]);
    assert_eq!(sent[1]["messages"][1]["content"][1], returned[1]);
}
