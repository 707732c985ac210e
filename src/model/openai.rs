//! OpenAI Chat Completions, and every server that speaks it (vLLM, Groq, OpenRouter…) through
//! `OPENAI_BASE_URL`.
//!
//! Invariants:
//! - The structured output (`response_format: json_schema`, strict) is asked for on every step.
//! - Tools go out strict, with `tool_choice: "auto"` and `parallel_tool_calls: false`
//!   (structured outputs and parallel calls do not mix). On the final step
//!   (`ToolChoice::None`) tools are **omitted**, not refused with `tool_choice: "none"`: several
//!   compatible servers ignore `tool_choice` and would still call a tool.
//! - A call's `arguments` arrive as JSON text that may be anything; only an object is valid, and
//!   an invalid one keeps only its length.
//! - A refusal's text is never returned as output: it is not an AgentReply.

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{self, temperature_json};
use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolChoice, Usage,
};
use crate::ids::Secret;

/// The default `OPENAI_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A model behind an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiModel {
    /// `openai:<model>`, as recorded on the turn.
    id: String,
    /// The model name sent on the wire.
    model: String,
    /// `{base}/chat/completions`.
    url: String,
    /// The `Authorization: Bearer` header, marked sensitive.
    headers: HeaderMap,
    client: reqwest::Client,
}

impl OpenAiModel {
    /// `base_url` is `OPENAI_BASE_URL` (with or without a trailing slash).
    pub fn new(model: &str, api_key: &Secret, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "OPENAI_BASE_URL")?;
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            transport::secret_header(&format!("Bearer {}", api_key.expose()), "OPENAI_API_KEY")?,
        );
        Ok(Self {
            id: format!("openai:{model}"),
            model: model.to_owned(),
            url: format!("{base}/chat/completions"),
            headers,
            client: transport::build_client()?,
        })
    }

    /// The request body for one step. Public within the module tree for tests only.
    pub(crate) fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for message in &request.messages {
            append_message(&mut messages, message);
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_name,
                    "schema": request.output_schema,
                    "strict": true,
                },
            },
            "max_completion_tokens": request.max_output_tokens,
            "temperature": temperature_json(request.temperature),
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
                            "strict": true,
                        },
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!("auto");
            body["parallel_tool_calls"] = json!(false);
        }
        body
    }
}

fn append_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text } => out.push(json!({"role": "user", "content": text})),
        Message::Assistant { text, tool_calls } => {
            let mut assistant = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments.to_replay_value().to_string(),
                            },
                        })
                    })
                    .collect();
                assistant["tool_calls"] = Value::Array(calls);
            }
            out.push(assistant);
        }
        Message::ToolResults { results } => {
            // Chat Completions has no error flag on a tool message: the result's JSON says it.
            out.extend(results.iter().map(|result| {
                json!({
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": result.content.to_string(),
                })
            }));
        }
    }
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
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
    /// A JSON string per the API; some compatible servers send an object.
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Reads a Chat Completions answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: ChatResponse = serde_json::from_slice(bytes).map_err(|_| {
        ModelError::Malformed("OpenAI response is not a chat completion object".into())
    })?;
    let usage = parsed
        .usage
        .map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        })
        .unwrap_or_default();
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::Malformed("OpenAI response has no choices".into()))?;

    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| ToolCall {
            // Some compatible servers omit the id; the loop still needs one to pair the result.
            id: call.id.unwrap_or_else(|| format!("call_{index}")),
            name: call.function.name,
            arguments: match call.function.arguments {
                Value::Null => ToolArguments::from_json_text(""),
                other => ToolArguments::from_json_value(other),
            },
        })
        .collect();

    let refused = choice.message.refusal.is_some_and(|r| !r.is_empty())
        || choice.finish_reason.as_deref() == Some("content_filter");
    let stop = if refused {
        StopReason::Refused
    } else if choice.finish_reason.as_deref() == Some("length") {
        StopReason::Length
    } else if !tool_calls.is_empty() {
        StopReason::ToolCalls
    } else {
        StopReason::Completed
    };
    let output = if refused {
        None
    } else {
        choice.message.content.filter(|c| !c.is_empty())
    };
    Ok(ModelResponse {
        tool_calls,
        output,
        usage,
        stop,
    })
}

#[async_trait]
impl Model for OpenAiModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.request_body(request);
        let bytes =
            transport::post_json(&self.client, "openai", &self.url, &self.headers, &body).await?;
        parse_response(&bytes)
    }
}
