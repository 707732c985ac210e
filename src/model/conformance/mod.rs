//! Provider conformance: each provider's requests checked against the request shape
//! its official documentation publishes, and its official response shapes parsed. Test-only.
//!
//! The rules are not our own expectations of what we send: each module writes, in its own
//! words, what the provider's documentation says a request may and must hold, and names the
//! document and section each rule comes from. The same rules drive a fake server that answers
//! what the real API answers: 400, in the provider's documented error shape, to a request the
//! real API refuses; a documented success otherwise. A turn then runs through the provider's
//! real HTTP code against that fake.

use std::sync::Arc;

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::model::test_support::{VALID_REPLY, first_step, second_step};
use crate::model::{Model, ModelRequest, ToolChoice};

pub(crate) mod anthropic;
pub(crate) mod google;
mod ollama;
pub(crate) mod openai;
mod route;

/// The tools a turn of the demo tenant offers (`config/*.example`), as the agent builds them:
/// the conformance checks run on the real specs, not only on a fixture.
pub(crate) fn demo_tenant_tools() -> std::sync::Arc<[crate::model::ToolSpec]> {
    let config = crate::config::examples::demo_tenant();
    let tools = config.tools.as_ref().expect("the demo tenant has tools");
    let specs = crate::tools::build_specs(tools, true);
    assert!(!specs.is_empty(), "the demo tenant offers tools");
    std::sync::Arc::from(specs)
}

/// Every keyword used in a JSON Schema, with its value, walking `properties`, `$defs`, `items`
/// and `anyOf` (property names are not keywords).
pub(crate) fn schema_keywords(schema: &Value) -> Vec<(String, Value)> {
    fn walk(node: &Value, out: &mut Vec<(String, Value)>) {
        let Some(obj) = node.as_object() else {
            return;
        };
        for (keyword, value) in obj {
            out.push((keyword.clone(), value.clone()));
            match keyword.as_str() {
                "properties" | "$defs" => {
                    for child in value.as_object().into_iter().flat_map(|m| m.values()) {
                        walk(child, out);
                    }
                }
                "items" => walk(value, out),
                "anyOf" | "allOf" => {
                    for branch in value.as_array().into_iter().flatten() {
                        walk(branch, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(schema, &mut out);
    out
}

/// The elements of `list` with their positions; none when it is not an array.
pub(crate) fn elements(list: &Value) -> impl Iterator<Item = (usize, &Value)> {
    list.as_array().into_iter().flatten().enumerate()
}

/// Asserts that one of `problems` is `matches` (what a check found wrong with a body), listing
/// them all when none is.
pub(crate) fn assert_a_problem(problems: &[String], matches: impl Fn(&str) -> bool) {
    assert!(problems.iter().any(|p| matches(p)), "{problems:?}");
}

/// The keys of `object` that `allowed` does not list, as `<at>.<key>` problems.
pub(crate) fn unknown_keys(object: &Value, allowed: &[&str], at: &str) -> Vec<String> {
    object
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| format!("{at}.{k}: not a documented field"))
        .collect()
}

/// The keys `required` lists that `object` lacks.
pub(crate) fn missing_keys(object: &Value, required: &[&str], at: &str) -> Vec<String> {
    required
        .iter()
        .filter(|k| object.get(**k).is_none())
        .map(|k| format!("{at}.{k}: required"))
        .collect()
}

/// A fake provider: answers 400 with the provider's documented error body when `check` finds a
/// problem in the request body, and `ok` otherwise. It records nothing itself (wiremock does).
pub(crate) struct RefusesWhatTheApiRefuses {
    pub check: fn(&Value) -> Vec<String>,
    pub error_body: fn(&[String]) -> Value,
    pub ok: Value,
}

impl Respond for RefusesWhatTheApiRefuses {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let problems = match serde_json::from_slice::<Value>(&request.body) {
            Ok(body) => (self.check)(&body),
            Err(_) => vec!["body: not JSON".to_owned()],
        };
        if problems.is_empty() {
            ResponseTemplate::new(200).set_body_json(self.ok.clone())
        } else {
            ResponseTemplate::new(400).set_body_json((self.error_body)(&problems))
        }
    }
}

/// A new server whose POSTs to `route` are answered by `fake`.
pub(crate) async fn refusing_fake_at(route: &str, fake: RefusesWhatTheApiRefuses) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(fake)
        .mount(&server)
        .await;
    server
}

/// The fake refused `refused` the way the provider documents it: a 400 whose body our error
/// mapping reads as `kind`.
pub(crate) async fn assert_refused_as(refused: reqwest::Response, kind: &str) {
    assert_eq!(refused.status(), 400);
    let status = refused.status();
    let err = crate::model::transport::status_error(status, &refused.bytes().await.expect("body"));
    assert_eq!(err, crate::model::test_support::http_error(400, kind));
}

/// The turn's three kinds of step (tools offered, tool results, the reply) with the real
/// AgentReply schema (every local bound in it) and the demo tenant's real tools.
pub(crate) fn real_steps() -> Vec<ModelRequest> {
    let tools = demo_tenant_tools();
    let real = |mut request: ModelRequest| {
        request.output_schema = Arc::clone(crate::model::reply::agent_reply_schema());
        request.tools = Arc::clone(&tools);
        request
    };
    vec![
        real(first_step(ToolChoice::Auto)),
        real(second_step()),
        real(first_step(ToolChoice::None)),
        real(calls_beside_a_reply()),
    ]
}

/// [`second_step`] whose calls came beside the model's reply (012: a step may carry several
/// calls and its answer; the loop goes on when a result is not a staged write, and replays both).
fn calls_beside_a_reply() -> ModelRequest {
    let mut request = second_step();
    for message in &mut request.messages {
        if let crate::model::Message::Assistant { text, .. } = message {
            *text = Some(VALID_REPLY.to_owned());
        }
    }
    request
}

/// Every one of [`real_steps`], written by `body` for the model `name`, passes `check`.
pub(crate) fn assert_real_steps_conform(
    name: &str,
    body: impl Fn(&ModelRequest) -> Value,
    check: fn(&Value) -> Vec<String>,
) {
    for (i, step) in real_steps().iter().enumerate() {
        let body = body(step);
        let problems = check(&body);
        assert!(problems.is_empty(), "{name} step {i}: {problems:?}\n{body}");
    }
}

/// `provider` answers every one of [`real_steps`] with the valid reply (its fake accepted each
/// request).
pub(crate) async fn assert_real_steps_answered(provider: &impl Model, name: &str) {
    for step in real_steps() {
        let response = provider
            .step(&step)
            .await
            .expect("the fake accepts the request");
        assert_eq!(response.output.as_deref(), Some(VALID_REPLY), "{name}");
    }
}

/// A turn of `provider` through the HTTP route answered the route's reply, and every request
/// the provider's fake `server` received passes `check` (there was at least one).
pub(crate) async fn assert_route_turn_conforms(
    provider: Arc<dyn Model>,
    server: &MockServer,
    check: fn(&Value) -> Vec<String>,
) {
    let (status, body) = route::answer_through_the_route(provider).await;
    route::assert_the_route_reply(status, &body);
    let received = server.received_requests().await.unwrap_or_default();
    assert!(!received.is_empty(), "the model was called");
    for request in received {
        let sent: Value = serde_json::from_slice(&request.body).expect("json");
        assert!(check(&sent).is_empty(), "{sent}");
    }
}
