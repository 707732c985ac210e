//! The turn's early check for the handoff that holds (`crate::handoff`): after the message is in
//! its place in the contact's order and before anything else (the opening, media, the model), a
//! held conversation's message is recorded with a `held` agent turn and answered with a silent
//! response that keeps the callback. A hold that ran out, or whose tag is gone, is released here
//! and the turn goes on; the first turn after any release tells the model (`release_note`).
//!
//! Invariants: a contact that is not held costs nothing here (no read, no request); a held one
//! costs at most one getInfo (`handoff.tag` set); the `held` turn is unbound, so it never enters
//! the model's history, while the contact's message is recorded as usual.

use super::gates::hour_start;
use super::message::Message;
use super::{Mode, TurnEngine, TurnResponse};
use crate::config::TenantConfig;
use crate::handoff::{self, Hold, Release};
use crate::outbox::ReplyPayload;
use crate::store::{Conversation, NewTurn, StoreError};

/// The outcome of a message answered while its contact is held for a person.
pub(super) const HELD: &str = handoff::HELD_OUTCOME;

impl TurnEngine {
    /// `Some(response)` when the conversation is held: the message is recorded and the turn ends.
    /// `None`: the turn goes on (a release found here is recorded first, and `conversation`
    /// updated so the turn gives its note). `fresh` says `conversation` was read with the turn's
    /// place taken; otherwise it is read again (an earlier turn may have just handed it over).
    pub(super) async fn held(
        &self,
        config: &TenantConfig,
        conversation: &mut Conversation,
        fresh: bool,
        message: &mut Message,
        mode: Mode,
    ) -> Result<Option<TurnResponse>, StoreError> {
        let inner = &self.inner;
        let hours = handoff::hold_hours(config);
        if hours == 0 {
            return Ok(None);
        }
        if !fresh && let Some(now_row) = inner.store.conversation(conversation.id).await? {
            *conversation = now_row;
        }
        let now = inner.clock.now();
        let (since, release_at, why) = match handoff::hold_at(conversation, hours, now) {
            Hold::Free => return Ok(None),
            Hold::Expired { since, at } => (since, at, Release::HoldExpired),
            Hold::Held { since, .. } => {
                let tag = config.rules.handoff.as_ref().and_then(|h| h.tag.as_deref());
                let gone = match tag {
                    Some(tag) => {
                        handoff::tag::tag_removed(&inner.manychat, &conversation.subscriber_id, tag)
                            .await
                    }
                    None => false,
                };
                if !gone {
                    return self
                        .answer_held(conversation, message, mode)
                        .await
                        .map(Some);
                }
                (since, now, Release::TagRemoved)
            }
        };
        if handoff::release::record(inner.store.as_ref(), conversation, since, release_at, why)
            .await?
        {
            inner.metrics.hold_release(why.as_str());
            conversation.hold_released_at = Some(release_at);
            conversation.hold_release_reason = Some(why.as_str().to_owned());
            conversation.hold_note_due = true;
        }
        Ok(None)
    }

    /// Load shedding (`shed`) for a contact held for a person: true when the message was
    /// recorded as held (the caller answers silently: no copy, no handoff again). The tag is not
    /// read (the service is overloaded, and a hold fails toward the person). A hold that ran out
    /// is recorded here and the message is shed as usual (false).
    pub(super) async fn shed_held(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        message: &mut Message,
    ) -> Result<bool, StoreError> {
        let inner = &self.inner;
        match handoff::hold_at(conversation, handoff::hold_hours(config), inner.clock.now()) {
            Hold::Free => Ok(false),
            Hold::Held { .. } => {
                self.answer_held(conversation, message, Mode::Inline)
                    .await?;
                Ok(true)
            }
            Hold::Expired { since, at } => {
                let why = Release::HoldExpired;
                if handoff::release::record(inner.store.as_ref(), conversation, since, at, why)
                    .await?
                {
                    inner.metrics.hold_release(why.as_str());
                }
                Ok(false)
            }
        }
    }

    /// Records the held message and its silent `held` turn, in one write.
    async fn answer_held(
        &self,
        conversation: &Conversation,
        message: &mut Message,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        let now = self.inner.clock.now();
        // Recorded as usual: it counts against the hourly window like any message.
        message.rate_window = Some(hour_start(message.turn.created_at));
        let held = NewTurn::agent(conversation.id, "", HELD, false, now);
        // A silent response promised a reply already (the message waited for an earlier turn):
        // the promise is kept with nothing to say, so its fallback copy and handoff go.
        let deferred =
            (mode == Mode::Deferred && message.promise.is_some()).then(|| ReplyPayload::of(vec![]));
        self.record_server_reply(conversation, message, &held, HELD, deferred)
            .await?;
        self.inner.metrics.held_message();
        Ok(TurnResponse::silent())
    }

    /// The first turn after a release: the note's line for the model, marked given.
    pub(super) async fn release_note(&self, conversation: &Conversation) -> Option<String> {
        let note = handoff::release_note(conversation)?;
        if let Err(error) = self.inner.store.hold_noted(conversation.id).await {
            tracing::warn!(error = %error, "the release note could not be marked given");
        }
        Some(note.line())
    }
}
