//! The one door to the models (C2): the `Model` trait, the provider-neutral request and response
//! types, the registry that resolves `AGENT_MODEL`, and the providers.
//!
//! Only this module knows a provider's wire format. The agent loop builds a `ModelRequest` per
//! step and reads a `ModelResponse`; it never sees OpenAI, Anthropic, Gemini or Ollama JSON.
//!
//! - [`registry`]: `AGENT_MODEL` → `Arc<dyn Model>`, and the model environment (`ModelEnv`).
//! - [`openai`], [`anthropic`], [`google`], [`ollama`]: one file per wire format, each an
//!   [`http::HttpModel`] (the endpoint every provider keeps, and its wire); `transport` holds the
//!   HTTP exchange they share (one retry at most, errors summarised, no bodies in logs).
//! - [`mock`]: the scripted, hanging and slow models; [`demo`]: `mock:demo`.
//! - [`capabilities`]: what each model family accepts (temperature, structured output, bounds);
//!   [`wire_schema`]: the AgentReply schema as each provider's structured output takes it.
//! - [`reply`]: AgentReply, what a model's final step must return: its strict JSON Schema and
//!   the parser that is the agent's first guardrail.
//! - [`reasoning`]: `AGENT_REASONING_EFFORT`, its levels and the start check.
//! - [`pricing`]: USD cost of a call's usage, for the daily budget; the operator's price.
//! - [`embedding`]: `KNOWLEDGE_EMBEDDINGS` → an [`embedding::Embedder`] (OpenAI, Gemini, Ollama).
//!
//! Invariant: no error or log line from this module carries prompt, contact or provider text.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod anthropic;
pub mod capabilities;
#[cfg(test)]
mod conformance;
pub mod demo;
pub mod effort;
pub mod embedding;
pub mod google;
pub mod http;
pub mod mock;
pub mod ollama;
pub mod openai;
pub mod pricing;
pub mod reasoning;
pub mod registry;
pub mod reply;
mod reported;
#[cfg(test)]
mod test_support;
pub mod timed;
pub mod tokenizer;
pub mod transcription;
mod transport;
pub mod wire_schema;

pub use registry::{ModelEnv, resolve};

/// One model call: one step of the agent loop.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The cacheable static prefix: framework rules, the tenant's prompt, the catalog block.
    /// Identical across turns of one config snapshot, so providers can cache it. Shared, not
    /// copied, between a turn's steps.
    pub system: Arc<str>,
    /// The per-turn conversation as user messages: the history (one message per stored turn,
    /// leading, so a contact's turns share it), then the notices and the fenced contact message,
    /// then, on steps after the first, the assistant's tool calls and their results.
    pub messages: Vec<Message>,
    /// Tools offered on this step. Empty means none are offered. Built once per config
    /// snapshot and shared.
    pub tools: Arc<[ToolSpec]>,
    /// `Auto` on steps 1–3; `None` on the final step. Anthropic, the official OpenAI API and
    /// Gemini 3 send the same tools with their `none` choice, so the cached prefix holds;
    /// providers that cannot honour `none` (OpenAI-compatible servers, Ollama) omit the tools
    /// instead, and so does Gemini 2.5 (no JSON reply beside tools).
    pub tool_choice: ToolChoice,
    /// The AgentReply JSON Schema with every local bound, asked for as structured output. Each
    /// provider sends its own wire copy of it (`wire_schema`); the bounds it cannot send stay
    /// enforced when the output is parsed.
    pub output_schema: Arc<Value>,
    /// The schema's name on the wire (`agent_reply`).
    pub output_name: String,
    pub max_output_tokens: u32,
    /// The deployment's temperature (`AGENT_TEMPERATURE` or its default). A provider sends it
    /// only as its model's capabilities allow (`capabilities::Capabilities::wire_temperature`).
    pub temperature: f32,
    /// What the providers' prompt caches may reuse of this request ([`CacheHints`]).
    pub cache: CacheHints,
}

/// How a request lends itself to the providers' prompt caches. The prefix a cache can reuse is
/// the tools, the output schema and `system` (the config alone decides them), then the first
/// `stable_messages` of `messages`: the conversation's history as earlier turns already sent it.
/// Everything after those is the turn's own part (notices, the contact's message, the tool
/// exchange of its steps).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheHints {
    /// Routes requests sharing a prefix to the same cache (OpenAI's `prompt_cache_key`): a hash
    /// of the config in force, never anything that names a contact. `None`: no key is sent.
    pub key: Option<Arc<str>>,
    /// How many leading `messages` repeat, byte for byte, what the previous turn of the same
    /// contact sent (Anthropic puts a `cache_control` breakpoint on the last of them).
    pub stable_messages: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Text the server wrote for the model: history, notices, the fenced contact message.
    User { text: String },
    /// A previous step's answer, replayed on the next step: its text (if any) and tool calls,
    /// and what its provider asked to get back unchanged ([`ProviderEcho`]).
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
        echo: ProviderEcho,
    },
    /// The results of the previous step's tool calls, one per call, in call order.
    ToolResults { results: Vec<ToolResult> },
    /// 020: images the contact sent, given once, on the turn they arrive, to a model whose
    /// registry entry takes images ([`Model::accepts_images`]). Each provider puts them on the
    /// wire its own way (OpenAI-compatible `image_url` data URLs, Anthropic `image` blocks with a
    /// base64 source, Ollama's `images` array); history keeps only the `[image]` marker.
    Images { images: Arc<[ImageInput]> },
}

/// What a provider requires back, unchanged, with the assistant turn it returned: Anthropic's
/// `thinking` and `redacted_thinking` blocks of a turn that called tools (extended thinking
/// guide: they must be passed back unmodified on the next step), Gemini's parts carrying
/// `thoughtSignature`s (thought signatures guide). Opaque to everything outside the provider
/// that wrote it, held only in the turn's memory between its steps: never shown to a contact,
/// logged (`Debug` shows only the count) or stored.
#[derive(Clone, PartialEq, Default)]
pub struct ProviderEcho(Option<Arc<[Value]>>);

impl ProviderEcho {
    /// The provider's raw JSON items, to be sent back as they are; nothing when empty.
    pub fn new(items: Vec<Value>) -> Self {
        if items.is_empty() {
            Self(None)
        } else {
            Self(Some(Arc::from(items)))
        }
    }

    pub fn items(&self) -> &[Value] {
        self.0.as_deref().unwrap_or(&[])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl std::fmt::Debug for ProviderEcho {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProviderEcho({} items)", self.items().len())
    }
}

/// An image's bytes and media type (`image/png`, `image/jpeg`). `Debug` shows only the size.
#[derive(Clone, PartialEq)]
pub struct ImageInput {
    pub media_type: &'static str,
    pub bytes: Arc<[u8]>,
}

impl ImageInput {
    /// The bytes as standard base64 (Anthropic's `source.data`, Ollama's `images`).
    pub fn base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.bytes)
    }

    /// A `data:` URL (OpenAI-compatible `image_url.url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.base64())
    }
}

impl std::fmt::Debug for ImageInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageInput")
            .field("media_type", &self.media_type)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// A tool as the model sees it: a name, the tenant's description, a strict JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id, echoed back with the result.
    pub id: String,
    pub name: String,
    /// The parsed arguments. A provider that returned arguments which are not a JSON object
    /// reports them as `ToolArguments::Invalid` so the loop can answer with an error result
    /// instead of failing the turn.
    pub arguments: ToolArguments,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    Valid(Value),
    /// The raw text could not be parsed as a JSON object. Holds only its length: the raw text
    /// may quote the contact.
    Invalid {
        length: usize,
    },
}

impl ToolArguments {
    /// Parses arguments a provider sent as JSON text (OpenAI's `function.arguments`). Only a
    /// JSON object is valid; blank text counts as `{}`, which OpenAI-compatible servers send for
    /// a call without arguments. Anything else keeps only its length in bytes.
    pub fn from_json_text(raw: &str) -> Self {
        if raw.trim().is_empty() {
            return Self::Valid(Value::Object(serde_json::Map::new()));
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(value @ Value::Object(_)) => Self::Valid(value),
            _ => Self::Invalid { length: raw.len() },
        }
    }

    /// Arguments a provider sent as a JSON value (Anthropic's `input`, Ollama's `arguments`).
    /// A JSON string holding an object is accepted too, as some compatible servers send one.
    pub fn from_json_value(value: Value) -> Self {
        match value {
            Value::Object(_) => Self::Valid(value),
            Value::String(text) => Self::from_json_text(&text),
            other => Self::Invalid {
                length: other.to_string().len(),
            },
        }
    }

    /// The arguments as a JSON object for replaying a call to the provider. Invalid arguments
    /// replay as `{}`: their text was never kept (it may quote the contact), and the tool result
    /// that follows already tells the model they were refused.
    pub fn to_replay_value(&self) -> Value {
        match self {
            Self::Valid(value) => value.clone(),
            Self::Invalid { .. } => Value::Object(serde_json::Map::new()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    /// The result as JSON; providers serialise it to a string where their wire format wants one.
    pub content: Value,
    pub is_error: bool,
}

/// What one step returned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelResponse {
    /// Tool calls, in the order the model made them. Non-empty means the loop goes on.
    pub tool_calls: Vec<ToolCall>,
    /// The final structured output as text (expected: an AgentReply JSON object). `None` when
    /// the step produced only tool calls, or nothing.
    pub output: Option<String>,
    pub usage: Usage,
    pub stop: StopReason,
    /// What the provider requires back with this answer on the next step (thinking blocks,
    /// thought signatures); empty for most answers.
    pub echo: ProviderEcho,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    /// Every output token billed, thinking tokens included (OpenAI's `completion_tokens` and
    /// Anthropic's `output_tokens` count them; Gemini's `thoughtsTokenCount` is added to its
    /// `candidatesTokenCount`), so the budget and the price table charge them.
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache (a subset of `input_tokens`).
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache on this call (a subset of
    /// `input_tokens`; Anthropic's `cache_creation_input_tokens`, billed above the input rate).
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopReason {
    #[default]
    Completed,
    ToolCalls,
    /// The output was cut at the token limit.
    Length,
    /// The provider refused or blocked the answer (OpenAI `refusal`, Anthropic
    /// `stop_reason: refusal`, a content filter, Gemini's safety and prompt blocks).
    Refused,
}

/// Why a model call failed. Carries no prompt or contact text: the body of a provider's error
/// is summarised to its type/code, never quoted whole.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("model provider rate-limited the request (HTTP 429)")]
    RateLimited,
    #[error("model provider returned HTTP {status} ({kind})")]
    Http { status: u16, kind: String },
    #[error("model provider unreachable: {0}")]
    Transport(String),
    #[error("model response could not be parsed: {0}")]
    Malformed(String),
    #[error("model configuration error: {0}")]
    Config(String),
}

/// A language model, as the agent loop uses it. Implementations: the providers, and the mocks
/// the tests and the demo use. Cancellation is by dropping the future (the race's abort).
#[async_trait]
pub trait Model: Send + Sync {
    /// `provider:model`, as recorded on the turn.
    fn id(&self) -> &str;
    /// 020: whether the model takes image input (the registry's `vision` capability).
    fn accepts_images(&self) -> bool {
        false
    }
    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tool_arguments_accept_objects_and_blank_text_only() {
        assert_eq!(
            ToolArguments::from_json_text(r#"{"id":"brochure"}"#),
            ToolArguments::Valid(json!({"id": "brochure"}))
        );
        assert_eq!(
            ToolArguments::from_json_text("  "),
            ToolArguments::Valid(json!({}))
        );
        assert_eq!(
            ToolArguments::from_json_text("\"brochure\""),
            ToolArguments::Invalid { length: 10 }
        );
        assert_eq!(
            ToolArguments::from_json_value(json!(r#"{"id":"x"}"#)),
            ToolArguments::Valid(json!({"id": "x"}))
        );
        assert_eq!(
            ToolArguments::Invalid { length: 3 }.to_replay_value(),
            json!({})
        );
    }

    #[test]
    fn c5_provider_echo_never_prints_the_thinking_it_carries() {
        let echo = ProviderEcho::new(vec![
            json!({"type": "thinking", "thinking": "the contact Jane wants a refund", "signature": "s"}),
        ]);
        let printed = format!(
            "{:?}",
            Message::Assistant {
                text: None,
                tool_calls: vec![],
                echo,
            }
        );
        assert!(
            !printed.contains("Jane") && !printed.contains("refund"),
            "{printed}"
        );
        assert!(printed.contains("1 items"), "{printed}");
        assert!(ProviderEcho::new(vec![]).is_empty());
    }
}
