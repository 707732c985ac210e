//! Models that call no provider: the seams tests and demos drive (SYSTEM 9: "mock only two
//! seams").
//!
//! - [`ScriptedModel`] answers from a script, in order, and records every request it received.
//! - [`HangingModel`] never answers; it records that it was called and that it was cancelled.
//! - [`SlowModel`] (`mock:slow`) answers after 12 s, to force the deferred path in a demo.
//!
//! Invariants: no mock panics on any input (an exhausted script is a `Malformed` error); every
//! wait is a tokio sleep, so a test with a paused clock controls it; a mock that answers reports
//! token usage like a real provider, so budgets and turn records see non-zero figures.
//!
//! The texts in this file are mock output for demos and tests, not tenant copy: a real
//! deployment never resolves a `mock:` model unless `AGENT_MODEL` says so.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    Usage,
};

/// A final answer carrying `output` (an AgentReply JSON text), with no usage: the scripted model
/// fills in an estimate when it is returned.
pub fn reply(output: impl Into<String>) -> ModelResponse {
    ModelResponse {
        tool_calls: Vec::new(),
        output: Some(output.into()),
        usage: Usage::default(),
        stop: StopReason::Completed,
    }
}

/// A step that makes tool calls and gives no output.
pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> ModelResponse {
    ModelResponse {
        tool_calls: calls.into_iter().collect(),
        output: None,
        usage: Usage::default(),
        stop: StopReason::ToolCalls,
    }
}

/// A tool call with valid arguments.
pub fn call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: ToolArguments::Valid(arguments),
    }
}

/// One entry of a script: what to return, and how long to wait first.
#[derive(Debug, Clone)]
pub struct ScriptStep {
    pub result: Result<ModelResponse, ModelError>,
    /// Waited with `tokio::time::sleep` before answering; `Duration::ZERO` answers at once.
    pub delay: Duration,
}

impl ScriptStep {
    pub fn ok(response: ModelResponse) -> Self {
        Self {
            result: Ok(response),
            delay: Duration::ZERO,
        }
    }

    pub fn err(error: ModelError) -> Self {
        Self {
            result: Err(error),
            delay: Duration::ZERO,
        }
    }

    /// This step answers only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

impl From<Result<ModelResponse, ModelError>> for ScriptStep {
    fn from(result: Result<ModelResponse, ModelError>) -> Self {
        Self {
            result,
            delay: Duration::ZERO,
        }
    }
}

/// A model that returns its script in order and remembers what it was asked.
///
/// A step is taken from the script when the call starts, so a call cancelled during its delay
/// still uses up its step, as a real call would have cost its tokens.
pub struct ScriptedModel {
    id: String,
    script: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    /// The id a scripted model records on turns unless `with_id` says otherwise.
    pub const DEFAULT_ID: &'static str = "mock:scripted";

    pub fn new(steps: Vec<Result<ModelResponse, ModelError>>) -> Self {
        Self::from_steps(steps.into_iter().map(ScriptStep::from))
    }

    pub fn from_steps(steps: impl IntoIterator<Item = ScriptStep>) -> Self {
        Self {
            id: Self::DEFAULT_ID.to_owned(),
            script: Mutex::new(steps.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// One final answer per entry, each an AgentReply JSON text.
    pub fn replies<I, S>(outputs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::from_steps(outputs.into_iter().map(|o| ScriptStep::ok(reply(o))))
    }

    /// Records turns under `id` (e.g. `openai:gpt-4.1-mini`, to exercise pricing).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        lock(&self.requests).len()
    }

    /// How many scripted steps are left.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        lock(&self.requests).push(request.clone());
        let next = lock(&self.script).pop_front();
        let Some(step) = next else {
            return Err(ModelError::Malformed("script exhausted".into()));
        };
        if !step.delay.is_zero() {
            tokio::time::sleep(step.delay).await;
        }
        step.result.map(|mut response| {
            if response.usage == Usage::default() {
                response.usage = estimate_usage(request, &response);
            }
            response
        })
    }
}

/// A model that never answers. Dropping its future (a timeout, the race's abort) is the only
/// way out, and is counted.
#[derive(Default)]
pub struct HangingModel {
    calls: AtomicUsize,
    cancelled: AtomicUsize,
}

impl HangingModel {
    pub const ID: &'static str = "mock:hanging";

    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls started.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many calls were cancelled by dropping their future.
    pub fn cancelled(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// Counts a cancellation when the hanging call's future is dropped.
struct CancelGuard<'a>(&'a AtomicUsize);

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Model for HangingModel {
    fn id(&self) -> &str {
        Self::ID
    }

    async fn step(&self, _request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let _guard = CancelGuard(&self.cancelled);
        std::future::pending().await
    }
}

/// `mock:slow`: a plain, valid AgentReply after a fixed delay (12 s by default, beyond the 8 s
/// race deadline), so a demo shows the acknowledgement and the deferred reply. It repeats nothing
/// of the contact's message.
pub struct SlowModel {
    delay: Duration,
}

impl SlowModel {
    pub const ID: &'static str = "mock:slow";
    pub const DEFAULT_DELAY: Duration = Duration::from_secs(12);
    /// Mock output for demos and tests, not tenant copy.
    pub const REPLY: &'static str = r#"{"messages":["(mock:slow) This is a delayed demo answer."],"escalate":false,"escalation_reason":null,"confidence":0.9,"closing_question":null}"#;

    pub fn new() -> Self {
        Self::with_delay(Self::DEFAULT_DELAY)
    }

    pub fn with_delay(delay: Duration) -> Self {
        Self { delay }
    }
}

impl Default for SlowModel {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Model for SlowModel {
    fn id(&self) -> &str {
        Self::ID
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        tokio::time::sleep(self.delay).await;
        let mut response = reply(Self::REPLY);
        response.usage = estimate_usage(request, &response);
        Ok(response)
    }
}

/// Token usage as a provider would roughly report it: about four characters per token, at least
/// one token each way.
pub fn estimate_usage(request: &ModelRequest, response: &ModelResponse) -> Usage {
    let input_chars = request.system.chars().count()
        + request.messages.iter().map(message_chars).sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.chars().count() + t.parameters.to_string().len())
            .sum::<usize>();
    let output_chars = response.output.as_deref().map_or(0, |o| o.chars().count())
        + response
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.to_replay_value().to_string().len())
            .sum::<usize>();
    Usage {
        input_tokens: tokens(input_chars),
        output_tokens: tokens(output_chars),
        cached_tokens: 0,
    }
}

fn message_chars(message: &Message) -> usize {
    match message {
        Message::User { text } => text.chars().count(),
        Message::Assistant { text, tool_calls } => {
            text.as_deref().map_or(0, |t| t.chars().count())
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_replay_value().to_string().len())
                    .sum::<usize>()
        }
        Message::ToolResults { results } => {
            results.iter().map(|r| r.content.to_string().len()).sum()
        }
    }
}

fn tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// A poisoned lock only means another test thread panicked mid-push; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
