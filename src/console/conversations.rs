//! `GET /console/conversations`: the recent conversations (last message, stage, offering, held
//! or not), newest first, a page at a time by keyset; `GET /console/conversations/{id}`: one
//! conversation's turns and what each did, newest first, paged, with the hold or release button.
//!
//! A conversation is named by its UUID (`id`), never by the contact's ManyChat id. The stage is
//! the server's own truth (`sales::known`, the performed writes), as the turns read it.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;
use uuid::Uuid;

use super::Console;
use super::pages::{LoggedIn, html, not_found, unavailable};
use super::templates::{Nav, shell};
use super::turn_view::{self, short, when};
use crate::handoff::Hold;
use crate::store::{Conversation, ConversationsPage, Store, StoreError, TurnsPage};
use crate::words::{Key, Words};

/// Rows a page shows.
pub(super) const PAGE: u32 = 25;

#[derive(Deserialize, Default)]
pub(super) struct ListQuery {
    /// The cursor: the last row of the page before, `<unix ms>.<uuid>`.
    #[serde(default)]
    after: Option<String>,
    /// `1`: the console's test contacts too.
    #[serde(default)]
    tests: Option<String>,
}

/// `<unix ms>.<rest>`, parsed.
fn cursor<T: std::str::FromStr>(raw: &str) -> Option<(DateTime<Utc>, T)> {
    let (ms, rest) = raw.split_once('.')?;
    let at = DateTime::<Utc>::from_timestamp_millis(ms.parse().ok()?)?;
    Some((at, rest.parse().ok()?))
}

/// One row of the list: the conversation and what the page says of it.
pub(super) struct Row {
    pub conversation: Conversation,
    pub stage: Option<&'static str>,
    pub offering: Option<String>,
    pub held: Option<DateTime<Utc>>,
}

/// The stage and offering the server knows of `conversation` (its own records) and its hold.
pub(super) async fn row(
    store: &dyn Store,
    config: &crate::config::TenantConfig,
    conversation: Conversation,
    now: DateTime<Utc>,
) -> Result<Row, StoreError> {
    let record = store.sales_record(conversation.id).await?;
    let known = crate::sales::known::from_record(
        config,
        &record,
        crate::sales::known::Request {
            offering: None,
            bound: true,
            now,
        },
    );
    let held = match crate::handoff::hold_at(&conversation, crate::handoff::hold_hours(config), now)
    {
        Hold::Held { since, .. } => Some(since),
        _ => None,
    };
    Ok(Row {
        stage: known
            .stage
            .and_then(|s| crate::config::FUNNEL_STAGES.get(s).copied()),
        offering: known.offering,
        held,
        conversation,
    })
}

pub(super) async fn list(
    State(console): State<Arc<Console>>,
    Query(query): Query<ListQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let after = match query.after.as_deref().map(cursor::<Uuid>) {
        None => None,
        Some(Some(after)) => Some(after),
        Some(None) => return not_found(&console, &cookie, Key::ConBadPageLink),
    };
    let tests = query.tests.as_deref() == Some("1");
    let store = console.service.store.as_ref();
    let page = ConversationsPage {
        after,
        limit: PAGE + 1,
        test_contacts: tests,
    };
    let mut found = match store.recent_conversations(page).await {
        Ok(found) => found,
        Err(error) => return unavailable(&console, &error),
    };
    let more = found.len() > PAGE as usize;
    found.truncate(PAGE as usize);
    let config = console.config.snapshot();
    let now = console.clock.now();
    let mut rows = Vec::with_capacity(found.len());
    for conversation in found {
        match row(store, &config, conversation, now).await {
            Ok(row) => rows.push(row),
            Err(error) => return unavailable(&console, &error),
        }
    }
    let next = more
        .then(|| rows.last())
        .flatten()
        .and_then(|r| Some((r.conversation.last_message_at?, r.conversation.id)))
        .map(|(at, id)| {
            let tests = if tests { "&tests=1" } else { "" };
            format!(
                "/console/conversations?after={}.{id}{tests}",
                at.timestamp_millis()
            )
        });
    let csrf = console.sessions.csrf_token(&cookie);
    html(
        StatusCode::OK,
        list_page(
            console.words(),
            &csrf,
            &rows,
            tests,
            after.is_some(),
            next.as_deref(),
        ),
    )
}

fn list_page(
    w: Words,
    csrf: &str,
    rows: &[Row],
    tests: bool,
    paged: bool,
    next: Option<&str>,
) -> Markup {
    let t = |key| w.text(key);
    let none = || t(Key::None_).to_owned();
    shell(
        w,
        t(Key::ConNavConversations),
        Nav::Conversations,
        csrf,
        html! {
            h1 { (t(Key::ConNavConversations)) }
            p {
                @if tests {
                    a href="/console/conversations" { (t(Key::ConHideTests)) }
                } @else {
                    a href="/console/conversations?tests=1" id="show-tests" { (t(Key::ConShowTests)) }
                }
                @if paged { " · " a href={ "/console/conversations" (if tests { "?tests=1" } else { "" }) } { (t(Key::ConNewest)) } }
            }
            @if rows.is_empty() {
                p id="no-conversations" { (t(Key::ConNoConversations)) }
            } @else {
                ul class="rows" id="conversations" {
                    @for row in rows {
                        li data-conversation=(row.conversation.id) {
                            a href={ "/console/conversations/" (row.conversation.id) } {
                                (t(Key::ConConversation)) " " code { (short(row.conversation.id)) }
                            }
                            @if row.conversation.subscriber_id.is_test_contact() { " " span class="tag" { (t(Key::ConTestContactTag)) } }
                            @if row.held.is_some() { " " span class="tag held" { (t(Key::ConHeldTag)) } }
                            br;
                            span class="hint" {
                                (w.fill(Key::ConRowLine, &[
                                    &row.conversation.last_message_at.map(|at| when(w, at)).unwrap_or_default(),
                                    &row.stage.map_or_else(none, str::to_owned),
                                    &row.offering.as_deref().map_or_else(none, turn_view::inert),
                                ]))
                            }
                        }
                    }
                }
            }
            @if let Some(next) = next {
                p { a href=(next) rel="next" id="older" { (t(Key::ConOlderConversations)) } }
            }
        },
    )
}

#[derive(Deserialize, Default)]
pub(super) struct TurnsQuery {
    /// The cursor: the last turn of the page before, `<unix ms>.<seq>`.
    #[serde(default)]
    after: Option<String>,
    /// What the last button did (`held`, `already_held`, …: fixed words).
    #[serde(default)]
    done: Option<String>,
}

pub(super) async fn one(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Query(query): Query<TurnsQuery>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    let Ok(id) = Uuid::parse_str(&id) else {
        return not_found(&console, &cookie, Key::ConNoConversation);
    };
    let after = match query.after.as_deref().map(cursor::<i64>) {
        None => None,
        Some(Some(after)) => Some(after),
        Some(None) => return not_found(&console, &cookie, Key::ConBadPageLink),
    };
    let store = console.service.store.as_ref();
    let conversation = match store.conversation(id).await {
        Ok(Some(conversation)) => conversation,
        Ok(None) => return not_found(&console, &cookie, Key::ConNoConversation),
        Err(error) => return unavailable(&console, &error),
    };
    let page = TurnsPage {
        after,
        limit: PAGE + 1,
    };
    let mut turns = match store.conversation_turns(id, page).await {
        Ok(turns) => turns,
        Err(error) => return unavailable(&console, &error),
    };
    let more = turns.len() > PAGE as usize;
    turns.truncate(PAGE as usize);
    let config = console.config.snapshot();
    let row = match row(store, &config, conversation, console.clock.now()).await {
        Ok(row) => row,
        Err(error) => return unavailable(&console, &error),
    };
    let next = more.then(|| turns.last()).flatten().map(|t| {
        format!(
            "/console/conversations/{id}?after={}.{}",
            t.turn.created_at.timestamp_millis(),
            t.turn.seq
        )
    });
    let csrf = console.sessions.csrf_token(&cookie);
    let done = query.done.as_deref().and_then(super::held::done_message);
    let w = console.words();
    let t = |key| w.text(key);
    html(
        StatusCode::OK,
        shell(
            w,
            t(Key::ConConversation),
            Nav::Conversations,
            &csrf,
            html! {
                h1 { (t(Key::ConConversation)) " " code { (short(id)) } }
                @if let Some((class, message)) = done {
                    p class=(class) role="status" id="done" { (t(message)) }
                }
                (summary(w, &row, &csrf))
                section aria-labelledby="turns-title" {
                    h2 id="turns-title" { (t(Key::ConTurnsNewestFirst)) }
                    @if turns.is_empty() { p { (t(Key::ConNoTurnsOnPage)) } }
                    @for turn in &turns { (turn_view::turn(w, turn)) }
                    @if let Some(next) = next {
                        p { a href=(next) rel="next" id="older" { (t(Key::ConOlderTurns)) } }
                    }
                    @if after.is_some() {
                        p { a href={ "/console/conversations/" (id) } { (t(Key::ConNewestTurns)) } }
                    }
                }
            },
        ),
    )
}

/// What the conversation page says of the contact, and its hold or release button.
fn summary(w: Words, row: &Row, csrf: &str) -> Markup {
    let c = &row.conversation;
    let t = |key| w.text(key);
    let none = || t(Key::None_).to_owned();
    html! {
        section aria-labelledby="contact-title" {
            h2 id="contact-title" { (t(Key::ConContact)) }
            dl {
                dt { (t(Key::ConChannel)) } dd { (c.channel) }
                dt { (t(Key::ConFirstContact)) } dd { (when(w, c.created_at)) }
                dt { (t(Key::ConLastMessage)) } dd { (c.last_message_at.map_or_else(none, |at| when(w, at))) }
                dt { (t(Key::ConStage)) } dd id="stage" { (row.stage.map_or_else(none, str::to_owned)) }
                dt { (t(Key::ConOffering)) } dd { (row.offering.as_deref().map_or_else(none, turn_view::inert)) }
                dt { (t(Key::ConMessagesCounted)) } dd { (c.turn_count) }
                @if c.subscriber_id.is_test_contact() {
                    dt { (t(Key::ConTestContact)) } dd { a href={ "/console/try?contact=" (c.subscriber_id.as_str()) } { (t(Key::ConContinueTryout)) } }
                }
            }
            @if let Some(since) = row.held {
                p class="held" id="hold-state" { (w.fill(Key::ConHeldSinceDot, &[&when(w, since)])) }
                form method="post" action="/console/held/release" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="conversation" value=(c.id);
                    input type="hidden" name="back" value="conversation";
                    button type="submit" id="release" data-action="release" { (t(Key::ConHandBack)) }
                }
            } @else {
                p id="hold-state" { (t(Key::ConAssistantAnswers)) }
                form method="post" action={ "/console/conversations/" (c.id) "/hold" } {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" id="hold" data-action="hold" { (t(Key::ConHandToPerson)) }
                }
                p class="hint" { (t(Key::ConHoldHint)) }
            }
        }
    }
}
