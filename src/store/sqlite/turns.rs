//! SQLite: turns, the history, and a turn's units of work (`TurnStore`): the statements every
//! turn runs, its one read (`turn_context`) and its one write (`record_exchange`).

use super::*;
use crate::store::TurnJson;

/// Columns in the order of `turn_columns!`.
pub(super) fn turn_from(row: &Row<'_>) -> Result<Turn> {
    let actions: Option<&str> = row
        .get_ref(8)?
        .as_str_or_null()
        .map_err(rusqlite::Error::from)?;
    Ok(Turn {
        id: row.get(0)?,
        seq: row.get(1)?,
        conversation_id: uuid(text(row, 2)?)?,
        role: common::role(text(row, 3)?)?,
        text: row.get(4)?,
        outcome: row.get(5)?,
        model: row.get(6)?,
        bound: row.get(7)?,
        actions: actions.map(json).transpose()?,
        reads: row.get(9)?,
        input_tokens: row.get(10)?,
        output_tokens: row.get(11)?,
        cached_tokens: row.get(12)?,
        cost_usd: row.get(13)?,
        latency_ms: row.get(14)?,
        created_at: time(row.get(15)?)?,
        escalation_reason: row.get(16)?,
        media_kind: row.get(17)?,
        duplicate: row.get(18)?,
        playbook_version: row.get(19)?,
        cache_write_tokens: row.get(20)?,
    })
}

// The statements every turn runs (its one read and its one write), named so that a test can
// hold them to the rule that keeps the database thread's work per turn small: none opens a
// temporary B-tree (no RETURNING, no INSERT … SELECT from the table written, no ORDER BY the
// index does not already give). Each such table is allocated, filled and torn down per call.

/// The id (and seq) of the next turn.
pub(super) const NEXT_TURN_ID: &str = "SELECT COALESCE(MAX(id), 0) + 1 FROM turns";

/// A turn, its id chosen by `NEXT_TURN_ID`.
pub(super) const INSERT_TURN: &str = "INSERT INTO turns \
    (id, seq, conversation_id, role, text, outcome, model, bound, actions, reads, \
    input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, created_at, \
    escalation_reason, media_kind, duplicate, playbook_version, cache_write_tokens, steps) \
    VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, \
    ?20, ?21)";

/// A user turn moves its conversation's `last_message_at` and (bound) `turn_count`.
pub(super) const TOUCH_CONVERSATION: &str = "UPDATE conversations SET \
    last_message_at = MAX(COALESCE(last_message_at, ?1), ?1), \
    turn_count = turn_count + ?2, \
    updated_at = ?1 \
    WHERE id = ?3";

/// A conversation's newest bound turns since a time, newest first (index order).
pub(super) const HISTORY: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = ? AND bound = 1 AND created_at >= ? \
    ORDER BY created_at DESC, seq DESC LIMIT ?"
);

/// A contact's latest bound message times, newest first (from the index alone).
pub(super) const CAP_TIMES: &str = "SELECT created_at FROM turns \
    WHERE conversation_id = ? AND bound = 1 AND role = 'user' \
    ORDER BY created_at DESC, seq DESC LIMIT ?";

/// One more message in a window already begun.
pub(super) const COUNT_RATE: &str = "UPDATE rate_counters SET count = count + 1 \
    WHERE subscriber_id = ? AND window_start = ?";

/// A window's first message.
pub(super) const BEGIN_RATE_WINDOW: &str =
    "INSERT INTO rate_counters (subscriber_id, window_start, count) VALUES (?, ?, 1)";

/// A contact's windows before the current one.
pub(super) const DROP_OLD_RATE_WINDOWS: &str =
    "DELETE FROM rate_counters WHERE subscriber_id = ? AND window_start < ?";

/// A contact's messages counted in a window.
pub(super) const RATE_COUNT: &str =
    "SELECT count FROM rate_counters WHERE subscriber_id = ? AND window_start = ?";

/// A day's spend.
pub(super) const BUDGET: &str = "SELECT tokens, cost_usd FROM budget_counters WHERE day = ?";

/// A turn's charge against its day.
pub(super) const ADD_BUDGET: &str = "INSERT INTO budget_counters (day, tokens, cost_usd) \
    VALUES (?, ?, ?) ON CONFLICT (day) DO UPDATE SET tokens = tokens + excluded.tokens, \
    cost_usd = cost_usd + excluded.cost_usd";

/// A contact's reply rows still to deliver (through `outbox_open_replies`).
pub(super) const QUEUED_REPLIES: &str = "SELECT COUNT(*) FROM outbox \
    WHERE conversation_id = ? AND kind = 'reply' AND status IN ('pending', 'delivering')";

/// An escalating turn marks its conversation.
pub(super) const SET_ESCALATED: &str =
    "UPDATE conversations SET escalated_at = ?, updated_at = ? WHERE id = ?";

/// A contact's conversation.
pub(super) const CONVERSATION_BY_SUBSCRIBER: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    " FROM conversations WHERE subscriber_id = ?"
);

/// Everything a returning contact's turn runs, for the test below.
#[cfg(test)]
pub(super) const TURN_STATEMENTS: &[&str] = &[
    NEXT_TURN_ID,
    INSERT_TURN,
    TOUCH_CONVERSATION,
    HISTORY,
    CAP_TIMES,
    COUNT_RATE,
    BEGIN_RATE_WINDOW,
    DROP_OLD_RATE_WINDOWS,
    RATE_COUNT,
    BUDGET,
    ADD_BUDGET,
    QUEUED_REPLIES,
    SET_ESCALATED,
    CONVERSATION_BY_SUBSCRIBER,
    SALES_OFFERING,
    SALES_ACTIONS,
    CLAIM_OPENING,
];

/// A turn ready for the database thread: owned, its actions serialised on the caller's side
/// (off the serial thread).
pub(super) struct TurnRow {
    turn: NewTurn,
    actions: Option<String>,
}

impl TurnRow {
    pub(super) fn of(turn: &NewTurn) -> Result<Self> {
        Ok(Self {
            actions: turn.actions.as_ref().map(json_text).transpose()?,
            turn: turn.clone(),
        })
    }

    pub(super) fn insert(&self, conn: &Db<'_>) -> Result<i64> {
        insert_turn(conn, &self.turn, self.actions.as_deref())
    }
}

/// A [`KeepPromise`] ready for the database thread.
pub(super) struct KeptPromise {
    rows: PromiseRows,
    payload: Option<String>,
    due: i64,
    handoff: bool,
    answered: bool,
}

impl KeptPromise {
    fn of(keep: KeepPromise<'_>) -> Result<Self> {
        Ok(Self {
            rows: keep.rows,
            payload: keep.payload.map(json_text).transpose()?,
            due: ms(keep.due),
            handoff: keep.handoff,
            answered: keep.answered,
        })
    }

    /// Keeps the promise; a new payload without a `turnId` gets `turn`.
    fn write(&self, conn: &Db<'_>, turn: i64) -> Result<()> {
        if self.answered {
            let kept = conn
                .prepare_cached("DELETE FROM outbox WHERE id = ?1 AND status = 'pending'")?
                .execute(params![self.rows.reply])?;
            if kept == 0 {
                return Err(StoreError::PromiseLapsed);
            }
            conn.prepare_cached("DELETE FROM outbox WHERE id = ?1 AND status = 'pending'")?
                .execute(params![self.rows.handoff])?;
            return Ok(());
        }
        let kept = conn
            .prepare_cached(
                "UPDATE outbox SET payload = CASE \
                     WHEN ?1 IS NULL THEN payload \
                     WHEN ?4 IS NOT NULL AND json_extract(?1, '$.turnId') IS NULL \
                     THEN json_set(?1, '$.turnId', ?4) ELSE ?1 END, \
                 next_attempt_at = ?2 WHERE id = ?3 AND status = 'pending'",
            )?
            .execute(params![self.payload, self.due, self.rows.reply, turn])?;
        if kept == 0 {
            return Err(StoreError::PromiseLapsed);
        }
        if self.handoff {
            conn.prepare_cached(
                "UPDATE outbox SET next_attempt_at = ?1 WHERE id = ?2 AND status = 'pending'",
            )?
            .execute(params![self.due, self.rows.handoff])?;
        } else {
            conn.prepare_cached("DELETE FROM outbox WHERE id = ?1 AND status = 'pending'")?
                .execute(params![self.rows.handoff])?;
        }
        Ok(())
    }
}

/// Inserts a turn; a user turn also moves the conversation's `last_message_at` and (bound)
/// `turn_count`.
pub(super) fn insert_turn(conn: &Db<'_>, turn: &NewTurn, actions: Option<&str>) -> Result<i64> {
    // `id` and `seq` are both the next integer after the largest id: the group's transaction
    // holds the write lock, and the largest rowid is one seek. It is read by a statement of its
    // own: an INSERT … SELECT that reads its own table buffers the selected row in a temporary
    // B-tree first (opened, filled and torn down on every insert), which cost more than the
    // insert itself.
    let id: i64 = conn
        .prepare_cached(NEXT_TURN_ID)?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(INSERT_TURN)?.execute(params![
        id,
        IdText::of(turn.conversation_id),
        turn.role.as_str(),
        turn.text,
        turn.outcome,
        turn.model,
        turn.bound,
        actions,
        turn.reads,
        turn.input_tokens,
        turn.output_tokens,
        turn.cached_tokens,
        turn.cost_usd,
        turn.latency_ms,
        ms(turn.created_at),
        turn.escalation_reason,
        turn.media_kind,
        turn.duplicate,
        turn.playbook_version,
        turn.cache_write_tokens,
        turn.steps,
    ])?;
    if turn.role == Role::User {
        conn.prepare_cached(TOUCH_CONVERSATION)?.execute(params![
            ms(turn.created_at),
            i64::from(turn.bound),
            IdText::of(turn.conversation_id)
        ])?;
    }
    Ok(id)
}

pub(super) fn history_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    since: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Turn>> {
    // Newest first in index order (no sort), turned round here rather than by a second ORDER BY
    // in SQL, which would sort them again in a temporary table.
    let mut turns = query_all(
        conn,
        HISTORY,
        params![IdText::of(conversation_id), ms(since), limit.max(0)],
        turn_from,
    )?;
    turns.reverse();
    Ok(turns)
}

pub(super) fn recent_user_turn_times_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    limit: i64,
) -> Result<Vec<DateTime<Utc>>> {
    query_all(
        conn,
        CAP_TIMES,
        params![IdText::of(conversation_id), limit.max(0)],
        |row| time(row.get(0)?),
    )
}

pub(super) fn turn_context_in(
    conn: &Db<'_>,
    conversation_id: ConversationId,
    subscriber: &SubscriberId,
    query: TurnContextQuery,
) -> Result<TurnContext> {
    Ok(TurnContext {
        earlier_user_turns: match query.cap_limit {
            Some(limit) => recent_user_turn_times_in(conn, conversation_id, limit)?,
            None => Vec::new(),
        },
        history: match query.history {
            Some((since, limit)) => history_in(conn, conversation_id, since, limit)?,
            None => Vec::new(),
        },
        spent: budget_in(conn, query.day)?,
        queued_replies: pending_replies_in(conn, conversation_id)?,
        rate_count: match query.rate_window {
            Some(window) => rate_count_in(conn, subscriber.as_str(), window)?,
            None => 0,
        },
        sales: match query.sales {
            true => Some(sales_record_in(conn, conversation_id)?),
            false => None,
        },
    })
}

#[async_trait]
impl TurnStore for SqliteStore {
    async fn record_turn(&self, turn: &NewTurn) -> Result<i64> {
        let row = TurnRow::of(turn)?;
        // One job: the insert and the conversation update commit together (one savepoint).
        self.write(move |conn| row.insert(conn)).await
    }

    async fn set_turn_json(&self, column: TurnJson, turn_id: i64, value: &Value) -> Result<()> {
        let sql = match column {
            TurnJson::Actions => "UPDATE turns SET actions = ? WHERE id = ?",
            TurnJson::PluginReads => "UPDATE turns SET plugin_reads = ? WHERE id = ?",
            TurnJson::Knowledge => "UPDATE turns SET knowledge = ? WHERE id = ?",
        };
        let value = json_text(value)?;
        self.write(move |conn| update_one(conn, sql, params![value, turn_id], "turn"))
            .await
    }

    async fn turn_plugin_reads(&self, turn_id: i64) -> Result<Option<Value>> {
        self.read(move |conn| {
            let raw: Option<Option<String>> = query_one(
                conn,
                "SELECT plugin_reads FROM turns WHERE id = ?",
                [turn_id],
                |row| Ok(row.get(0)?),
            )?;
            raw.flatten().as_deref().map(json).transpose()
        })
        .await
    }

    async fn turn_knowledge(&self, turn_id: i64) -> Result<Option<Value>> {
        self.read(move |conn| {
            let raw: Option<Option<String>> = query_one(
                conn,
                "SELECT knowledge FROM turns WHERE id = ?",
                [turn_id],
                |row| Ok(row.get(0)?),
            )?;
            raw.flatten().as_deref().map(json).transpose()
        })
        .await
    }

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>> {
        self.read_query(query_one, TURN_BY_ID, [turn_id], turn_from)
            .await
    }

    async fn history(
        &self,
        conversation_id: ConversationId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Turn>> {
        self.read(move |conn| history_in(conn, conversation_id, since, limit))
            .await
    }

    async fn recent_user_turn_times(
        &self,
        conversation_id: ConversationId,
        limit: i64,
    ) -> Result<Vec<DateTime<Utc>>> {
        self.read(move |conn| recent_user_turn_times_in(conn, conversation_id, limit))
            .await
    }

    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>> {
        self.read_query(
            query_all,
            CONVERSATION_TURNS,
            [IdText::of(conversation_id)],
            turn_from,
        )
        .await
    }

    async fn turns_with_actions_containing(
        &self,
        text: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<Turn>> {
        self.read_query(
            query_all,
            TURNS_WITH_ACTIONS_CONTAINING,
            (ms(since), text.to_owned()),
            turn_from,
        )
        .await
    }

    async fn turn_context(
        &self,
        conversation: &Conversation,
        query: TurnContextQuery,
    ) -> Result<TurnContext> {
        let (id, subscriber) = (conversation.id, conversation.subscriber_id.clone());
        // One job: the reads run back to back on the database thread.
        self.read(move |conn| turn_context_in(conn, id, &subscriber, query))
            .await
    }

    async fn returning_contact(
        &self,
        subscriber_id: &SubscriberId,
        query: TurnContextQuery,
    ) -> Result<Option<(Conversation, TurnContext)>> {
        let subscriber = subscriber_id.clone();
        // One job: the conversation and everything its turn reads.
        self.read(move |conn| {
            let Some(conversation) = conversation_by_subscriber(conn, subscriber.as_str())? else {
                return Ok(None);
            };
            let context = turn_context_in(conn, conversation.id, &subscriber, query)?;
            Ok(Some((conversation, context)))
        })
        .await
    }

    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds> {
        let message = TurnRow::of(exchange.message)?;
        let recorded = exchange.recorded;
        let reply = exchange.reply.map(TurnRow::of).transpose()?;
        let rate = exchange
            .rate
            .map(|(subscriber, window)| (subscriber.as_str().to_owned(), window));
        let (charge, escalated_at) = (exchange.charge, exchange.escalated_at);
        let outbox = exchange
            .outbox
            .iter()
            .map(OutboxInsert::of)
            .collect::<Result<Vec<_>>>()?;
        let keep = exchange.keep.map(KeptPromise::of).transpose()?;
        // One job, one savepoint: the whole exchange commits or none of it does.
        self.write(move |conn| {
            let message_id = match recorded {
                Some(id) => {
                    if let Some(reason) = &message.turn.escalation_reason {
                        update_one(
                            conn,
                            "UPDATE turns SET escalation_reason = ? WHERE id = ?",
                            params![reason, id],
                            "turn",
                        )?;
                    }
                    if message.turn.media_kind.is_some() {
                        update_one(
                            conn,
                            "UPDATE turns SET text = ?, media_kind = ?, cost_usd = ? WHERE id = ?",
                            params![
                                message.turn.text,
                                message.turn.media_kind,
                                message.turn.cost_usd,
                                id
                            ],
                            "turn",
                        )?;
                    }
                    id
                }
                None => message.insert(conn)?,
            };
            if let Some((subscriber, window)) = &rate {
                bump_rate_in(conn, subscriber, *window)?;
            }
            let reply_id = match &reply {
                Some(reply) => Some(reply.insert(conn)?),
                None => None,
            };
            if let Some(charge) = charge {
                add_budget_in(conn, charge)?;
            }
            if let Some(at) = escalated_at {
                set_escalated_in(conn, message.turn.conversation_id, at)?;
            }
            let outbox = outbox
                .iter()
                .map(|row| row.insert(conn, Some(reply_id.unwrap_or(message_id))))
                .collect::<Result<Vec<_>>>()?;
            if let Some(keep) = &keep {
                keep.write(conn, reply_id.unwrap_or(message_id))?;
            }
            Ok(ExchangeIds {
                message: message_id,
                reply: reply_id,
                outbox,
            })
        })
        .await
    }
}

/// The turn with this id.
const TURN_BY_ID: &str = concat!("SELECT ", turn_columns!(), " FROM turns WHERE id = ?");

/// A conversation's turns, in order.
const TURNS_WITH_ACTIONS_CONTAINING: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE created_at >= ?1 AND actions IS NOT NULL AND instr(actions, ?2) > 0 \
     ORDER BY created_at, seq"
);

const CONVERSATION_TURNS: &str = concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE conversation_id = ? \
     ORDER BY created_at, seq"
);
