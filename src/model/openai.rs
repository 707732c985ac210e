//! OpenAI Chat Completions, and every server that speaks it (vLLM, Groq, OpenRouter…) through
//! `OPENAI_BASE_URL`.
//!
//! Invariants:
//! - The structured output (`response_format: json_schema`, strict) is asked for on every step
//!   of a model that has it, with OpenAI's wire copy of the schema (`wire_schema::for_openai`).
//! - `temperature` is sent only as the model's capabilities allow (`capabilities`): never to a
//!   reasoning model, only when the operator set one for a model the registry does not know.
//!   The token bound is always `max_completion_tokens`.
//! - `AGENT_REASONING_EFFORT` goes as `reasoning_effort` to a model that takes it (the start
//!   refuses it for any other, `reasoning::check`); its reasoning tokens are part of
//!   `completion_tokens`, so they are charged as output.
//! - Tools go out with `tool_choice: "auto"` and `parallel_tool_calls` left out (its default,
//!   true): a step may make several calls (012). They go out without `strict`, because OpenAI's
//!   strict function schemas and parallel calls do not mix; every argument is checked against
//!   the tenant's configured ids where it is staged, so nothing unconfigured is written
//!   (`crate::tools`). The answer's `response_format` stays strict. On the final step
//!   (`ToolChoice::None`) the official API (`api.openai.com`) gets the same tools with
//!   `tool_choice: "none"`, which it honours, so the request's prefix (tools first) is the one
//!   its prompt cache already holds; a compatible server gets no tools at all, as several
//!   ignore `tool_choice` and would still call a tool.
//! - Prompt caching is automatic; the official API also gets `prompt_cache_key` (the request's
//!   `CacheHints::key`, a hash of the config in force) so that the requests sharing a prefix
//!   reach the same cache. Compatible servers get no such key: some refuse unknown fields.
//!   The cached input is read from `usage.prompt_tokens_details.cached_tokens` (a subset of
//!   `prompt_tokens`); OpenAI bills no cache write.
//! - A call's `arguments` arrive as JSON text that may be anything; only an object is valid, and
//!   an invalid one keeps only its length.
//! - A refusal's text is never returned as output: it is not an AgentReply.
//! - Compatible servers are read tolerantly: `tool_calls: null`, no `usage`, `content: null`
//!   beside tool calls.

use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::{Value, json};

use super::capabilities::EffortControl;
use super::http::{self, Endpoint, HttpModel, Wire, WireToolCall};
use super::reported::{self, Count, Report};
use super::transport::{self, null_as_default};
use super::{
    Message, ModelError, ModelRequest, ModelResponse, StopReason, ToolChoice, wire_schema,
};
use crate::ids::Secret;

/// The default `OPENAI_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A model behind an OpenAI-compatible Chat Completions endpoint.
pub type OpenAiModel = HttpModel<OpenAi>;

/// The host of the official API: what is known to take `tool_choice: "none"` and
/// `prompt_cache_key`.
const OFFICIAL_HOST: &str = "api.openai.com";

/// The Chat Completions wire format.
pub struct OpenAi {
    /// The endpoint is OpenAI's own API (not a compatible server).
    official: bool,
}

impl OpenAiModel {
    /// `base_url` is `OPENAI_BASE_URL` (with or without a trailing slash). Posts to
    /// `{base}/chat/completions` with an `Authorization: Bearer` header, marked sensitive.
    pub fn new(model: &str, api_key: &Secret, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "OPENAI_BASE_URL")?;
        let official =
            reqwest::Url::parse(&base).is_ok_and(|url| url.host_str() == Some(OFFICIAL_HOST));
        Self::speaking(model, api_key, &base, official)
    }

    /// A model at `base` (normalised), speaking as the official API does or not.
    pub(crate) fn speaking(
        model: &str,
        api_key: &Secret,
        base: &str,
        official: bool,
    ) -> Result<Self, ModelError> {
        let bearer = format!("Bearer {}", api_key.expose());
        let headers = transport::secret_headers(AUTHORIZATION, &bearer, "OPENAI_API_KEY")?;
        let url = format!("{base}/chat/completions");
        let endpoint = Endpoint::new("openai", model, model, url, headers)?;
        Ok(HttpModel::from_parts(
            endpoint,
            OpenAi { official },
            parse_response,
        ))
    }
}

impl Wire for OpenAi {
    fn request_body(&self, endpoint: &Endpoint, request: &ModelRequest) -> Value {
        let capabilities = &endpoint.capabilities;
        let mut body = json!({
            "model": endpoint.model,
            "messages": http::chat_messages(request, append_message),
            "max_completion_tokens": request.max_output_tokens,
        });
        if capabilities.structured_output {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_name,
                    "schema": wire_schema::for_openai(
                        &request.output_schema,
                        capabilities.schema_bounds,
                    ),
                    "strict": true,
                },
            });
        }
        if let Some(temperature) = endpoint.temperature(request) {
            body["temperature"] = temperature;
        }
        if let (Some(effort), EffortControl::OpenAi(_)) =
            (endpoint.effort, capabilities.reasoning_effort)
        {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        if let (true, Some(key)) = (self.official, &request.cache.key) {
            body["prompt_cache_key"] = json!(&**key);
        }
        let offer_tools = request.tool_choice == ToolChoice::Auto || self.official;
        if offer_tools && !request.tools.is_empty() {
            let tools: Vec<Value> = request.tools.iter().map(http::function_tool).collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match request.tool_choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
            };
        }
        body
    }
}

fn append_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text } => out.push(json!({"role": "user", "content": text})),
        // Chat Completions: a user message whose content is a list of `image_url` parts.
        Message::Images { images } => out.push(json!({
            "role": "user",
            "content": images
                .iter()
                .map(|image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}))
                .collect::<Vec<_>>(),
        })),
        // OpenAI's Chat Completions returns no reasoning items to echo.
        Message::Assistant {
            text, tool_calls, ..
        } => {
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
    #[serde(default, deserialize_with = "null_as_default")]
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
    /// Some compatible servers send `null` for "no calls".
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "null_as_default")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    completion_tokens: u64,
    /// Kept raw: a compatible server's odd shape here must not fail the answer.
    #[serde(default)]
    prompt_tokens_details: Value,
}

#[derive(Deserialize)]
struct PromptDetails {
    /// The input served from the prompt cache; read leniently (`reported::Count`).
    #[serde(default)]
    cached_tokens: Count,
}

/// Reads a Chat Completions answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: ChatResponse =
        http::read_answer(bytes, "OpenAI response is not a chat completion object")?;
    // `prompt_tokens` counts every input token, the cached ones included; OpenAI bills no
    // cache write, so none is reported.
    let usage = reported::usage(
        "openai",
        parsed.usage.map(|u| Report {
            input: u.prompt_tokens,
            output: u.completion_tokens,
            cached: match u.prompt_tokens_details {
                Value::Null => Count::Absent,
                details => serde_json::from_value::<PromptDetails>(details)
                    .map_or(Count::Malformed, |d| d.cached_tokens),
            },
            written: Count::Absent,
        }),
    );
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::Malformed("OpenAI response has no choices".into()))?;

    // Some compatible servers omit the id; the loop still needs one to pair the result.
    let tool_calls = http::calls(choice.message.tool_calls, |index, id| {
        id.unwrap_or_else(|| format!("call_{index}"))
    });

    let refused = choice.message.refusal.is_some_and(|r| !r.is_empty())
        || choice.finish_reason.as_deref() == Some("content_filter");
    let stop = if refused {
        StopReason::Refused
    } else if choice.finish_reason.as_deref() == Some("length") {
        StopReason::Length
    } else {
        http::finished(&tool_calls)
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
        echo: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::{MockServer, ResponseTemplate};

    use super::*;
    use crate::model::test_support::*;
    use crate::model::{CacheHints, Model, ToolArguments, Usage};

    fn model_for(server: &MockServer) -> OpenAiModel {
        OpenAiModel::new(
            "gpt-4.1-mini",
            &Secret::new("sk-test-key"),
            &format!("{}/v1/", server.uri()),
        )
        .expect("model")
    }

    /// Where the model posts (no header is checked).
    const AT: (&str, &[(&str, &str)]) = ("/v1/chat/completions", &[]);

    fn completion(message: Value, finish_reason: &str) -> Value {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4.1-mini-2025-04-14",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": 1200,
                "completion_tokens": 80,
                "total_tokens": 1280,
                "prompt_tokens_details": {"cached_tokens": 1024}
            }
        })
    }

    fn final_answer() -> Value {
        completion(
            json!({"role": "assistant", "content": VALID_REPLY, "refusal": null}),
            "stop",
        )
    }

    #[tokio::test]
    async fn system_4_openai_tool_step_allows_parallel_calls_with_auto_choice_and_json_schema() {
        let (body, server) = only_first_step_body(AT, final_answer(), model_for).await;
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1-mini",
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
                "tool_choice": "auto",
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "agent_reply",
                        "schema": agent_reply_schema(),
                        "strict": true
                    }
                },
                "max_completion_tokens": 400,
                "temperature": 0.3
            })
        );
        let headers = first_headers(&server).await;
        assert_eq!(
            header(&headers, "authorization"),
            Some("Bearer sk-test-key")
        );
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
    }

    #[tokio::test]
    async fn system_4_openai_final_step_omits_tools_and_tool_choice_but_keeps_the_schema() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = &body_sent(&model_for(&server), &first_step(ToolChoice::None), &server).await;
        for key in ["tools", "tool_choice", "parallel_tool_calls"] {
            assert!(body.get(key).is_none(), "{key} must be omitted: {body}");
        }
        assert_eq!(
            body["response_format"]["json_schema"]["strict"],
            json!(true)
        );
        assert_eq!(
            body["response_format"]["json_schema"]["schema"],
            agent_reply_schema()
        );
    }

    /// The model at the wiremock server, speaking as the official API.
    fn official_model_for(server: &MockServer) -> OpenAiModel {
        let base = format!("{}/v1", server.uri());
        OpenAiModel::speaking("gpt-4.1-mini", &Secret::new("sk-test-key"), &base, true)
            .expect("model")
    }

    fn keyed(mut request: ModelRequest) -> ModelRequest {
        request.cache = CacheHints {
            key: Some("3f2a9c41d07be815".into()),
            stable_messages: 0,
        };
        request
    }

    #[test]
    fn openai_the_official_api_is_known_by_its_host_alone() {
        let key = Secret::new("k");
        for (base, official) in [
            ("https://api.openai.com/v1", true),
            ("https://api.openai.com/v1/", true),
            ("https://openrouter.ai/api/v1", false),
            ("http://localhost:8000/v1", false),
            ("https://api.openai.com.example.test/v1", false),
        ] {
            let model = OpenAiModel::new("gpt-4.1-mini", &key, base).expect("model");
            let body = model.request_body(&keyed(first_step(ToolChoice::None)));
            assert_eq!(
                body.get("prompt_cache_key").is_some(),
                official,
                "{base}: {body}"
            );
        }
    }

    #[tokio::test]
    async fn cache_openai_official_final_step_keeps_the_tools_with_tool_choice_none_and_the_key() {
        let server = answering_at(AT, 200, final_answer()).await;
        let model = official_model_for(&server);

        for choice in [ToolChoice::Auto, ToolChoice::None] {
            model.step(&keyed(first_step(choice))).await.expect("step");
        }
        let bodies = received_bodies(&server).await;
        let (tool_step, final_step) = (&bodies[0], &bodies[1]);

        assert_eq!(final_step["tool_choice"], json!("none"));
        assert_eq!(tool_step["tool_choice"], json!("auto"));
        // Everything before the conversation is what the tool step sent: the cached prefix.
        for key in ["tools", "response_format", "parallel_tool_calls"] {
            assert_eq!(final_step[key], tool_step[key], "{key}");
        }
        assert_eq!(final_step["messages"][0], tool_step["messages"][0]);
        assert_eq!(final_step["prompt_cache_key"], json!("3f2a9c41d07be815"));
        assert_eq!(tool_step["prompt_cache_key"], json!("3f2a9c41d07be815"));
    }

    #[tokio::test]
    async fn cache_openai_compatible_server_gets_no_prompt_cache_key() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(
            &model_for(&server),
            &keyed(first_step(ToolChoice::Auto)),
            &server,
        )
        .await;
        assert!(body.get("prompt_cache_key").is_none(), "{body}");
        // Without a key, the official API gets none either.
        let body = body_sent(
            &official_model_for(&server),
            &first_step(ToolChoice::Auto),
            &server,
        )
        .await;
        assert!(body.get("prompt_cache_key").is_none(), "{body}");
    }

    #[tokio::test]
    async fn openai_step_without_tools_sends_no_empty_tools_array() {
        let server = answering_at(AT, 200, final_answer()).await;
        let request = tool_less_step(ToolChoice::Auto);

        let body = body_sent(&model_for(&server), &request, &server).await;
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[tokio::test]
    async fn system_4_openai_replays_tool_calls_as_strings_and_one_tool_message_per_result() {
        let server = answering_at(AT, 200, final_answer()).await;

        let body = body_sent(&model_for(&server), &second_step(), &server).await;
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": CONTACT_TEXT},
                {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "send_flow", "arguments": "{\"id\":\"brochure\"}"}
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_contact", "arguments": "{}"}
                        }
                    ]
                },
                {"role": "tool", "tool_call_id": "call_a", "content": "{\"staged\":true}"},
                {
                    "role": "tool",
                    "tool_call_id": "call_b",
                    "content": "{\"error\":\"invalid_arguments\"}"
                }
            ])
        );
    }

    #[tokio::test]
    async fn openai_final_answer_returns_output_and_usage_with_cached_tokens() {
        let server = answering_at(AT, 200, final_answer()).await;
        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(
            response,
            final_response(Usage {
                input_tokens: 1200,
                output_tokens: 80,
                cached_tokens: 1024,
                cache_write_tokens: 0,
            })
        );
    }

    #[tokio::test]
    async fn c5_openai_tool_calls_parse_valid_objects_and_keep_only_the_length_of_invalid_ones() {
        let bad_arguments = "{\"id\": \"brochure\""; // cut short: not JSON
        let server = answering_at(
            AT,
            200,
            completion(
                json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "send_flow", "arguments": "{\"id\":\"brochure\"}"}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "send_flow", "arguments": bad_arguments}},
                        {"id": "call_3", "type": "function",
                         "function": {"name": "send_flow", "arguments": "[1,2]"}}
                    ]
                }),
                "tool_calls",
            ),
        )
        .await;
        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(response.stop, StopReason::ToolCalls);
        assert_eq!(response.output, None);
        assert_eq!(
            response.tool_calls,
            vec![
                call(
                    "call_1",
                    "send_flow",
                    ToolArguments::Valid(json!({"id": "brochure"}))
                ),
                call(
                    "call_2",
                    "send_flow",
                    ToolArguments::Invalid {
                        length: bad_arguments.len()
                    }
                ),
                call("call_3", "send_flow", ToolArguments::Invalid { length: 5 }),
            ]
        );
    }

    #[tokio::test]
    async fn openai_refusal_is_refused_and_its_text_is_not_output() {
        let server = answering_at(
            AT,
            200,
            completion(
                json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
                "stop",
            ),
        )
        .await;

        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(response.stop, StopReason::Refused);
        assert_eq!(response.output, None);
    }

    /// The usage read from a final answer whose `usage` is `usage`.
    fn usage_of(usage: Value) -> Usage {
        let mut body = final_answer();
        body["usage"] = usage;
        parsed(parse_response, &body).usage
    }

    #[test]
    fn usage_openai_bad_cache_counts_are_unknown_or_held_to_the_input_never_a_failed_turn() {
        let counts = |usage: Usage| (usage.input_tokens, usage.cached_tokens);
        // Malformed cached_tokens, or a details object of the wrong shape: 0 cached.
        for details in [
            json!({"cached_tokens": "1024"}),
            json!({"cached_tokens": -1}),
            json!("n/a"),
            json!({"cached_tokens": null}),
        ] {
            let usage = usage_of(json!({
                "prompt_tokens": 1200, "completion_tokens": 80, "prompt_tokens_details": details
            }));
            assert_eq!(counts(usage), (1200, 0), "{details}");
        }
        // More cached than the prompt held: held to the prompt.
        let usage = usage_of(json!({
            "prompt_tokens": 1200, "completion_tokens": 80,
            "prompt_tokens_details": {"cached_tokens": 5000}
        }));
        assert_eq!(counts(usage), (1200, 1200));
        // No usage at all (some compatible servers): no usage recorded.
        assert_eq!(usage_of(Value::Null), Usage::default());
    }

    fn parsed_completion(content: &str, finish_reason: &str) -> ModelResponse {
        let body = completion(
            json!({"role": "assistant", "content": content}),
            finish_reason,
        );
        parsed(parse_response, &body)
    }

    #[tokio::test]
    async fn openai_content_filter_is_refused_and_length_is_length() {
        assert_eq!(
            parsed_completion("{", "content_filter").stop,
            StopReason::Refused
        );

        let cut = parsed_completion("{\"messages\":[\"The pot", "length");
        assert_eq!(cut.stop, StopReason::Length);
        assert_eq!(cut.output.as_deref(), Some("{\"messages\":[\"The pot"));
    }

    fn openai_error(kind: &str) -> Value {
        json!({"error": {"message": "Please try again later.", "type": kind, "param": null, "code": null}})
    }

    /// OpenAI's error `status` of type `kind`, asking to retry in 5 ms: the step's error and
    /// how many requests were made.
    async fn failed_with_a_short_retry(status: u16, kind: &str) -> (ModelError, usize) {
        let answer = error_answer(status, Some(("retry-after-ms", "5")), openai_error(kind));
        failed_step(answer, model_for).await
    }

    #[tokio::test]
    async fn openai_429_is_retried_once_then_reported_as_rate_limited() {
        let (err, sent) = failed_with_a_short_retry(429, "rate_limit_exceeded").await;

        assert_eq!(err, ModelError::RateLimited);
        assert_eq!(sent, 2);
    }

    #[tokio::test]
    async fn openai_one_429_then_success_returns_the_answer() {
        let server = MockServer::start().await;
        let answer = ResponseTemplate::new(429).insert_header("retry-after-ms", "5");
        answer_next_posts(&server, 1, answer).await;
        answer_at(&server, AT, 200, final_answer()).await;

        let response = first_step_answer(&model_for(&server)).await;

        assert_eq!(response.output.as_deref(), Some(VALID_REPLY));
        let bodies = received_bodies(&server).await;
        assert_eq!(bodies.len(), 2);
        assert_eq!(bodies[0], bodies[1], "the retry resends the same body");
    }

    #[tokio::test]
    async fn openai_429_asking_for_more_than_a_second_is_not_retried() {
        let answer = ResponseTemplate::new(429).insert_header("retry-after", "20");

        let (err, sent) = failed_step(answer, model_for).await;

        assert_eq!(err, ModelError::RateLimited);
        assert_eq!(sent, 1);
    }

    #[tokio::test]
    async fn openai_5xx_is_retried_once_then_reports_status_and_error_type() {
        let (err, sent) = failed_with_a_short_retry(503, "server_error").await;

        assert_eq!(err, http_error(503, "server_error"));
        assert_eq!(sent, 2);
    }

    #[tokio::test]
    async fn c5_openai_4xx_is_not_retried_and_never_quotes_the_error_message() {
        let body = json!({"error": {
            "message": "Invalid value in messages[1]: How much is the pottery course?",
            "type": "invalid_request_error",
            "param": "messages",
            "code": null
        }});
        let server = answering_at(AT, 400, body).await;

        let err = first_step_error(&model_for(&server)).await;

        assert_eq!(err, http_error(400, "invalid_request_error"));
        assert!(!err.to_string().contains("pottery"));
        assert_eq!(received_bodies(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn openai_malformed_body_is_malformed() {
        let (err, _) = failed_step(garbled_answer("{\"choices\": [oops"), model_for).await;

        assert!(matches!(err, ModelError::Malformed(_)), "{err:?}");
    }

    #[tokio::test]
    async fn openai_response_without_choices_is_malformed() {
        let err = parse_response(br#"{"choices": [], "usage": null}"#).expect_err("no choices");
        assert!(matches!(err, ModelError::Malformed(_)), "{err:?}");
    }

    #[tokio::test]
    async fn openai_unreachable_server_is_a_transport_error() {
        let model =
            OpenAiModel::new("gpt-4.1-mini", &Secret::new("k"), &closed_port_url()).expect("model");

        let err = first_step_error(&model).await;

        assert!(matches!(err, ModelError::Transport(_)), "{err:?}");
    }
}
