//! Anthropic Messages API.
//!
//! Invariants:
//! - The system prompt is one text block marked `cache_control: ephemeral`: it is the static
//!   prefix (framework rules, tenant prompt, catalog), identical across turns of one config.
//! - Structured output is asked for on every step (`output_config.format: json_schema`).
//! - A request whose history holds `tool_use`/`tool_result` blocks must still define the tools,
//!   so the final step (`ToolChoice::None`) sends them with `tool_choice: none`; with no tools at
//!   all both keys are omitted.
//! - Consecutive messages of one role are merged into one message, so results of one step sit
//!   first in a single user message, as the API requires.
//! - A refusal's text is never returned as output.

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{self, temperature_json};
use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolChoice, Usage,
};
use crate::ids::Secret;

/// The default `ANTHROPIC_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version this module's wire format follows.
const API_VERSION: &str = "2023-06-01";

/// A Claude model behind the Messages API.
pub struct AnthropicModel {
    /// `anthropic:<model>`, as recorded on the turn.
    id: String,
    model: String,
    /// `{base}/v1/messages`.
    url: String,
    /// `x-api-key` (sensitive) and `anthropic-version`.
    headers: HeaderMap,
    client: reqwest::Client,
}

impl AnthropicModel {
    /// `base_url` is `ANTHROPIC_BASE_URL` (with or without a trailing slash).
    pub fn new(model: &str, api_key: &Secret, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "ANTHROPIC_BASE_URL")?;
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("x-api-key"),
            transport::secret_header(api_key.expose(), "ANTHROPIC_API_KEY")?,
        );
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        Ok(Self {
            id: format!("anthropic:{model}"),
            model: model.to_owned(),
            url: format!("{base}/v1/messages"),
            headers,
            client: transport::build_client()?,
        })
    }

    pub(crate) fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_output_tokens,
            "temperature": temperature_json(request.temperature),
            "system": [{
                "type": "text",
                "text": request.system,
                "cache_control": {"type": "ephemeral"},
            }],
            "messages": messages(&request.messages),
            "output_config": {
                "format": {"type": "json_schema", "schema": request.output_schema},
            },
        });
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
            };
        }
        body
    }
}

/// The conversation as Anthropic messages, consecutive same-role entries merged.
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant { text, tool_calls } => {
                // The API refuses an empty text block.
                let text_block = text
                    .as_deref()
                    .filter(|t| !t.is_empty())
                    .map(|t| json!({"type": "text", "text": t}));
                let uses = tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.arguments.to_replay_value(),
                    })
                });
                ("assistant", text_block.into_iter().chain(uses).collect())
            }
            Message::ToolResults { results } => (
                "user",
                results
                    .iter()
                    .map(|result| {
                        json!({
                            "type": "tool_result",
                            "tool_use_id": result.call_id,
                            "content": result.content.to_string(),
                            "is_error": result.is_error,
                        })
                    })
                    .collect(),
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Thinking and any block type added later: not ours to read.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// Reads a Messages answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: MessagesResponse = serde_json::from_slice(bytes)
        .map_err(|_| ModelError::Malformed("Anthropic response is not a messages object".into()))?;
    // Anthropic's `input_tokens` excludes cache reads and writes; ours counts every input token,
    // with the cache reads as the cached subset.
    let usage = parsed
        .usage
        .map(|u| {
            let read = u.cache_read_input_tokens.unwrap_or(0);
            let written = u.cache_creation_input_tokens.unwrap_or(0);
            Usage {
                input_tokens: u.input_tokens + written + read,
                output_tokens: u.output_tokens,
                cached_tokens: read,
            }
        })
        .unwrap_or_default();

    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in parsed.content {
        match block {
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: ToolArguments::from_json_value(input),
            }),
            Block::Other => {}
        }
    }

    let stop = match parsed.stop_reason.as_deref() {
        Some("refusal") => StopReason::Refused,
        Some("max_tokens") => StopReason::Length,
        _ if !tool_calls.is_empty() => StopReason::ToolCalls,
        _ => StopReason::Completed,
    };
    let output = (stop != StopReason::Refused && !text.is_empty()).then_some(text);
    Ok(ModelResponse {
        tool_calls,
        output,
        usage,
        stop,
    })
}

#[async_trait]
impl Model for AnthropicModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.request_body(request);
        let bytes =
            transport::post_json(&self.client, "anthropic", &self.url, &self.headers, &body)
                .await?;
        parse_response(&bytes)
    }
}
