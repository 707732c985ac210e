//! Ollama's native chat endpoint (`POST {base}/api/chat`, no streaming).
//!
//! Invariants:
//! - Ollama ignores any tool choice, so the final step (`ToolChoice::None`) omits the tools.
//! - The AgentReply schema goes in `format` on every step; Ollama constrains decoding to it.
//! - Tool call arguments arrive as JSON objects; calls carry no id on older servers, so one is
//!   made from the call's position.
//! - Ollama has no API key: a base URL is all it needs.

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{self, temperature_json};
use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolChoice, Usage,
};

/// The default `OLLAMA_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "http://localhost:11434";

/// A model served by Ollama.
pub struct OllamaModel {
    /// `ollama:<model>`, as recorded on the turn.
    id: String,
    /// The model tag, which may itself hold a colon (`llama3.1:8b`).
    model: String,
    /// `{base}/api/chat`.
    url: String,
    client: reqwest::Client,
}

impl OllamaModel {
    pub fn new(model: &str, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "OLLAMA_BASE_URL")?;
        Ok(Self {
            id: format!("ollama:{model}"),
            model: model.to_owned(),
            url: format!("{base}/api/chat"),
            client: transport::build_client()?,
        })
    }

    pub(crate) fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for message in &request.messages {
            append_message(&mut messages, message);
        }
        let mut body = json!({
            "model": self.model,
            "stream": false,
            "messages": messages,
            "format": request.output_schema,
            "options": {
                "temperature": temperature_json(request.temperature),
                "num_predict": request.max_output_tokens,
            },
        });
        if request.tool_choice == ToolChoice::Auto && !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        },
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        body
    }
}

fn append_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text } => out.push(json!({"role": "user", "content": text})),
        Message::Assistant { text, tool_calls } => {
            let mut assistant = json!({
                "role": "assistant",
                "content": text.as_deref().unwrap_or(""),
            });
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments.to_replay_value(),
                            },
                        })
                    })
                    .collect();
                assistant["tool_calls"] = Value::Array(calls);
            }
            out.push(assistant);
        }
        Message::ToolResults { results } => {
            out.extend(results.iter().map(|result| {
                json!({
                    "role": "tool",
                    "tool_name": result.name,
                    "content": result.content.to_string(),
                })
            }));
        }
    }
}

#[derive(Deserialize)]
struct ChatResponse {
    message: WireMessage,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: u64,
    #[serde(default)]
    eval_count: u64,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: String,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// Reads an `/api/chat` answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: ChatResponse = serde_json::from_slice(bytes)
        .map_err(|_| ModelError::Malformed("Ollama response is not a chat object".into()))?;
    let tool_calls: Vec<ToolCall> = parsed
        .message
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| ToolCall {
            id: call.id.unwrap_or_else(|| format!("call_{index}")),
            name: call.function.name,
            arguments: match call.function.arguments {
                Value::Null => ToolArguments::from_json_text(""),
                other => ToolArguments::from_json_value(other),
            },
        })
        .collect();
    let stop = if parsed.done_reason.as_deref() == Some("length") {
        StopReason::Length
    } else if !tool_calls.is_empty() {
        StopReason::ToolCalls
    } else {
        StopReason::Completed
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
        },
        stop,
    })
}

#[async_trait]
impl Model for OllamaModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.request_body(request);
        let bytes =
            transport::post_json(&self.client, "ollama", &self.url, &HeaderMap::new(), &body)
                .await?;
        parse_response(&bytes)
    }
}
