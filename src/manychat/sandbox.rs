//! An in-process fake ManyChat for `manychat-agent demo` (SYSTEM 5.5): a newcomer has no
//! ManyChat account, so the demo points the real [`ManyChatClient`](super::ManyChatClient) at this
//! server and shows what would have been sent.
//!
//! It implements the six endpoints the client calls with ManyChat's success envelopes, and the
//! page API reads of `manychat check` (getFlows, getTags, getCustomFields: the account the demo
//! was started with, [`spawn_with_account`], so the check passes against the demo), keeps
//! each subscriber's tags and custom field values in memory so getInfo reflects earlier writes,
//! prints each accepted call to stdout (the demo's display, not a log), and answers
//! `GET /sandbox/requests` with every accepted call as JSON.
//!
//! It is also the demo's file host (020): `MANYCHAT_MEDIA_BASE` points here, and
//! [`DEMO_VOICE_NOTE_PATH`] serves a built-in voice note (a one-second tone, no voice), so a
//! newcomer can send a voice note's URL as ManyChat would and watch `mock:demo` transcribe it.
//!
//! Invariants:
//! - The contact getInfo returns is invented ("Demo Contact", no phone, no email); nothing real
//!   is stored or returned.
//! - A request ManyChat would refuse (no bearer token, missing or mistyped keys) gets ManyChat's
//!   error envelope with HTTP 400 (401 for the token) and is neither recorded nor printed.
//! - The server stops when the shutdown token is cancelled.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header::AUTHORIZATION};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::account::Account;

/// One accepted call, as the demo shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxRequest {
    /// ManyChat's name for the call (`sendFlow`, `addTagByName`, `getInfo`, …).
    pub endpoint: String,
    /// The request's JSON body; for getInfo, its query as an object.
    pub body: Value,
}

/// A running sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Where to point `MANYCHAT_API_BASE` (`http://127.0.0.1:<port>`).
    pub base_url: String,
    /// Every accepted call, in arrival order.
    pub requests: Arc<Mutex<Vec<SandboxRequest>>>,
}

/// The API token the demo gives its sandbox (`MANYCHAT_API_TOKEN`); `manychat check` run with it
/// says the account it read mirrors the demo's config.
pub const DEMO_TOKEN: &str = "sandbox:demo";

/// Where the sandbox serves its voice note, in the shape of ManyChat's file URLs.
pub const DEMO_VOICE_NOTE_PATH: &str = "/1000001/wa/2026/01/01/original_0d3e0a1b.ogg";

/// The demo's voice note: a one-second tone (Ogg Opus), fictional.
const DEMO_VOICE_NOTE: &[u8] = include_bytes!("../../tests/fixtures/media/tone.ogg");

/// What the sandbox remembers about one subscriber.
#[derive(Default)]
struct ContactState {
    tags: BTreeSet<String>,
    fields: BTreeMap<String, Value>,
}

#[derive(Clone)]
pub(super) struct AppState {
    requests: Arc<Mutex<Vec<SandboxRequest>>>,
    contacts: Arc<Mutex<HashMap<String, ContactState>>>,
    /// What the page API answers: the flows, tags and fields the account holds.
    account: Arc<Account>,
    /// Print each accepted call (the demo's display); the test contacts' recorder does not.
    print: bool,
}

/// The most calls kept: past it the oldest tenth is dropped, so a long run stays bounded.
const MAX_KEPT: usize = 2_000;
/// The most contacts whose tags and fields are kept: past it they are all forgotten.
const MAX_CONTACTS: usize = 2_000;

/// A poisoned lock only means another handler panicked mid-update; the demo's data is still
/// worth showing.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves the sandbox on `listener` until `shutdown` is cancelled, with an empty account.
pub async fn spawn(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<Sandbox> {
    spawn_with_account(listener, shutdown, Account::default()).await
}

/// Serves the sandbox on `listener` until `shutdown` is cancelled; the page API lists `account`.
pub async fn spawn_with_account(
    listener: TcpListener,
    shutdown: CancellationToken,
    account: Account,
) -> std::io::Result<Sandbox> {
    let address = listener.local_addr()?;
    let base_url = base_url_for(address);
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = AppState {
        requests: requests.clone(),
        contacts: Arc::new(Mutex::new(HashMap::new())),
        account: Arc::new(account),
        print: true,
    };
    let app = router(state);
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::warn!(error_kind = ?e.kind(), "manychat sandbox stopped with an error");
        }
    });
    Ok(Sandbox { base_url, requests })
}

/// A listener bound to every interface is reached through loopback.
fn base_url_for(address: SocketAddr) -> String {
    let ip = match address.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{ip}:{}", address.port())
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/fb/sending/sendFlow", post(send_flow))
        .route("/fb/subscriber/addTagByName", post(add_tag))
        .route("/fb/subscriber/removeTagByName", post(remove_tag))
        .route("/fb/subscriber/setCustomFieldByName", post(set_field))
        .route("/fb/subscriber/setCustomFields", post(set_fields))
        .route("/fb/subscriber/getInfo", get(get_info))
        .route("/fb/page/getFlows", get(get_flows))
        .route("/fb/page/getTags", get(get_tags))
        .route("/fb/page/getCustomFields", get(get_custom_fields))
        .route("/sandbox/requests", get(list_requests))
        .route(DEMO_VOICE_NOTE_PATH, get(voice_note))
        .with_state(state)
}

/// The demo's voice note, as ManyChat's file host serves one.
async fn voice_note() -> Response {
    println!("[sandbox] file host: served the demo voice note");
    (
        [(axum::http::header::CONTENT_TYPE, "audio/ogg")],
        DEMO_VOICE_NOTE,
    )
        .into_response()
}

/// A request ManyChat would refuse, answered with its error envelope.
struct Refusal {
    status: StatusCode,
    message: String,
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({
            "status": "error",
            "message": self.message,
            "details": {"messages": [{"message": self.message}]},
        });
        (self.status, Json(body)).into_response()
    }
}

fn success() -> Response {
    Json(json!({"status": "success"})).into_response()
}

/// ManyChat wants `Authorization: Bearer <key>`; the sandbox accepts any non-empty key.
fn authorized(headers: &HeaderMap) -> Result<(), Refusal> {
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|key| !key.trim().is_empty());
    if presented {
        Ok(())
    } else {
        Err(refuse(StatusCode::UNAUTHORIZED, "Wrong format token"))
    }
}

/// `subscriber_id` as ManyChat takes it: a number or a digit string.
fn subscriber_key(body: &Value) -> Result<String, Refusal> {
    match body.get("subscriber_id") {
        Some(Value::Number(n)) if n.is_u64() => Ok(n.to_string()),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(s.clone())
        }
        _ => Err(refuse(
            StatusCode::BAD_REQUEST,
            "subscriber_id is required and must be an integer",
        )),
    }
}

fn required_str<'a>(body: &'a Value, key: &str) -> Result<&'a str, Refusal> {
    match body.get(key).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => Ok(value),
        _ => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("{key} is required and must be a string"),
        )),
    }
}

/// What every write endpoint checks first, as ManyChat does: the bearer token, a JSON body and
/// its contact. The body, and the contact's key.
fn accept(headers: &HeaderMap, bytes: &[u8]) -> Result<(Value, String), Refusal> {
    authorized(headers)?;
    let body = json_body(bytes)?;
    let key = subscriber_key(&body)?;
    Ok((body, key))
}

/// The body as JSON, or ManyChat's 400. Parsed by hand so a bad body gets the envelope, not
/// axum's plain-text rejection.
fn json_body(bytes: &[u8]) -> Result<Value, Refusal> {
    serde_json::from_slice(bytes)
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, "request body is not valid JSON"))
}

impl AppState {
    /// A silent sandbox served in process (`super::recorder`), with an empty account.
    pub(super) fn quiet() -> Self {
        Self {
            requests: Arc::default(),
            contacts: Arc::default(),
            account: Arc::new(Account::default()),
            print: false,
        }
    }

    pub(super) fn router(&self) -> Router {
        router(self.clone())
    }

    fn record(&self, endpoint: &str, body: Value) {
        let mut requests = lock(&self.requests);
        if requests.len() >= MAX_KEPT {
            requests.drain(..MAX_KEPT / 10);
        }
        requests.push(SandboxRequest {
            endpoint: endpoint.to_owned(),
            body,
        });
    }

    fn show(&self, line: std::fmt::Arguments<'_>) {
        if self.print {
            println!("{line}");
        }
    }

    /// The accepted calls for the contact `key`, oldest first.
    pub(super) fn calls_for(&self, key: &str) -> Vec<SandboxRequest> {
        lock(&self.requests)
            .iter()
            .filter(|r| match r.body.get("subscriber_id") {
                Some(Value::Number(n)) => n.to_string() == key,
                Some(Value::String(s)) => s == key,
                _ => false,
            })
            .cloned()
            .collect()
    }

    /// The contact's custom field `name`, as getInfo would show it.
    pub(super) fn field(&self, key: &str, name: &str) -> Option<Value> {
        lock(&self.contacts)
            .get(key)
            .and_then(|c| c.fields.get(name).cloned())
    }

    /// Sets the contact's custom field `name` as ManyChat does (a block's `set_field_value`).
    pub(super) fn set_field(&self, key: &str, name: &str, value: Value) {
        contact(&mut lock(&self.contacts), key)
            .fields
            .insert(name.to_owned(), value);
    }
}

/// The contact `key`'s state, created when new (all forgotten past [`MAX_CONTACTS`]).
fn contact<'a>(contacts: &'a mut HashMap<String, ContactState>, key: &str) -> &'a mut ContactState {
    if contacts.len() >= MAX_CONTACTS && !contacts.contains_key(key) {
        contacts.clear();
    }
    contacts.entry(key.to_owned()).or_default()
}

/// A value as the demo prints it: text in quotes with its line breaks kept, so a reply reads
/// as the contact would see it; other values as JSON. A field named like a token (the contact
/// token of 019 is a credential) shows only its length.
fn display_value(field: &str, value: &Value) -> String {
    match value {
        Value::String(text) if field.to_ascii_lowercase().contains("token") => {
            format!("[token, {} chars]", text.chars().count())
        }
        Value::String(text) => format!("\"{text}\""),
        other => other.to_string(),
    }
}

async fn send_flow(State(state): State<AppState>, headers: HeaderMap, bytes: Bytes) -> Response {
    let accepted = accept(&headers, &bytes).and_then(|(body, _)| {
        let flow_ns = required_str(&body, "flow_ns")?.to_owned();
        Ok((body, flow_ns))
    });
    match accepted {
        Ok((body, flow_ns)) => {
            state.show(format_args!("[sandbox] sendFlow {flow_ns}"));
            state.record("sendFlow", body);
            success()
        }
        Err(refused) => refused.into_response(),
    }
}

async fn add_tag(State(state): State<AppState>, headers: HeaderMap, bytes: Bytes) -> Response {
    change_tag(&state, &headers, &bytes, true)
}

async fn remove_tag(State(state): State<AppState>, headers: HeaderMap, bytes: Bytes) -> Response {
    change_tag(&state, &headers, &bytes, false)
}

fn change_tag(state: &AppState, headers: &HeaderMap, bytes: &[u8], add: bool) -> Response {
    let accepted = accept(headers, bytes).and_then(|(body, key)| {
        let tag = required_str(&body, "tag_name")?.to_owned();
        Ok((body, key, tag))
    });
    let (body, key, tag) = match accepted {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    let endpoint = if add {
        "addTagByName"
    } else {
        "removeTagByName"
    };
    {
        let mut contacts = lock(&state.contacts);
        let contact = contact(&mut contacts, &key);
        if add {
            contact.tags.insert(tag.clone());
        } else {
            contact.tags.remove(&tag);
        }
    }
    state.show(format_args!("[sandbox] {endpoint} {tag}"));
    state.record(endpoint, body);
    success()
}

async fn set_field(State(state): State<AppState>, headers: HeaderMap, bytes: Bytes) -> Response {
    let accepted = accept(&headers, &bytes).and_then(|(body, key)| {
        let field = required_str(&body, "field_name")?.to_owned();
        let Some(value) = body.get("field_value").cloned() else {
            return Err(refuse(StatusCode::BAD_REQUEST, "field_value is required"));
        };
        Ok((body, key, field, value))
    });
    let (body, key, field, value) = match accepted {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    state.show(format_args!(
        "[sandbox] setCustomFieldByName {field} = {}",
        display_value(&field, &value)
    ));
    contact(&mut lock(&state.contacts), &key)
        .fields
        .insert(field, value);
    state.record("setCustomFieldByName", body);
    success()
}

/// The most fields ManyChat's setCustomFields takes in one request.
const MAX_FIELDS_PER_WRITE: usize = 20;

/// setCustomFields: `{"subscriber_id", "fields": [{"field_name" | "field_id", "field_value"}]}`,
/// 1 to 20 fields, each named by its name or by its id in the account (getCustomFields' ids).
/// One bad item refuses the whole request, nothing written.
async fn set_fields(State(state): State<AppState>, headers: HeaderMap, bytes: Bytes) -> Response {
    let accepted = accept(&headers, &bytes).and_then(|(body, key)| {
        let fields = fields_of(&state.account, &body)?;
        Ok((body, key, fields))
    });
    let (body, key, fields) = match accepted {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    let shown: Vec<String> = fields
        .iter()
        .map(|(field, value)| format!("{field} = {}", display_value(field, value)))
        .collect();
    state.show(format_args!(
        "[sandbox] setCustomFields {}",
        shown.join(", ")
    ));
    contact(&mut lock(&state.contacts), &key)
        .fields
        .extend(fields);
    state.record("setCustomFields", body);
    success()
}

/// setCustomFields' `fields`, each as (name, value), or the refusal ManyChat answers.
fn fields_of(account: &Account, body: &Value) -> Result<Vec<(String, Value)>, Refusal> {
    let bad = |message: &str| refuse(StatusCode::BAD_REQUEST, message);
    let items = match body.get("fields").and_then(Value::as_array) {
        Some(items) if !items.is_empty() && items.len() <= MAX_FIELDS_PER_WRITE => items,
        Some(items) if items.len() > MAX_FIELDS_PER_WRITE => {
            return Err(bad("The number of custom fields is limited to 20"));
        }
        _ => return Err(bad("fields is required and must be a non-empty array")),
    };
    items
        .iter()
        .map(|item| {
            let value = item
                .get("field_value")
                .cloned()
                .ok_or_else(|| bad("field_value is required"))?;
            let name = match (item.get("field_name"), item.get("field_id")) {
                (Some(Value::String(name)), None) if !name.is_empty() => name.clone(),
                (None, Some(Value::Number(id))) => id
                    .as_u64()
                    .and_then(|id| usize::try_from(id).ok()?.checked_sub(1))
                    .and_then(|index| account.fields.get(index))
                    .map(|field| field.name.clone())
                    .ok_or_else(|| bad("Field not found"))?,
                _ => return Err(bad("field_id or field_name is required, not both")),
            };
            Ok((name, value))
        })
        .collect()
}

#[derive(Deserialize)]
struct GetInfoQuery {
    subscriber_id: Option<String>,
}

async fn get_info(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<GetInfoQuery>,
) -> Response {
    if let Err(refused) = authorized(&headers) {
        return refused.into_response();
    }
    let key = match query.subscriber_id {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => id,
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "subscriber_id is required and must be an integer",
            )
            .into_response();
        }
    };
    let (tags, fields) = {
        let contacts = lock(&state.contacts);
        match contacts.get(&key) {
            Some(contact) => (
                contact.tags.iter().cloned().collect::<Vec<_>>(),
                contact
                    .fields
                    .iter()
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect::<Vec<_>>(),
            ),
            None => (Vec::new(), Vec::new()),
        }
    };
    state.show(format_args!(
        "[sandbox] getInfo ({} tags, {} custom fields)",
        tags.len(),
        fields.len()
    ));
    state.record("getInfo", json!({"subscriber_id": key}));
    Json(json!({"status": "success", "data": invented_contact(&key, &tags, &fields)}))
        .into_response()
}

/// The invented subscriber getInfo returns: ManyChat's shape, no real data.
fn invented_contact(key: &str, tags: &[String], fields: &[(String, Value)]) -> Value {
    let custom_fields: Vec<Value> = fields
        .iter()
        .enumerate()
        .map(|(i, (name, value))| {
            json!({
                "id": i + 1,
                "name": name,
                "type": field_type(value),
                "description": "",
                "value": value,
            })
        })
        .collect();
    let tags: Vec<Value> = tags
        .iter()
        .enumerate()
        .map(|(i, name)| json!({"id": i + 1, "name": name}))
        .collect();
    json!({
        "id": key,
        "page_id": "0",
        "first_name": "Demo",
        "last_name": "Contact",
        "name": "Demo Contact",
        "gender": null,
        "profile_pic": null,
        "locale": "en_US",
        "language": "English",
        "timezone": "UTC",
        "live_chat_url": null,
        "last_input_text": null,
        "optin_phone": false,
        "phone": null,
        "optin_email": false,
        "email": null,
        "subscribed": null,
        "last_interaction": null,
        "last_seen": null,
        "whatsapp_phone": null,
        "optin_whatsapp": false,
        "custom_fields": custom_fields,
        "tags": tags,
    })
}

/// ManyChat's custom field type for a value.
fn field_type(value: &Value) -> &'static str {
    match value {
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        _ => "text",
    }
}

/// A page API read: ManyChat's success envelope around `data`, after the token check.
fn page_read(state: &AppState, headers: &HeaderMap, endpoint: &str, data: Value) -> Response {
    if let Err(refused) = authorized(headers) {
        return refused.into_response();
    }
    state.record(endpoint, json!({}));
    Json(json!({"status": "success", "data": data})).into_response()
}

async fn get_flows(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let flows: Vec<Value> = state
        .account
        .flows
        .iter()
        .map(|flow| json!({"ns": flow.ns, "name": flow.name, "folder_id": 0}))
        .collect();
    let data = json!({"flows": flows, "folders": []});
    page_read(&state, &headers, "getFlows", data)
}

async fn get_tags(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let tags: Vec<Value> = (1..)
        .zip(&state.account.tags)
        .map(|(id, name)| json!({"id": id, "name": name}))
        .collect();
    page_read(&state, &headers, "getTags", Value::Array(tags))
}

async fn get_custom_fields(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let fields: Vec<Value> = (1..)
        .zip(&state.account.fields)
        .map(|(id, field)| {
            json!({"id": id, "name": field.name, "type": field.kind, "description": ""})
        })
        .collect();
    page_read(&state, &headers, "getCustomFields", Value::Array(fields))
}

async fn list_requests(State(state): State<AppState>) -> Json<Vec<SandboxRequest>> {
    Json(lock(&state.requests).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Secret, SubscriberId};
    use crate::manychat::{ManyChatClient, ManyChatLimiter};
    use std::time::Duration;

    async fn start() -> (Sandbox, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let shutdown = CancellationToken::new();
        let sandbox = spawn(listener, shutdown.clone()).await.expect("sandbox");
        (sandbox, shutdown)
    }

    fn client(sandbox: &Sandbox) -> ManyChatClient {
        ManyChatClient::new(
            &sandbox.base_url,
            &Secret::new("sandbox-token"),
            ManyChatLimiter::new(),
        )
        .expect("client")
    }

    #[tokio::test]
    async fn system_5_5_sandbox_round_trip_set_field_add_tag_then_getinfo_shows_them() {
        let (sandbox, shutdown) = start().await;
        let client = client(&sandbox);
        let sub = SubscriberId::parse("1000001").expect("id");
        let other = SubscriberId::parse("1000002").expect("id");

        client
            .set_field(&sub, "ai_message", &json!("A reply from the demo tenant."))
            .await
            .expect("field set");
        client.add_tag(&sub, "demo-lead").await.expect("tagged");
        client.add_tag(&sub, "to-remove").await.expect("tagged");
        client
            .remove_tag(&sub, "to-remove")
            .await
            .expect("untagged");
        client
            .send_flow(&sub, "content_demo_reply")
            .await
            .expect("flow sent");

        let record = client
            .get_contact(&sub, Duration::from_millis(1500))
            .await
            .expect("read");
        assert_eq!(record.tags, vec!["demo-lead"]);
        assert_eq!(
            record.fields,
            vec![(
                "ai_message".to_owned(),
                json!("A reply from the demo tenant.")
            )]
        );
        let stranger = client
            .get_contact(&other, Duration::from_millis(1500))
            .await
            .expect("read");
        assert!(stranger.tags.is_empty() && stranger.fields.is_empty());

        let listed: Vec<SandboxRequest> =
            reqwest::get(format!("{}/sandbox/requests", sandbox.base_url))
                .await
                .expect("listed")
                .json()
                .await
                .expect("JSON");
        let endpoints: Vec<&str> = listed.iter().map(|r| r.endpoint.as_str()).collect();
        assert_eq!(
            endpoints,
            vec![
                "setCustomFieldByName",
                "addTagByName",
                "addTagByName",
                "removeTagByName",
                "sendFlow",
                "getInfo",
                "getInfo"
            ]
        );
        assert_eq!(
            listed[0].body,
            json!({"subscriber_id": 1000001, "field_name": "ai_message",
                   "field_value": "A reply from the demo tenant."})
        );
        assert_eq!(*lock(&sandbox.requests), listed);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn sandbox_set_custom_fields_writes_every_field_in_one_request_or_none() {
        let (sandbox, shutdown) = start().await;
        let client = client(&sandbox);
        let sub = SubscriberId::parse("1000003").expect("id");
        client
            .set_fields(
                &sub,
                &[
                    ("ai_message", json!("Booked.")),
                    ("ai_delivery_id", json!("7.0")),
                ],
            )
            .await
            .expect("fields set");
        let http = reqwest::Client::new();
        let url = format!("{}/fb/subscriber/setCustomFields", sandbox.base_url);
        for bad in [
            json!({"subscriber_id": 1000003, "fields": []}),
            json!({"subscriber_id": 1000003, "fields": [{"field_name": "ai_message"}]}),
            json!({"subscriber_id": 1000003,
                   "fields": [{"field_name": "ai_message", "field_value": "Lost."},
                              {"field_id": 99, "field_value": "x"}]}),
        ] {
            let answer = http
                .post(&url)
                .bearer_auth("sandbox-token")
                .json(&bad)
                .send()
                .await
                .expect("answered");
            assert_eq!(answer.status(), 400);
            let body: Value = answer.json().await.expect("JSON");
            assert_eq!(body["status"], "error");
        }
        let record = client
            .get_contact(&sub, Duration::from_millis(1500))
            .await
            .expect("read");
        assert_eq!(
            record.fields,
            vec![
                ("ai_delivery_id".to_owned(), json!("7.0")),
                ("ai_message".to_owned(), json!("Booked.")),
            ],
            "both fields written by the one accepted call, nothing by the refused ones"
        );
        let endpoints: Vec<String> = lock(&sandbox.requests)
            .iter()
            .map(|r| r.endpoint.clone())
            .collect();
        assert_eq!(endpoints, vec!["setCustomFields", "getInfo"]);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn system_5_5_sandbox_answers_like_manychat_to_a_bad_request() {
        let (sandbox, shutdown) = start().await;
        let http = reqwest::Client::new();
        let url = format!("{}/fb/sending/sendFlow", sandbox.base_url);

        let unauthenticated = http
            .post(&url)
            .json(&json!({"subscriber_id": 1, "flow_ns": "content1"}))
            .send()
            .await
            .expect("answered");
        assert_eq!(unauthenticated.status(), 401);

        let missing_flow = http
            .post(&url)
            .bearer_auth("sandbox-token")
            .json(&json!({"subscriber_id": 1}))
            .send()
            .await
            .expect("answered");
        assert_eq!(missing_flow.status(), 400);
        let body: Value = missing_flow.json().await.expect("JSON");
        assert_eq!(body["status"], "error");

        assert!(
            lock(&sandbox.requests).is_empty(),
            "refused calls are not recorded"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn system_5_5_sandbox_invented_contact_has_no_phone_or_email() {
        let data = invented_contact("42", &[], &[]);
        assert_eq!(data["name"], "Demo Contact");
        assert_eq!(data["phone"], Value::Null);
        assert_eq!(data["email"], Value::Null);
        assert_eq!(data["whatsapp_phone"], Value::Null);
    }

    #[test]
    fn system_5_5_sandbox_display_shows_text_but_hides_a_token_value() {
        assert_eq!(
            display_value("ai_message", &json!("Line one\n\nLine two")),
            "\"Line one\n\nLine two\""
        );
        assert_eq!(display_value("seats", &json!(3)), "3");
        assert_eq!(
            display_value("ai_token", &json!("c2VjcmV0LXRva2VuLXZhbHVl")),
            "[token, 24 chars]"
        );
    }

    #[test]
    fn sandbox_base_url_reaches_an_unspecified_address_through_loopback() {
        assert_eq!(
            base_url_for("0.0.0.0:8080".parse().expect("addr")),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            base_url_for("[::]:8080".parse().expect("addr")),
            "http://[::1]:8080"
        );
        assert_eq!(
            base_url_for("127.0.0.1:9".parse().expect("addr")),
            "http://127.0.0.1:9"
        );
    }
}
