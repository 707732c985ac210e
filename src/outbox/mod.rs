//! Deferred delivery (SYSTEM 3.5): what cannot be answered inside the race is written to the
//! outbox and delivered by the worker as two ManyChat calls that are one delivery: the reply
//! text into the contact's `MANYCHAT_REPLY_FIELD` (with the delivery handshake, together with
//! the message's delivery id), then `sendFlow` of `MANYCHAT_REPLY_FLOW_NS`.
//!
//! Invariants:
//! - The outbox row is the only truth; the field is rewritten before every trigger, retries
//!   included, and never read back.
//! - A failed attempt is retried from the first message ManyChat has not accepted: a message
//!   whose trigger was accepted is never sent again (which overrides SYSTEM 3.5's
//!   "a partial delivery is retried whole" for accepted messages). The row records how many
//!   messages were accepted (`messages_delivered`).
//! - 429, 5xx and network errors retry until the row is too old to help
//!   (`OUTBOX_GIVE_UP_AFTER_MS`, never past the contact's 24-hour window), backoff
//!   `min(60, 2^attempts)` s or ManyChat's `Retry-After`; while ManyChat keeps failing the
//!   worker probes it one row at a time (`retry`). Any other error dead-letters the row at once. A trigger that got no answer (a
//!   timeout or a connection lost after sending: ManyChat may have run it) is sent at most
//!   `MAX_UNANSWERED_TRIGGERS` times in all, i.e. retried at most once; then the row is
//!   dead-lettered rather than risk a third copy.
//! - Every trigger is counted on the row before it leaves and settled when ManyChat answers,
//!   and the acceptance of the last message is saved before any action goes; each action's
//!   outcome is saved on the row as it completes (the payload's `actions`). A process killed at
//!   any moment resumes after what ManyChat accepted: only the one request it got no answer to
//!   is sent again, at most once. With the delivery handshake (`MANYCHAT_DELIVERED_FIELD`,
//!   [`handshake`]) the contact is read before an unanswered trigger is sent again, and a
//!   message the reply flow recorded as delivered is not sent again at all; without it, or
//!   when that read fails, a message may reach the contact twice, never three times.
//! - A reply's actions run once, after its first successful delivery; a dead-lettered row's
//!   actions are recorded `dead_lettered` and never performed (012). A dead-lettered reply hands
//!   its contact to a person: `escalated_at` is set and `rules.handoff` performed.
//! - Pacing and order are the store's claim rules (no overtaking, gap after the previous reply)
//!   plus the gap between the messages of one row, waited here on tokio's clock. Contacts never
//!   wait for each other: each contact's rows have their own lane (see `worker`). A claim takes
//!   `contact_token` writes after every other due row.
//! - Rows are claimed with a short lease that the live worker renews while it holds them, so a
//!   crashed worker's rows are taken again within seconds and a live worker's never are.
//! - A database error never kills the worker; on shutdown it finishes the rows in hand.

pub mod handoff;
pub mod handshake;
pub mod retry;
mod worker;

pub use handoff::{HandoffPayload, Handoffs};
pub use handshake::DeliveryHandshake;
pub use retry::{DEFAULT_GIVE_UP_AFTER, backoff};
pub use worker::{
    DEFAULT_LEASE, DEFAULT_MAX_IN_FLIGHT, DEFAULT_SHUTDOWN_DRAIN, OutboxWorker, WorkerSettings,
};

use serde::{Deserialize, Serialize};

use crate::actions::StagedAction;

/// How many times one message's trigger may go unanswered (ManyChat may have run it) before the
/// row is dead-lettered: the first send and one retry.
pub const MAX_UNANSWERED_TRIGGERS: i32 = 2;

/// The payload of a `reply` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyPayload {
    /// The messages, each delivered as one field write plus one flow trigger.
    pub messages: Vec<String>,
    /// Actions to perform once, after the text is delivered.
    #[serde(default)]
    pub actions: Vec<StagedAction>,
    /// The agent turn whose action record the worker updates; `None` for an escalation copy
    /// sent after an abort (no agent turn is recorded then). A row written with its turn gets
    /// the turn's id from the store.
    pub turn_id: Option<i64>,
    /// Set while the row is a promise (3.4): the reply owed after an acknowledgement
    /// or a silent response, holding the escalation copy until the turn keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise: Option<PromiseNote>,
}

impl ReplyPayload {
    /// A reply of `messages` alone (no actions, its turn filled in by the store).
    pub fn of(messages: Vec<String>) -> Self {
        Self {
            messages,
            actions: Vec::new(),
            turn_id: None,
            promise: None,
        }
    }
}

/// What a promise row remembers so that a restarted process can run its turn again. The
/// contact's message is the row's `turnId` (no reply is recorded with a promise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromiseNote {
    /// When the turn's `MODEL_ABORT_MS` window ends (wall clock).
    pub abort_at: chrono::DateTime<chrono::Utc>,
    /// Whether the turn reads and extends history (019).
    pub bound: bool,
}
