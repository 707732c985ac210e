//! Anthropic Messages API.
//!
//! Invariants:
//! - Prompt caching: Anthropic caches the prefix up to each `cache_control: {type: ephemeral}`
//!   breakpoint (5-minute lifetime), in the order tools, system, messages. A request carries at
//!   most three of the API's four: on the last tool definition (when tools are sent), on the
//!   system prompt's one text block (the static prefix: framework rules, tenant prompt,
//!   catalog, identical across turns of one config), and on the last content block of the last
//!   of the `CacheHints::stable_messages` leading messages (the history the previous turn
//!   already sent), when there are any. A thinking block or an empty text block is never marked
//!   (the API refuses both); the block before it is. The usage's `input_tokens` excludes cache
//!   reads (`cache_read_input_tokens`) and writes (`cache_creation_input_tokens`); ours counts
//!   them all, each cache count read leniently (`reported`).
//! - Structured output is asked for on every step (`output_config.format: json_schema`) of a
//!   model that has it, with Anthropic's wire copy of the schema (`wire_schema::for_anthropic`:
//!   no numeric or length bounds, which Anthropic answers with a 400; they stay enforced locally).
//! - A request whose history holds `tool_use`/`tool_result` blocks must still define the tools,
//!   so the final step (`ToolChoice::None`) sends them with `tool_choice: none`; with no tools at
//!   all both keys are omitted.
//! - `tool_choice` never carries `disable_parallel_tool_use`: a step may make several calls
//!   (012), each answered by its own `tool_result`, in call order.
//! - Consecutive messages of one role are merged into one message, so results of one step sit
//!   first in a single user message, as the API requires.
//! - A refusal's text is never returned as output.
//! - `temperature` is sent only as the model's capabilities allow (never from Claude Opus 4.7
//!   on), clamped to Anthropic's 0–1 range, and never beside extended thinking (which refuses a
//!   changed temperature).
//! - `AGENT_REASONING_EFFORT` turns thinking on: `thinking: {type: enabled, budget_tokens}` on
//!   the models with extended thinking (a budget that fits `max_tokens`, checked at start), or
//!   `thinking: {type: adaptive}` with `output_config.effort` on the adaptive models.
//! - The `thinking` and `redacted_thinking` blocks of an answer that called tools go back
//!   unchanged, in their order and first, in that assistant turn on the next step (extended
//!   thinking guide: thinking blocks must be passed back unmodified with tool use). Their text is
//!   never output.

use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use super::capabilities::EffortControl;
use super::http::{self, Endpoint, HttpModel, Wire};
use super::reasoning;
use super::reported::{self, Count, Report};
use super::transport::{self, null_as_default};
use super::{
    Message, ModelError, ModelRequest, ModelResponse, ProviderEcho, StopReason, ToolArguments,
    ToolCall, ToolChoice, wire_schema,
};
use crate::ids::Secret;

/// The default `ANTHROPIC_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version this module's wire format follows.
const API_VERSION: &str = "2023-06-01";

/// A Claude model behind the Messages API.
pub type AnthropicModel = HttpModel<Anthropic>;

/// The Messages API wire format.
pub struct Anthropic;

impl AnthropicModel {
    /// `base_url` is `ANTHROPIC_BASE_URL` (with or without a trailing slash). Posts to
    /// `{base}/v1/messages` with `x-api-key` (sensitive) and `anthropic-version`.
    pub fn new(model: &str, api_key: &Secret, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "ANTHROPIC_BASE_URL")?;
        let key = HeaderName::from_static("x-api-key");
        let mut headers = transport::secret_headers(key, api_key.expose(), "ANTHROPIC_API_KEY")?;
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let url = format!("{base}/v1/messages");
        let endpoint = Endpoint::new("anthropic", model, model, url, headers)?;
        Ok(HttpModel::from_parts(endpoint, Anthropic, parse_response))
    }
}

impl Wire for Anthropic {
    fn request_body(&self, endpoint: &Endpoint, request: &ModelRequest) -> Value {
        let mut body = json!({
            "model": endpoint.model,
            "max_tokens": request.max_output_tokens,
            "system": [{
                "type": "text",
                "text": &*request.system,
                "cache_control": breakpoint(),
            }],
            "messages": messages(&request.messages, request.cache.stable_messages),
        });
        let capabilities = &endpoint.capabilities;
        let thinking = endpoint
            .effort
            .and_then(|effort| match capabilities.reasoning_effort {
                EffortControl::AnthropicBudget => Some((
                    json!({"type": "enabled", "budget_tokens": reasoning::thinking_budget(effort)}),
                    None,
                )),
                EffortControl::AnthropicAdaptive => {
                    Some((json!({"type": "adaptive"}), Some(effort.as_str())))
                }
                // Refused at start (`reasoning::check`); nothing is sent.
                _ => None,
            });
        // Anthropic accepts 0–1 (the capability's range); AGENT_TEMPERATURE allows OpenAI's 0–2.
        if thinking.is_none()
            && let Some(temperature) = endpoint.temperature(request)
        {
            body["temperature"] = temperature;
        }
        let mut output_config = serde_json::Map::new();
        if capabilities.structured_output {
            output_config.insert(
                "format".into(),
                json!({
                    "type": "json_schema",
                    "schema": wire_schema::for_anthropic(&request.output_schema),
                }),
            );
        }
        if let Some((config, effort)) = thinking {
            body["thinking"] = config;
            if let Some(effort) = effort {
                output_config.insert("effort".into(), json!(effort));
            }
        }
        if !output_config.is_empty() {
            body["output_config"] = Value::Object(output_config);
        }
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| http::declaration(tool, "input_schema"))
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = breakpoint();
            }
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match request.tool_choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
            };
        }
        body
    }
}

/// A prompt-cache breakpoint: the prefix up to and including its block is cached for 5 minutes.
fn breakpoint() -> Value {
    json!({"type": "ephemeral"})
}

/// Marks the last block of `blocks` that may carry a breakpoint (not a thinking block, not an
/// empty text block); none when no block may.
fn mark_last_cacheable(blocks: &mut [Value]) {
    let cacheable = |block: &Value| match block.get("type").and_then(Value::as_str) {
        Some("thinking" | "redacted_thinking") | None => false,
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty()),
        Some(_) => true,
    };
    if let Some(block) = blocks.iter_mut().rev().find(|b| cacheable(b)) {
        block["cache_control"] = breakpoint();
    }
}

/// The conversation as Anthropic messages, consecutive same-role entries merged; the last of
/// the `stable` leading messages ends with a breakpoint.
fn messages(messages: &[Message], stable: usize) -> Vec<Value> {
    let last_stable = stable.min(messages.len()).checked_sub(1);
    let entries = messages.iter().map(|message| match message {
        Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
        // An `image` block with a base64 source per image.
        Message::Images { images } => (
            "user",
            images
                .iter()
                .map(|image| {
                    json!({
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": image.media_type,
                            "data": image.base64(),
                        },
                    })
                })
                .collect(),
        ),
        Message::Assistant {
            text,
            tool_calls,
            echo,
        } => {
            // The thinking blocks first, as returned; the API refuses an empty text block.
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
            let thinking = echo.items().iter().cloned();
            (
                "assistant",
                thinking.chain(text_block).chain(uses).collect(),
            )
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
    });
    let entries = entries.enumerate().map(|(index, (role, mut blocks))| {
        if Some(index) == last_stable {
            mark_last_cacheable(&mut blocks);
        }
        (role, blocks)
    });
    transport::merged_by_role(entries, "content")
}

#[derive(Deserialize)]
struct MessagesResponse {
    /// Kept raw: thinking blocks go back exactly as they came.
    #[serde(default, deserialize_with = "null_as_default")]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Count,
    #[serde(default)]
    cache_read_input_tokens: Count,
}

/// Reads a Messages answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: MessagesResponse =
        http::read_answer(bytes, "Anthropic response is not a messages object")?;
    // Anthropic's `input_tokens` excludes cache reads and writes; ours counts every input token,
    // with the cache reads and the cache writes as its two cached subsets.
    let usage = reported::usage(
        "anthropic",
        parsed.usage.map(|u| {
            let known = |count: Count| match count {
                Count::Known(n) => n,
                _ => 0,
            };
            Report {
                input: u
                    .input_tokens
                    .saturating_add(known(u.cache_creation_input_tokens))
                    .saturating_add(known(u.cache_read_input_tokens)),
                output: u.output_tokens,
                cached: u.cache_read_input_tokens,
                written: u.cache_creation_input_tokens,
            }
        }),
    );

    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for block in parsed.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => {
                let field = |name: &str| {
                    block
                        .get(name)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                tool_calls.push(ToolCall {
                    id: field("id"),
                    name: field("name"),
                    arguments: ToolArguments::from_json_value(
                        block.get("input").cloned().unwrap_or(Value::Null),
                    ),
                });
            }
            Some("thinking" | "redacted_thinking") => thinking.push(block),
            // Any block type added later: not ours to read.
            _ => {}
        }
    }
    // Only a turn that called tools is sent back; its thinking goes with it.
    let echo = if tool_calls.is_empty() {
        ProviderEcho::default()
    } else {
        ProviderEcho::new(thinking)
    };

    let stop = match parsed.stop_reason.as_deref() {
        Some("refusal") => StopReason::Refused,
        Some("max_tokens") => StopReason::Length,
        _ => http::finished(&tool_calls),
    };
    let output = (stop != StopReason::Refused && !text.is_empty()).then_some(text);
    Ok(ModelResponse {
        tool_calls,
        output,
        usage,
        stop,
        echo,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::MockServer;

    use super::*;
    use crate::model::test_support::*;
    use crate::model::{CacheHints, Usage};

    fn model_for(server: &MockServer) -> AnthropicModel {
        AnthropicModel::new(
            "claude-sonnet-4-5",
            &Secret::new("sk-ant-test"),
            &server.uri(),
        )
        .expect("model")
    }

    /// Where the model posts, with the headers it must send.
    const AT: (&str, &[(&str, &str)]) = (
        "/v1/messages",
        &[
            ("x-api-key", "sk-ant-test"),
            ("anthropic-version", "2023-06-01"),
        ],
    );

    fn message(content: Value, stop_reason: &str) -> Value {
        json!({
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {
                "input_tokens": 50,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 1800,
                "output_tokens": 90
            }
        })
    }

    fn final_answer() -> Value {
        message(json!([{"type": "text", "text": VALID_REPLY}]), "end_turn")
    }

    #[tokio::test]
    async fn system_4_anthropic_tool_step_caches_the_system_block_and_sends_tools_auto_and_output_config()
     {
        let (body, _server) = only_first_step_body(AT, final_answer(), model_for).await;
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 400,
                "temperature": 0.3,
                "system": [{
                    "type": "text",
                    "text": SYSTEM,
                    "cache_control": {"type": "ephemeral"}
                }],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": CONTACT_TEXT}]}
                ],
                "tools": [{
                    "name": "send_flow",
                    "description": "Sends the course brochure.",
                    "input_schema": send_flow_tool().parameters,
                    "cache_control": {"type": "ephemeral"}
                }],
                "tool_choice": {"type": "auto"},
                "output_config": {
                    "format": {
                        "type": "json_schema",
                        "schema": wire_schema::for_anthropic(&agent_reply_schema())
                    }
                }
            })
        );
    }

    #[tokio::test]
    async fn system_4_anthropic_final_step_sends_the_tools_with_tool_choice_none() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(&model_for(&server), &first_step(ToolChoice::None), &server).await;
        assert_eq!(body["tool_choice"], json!({"type": "none"}));
        assert_eq!(body["tools"][0]["name"], json!("send_flow"));
        assert_eq!(
            body["output_config"]["format"]["schema"],
            wire_schema::for_anthropic(&agent_reply_schema())
        );
    }

    /// A turn with two history messages the previous turn sent, then the contact's message.
    fn with_history(stable_messages: usize) -> ModelRequest {
        let mut request = first_step(ToolChoice::Auto);
        request.messages = vec![
            Message::User {
                text: "[history] Hi".into(),
            },
            Message::Assistant {
                text: Some("Hello! How can I help?".into()),
                tool_calls: vec![],
                echo: Default::default(),
            },
            Message::User {
                text: CONTACT_TEXT.into(),
            },
        ];
        request.cache = CacheHints {
            key: None,
            stable_messages,
        };
        request
    }

    /// Every `cache_control` in `body`, wherever it sits.
    fn breakpoints(body: &Value) -> usize {
        match body {
            Value::Object(map) => {
                usize::from(map.contains_key("cache_control"))
                    + map.values().map(breakpoints).sum::<usize>()
            }
            Value::Array(items) => items.iter().map(breakpoints).sum(),
            _ => 0,
        }
    }

    #[tokio::test]
    async fn cache_anthropic_breakpoints_end_the_tools_the_system_and_the_stable_history() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(&model_for(&server), &with_history(2), &server).await;

        let ephemeral = json!({"type": "ephemeral"});
        assert_eq!(body["tools"][0]["cache_control"], ephemeral);
        assert_eq!(body["system"][0]["cache_control"], ephemeral);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "[history] Hi"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Hello! How can I help?", "cache_control": ephemeral}
                ]},
                {"role": "user", "content": [{"type": "text", "text": CONTACT_TEXT}]}
            ])
        );
        assert_eq!(breakpoints(&body), 3, "never more than Anthropic's 4");
    }

    #[tokio::test]
    async fn cache_anthropic_without_stable_history_marks_no_message_and_stays_within_four() {
        let model = AnthropicModel::new("claude-haiku-4-5", &Secret::new("k"), DEFAULT_BASE_URL)
            .expect("model");
        let body = model.request_body(&with_history(0));
        assert!(!body["messages"].to_string().contains("cache_control"));
        assert_eq!(breakpoints(&body), 2);
        // A count beyond the messages marks the last one; a final step keeps the tools' mark.
        let mut request = with_history(9);
        request.tool_choice = ToolChoice::None;
        let body = model.request_body(&request);
        assert_eq!(
            body["messages"][2]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["tools"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(breakpoints(&body), 3);
        // No tools: the system block and the history only.
        let mut request = with_history(2);
        request.tools = std::sync::Arc::from([]);
        assert_eq!(breakpoints(&model.request_body(&request)), 2);
    }

    #[test]
    fn cache_anthropic_never_marks_a_thinking_block_or_an_empty_text() {
        let mut blocks = vec![
            json!({"type": "tool_use", "id": "t", "name": "n", "input": {}}),
            json!({"type": "text", "text": ""}),
            json!({"type": "thinking", "thinking": "...", "signature": "s"}),
        ];
        mark_last_cacheable(&mut blocks);
        assert_eq!(blocks[0]["cache_control"], json!({"type": "ephemeral"}));
        assert!(blocks[1].get("cache_control").is_none());
        assert!(blocks[2].get("cache_control").is_none());
    }

    #[test]
    fn usage_anthropic_malformed_cache_counts_are_unknown_never_a_failed_turn() {
        let mut answer = final_answer();
        answer["usage"]["cache_read_input_tokens"] = json!("1800");
        answer["usage"]["cache_creation_input_tokens"] = json!(120);
        let usage = parsed(parse_response, &answer).usage;
        assert_eq!(
            usage,
            Usage {
                input_tokens: 50 + 120,
                output_tokens: 90,
                cached_tokens: 0,
                cache_write_tokens: 120
            }
        );
        let mut answer = final_answer();
        answer["usage"] = Value::Null;
        assert_eq!(parsed(parse_response, &answer).usage, Usage::default());
    }

    #[tokio::test]
    async fn anthropic_temperature_above_one_is_clamped_to_its_range() {
        let mut request = first_step(ToolChoice::Auto);
        request.temperature = 1.5;
        let model = AnthropicModel::new("claude-haiku-4-5", &Secret::new("k"), DEFAULT_BASE_URL)
            .expect("model");

        assert_eq!(model.request_body(&request)["temperature"], json!(1.0));
    }

    #[tokio::test]
    async fn anthropic_step_without_tools_omits_tools_and_tool_choice() {
        let server = answering_at(AT, 200, final_answer()).await;
        let request = tool_less_step(ToolChoice::None);

        let body = body_sent(&model_for(&server), &request, &server).await;
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[tokio::test]
    async fn system_4_anthropic_replays_tool_use_blocks_and_all_results_in_one_user_message() {
        let server = answering_at(AT, 200, final_answer()).await;
        let mut request = second_step();
        // A server note after the results joins the same user message, after the results.
        request.messages.push(Message::User {
            text: "[server note]".into(),
        });

        let body = body_sent(&model_for(&server), &request, &server).await;
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": CONTACT_TEXT}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_a", "name": "send_flow",
                     "input": {"id": "brochure"}},
                    {"type": "tool_use", "id": "call_b", "name": "get_contact", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a",
                     "content": "{\"staged\":true}", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "call_b",
                     "content": "{\"error\":\"invalid_arguments\"}", "is_error": true},
                    {"type": "text", "text": "[server note]"}
                ]}
            ])
        );
    }

    #[tokio::test]
    async fn anthropic_final_answer_returns_text_and_counts_cache_reads_and_writes_as_input() {
        let mut answer = final_answer();
        answer["usage"]["cache_creation_input_tokens"] = json!(100);
        let server = answering_at(AT, 200, answer).await;

        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(
            response,
            final_response(Usage {
                input_tokens: 50 + 100 + 1800,
                output_tokens: 90,
                cached_tokens: 1800,
                cache_write_tokens: 100
            })
        );
    }

    #[tokio::test]
    async fn anthropic_tool_use_blocks_become_calls_with_object_arguments() {
        let server = answering_at(
            AT,
            200,
            message(
                json!([
                    {"type": "text", "text": "Let me send that."},
                    {"type": "tool_use", "id": "toolu_1", "name": "send_flow",
                     "input": {"id": "brochure"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "send_flow", "input": "oops"}
                ]),
                "tool_use",
            ),
        )
        .await;

        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(response.stop, StopReason::ToolCalls);
        assert_eq!(
            response.tool_calls,
            vec![
                call(
                    "toolu_1",
                    "send_flow",
                    ToolArguments::Valid(json!({"id": "brochure"}))
                ),
                call("toolu_2", "send_flow", ToolArguments::Invalid { length: 4 }),
            ]
        );
    }

    #[tokio::test]
    async fn anthropic_refusal_is_refused_without_output_and_max_tokens_is_length() {
        let refused = parsed(
            parse_response,
            &message(json!([{"type": "text", "text": "I can't."}]), "refusal"),
        );
        assert_eq!(refused.stop, StopReason::Refused);
        assert_eq!(refused.output, None);

        let cut = parsed(
            parse_response,
            &message(
                json!([{"type": "text", "text": "{\"messages\":"}]),
                "max_tokens",
            ),
        );
        assert_eq!(cut.stop, StopReason::Length);
    }

    #[tokio::test]
    async fn anthropic_unknown_block_types_are_skipped() {
        let response = parsed(
            parse_response,
            &message(
                json!([
                    {"type": "thinking", "thinking": "...", "signature": "x"},
                    {"type": "text", "text": VALID_REPLY}
                ]),
                "end_turn",
            ),
        );
        assert_eq!(response.output.as_deref(), Some(VALID_REPLY));
    }

    fn anthropic_error(kind: &str, message: &str) -> Value {
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    #[tokio::test]
    async fn anthropic_429_is_rate_limited_after_one_retry() {
        let body = anthropic_error("rate_limit_error", "slow down");
        let answer = error_answer(429, Some(("retry-after", "0")), body);

        let (err, sent) = failed_step(answer, model_for).await;

        assert_eq!(err, ModelError::RateLimited);
        assert_eq!(sent, 2);
    }

    #[tokio::test]
    async fn anthropic_529_overloaded_is_an_http_error_with_its_type() {
        let body = anthropic_error("overloaded_error", "Overloaded");
        let answer = error_answer(529, Some(("retry-after-ms", "5")), body);

        let (err, sent) = failed_step(answer, model_for).await;

        assert_eq!(err, http_error(529, "overloaded_error"));
        assert_eq!(sent, 2);
    }

    #[tokio::test]
    async fn anthropic_malformed_body_is_malformed() {
        let (err, _) = failed_step(garbled_answer("not json at all"), model_for).await;

        assert!(matches!(err, ModelError::Malformed(_)), "{err:?}");
    }
}
