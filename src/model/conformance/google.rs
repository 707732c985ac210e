//! Google Gemini `generateContent`, checked against Google's published request types and
//! documentation, read 2026-12-01. Sources, named per rule: "SDK types" is `google/genai/types.py`
//! of the official Python SDK (github.com/googleapis/python-genai, generated from the API's
//! discovery document; snapshot of 2026-08-21, commit 66807187), in its REST (camelCase)
//! spelling; "API reference" is ai.google.dev/api/generate-content (`GenerateContentRequest`,
//! `GenerationConfig.responseJsonSchema`: "only the following properties are supported");
//! "function calling guide" is ai.google.dev/gemini-api/docs/function-calling; "structured
//! output guide" is ai.google.dev/gemini-api/docs/structured-output (structured output beside
//! function calling from Gemini 3 on); "thinking guide" is ai.google.dev/gemini-api/docs/thinking
//! (`thinkingBudget` on 2.5, `thinkingLevel` on 3 and later, never both); "thought signatures"
//! is ai.google.dev/gemini-api/docs/thought-signatures (Gemini 3 validates the signature of a
//! function call of the current turn); "errors" is ai.google.dev/gemini-api/docs/troubleshooting.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{RefusesWhatTheApiRefuses, elements, missing_keys, schema_keywords, unknown_keys};
use crate::ids::Secret;
use crate::model::google::{GoogleModel, parse_response};
use crate::model::reasoning::Effort;
use crate::model::reply::agent_reply_schema;
use crate::model::test_support::*;
use crate::model::wire_schema::GOOGLE_KEYWORDS;
use crate::model::{
    Message, Model, ModelRequest, ProviderEcho, StopReason, ToolArguments, ToolCall, ToolChoice,
};

/// SDK types / API reference `GenerateContentRequest`: every documented body field.
const REQUEST_FIELDS: &[&str] = &[
    "model",
    "contents",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
];

/// SDK types `GenerationConfig`, without the fields it marks "not supported in Gemini API".
const GENERATION_FIELDS: &[&str] = &[
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "imageConfig",
    "mediaResolution",
];

/// SDK types `Part`: the data fields, exactly one of which a part holds.
const PART_DATA: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
];

/// SDK types `Part`: the fields beside the data.
const PART_META: &[&str] = &[
    "thought",
    "thoughtSignature",
    "videoMetadata",
    "mediaResolution",
    "partMetadata",
];

/// Vision guide ("Supported image formats").
const IMAGE_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/heic",
    "image/heif",
];

/// Gemini 3 and later (structured output guide, thinking guide, thought signatures).
fn third_generation(model: &str) -> bool {
    ["gemini-3", "gemini-4", "gemini-5"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// Models without thinking (thinking guide: from 2.5 on).
fn lacks_thinking(model: &str) -> bool {
    model.starts_with("gemini-2.0") || model.starts_with("gemini-1.5")
}

/// The Pro models of Gemini 3 take thinking levels low and high only (thinking guide).
fn takes_level(model: &str, level: &str) -> bool {
    if model.contains("-pro") {
        matches!(level, "LOW" | "HIGH")
    } else {
        matches!(level, "MINIMAL" | "LOW" | "MEDIUM" | "HIGH")
    }
}

/// API reference `GenerationConfig.responseJsonSchema`: the listed keywords, `enum` for strings
/// and numbers, and a `$ref` node with no other keyword except `$`-prefixed ones.
pub(crate) fn schema_keyword_allowed(keyword: &str, value: &Value) -> bool {
    match keyword {
        "enum" => value
            .as_array()
            .is_some_and(|v| v.iter().all(|x| x.is_string() || x.is_number())),
        _ => GOOGLE_KEYWORDS.contains(&keyword),
    }
}

fn ref_siblings(schema: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if obj.contains_key("$ref") && obj.keys().any(|k| !k.starts_with('$')) {
        problems.push(format!("{at}: $ref allows no sibling except $-keywords"));
    }
    for key in ["properties", "$defs"] {
        for (name, child) in obj
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            ref_siblings(child, &format!("{at}.{name}"), problems);
        }
    }
    if let Some(items) = obj.get("items") {
        ref_siblings(items, &format!("{at}.items"), problems);
    }
}

/// SDK types `FunctionDeclaration.name`: starts with a letter or an underscore; letters,
/// digits, underscores, dots, colons and dashes; at most 128.
fn valid_function_name(name: &Value) -> bool {
    name.as_str().is_some_and(|n| {
        (1..=128).contains(&n.len())
            && n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
    })
}

fn part_problems(part: &Value, role: &str, at: &str) -> Vec<String> {
    let mut allowed: Vec<&str> = PART_DATA.to_vec();
    allowed.extend_from_slice(PART_META);
    let mut problems = unknown_keys(part, &allowed, at);
    let data: Vec<&str> = PART_DATA
        .iter()
        .copied()
        .filter(|k| part.get(*k).is_some())
        .collect();
    if data.len() != 1 {
        problems.push(format!("{at}: exactly one data field (SDK types Part)"));
        return problems;
    }
    match data[0] {
        "text" if !part["text"].is_string() => problems.push(format!("{at}.text: a string")),
        "inlineData" => {
            let blob = &part["inlineData"];
            let at = format!("{at}.inlineData");
            problems.extend(unknown_keys(
                blob,
                &["mimeType", "data", "displayName"],
                &at,
            ));
            problems.extend(missing_keys(blob, &["mimeType", "data"], &at));
            if !blob["mimeType"]
                .as_str()
                .is_some_and(|m| IMAGE_TYPES.contains(&m))
            {
                problems.push(format!("{at}.mimeType: a supported image type"));
            }
            if blob["data"]
                .as_str()
                .is_none_or(|d| d.is_empty() || d.starts_with("data:"))
            {
                problems.push(format!("{at}.data: base64 bytes, no data: prefix"));
            }
        }
        "functionCall" => {
            let call = &part["functionCall"];
            let at = format!("{at}.functionCall");
            problems.extend(unknown_keys(call, &["id", "name", "args"], &at));
            problems.extend(missing_keys(call, &["name"], &at));
            if call.get("args").is_some_and(|a| !a.is_object()) {
                problems.push(format!("{at}.args: an object"));
            }
            if role != "model" {
                problems.push(format!("{at}: only in a model content"));
            }
        }
        "functionResponse" => {
            let response = &part["functionResponse"];
            let at = format!("{at}.functionResponse");
            problems.extend(unknown_keys(
                response,
                &[
                    "id",
                    "name",
                    "response",
                    "parts",
                    "willContinue",
                    "scheduling",
                ],
                &at,
            ));
            problems.extend(missing_keys(response, &["name", "response"], &at));
            if !response["response"].is_object() {
                problems.push(format!("{at}.response: a JSON object"));
            }
            if role != "user" {
                problems.push(format!("{at}: only in a user content"));
            }
        }
        _ => {}
    }
    problems
}

/// Everything the documentation says is wrong with a `generateContent` body for `model`.
pub(crate) fn request_problems_for(model: &str, body: &Value) -> Vec<String> {
    let mut problems = unknown_keys(body, REQUEST_FIELDS, "body");
    problems.extend(missing_keys(body, &["contents"], "body"));

    if let Some(system) = body.get("systemInstruction") {
        problems.extend(unknown_keys(
            system,
            &["role", "parts"],
            "systemInstruction",
        ));
        for (i, part) in system["parts"].as_array().into_iter().flatten().enumerate() {
            if part.get("text").is_none() {
                problems.push(format!("systemInstruction.parts[{i}]: text only"));
            }
        }
    }

    // SDK types `Content`; function calling guide: each call answered, in order, by a
    // functionResponse of the same name (and id, when the call has one) in the next user turn.
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    if contents.is_empty() {
        problems.push("contents: at least one content".into());
    }
    if contents.first().is_some_and(|c| c["role"] != json!("user")) {
        problems.push("contents[0].role: the conversation starts with the user".into());
    }
    for (i, content) in contents.iter().enumerate() {
        let at = format!("contents[{i}]");
        problems.extend(unknown_keys(content, &["role", "parts"], &at));
        let role = content["role"].as_str().unwrap_or_default();
        if !matches!(role, "user" | "model") {
            problems.push(format!("{at}.role: user or model"));
        }
        let parts = content["parts"].as_array().cloned().unwrap_or_default();
        if parts.is_empty() {
            problems.push(format!("{at}.parts: at least one part"));
        }
        for (j, part) in parts.iter().enumerate() {
            problems.extend(part_problems(part, role, &format!("{at}.parts[{j}]")));
        }
        let calls: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionCall")).collect();
        if calls.is_empty() {
            continue;
        }
        // Thought signatures: Gemini 3 refuses a function call turn whose first call part
        // lacks the signature it was returned with.
        if third_generation(model)
            && parts
                .iter()
                .find(|p| p.get("functionCall").is_some())
                .is_some_and(|p| p.get("thoughtSignature").is_none())
        {
            problems.push(format!(
                "{at}: function call is missing a thought_signature"
            ));
        }
        let next: Vec<Value> = contents
            .get(i + 1)
            .filter(|c| c["role"] == json!("user"))
            .and_then(|c| c["parts"].as_array().cloned())
            .unwrap_or_default();
        let responses: Vec<&Value> = next
            .iter()
            .map_while(|p| p.get("functionResponse"))
            .collect();
        if responses.len() != calls.len() {
            problems.push(format!(
                "{at}: {} function calls, {} function responses first in the next user turn",
                calls.len(),
                responses.len()
            ));
        }
        for (call, response) in calls.iter().zip(&responses) {
            if call["name"] != response["name"] {
                problems.push(format!(
                    "{at}: a function response's name differs from its call's"
                ));
            }
            if call.get("id").is_some() && call.get("id") != response.get("id") {
                problems.push(format!(
                    "{at}: a function response's id differs from its call's"
                ));
            }
            if call.get("id").is_none() && response.get("id").is_some() {
                problems.push(format!(
                    "{at}: a function response names an id its call lacks"
                ));
            }
        }
    }

    // SDK types `Tool` / `FunctionDeclaration`.
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let mut declared = 0;
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        problems.extend(unknown_keys(
            tool,
            &[
                "functionDeclarations",
                "googleSearch",
                "codeExecution",
                "urlContext",
            ],
            &at,
        ));
        for (j, declaration) in elements(&tool["functionDeclarations"]) {
            declared += 1;
            let at = format!("{at}.functionDeclarations[{j}]");
            problems.extend(unknown_keys(
                declaration,
                &[
                    "name",
                    "description",
                    "parameters",
                    "parametersJsonSchema",
                    "response",
                    "responseJsonSchema",
                ],
                &at,
            ));
            if !valid_function_name(&declaration["name"]) {
                problems.push(format!("{at}.name: not a valid function name"));
            }
            if declaration.get("parameters").is_some()
                && declaration.get("parametersJsonSchema").is_some()
            {
                problems.push(format!(
                    "{at}: parameters and parametersJsonSchema exclude each other"
                ));
            }
            if let Some(schema) = declaration.get("parametersJsonSchema")
                && schema["type"] != json!("object")
            {
                problems.push(format!(
                    "{at}.parametersJsonSchema: must describe an object"
                ));
            }
        }
    }
    // SDK types `ToolConfig` / `FunctionCallingConfig`.
    if let Some(config) = body.get("toolConfig") {
        problems.extend(unknown_keys(
            config,
            &["functionCallingConfig", "retrievalConfig"],
            "toolConfig",
        ));
        let calling = &config["functionCallingConfig"];
        problems.extend(unknown_keys(
            calling,
            &["mode", "allowedFunctionNames"],
            "toolConfig.functionCallingConfig",
        ));
        if !matches!(
            calling["mode"].as_str(),
            Some("AUTO" | "ANY" | "NONE" | "VALIDATED")
        ) {
            problems
                .push("toolConfig.functionCallingConfig.mode: AUTO, ANY, NONE or VALIDATED".into());
        }
        if calling.get("allowedFunctionNames").is_some()
            && !matches!(calling["mode"].as_str(), Some("ANY" | "VALIDATED"))
        {
            problems.push("allowedFunctionNames: only with mode ANY".into());
        }
        if declared == 0 {
            problems.push("toolConfig.functionCallingConfig: no function declarations".into());
        }
    }

    // SDK types `GenerationConfig`, API reference `responseJsonSchema`.
    if let Some(config) = body.get("generationConfig") {
        problems.extend(unknown_keys(config, GENERATION_FIELDS, "generationConfig"));
        if let Some(t) = config.get("temperature")
            && !t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t))
        {
            problems.push("generationConfig.temperature: from 0 to 2".into());
        }
        if config
            .get("maxOutputTokens")
            .is_some_and(|n| n.as_u64().is_none_or(|n| n == 0))
        {
            problems.push("generationConfig.maxOutputTokens: a positive integer".into());
        }
        if config.get("responseSchema").is_some() && config.get("responseJsonSchema").is_some() {
            problems.push("responseSchema and responseJsonSchema exclude each other".into());
        }
        let json_mime = config["responseMimeType"] == json!("application/json");
        if let Some(schema) = config.get("responseJsonSchema") {
            if !json_mime {
                problems.push("responseJsonSchema: needs responseMimeType application/json".into());
            }
            if lacks_thinking(model) {
                problems.push(format!("responseJsonSchema: not supported by {model}"));
            }
            for (keyword, value) in schema_keywords(schema) {
                if !schema_keyword_allowed(&keyword, &value) {
                    problems.push(format!(
                        "responseJsonSchema: property '{keyword}' is not supported"
                    ));
                }
            }
            ref_siblings(schema, "responseJsonSchema", &mut problems);
        }
        // Structured output guide: a JSON response beside function declarations from Gemini 3 on.
        if json_mime && declared > 0 && !third_generation(model) {
            problems.push(format!(
                "Function calling with a response mime type: 'application/json' is unsupported by \
                 {model}"
            ));
        }
        if let Some(thinking) = config.get("thinkingConfig") {
            let at = "generationConfig.thinkingConfig";
            problems.extend(unknown_keys(
                thinking,
                &["includeThoughts", "thinkingBudget", "thinkingLevel"],
                at,
            ));
            if lacks_thinking(model) {
                problems.push(format!("{at}: {model} does not think"));
            }
            let budget = thinking.get("thinkingBudget");
            let level = thinking.get("thinkingLevel");
            if budget.is_some() && level.is_some() {
                problems.push(format!("{at}: thinkingBudget and thinkingLevel together"));
            }
            if let Some(level) = level {
                let level = level.as_str().unwrap_or_default();
                if !third_generation(model) {
                    problems.push(format!("{at}.thinkingLevel: not supported by {model}"));
                } else if !takes_level(model, level) {
                    problems.push(format!(
                        "{at}.thinkingLevel: {level} not supported by {model}"
                    ));
                }
            }
            if let Some(budget) = budget {
                if !budget.is_i64() {
                    problems.push(format!("{at}.thinkingBudget: an integer"));
                }
                // SDK types: from Gemini 3.5 on the budget is refused.
                if [
                    "gemini-3.5",
                    "gemini-3.6",
                    "gemini-3.7",
                    "gemini-3.8",
                    "gemini-4",
                ]
                .iter()
                .any(|p| model.starts_with(p))
                {
                    problems.push(format!("{at}.thinkingBudget: not supported by {model}"));
                }
            }
        }
    }
    problems
}

/// Errors: `{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}`.
pub(crate) fn error_body(problems: &[String]) -> Value {
    json!({"error": {"code": 400, "message": problems.join("; "), "status": "INVALID_ARGUMENT"}})
}

/// A `GenerateContentResponse` in the documented shape (SDK types).
fn official_answer(parts: Value, finish_reason: &str) -> Value {
    json!({
        "candidates": [{
            "content": {"parts": parts, "role": "model"},
            "finishReason": finish_reason,
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 1900,
            "cachedContentTokenCount": 1024,
            "candidatesTokenCount": 70,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 2000,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1900}],
            "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 1024}]
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "conformance-response"
    })
}

fn text_answer(text: &str) -> Value {
    official_answer(json!([{"text": text}]), "STOP")
}

const SIGNATURE: &str = "Q29uZm9ybWFuY2UgdGhvdWdodCBzaWduYXR1cmU=";

/// A function call answer, with the thought signature Gemini 3 puts on its first call.
fn call_answer(name: &str, args: Value, id: Option<&str>) -> Value {
    let mut call = json!({"name": name, "args": args});
    if let Some(id) = id {
        call["id"] = json!(id);
    }
    official_answer(
        json!([{"functionCall": call, "thoughtSignature": SIGNATURE}]),
        "STOP",
    )
}

fn model(name: &str, base: &str) -> GoogleModel {
    GoogleModel::new(name, &Secret::new("google-test-key"), base).expect("model")
}

/// The second step as a Gemini 3 model sees it: its calls replayed with their signature.
fn signed_second_step() -> ModelRequest {
    let mut request = second_step();
    if let Some(Message::Assistant { echo, .. }) = request
        .messages
        .iter_mut()
        .find(|m| matches!(m, Message::Assistant { .. }))
    {
        // Ids as the fixture's results pair them; the signature on the first call.
        *echo = ProviderEcho::new(vec![
            json!({"functionCall": {"id": "call_a", "name": "send_flow",
                   "args": {"id": "brochure"}}, "thoughtSignature": SIGNATURE}),
            json!({"functionCall": {"id": "call_b", "name": "get_contact", "args": {}}}),
        ]);
    }
    request
}

fn steps(name: &str) -> Vec<ModelRequest> {
    let tools = super::demo_tenant_tools();
    let real = |mut request: ModelRequest| {
        request.output_schema = Arc::clone(agent_reply_schema());
        request.tools = Arc::clone(&tools);
        request
    };
    let second = if third_generation(name) {
        signed_second_step()
    } else {
        second_step()
    };
    vec![
        real(first_step(ToolChoice::Auto)),
        real(second),
        real(first_step(ToolChoice::None)),
        real(image_step()),
    ]
}

const MODELS: &[&str] = &[
    "gemini-2.5-flash",
    "gemini-2.5-pro",
    "gemini-2.5-flash-lite",
    "gemini-3-flash-preview",
    "gemini-3.1-pro-preview",
    "gemini-3.5-flash",
    "gemini-2.0-flash",
    "gemini-future-9",
];

#[test]
fn google_requests_conform_field_by_field_for_every_model_family() {
    for name in MODELS {
        for operator_temperature in [false, true] {
            let provider = model(name, "https://generativelanguage.googleapis.com/v1beta")
                .with_operator_temperature(operator_temperature);
            for (i, step) in steps(name).iter().enumerate() {
                let body = provider.request_body(step);
                let problems = request_problems_for(name, &body);
                assert!(problems.is_empty(), "{name} step {i}: {problems:?}\n{body}");
            }
        }
    }
}

#[test]
fn google_tool_step_declares_functions_with_auto_mode_and_the_system_instruction() {
    let body = model("gemini-3-flash-preview", "http://localhost")
        .request_body(&first_step(ToolChoice::Auto));
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [{"role": "user", "parts": [{"text": CONTACT_TEXT}]}],
            "tools": [{"functionDeclarations": [{
                "name": "send_flow",
                "description": "Sends the course brochure.",
                "parametersJsonSchema": send_flow_tool().parameters
            }]}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "generationConfig": {
                "maxOutputTokens": 400,
                "responseMimeType": "application/json",
                "responseJsonSchema":
                    crate::model::wire_schema::for_google(&agent_reply_schema_fixture())
            }
        })
    );
}

fn agent_reply_schema_fixture() -> Value {
    crate::model::test_support::agent_reply_schema()
}

#[test]
fn google_reply_step_sets_mode_none_on_gemini_3_and_drops_the_tools_on_gemini_2_5() {
    let request = first_step(ToolChoice::None);
    let three = model("gemini-3-flash-preview", "http://localhost").request_body(&request);
    assert_eq!(
        three["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    assert!(
        three["generationConfig"]
            .get("responseJsonSchema")
            .is_some()
    );
    let two = model("gemini-2.5-flash", "http://localhost").request_body(&request);
    assert!(two.get("tools").is_none() && two.get("toolConfig").is_none());
    assert!(two["generationConfig"].get("responseJsonSchema").is_some());
    // Gemini 2.5's tool steps carry no JSON response type beside the declarations.
    let tool_step =
        model("gemini-2.5-flash", "http://localhost").request_body(&first_step(ToolChoice::Auto));
    assert!(
        tool_step["generationConfig"]
            .get("responseMimeType")
            .is_none()
    );
    assert_eq!(
        tool_step["toolConfig"],
        json!({"functionCallingConfig": {"mode": "AUTO"}})
    );
}

#[test]
fn google_function_results_follow_their_calls_in_order_by_name_and_gemini_id() {
    // The fixture's calls carry ids (`call_a`, `call_b`), which Gemini would have sent.
    let body = model("gemini-2.5-flash", "http://localhost").request_body(&second_step());
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": CONTACT_TEXT}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "call_a", "name": "send_flow", "args": {"id": "brochure"}}},
                {"functionCall": {"id": "call_b", "name": "get_contact", "args": {}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "call_a", "name": "send_flow",
                                      "response": {"output": {"staged": true}}}},
                {"functionResponse": {"id": "call_b", "name": "get_contact",
                                      "response": {"error": {"error": "invalid_arguments"}}}}
            ]}
        ])
    );
    // A call Gemini sent without an id is answered without one.
    let parsed = parse_response(
        official_answer(
            json!([{"functionCall": {"name": "get_contact", "args": {}}}]),
            "STOP",
        )
        .to_string()
        .as_bytes(),
    )
    .expect("parse");
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(Message::Assistant {
        text: None,
        tool_calls: parsed.tool_calls.clone(),
        echo: parsed.echo,
    });
    request.messages.push(results(vec![ok_result(
        &parsed.tool_calls[0].id,
        "get_contact",
        json!({"name": null}),
    )]));
    let body = model("gemini-2.5-flash", "http://localhost").request_body(&request);
    assert!(
        body["contents"][1]["parts"][0]["functionCall"]
            .get("id")
            .is_none()
    );
    assert!(
        body["contents"][2]["parts"][0]["functionResponse"]
            .get("id")
            .is_none()
    );
    assert!(request_problems_for("gemini-2.5-flash", &body).is_empty());
}

#[test]
fn google_thought_signatures_are_sent_back_unchanged_on_the_next_step() {
    let answer = official_answer(
        json!([
            {"functionCall": {"name": "get_contact", "args": {}}, "thoughtSignature": SIGNATURE},
            {"functionCall": {"name": "send_flow", "args": {"id": "brochure"}}}
        ]),
        "STOP",
    );
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.tool_calls.len(), 2);
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(Message::Assistant {
        text: parsed.output.clone(),
        tool_calls: parsed.tool_calls.clone(),
        echo: parsed.echo.clone(),
    });
    request.messages.push(Message::ToolResults {
        results: parsed
            .tool_calls
            .iter()
            .map(|call| crate::model::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: json!({"ok": true}),
                is_error: false,
            })
            .collect(),
    });
    let body = model("gemini-3-flash-preview", "http://localhost").request_body(&request);
    assert_eq!(
        body["contents"][1]["parts"],
        answer["candidates"][0]["content"]["parts"]
    );
    assert!(request_problems_for("gemini-3-flash-preview", &body).is_empty());
    // Without the echo, Gemini 3 refuses the step.
    let mut unsigned = request.clone();
    if let Message::Assistant { echo, .. } = &mut unsigned.messages[1] {
        *echo = ProviderEcho::default();
    }
    let body = model("gemini-3-flash-preview", "http://localhost").request_body(&unsigned);
    assert!(
        request_problems_for("gemini-3-flash-preview", &body)
            .iter()
            .any(|p| p.contains("thought_signature"))
    );
}

#[test]
fn google_an_image_is_an_inline_data_part_in_the_contacts_user_turn() {
    let body = model("gemini-2.5-flash", "http://localhost").request_body(&image_step());
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 1);
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": image_base64()}})
    );
    assert!(model("gemini-2.5-flash", "http://localhost").accepts_images());
    let mut wrong = body.clone();
    wrong["contents"][0]["parts"][1]["inlineData"]["mimeType"] = json!("image/bmp");
    assert!(!request_problems_for("gemini-2.5-flash", &wrong).is_empty());
}

#[test]
fn google_reasoning_effort_is_a_thinking_budget_on_2_5_and_a_thinking_level_from_3_on() {
    let request = first_step(ToolChoice::Auto);
    let two = model("gemini-2.5-flash", "http://localhost")
        .with_reasoning_effort(Some(Effort::Medium))
        .request_body(&request);
    assert_eq!(
        two["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 4096})
    );
    assert!(request_problems_for("gemini-2.5-flash", &two).is_empty());
    let three = model("gemini-3-flash-preview", "http://localhost")
        .with_reasoning_effort(Some(Effort::Minimal))
        .request_body(&request);
    assert_eq!(
        three["generationConfig"]["thinkingConfig"],
        json!({"thinkingLevel": "MINIMAL"})
    );
    assert!(request_problems_for("gemini-3-flash-preview", &three).is_empty());
    // Unset sends nothing.
    let unset = model("gemini-3-flash-preview", "http://localhost").request_body(&request);
    assert!(unset["generationConfig"].get("thinkingConfig").is_none());
    // The fake refuses what the thinking guide refuses.
    let mut both = three.clone();
    both["generationConfig"]["thinkingConfig"]["thinkingBudget"] = json!(1024);
    assert!(!request_problems_for("gemini-3-flash-preview", &both).is_empty());
    let mut level_on_pro = three.clone();
    level_on_pro["generationConfig"]["thinkingConfig"] = json!({"thinkingLevel": "MINIMAL"});
    assert!(!request_problems_for("gemini-3.1-pro-preview", &level_on_pro).is_empty());
}

#[test]
fn google_usage_counts_cached_and_thinking_tokens() {
    let parsed = parse_response(text_answer(VALID_REPLY).to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
    assert_eq!(parsed.stop, StopReason::Completed);
    assert_eq!(parsed.usage.input_tokens, 1900);
    assert_eq!(parsed.usage.cached_tokens, 1024);
    assert_eq!(
        parsed.usage.output_tokens,
        70 + 30,
        "thoughts are billed as output"
    );
}

#[test]
fn google_blocks_and_safety_finishes_are_refused_without_output_or_calls() {
    // A blocked prompt: no candidates, `promptFeedback.blockReason`.
    let blocked = json!({
        "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH"}]},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}
    });
    let parsed = parse_response(blocked.to_string().as_bytes()).expect("parse");
    assert_eq!(
        (parsed.stop, parsed.output.clone()),
        (StopReason::Refused, None)
    );
    assert_eq!(parsed.usage.input_tokens, 12);
    for reason in [
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "LANGUAGE",
        "OTHER",
        "MALFORMED_FUNCTION_CALL",
    ] {
        let answer = official_answer(
            json!([{"text": VALID_REPLY}, {"functionCall": {"name": "get_contact", "args": {}}}]),
            reason,
        );
        let parsed = parse_response(answer.to_string().as_bytes()).expect(reason);
        assert_eq!(parsed.stop, StopReason::Refused, "{reason}");
        assert_eq!(parsed.output, None, "{reason}");
        assert!(parsed.tool_calls.is_empty(), "{reason}");
    }
    let cut = official_answer(json!([{"text": "{\"messages\":"}]), "MAX_TOKENS");
    assert_eq!(
        parse_response(cut.to_string().as_bytes()).unwrap().stop,
        StopReason::Length
    );
}

#[test]
fn google_thought_parts_are_never_output() {
    let answer = official_answer(
        json!([
            {"text": "The contact wants the price; I should check.", "thought": true},
            {"text": VALID_REPLY, "thoughtSignature": SIGNATURE}
        ]),
        "STOP",
    );
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.output.as_deref(), Some(VALID_REPLY));
}

#[test]
fn google_function_calls_parse_with_and_without_ids() {
    let answer = official_answer(
        json!([
            {"functionCall": {"id": "fc_1", "name": "send_flow", "args": {"id": "brochure"}}},
            {"functionCall": {"name": "get_contact"}}
        ]),
        "STOP",
    );
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.stop, StopReason::ToolCalls);
    assert_eq!(
        parsed.tool_calls,
        vec![
            ToolCall {
                id: "fc_1".into(),
                name: "send_flow".into(),
                arguments: ToolArguments::Valid(json!({"id": "brochure"})),
            },
            ToolCall {
                id: "gemini-call-1".into(),
                name: "get_contact".into(),
                arguments: ToolArguments::Valid(json!({})),
            },
        ]
    );
    // No signature: nothing to echo.
    assert!(parsed.echo.is_empty());
    let err = parse_response(br#"{"candidates": []}"#).expect_err("no candidates");
    assert!(
        matches!(err, crate::model::ModelError::Malformed(_)),
        "{err:?}"
    );
}

/// The turns through the HTTP route against a fake that refuses what Gemini refuses, and
/// the model name check.
mod turns;
