//! Turns: recording them, the history a turn reads, and a turn's units of work, its one read
//! (`turn_context`) and its one write (`record_exchange`, which keeps a promise) (`TurnStore`).

use super::*;

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

/// A turn's columns that hold JSON written after the turn is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnJson {
    /// 012: the action record (`actions`).
    Actions,
    /// The business's read tools: the plugin reads (`plugin_reads`).
    PluginReads,
    /// The ids of the offerings and passages the turn was given (`knowledge`).
    Knowledge,
}

/// A turn to record. `text` is the contact's message (user) or the reply as delivered (agent).
#[derive(Debug, Clone, PartialEq)]
pub struct NewTurn {
    pub conversation_id: ConversationId,
    pub role: Role,
    pub text: String,
    /// One of SYSTEM 4's turn outcomes; on user turns `None`, or a burst's mark
    /// (`crate::burst::MERGED`, `crate::burst::JOINED`).
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
    /// Input tokens written to the provider's prompt cache (a subset of `input_tokens`, priced
    /// at the cache-write rate).
    pub cache_write_tokens: i64,
    pub cost_usd: f64,
    pub latency_ms: i64,
    pub created_at: DateTime<Utc>,
    /// Why the turn handed its contact to a person (`EscalationReason`); `None` when it did not.
    pub escalation_reason: Option<String>,
    /// 020: the kind of media the contact sent (`audio | image | video | unsupported`); `None`
    /// for typed text. The media's URL is never stored.
    pub media_kind: Option<String>,
    /// 013: on an agent turn whose reply repeated an earlier agent message,
    /// `duplicate_replaced` (the closer was sent instead) or `duplicate_detected` (sent as it
    /// was).
    pub duplicate: Option<String>,
    /// 031: the content hash of the playbook a model-written turn was prompted with; `None`
    /// without an active playbook and on every turn no model wrote.
    pub playbook_version: Option<String>,
    /// How many model calls (steps of the bounded tool loop) wrote the turn; `None` on every
    /// turn no model wrote.
    pub steps: Option<i64>,
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
            cache_write_tokens: 0,
            cost_usd: 0.0,
            latency_ms: 0,
            created_at: at,
            escalation_reason: None,
            media_kind: None,
            duplicate: None,
            playbook_version: None,
            steps: None,
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
    /// See [`NewTurn::cache_write_tokens`].
    pub cache_write_tokens: i64,
    pub cost_usd: f64,
    pub latency_ms: i64,
    pub created_at: DateTime<Utc>,
    pub escalation_reason: Option<String>,
    /// 020: see [`NewTurn::media_kind`].
    pub media_kind: Option<String>,
    /// 013: see [`NewTurn::duplicate`].
    pub duplicate: Option<String>,
    /// 031: see [`NewTurn::playbook_version`].
    pub playbook_version: Option<String>,
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
    /// The sales funnel: read the conversation's `sales_record` too.
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

/// The outbox rows of a promise (3.4): what a turn that answered without its reply
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
/// no longer `pending`: the outbox took the fallback already. When `answered` (the reply left
/// in the response), both rows go instead: nothing is owed (`payload`, `due` and `handoff`
/// are then ignored).
#[derive(Debug, Clone, Copy)]
pub struct KeepPromise<'a> {
    pub rows: PromiseRows,
    pub payload: Option<&'a Value>,
    pub due: DateTime<Utc>,
    pub handoff: bool,
    pub answered: bool,
}

/// A conversation's turns: recording them, reading the history, and a turn's units of work.
///
/// The units of work (`turn_context`, `returning_contact`, `record_exchange`) are what separate
/// calls of several concerns do together; a backend may answer each in one round trip (SQLite:
/// one job on its database thread, one savepoint for the writes). The defaults compose the
/// separate calls.
#[async_trait]
pub trait TurnStore: ConversationStore + CounterStore + OutboxStore + SalesStore {
    /// Records a turn and returns its id. A user turn also updates the conversation's
    /// `last_message_at` (and, when bound, `turn_count`).
    async fn record_turn(&self, turn: &NewTurn) -> Result<i64>;

    /// 012: rewrites a turn's action record after its actions ran.
    async fn update_turn_actions(&self, turn_id: i64, actions: &Value) -> Result<()> {
        self.set_turn_json(TurnJson::Actions, turn_id, actions)
            .await
    }

    /// The business's read tools (`crate::plugins`): writes a turn's plugin reads
    /// (`[{"tool", "available", "ms"}]`) once the turn is recorded.
    async fn update_turn_plugin_reads(&self, turn_id: i64, reads: &Value) -> Result<()> {
        self.set_turn_json(TurnJson::PluginReads, turn_id, reads)
            .await
    }

    /// Knowledge at scale (`crate::knowledge`): writes the ids of the offerings and passages a
    /// turn was given (`{"offerings": [...], "passages": [...]}`) once the turn is recorded.
    async fn update_turn_knowledge(&self, turn_id: i64, ids: &Value) -> Result<()> {
        self.set_turn_json(TurnJson::Knowledge, turn_id, ids).await
    }

    /// Writes `value` as one of a turn's JSON columns; a turn that does not exist is an error.
    async fn set_turn_json(&self, column: TurnJson, turn_id: i64, value: &Value) -> Result<()>;

    /// A turn's plugin reads; `None` when it made none (or the turn does not exist).
    async fn turn_plugin_reads(&self, turn_id: i64) -> Result<Option<Value>>;

    /// The ids a turn was given above the knowledge threshold; `None` when none were recorded.
    async fn turn_knowledge(&self, turn_id: i64) -> Result<Option<Value>>;

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

    /// The turns created at or after `since` whose action record contains `text` (a marker a
    /// process leaves while an action is under way), oldest first.
    async fn turns_with_actions_containing(
        &self,
        text: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<Turn>>;

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
}
