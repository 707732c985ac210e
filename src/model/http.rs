//! A model behind an HTTP API: what every provider keeps (its [`Endpoint`]) and the one thing
//! each writes for itself, its wire format ([`Wire`]: one step's body, one answer read).
//! [`HttpModel`] joins the two into a [`Model`]; `openai`, `anthropic`, `google` and `ollama`
//! are each a `Wire`.
//!
//! Also the pieces of the Chat Completions shape that OpenAI and Ollama both speak: tools as
//! `{"type": "function", "function": …}`, calls as `{id?, function: {name, arguments}}`.

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};

use super::capabilities::{self, Capabilities};
use super::reasoning::Effort;
use super::transport::{self, temperature_json};
use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolSpec,
};

/// Where a provider posts and what the model it posts for can take.
pub struct Endpoint {
    /// `provider:model`, as recorded on the turn.
    pub(crate) id: String,
    /// The model's name as the provider knows it (the one sent on the wire).
    pub(crate) model: String,
    /// Names the provider in log lines.
    provider: &'static str,
    url: String,
    /// The credential (marked sensitive) and any version header.
    headers: HeaderMap,
    /// Kept for the provider's lifetime (connection reuse).
    client: reqwest::Client,
    pub(crate) capabilities: Capabilities,
    /// Whether the operator set `AGENT_TEMPERATURE` (an unknown model gets it only then).
    operator_temperature: bool,
    /// `AGENT_REASONING_EFFORT` (checked against the model by `reasoning::check` at start).
    pub(crate) effort: Option<Effort>,
}

impl Endpoint {
    /// `model` as the operator named it (the id); `name` as the capability registry knows it.
    pub(crate) fn new(
        provider: &'static str,
        model: &str,
        name: &str,
        url: String,
        headers: HeaderMap,
    ) -> Result<Self, ModelError> {
        Ok(Self {
            id: format!("{provider}:{model}"),
            model: name.to_owned(),
            provider,
            url,
            headers,
            client: transport::build_client()?,
            capabilities: capabilities::of(provider, name),
            operator_temperature: false,
            effort: None,
        })
    }

    /// The temperature to send for `request`, as the model's capabilities allow
    /// (`Capabilities::wire_temperature`); `None` leaves the field out.
    pub(crate) fn temperature(&self, request: &ModelRequest) -> Option<Value> {
        self.capabilities
            .wire_temperature(request.temperature, self.operator_temperature)
            .map(temperature_json)
    }
}

/// A provider's wire format: how it writes the body of one step.
pub trait Wire: Send + Sync {
    fn request_body(&self, endpoint: &Endpoint, request: &ModelRequest) -> Value;
}

/// Reads a provider's answer.
pub(crate) type Parse = fn(&[u8]) -> Result<ModelResponse, ModelError>;

/// A model behind an HTTP API: its endpoint, and its wire format both ways.
pub struct HttpModel<W> {
    endpoint: Endpoint,
    wire: W,
    parse: Parse,
}

impl<W: Wire> HttpModel<W> {
    pub(crate) fn from_parts(endpoint: Endpoint, wire: W, parse: Parse) -> Self {
        Self {
            endpoint,
            wire,
            parse,
        }
    }

    /// `AGENT_REASONING_EFFORT` (checked against the model by `reasoning::check` at start).
    pub fn with_reasoning_effort(mut self, effort: Option<Effort>) -> Self {
        self.endpoint.effort = effort;
        self
    }

    /// Marks `AGENT_TEMPERATURE` as set by the operator (see `Capabilities::wire_temperature`).
    pub fn with_operator_temperature(mut self, set: bool) -> Self {
        self.endpoint.operator_temperature = set;
        self
    }

    /// The request body for one step, as it is sent (the sale-cost bench counts its tokens).
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        self.wire.request_body(&self.endpoint, request)
    }
}

#[async_trait]
impl<W: Wire> Model for HttpModel<W> {
    fn id(&self) -> &str {
        &self.endpoint.id
    }

    fn accepts_images(&self) -> bool {
        self.endpoint.capabilities.vision
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let endpoint = &self.endpoint;
        let body = self.request_body(request);
        let bytes = transport::post_json(
            &endpoint.client,
            endpoint.provider,
            &endpoint.url,
            &endpoint.headers,
            body,
        )
        .await?;
        (self.parse)(&bytes)
    }
}

/// A provider's answer read as `T`, or `Malformed` saying `not_what` (serde's own messages are
/// dropped: they can quote a value).
pub(crate) fn read_answer<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    not_what: &str,
) -> Result<T, ModelError> {
    serde_json::from_slice(bytes).map_err(|_| ModelError::Malformed(not_what.into()))
}

/// How an answer that was not cut or refused stopped: on its calls, if it made any.
pub(crate) fn finished(tool_calls: &[ToolCall]) -> StopReason {
    if tool_calls.is_empty() {
        StopReason::Completed
    } else {
        StopReason::ToolCalls
    }
}

/// The system prompt as the first chat message, then the conversation as `append` writes it.
pub(crate) fn chat_messages(
    request: &ModelRequest,
    append: fn(&mut Vec<Value>, &Message),
) -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": &*request.system})];
    for message in &request.messages {
        append(&mut messages, message);
    }
    messages
}

/// A tool as every API declares one: its name, its description, and its parameters' JSON
/// Schema under `parameters_key` (Anthropic's `input_schema`, Gemini's `parametersJsonSchema`,
/// Chat Completions' `parameters`).
pub(crate) fn declaration(tool: &ToolSpec, parameters_key: &str) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        parameters_key: tool.parameters,
    })
}

/// A tool as a Chat Completions `function` tool.
pub(crate) fn function_tool(tool: &ToolSpec) -> Value {
    json!({"type": "function", "function": declaration(tool, "parameters")})
}

/// A call as Chat Completions shapes it: an optional id and the function called.
#[derive(Deserialize)]
pub(crate) struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON string (OpenAI) or an object (Ollama; some compatible servers).
    #[serde(default)]
    arguments: Value,
}

/// The calls as the loop reads them, each id what `id` makes of its position and the id sent
/// (if any). Absent arguments are no arguments (`{}`).
pub(crate) fn calls(
    wire: Vec<WireToolCall>,
    id: impl Fn(usize, Option<String>) -> String,
) -> Vec<ToolCall> {
    wire.into_iter()
        .enumerate()
        .map(|(index, call)| ToolCall {
            id: id(index, call.id),
            name: call.function.name,
            arguments: match call.function.arguments {
                Value::Null => ToolArguments::from_json_text(""),
                other => ToolArguments::from_json_value(other),
            },
        })
        .collect()
}
