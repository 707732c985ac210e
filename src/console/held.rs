//! `GET /console/held`: the contacts held for a person now, since when and why, each with its
//! release button; `POST /console/held/release` hands one back (the CLI's and the release
//! route's own `handoff::release::release_contact`, recorded `released`);
//! `POST /console/conversations/{id}/hold` hands one to a person (the escalation's hold,
//! `TurnEngine::hold_for_person`).
//!
//! Each POST answers with a redirect to a page that says what happened in fixed words
//! (`?done=…`): a double click or a second owner finds the contact released (or held) already
//! and is told so; the store's conditional write makes sure it happens once, and nothing is
//! sent to ManyChat twice.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use super::Console;
use super::pages::{LoggedIn, checked_post, html, redirect, unavailable};
use super::templates::{Nav, shell};
use super::turn_view::{short, when};
use crate::turn::OwnerHold;
use crate::words::Key;

/// The `?done=` words, and what the page says of each.
pub(super) fn done_message(done: &str) -> Option<(&'static str, Key)> {
    Some(match done {
        "released" => ("ok", Key::ConDoneReleased),
        "already_released" => ("error", Key::ConDoneAlreadyReleased),
        "held" => ("ok", Key::ConDoneHeld),
        "already_held" => ("error", Key::ConDoneAlreadyHeld),
        "hold_off" => ("error", Key::ConDoneHoldOff),
        _ => return None,
    })
}

#[derive(Deserialize, Default)]
pub(super) struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
}

pub(super) async fn page(
    State(console): State<Arc<Console>>,
    Query(query): Query<DoneQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let config = console.config.snapshot();
    let hours = crate::handoff::hold_hours(&config);
    let now = console.clock.now();
    let held = if hours == 0 {
        Vec::new()
    } else {
        let since = now - chrono::Duration::hours(i64::from(hours));
        match console
            .service
            .store
            .held_now(since, crate::store::MAX_PAGE)
            .await
        {
            Ok(held) => held,
            Err(error) => return unavailable(&console, &error),
        }
    };
    let csrf = console.sessions.csrf_token(&cookie);
    let done = query.done.as_deref().and_then(done_message);
    let w = console.words();
    let t = |key| w.text(key);
    html(
        StatusCode::OK,
        shell(
            w,
            t(Key::ConHeldTitle),
            Nav::Held,
            &csrf,
            maud::html! {
                h1 { (t(Key::ConHeldTitle)) }
                @if let Some((class, message)) = done {
                    p class=(class) role="status" id="done" { (t(message)) }
                }
                @if hours == 0 {
                    p { (t(Key::ConHoldsNobody)) }
                } @else if held.is_empty() {
                    p id="none-held" { (t(Key::ConNoneHeld)) }
                } @else {
                    p class="hint" { (w.fill(Key::ConHoldEnds, &[&hours.to_string()])) }
                    ul class="rows" id="held" {
                        @for h in &held {
                            @let c = &h.conversation;
                            li data-conversation=(c.id) {
                                a href={ "/console/conversations/" (c.id) } { (t(Key::ConConversation)) " " code { (short(c.id)) } }
                                @if c.subscriber_id.is_test_contact() { " " span class="tag" { (t(Key::ConTestContactTag)) } }
                                br;
                                span class="hint" {
                                    (w.fill(Key::ConHeldSince, &[
                                        &c.escalated_at.map(|at| when(w, at)).unwrap_or_default(),
                                        &h.reason.as_deref().map_or_else(
                                            || t(Key::ConNoReasonRecorded).to_owned(),
                                            |r| crate::words::reason(w.language, r),
                                        ),
                                    ]))
                                }
                                form method="post" action="/console/held/release" {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="conversation" value=(c.id);
                                    button type="submit" data-action="release" { (t(Key::ConHandBack)) }
                                }
                            }
                        }
                    }
                }
            },
        ),
    )
}

#[derive(Deserialize)]
pub(super) struct ReleaseForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    conversation: String,
    /// `conversation`: the button was on the conversation's page (no `Referer` is sent:
    /// `no-referrer`), so the answer goes back there.
    #[serde(default)]
    back: Option<String>,
}

/// A POST's refusal when its conversation id names no stored conversation.
fn no_such_conversation() -> Response {
    (
        StatusCode::NOT_FOUND,
        "conversation: no conversation has that id",
    )
        .into_response()
}

/// Where a release sends the owner back to: the page the button was on.
fn back(form: &ReleaseForm, id: Uuid, done: &str) -> Response {
    if form.back.as_deref() == Some("conversation") {
        redirect(&format!("/console/conversations/{id}?done={done}"))
    } else {
        redirect(&format!("/console/held?done={done}"))
    }
}

pub(super) async fn release(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<ReleaseForm>,
) -> Response {
    if let Err(refused) = checked_post(&console, &headers, form.csrf.as_deref()) {
        return refused.into_response();
    }
    let Ok(id) = Uuid::parse_str(form.conversation.trim()) else {
        return (
            StatusCode::BAD_REQUEST,
            "conversation: must be a conversation id",
        )
            .into_response();
    };
    let store = console.service.store.as_ref();
    let conversation = match store.conversation(id).await {
        Ok(Some(conversation)) => conversation,
        Ok(None) => return no_such_conversation(),
        Err(error) => return unavailable(&console, &error),
    };
    let config = console.config.snapshot();
    let now = console.clock.now();
    match crate::handoff::release::release_contact(store, &config, &conversation.subscriber_id, now)
        .await
    {
        Ok(Some(why)) => {
            console.service.metrics.hold_release(why.as_str());
            tracing::info!(conversation = %id, "console: contact handed back to the assistant");
            back(&form, id, "released")
        }
        Ok(None) => back(&form, id, "already_released"),
        Err(error) => unavailable(&console, &error),
    }
}

pub(super) async fn hold(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<super::pages::TokenForm>,
) -> Response {
    if let Err(refused) = checked_post(&console, &headers, form.csrf.as_deref()) {
        return refused.into_response();
    }
    let Ok(id) = Uuid::parse_str(&id) else {
        return no_such_conversation();
    };
    let store = console.service.store.as_ref();
    let subscriber = match store.conversation(id).await {
        Ok(Some(conversation)) => conversation.subscriber_id,
        Ok(None) => return no_such_conversation(),
        Err(error) => return unavailable(&console, &error),
    };
    let done = match console.service.turns.hold_for_person(&subscriber).await {
        Ok(OwnerHold::Held) => "held",
        Ok(OwnerHold::AlreadyHeld) => "already_held",
        Ok(OwnerHold::HoldOff) => "hold_off",
        Ok(OwnerHold::UnknownContact) => return no_such_conversation(),
        Err(error) => return unavailable(&console, &error),
    };
    redirect(&format!("/console/conversations/{id}?done={done}"))
}
