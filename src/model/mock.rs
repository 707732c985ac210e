//! Models that call no provider: the seams tests and demos drive (SYSTEM 9: "mock only two
//! seams").
//!
//! - [`ScriptedModel`] answers from a script, in order, and records every request it received.
//! - [`HangingModel`] never answers; it records that it was called and that it was cancelled.
//! - [`SlowModel`] (`mock:slow`) answers after 12 s, to force the deferred path in a demo.
//! - [`RecordingModel`] wraps any model and keeps every request it was sent, in order (the
//!   sale-cost bench and the step-count tests count and price them).
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
    Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall, Usage,
};

/// A final answer carrying `output` (an AgentReply JSON text), with no usage: the scripted model
/// fills in an estimate when it is returned.
pub fn reply(output: impl Into<String>) -> ModelResponse {
    ModelResponse {
        tool_calls: Vec::new(),
        output: Some(output.into()),
        usage: Usage::default(),
        stop: StopReason::Completed,
        echo: Default::default(),
    }
}

/// A step that makes tool calls and gives no output.
pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> ModelResponse {
    ModelResponse {
        tool_calls: calls.into_iter().collect(),
        output: None,
        usage: Usage::default(),
        stop: StopReason::ToolCalls,
        echo: Default::default(),
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
    /// 020: whether it says it takes images (`with_vision`).
    vision: bool,
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
            vision: false,
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

    /// Takes images, as a vision-capable model does (020).
    pub fn with_vision(mut self) -> Self {
        self.vision = true;
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

    fn accepts_images(&self) -> bool {
        self.vision
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

/// Any model, every request it is sent and every answer it gave kept in order; it answers as
/// the model it wraps.
pub struct RecordingModel {
    inner: std::sync::Arc<dyn Model>,
    steps: Mutex<Vec<(ModelRequest, Option<ModelResponse>)>>,
}

impl RecordingModel {
    pub fn new(inner: std::sync::Arc<dyn Model>) -> Self {
        Self {
            inner,
            steps: Mutex::new(Vec::new()),
        }
    }

    /// Every request sent so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.steps).iter().map(|(r, _)| r.clone()).collect()
    }

    /// Every request sent so far with its answer (`None`: the call failed), in order.
    pub fn steps(&self) -> Vec<(ModelRequest, Option<ModelResponse>)> {
        lock(&self.steps).clone()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        lock(&self.steps).len()
    }
}

#[async_trait]
impl Model for RecordingModel {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn accepts_images(&self) -> bool {
        self.inner.accepts_images()
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let answer = self.inner.step(request).await;
        lock(&self.steps).push((request.clone(), answer.as_ref().ok().cloned()));
        answer
    }
}

/// A model that never answers. Dropping its future (a timeout, the race's abort) is the only
/// way out, and is counted.
#[derive(Default)]
pub struct HangingModel {
    requests: Mutex<Vec<ModelRequest>>,
    cancelled: AtomicUsize,
}

impl HangingModel {
    pub const ID: &'static str = "mock:hanging";

    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls started.
    pub fn calls(&self) -> usize {
        lock(&self.requests).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
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

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        lock(&self.requests).push(request.clone());
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

/// Token usage as a provider would roughly report it, counted with the real tokenizer
/// (`o200k_base`): the request's system text, tool definitions, output schema and messages in,
/// the response's text and tool calls out; at least one token each way.
pub fn estimate_usage(request: &ModelRequest, response: &ModelResponse) -> Usage {
    Usage {
        input_tokens: super::tokenizer::request_tokens(request),
        output_tokens: super::tokenizer::response_tokens(response),
        cached_tokens: 0,
        cache_write_tokens: 0,
    }
}

/// A poisoned lock only means another test thread panicked mid-push; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::time::Instant;

    use super::*;
    use crate::model::ToolChoice;
    use crate::model::test_support::{CONTACT_TEXT, VALID_REPLY, first_step};

    #[tokio::test]
    async fn scripted_model_answers_in_order_and_records_every_request() {
        let model = ScriptedModel::new(vec![
            Ok(tool_calls([call(
                "c1",
                "send_flow",
                json!({"id": "brochure"}),
            )])),
            Err(ModelError::RateLimited),
            Ok(reply(VALID_REPLY)),
        ]);
        let first = first_step(ToolChoice::Auto);
        let last = first_step(ToolChoice::None);

        let a = model.step(&first).await.expect("step 1");
        let b = model.step(&first).await;
        let c = model.step(&last).await.expect("step 3");

        assert_eq!(a.stop, StopReason::ToolCalls);
        assert_eq!(a.tool_calls[0].name, "send_flow");
        assert_eq!(b, Err(ModelError::RateLimited));
        assert_eq!(c.output.as_deref(), Some(VALID_REPLY));
        assert_eq!(model.requests(), vec![first.clone(), first, last]);
        assert_eq!((model.calls(), model.remaining()), (3, 0));
    }

    #[tokio::test]
    async fn scripted_model_out_of_script_is_malformed_not_a_panic() {
        let model = ScriptedModel::replies([VALID_REPLY]);
        let request = first_step(ToolChoice::Auto);
        model.step(&request).await.expect("scripted");

        let err = model.step(&request).await.expect_err("exhausted");

        assert_eq!(err, ModelError::Malformed("script exhausted".into()));
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test]
    async fn scripted_model_reports_usage_like_a_provider_unless_scripted() {
        let mut priced = reply(VALID_REPLY);
        priced.usage = Usage {
            input_tokens: 1000,
            output_tokens: 50,
            cached_tokens: 800,
            cache_write_tokens: 0,
        };
        let model = ScriptedModel::new(vec![Ok(reply(VALID_REPLY)), Ok(priced)])
            .with_id("openai:gpt-4.1-mini");
        let request = first_step(ToolChoice::Auto);

        let estimated = model.step(&request).await.expect("step").usage;
        let scripted = model.step(&request).await.expect("step").usage;

        assert!(estimated.input_tokens > 0 && estimated.output_tokens > 0);
        // Counted with the real tokenizer, as a provider would bill the reply's text.
        assert_eq!(
            estimated.output_tokens,
            crate::model::tokenizer::count(VALID_REPLY)
        );
        assert_eq!(
            estimated.input_tokens,
            crate::model::tokenizer::request_tokens(&request)
        );
        assert_eq!(scripted.cached_tokens, 800);
        assert_eq!(model.id(), "openai:gpt-4.1-mini");
    }

    /// Asserts that `model`'s step for `request` is cut off at `deadline` (failing with its
    /// message) and that, asked again, it answers after exactly `after`; that answer.
    async fn cut_then_answered(
        model: &impl Model,
        request: &ModelRequest,
        (deadline, message): (Duration, &str),
        after: Duration,
    ) -> ModelResponse {
        let cut = tokio::time::timeout(deadline, model.step(request)).await;
        assert!(cut.is_err(), "{message}");
        let started = Instant::now();
        let answered = model.step(request).await.expect("answer");
        assert_eq!(started.elapsed(), after);
        answered
    }

    #[tokio::test(start_paused = true)]
    async fn scripted_step_delay_follows_the_paused_clock() {
        let model = ScriptedModel::from_steps([
            ScriptStep::ok(reply(VALID_REPLY)).after(Duration::from_secs(9)),
            ScriptStep::ok(reply(VALID_REPLY)).after(Duration::from_secs(9)),
        ]);
        let request = first_step(ToolChoice::Auto);

        let answered = cut_then_answered(
            &model,
            &request,
            (
                Duration::from_secs(8),
                "a 9 s step must lose an 8 s deadline",
            ),
            Duration::from_secs(9),
        )
        .await;
        assert_eq!(answered.output.as_deref(), Some(VALID_REPLY));
        // The cancelled call used up its step, as a real call would have.
        assert_eq!((model.calls(), model.remaining()), (2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn hanging_model_is_cancelled_by_a_timeout_and_records_it() {
        let model = HangingModel::new();
        let request = first_step(ToolChoice::Auto);

        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(30), model.step(&request)).await;

        assert!(outcome.is_err());
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!((model.calls(), model.cancelled()), (1, 1));
        assert_eq!(model.requests(), vec![request]);
    }

    #[tokio::test(start_paused = true)]
    async fn hanging_model_is_not_cancelled_while_its_future_lives() {
        let model = HangingModel::new();
        let request = first_step(ToolChoice::Auto);
        let mut call = model.step(&request);

        let polled = tokio::time::timeout(Duration::from_secs(1), &mut call).await;

        assert!(polled.is_err());
        assert_eq!((model.calls(), model.cancelled()), (1, 0));
        drop(call);
        assert_eq!(model.cancelled(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn system_5_2_mock_slow_answers_a_valid_reply_after_12_seconds() {
        let model = SlowModel::new();
        let request = first_step(ToolChoice::Auto);

        let response = cut_then_answered(
            &model,
            &request,
            (Duration::from_millis(11_999), "no answer before 12 s"),
            Duration::from_secs(12),
        )
        .await;

        let output = response.output.expect("output");
        let reply: Value = serde_json::from_str(&output).expect("JSON");
        assert_eq!(reply["escalate"], json!(false));
        assert_eq!(reply["escalation_reason"], Value::Null);
        assert_eq!(reply["messages"].as_array().map(Vec::len), Some(1));
        assert!(!output.contains("pottery") && !output.contains(CONTACT_TEXT));
        assert!(response.usage.input_tokens > 0);
        assert_eq!(model.id(), "mock:slow");
    }
}
