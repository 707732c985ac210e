//! OpenAI Chat Completions, checked against OpenAI's published OpenAPI spec
//! (github.com/openai/openai-openapi, `openapi.json`, snapshot of 2026-08-21) and the Structured
//! Outputs guide. Each rule names its source: `spec <Schema>` is a component of the OpenAPI
//! spec; "SO guide" is platform.openai.com/docs/guides/structured-outputs.

use std::sync::Arc;

use serde_json::{Value, json};
use wiremock::MockServer;

use super::{
    RefusesWhatTheApiRefuses, assert_a_problem, assert_real_steps_answered,
    assert_real_steps_conform, assert_refused_as, assert_route_turn_conforms, elements,
    missing_keys, real_steps, refusing_fake_at, schema_keywords, unknown_keys,
};
use crate::ids::Secret;
use crate::model::openai::{OpenAiModel, parse_response};
use crate::model::reply::agent_reply_schema;
use crate::model::test_support::*;
use crate::model::wire_schema::OPENAI_BOUNDS;
use crate::model::{Model, StopReason, ToolArguments};

/// spec `CreateChatCompletionRequest` (with `CreateModelResponseProperties` and
/// `ModelResponseProperties`): every documented request field.
const REQUEST_FIELDS: &[&str] = &[
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "messages",
    "metadata",
    "modalities",
    "model",
    "moderation",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

/// The models whose `temperature` accepts only its default and which refuse `max_tokens`:
/// spec `CreateChatCompletionRequest.max_tokens` ("not compatible with o-series models") and
/// the reasoning guide (GPT-5 family and o-series are reasoning models).
fn is_reasoning(model: &str) -> bool {
    ["gpt-5", "o1", "o3", "o4"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// A function or response-format name: spec `FunctionObject.name` and
/// `ResponseFormatJsonSchema.json_schema.name` ("a-z, A-Z, 0-9, underscores and dashes, at
/// most 64").
fn valid_name(name: &Value) -> bool {
    name.as_str().is_some_and(|n| {
        (1..=64).contains(&n.len())
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// SO guide, "Supported schemas": strict mode takes `type`, `properties`, `required`,
/// `additionalProperties` (false), `items`, `enum`, `const`, `anyOf`, `$defs`/`$ref`,
/// `description`/`title`, and the bounds listed under "Supported properties".
pub(crate) fn strict_keyword_allowed(keyword: &str, value: &Value) -> bool {
    match keyword {
        "type" | "properties" | "required" | "items" | "enum" | "const" | "anyOf" | "$ref"
        | "$defs" | "description" | "title" => true,
        "additionalProperties" => value == &json!(false),
        k => OPENAI_BOUNDS.contains(&k),
    }
}

/// SO guide, "Supported schemas": the root is an object, not `anyOf`; every object sets
/// `additionalProperties: false` and lists every property in `required`.
fn strict_schema_problems(schema: &Value, at: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if schema["type"] != json!("object") || schema.get("anyOf").is_some() {
        problems.push(format!("{at}: the root must be an object, not anyOf"));
    }
    for (keyword, value) in schema_keywords(schema) {
        if !strict_keyword_allowed(&keyword, &value) {
            problems.push(format!("{at}: '{keyword}' is not supported in strict mode"));
        }
    }
    fn objects(node: &Value, at: &str, problems: &mut Vec<String>) {
        if node["type"] == json!("object") {
            if node["additionalProperties"] != json!(false) {
                problems.push(format!("{at}: additionalProperties must be false"));
            }
            let required: Vec<&str> = node["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for name in node["properties"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.keys())
            {
                if !required.contains(&name.as_str()) {
                    problems.push(format!("{at}.{name}: every property must be required"));
                }
            }
        }
        for (name, child) in node["properties"].as_object().into_iter().flatten() {
            objects(child, &format!("{at}.{name}"), problems);
        }
        if let Some(items) = node.get("items") {
            objects(items, &format!("{at}[]"), problems);
        }
        for branch in node["anyOf"].as_array().into_iter().flatten() {
            objects(branch, at, problems);
        }
    }
    objects(schema, at, &mut problems);
    problems
}

/// Everything the documentation says is wrong with a Chat Completions request body.
/// spec `ChatCompletionRequestUserMessage.content`: a string, or an array of content parts:
/// `ChatCompletionRequestMessageContentPartText` (`type: text`, `text`) or
/// `ChatCompletionRequestMessageContentPartImage` (`type: image_url`, `image_url: {url, detail?}`,
/// the url "either a URL of the image or the base64 encoded image data").
fn user_content_problems(content: &Value, at: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(parts) = content.as_array() else {
        if !content.is_string() {
            problems.push(format!("{at}.content: a string or an array of parts"));
        }
        return problems;
    };
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        match part["type"].as_str() {
            Some("text") => {
                problems.extend(unknown_keys(part, &["type", "text"], &at));
                problems.extend(missing_keys(part, &["type", "text"], &at));
            }
            Some("image_url") => {
                problems.extend(unknown_keys(part, &["type", "image_url"], &at));
                problems.extend(missing_keys(part, &["type", "image_url"], &at));
                let image = &part["image_url"];
                problems.extend(unknown_keys(
                    image,
                    &["url", "detail"],
                    &format!("{at}.image_url"),
                ));
                let url = image["url"].as_str().unwrap_or_default();
                let data_url = url.starts_with("data:image/") && url.contains(";base64,");
                if !data_url && !url.starts_with("https://") && !url.starts_with("http://") {
                    problems.push(format!("{at}.image_url.url: a URL or a base64 data URL"));
                }
            }
            _ => problems.push(format!("{at}.type: text or image_url")),
        }
    }
    problems
}

pub(crate) fn request_problems(body: &Value) -> Vec<String> {
    let mut problems = unknown_keys(body, REQUEST_FIELDS, "body");
    problems.extend(missing_keys(body, &["model", "messages"], "body"));
    let model = body["model"].as_str().unwrap_or_default();

    // spec `CreateChatCompletionRequest.messages`: at least one.
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.is_empty() {
        problems.push("body.messages: at least one message".into());
    }
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        // spec `ChatCompletionRequest{System,User,Assistant,Tool}Message`.
        let (allowed, required): (&[&str], &[&str]) = match message["role"].as_str() {
            Some("system" | "developer" | "user") => {
                (&["role", "content", "name"], &["role", "content"])
            }
            Some("assistant") => (
                &[
                    "role",
                    "content",
                    "refusal",
                    "name",
                    "audio",
                    "tool_calls",
                    "function_call",
                ],
                &["role"],
            ),
            Some("tool") => (
                &["role", "content", "tool_call_id"],
                &["role", "content", "tool_call_id"],
            ),
            _ => {
                problems.push(format!("{at}.role: not a documented role"));
                continue;
            }
        };
        problems.extend(unknown_keys(message, allowed, &at));
        problems.extend(missing_keys(message, required, &at));
        if message["role"] == json!("assistant") {
            // spec: content is "required unless tool_calls or function_call is specified".
            if message["content"].is_null() && message.get("tool_calls").is_none() {
                problems.push(format!("{at}.content: required without tool_calls"));
            }
            for (j, call) in elements(&message["tool_calls"]) {
                // spec `ChatCompletionMessageToolCall`: id, type function, function{name,
                // arguments as a string}.
                let at = format!("{at}.tool_calls[{j}]");
                problems.extend(unknown_keys(call, &["id", "type", "function"], &at));
                problems.extend(missing_keys(call, &["id", "type", "function"], &at));
                if call["type"] != json!("function") {
                    problems.push(format!("{at}.type: must be function"));
                }
                if !call["function"]["arguments"].is_string() {
                    problems.push(format!("{at}.function.arguments: must be a JSON string"));
                }
            }
        }
        if message["role"] == json!("tool") && !message["content"].is_string() {
            problems.push(format!("{at}.content: text expected"));
        }
        if message["role"] == json!("user") {
            problems.extend(user_content_problems(&message["content"], &at));
        }
    }

    // spec `ModelResponseProperties.temperature`: 0–2; reasoning models accept only their
    // default (reasoning guide).
    if let Some(temperature) = body.get("temperature") {
        match temperature.as_f64() {
            Some(t) if (0.0..=2.0).contains(&t) => {
                if is_reasoning(model) && t != 1.0 {
                    problems.push(format!(
                        "temperature: unsupported value for {model}; only the default is supported"
                    ));
                }
            }
            _ => problems.push("temperature: a number from 0 to 2".into()),
        }
    }
    // spec `ReasoningEffort` (none, minimal, low, medium, high, xhigh), "reasoning models
    // only"; `minimal` on the original GPT-5 models alone, none and xhigh from GPT-5.1 on
    // (reasoning guide).
    if let Some(effort) = body.get("reasoning_effort") {
        let effort = effort.as_str().unwrap_or_default();
        let gpt_5_point = model.starts_with("gpt-5.");
        let allowed = match effort {
            "low" | "medium" | "high" => is_reasoning(model),
            "minimal" => model.starts_with("gpt-5") && !gpt_5_point,
            "none" | "xhigh" => gpt_5_point,
            _ => false,
        };
        if !allowed {
            problems.push(format!(
                "reasoning_effort: {effort} is not supported by {model}"
            ));
        }
    }
    if body.get("max_tokens").is_some() && is_reasoning(model) {
        problems.push(
            "max_tokens: not supported by reasoning models; use max_completion_tokens".into(),
        );
    }
    if let Some(n) = body.get("max_completion_tokens")
        && !n.is_u64()
    {
        problems.push("max_completion_tokens: an integer".into());
    }

    // spec `ChatCompletionTool` / `FunctionObject`.
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        problems.extend(unknown_keys(tool, &["type", "function"], &at));
        if tool["type"] != json!("function") {
            problems.push(format!("{at}.type: must be function"));
        }
        let function = &tool["function"];
        problems.extend(unknown_keys(
            function,
            &["name", "description", "parameters", "strict"],
            &format!("{at}.function"),
        ));
        if !valid_name(&function["name"]) {
            problems.push(format!("{at}.function.name: [a-zA-Z0-9_-]{{1,64}}"));
        }
        if function["strict"] == json!(true) {
            problems.extend(strict_schema_problems(
                &function["parameters"],
                &format!("{at}.function.parameters"),
            ));
        }
    }
    if body.get("tools").is_some() && tools.is_empty() {
        problems.push("tools: an empty array is refused; omit the field".into());
    }
    // spec `ModelResponseProperties.prompt_cache_key`: a string (the prompt caching guide
    // adds that it groups requests sharing a prefix).
    if body
        .get("prompt_cache_key")
        .is_some_and(|key| !key.is_string())
    {
        problems.push("prompt_cache_key: a string".into());
    }
    // spec `ChatCompletionToolChoiceOption`.
    if let Some(choice) = body.get("tool_choice") {
        let documented =
            matches!(choice.as_str(), Some("none" | "auto" | "required")) || choice.is_object();
        if !documented {
            problems.push("tool_choice: none, auto, required or a named tool".into());
        }
        if tools.is_empty() {
            problems.push("tool_choice: only allowed when tools are specified".into());
        }
    }
    // SO guide, "Structured Outputs … not compatible with parallel function calls": with strict
    // tools, parallel_tool_calls must be false.
    let strict_tools = tools.iter().any(|t| t["function"]["strict"] == json!(true));
    if strict_tools && body["parallel_tool_calls"] != json!(false) {
        problems.push("parallel_tool_calls: must be false with strict tools".into());
    }

    // spec `ResponseFormatJsonSchema`.
    if let Some(format) = body.get("response_format") {
        problems.extend(unknown_keys(
            format,
            &["type", "json_schema"],
            "response_format",
        ));
        if format["type"] == json!("json_schema") {
            let schema = &format["json_schema"];
            problems.extend(unknown_keys(
                schema,
                &["name", "description", "schema", "strict"],
                "response_format.json_schema",
            ));
            if !valid_name(&schema["name"]) {
                problems.push("response_format.json_schema.name: [a-zA-Z0-9_-]{1,64}".into());
            }
            if schema["strict"] == json!(true) {
                let fine_tuned = model.starts_with("ft:");
                let mut found =
                    strict_schema_problems(&schema["schema"], "response_format.json_schema.schema");
                // SO guide, "Supported properties": not yet supported for fine-tuned models.
                if fine_tuned {
                    for (keyword, _) in schema_keywords(&schema["schema"]) {
                        if OPENAI_BOUNDS.contains(&keyword.as_str()) {
                            found.push(format!("{keyword}: not supported for fine-tuned models"));
                        }
                    }
                }
                problems.extend(found);
            }
        }
    }
    problems
}

/// spec `Error` inside `ErrorResponse`: `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error_body(problems: &[String]) -> Value {
    json!({"error": {
        "message": problems.join("; "),
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_request"
    }})
}

/// The shape of the spec's "Default" example of `POST /chat/completions` (x-oaiMeta), with
/// our reply as the content.
fn official_answer(content: &str) -> Value {
    json!({
        "id": "chatcmpl-conformance",
        "object": "chat.completion",
        "created": 1_764_547_200,
        "model": "gpt-5.4-mini-2026-03-17",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": null,
                        "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 1900,
            "completion_tokens": 60,
            "total_tokens": 1960,
            "prompt_tokens_details": {"cached_tokens": 1792, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        },
        "service_tier": "default"
    })
}

async fn refusing_fake(reply: &str) -> MockServer {
    let fake = RefusesWhatTheApiRefuses {
        check: request_problems,
        error_body,
        ok: official_answer(reply),
    };
    refusing_fake_at("/v1/chat/completions", fake).await
}

fn model(name: &str, base: &str) -> OpenAiModel {
    OpenAiModel::new(name, &Secret::new("sk-test"), &format!("{base}/v1")).expect("model")
}

#[test]
fn openai_requests_conform_field_by_field_for_every_model_family() {
    for name in [
        "gpt-4.1-mini",
        "gpt-5.4-mini",
        "o4-mini",
        "some-compatible-model",
        "ft:gpt-4.1-mini-2025-04-14:acme::abc",
    ] {
        for operator_temperature in [false, true] {
            let provider =
                model(name, "http://localhost").with_operator_temperature(operator_temperature);
            assert_real_steps_conform(name, |step| provider.request_body(step), request_problems);
        }
    }
}

#[test]
fn spec_020_openai_an_image_is_a_user_image_url_part_with_a_base64_data_url() {
    let body = model("gpt-4.1-mini", "http://localhost").request_body(&image_step());
    let problems = request_problems(&body);
    assert!(problems.is_empty(), "{problems:?}");
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        json!({"role": "user", "content": [{"type": "image_url", "image_url":
            {"url": format!("data:image/png;base64,{}", image_base64())}}]})
    );
    // The rule bites: a bare base64 string is not a URL.
    let mut wrong = body.clone();
    wrong["messages"][2]["content"][0]["image_url"]["url"] = json!(image_base64());
    assert!(!request_problems(&wrong).is_empty());
}

#[test]
fn spec_020_vision_follows_the_registry_capability() {
    use crate::model::Model as _;
    assert!(model("gpt-4.1-mini", "http://localhost").accepts_images());
    assert!(!model("some-compatible-model", "http://localhost").accepts_images());
}

#[test]
fn openai_reasoning_models_get_no_temperature_and_max_completion_tokens() {
    let body = model("gpt-5.4-mini", "http://localhost")
        .with_operator_temperature(true)
        .request_body(&real_steps()[0]);
    assert!(body.get("temperature").is_none(), "{body}");
    assert_eq!(body["max_completion_tokens"], json!(400));
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn openai_fake_refuses_what_the_old_requests_carried() {
    // What every request carried before the capability registry: temperature for a reasoning model, maxLength
    // in the strict schema. The rules refuse both, so the fake is not a rubber stamp.
    let mut body = model("gpt-4.1-mini", "http://localhost").request_body(&real_steps()[0]);
    body["model"] = json!("gpt-5.4-mini");
    body["temperature"] = json!(0.3);
    body["response_format"]["json_schema"]["schema"] = (**agent_reply_schema()).clone();
    let problems = request_problems(&body);
    assert_a_problem(&problems, |p| p.starts_with("temperature"));
    assert_a_problem(&problems, |p| p.contains("'maxLength'"));
    body["stray"] = json!(1);
    assert_a_problem(&request_problems(&body), |p| p.contains("body.stray"));
}

#[tokio::test]
async fn openai_turn_passes_a_fake_that_refuses_what_openai_refuses() {
    let server = refusing_fake(VALID_REPLY).await;
    for name in ["gpt-5.4-mini", "gpt-4.1-mini"] {
        let provider = model(name, &server.uri()).with_operator_temperature(true);
        assert_real_steps_answered(&provider, name).await;
    }
    // And the fake answers a refused request the way OpenAI documents it.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.uri()))
        .json(&json!({"model": "gpt-5.4-mini", "messages": [], "temperature": 0.3}))
        .send()
        .await
        .expect("send");
    assert_refused_as(refused, "invalid_request_error").await;
}

#[tokio::test]
async fn openai_turn_through_the_http_route_passes_a_fake_that_refuses_what_openai_refuses() {
    let server = refusing_fake(&super::route::route_reply()).await;
    let provider: Arc<dyn Model> = Arc::new(model("gpt-5.4-mini", &server.uri()));

    assert_route_turn_conforms(provider, &server, request_problems).await;
}

#[test]
fn cache_openai_official_final_step_with_tools_none_and_a_cache_key_conforms() {
    let model = OpenAiModel::speaking(
        "gpt-4.1-mini",
        &Secret::new("sk-test"),
        "https://api.openai.com/v1",
        true,
    )
    .expect("model");
    let mut request = second_step();
    request.tools = super::demo_tenant_tools();
    request.tool_choice = crate::model::ToolChoice::None;
    request.cache.key = Some("3f2a9c41d07be815".into());
    let body = model.request_body(&request);
    assert_eq!(body["tool_choice"], json!("none"));
    assert_eq!(body["prompt_cache_key"], json!("3f2a9c41d07be815"));
    assert_eq!(request_problems(&body), Vec::<String>::new());
    let mut numbered = body;
    numbered["prompt_cache_key"] = json!(42);
    assert_a_problem(&request_problems(&numbered), |p| {
        p.starts_with("prompt_cache_key")
    });
}

#[test]
fn openai_official_response_shapes_parse() {
    // spec "Default" example shape: text, cached tokens in prompt_tokens_details.
    let answer =
        parse_response(official_answer(VALID_REPLY).to_string().as_bytes()).expect("parse");
    assert_eq!(answer.output.as_deref(), Some(VALID_REPLY));
    assert_eq!(answer.usage.cached_tokens, 1792);
    assert_eq!(answer.stop, StopReason::Completed);

    // spec "Functions" example shape: content null, several tool calls, one without arguments.
    let calls = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
            "message": {"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "send_flow", "arguments": "{\n\"id\": \"brochure\"\n}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "get_contact", "arguments": ""}}
                ]}}],
        "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
                  "completion_tokens_details": {"reasoning_tokens": 0}}
    });
    let answer = parse_response(calls.to_string().as_bytes()).expect("parse");
    assert_eq!(answer.stop, StopReason::ToolCalls);
    assert_eq!(answer.tool_calls.len(), 2);
    assert_eq!(
        answer.tool_calls[0].arguments,
        ToolArguments::Valid(json!({"id": "brochure"}))
    );
    assert_eq!(
        answer.tool_calls[1].arguments,
        ToolArguments::Valid(json!({}))
    );

    // spec `ChatCompletionResponseMessage.refusal`, finish_reason length and content_filter.
    let mut refusal = official_answer("");
    refusal["choices"][0]["message"] = json!({"role": "assistant", "content": null,
                                              "refusal": "I can't help with that."});
    assert_eq!(
        parse_response(refusal.to_string().as_bytes()).unwrap().stop,
        StopReason::Refused
    );
    for (reason, stop) in [
        ("length", StopReason::Length),
        ("content_filter", StopReason::Refused),
    ] {
        let mut answer = official_answer("{\"messages\":[\"cut");
        answer["choices"][0]["finish_reason"] = json!(reason);
        assert_eq!(
            parse_response(answer.to_string().as_bytes()).unwrap().stop,
            stop,
            "{reason}"
        );
    }
}

#[test]
fn openai_compatible_tool_calls_null_is_no_calls() {
    let mut answer = official_answer(VALID_REPLY);
    answer["choices"][0]["message"]["tool_calls"] = Value::Null;
    let parsed = parse_response(answer.to_string().as_bytes()).expect("tool_calls: null parses");
    assert!(parsed.tool_calls.is_empty());
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
}

#[test]
fn openai_compatible_absent_usage_counts_zero() {
    let mut answer = official_answer(VALID_REPLY);
    answer.as_object_mut().unwrap().remove("usage");
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parses without usage");
    assert_eq!(parsed.usage.total(), 0);
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
}

#[test]
fn openai_compatible_content_null_with_tool_calls_parses() {
    let mut answer = official_answer("");
    answer["choices"][0]["message"] = json!({
        "role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "send_flow", "arguments": "{\"id\":\"brochure\"}"}}]
    });
    answer["choices"][0]["finish_reason"] = json!("tool_calls");
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parses");
    assert_eq!(parsed.output, None);
    assert_eq!(parsed.tool_calls.len(), 1);
    assert_eq!(parsed.stop, StopReason::ToolCalls);
}

#[test]
fn openai_reasoning_effort_goes_as_reasoning_effort_to_the_models_that_take_it() {
    use crate::model::reasoning::Effort;
    for (name, effort) in [
        ("gpt-5-mini", Effort::Minimal),
        ("gpt-5.4-mini", Effort::High),
        ("o4-mini", Effort::Low),
    ] {
        let provider = model(name, "http://localhost").with_reasoning_effort(Some(effort));
        for (i, step) in real_steps().iter().enumerate() {
            let body = provider.request_body(step);
            assert_eq!(body["reasoning_effort"], json!(effort.as_str()), "{name}");
            let problems = request_problems(&body);
            assert!(problems.is_empty(), "{name} step {i}: {problems:?}");
        }
    }
    // Unset sends nothing; a chat model is never sent one (the start refuses it first).
    let body = model("gpt-5-mini", "http://localhost").request_body(&real_steps()[0]);
    assert!(body.get("reasoning_effort").is_none());
    let body = model("gpt-4.1-mini", "http://localhost")
        .with_reasoning_effort(Some(Effort::Low))
        .request_body(&real_steps()[0]);
    assert!(body.get("reasoning_effort").is_none());
    // What the API refuses: minimal on GPT-5.1 and later, any effort on a chat model.
    let mut wrong = model("gpt-5.4-mini", "http://localhost").request_body(&real_steps()[0]);
    wrong["reasoning_effort"] = json!("minimal");
    assert!(!request_problems(&wrong).is_empty());
    wrong["model"] = json!("gpt-4.1-mini");
    wrong["reasoning_effort"] = json!("low");
    assert!(!request_problems(&wrong).is_empty());
}
