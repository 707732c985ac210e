//! Ollama's native chat endpoint, checked against Ollama's documentation and request types.
//! Sources, named per rule: "api.md" is docs/api.md, "Generate a chat completion", of
//! github.com/ollama/ollama (snapshot of 2026-08-21); "types.go" is `api/types.go` of the same
//! snapshot (`ChatRequest`, `Message`, `ToolCall`), the server's own request types.

use std::sync::Arc;

use serde_json::{Value, json};
use wiremock::MockServer;

use super::{
    RefusesWhatTheApiRefuses, assert_real_steps_answered, assert_real_steps_conform,
    assert_route_turn_conforms, elements, missing_keys, real_steps, refusing_fake_at, unknown_keys,
};
use crate::model::ollama::{OllamaModel, parse_response};
use crate::model::reply::agent_reply_schema;
use crate::model::test_support::*;
use crate::model::{Message, Model, StopReason, ToolArguments, ToolCall, ToolChoice};

/// types.go `ChatRequest`: every documented body field.
const REQUEST_FIELDS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "format",
    "keep_alive",
    "tools",
    "options",
    "think",
    "truncate",
    "shift",
    "logprobs",
    "top_logprobs",
];

/// Everything the documentation says is wrong with an `/api/chat` body, for our use of it.
pub(crate) fn request_problems(body: &Value) -> Vec<String> {
    let mut problems = unknown_keys(body, REQUEST_FIELDS, "body");
    problems.extend(missing_keys(body, &["model"], "body"));
    // api.md: "streaming can be disabled using stream: false"; we read one object.
    if body["stream"] != json!(false) {
        problems.push("stream: must be false for a single response object".into());
    }
    // api.md, "Structured outputs" and "Tool calling": `format` constrains the whole answer to
    // the schema, so a step that offers tools and sets `format` can never produce a tool call.
    // (Ollama itself answers 200 and simply never calls a tool; this fake makes that loud.)
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    if !tools.is_empty() && body.get("format").is_some() {
        problems.push("format: set on a step that offers tools; no tool call can be made".into());
    }
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        problems.extend(unknown_keys(tool, &["type", "function"], &at));
        if tool["type"] != json!("function") {
            problems.push(format!("{at}.type: function"));
        }
        problems.extend(unknown_keys(
            &tool["function"],
            &["name", "description", "parameters"],
            &format!("{at}.function"),
        ));
    }
    // types.go `Message`; api.md lists role system, user, assistant or tool.
    for (i, message) in elements(&body["messages"]) {
        let at = format!("messages[{i}]");
        problems.extend(unknown_keys(
            message,
            &[
                "role",
                "content",
                "thinking",
                "images",
                "tool_calls",
                "tool_name",
                "tool_call_id",
            ],
            &at,
        ));
        if !matches!(
            message["role"].as_str(),
            Some("system" | "user" | "assistant" | "tool")
        ) {
            problems.push(format!("{at}.role: system, user, assistant or tool"));
        }
        if !message["content"].is_string() {
            problems.push(format!("{at}.content: a string"));
        }
        // api.md "Chat request": `images` (optional), a list of base64-encoded images.
        if let Some(images) = message.get("images") {
            let all_base64 = images.as_array().is_some_and(|list| {
                list.iter().all(|i| {
                    i.as_str()
                        .is_some_and(|s| !s.is_empty() && !s.starts_with("data:"))
                })
            });
            if !all_base64 {
                problems.push(format!("{at}.images: a list of base64 strings"));
            }
        }
        // types.go `ToolCall`: optional id, function {index, name, arguments as an object}.
        for (j, call) in elements(&message["tool_calls"]) {
            let at = format!("{at}.tool_calls[{j}]");
            problems.extend(unknown_keys(call, &["id", "function"], &at));
            if !call["function"]["arguments"].is_object() {
                problems.push(format!("{at}.function.arguments: an object"));
            }
        }
    }
    // api.md: `options` holds Modelfile parameters such as temperature and num_predict.
    if let Some(options) = body.get("options") {
        if let Some(t) = options.get("temperature")
            && !t.is_number()
        {
            problems.push("options.temperature: a number".into());
        }
        if let Some(n) = options.get("num_predict")
            && !n.is_i64()
        {
            problems.push("options.num_predict: an integer".into());
        }
    }
    problems
}

/// Ollama's error body: `{"error": "<message>"}` (api.md, errors).
fn error_body(problems: &[String]) -> Value {
    json!({"error": problems.join("; ")})
}

/// The documented non-streaming chat response (api.md, "Chat request (No streaming)").
fn official_chat(message: Value, done_reason: &str) -> Value {
    json!({
        "model": "llama3.1:8b",
        "created_at": "2026-12-01T10:00:00.000000Z",
        "message": message,
        "done_reason": done_reason,
        "done": true,
        "total_duration": 885_095_291u64,
        "load_duration": 3_753_500,
        "prompt_eval_count": 122,
        "prompt_eval_duration": 328_493_000,
        "eval_count": 33,
        "eval_duration": 552_222_000
    })
}

#[test]
fn spec_020_ollama_an_image_is_a_base64_string_in_a_messages_images() {
    let body = model("http://localhost").request_body(&image_step());
    let problems = request_problems(&body);
    assert!(problems.is_empty(), "{problems:?}");
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        json!({"role": "user", "content": "", "images": [image_base64()]})
    );
    let mut wrong = body.clone();
    let at = body["messages"].as_array().unwrap().len() - 1;
    wrong["messages"][at]["images"] = json!([format!("data:image/png;base64,{}", image_base64())]);
    assert!(!request_problems(&wrong).is_empty());
}

async fn refusing_fake(reply: &str) -> MockServer {
    let fake = RefusesWhatTheApiRefuses {
        check: request_problems,
        error_body,
        ok: official_chat(json!({"role": "assistant", "content": reply}), "stop"),
    };
    refusing_fake_at("/api/chat", fake).await
}

fn model(base: &str) -> OllamaModel {
    OllamaModel::new("llama3.1:8b", base).expect("model")
}

#[test]
fn ollama_requests_conform_field_by_field() {
    let provider = model("http://localhost:11434");
    assert_real_steps_conform(
        "llama3.1:8b",
        |step| provider.request_body(step),
        request_problems,
    );
}

#[test]
fn ollama_sends_format_only_on_the_step_without_tools() {
    let provider = model("http://localhost:11434");
    let tool_step = provider.request_body(&real_steps()[0]);
    assert!(tool_step.get("format").is_none(), "{tool_step}");
    assert!(tool_step["tools"].is_array());
    let final_step = provider.request_body(&real_steps()[2]);
    assert!(final_step.get("tools").is_none());
    assert_eq!(&final_step["format"], &**agent_reply_schema());
}

#[test]
fn ollama_tool_results_are_paired_by_the_call_id_ollama_sent() {
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(Message::Assistant {
        text: None,
        tool_calls: vec![ToolCall {
            id: "call_7f3a".into(),
            name: "send_flow".into(),
            arguments: ToolArguments::Valid(json!({"id": "brochure"})),
        }],
        echo: Default::default(),
    });
    request.messages.push(results(vec![ok_result(
        "call_7f3a",
        "send_flow",
        json!({"staged": true}),
    )]));
    let body = model("http://localhost:11434").request_body(&request);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["id"],
        json!("call_7f3a")
    );
    assert_eq!(body["messages"][3]["tool_call_id"], json!("call_7f3a"));
    assert_eq!(body["messages"][3]["tool_name"], json!("send_flow"));
    assert!(request_problems(&body).is_empty());

    // A call Ollama sent without an id gets a positional one, which is never sent back.
    let answer = official_chat(
        json!({"role": "assistant", "content": "",
               "tool_calls": [{"function": {"name": "send_flow", "arguments": {"id": "brochure"}}}]}),
        "stop",
    );
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(calls_made(parsed.tool_calls.clone()));
    request.messages.push(results(vec![ok_result(
        &parsed.tool_calls[0].id,
        "send_flow",
        json!({"staged": true}),
    )]));
    let body = model("http://localhost:11434").request_body(&request);
    assert!(
        body["messages"][2]["tool_calls"][0].get("id").is_none(),
        "{body}"
    );
    assert!(body["messages"][3].get("tool_call_id").is_none(), "{body}");
}

#[tokio::test]
async fn ollama_turn_passes_a_fake_that_refuses_what_cannot_work() {
    let server = refusing_fake(VALID_REPLY).await;
    let provider = model(&server.uri());
    assert_real_steps_answered(&provider, "llama3.1:8b").await;
    // The old request (format beside tools) is refused by the fake.
    let mut old = provider.request_body(&real_steps()[0]);
    old["format"] = (**agent_reply_schema()).clone();
    let refused = reqwest::Client::new()
        .post(format!("{}/api/chat", server.uri()))
        .json(&old)
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 400);
}

#[tokio::test]
async fn ollama_turn_through_the_http_route_passes_a_fake_that_refuses_what_cannot_work() {
    let server = refusing_fake(&super::route::route_reply()).await;
    let provider: Arc<dyn Model> = Arc::new(model(&server.uri()));

    assert_route_turn_conforms(provider, &server, request_problems).await;
}

#[test]
fn ollama_official_response_shapes_parse() {
    // api.md "Chat request (with tools)" response shape: empty content, tool calls with
    // object arguments, no ids.
    let calls = official_chat(
        json!({"role": "assistant", "content": "",
        "tool_calls": [
            {"function": {"name": "send_flow", "arguments": {"id": "brochure"}}},
            {"id": "call_x1", "function": {"index": 1, "name": "get_contact", "arguments": {}}}
        ]}),
        "stop",
    );
    let parsed = parse_response(calls.to_string().as_bytes()).expect("parse");
    assert_eq!(parsed.stop, StopReason::ToolCalls);
    assert_eq!(parsed.tool_calls.len(), 2);
    assert_eq!(parsed.tool_calls[1].id, "call_x1");
    assert_eq!(
        (parsed.usage.input_tokens, parsed.usage.output_tokens),
        (122, 33)
    );
    let cut = official_chat(json!({"role": "assistant", "content": "{\"mess"}), "length");
    assert_eq!(
        parse_response(cut.to_string().as_bytes()).unwrap().stop,
        StopReason::Length
    );
}

#[test]
fn ollama_compatible_nulls_and_absent_counts_parse() {
    let answer = json!({
        "model": "llama3.1:8b", "done": true,
        "message": {"role": "assistant", "content": null, "tool_calls": null}
    });
    let parsed = parse_response(answer.to_string().as_bytes()).expect("parse");
    assert!(parsed.tool_calls.is_empty());
    assert_eq!(parsed.usage.total(), 0);
    assert_eq!(parsed.output, None);
}
