//! The selling tenant the sales, opening, flow, hold, nudge and tool tests share: its config
//! edits (flows with namespaces, events, the opening and stage-tied flows, the nudge section),
//! the scripted steps they build, and the readings of ManyChat and the store they assert on.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, call, reply, tool_calls};
use manychat_agent::model::{Message, Model, ModelRequest, ModelResponse, ToolCall};
use manychat_agent::store::Turn;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::*;

// --- ManyChat's endpoints and the tenant's flows ---------------------------------------------------

pub const FLOW: &str = "/fb/sending/sendFlow";
pub const SET_FIELD: &str = "/fb/subscriber/setCustomFieldByName";
pub const ADD_TAG: &str = "/fb/subscriber/addTagByName";
pub const REMOVE_TAG: &str = "/fb/subscriber/removeTagByName";
pub const GET_INFO: &str = "/fb/subscriber/getInfo";

/// The demo tenant's flows as ManyChat knows them (config/tools.json.example).
pub const WHEEL_BASICS_GUIDE_NS: &str = "content20250301000000_200001";
pub const HANDBUILDING_GUIDE_NS: &str = "content20250301000000_200002";
pub const GLAZE_LAB_GUIDE_NS: &str = "content20250301000000_200003";
pub const BOOKING_LINK_NS: &str = "content20250301000000_200004";
/// The flows `with_server_flows` adds (invented).
pub const OPENING_NS: &str = "content20250301000000_200020";
pub const GALLERY_NS: &str = "content20250301000000_200021";
pub const OPENING_DESCRIPTION: &str =
    "A voice note from the studio's founder: a welcome, and what the contact would like to make.";
/// The events `with_events` adds: invented tracking flows.
pub const QUALIFIED_EVENT_NS: &str = "content20250301000000_200101";
pub const CHECKOUT_EVENT_NS: &str = "content20250301000000_200102";

// --- the app on either store ---------------------------------------------------------------------

#[derive(Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The demo tenant, on `backend`, with `edit` applied to its config.
pub async fn app_on(
    backend: Backend,
    model: Arc<dyn Model>,
    edit: impl FnOnce(&Path) + Send + 'static,
) -> TestApp {
    let mut options = AppOptions::new(model).edit(edit);
    if let Backend::Postgres = backend {
        options = options.env("DATABASE_URL", fresh_postgres_url().await);
    }
    spawn_app_with(options).await
}

// --- config edits --------------------------------------------------------------------------------

pub fn unchanged(_: &Path) {}

// `edit_tools` and `edit_rules` live in helpers.rs (the browser suite shares that file).
pub use crate::helpers::{edit_rules, edit_tools};

/// Declares that `flow` plays for `seconds` once ManyChat has answered its request (030).
pub fn flow_settles(dir: &Path, flow: &str, seconds: u64) {
    edit_tools(dir, |tools| {
        for entry in tools["flows"].as_array_mut().unwrap() {
            if entry["id"] == flow {
                entry["settleSeconds"] = json!(seconds);
            }
        }
    });
}

/// The demo tenant plus an opening flow, a gallery tied to `nurturing`, and the glaze-lab
/// guide (offering `glaze-lab`) tied to `offered`.
pub fn with_server_flows(dir: &Path) {
    edit_tools(dir, |tools| {
        let flows = tools["flows"].as_array_mut().unwrap();
        for flow in flows.iter_mut() {
            if flow["id"] == "glaze_lab_guide" {
                flow["onStage"] = json!("offered");
            }
        }
        flows.push(json!({
            "id": "studio_welcome",
            "flowNs": OPENING_NS,
            "description": OPENING_DESCRIPTION,
            "role": "opening"
        }));
        flows.push(json!({
            "id": "student_gallery",
            "flowNs": GALLERY_NS,
            "description": "Photos of pieces beginners made in their first month.",
            "onStage": "nurturing"
        }));
    });
}

/// The demo tenant with two conversion events (027): `nurturing` and `link_sent`.
pub fn with_events(dir: &Path) {
    edit_tools(dir, |tools| {
        tools["events"] = json!([
            {"id": "lead_qualified", "stage": "nurturing", "flowNs": QUALIFIED_EVENT_NS},
            {"id": "checkout_started", "stage": "link_sent", "flowNs": CHECKOUT_EVENT_NS}
        ]);
    });
}

/// The demo tenant with a `nudge` section (025's example).
pub fn with_nudge(dir: &Path) {
    edit_tools(dir, |tools| {
        tools["nudge"] = json!({
            "delays": [{"id": "later_today", "minutes": 120}, {"id": "tomorrow", "minutes": 1200}],
            "humanActiveTag": "human-handling"
        });
    });
}

/// The demo tenant without its sales markers (intent, funnel and offering fields, flows tied to
/// an offering): 012 and 024 are about staging and performing; the sales rules that refuse
/// writes (034's gate, 028's scoping) are proved in `sales_intent.rs` and `sales_offerings.rs`.
pub fn without_sales(dir: &Path) {
    edit_tools(dir, |tools| {
        for field in tools["fields"].as_array_mut().unwrap() {
            let field = field.as_object_mut().unwrap();
            for marker in ["intent", "funnel", "offering"] {
                field.remove(marker);
            }
        }
        for flow in tools["flows"].as_array_mut().unwrap() {
            flow.as_object_mut().unwrap().remove("offering");
        }
        tools.as_object_mut().unwrap().remove("events");
    });
}

// --- the scripted model's steps ------------------------------------------------------------------

/// A model that answers with `steps`, in order.
pub fn script(steps: Vec<ModelResponse>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(steps.into_iter().map(Ok).collect()))
}

/// A model that calls `tools` at once and gives its last answer `last` only `delay` later (a
/// turn that loses the race, or past the abort never answers).
pub fn tools_then_late(
    tools: impl IntoIterator<Item = ToolCall>,
    last: ModelResponse,
    delay: Duration,
) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_steps(vec![
        ScriptStep::ok(tool_calls(tools)),
        ScriptStep::ok(last).after(delay),
    ]))
}

pub fn answer(text: &str) -> ModelResponse {
    reply(reply_json(text))
}

pub fn send_flow(id: &str, contact_asked: bool) -> ToolCall {
    call(
        format!("flow_{id}"),
        "send_flow",
        json!({"flow": id, "contactAsked": contact_asked}),
    )
}

pub fn set_field(id: &str, value: &str) -> ToolCall {
    call(
        format!("set_{id}_{value}"),
        "set_field",
        json!({"field": id, "value": value}),
    )
}

pub fn add_tag(id: &str) -> ToolCall {
    call(format!("add_{id}"), "add_tag", json!({"tag": id}))
}

pub fn remove_tag(id: &str) -> ToolCall {
    call(format!("remove_{id}"), "remove_tag", json!({"tag": id}))
}

pub fn write_note(id: &str, text: &str) -> ToolCall {
    call(
        format!("note_{id}"),
        "write_note",
        json!({"note": id, "text": text}),
    )
}

/// The intent write that makes the contact a prospect (034).
pub fn prospect() -> ToolCall {
    set_field("intent", "prospect")
}

// --- what the model was shown --------------------------------------------------------------------

/// The tool results the model was shown on a request, in call order.
pub fn tool_results(request: &ModelRequest) -> Vec<Value> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResults { results } => Some(results.iter().map(|r| r.content.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

/// `text` does not contain `needle` (`why` says what that means).
pub fn assert_lacks(text: &str, needle: &str, why: &str) {
    assert!(!text.contains(needle), "{why}");
}

/// The text of a request's user messages.
pub fn user_text(request: &ModelRequest) -> String {
    let texts = from_messages(request, |m| match m {
        Message::User { text } => Some(text.as_str()),
        _ => None,
    });
    texts.join("\n")
}

/// What `pick` takes from each of a request's messages, in order.
pub fn from_messages<'a, T>(
    request: &'a ModelRequest,
    pick: impl FnMut(&'a Message) -> Option<T>,
) -> Vec<T> {
    request.messages.iter().filter_map(pick).collect()
}

/// The enum of a tool's parameter in a request (empty when the tool is not offered).
pub fn tool_enum(request: &ModelRequest, tool: &str, parameter: &str) -> Vec<String> {
    request
        .tools
        .iter()
        .find(|t| t.name == tool)
        .and_then(|t| {
            t.parameters["properties"][parameter]["enum"]
                .as_array()
                .cloned()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// A tool's description in a request (empty when the tool is not offered).
pub fn description(request: &ModelRequest, tool: &str) -> String {
    request
        .tools
        .iter()
        .find(|t| t.name == tool)
        .map(|t| t.description.clone())
        .unwrap_or_default()
}

// --- what the store holds ------------------------------------------------------------------------

/// The agent turn of a contact's conversation (the last one).
pub async fn agent_turn(app: &TestApp, subscriber: &str) -> Turn {
    app.turns(subscriber)
        .await
        .into_iter()
        .rev()
        .find(|t| t.outcome.is_some())
        .expect("an agent turn")
}

/// (id, status, origin) of each entry of a turn's record.
pub fn entries(actions: &Value) -> Vec<(String, String, Option<String>)> {
    actions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_owned(),
                a["status"].as_str().unwrap().to_owned(),
                a["origin"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

pub fn entry(id: &str, status: &str, origin: Option<&str>) -> (String, String, Option<String>) {
    (id.to_owned(), status.to_owned(), origin.map(str::to_owned))
}

// --- what ManyChat received ----------------------------------------------------------------------

/// What a request to ManyChat did: the flow namespace, `field=value`, or the tag.
pub fn what(request: &Recorded) -> String {
    match request.path.as_str() {
        FLOW => request.body["flow_ns"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        SET_FIELD => format!(
            "{}={}",
            request.body["field_name"].as_str().unwrap_or_default(),
            request.body["field_value"].as_str().unwrap_or_default()
        ),
        _ => request.body["tag_name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// What ManyChat received, as (path, flow namespace, field=value or tag) pairs.
pub async fn received(app: &TestApp) -> Vec<(String, String)> {
    app.manychat_requests()
        .await
        .into_iter()
        .map(|r| (r.path.clone(), what(&r)))
        .collect()
}

/// What ManyChat received is `expected`, in order (see [`received`]).
pub async fn assert_received(app: &TestApp, expected: &[(&str, &str)]) {
    assert_eq!(received(app).await, pairs(expected));
}

/// [`assert_received`], saying `why` when it fails.
pub async fn assert_received_because(app: &TestApp, expected: &[(&str, &str)], why: &str) {
    assert_eq!(received(app).await, pairs(expected), "{why}");
}

pub fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// How many times ManyChat was asked to send `flow_ns`.
pub async fn sends_of(app: &TestApp, flow_ns: &str) -> usize {
    received(app)
        .await
        .iter()
        .filter(|(p, what)| p == FLOW && what == flow_ns)
        .count()
}

/// ManyChat answers `sendFlow` of `flow_ns` with `response`.
pub async fn flow_answers(app: &TestApp, flow_ns: &str, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(FLOW))
        .and(body_partial_json(json!({"flow_ns": flow_ns})))
        .respond_with(response)
        .with_priority(1)
        .mount(&app.manychat)
        .await;
}

/// ManyChat refuses `sendFlow` of `flow_ns`.
pub async fn refuse_flow(app: &TestApp, flow_ns: &str) {
    flow_answers(app, flow_ns, manychat_error(400, "Flow not found")).await;
}

/// Sends one message, expects 200, waits for the turn's work and returns the response body.
pub async fn turn_once(app: &TestApp, subscriber: &str, text: &str) -> Value {
    let (status, body) = app.send(subscriber, text).await;
    assert_eq!(status, 200);
    app.settle().await;
    body
}

/// Sends `text` in the background while the model's second step runs past the race deadline:
/// at 8 s the contact gets the holding line.
pub async fn holding_line_at_the_deadline(
    app: &TestApp,
    model: &ScriptedModel,
    subscriber: &str,
    text: &str,
) {
    let request = send_in_background(app, subscriber, text);
    until(async || model.calls() == 2).await;
    acknowledged_at_the_deadline(app, request).await;
}

/// [`holding_line_at_the_deadline`] for a returning contact (one that holds a contact token
/// already: no token write is in flight when the clock moves).
pub async fn returning_contact_held_at_the_deadline(
    app: &TestApp,
    model: &ScriptedModel,
    subscriber: &str,
    text: &str,
) {
    app.returning_contact(subscriber).await;
    holding_line_at_the_deadline(app, model, subscriber, text).await;
}

/// The flow namespaces ManyChat was asked to send, in order.
pub async fn flows_sent(app: &TestApp) -> Vec<String> {
    received(app)
        .await
        .into_iter()
        .filter(|(p, _)| p == FLOW)
        .map(|(_, ns)| ns)
        .collect()
}
