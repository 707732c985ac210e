//! Everything the service remembers: conversations, turns, the outbox, counters.
//!
//! One `Store` trait, one implementation per backend (`sqlite`, `postgres`), chosen by
//! `DATABASE_URL`. Both pass the same conformance suite (`conformance`). Time is always passed in
//! by the caller (from `crate::clock::Clock`), never read here, so tests control it; the one
//! exception is Postgres's shared ManyChat bucket (`take_manychat_slot`), timed by the
//! database's clock so replicas whose clocks disagree still share one rate.
//!
//! Invariants: turns are deleted only with their contact (`forget_contact`, an erasure), and
//! their text is emptied after the retention period (`clear_turn_text_before`); note text is
//! never stored (024); an outbox row moves
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
    /// A promise's reply row was taken by the outbox (its fallback) before the turn kept it.
    #[error("the promise lapsed: its fallback was already taken")]
    PromiseLapsed,
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
    /// Why the turn handed its contact to a person (`EscalationReason`); `None` when it did not.
    pub escalation_reason: Option<String>,
    /// 020: the kind of media the contact sent (`audio | image | video | unsupported`); `None`
    /// for typed text. The media's URL is never stored.
    pub media_kind: Option<String>,
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
            escalation_reason: None,
            media_kind: None,
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
    pub escalation_reason: Option<String>,
    /// 020: see [`NewTurn::media_kind`].
    pub media_kind: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxKind {
    Reply,
    ContactToken,
    /// The tenant's handoff (a tag and/or a flow) after an escalation: performed like a reply is
    /// delivered (retried, taken over after a crash), never before an earlier reply of its
    /// contact.
    Handoff,
}

impl OutboxKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxKind::Reply => "reply",
            OutboxKind::ContactToken => "contact_token",
            OutboxKind::Handoff => "handoff",
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

/// Issue 18: the outbox's open rows, as `/metrics` reports them (read at scrape time only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxBacklog {
    /// Rows pending or being delivered, counted up to the cap the caller gave.
    pub rows: i64,
    /// The earliest `next_attempt_at` among those rows, when it is due (at or before `now`).
    pub oldest_due_at: Option<DateTime<Utc>>,
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
    /// The sales funnel (issue 14): read the conversation's `sales_record` too.
    pub sales: bool,
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
    /// What `sales_record` answers, when asked for.
    pub sales: Option<SalesRecord>,
}

impl TurnContext {
    /// The context of an unbound turn (019): no history, no cap times and no sales record (it
    /// knows only its own message), the rest unchanged.
    pub fn unbound(self) -> Self {
        Self {
            earlier_user_turns: Vec::new(),
            history: Vec::new(),
            sales: None,
            ..self
        }
    }
}

/// A turn's record, written once its outcome is known (`Store::record_exchange`): the contact's
/// message and the agent's reply, with what they count and charge, and the outbox rows that
/// carry what is owed to the contact. Also the promise a lost race makes before its
/// acknowledgement (the message and the owed reply's rows, no reply yet), and the write that
/// keeps that promise later.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The contact's message (a user turn). Inserted unless `recorded` names it; when it is
    /// already recorded, only its `escalation_reason` is written (if any), and for a media
    /// message (020) its text and cost: the marker a promise wrote gives way to the transcript.
    pub message: &'a NewTurn,
    /// The message's id when an earlier write (a promise) recorded it already.
    pub recorded: Option<i64>,
    /// Counts the message against this contact's hourly window (`None`: not counted).
    pub rate: Option<(&'a SubscriberId, DateTime<Utc>)>,
    /// The agent turn; `None` when the turn records no reply (a model call aborted).
    pub reply: Option<&'a NewTurn>,
    /// Added to its day's budget.
    pub charge: Option<BudgetCharge>,
    /// Marks the message's conversation escalated at this time.
    pub escalated_at: Option<DateTime<Utc>>,
    /// Outbox rows to insert, in order. A reply or handoff row (inserted, or kept by `keep`)
    /// whose payload's `turnId` is null gets the id of the reply recorded here, or of the
    /// message when there is no reply.
    pub outbox: &'a [NewOutboxRow],
    /// A promise this exchange keeps (see [`KeepPromise`]).
    pub keep: Option<KeepPromise<'a>>,
}

impl<'a> Exchange<'a> {
    /// An exchange of `message` alone: nothing counted, charged, queued or kept.
    pub fn of(message: &'a NewTurn) -> Self {
        Self {
            message,
            recorded: None,
            rate: None,
            reply: None,
            charge: None,
            escalated_at: None,
            outbox: &[],
            keep: None,
        }
    }
}

/// The ids `record_exchange` gave the rows it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeIds {
    pub message: i64,
    pub reply: Option<i64>,
    /// The inserted outbox rows, in the order given.
    pub outbox: Vec<i64>,
}

/// The outbox rows of a promise (3.4, issue 13): what a turn that answered without its reply
/// (an acknowledgement or a silent response) owes the contact. Both rows are written before the
/// response leaves, `pending` and due when the turn's abort window ends, holding the fallback:
/// the escalation copy (`reply`) and the tenant's handoff (`handoff`). A live turn keeps the
/// promise before then; if the process died, the outbox delivers the fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseRows {
    pub reply: i64,
    pub handoff: i64,
}

/// How an exchange keeps a promise: the reply row gets `payload` (or keeps its fallback when
/// `None`) and is due at `due`; the handoff row is due at `due` too when `handoff`, otherwise
/// removed. Fails with [`StoreError::PromiseLapsed`] (and writes nothing) when the reply row is
/// no longer `pending`: the outbox took the fallback already.
#[derive(Debug, Clone, Copy)]
pub struct KeepPromise<'a> {
    pub rows: PromiseRows,
    pub payload: Option<&'a Value>,
    pub due: DateTime<Utc>,
    pub handoff: bool,
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

    /// Every outbox row, oldest first (tests, operators).
    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>>;

    /// Issue 18: the open outbox rows (counted up to `count_cap`) and the oldest one due at
    /// `now`, through `outbox_status_due`: the cost is bounded by the cap, not the table.
    /// Read when `/metrics` is scraped, never on a turn.
    async fn outbox_backlog(&self, now: DateTime<Utc>, count_cap: i64) -> Result<OutboxBacklog>;

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
        let (earlier_user_turns, history, spent, queued_replies, rate_count, sales) = tokio::try_join!(
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
            async {
                match query.sales {
                    true => self.sales_record(conversation.id).await.map(Some),
                    false => Ok(None),
                }
            },
        )?;
        Ok(TurnContext {
            earlier_user_turns,
            history,
            spent,
            queued_replies,
            rate_count,
            sales,
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

    /// Records a turn's exchange in one transaction: the message (unless already recorded),
    /// its count in the hourly window, the reply, the charge, the escalation, the outbox rows,
    /// and the promise it keeps; all or nothing.
    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds>;

    /// Claims one `pending` row by id for this caller (as `claim_outbox` would, whatever its
    /// due time): `None` when it is no longer pending (a worker took it, or it was removed).
    async fn claim_outbox_row(
        &self,
        id: i64,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<OutboxRow>>;

    /// The `pending` rows of a kind, oldest first (promises to recover at start).
    async fn pending_outbox(&self, kind: OutboxKind) -> Result<Vec<OutboxRow>>;

    // --- erasure and retention (issue 13) ---------------------------------------------------

    /// Erasure: deletes every row about one contact, from each table of [`CONTACT_TABLES`] in
    /// its order, in one transaction, and counts what each table lost (every count 0 for a
    /// contact never seen). Nothing else is touched: the day's budget counters hold no contact.
    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten>;

    /// Retention: empties the text of at most `limit` turns created before `before` that still
    /// have text, and returns how many it emptied. The rest of each row stays (role, outcome,
    /// model, bound, actions, reads, tokens, cost, latency, times): what the measures need.
    /// Called again until it returns less than `limit`, so no call holds the database long.
    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64>;

    /// Retention: deletes at most `limit` settled outbox rows (delivered or dead-lettered)
    /// created before `before` (their payload holds the reply's text; the turn keeps its
    /// record), and returns how many it deleted. Open rows are never touched.
    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64>;

    /// Issue 21: whether this backend keeps the ManyChat request bucket every replica shares
    /// (Postgres). SQLite serves one process, whose in-process bucket is the whole budget.
    fn shares_manychat_budget(&self) -> bool {
        false
    }

    /// Issue 21: takes one slot of the shared ManyChat bucket (one request every `interval`, up
    /// to `burst` back to back), timed by the database's clock: `None` when taken, else how long
    /// until one is free (nothing taken). One round trip. Only where
    /// [`Store::shares_manychat_budget`].
    async fn take_manychat_slot(&self, interval: Duration, burst: u32) -> Result<Option<Duration>> {
        let _ = (interval, burst);
        Err(StoreError::Database(
            "this backend keeps no shared ManyChat budget".to_owned(),
        ))
    }

    /// Issue 21: counts one sendFlow for the contact at `now`, unless `per_hour` were counted in
    /// the hour before `now` (then counts nothing): whether it was counted. Atomic across
    /// replicas; counts older than an hour are removed.
    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool>;

    /// The sales funnel (issue 14): what the server knows of a contact from its own records, in
    /// one read: the offering stored on the conversation with when it was stored, and the
    /// action record of every agent turn that holds one (oldest first; `[]` records left out).
    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord>;

    /// 028: stores the contact's offering (from a token-bound request, or catching up with a
    /// performed write to the offering field) and when.
    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()>;
    /// 032 A / 034: claims the contact's opening flow at `at`, in one conditional update of the
    /// conversation row (`opening_sent_at`, set only while it is empty): whether this call
    /// claimed it. Of turns racing to send the opening exactly one gets `true`, on every backend
    /// and across replicas; the claim is never given back, so the opening goes at most once.
    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool>;
    /// Issue 18: the sales counts `manychat-agent report` reads for turns created in
    /// `[from, until)`, by the tenant's `keys` (see [`SalesCounts`]). Counted in the database;
    /// only the entries' tool, id, value, status and `contactAsked` keys are read.
    async fn sales_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &SalesKeys,
    ) -> Result<SalesCounts>;

    /// Issue 18: the aggregates `manychat-agent report` reads for turns created in
    /// `[from, until)`. Grouped in the database (fast over a busy week); aggregates only.
    async fn report_aggregates(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<ReportAggregates>;

    /// Issue 18: one report week, `report_aggregates` and `sales_aggregates` together. The
    /// same results; a backend that tallies action records in the process (SQLite) reads the
    /// week's records once for both.
    async fn report_week(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
        keys: &SalesKeys,
    ) -> Result<(ReportAggregates, SalesCounts)> {
        let aggregates = self.report_aggregates(from, until).await?;
        let counts = self.sales_aggregates(from, until, keys).await?;
        Ok((aggregates, counts))
    }

    /// 025: schedules the conversation's one nudge, due at `due_at`, in one upsert: a pending
    /// nudge is replaced, and so is a settled one (a new silence may have its follow-up).
    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// 025: cancels the conversation's pending or running nudge with `reason`: whether one was
    /// cancelled. A running nudge cancelled here is never sent ([`Store::settle_nudge`] finds it
    /// no longer its own).
    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// 025: claims up to `limit` pending nudges due at `now`, earliest first, moving them to
    /// `running` with `claimed_at = now`, atomically: two workers never claim one row.
    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>>;

    /// 025: settles a claimed nudge (`sent`, `skipped`, `cancelled`) only while it is still the
    /// claim `nudge` holds (running, claimed at `nudge.claimed_at`): whether it was.
    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// 025: marks `lost` every nudge left `running` since before `claimed_before` (its process
    /// died mid-turn): it is never sent. Their conversations (each is logged).
    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>>;

    /// 025: the conversation's nudge row, whatever its state.
    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>>;

    /// 025: a nudge turn's one write, in one transaction: the nudge settled, the agent turn,
    /// its count in the hourly window, its charge and its outbox rows; and only while the
    /// nudge is still `running` under the claim `exchange.nudge` holds. `None` (nothing
    /// written) when it is not: an inbound message cancelled it during the model call, or it
    /// was marked lost. Otherwise the turn's id.
    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>>;
}

/// 025: what a nudge turn writes (see [`Store::record_nudge_turn`]). There is no contact
/// message: the turn is the agent's alone.
#[derive(Debug, Clone, Copy)]
pub struct NudgeExchange<'a> {
    /// The claim the write is made under (its id and `claimed_at`).
    pub nudge: &'a Nudge,
    /// `sent` or `skipped`, and why (a skip's reason).
    pub status: NudgeStatus,
    pub reason: Option<&'a str>,
    /// The agent turn (`nudge_sent`, `nudge_skipped`).
    pub turn: &'a NewTurn,
    /// Counts the nudge turn against the contact's hourly window (025: nudge turns count).
    pub rate: Option<(&'a SubscriberId, DateTime<Utc>)>,
    /// Added to its day's budget.
    pub charge: Option<BudgetCharge>,
    /// Outbox rows to insert, in order; a reply row whose payload's `turnId` is null gets the
    /// turn's id.
    pub outbox: &'a [NewOutboxRow],
    /// When the nudge is settled.
    pub now: DateTime<Utc>,
}

/// 025: the states of a nudge row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NudgeStatus {
    Pending,
    /// Claimed by a worker; its checks or its turn are under way.
    Running,
    Sent,
    /// The nudge turn ran and declined (a model escalation) or failed: nothing was sent.
    Skipped,
    Cancelled,
    /// Left running by a process that died: never sent.
    Lost,
}

impl NudgeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Sent => "sent",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
            Self::Lost => "lost",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "sent" => Self::Sent,
            "skipped" => Self::Skipped,
            "cancelled" => Self::Cancelled,
            "lost" => Self::Lost,
            other => return Err(StoreError::Corrupt(format!("nudge status `{other}`"))),
        })
    }
}

/// 025: one conversation's nudge row. No contact data: the conversation's UUID and ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Nudge {
    pub id: i64,
    pub conversation_id: ConversationId,
    /// The configured delay id the model chose.
    pub delay_id: String,
    pub due_at: DateTime<Utc>,
    pub scheduled_at: DateTime<Utc>,
    pub status: NudgeStatus,
    /// Why it was cancelled or skipped.
    pub reason: Option<String>,
    /// When a worker claimed it (running rows only, and what they settled from).
    pub claimed_at: Option<DateTime<Utc>>,
}

/// Every table that holds rows about one contact, with the column that names the contact
/// (`conversation_id`: the conversation's UUID; `subscriber_id`: the contact's id), in the
/// order `forget_contact` deletes from them (rows that reference a conversation before it).
///
/// A new table with a `conversation_id` or `subscriber_id` column belongs here, or a contact's
/// erasure would leave it behind: both backends delete from exactly this list, and a test per
/// backend reads the schema and fails on a table naming a contact that is missing from it.
pub const CONTACT_TABLES: &[(&str, &str)] = &[
    ("turns", "conversation_id"),
    ("outbox", "conversation_id"),
    ("nudges", "conversation_id"),
    ("rate_counters", "subscriber_id"),
    ("manychat_flow_sends", "subscriber_id"),
    ("turn_tickets", "conversation_id"),
    ("conversations", "subscriber_id"),
];

/// What `forget_contact` removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Forgotten {
    /// The contact's conversation, when it had one.
    pub conversation_id: Option<ConversationId>,
    /// Rows deleted, per table of [`CONTACT_TABLES`], in its order.
    pub deleted: Vec<(&'static str, u64)>,
}

impl Forgotten {
    /// False when nothing was stored about the contact.
    pub fn found(&self) -> bool {
        self.conversation_id.is_some() || self.deleted.iter().any(|(_, rows)| *rows > 0)
    }

    /// Rows deleted from `table` (0 for a table not listed).
    pub fn rows(&self, table: &str) -> u64 {
        self.deleted
            .iter()
            .find(|(name, _)| *name == table)
            .map_or(0, |(_, rows)| *rows)
    }
}

/// One agent turn's action record (`turns.actions`) and when the turn was recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    pub at: DateTime<Utc>,
    pub actions: Value,
}

/// What [`Store::sales_record`] answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SalesRecord {
    /// `conversations.offering` and `offering_at`, when both are set.
    pub offering: Option<(String, DateTime<Utc>)>,
    /// Oldest first.
    pub actions: Vec<ActionRecord>,
}

/// Opens the store `DATABASE_URL` names and runs its migrations. `sqlite://path` creates the
/// file on first run and uses WAL (its folder must exist, except the default `data/`, which is
/// created); `postgres://…` connects to a server with a pool of
/// [`postgres::DEFAULT_POOL_SIZE`] connections. An error names the database (never the
/// password) and says what failed.
pub async fn connect(database_url: &str) -> Result<std::sync::Arc<dyn Store>> {
    connect_sized(database_url, postgres::DEFAULT_POOL_SIZE).await
}

/// [`connect`] with `DATABASE_POOL_SIZE` connections for PostgreSQL (SQLite has one writer).
pub async fn connect_sized(
    database_url: &str,
    pool_size: u32,
) -> Result<std::sync::Arc<dyn Store>> {
    let opened: Result<std::sync::Arc<dyn Store>> = if database_url.starts_with("sqlite:") {
        sqlite::SqliteStore::connect(database_url)
            .await
            .map(|store| std::sync::Arc::new(store) as _)
    } else if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        postgres::PgStore::connect_sized(database_url, pool_size)
            .await
            .map(|store| std::sync::Arc::new(store) as _)
    } else {
        return Err(StoreError::UnsupportedUrl);
    };
    opened.map_err(|error| {
        let database = describe_database(database_url);
        match error {
            StoreError::Database(reason) => {
                StoreError::Database(format!("cannot open {database}: {reason}"))
            }
            StoreError::Migration(reason) => StoreError::Migration(format!("{database}: {reason}")),
            other => other,
        }
    })
}

/// Whether `DATABASE_URL` names a backend this build has (`sqlite:`, `postgres://`,
/// `postgresql://`).
pub fn is_supported_url(url: &str) -> bool {
    url.starts_with("sqlite:") || url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// For a SQLite `url` whose folder does not exist (and is not the default `data/`, which is
/// created), that folder: `connect` would refuse it. Lets the start-up checks report it with
/// every other problem.
pub fn missing_sqlite_folder(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    if rest.is_empty() || rest == ":memory:" || rest.contains('?') {
        return None;
    }
    let parent = std::path::Path::new(rest)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())?;
    (parent != std::path::Path::new("data") && !parent.is_dir()).then(|| parent.to_path_buf())
}

/// Which database `url` names, for an error: the SQLite file, or the Postgres database, server
/// and role. Never the password or the options (which may carry one).
pub fn describe_database(url: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let path = rest.split('?').next().unwrap_or_default();
        return format!("the SQLite database {path}");
    }
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let server = match parsed.host_str() {
                Some(host) if !host.is_empty() => {
                    format!("{host}:{}", parsed.port().unwrap_or(5432))
                }
                _ => "the local socket".to_owned(),
            };
            let name = parsed.path().trim_start_matches('/');
            let name = if name.is_empty() { "(default)" } else { name };
            let role = match parsed.username() {
                "" => String::new(),
                user => format!(" as role {user}"),
            };
            format!("the PostgreSQL database {name} on {server}{role}")
        }
        Err(_) => "the PostgreSQL database (DATABASE_URL does not parse as a URL)".to_owned(),
    }
}

mod common;
pub mod postgres;
mod report;
pub use report::{ActionCount, ReportAggregates, SalesCounts, SalesKeys, TurnGroup};
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

    #[test]
    fn issue_19_item_2_a_database_is_named_without_its_password() {
        assert_eq!(
            describe_database(
                "postgres://agent:pw-fixture@db.example.test:6543/sales?sslmode=require"
            ),
            "the PostgreSQL database sales on db.example.test:6543 as role agent"
        );
        assert_eq!(
            describe_database("sqlite://data/agent.db"),
            "the SQLite database data/agent.db"
        );
    }

    /// A role the server refuses (SQLSTATE 28000) is said in plain words, naming the database
    /// and the role, never the password.
    #[tokio::test]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn issue_19_item_2_a_refused_role_is_named_in_plain_words() {
        let base = std::env::var("TEST_DATABASE_URL")
            .expect("TEST_DATABASE_URL is not set: this test needs PostgreSQL");
        let mut url = reqwest::Url::parse(&base).expect("TEST_DATABASE_URL parses");
        url.set_username("issue19_no_such_role").expect("a user");
        url.set_password(Some("pw-fixture-hidden"))
            .expect("a password");
        let error = connect(url.as_str())
            .await
            .err()
            .expect("an unknown role is refused");
        let text = error.to_string();
        assert!(text.contains("refused the role"), "{text}");
        assert!(text.contains("28000"), "{text}");
        assert!(text.contains("issue19_no_such_role"), "{text}");
        assert!(!text.contains("pw-fixture-hidden"), "{text}");
    }

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
