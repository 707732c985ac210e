//! The outbox: what is owed to ManyChat, enqueued with its turn and delivered by the outbox
//! worker; a row moves `pending → delivering → delivered | failed` under a lease
//! (`OutboxStore`).

use super::*;

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

impl NewOutboxRow {
    /// A row for the contact `subscriber_id` of conversation `conversation_id`, written at
    /// `now` and due at once.
    pub fn new(
        conversation_id: ConversationId,
        subscriber_id: &SubscriberId,
        kind: OutboxKind,
        payload: Value,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            conversation_id,
            subscriber_id: subscriber_id.clone(),
            kind,
            payload,
            next_attempt_at: now,
            created_at: now,
        }
    }

    /// [`NewOutboxRow::new`] for `conversation`'s contact.
    pub fn of(
        conversation: &Conversation,
        kind: OutboxKind,
        payload: Value,
        now: DateTime<Utc>,
    ) -> Self {
        Self::new(
            conversation.id,
            &conversation.subscriber_id,
            kind,
            payload,
            now,
        )
    }

    /// The same row, due at `due` instead.
    pub fn due_at(self, due: DateTime<Utc>) -> Self {
        Self {
            next_attempt_at: due,
            ..self
        }
    }
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
    /// A reply's messages ManyChat already accepted: a retry resumes after them.
    pub messages_delivered: i32,
    /// Triggers of the next message that got no answer (ManyChat may have run them); such a
    /// trigger is retried at most once.
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

/// The outbox's open rows, as `/metrics` reports them (read at scrape time only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxBacklog {
    /// Rows pending or being delivered, counted up to the cap the caller gave.
    pub rows: i64,
    /// The earliest `next_attempt_at` among those rows, when it is due (at or before `now`).
    pub oldest_due_at: Option<DateTime<Utc>>,
}

/// The outbox: enqueueing, claiming under a lease, settling, and reading its rows.
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
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

    /// Records a reply's actions as they are performed: the payload's `actions` replaced by
    /// `actions` (each with its outcome so far) and `trigger_timeouts` set to the requests sent
    /// for the next action without an answer, so a restart resumes after what ManyChat answered.
    async fn record_outbox_actions(
        &self,
        id: i64,
        actions: &Value,
        trigger_timeouts: i32,
    ) -> Result<()>;

    /// Settles a row as delivered. A `contact_token` row's plain token is removed from its
    /// payload (019: it rests in the database only while a write awaits retry).
    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()>;

    /// 019: settles, as delivered and without a request, the conversation's `pending`
    /// `contact_token` rows of generation `generation` or older: a request of the contact carried
    /// that generation's token, so it reached the contact's field (the block that answered its
    /// message set it). Each row's plain token is removed, as on delivery. A row a worker is
    /// delivering is left to it. Returns how many rows were settled.
    async fn settle_contact_tokens(
        &self,
        conversation_id: ConversationId,
        generation: i64,
        at: DateTime<Utc>,
    ) -> Result<u64>;

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

    /// The open outbox rows (counted up to `count_cap`) and the oldest one due at
    /// `now`, through `outbox_status_due`: the cost is bounded by the cap, not the table.
    /// Read when `/metrics` is scraped, never on a turn.
    async fn outbox_backlog(&self, now: DateTime<Utc>, count_cap: i64) -> Result<OutboxBacklog>;

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

    /// Promises whose writer is gone, oldest first, each with its fallback `handoff` row: pending
    /// `reply` rows still holding their promise note whose writing process's lease
    /// (`OrderStore::beat`) lapsed. A store one process owns has none: that process runs its
    /// own again at start (`TurnEngine::recover_promises`).
    async fn orphaned_promises(&self) -> Result<Vec<OrphanedPromise>> {
        Ok(Vec::new())
    }

    /// Takes an orphaned promise over for this process, atomically (its owner becomes this
    /// process under the row's lock, so two survivors never both take it), and lets the dead
    /// owner's turn tickets of that conversation go, so the turn run again does not wait for
    /// them to lapse. False when the row is no longer pending, its owner lives, or another
    /// process took it first.
    async fn claim_promise(&self, _reply_row: i64) -> Result<bool> {
        Ok(false)
    }
}

/// A promise whose writer died (see [`OutboxStore::orphaned_promises`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OrphanedPromise {
    /// The `reply` row holding the promise (its payload names the message and the window).
    pub reply: OutboxRow,
    /// The promise's fallback `handoff` row.
    pub handoff: i64,
}
