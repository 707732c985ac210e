//! Fixtures shared by the provider tests: requests of a fictional demo tenant and helpers to
//! read what a wiremock server received. Compiled for tests only.

use serde_json::{Value, json};
use wiremock::matchers::{header as header_is, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolChoice, ToolResult, ToolSpec, Usage,
};

pub(crate) const SYSTEM: &str = "You are the assistant of Demo Academy. Catalog: ...";
pub(crate) const CONTACT_TEXT: &str = "<contact>How much is the pottery course?</contact>";

pub(crate) fn agent_reply_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["messages", "escalate", "escalation_reason", "confidence", "closing_question"],
        "properties": {
            "messages": {"type": "array", "items": {"type": "string"}},
            "escalate": {"type": "boolean"},
            "escalation_reason": {"type": ["string", "null"]},
            "confidence": {"type": "number"},
            "closing_question": {"type": ["string", "null"]}
        }
    })
}

pub(crate) fn send_flow_tool() -> ToolSpec {
    ToolSpec {
        name: "send_flow".into(),
        description: "Sends the course brochure.".into(),
        parameters: json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["id"],
            "properties": {"id": {"type": "string", "enum": ["brochure"]}}
        }),
    }
}

/// Step 1 of a turn: one user message, the tools offered with `choice`.
pub(crate) fn first_step(choice: ToolChoice) -> ModelRequest {
    ModelRequest {
        system: SYSTEM.into(),
        messages: vec![Message::User {
            text: CONTACT_TEXT.into(),
        }],
        tools: std::sync::Arc::from([send_flow_tool()]),
        tool_choice: choice,
        output_schema: std::sync::Arc::new(agent_reply_schema()),
        output_name: "agent_reply".into(),
        max_output_tokens: 400,
        temperature: 0.3,
        cache: Default::default(),
    }
}

/// Step 1 of a turn that offers no tool at all.
pub(crate) fn tool_less_step(choice: ToolChoice) -> ModelRequest {
    ModelRequest {
        tools: std::sync::Arc::from([]),
        ..first_step(choice)
    }
}

/// A tiny PNG's bytes (a fixture of the media tests: colour bars, fictional).
pub(crate) const IMAGE_BYTES: &[u8] = include_bytes!("../../tests/fixtures/media/colour-bars.png");

/// Step 1 of a turn that carries an image the contact sent (020).
pub(crate) fn image_step() -> ModelRequest {
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(Message::Images {
        images: std::sync::Arc::from([crate::model::ImageInput {
            media_type: "image/png",
            bytes: std::sync::Arc::from(IMAGE_BYTES),
        }]),
    });
    request
}

/// The image's bytes as standard base64.
pub(crate) fn image_base64() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(IMAGE_BYTES)
}

/// A call as a provider's answer carries it (or a step replays it).
pub(crate) fn call(id: &str, name: &str, arguments: ToolArguments) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

/// The model's turn that made `calls` (no text, nothing to echo), as the next step replays it.
pub(crate) fn calls_made(calls: Vec<ToolCall>) -> Message {
    Message::Assistant {
        text: None,
        tool_calls: calls,
        echo: Default::default(),
    }
}

/// A call's result that is no error.
pub(crate) fn ok_result(call_id: &str, name: &str, content: Value) -> ToolResult {
    ToolResult {
        call_id: call_id.into(),
        name: name.into(),
        content,
        is_error: false,
    }
}

/// The results of a step's calls, as the next step sends them.
pub(crate) fn results(results: Vec<ToolResult>) -> Message {
    Message::ToolResults { results }
}

/// Step 2 of a turn: the first step's two calls replayed, then their results (one an error).
pub(crate) fn second_step() -> ModelRequest {
    let mut request = first_step(ToolChoice::Auto);
    request.messages.push(Message::Assistant {
        text: None,
        tool_calls: vec![
            call(
                "call_a",
                "send_flow",
                ToolArguments::Valid(json!({"id": "brochure"})),
            ),
            call(
                "call_b",
                "get_contact",
                ToolArguments::Invalid { length: 9 },
            ),
        ],
        echo: Default::default(),
    });
    request.messages.push(Message::ToolResults {
        results: vec![
            ToolResult {
                call_id: "call_a".into(),
                name: "send_flow".into(),
                content: json!({"staged": true}),
                is_error: false,
            },
            ToolResult {
                call_id: "call_b".into(),
                name: "get_contact".into(),
                content: json!({"error": "invalid_arguments"}),
                is_error: true,
            },
        ],
    });
    request
}

/// What a provider reads from its final answer to [`first_step`]: [`VALID_REPLY`], completed,
/// with `usage`.
pub(crate) fn final_response(usage: Usage) -> ModelResponse {
    ModelResponse {
        tool_calls: vec![],
        output: Some(VALID_REPLY.into()),
        usage,
        stop: StopReason::Completed,
        echo: Default::default(),
    }
}

pub(crate) const VALID_REPLY: &str = r#"{"messages":["The pottery course costs 120 USD."],"escalate":false,"escalation_reason":null,"confidence":0.9,"closing_question":null}"#;

/// The JSON bodies the server received, in order.
pub(crate) async fn received_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// The headers of the first request the server received, as (name, value) strings.
pub(crate) async fn first_headers(server: &MockServer) -> Vec<(String, String)> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .first()
        .map(|r| {
            r.headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A port on localhost where nothing listens.
pub(crate) fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().expect("local addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Answers the POSTs to `route` that carry `headers` with `status` and `body` (a request that
/// does not match gets wiremock's 404).
pub(crate) async fn answer_at(
    server: &MockServer,
    (route, headers): (&str, &[(&str, &str)]),
    status: u16,
    body: Value,
) {
    let mut mock = Mock::given(method("POST")).and(path(route));
    for (name, value) in headers {
        mock = mock.and(header_is(*name, *value));
    }
    mock.respond_with(ResponseTemplate::new(status).set_body_json(body))
        .mount(server)
        .await;
}

/// A new server that answers as [`answer_at`] does.
pub(crate) async fn answering_at(
    at: (&str, &[(&str, &str)]),
    status: u16,
    body: Value,
) -> MockServer {
    let server = MockServer::start().await;
    answer_at(&server, at, status, body).await;
    server
}

/// The body `model` sent for `request`, which must succeed: the first the server received.
pub(crate) async fn body_sent(
    model: &impl Model,
    request: &ModelRequest,
    server: &MockServer,
) -> Value {
    model.step(request).await.expect("step");
    let bodies = received_bodies(server).await;
    bodies
        .into_iter()
        .next()
        .expect("the server received the step")
}

/// Answers every POST the server receives with `answer`.
pub(crate) async fn answer_every_post(server: &MockServer, answer: ResponseTemplate) {
    Mock::given(method("POST"))
        .respond_with(answer)
        .mount(server)
        .await;
}

/// Answers the next `times` POSTs with `answer`; mounted first, it wins over later mounts while
/// it lasts.
pub(crate) async fn answer_next_posts(server: &MockServer, times: u64, answer: ResponseTemplate) {
    Mock::given(method("POST"))
        .respond_with(answer)
        .up_to_n_times(times)
        .mount(server)
        .await;
}

/// A provider's error answer: `status` with its JSON error body and, where the provider says
/// when to come back, that header.
pub(crate) fn error_answer(
    status: u16,
    retry: Option<(&str, &str)>,
    body: Value,
) -> ResponseTemplate {
    let answer = ResponseTemplate::new(status).set_body_json(body);
    match retry {
        Some((name, value)) => answer.insert_header(name, value),
        None => answer,
    }
}

/// A 200 whose body is not the provider's JSON.
pub(crate) fn garbled_answer(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string(body)
}

/// `answer` as `parse` reads it, which must succeed.
pub(crate) fn parsed(
    parse: fn(&[u8]) -> Result<ModelResponse, ModelError>,
    answer: &Value,
) -> ModelResponse {
    parse(answer.to_string().as_bytes()).expect("parse")
}

/// The first step of a turn sent to the model `model_for` builds for a server that answers
/// every POST with `answer`, which must fail: its error, and how many requests the server
/// received (two when the step was retried).
pub(crate) async fn failed_step<M: Model>(
    answer: ResponseTemplate,
    model_for: impl FnOnce(&MockServer) -> M,
) -> (ModelError, usize) {
    let server = MockServer::start().await;
    answer_every_post(&server, answer).await;
    let err = first_step_error(&model_for(&server)).await;
    (err, received_bodies(&server).await.len())
}

/// The body of the first step of a turn sent to the model `model_for` builds for a server that
/// answers POSTs to `at` with `answer`: the step must succeed and the server must have received
/// exactly that one request (so the route and headers matched). The server is returned too, for
/// the request's headers.
pub(crate) async fn only_first_step_body<M: Model>(
    at: (&str, &[(&str, &str)]),
    answer: Value,
    model_for: impl FnOnce(&MockServer) -> M,
) -> (Value, MockServer) {
    let server = answering_at(at, 200, answer).await;
    first_step_answer(&model_for(&server)).await;
    let mut bodies = received_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "headers and path must match");
    (bodies.remove(0), server)
}

/// The first step of a turn sent to `model`, which must fail; its error.
pub(crate) async fn first_step_error(model: &impl Model) -> ModelError {
    model
        .step(&first_step(ToolChoice::Auto))
        .await
        .expect_err("the step must fail")
}

/// The first step of a turn sent to `model`, which must succeed; its answer.
pub(crate) async fn first_step_answer(model: &impl Model) -> ModelResponse {
    model
        .step(&first_step(ToolChoice::Auto))
        .await
        .expect("the step must succeed")
}

/// The error a provider's HTTP failure maps to.
pub(crate) fn http_error(status: u16, kind: &str) -> ModelError {
    ModelError::Http {
        status,
        kind: kind.into(),
    }
}
