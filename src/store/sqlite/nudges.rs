//! SQLite: nudges (`NudgeStore`, 025): scheduling, claiming, settling, the nudge turn.

use super::*;

impl SqliteStore {
    /// The contacts `select` finds claimed before `claimed_before`, then `update` marks them
    /// lost at `now`: the one writer makes the select-then-update atomic, as for the claim.
    async fn mark_lost(
        &self,
        select: &'static str,
        update: &'static str,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.write(move |conn| {
            let lost = query_all(conn, select, [ms(claimed_before)], |row| {
                uuid(text(row, 0)?)
            })?;
            conn.prepare_cached(update)?
                .execute(params![ms(now), ms(claimed_before)])?;
            Ok(lost)
        })
        .await
    }
}

#[async_trait]
impl NudgeStore for SqliteStore {
    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let delay_id = delay_id.to_owned();
        self.write(move |conn| {
            conn.prepare_cached(SCHEDULE_NUDGE)?.execute(params![
                IdText::of(conversation_id),
                delay_id,
                ms(due_at),
                ms(now)
            ])?;
            Ok(())
        })
        .await
    }

    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let reason = reason.to_owned();
        self.write(move |conn| {
            let changed = conn.prepare_cached(CANCEL_NUDGE)?.execute(params![
                reason,
                ms(now),
                IdText::of(conversation_id)
            ])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>> {
        // The one writer makes the select-then-update atomic (and `BEGIN IMMEDIATE` across
        // processes on one file); the update re-checks `pending` all the same.
        self.write(move |conn| {
            let due = query_all(conn, DUE_NUDGES, params![ms(now), limit], nudge_from)?;
            let mut claimed = Vec::with_capacity(due.len());
            for mut nudge in due {
                let changed = conn
                    .prepare_cached(CLAIM_NUDGE)?
                    .execute(params![ms(now), nudge.id])?;
                if changed == 1 {
                    nudge.status = NudgeStatus::Running;
                    nudge.claimed_at = Some(now);
                    claimed.push(nudge);
                }
            }
            Ok(claimed)
        })
        .await
    }

    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let (id, claimed_at) = (nudge.id, nudge.claimed_at.map(ms));
        let reason = reason.map(str::to_owned);
        self.write(move |conn| {
            let changed = conn.prepare_cached(SETTLE_NUDGE)?.execute(params![
                status.as_str(),
                reason,
                ms(now),
                id,
                claimed_at
            ])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.mark_lost(LOST_NUDGES, LOSE_NUDGES, claimed_before, now)
            .await
    }

    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>> {
        self.read(move |conn| query_one(conn, NUDGE_OF, [IdText::of(conversation_id)], nudge_from))
            .await
    }

    async fn nudges(&self, conversation_id: ConversationId) -> Result<Vec<Nudge>> {
        self.read(move |conn| query_all(conn, NUDGES_OF, [IdText::of(conversation_id)], nudge_from))
            .await
    }

    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>> {
        let (id, claimed_at) = (exchange.nudge.id, exchange.nudge.claimed_at.map(ms));
        let (status, reason) = (exchange.status, exchange.reason.map(str::to_owned));
        let now = ms(exchange.now);
        let turn = TurnRow::of(exchange.turn)?;
        let rate = exchange
            .rate
            .map(|(subscriber, window)| (subscriber.as_str().to_owned(), window));
        let charge = exchange.charge;
        let outbox = exchange
            .outbox
            .iter()
            .map(OutboxInsert::of)
            .collect::<Result<Vec<_>>>()?;
        // One job, one savepoint: the claim is checked by the settle itself, so a cancel
        // committed before it leaves nothing written, and one after it finds the row settled.
        self.write(move |conn| {
            let settled = conn.prepare_cached(SETTLE_NUDGE)?.execute(params![
                status.as_str(),
                reason,
                now,
                id,
                claimed_at
            ])?;
            if settled == 0 {
                return Ok(None);
            }
            let turn_id = turn.insert(conn)?;
            if let Some((subscriber, window)) = &rate {
                bump_rate_in(conn, subscriber, *window)?;
            }
            if let Some(charge) = charge {
                add_budget_in(conn, charge)?;
            }
            for row in &outbox {
                row.insert(conn, Some(turn_id))?;
            }
            Ok(Some(turn_id))
        })
        .await
    }

    async fn claim_window_closings(&self, claim: WindowClosingClaim) -> Result<Vec<WindowClosing>> {
        // The one writer makes each select-then-write atomic; the insert and the update
        // re-check all the same.
        self.write(move |conn| {
            let now = ms(claim.now);
            let due = query_all(
                conn,
                DUE_WINDOW_CLOSINGS,
                params![ms(claim.open_after), ms(claim.due_before), claim.limit],
                |row| Ok((text(row, 0)?.to_owned(), row.get::<_, i64>(1)?)),
            )?;
            let mut claimed = Vec::with_capacity(due.len());
            for (conversation, last_inbound) in due {
                let changed = conn
                    .prepare_cached(INSERT_WINDOW_CLOSING)?
                    .execute(params![conversation, last_inbound, now])?;
                if changed == 1 {
                    claimed.push(WindowClosing {
                        conversation_id: uuid(&conversation)?,
                        status: WindowClosingStatus::Running,
                        reason: None,
                        last_inbound_at: time(last_inbound)?,
                        claimed_at: time(now)?,
                        attempts: 0,
                    });
                }
            }
            let retries = query_all(
                conn,
                RETRY_WINDOW_CLOSINGS,
                params![ms(claim.retry_before), claim.limit],
                window_closing_from,
            )?;
            for mut row in retries {
                let changed = conn
                    .prepare_cached(CLAIM_WINDOW_CLOSING)?
                    .execute(params![now, IdText::of(row.conversation_id)])?;
                if changed == 1 {
                    row.status = WindowClosingStatus::Running;
                    row.claimed_at = time(now)?;
                    claimed.push(row);
                }
            }
            Ok(claimed)
        })
        .await
    }

    async fn settle_window_closing(
        &self,
        claimed: &WindowClosing,
        status: WindowClosingStatus,
        reason: Option<&str>,
        attempts: i64,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let (id, claimed_at) = (claimed.conversation_id, ms(claimed.claimed_at));
        let reason = reason.map(str::to_owned);
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(SETTLE_WINDOW_CLOSING)?
                .execute(params![
                    status.as_str(),
                    reason,
                    attempts,
                    ms(now),
                    IdText::of(id),
                    claimed_at
                ])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn release_window_closing(&self, claimed: &WindowClosing) -> Result<bool> {
        let (id, claimed_at) = (claimed.conversation_id, ms(claimed.claimed_at));
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(RELEASE_WINDOW_CLOSING)?
                .execute(params![IdText::of(id), claimed_at])?;
            Ok(changed > 0)
        })
        .await
    }

    async fn record_window_closing(
        &self,
        claimed: &WindowClosing,
        turn: &NewTurn,
        attempts: i64,
    ) -> Result<Option<i64>> {
        let (id, claimed_at) = (claimed.conversation_id, ms(claimed.claimed_at));
        let now = ms(turn.created_at);
        let turn = TurnRow::of(turn)?;
        self.write(move |conn| {
            let settled = conn
                .prepare_cached(SETTLE_WINDOW_CLOSING)?
                .execute(params![
                    WindowClosingStatus::Sent.as_str(),
                    Option::<String>::None,
                    attempts,
                    now,
                    IdText::of(id),
                    claimed_at
                ])?;
            if settled == 0 {
                return Ok(None);
            }
            Ok(Some(turn.insert(conn)?))
        })
        .await
    }

    async fn mark_lost_window_closings(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.mark_lost(
            LOST_WINDOW_CLOSINGS,
            LOSE_WINDOW_CLOSINGS,
            claimed_before,
            now,
        )
        .await
    }

    async fn window_closing(
        &self,
        conversation_id: ConversationId,
    ) -> Result<Option<WindowClosing>> {
        self.read_query(
            query_one,
            WINDOW_CLOSING_OF,
            [IdText::of(conversation_id)],
            window_closing_from,
        )
        .await
    }
}

macro_rules! window_closing_columns {
    () => {
        "conversation_id, status, reason, last_inbound_at, claimed_at, attempts"
    };
}

/// 031: contacts whose last message is 1380 to 1440 minutes old and who have no row (through
/// `conversations_last_message_at`).
pub(super) const DUE_WINDOW_CLOSINGS: &str = "SELECT c.id, c.last_message_at FROM conversations c \
     WHERE c.last_message_at > ?1 AND c.last_message_at <= ?2 \
     AND NOT EXISTS (SELECT 1 FROM window_closings w WHERE w.conversation_id = c.id) \
     ORDER BY c.last_message_at LIMIT ?3";
pub(super) const INSERT_WINDOW_CLOSING: &str = "INSERT INTO window_closings (conversation_id, status, \
     reason, last_inbound_at, claimed_at, attempts, created_at, updated_at) \
     VALUES (?1, 'running', NULL, ?2, ?3, 0, ?3, ?3) ON CONFLICT (conversation_id) DO NOTHING";
/// Through `window_closings_retry`.
pub(super) const RETRY_WINDOW_CLOSINGS: &str = concat!(
    "SELECT ",
    window_closing_columns!(),
    " FROM window_closings WHERE status = 'retry' AND updated_at <= ?1 ORDER BY updated_at LIMIT ?2"
);
pub(super) const CLAIM_WINDOW_CLOSING: &str = "UPDATE window_closings SET status = 'running', \
     claimed_at = ?1, updated_at = ?1 WHERE conversation_id = ?2 AND status = 'retry'";
pub(super) const SETTLE_WINDOW_CLOSING: &str = "UPDATE window_closings SET status = ?1, reason = ?2, \
     attempts = ?3, updated_at = ?4 \
     WHERE conversation_id = ?5 AND status = 'running' AND claimed_at = ?6";
pub(super) const RELEASE_WINDOW_CLOSING: &str = "DELETE FROM window_closings \
     WHERE conversation_id = ?1 AND status = 'running' AND claimed_at = ?2";
/// The conversations of the rows [`LOSE_WINDOW_CLOSINGS`] marks (through
/// `window_closings_running_claimed`).
pub(super) const LOST_WINDOW_CLOSINGS: &str =
    "SELECT conversation_id FROM window_closings WHERE status = 'running' AND claimed_at < ?1";
pub(super) const LOSE_WINDOW_CLOSINGS: &str = "UPDATE window_closings SET status = 'lost', \
     reason = 'process_died', updated_at = ?1 WHERE status = 'running' AND claimed_at < ?2";
pub(super) const WINDOW_CLOSING_OF: &str = concat!(
    "SELECT ",
    window_closing_columns!(),
    " FROM window_closings WHERE conversation_id = ?1"
);

pub(super) fn window_closing_from(row: &Row<'_>) -> Result<WindowClosing> {
    Ok(WindowClosing {
        conversation_id: uuid(text(row, 0)?)?,
        status: WindowClosingStatus::parse(text(row, 1)?)?,
        reason: row.get(2)?,
        last_inbound_at: time(row.get(3)?)?,
        claimed_at: time(row.get(4)?)?,
        attempts: row.get(5)?,
    })
}

macro_rules! nudge_columns {
    () => {
        "id, conversation_id, delay_id, due_at, scheduled_at, status, reason, claimed_at"
    };
}

/// 025: the conversation's one pending nudge, inserted or replaced in one upsert against
/// `nudges_one_pending` (unique on pending rows only): settled rows are left as the record.
pub(super) const SCHEDULE_NUDGE: &str = "INSERT INTO nudges (conversation_id, delay_id, due_at, status, \
     reason, scheduled_at, claimed_at, created_at, updated_at) \
     VALUES (?1, ?2, ?3, 'pending', NULL, ?4, NULL, ?4, ?4) \
     ON CONFLICT (conversation_id) WHERE status = 'pending' DO UPDATE SET \
     delay_id = excluded.delay_id, due_at = excluded.due_at, \
     scheduled_at = excluded.scheduled_at, updated_at = excluded.updated_at";
pub(super) const CANCEL_NUDGE: &str = "UPDATE nudges SET status = 'cancelled', reason = ?1, updated_at = ?2 \
     WHERE conversation_id = ?3 AND status IN ('pending', 'running')";
/// Through `nudges_pending_due`: costs the due rows, not the table.
pub(super) const DUE_NUDGES: &str = concat!(
    "SELECT ",
    nudge_columns!(),
    " FROM nudges WHERE status = 'pending' AND due_at <= ?1 ORDER BY due_at LIMIT ?2"
);
pub(super) const CLAIM_NUDGE: &str = "UPDATE nudges SET status = 'running', claimed_at = ?1, updated_at = ?1 \
     WHERE id = ?2 AND status = 'pending'";
pub(super) const SETTLE_NUDGE: &str = "UPDATE nudges SET status = ?1, reason = ?2, updated_at = ?3 \
     WHERE id = ?4 AND status = 'running' AND claimed_at = ?5";
/// The conversations of the nudges [`LOSE_NUDGES`] marks.
pub(super) const LOST_NUDGES: &str =
    "SELECT conversation_id FROM nudges WHERE status = 'running' AND claimed_at < ?1";
pub(super) const LOSE_NUDGES: &str = "UPDATE nudges SET status = 'lost', reason = 'process_died', \
     updated_at = ?1 WHERE status = 'running' AND claimed_at < ?2";
/// The conversation's latest nudge row.
pub(super) const NUDGE_OF: &str = concat!(
    "SELECT ",
    nudge_columns!(),
    " FROM nudges WHERE conversation_id = ?1 ORDER BY id DESC LIMIT 1"
);
/// Every nudge row of the conversation, oldest first (through `nudges_conversation`).
pub(super) const NUDGES_OF: &str = concat!(
    "SELECT ",
    nudge_columns!(),
    " FROM nudges WHERE conversation_id = ?1 ORDER BY id"
);

pub(super) fn nudge_from(row: &Row<'_>) -> Result<Nudge> {
    let due_at = time(row.get(3)?)?;
    Ok(Nudge {
        id: row.get(0)?,
        conversation_id: uuid(text(row, 1)?)?,
        delay_id: row.get(2)?,
        due_at,
        scheduled_at: opt_time(row.get(4)?)?.unwrap_or(due_at),
        status: NudgeStatus::parse(text(row, 5)?)?,
        reason: row.get(6)?,
        claimed_at: opt_time(row.get(7)?)?,
    })
}
