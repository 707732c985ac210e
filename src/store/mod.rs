//! Everything the service remembers: conversations, turns, the outbox, counters.
//!
//! One `Store` trait, one implementation per backend (`sqlite`, `postgres`), chosen by
//! `DATABASE_URL`. Both pass the same conformance suite (`conformance`). Time is always passed in
//! by the caller (from `crate::clock::Clock`), never read here, so tests control it.
//!
//! Invariants: turns are never deleted; note text is never stored (024); an outbox row moves
//! `pending → delivering → delivered | failed` and is claimed by one worker at a time (a lease).
//! Both backends keep timestamps to the millisecond (what SQLite stores), and no error they
//! return quotes a stored or bound value (C5).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::ids::{ConversationId, SubscriberId};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(String),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("unsupported DATABASE_URL scheme (expected sqlite:// or postgres://)")]
    UnsupportedUrl,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: ConversationId,
    pub subscriber_id: SubscriberId,
    pub channel: String,
    /// Messages counted by the turn cap (018); maintained by `record_turn` for bound user turns.
    pub turn_count: i64,
    pub escalated_at: Option<DateTime<Utc>>,
    pub last_message_at: Option<DateTime<Utc>>,
    pub token_hash: Option<String>,
    pub previous_token_hash: Option<String>,
    pub token_issued_at: Option<DateTime<Utc>>,
    pub token_generation: i64,
    pub offering: Option<String>,
    pub opening_sent_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Agent,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Agent => "agent",
        }
    }
}

/// A turn to record. `text` is the contact's message (user) or the reply as delivered (agent).
#[derive(Debug, Clone, PartialEq)]
pub struct NewTurn {
    pub conversation_id: ConversationId,
    pub role: Role,
    pub text: String,
    /// One of SYSTEM 4's turn outcomes; `None` on user turns.
    pub outcome: Option<String>,
    pub model: Option<String>,
    /// 019: only bound turns are read as history or counted by the cap.
    pub bound: bool,
    /// 012: `None` when no tool was offered, `[]` when offered and none chosen.
    pub actions: Option<Value>,
    /// 024: successful contact reads this turn.
    pub reads: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cost_usd: f64,
    pub latency_ms: i64,
    pub created_at: DateTime<Utc>,
}

impl NewTurn {
    /// A contact message.
    pub fn user(
        conversation_id: ConversationId,
        text: impl Into<String>,
        bound: bool,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            conversation_id,
            role: Role::User,
            text: text.into(),
            outcome: None,
            model: None,
            bound,
            actions: None,
            reads: 0,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            cost_usd: 0.0,
            latency_ms: 0,
            created_at: at,
        }
    }

    /// An agent reply with its outcome; usage and actions are filled by the caller.
    pub fn agent(
        conversation_id: ConversationId,
        text: impl Into<String>,
        outcome: &str,
        bound: bool,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            role: Role::Agent,
            outcome: Some(outcome.to_owned()),
            ..Self::user(conversation_id, text, bound, at)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub id: i64,
    /// Monotonic per store; orders turns written in the same millisecond.
    pub seq: i64,
    pub conversation_id: ConversationId,
    pub role: Role,
    pub text: String,
    pub outcome: Option<String>,
    pub model: Option<String>,
    pub bound: bool,
    pub actions: Option<Value>,
    pub reads: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cost_usd: f64,
    pub latency_ms: i64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxKind {
    Reply,
    ContactToken,
}

impl OutboxKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxKind::Reply => "reply",
            OutboxKind::ContactToken => "contact_token",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    Pending,
    Delivering,
    Delivered,
    Failed,
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Pending => "pending",
            OutboxStatus::Delivering => "delivering",
            OutboxStatus::Delivered => "delivered",
            OutboxStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewOutboxRow {
    pub conversation_id: ConversationId,
    pub subscriber_id: SubscriberId,
    pub kind: OutboxKind,
    /// `{messages, actions, turnId}` for a reply; `{generation, token}` for a contact token
    /// (`crate::tokens::TokenPayload`).
    pub payload: Value,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub conversation_id: ConversationId,
    pub subscriber_id: SubscriberId,
    pub kind: OutboxKind,
    pub payload: Value,
    pub status: OutboxStatus,
    /// Attempts started so far (incremented when a row is claimed).
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub last_error: Option<String>,
    /// While `delivering`: when the claim lapses and another worker may take the row again.
    pub lease_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// A reply's messages ManyChat already accepted: a retry resumes after them (issue 13).
    pub messages_delivered: i32,
    /// Triggers of the next message that got no answer (ManyChat may have run them); such a
    /// trigger is retried at most once (issue 13).
    pub trigger_timeouts: i32,
}

/// How a worker claims rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaimRules {
    pub now: DateTime<Utc>,
    pub limit: i64,
    /// How long a claim lasts before another worker may take the row again (renewed by the live
    /// worker through `renew_outbox_leases`).
    pub lease: Duration,
    /// 3.5 pacing: a contact's next reply row is not due until this long after its previous
    /// reply row was delivered.
    pub reply_gap: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetUsage {
    pub tokens: i64,
    pub cost_usd: f64,
}

/// What a turn reads before its checks about its conversation, asked for in one call
/// (`Store::turn_context`, `Store::returning_contact`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnContextQuery {
    /// 018 turn cap: read the last `limit` bound user message times (`None`: not read).
    pub cap_limit: Option<i64>,
    /// 018 history: read the last `limit` bound turns created at or after `since` (`None`: not
    /// read).
    pub history: Option<(DateTime<Utc>, i64)>,
    /// The day whose spend is read (the daily budget).
    pub day: NaiveDate,
    /// The hourly window whose count is read for the conversation's contact (`None`: not read).
    pub rate_window: Option<DateTime<Utc>>,
}

/// The answer to a [`TurnContextQuery`]: what `recent_user_turn_times`, `history`, `budget`,
/// `pending_replies` and `rate_count` would answer (empty or zero where not asked).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnContext {
    /// Newest first.
    pub earlier_user_turns: Vec<DateTime<Utc>>,
    /// Oldest first.
    pub history: Vec<Turn>,
    pub spent: BudgetUsage,
    /// Reply rows of the conversation not yet delivered.
    pub queued_replies: i64,
    /// Messages already counted in the contact's current hourly window.
    pub rate_count: i64,
}

impl TurnContext {
    /// The context of an unbound turn (019): no history and no cap times, the rest unchanged.
    pub fn unbound(self) -> Self {
        Self {
            earlier_user_turns: Vec::new(),
            history: Vec::new(),
            ..self
        }
    }
}

/// A turn's record, written once its outcome is known (`Store::record_exchange`): the contact's
/// message and the agent's reply, with what they count and charge.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The contact's message (a user turn).
    pub message: &'a NewTurn,
    /// Counts the message against this contact's hourly window (`None`: not counted).
    pub rate: Option<(&'a SubscriberId, DateTime<Utc>)>,
    /// The agent turn; `None` when the turn records no reply (a model call aborted).
    pub reply: Option<&'a NewTurn>,
    /// Added to its day's budget.
    pub charge: Option<BudgetCharge>,
    /// Marks the message's conversation escalated at this time.
    pub escalated_at: Option<DateTime<Utc>>,
}

/// The ids `record_exchange` gave the turns it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeIds {
    pub message: i64,
    pub reply: Option<i64>,
}

/// What an agent turn adds to its day's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetCharge {
    pub day: NaiveDate,
    pub tokens: i64,
    pub cost_usd: f64,
}

impl BudgetCharge {
    /// What `turn` spent (its input and output tokens and their cost), on its own day (UTC).
    pub fn of(turn: &NewTurn) -> Self {
        Self {
            day: turn.created_at.date_naive(),
            tokens: turn.input_tokens + turn.output_tokens,
            cost_usd: turn.cost_usd,
        }
    }
}

/// Held while a turn of one conversation runs (037); dropping it lets the next turn start.
/// On Postgres it holds a session advisory lock, so the order holds across replicas; on SQLite
/// (one process) the in-process queue in `turn::order` is the whole mechanism.
pub struct ConversationLock {
    _held: Option<Box<dyn Send + Sync>>,
}

impl ConversationLock {
    /// A lock that holds nothing beyond the in-process queue.
    pub fn local() -> Self {
        Self { _held: None }
    }

    pub fn holding(guard: impl Send + Sync + 'static) -> Self {
        Self {
            _held: Some(Box::new(guard)),
        }
    }
}

impl std::fmt::Debug for ConversationLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConversationLock")
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `postgres`, for logs and metrics.
    fn backend(&self) -> &'static str;

    /// Answers when the database does (`GET /ready`).
    async fn ping(&self) -> Result<()>;

    /// 037: waits until no other turn of this conversation runs, in arrival order, across every
    /// process sharing the database (Postgres), and holds that until the lock is dropped.
    async fn lock_conversation(&self, id: ConversationId) -> Result<ConversationLock>;

    /// True when one process owns the database (SQLite), so `lock_conversation` adds nothing to
    /// the in-process turn order and a turn may take its place before it knows its conversation.
    fn single_process(&self) -> bool {
        false
    }

    // --- conversations -------------------------------------------------------------------

    /// The contact's conversation, created (with a fresh random UUID) on first contact.
    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation>;

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>>;

    /// The contact's conversation if it has one (nothing is created).
    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>>;

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()>;

    /// 019: replace the current token hash, keeping the previous one, and bump the generation.
    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64>;

    /// Contacts with activity since `since` and no token, for `tokens backfill`.
    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>>;

    // --- turns ---------------------------------------------------------------------------

    /// Records a turn and returns its id. A user turn also updates the conversation's
    /// `last_message_at` (and, when bound, `turn_count`).
    async fn record_turn(&self, turn: &NewTurn) -> Result<i64>;

    /// 012: rewrites a turn's action record after its actions ran.
    async fn update_turn_actions(&self, turn_id: i64, actions: &Value) -> Result<()>;

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>>;

    /// 018 history: the conversation's last `limit` bound turns created at or after `since`,
    /// oldest first.
    async fn history(
        &self,
        conversation_id: ConversationId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Turn>>;

    /// 018 turn cap: creation times of the conversation's last `limit` bound user turns,
    /// newest first.
    async fn recent_user_turn_times(
        &self,
        conversation_id: ConversationId,
        limit: i64,
    ) -> Result<Vec<DateTime<Utc>>>;

    /// Every turn of a conversation, oldest first (tests and operators).
    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>>;

    // --- counters --------------------------------------------------------------------------

    /// Per-contact rate (4): adds one to the contact's counter for the window starting at
    /// `window_start` and returns the new count.
    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64>;

    /// Per-contact rate (4): the contact's count for the window starting at `window_start`
    /// (0 when nothing was counted in it).
    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64>;

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage>;

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()>;

    // --- outbox ----------------------------------------------------------------------------

    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64>;

    /// Claims up to `rules.limit` due rows for one worker, atomically: each returned row is now
    /// `delivering` with `lease_until = now + lease` and `attempts + 1`. A row is due when it is
    /// `pending` with `next_attempt_at <= now`, or `delivering` with an expired lease. A reply row
    /// is never claimed while an older reply row of the same conversation is `pending` or
    /// `delivering` (no overtaking), nor within `reply_gap` of that conversation's last delivered
    /// reply (pacing). Every other kind is taken before a deferrable `contact_token` row, then
    /// oldest first; rows come back in that order.
    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>>;

    /// Extends the lease of those of `ids` still `delivering` to `lease_until`: the live worker
    /// holding them is still at work (a slow ManyChat call), so no other worker takes them.
    async fn renew_outbox_leases(&self, ids: &[i64], lease_until: DateTime<Utc>) -> Result<()>;

    /// Records how far a row's delivery got (`messages_delivered`, `trigger_timeouts`), kept
    /// across retries and lapsed leases.
    async fn record_outbox_progress(
        &self,
        id: i64,
        messages_delivered: i32,
        trigger_timeouts: i32,
    ) -> Result<()>;

    /// Settles a row as delivered. A `contact_token` row's plain token is removed from its
    /// payload (019: it rests in the database only while a write awaits retry).
    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()>;

    /// A failed attempt that may be retried: back to `pending`, due at `next_attempt_at`.
    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()>;

    /// The dead letter: `failed`, never claimed again. A `contact_token` row's plain token is
    /// removed from its payload, as on delivery.
    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()>;

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>>;

    /// Reply rows of a conversation still `pending` or `delivering` (3.3's silent response).
    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64>;

    /// Every outbox row, oldest first (tests, operators, metrics).
    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>>;

    // --- a turn's units of work ------------------------------------------------------------
    //
    // Each is what the separate calls above do together; a backend may answer it in one round
    // trip (SQLite: one job on its database thread, one savepoint for the writes). The defaults
    // compose the separate calls.

    /// Everything a turn reads before its checks.
    async fn turn_context(
        &self,
        conversation: &Conversation,
        query: TurnContextQuery,
    ) -> Result<TurnContext> {
        let (earlier_user_turns, history, spent, queued_replies, rate_count) = tokio::try_join!(
            async {
                match query.cap_limit {
                    Some(limit) => self.recent_user_turn_times(conversation.id, limit).await,
                    None => Ok(Vec::new()),
                }
            },
            async {
                match query.history {
                    Some((since, limit)) => self.history(conversation.id, since, limit).await,
                    None => Ok(Vec::new()),
                }
            },
            self.budget(query.day),
            self.pending_replies(conversation.id),
            async {
                match query.rate_window {
                    Some(window) => self.rate_count(&conversation.subscriber_id, window).await,
                    None => Ok(0),
                }
            },
        )?;
        Ok(TurnContext {
            earlier_user_turns,
            history,
            spent,
            queued_replies,
            rate_count,
        })
    }

    /// A returning contact's conversation and its turn context, in one call: `None` for a
    /// contact never seen (nothing is created).
    async fn returning_contact(
        &self,
        subscriber_id: &SubscriberId,
        query: TurnContextQuery,
    ) -> Result<Option<(Conversation, TurnContext)>> {
        let Some(conversation) = self.conversation_by_subscriber(subscriber_id).await? else {
            return Ok(None);
        };
        let context = self.turn_context(&conversation, query).await?;
        Ok(Some((conversation, context)))
    }

    /// Records a turn's exchange: the message (`record_turn`), its count in the hourly window
    /// (`bump_rate`), the reply (`record_turn`), the charge (`add_budget`) and the escalation
    /// (`set_escalated`), each when given, in that order.
    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds> {
        let message = self.record_turn(exchange.message).await?;
        if let Some((subscriber, window)) = exchange.rate {
            self.bump_rate(subscriber, window).await?;
        }
        let reply = match exchange.reply {
            Some(reply) => Some(self.record_turn(reply).await?),
            None => None,
        };
        if let Some(charge) = exchange.charge {
            self.add_budget(charge.day, charge.tokens, charge.cost_usd)
                .await?;
        }
        if let Some(at) = exchange.escalated_at {
            self.set_escalated(exchange.message.conversation_id, at)
                .await?;
        }
        Ok(ExchangeIds { message, reply })
    }
}

/// Opens the store `DATABASE_URL` names and runs its migrations. `sqlite://path` creates the
/// file (and its folder) on first run and uses WAL; `postgres://…` connects to a server.
pub async fn connect(database_url: &str) -> Result<std::sync::Arc<dyn Store>> {
    if database_url.starts_with("sqlite:") {
        let store = sqlite::SqliteStore::connect(database_url).await?;
        Ok(std::sync::Arc::new(store))
    } else if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        let store = postgres::PgStore::connect(database_url).await?;
        Ok(std::sync::Arc::new(store))
    } else {
        Err(StoreError::UnsupportedUrl)
    }
}

mod common;
pub mod postgres;
pub mod sqlite;

#[doc(hidden)]
pub mod conformance;

/// Fresh UUID for a new conversation.
pub fn new_conversation_id() -> Uuid {
    Uuid::new_v4()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn system_5_2_database_url_picks_the_backend() {
        assert!(matches!(
            connect("mysql://localhost/agent").await,
            Err(StoreError::UnsupportedUrl)
        ));

        let dir = tempfile::tempdir().expect("a temporary folder");
        let sqlite = connect(&format!("sqlite://{}/agent.db", dir.path().display()))
            .await
            .expect("connect to SQLite");
        assert_eq!(sqlite.backend(), "sqlite");

        // An option only the Postgres driver parses (and refuses) proves the Postgres backend
        // was chosen, without a network round trip.
        for url in [
            "postgres://agent@127.0.0.1/agent?sslmode=bogus",
            "postgresql://agent@127.0.0.1/agent?sslmode=bogus",
        ] {
            assert!(matches!(connect(url).await, Err(StoreError::Database(_))));
        }
    }
}
