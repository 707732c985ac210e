//! `GET /console/try`, `POST /console/try`: the owner writes as a test contact and sees each
//! reply as the contact would, with what the agent did beside it, and the ManyChat calls the
//! service made for that contact (recorded, never sent: `manychat::recorder`).
//!
//! The try-out drives the production route: the POST builds the request ManyChat's Dynamic
//! Block would send (the contact's id, the text, the contact token ManyChat would substitute,
//! the shared secret in `Authorization`) and hands it to the service's own webhook router in
//! process, so parsing, the secret check, the limits, the race, the turn and the rendering are
//! the real ones; the block that comes back is read as ManyChat reads it (its texts, its
//! `set_field_value` action, kept in the recorder as ManyChat keeps a field). The shared secret
//! never leaves the server. Then it redirects to the GET (POST/redirect/GET), which shows the
//! contact's turns from the store.
//!
//! Test contacts are ids from `SubscriberId::is_test_contact`'s reserved range; a new one is
//! random. The page refuses any other id (404): it never writes as a real contact.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Form;
use axum::body::Body;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_service::Service;

use super::Console;
use super::pages::{LoggedIn, checked_post, html, not_found, redirect, unavailable};
use super::templates::{Nav, shell, slots};
use super::turn_view;
use crate::ids::SubscriberId;
use crate::manychat::SandboxRequest;
use crate::store::{BrowsedTurn, TurnsPage};
use crate::words::{Key, Words};

/// The most of a try-out's answer read (a Dynamic Block is a few KiB).
const MAX_ANSWER: usize = 1024 * 1024;
/// Turns the page shows (the newest, oldest first).
const SHOWN_TURNS: u32 = 20;

#[derive(Deserialize, Default)]
pub(super) struct TryQuery {
    #[serde(default)]
    contact: Option<String>,
    /// The route's HTTP status when it was not 200 (a 429 past the contact's limit, …).
    #[serde(default)]
    answered: Option<u16>,
}

/// `raw` as a test contact's id; `None` for anything else.
fn test_contact(raw: &str) -> Option<SubscriberId> {
    SubscriberId::parse(raw)
        .ok()
        .filter(SubscriberId::is_test_contact)
}

pub(super) async fn page(
    State(console): State<Arc<Console>>,
    Query(query): Query<TryQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let contact = match query.contact.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(raw) => match test_contact(raw) {
            Some(contact) => Some(contact),
            None => {
                return not_found(&console, &cookie, Key::ConNotTestContact);
            }
        },
    };
    let mut turns = Vec::new();
    let mut conversation = None;
    if let Some(contact) = &contact {
        let store = console.service.store.as_ref();
        match store.conversation_by_subscriber(contact).await {
            Ok(Some(found)) => {
                let page = TurnsPage {
                    after: None,
                    limit: SHOWN_TURNS,
                };
                match store.conversation_turns(found.id, page).await {
                    Ok(found) => turns = found,
                    Err(error) => return unavailable(&console, &error),
                }
                conversation = Some(found.id);
            }
            Ok(None) => {}
            Err(error) => return unavailable(&console, &error),
        }
    }
    turns.reverse();
    let calls = contact
        .as_ref()
        .map(|c| console.service.recorder.calls_for(c))
        .unwrap_or_default();
    let view = View {
        csrf: &console.sessions.csrf_token(&cookie),
        contact: contact.as_ref(),
        conversation,
        turns: &turns,
        calls: &calls,
        answered: query.answered,
        live_model: console.service.live_model,
        model: &console.running.model_id,
        ready: console.service.secret.is_some(),
        token_field: &console.service.token_field,
        words: console.words(),
    };
    html(StatusCode::OK, try_page(&view))
}

#[derive(Deserialize)]
pub(super) struct SendForm {
    #[serde(default)]
    csrf: Option<String>,
    /// The test contact to continue; empty: a new one.
    #[serde(default)]
    contact: String,
    #[serde(default)]
    text: String,
}

pub(super) async fn send(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<SendForm>,
) -> Response {
    if let Err(refused) = checked_post(&console, &headers, form.csrf.as_deref()) {
        return refused.into_response();
    }
    let contact = if form.contact.trim().is_empty() {
        SubscriberId::new_test_contact()
    } else {
        match test_contact(&form.contact) {
            Some(contact) => contact,
            None => {
                return (
                    StatusCode::BAD_REQUEST,
                    "contact: must be a test contact's id",
                )
                    .into_response();
            }
        }
    };
    if form.text.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "text: write a message first").into_response();
    }
    let Some(secret) = console.service.secret.clone() else {
        return (
            StatusCode::CONFLICT,
            "the try-out needs MANYCHAT_SHARED_SECRET: the route refuses requests without it",
        )
            .into_response();
    };
    let recorder = &console.service.recorder;
    // What ManyChat substitutes into the block's body: the contact's token field.
    let token = recorder
        .field(&contact, &console.service.token_field)
        .and_then(|v| v.as_str().map(str::to_owned));
    let mut body = json!({"subscriber_id": contact.as_str(), "text": form.text});
    if let Some(token) = token {
        body["ai_token"] = Value::String(token);
    }
    let body = body.to_string();
    let mut request = Request::builder()
        .method("POST")
        .uri(crate::http::MESSAGE_PATH)
        .header(header::AUTHORIZATION, format!("Bearer {}", secret.expose()))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body))
        .expect("a request of a path, headers and bytes");
    // The try-out comes from inside the process.
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 0))));
    let mut webhook = console.service.webhook.clone();
    let Ok(()) = poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut webhook, cx)).await;
    let Ok(answer) = webhook.call(request).await;
    let status = answer.status();
    // Read whole: the turn's actions run once the body has been taken, as after a real
    // response.
    let bytes = axum::body::to_bytes(answer.into_body(), MAX_ANSWER)
        .await
        .unwrap_or_default();
    if let Some(block) = crate::channel::read::read_block(&bytes) {
        for (field, value) in block.set_fields {
            recorder.set_field(&contact, &field, Value::String(value));
        }
    }
    tracing::info!(status = status.as_u16(), "console: try-out message sent");
    let mut to = format!("/console/try?contact={}", contact.as_str());
    if status != StatusCode::OK {
        to.push_str(&format!("&answered={}", status.as_u16()));
    }
    redirect(&to)
}

struct View<'a> {
    csrf: &'a str,
    contact: Option<&'a SubscriberId>,
    conversation: Option<uuid::Uuid>,
    turns: &'a [BrowsedTurn],
    calls: &'a [SandboxRequest],
    answered: Option<u16>,
    live_model: bool,
    model: &'a str,
    ready: bool,
    token_field: &'a str,
    words: Words,
}

fn try_page(view: &View<'_>) -> Markup {
    let w = view.words;
    let t = |key| w.text(key);
    let model = html! { code { (view.model) } };
    shell(
        w,
        t(Key::ConTryTitle),
        Nav::Try,
        view.csrf,
        html! {
            h1 { (t(Key::ConTryTitle)) }
            @if view.live_model {
                p class="warn" id="try-cost" role="note" { (slots(t(Key::ConTryLive), &[model])) }
            } @else {
                p class="hint" id="try-cost" { (slots(t(Key::ConTryMock), &[model])) }
            }
            p class="hint" { (t(Key::ConTryHint)) }
            @if !view.ready {
                p class="error" role="alert" { (t(Key::ConTryOff)) }
            }
            @if let Some(status) = view.answered {
                p class="error" role="alert" id="try-answered" {
                    (w.fill(Key::ConTryAnswered, &[&status.to_string()]))
                    @match answered_why(status) {
                        Some(why) => { ": " (t(why)) },
                        None => ".",
                    }
                }
            }
            section aria-labelledby="try-title" {
                h2 id="try-title" {
                    @match view.contact {
                        Some(contact) => (slots(t(Key::ConTestContactHeading), &[html! { code id="try-contact" { (contact.as_str()) } }])),
                        None => (t(Key::ConNewTestContact)),
                    }
                }
                @if let Some(id) = view.conversation {
                    p class="hint" {
                        a href={ "/console/conversations/" (id) } { (t(Key::ConSeeConversation)) }
                        " · " a href="/console/try" id="try-new" { (t(Key::ConStartNew)) }
                    }
                }
                div id="try-replies" class="exchange" role="log" aria-live="polite" aria-label=(t(Key::ConTheConversation)) {
                    @if view.turns.is_empty() {
                        p class="hint" { (t(Key::ConNoMessagesYet)) }
                    }
                    @for turn in view.turns { (turn_view::turn(w, turn)) }
                }
                form method="post" action="/console/try" id="try-form" {
                    input type="hidden" name="csrf" value=(view.csrf);
                    input type="hidden" name="contact" value=(view.contact.map(SubscriberId::as_str).unwrap_or(""));
                    label for="try-message" { (t(Key::ConMessageAsContact)) }
                    textarea id="try-message" name="text" rows="3" maxlength="4096" required {}
                    button type="submit" id="try-send" { (t(Key::ConSend)) }
                }
            }
            @if view.contact.is_some() {
                section aria-labelledby="calls-title" id="try-calls" {
                    h2 id="calls-title" { (t(Key::ConCallsTitle)) }
                    @if view.calls.is_empty() {
                        p class="hint" { (t(Key::ConNoCallsYet)) }
                    } @else {
                        ol {
                            @for call in view.calls {
                                li data-call=(call.endpoint) {
                                    code { (call.endpoint) } " " code class="body" { (shown_body(w, &call.body, view.token_field)) }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// Why the route refused the try-out, in plain words.
fn answered_why(status: u16) -> Option<Key> {
    match status {
        429 => Some(Key::ConTry429),
        400 => Some(Key::ConTry400),
        401 => Some(Key::ConTry401),
        _ => None,
    }
}

/// A recorded call's body as the page shows it: a contact token (the token field, or any field
/// named like one) as its length only, the rest inert.
fn shown_body(w: Words, body: &Value, token_field: &str) -> String {
    let mut body = body.clone();
    let secret = |name: &str| name == token_field || name.to_ascii_lowercase().contains("token");
    let mask = |item: &mut Value| {
        let named = item
            .get("field_name")
            .and_then(Value::as_str)
            .is_some_and(secret);
        if let (true, Some(value)) = (named, item.get_mut("field_value")) {
            let length = value.as_str().map_or(0, |s| s.chars().count());
            *value = Value::String(w.fill(Key::ConTokenMasked, &[&length.to_string()]));
        }
    };
    mask(&mut body);
    if let Some(fields) = body.get_mut("fields").and_then(Value::as_array_mut) {
        fields.iter_mut().for_each(mask);
    }
    turn_view::inert(&body.to_string())
}
