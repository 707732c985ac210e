//! Google Gemini through the Gemini API's `generateContent`
//! (`POST {GOOGLE_BASE_URL}/models/{model}:generateContent`, key in `x-goog-api-key`).
//!
//! Invariants:
//! - The system prompt is the `systemInstruction`; the conversation is `contents` of role `user`
//!   and `model`, consecutive entries of one role merged into one content.
//! - Tools are `functionDeclarations` with their JSON Schema as `parametersJsonSchema`. Steps
//!   one to three set `toolConfig.functionCallingConfig.mode: AUTO`; the reply step sets `NONE`
//!   (the declarations stay, as the history holds their calls) on a model that takes a response
//!   schema beside tools, and omits the tools on one that does not. Nothing limits an answer to
//!   one `functionCall` part: a step may make several calls (012).
//! - Every call is answered in the next `user` content by a `functionResponse` of the same name,
//!   in call order, first in that content: `{"output": …}`, or `{"error": …}` for a refused call.
//!   A call's `id`, when Gemini sends one, is echoed on the replayed call and its response; a
//!   call without one gets an id from its position, which is never sent back.
//! - The reply schema is `generationConfig.responseJsonSchema` in Gemini's subset
//!   (`wire_schema::for_google`), with `responseMimeType: application/json`. Gemini 3 and later
//!   take it on every step; Gemini 2.5 refuses a JSON response beside function declarations, so
//!   it gets the schema only on a step without tools (as Ollama does).
//! - A turn that called tools is replayed with the model's parts exactly as returned when they
//!   carry a `thoughtSignature` (Gemini's thought signatures must come back unchanged). Thought
//!   parts (`thought: true`) are never output.
//! - A blocked prompt (`promptFeedback.blockReason`) and any finish other than `STOP` or
//!   `MAX_TOKENS` (safety, recitation, blocklist, prohibited content, a malformed call…) is
//!   `Refused`: no output and no tool calls, so the turn escalates and never replies with it.
//! - Usage: input is `promptTokenCount` (+ `toolUsePromptTokenCount`), the cached subset
//!   `cachedContentTokenCount` (read leniently, held to the input: `reported`), output
//!   `candidatesTokenCount` + `thoughtsTokenCount` (thinking is billed as output).
//! - Prompt caching is implicit (Gemini 2.5 and later) on a repeated prefix. What comes first
//!   is config alone: the `systemInstruction` (the static prefix) and the tool declarations;
//!   the `contents` follow, history first. The JSON keys go out in serde_json's sorted order;
//!   the API reads them as fields, so their order is not the prompt's.
//! - `AGENT_REASONING_EFFORT` goes as `generationConfig.thinkingConfig`: `thinkingBudget` on
//!   Gemini 2.5, `thinkingLevel` on 3 and later (`capabilities::EffortControl`).

use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::capabilities::EffortControl;
use super::http::{self, Endpoint, HttpModel, Wire};
use super::reasoning::{self, Effort};
use super::reported::{self, Count, Report};
use super::transport::{self, null_as_default};
use super::{
    Message, ModelError, ModelRequest, ModelResponse, ProviderEcho, StopReason, ToolArguments,
    ToolCall, ToolChoice, wire_schema,
};
use crate::ids::Secret;

/// The default `GOOGLE_BASE_URL`: the Gemini API's v1beta, where `responseJsonSchema`,
/// `parametersJsonSchema` and `thinkingConfig` are documented.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The variable holding the key (the one the existing implementation reads).
pub const API_KEY_VAR: &str = "GOOGLE_GENERATIVE_AI_API_KEY";

/// The prefix of an id made from a call's position, for a call Gemini sent without one. Such an
/// id is ours: it is never sent back.
const POSITIONAL_ID_PREFIX: &str = "gemini-call-";

/// A Gemini model behind the Gemini API.
pub type GoogleModel = HttpModel<Google>;

impl GoogleModel {
    /// `base_url` is `GOOGLE_BASE_URL` (with or without a trailing slash). `model` may be given
    /// as `models/<name>`. Posts to `{base}/models/{model}:generateContent` with
    /// `x-goog-api-key`, marked sensitive.
    pub fn new(model: &str, api_key: &Secret, base_url: &str) -> Result<Self, ModelError> {
        let base = transport::normalise_base_url(base_url, "GOOGLE_BASE_URL")?;
        let name = model.strip_prefix("models/").unwrap_or(model);
        // The name goes into the URL's path: only the characters Gemini's model names use.
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        {
            return Err(ModelError::Config(
                "AGENT_MODEL's Gemini model name may hold only letters, digits, '-', '.' and '_'"
                    .into(),
            ));
        }
        let key = HeaderName::from_static("x-goog-api-key");
        let headers = transport::secret_headers(key, api_key.expose(), API_KEY_VAR)?;
        let url = format!("{base}/models/{name}:generateContent");
        let wire = Google {
            schema_with_tools: ["gemini-3", "gemini-4", "gemini-5"]
                .iter()
                .any(|p| name.starts_with(p)),
        };
        let endpoint = Endpoint::new("google", model, name, url, headers)?;
        Ok(HttpModel::from_parts(endpoint, wire, parse_response))
    }
}

/// The `generateContent` wire format.
pub struct Google {
    /// Whether the model takes `responseJsonSchema` beside function declarations (Gemini 3 on).
    schema_with_tools: bool,
}

impl Wire for Google {
    fn request_body(&self, endpoint: &Endpoint, request: &ModelRequest) -> Value {
        let offer_tools = !request.tools.is_empty()
            && (request.tool_choice == ToolChoice::Auto || self.schema_with_tools);
        let mut generation = json!({"maxOutputTokens": request.max_output_tokens});
        if let Some(temperature) = endpoint.temperature(request) {
            generation["temperature"] = temperature;
        }
        if !offer_tools || self.schema_with_tools {
            generation["responseMimeType"] = json!("application/json");
            if endpoint.capabilities.structured_output {
                generation["responseJsonSchema"] = wire_schema::for_google(&request.output_schema);
            }
        }
        if let Some(thinking) = thinking_config(endpoint) {
            generation["thinkingConfig"] = thinking;
        }
        let mut body = json!({
            "systemInstruction": {"parts": [{"text": &*request.system}]},
            "contents": contents(&request.messages),
            "generationConfig": generation,
        });
        if offer_tools {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| http::declaration(tool, "parametersJsonSchema"))
                .collect();
            body["tools"] = json!([{"functionDeclarations": declarations}]);
            let mode = match request.tool_choice {
                ToolChoice::Auto => "AUTO",
                ToolChoice::None => "NONE",
            };
            body["toolConfig"] = json!({"functionCallingConfig": {"mode": mode}});
        }
        body
    }
}

/// `generationConfig.thinkingConfig` for `AGENT_REASONING_EFFORT`, as the model takes it.
fn thinking_config(endpoint: &Endpoint) -> Option<Value> {
    let effort = endpoint.effort?;
    match endpoint.capabilities.reasoning_effort {
        EffortControl::GeminiBudget => {
            Some(json!({"thinkingBudget": reasoning::thinking_budget(effort)}))
        }
        EffortControl::GeminiLevel(_) => Some(json!({"thinkingLevel": thinking_level(effort)})),
        // Refused at start (`reasoning::check`); nothing is sent.
        _ => None,
    }
}

/// SDK `ThinkingLevel`'s values.
fn thinking_level(effort: Effort) -> &'static str {
    match effort {
        Effort::Minimal => "MINIMAL",
        Effort::Low => "LOW",
        Effort::Medium => "MEDIUM",
        Effort::High => "HIGH",
    }
}

/// The id to send back for `id`, or none when it was made from the call's position.
fn wire_id(id: &str) -> Option<&str> {
    (!id.starts_with(POSITIONAL_ID_PREFIX)).then_some(id)
}

/// The conversation as Gemini contents, consecutive same-role entries merged.
fn contents(messages: &[Message]) -> Vec<Value> {
    let entries = messages.iter().map(|message| match message {
            Message::User { text } => ("user", vec![json!({"text": text})]),
            Message::Images { images } => (
                "user",
                images
                    .iter()
                    .map(|image| {
                        json!({"inlineData": {"mimeType": image.media_type, "data": image.base64()}})
                    })
                    .collect(),
            ),
            Message::Assistant {
                text,
                tool_calls,
                echo,
            } => {
                if !echo.is_empty() {
                    ("model", echo.items().to_vec())
                } else {
                    let text_part = text
                        .as_deref()
                        .filter(|t| !t.is_empty())
                        .map(|t| json!({"text": t}));
                    let calls = tool_calls.iter().map(|call| {
                        let mut function_call = json!({
                            "name": call.name,
                            "args": call.arguments.to_replay_value(),
                        });
                        if let Some(id) = wire_id(&call.id) {
                            function_call["id"] = json!(id);
                        }
                        json!({"functionCall": function_call})
                    });
                    ("model", text_part.into_iter().chain(calls).collect())
                }
            }
            Message::ToolResults { results } => (
                "user",
                results
                    .iter()
                    .map(|result| {
                        let key = if result.is_error { "error" } else { "output" };
                        let mut response = json!({
                            "name": result.name,
                            "response": {key: result.content},
                        });
                        if let Some(id) = wire_id(&result.call_id) {
                            response["id"] = json!(id);
                        }
                        json!({"functionResponse": response})
                    })
                    .collect(),
            ),
    });
    transport::merged_by_role(entries, "parts")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerateResponse {
    #[serde(default, deserialize_with = "null_as_default")]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    /// Kept raw: a turn with thought signatures is replayed exactly as it came.
    #[serde(default, deserialize_with = "null_as_default")]
    parts: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default, deserialize_with = "null_as_default")]
    prompt_token_count: u64,
    /// Read leniently (`reported::Count`): a bad count is unknown, never a failed answer.
    #[serde(default)]
    cached_content_token_count: Count,
    #[serde(default, deserialize_with = "null_as_default")]
    candidates_token_count: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    thoughts_token_count: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_use_prompt_token_count: u64,
}

/// Reads a `generateContent` answer. serde's own messages are dropped: they can quote a value.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<ModelResponse, ModelError> {
    let parsed: GenerateResponse =
        http::read_answer(bytes, "Gemini response is not a GenerateContentResponse")?;
    // `promptTokenCount` counts the cached tokens too; implicit caching bills no write.
    let usage = reported::usage(
        "google",
        parsed.usage_metadata.map(|u| Report {
            input: u.prompt_token_count + u.tool_use_prompt_token_count,
            output: u.candidates_token_count + u.thoughts_token_count,
            cached: u.cached_content_token_count,
            written: Count::Absent,
        }),
    );
    let blocked = parsed
        .prompt_feedback
        .and_then(|f| f.block_reason)
        .is_some_and(|r| r != "BLOCKED_REASON_UNSPECIFIED");
    let refused = |usage| ModelResponse {
        usage,
        stop: StopReason::Refused,
        ..ModelResponse::default()
    };
    if blocked {
        return Ok(refused(usage));
    }
    let candidate = parsed
        .candidates
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::Malformed("Gemini response has no candidates".into()))?;
    let stop = match candidate.finish_reason.as_deref() {
        None | Some("STOP" | "FINISH_REASON_UNSPECIFIED") => None,
        Some("MAX_TOKENS") => Some(StopReason::Length),
        // Safety, recitation, language, blocklist, prohibited content, SPII, a malformed or
        // unexpected call, too many calls, and any reason added later: not an answer.
        Some(_) => return Ok(refused(usage)),
    };
    let parts = candidate.content.map(|c| c.parts).unwrap_or_default();

    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut signed = false;
    for part in &parts {
        signed |= part.get("thoughtSignature").is_some();
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        if let Some(call) = part.get("functionCall") {
            let index = tool_calls.len();
            tool_calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{POSITIONAL_ID_PREFIX}{index}")),
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: match call.get("args") {
                    None | Some(Value::Null) => ToolArguments::Valid(Value::Object(Map::new())),
                    Some(args) => ToolArguments::from_json_value(args.clone()),
                },
            });
        }
    }
    let echo = if signed && !tool_calls.is_empty() {
        ProviderEcho::new(parts)
    } else {
        ProviderEcho::default()
    };
    let stop = stop.unwrap_or_else(|| http::finished(&tool_calls));
    Ok(ModelResponse {
        tool_calls,
        output: (!text.is_empty()).then_some(text),
        usage,
        stop,
        echo,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::test_support::*;

    fn model() -> GoogleModel {
        GoogleModel::new(
            "gemini-3-flash-preview",
            &Secret::new("k"),
            DEFAULT_BASE_URL,
        )
        .expect("model")
    }

    /// A final answer whose `usageMetadata.cachedContentTokenCount` is `cached`, of 1,900
    /// prompt tokens: the input and cached tokens read from it.
    fn read_cached(cached: Value) -> (u64, u64) {
        let answer = json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": VALID_REPLY}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1900, "cachedContentTokenCount": cached,
                              "candidatesTokenCount": 70, "totalTokenCount": 1970}
        });
        let usage = parsed(parse_response, &answer).usage;
        (usage.input_tokens, usage.cached_tokens)
    }

    #[test]
    fn usage_google_bad_cached_counts_are_unknown_or_held_to_the_prompt() {
        assert_eq!(read_cached(json!(1024)), (1900, 1024));
        assert_eq!(read_cached(json!("1024")), (1900, 0));
        assert_eq!(read_cached(json!(-5)), (1900, 0));
        assert_eq!(read_cached(json!(9000)), (1900, 1900));
        assert_eq!(read_cached(Value::Null), (1900, 0));
    }

    #[test]
    fn cache_google_the_prefix_before_the_conversation_is_the_config_alone() {
        // Implicit caching reuses a repeated prefix: the system instruction and the tools do
        // not change with the contact or the step; only `contents` does.
        let first = first_step(ToolChoice::Auto);
        let mut reply_step = second_step();
        reply_step.tool_choice = ToolChoice::None;
        let (a, b) = (
            model().request_body(&first),
            model().request_body(&reply_step),
        );
        assert_eq!(a["systemInstruction"], b["systemInstruction"]);
        assert_eq!(a["tools"], b["tools"]);
        assert_ne!(a["contents"], b["contents"]);
        assert_eq!(
            a["systemInstruction"],
            json!({"parts": [{"text": SYSTEM}]}),
            "nothing of the contact's precedes the conversation"
        );
    }
}
