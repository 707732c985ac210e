//! Ollama's native chat endpoint (`POST {base}/api/chat`, no streaming).
//!
//! Invariants:
//! - Ollama ignores any tool choice, so the final step (`ToolChoice::None`) omits the tools.
//! - An answer may hold several `tool_calls` (012); each is answered by its own `tool` message.
//! - The AgentReply schema goes in `format` only on a step that offers no tools: Ollama
//!   constrains every token to `format`, so a model given both could never emit a tool call.
//!   The final, tool-less step carries it.
//! - Tool call arguments arrive as JSON objects. A call's `id`, when Ollama sends one, is echoed
//!   on the replayed call and as the result's `tool_call_id`; older servers send none, so one is
//!   made from the call's position and never sent back.
//! - Ollama has no API key: a base URL is all it needs.

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, Endpoint, HttpModel, Wire, WireToolCall};
use super::transport::{self, null_as_default};
use super::{
    Message, ModelError, ModelRequest, ModelResponse, StopReason, ToolChoice, Usage, wire_schema,
};

/// The prefix of an id made from a call's position, for a call Ollama sent without one. Such an
/// id is ours, not Ollama's: it is never sent back.
const POSITIONAL_ID_PREFIX: &str = "ollama-call-";

/// The default `OLLAMA_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434";

/// A model served by Ollama.
pub type OllamaModel = HttpModel<Ollama>;

/// Ollama's `/api/chat` wire format.
pub struct Ollama;

impl OllamaModel {
    /// Posts to `{base}/api/chat`, with no credential. `model` is the tag, which may itself hold
    /// a colon (`llama3.1:8b`).
    pub fn new(model: &str, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "OLLAMA_BASE_URL")?;
        let url = format!("{base}/api/chat");
        let endpoint = Endpoint::new("ollama", model, model, url, HeaderMap::new())?;
        Ok(HttpModel::from_parts(endpoint, Ollama, parse_response))
    }
}

impl Wire for Ollama {
    fn request_body(&self, endpoint: &Endpoint, request: &ModelRequest) -> Value {
        let mut options = json!({"num_predict": request.max_output_tokens});
        if let Some(temperature) = endpoint.temperature(request) {
            options["temperature"] = temperature;
        }
        let mut body = json!({
            "model": endpoint.model,
            "stream": false,
            "messages": http::chat_messages(request, append_message),
            "options": options,
        });
        let offers_tools = request.tool_choice == ToolChoice::Auto && !request.tools.is_empty();
        if !offers_tools && endpoint.capabilities.structured_output {
            body["format"] = wire_schema::for_ollama(&request.output_schema);
        }
        if offers_tools {
            let tools = request.tools.iter().map(http::function_tool).collect();
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

fn append_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text } => out.push(json!({"role": "user", "content": text})),
        // /api/chat: a message's `images` holds base64 strings.
        Message::Images { images } => out.push(json!({
            "role": "user",
            "content": "",
            "images": images.iter().map(|image| image.base64()).collect::<Vec<_>>(),
        })),
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut assistant = json!({
                "role": "assistant",
                "content": text.as_deref().unwrap_or(""),
            });
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        let mut replayed = json!({
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments.to_replay_value(),
                            },
                        });
                        if let Some(id) = ollama_id(&call.id) {
                            replayed["id"] = json!(id);
                        }
                        replayed
                    })
                    .collect();
                assistant["tool_calls"] = Value::Array(calls);
            }
            out.push(assistant);
        }
        Message::ToolResults { results } => {
            out.extend(results.iter().map(|result| {
                let mut message = json!({
                    "role": "tool",
                    "tool_name": result.name,
                    "content": result.content.to_string(),
                });
                if let Some(id) = ollama_id(&result.call_id) {
                    message["tool_call_id"] = json!(id);
                }
                message
            }));
        }
    }
}

/// The call id Ollama gave, or `None` for one we made from the call's position.
fn ollama_id(id: &str) -> Option<&str> {
    (!id.starts_with(POSITIONAL_ID_PREFIX) && !id.is_empty()).then_some(id)
}

#[derive(Deserialize)]
struct ChatResponse {
    message: WireMessage,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    prompt_eval_count: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    eval_count: u64,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default, deserialize_with = "null_as_default")]
    content: String,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCall>,
}

/// Reads an `/api/chat` answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: ChatResponse = http::read_answer(bytes, "Ollama response is not a chat object")?;
    let tool_calls = http::calls(parsed.message.tool_calls, |index, id| {
        id.filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("{POSITIONAL_ID_PREFIX}{index}"))
    });
    let stop = if parsed.done_reason.as_deref() == Some("length") {
        StopReason::Length
    } else {
        http::finished(&tool_calls)
    };
    let content = parsed.message.content;
    Ok(ModelResponse {
        tool_calls,
        output: (!content.trim().is_empty()).then_some(content),
        // Ollama reports no cache figures.
        usage: Usage {
            input_tokens: parsed.prompt_eval_count,
            output_tokens: parsed.eval_count,
            cached_tokens: 0,
            cache_write_tokens: 0,
        },
        stop,
        echo: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::MockServer;

    use super::*;
    use crate::model::ToolArguments;
    use crate::model::test_support::*;

    fn model_for(server: &MockServer) -> OllamaModel {
        OllamaModel::new("llama3.1:8b", &format!("{}/", server.uri())).expect("model")
    }

    /// Where the model posts (no header is checked).
    const AT: (&str, &[(&str, &str)]) = ("/api/chat", &[]);

    fn chat(message: Value, done_reason: &str) -> Value {
        json!({
            "model": "llama3.1:8b",
            "created_at": "2026-01-01T00:00:00Z",
            "message": message,
            "done": true,
            "done_reason": done_reason,
            "total_duration": 1,
            "prompt_eval_count": 640,
            "eval_count": 70
        })
    }

    fn final_answer() -> Value {
        chat(json!({"role": "assistant", "content": VALID_REPLY}), "stop")
    }

    #[tokio::test]
    async fn ollama_tool_step_sends_tools_and_options_without_format_or_streaming() {
        let (body, _server) = only_first_step_body(AT, final_answer(), model_for).await;
        assert_eq!(
            body,
            json!({
                "model": "llama3.1:8b",
                "stream": false,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": CONTACT_TEXT}
                ],
                "tools": [{
                    "type": "function",
                    "function": {
                        "name": "send_flow",
                        "description": "Sends the course brochure.",
                        "parameters": send_flow_tool().parameters
                    }
                }],
                "options": {"temperature": 0.3, "num_predict": 400}
            })
        );
    }

    #[tokio::test]
    async fn system_4_ollama_final_step_omits_the_tools() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(&model_for(&server), &first_step(ToolChoice::None), &server).await;
        assert!(body.get("tools").is_none(), "{body}");
        assert_eq!(body["format"], agent_reply_schema());
    }

    #[tokio::test]
    async fn ollama_replays_tool_calls_as_objects_and_one_tool_message_per_result() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(&model_for(&server), &second_step(), &server).await;
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": CONTACT_TEXT},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_a",
                     "function": {"name": "send_flow", "arguments": {"id": "brochure"}}},
                    {"id": "call_b", "function": {"name": "get_contact", "arguments": {}}}
                ]},
                {"role": "tool", "tool_name": "send_flow", "tool_call_id": "call_a",
                 "content": "{\"staged\":true}"},
                {"role": "tool", "tool_name": "get_contact", "tool_call_id": "call_b",
                 "content": "{\"error\":\"invalid_arguments\"}"}
            ])
        );
    }

    #[tokio::test]
    async fn ollama_final_answer_reads_output_and_eval_counts_as_usage() {
        let server = answering_at(AT, 200, final_answer()).await;

        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(
            response,
            final_response(Usage {
                input_tokens: 640,
                output_tokens: 70,
                cached_tokens: 0,
                cache_write_tokens: 0,
            })
        );
    }

    #[tokio::test]
    async fn ollama_tool_calls_carry_object_arguments_and_get_ids_by_position() {
        let response = parsed(
            parse_response,
            &chat(
                json!({"role": "assistant", "content": "", "tool_calls": [
                    {"function": {"name": "send_flow", "arguments": {"id": "brochure"}}},
                    {"function": {"name": "send_flow", "arguments": 7}}
                ]}),
                "stop",
            ),
        );

        assert_eq!(response.stop, StopReason::ToolCalls);
        assert_eq!(response.output, None);
        assert_eq!(
            response.tool_calls,
            vec![
                call(
                    "ollama-call-0",
                    "send_flow",
                    ToolArguments::Valid(json!({"id": "brochure"}))
                ),
                call(
                    "ollama-call-1",
                    "send_flow",
                    ToolArguments::Invalid { length: 1 }
                ),
            ]
        );
    }

    #[tokio::test]
    async fn ollama_done_reason_length_is_length() {
        let answer = chat(json!({"role": "assistant", "content": "{\"mess"}), "length");
        let response = parsed(parse_response, &answer);
        assert_eq!(response.stop, StopReason::Length);
    }

    #[tokio::test]
    async fn c5_ollama_unknown_model_is_an_http_error_without_its_message() {
        let server = answering_at(
            AT,
            404,
            json!({"error": "model \"llama3.1:8b\" not found, try pulling it first"}),
        )
        .await;

        let err = first_step_error(&model_for(&server)).await;

        assert_eq!(err, http_error(404, "unknown"));
        assert_eq!(received_bodies(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn ollama_malformed_body_is_malformed() {
        let server = answering_at(AT, 200, json!({"done": true})).await;

        let err = first_step_error(&model_for(&server)).await;

        assert!(matches!(err, ModelError::Malformed(_)), "{err:?}");
    }
}
