//! Issuing a contact token and getting it into the contact's ManyChat field (019); and `tokens
//! backfill`.
//!
//! # In the response, with the API write as the fallback
//!
//! A contact's first token rides on the response that answers its first message: the Dynamic
//! Block sets the token field itself (`set_field_value`), which costs none of ManyChat's 10
//! requests a second (a crowd of new contacts once spent the whole budget on token writes). The
//! API write stays as the fallback, because only the contact's next request proves the block's
//! action arrived: [`TokenService::for_response`] queues a `contact_token` row due
//! [`RESPONSE_FALLBACK`] later, and [`TokenService::after_request`] settles it without a request
//! when a request carries that token first. The outbox writes the rows still pending when due,
//! at the limiter's background priority (after every reply). A token reissued after an unbound
//! request is never put in a response (whoever sent it may hold the shared secret but not the
//! contact's token, and the contact has a history): it is written through the API beside the
//! model call, as is `tokens backfill`'s ([`TokenService::issue_and_write`]), also at background
//! priority.
//!
//! # Why the outbox row carries the plain token
//!
//! The database keeps only hashes, so a retry needs the plain value from somewhere. The options
//! were (a) keep the plain token in the `contact_token` row, or (b) keep only the generation and
//! issue yet another token when the worker runs. (b) rotates the hashes a second time: the
//! contact's last delivered token drops out of "previous" before the new one has reached
//! ManyChat, so every request in between, and every one after a failed retry, is unbound. (a)
//! keeps the contact bound throughout (the token they hold stays "previous" until the new one
//! lands), so we chose (a), bounded as follows:
//! - A row is written for a token carried by a response (the fallback, settled as soon as a
//!   request proves the token: usually the contact's next message) or when an API write failed
//!   or ran out of time, so the plain token rests in the database only until the token is known
//!   to be in the contact's field.
//! - The outbox is server-side, in the same database as the history the token guards: anyone who
//!   can read the row can already read the history, so the row reveals nothing the token
//!   protects (the same reasoning 024 applies to note text in reply rows).
//! - A row is **superseded** when the conversation has moved to a newer generation: the worker
//!   then marks it delivered without writing, so an old token never overwrites a newer one. It
//!   also refuses a row whose token does not hash to the current hash.
//! - The token is never logged, never in an error message (a ManyChat error keeps none of
//!   ManyChat's text, so `last_error` cannot hold it), and [`TokenPayload`]'s `Debug`
//!   is redacted.
//! - Once the row is settled (delivered, superseded or dead-lettered) the store removes the
//!   token from its payload, keeping only the generation (`Store::mark_delivered`,
//!   `Store::mark_failed`): the plain token rests in the database only while a write awaits its
//!   retry.
//!
//! Concurrency: two unbound requests of one contact racing past [`super::should_issue`] can issue
//! two generations; whichever write lands last is the contact's token and still matches (current
//! or previous), and the older row, if any, is superseded.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::{Binding, issue, should_issue};
use crate::clock::Clock;
use crate::ids::Secret;
use crate::manychat::{ManyChatClient, ManyChatError};
use crate::store::{Conversation, NewOutboxRow, OutboxKind, Store, StoreError};

/// How long after a response carried a new token its API write waits for a request to prove
/// the token arrived (then the write is not needed).
pub const RESPONSE_FALLBACK: Duration = Duration::from_secs(60);

/// How long after a token was issued a request presenting it settles its fallback write: the
/// check costs one write, so it is made only while a fallback may still be pending.
pub const PROOF_WINDOW: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// `tokens backfill` issues tokens to contacts active within this window.
pub const BACKFILL_WINDOW: Duration = Duration::from_secs(30 * 24 * 60 * 60);

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token could not be stored or its retry could not be queued. Nothing reached ManyChat
    /// unrecorded: either no hash was stored, or the write failed and only the queueing did.
    #[error("contact token: {0}")]
    Store(#[from] StoreError),
}

/// Where an issued token ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueOutcome {
    /// Written to the contact's token field.
    Written { generation: i64 },
    /// The write failed or was not done in time: the outbox row `row` will write it.
    Queued { generation: i64, row: i64 },
}

/// The payload of a `contact_token` outbox row (see the module doc for why it holds the token).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenPayload {
    /// The conversation's `token_generation` this token was issued as; a row whose generation
    /// is no longer the conversation's is superseded.
    pub generation: i64,
    /// The plain token to write.
    pub token: String,
}

impl fmt::Debug for TokenPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenPayload")
            .field("generation", &self.generation)
            .field("token", &"[redacted]")
            .finish()
    }
}

/// What `tokens backfill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackfillReport {
    /// Contacts issued a token.
    pub issued: usize,
    /// Of those, tokens already in the contact's field.
    pub written: usize,
    /// Of those, tokens left to the outbox worker.
    pub queued: usize,
}

/// Issues tokens and writes them to ManyChat. Cloning is cheap.
#[derive(Clone)]
pub struct TokenService {
    store: Arc<dyn Store>,
    manychat: ManyChatClient,
    /// `MANYCHAT_TOKEN_FIELD`: the contact custom field that holds the token.
    token_field: Arc<str>,
    /// Stamps `token_issued_at` and the outbox row, and drives the hourly reissue limit.
    clock: Clock,
}

impl fmt::Debug for TokenService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenService")
            .field("token_field", &self.token_field)
            .finish_non_exhaustive()
    }
}

impl TokenService {
    pub fn new(
        store: Arc<dyn Store>,
        manychat: ManyChatClient,
        token_field: impl Into<String>,
        clock: Clock,
    ) -> Self {
        Self {
            store,
            manychat,
            token_field: Arc::from(token_field.into()),
            clock,
        }
    }

    /// What the turn calls once it has classified the request. When [`should_issue`] says so:
    /// a contact's first token is issued for the response to carry
    /// ([`TokenService::for_response`]) and returned; a token reissued after an unbound request
    /// is written through the API beside the model call, until `deadline`
    /// ([`TokenService::start`]), never shown in the response: that request may come from
    /// someone holding the shared secret but not the contact's token, who must not be handed
    /// one to a history. Otherwise, when the request presented the contact's current token soon
    /// after it was issued, settles the token's fallback write in the background (tracked by
    /// `tasks`): the token is in the contact's field.
    pub async fn after_request(
        &self,
        tasks: &TaskTracker,
        conversation: &Conversation,
        binding: &Binding,
        presented: Option<&str>,
        deadline: Instant,
    ) -> Option<Secret> {
        let now = self.clock.now();
        if should_issue(conversation, binding, now) {
            if *binding != Binding::NoTokenYet {
                self.start(tasks, conversation.clone(), deadline);
                return None;
            }
            return match self.for_response(conversation).await {
                Ok(token) => Some(token),
                Err(error) => {
                    tracing::error!(
                        conversation = %conversation.id,
                        error = %error,
                        "contact token could not be issued"
                    );
                    None
                }
            };
        }
        let recent = conversation
            .token_issued_at
            .is_some_and(|issued| now - issued <= PROOF_WINDOW);
        let current = conversation.token_hash.as_deref();
        if *binding == Binding::Bound
            && recent
            && let (Some(presented), Some(current)) = (presented, current)
            && super::matches(presented.trim(), current)
        {
            let store = self.store.clone();
            let (id, generation) = (conversation.id, conversation.token_generation);
            tasks.spawn(async move {
                match store.settle_contact_tokens(id, generation, now).await {
                    Ok(0) => {}
                    Ok(settled) => tracing::info!(
                        conversation = %id,
                        generation,
                        settled,
                        "contact token proven by a request; its fallback write is not needed"
                    ),
                    Err(error) => tracing::warn!(
                        conversation = %id,
                        error = %error,
                        "contact token fallback could not be settled; it will be written"
                    ),
                }
            });
        }
        None
    }

    /// Issues a token for the response to carry: stores its hash (the old current becomes
    /// previous) and queues its API write due [`RESPONSE_FALLBACK`] later, the fallback a request
    /// carrying the token settles. Returns the plain token, for the response only.
    pub async fn for_response(&self, conversation: &Conversation) -> Result<Secret, TokenError> {
        let issued = issue();
        let now = self.clock.now();
        let generation = self
            .store
            .set_token(conversation.id, &issued.hash, now)
            .await?;
        let fallback = chrono::Duration::from_std(RESPONSE_FALLBACK).unwrap_or_default();
        let row = self
            .store
            .enqueue(
                &NewOutboxRow::of(
                    conversation,
                    OutboxKind::ContactToken,
                    serde_json::json!({
                        "generation": generation,
                        "token": issued.token.expose(),
                    }),
                    now,
                )
                .due_at(now + fallback),
            )
            .await?;
        tracing::info!(
            conversation = %conversation.id,
            generation,
            row,
            "contact token issued; the response sets it, the outbox writes it if no request proves it"
        );
        Ok(issued.token)
    }

    /// Issues a token in a task that writes it through the API (no response to ride on): the
    /// write gets until `deadline`; if it fails or is not done by then, the task queues a
    /// `contact_token` row and the outbox worker writes it.
    pub fn start(
        &self,
        tasks: &TaskTracker,
        conversation: Conversation,
        deadline: Instant,
    ) -> JoinHandle<Result<IssueOutcome, TokenError>> {
        let service = self.clone();
        tasks.spawn(async move {
            let outcome = service.issue_until(&conversation, Some(deadline)).await;
            if let Err(error) = &outcome {
                tracing::error!(
                    conversation = %conversation.id,
                    error = %error,
                    "contact token could not be issued"
                );
            }
            outcome
        })
    }

    /// Issues a token and writes it, waiting as long as the write takes (the ManyChat client's
    /// own timeout bounds it); a failed write is queued to the outbox.
    pub async fn issue_and_write(
        &self,
        conversation: &Conversation,
    ) -> Result<IssueOutcome, TokenError> {
        self.issue_until(conversation, None).await
    }

    /// Issue → store the hash (the old current becomes previous) → write the plain token to
    /// the token field; on failure, or at `deadline`, queue the write.
    async fn issue_until(
        &self,
        conversation: &Conversation,
        deadline: Option<Instant>,
    ) -> Result<IssueOutcome, TokenError> {
        let issued = issue();
        let issued_at = self.clock.now();
        let generation = self
            .store
            .set_token(conversation.id, &issued.hash, issued_at)
            .await?;
        let value = Value::String(issued.token.expose().to_owned());
        // A token write goes after every reply waiting for a slot.
        let manychat = self.manychat.background();
        let write = manychat.set_field(&conversation.subscriber_id, &self.token_field, &value);
        let written = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, write).await {
                Ok(result) => result.map_err(|e| e.kind()),
                Err(_) => Err("deadline"),
            },
            None => write.await.map_err(|e: ManyChatError| e.kind()),
        };
        match written {
            Ok(()) => {
                tracing::info!(
                    conversation = %conversation.id,
                    generation,
                    "contact token issued and written"
                );
                Ok(IssueOutcome::Written { generation })
            }
            Err(reason) => {
                let now = self.clock.now();
                let payload = TokenPayload {
                    generation,
                    token: issued.token.expose().to_owned(),
                };
                let row = self
                    .store
                    .enqueue(&NewOutboxRow::of(
                        conversation,
                        OutboxKind::ContactToken,
                        serde_json::json!({
                            "generation": payload.generation,
                            "token": payload.token,
                        }),
                        now,
                    ))
                    .await?;
                tracing::warn!(
                    conversation = %conversation.id,
                    generation,
                    row,
                    reason,
                    "contact token write left to the outbox"
                );
                Ok(IssueOutcome::Queued { generation, row })
            }
        }
    }

    /// `tokens backfill`: issues a token to every contact [`lacking`] one.
    /// Idempotent: a contact issued a token is not lacking one any more, so a second run
    /// issues nothing. A store error stops the run; running it again resumes.
    pub async fn backfill(&self) -> Result<BackfillReport, TokenError> {
        let mut report = BackfillReport::default();
        for conversation in lacking(self.store.as_ref(), self.clock.now()).await? {
            match self.issue_and_write(&conversation).await? {
                IssueOutcome::Written { .. } => report.written += 1,
                IssueOutcome::Queued { .. } => report.queued += 1,
            }
            report.issued += 1;
        }
        tracing::info!(
            issued = report.issued,
            written = report.written,
            queued = report.queued,
            "tokens backfill finished"
        );
        Ok(report)
    }
}

/// Contacts active within [`BACKFILL_WINDOW`] before `now` that have no token.
pub async fn lacking(
    store: &dyn Store,
    now: DateTime<Utc>,
) -> Result<Vec<Conversation>, TokenError> {
    let window = chrono::Duration::from_std(BACKFILL_WINDOW).unwrap_or(chrono::Duration::MAX);
    Ok(store.conversations_without_token(now - window).await?)
}
