//! PostgreSQL: nudges (`NudgeStore`, 025): scheduling, claiming, settling, the nudge turn.

use super::*;

impl PgStore {
    /// Runs `update`, which marks lost (at `$1`) the rows claimed before `$2`, and answers
    /// their contacts.
    async fn mark_lost(
        &self,
        update: &str,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        let lost = sqlx::query_scalar(update)
            .bind(to_millis(now))
            .bind(to_millis(claimed_before))
            .fetch_all(&self.pool)
            .await?;
        Ok(lost)
    }
}

#[async_trait]
impl NudgeStore for PgStore {
    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // One upsert against `nudges_one_pending` (unique on pending rows only): concurrent
        // schedulers cannot both insert, and settled rows are left as the record (025).
        sqlx::query(
            "INSERT INTO nudges (conversation_id, delay_id, due_at, status, reason, \
             scheduled_at, claimed_at, created_at, updated_at) \
             VALUES ($1, $2, $3, 'pending', NULL, $4, NULL, $4, $4) \
             ON CONFLICT (conversation_id) WHERE status = 'pending' DO UPDATE SET \
             delay_id = EXCLUDED.delay_id, due_at = EXCLUDED.due_at, \
             scheduled_at = EXCLUDED.scheduled_at, updated_at = EXCLUDED.updated_at",
        )
        .bind(conversation_id)
        .bind(delay_id)
        .bind(to_millis(due_at))
        .bind(to_millis(now))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE nudges SET status = 'cancelled', reason = $1, updated_at = $2 \
             WHERE conversation_id = $3 AND status IN ('pending', 'running')",
        )
        .bind(reason)
        .bind(to_millis(now))
        .bind(conversation_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>> {
        // SKIP LOCKED: a row another replica is claiming is passed over, never taken twice;
        // the scan goes through `nudges_pending_due`, so it costs the due rows.
        let rows = sqlx::query(
            "UPDATE nudges SET status = 'running', claimed_at = $1, updated_at = $1 \
             WHERE id IN (SELECT id FROM nudges WHERE status = 'pending' AND due_at <= $1 \
                          ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
             AND status = 'pending' \
             RETURNING id, conversation_id, delay_id, due_at, scheduled_at, status, reason, \
                       claimed_at",
        )
        .bind(to_millis(now))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = rows.iter().map(nudge_from).collect::<Result<Vec<_>>>()?;
        claimed.sort_by_key(|n| (n.due_at, n.id));
        Ok(claimed)
    }

    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE nudges SET status = $1, reason = $2, updated_at = $3 \
             WHERE id = $4 AND status = 'running' AND claimed_at = $5",
        )
        .bind(status.as_str())
        .bind(reason)
        .bind(to_millis(now))
        .bind(nudge.id)
        .bind(nudge.claimed_at.map(to_millis))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.mark_lost(
            "UPDATE nudges SET status = 'lost', reason = 'process_died', updated_at = $1 \
             WHERE status = 'running' AND claimed_at < $2 RETURNING conversation_id",
            claimed_before,
            now,
        )
        .await
    }

    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>> {
        self.one_by(
            NUDGE,
            "FROM nudges WHERE conversation_id = $1 ORDER BY id DESC LIMIT 1",
            conversation_id,
        )
        .await
    }

    async fn nudges(&self, conversation_id: ConversationId) -> Result<Vec<Nudge>> {
        self.all_by(
            NUDGE,
            "FROM nudges WHERE conversation_id = $1 ORDER BY id",
            conversation_id,
        )
        .await
    }

    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>> {
        // One transaction. The settle takes the row's lock: a cancel committed first leaves it
        // no longer running (nothing is written); a cancel arriving after waits and then finds
        // it settled.
        let mut tx = self.pool.begin().await?;
        let settled = sqlx::query(
            "UPDATE nudges SET status = $1, reason = $2, updated_at = $3 \
             WHERE id = $4 AND status = 'running' AND claimed_at = $5",
        )
        .bind(exchange.status.as_str())
        .bind(exchange.reason)
        .bind(to_millis(exchange.now))
        .bind(exchange.nudge.id)
        .bind(exchange.nudge.claimed_at.map(to_millis))
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let turn = insert_turn(&mut *tx, exchange.turn).await?;
        if let Some((subscriber, window)) = exchange.rate {
            bump_rate_in(&mut tx, subscriber, window).await?;
        }
        if let Some(charge) = exchange.charge {
            add_budget_in(&mut *tx, charge.day, charge.tokens, charge.cost_usd).await?;
        }
        for row in exchange.outbox {
            insert_outbox(&mut *tx, row, Some(turn), self.tickets.holder()).await?;
        }
        tx.commit().await?;
        Ok(Some(turn))
    }

    async fn claim_window_closings(&self, claim: WindowClosingClaim) -> Result<Vec<WindowClosing>> {
        // The primary key decides between replicas: a contact two workers select at once is
        // inserted by one; the other's insert does nothing and returns no row.
        let fresh = sqlx::query(
            "INSERT INTO window_closings (conversation_id, status, reason, last_inbound_at, \
             claimed_at, attempts, created_at, updated_at) \
             SELECT c.id, 'running', NULL, c.last_message_at, $1, 0, $1, $1 \
             FROM conversations c \
             WHERE c.last_message_at > $2 AND c.last_message_at <= $3 \
             AND NOT EXISTS (SELECT 1 FROM window_closings w WHERE w.conversation_id = c.id) \
             ORDER BY c.last_message_at LIMIT $4 \
             ON CONFLICT (conversation_id) DO NOTHING \
             RETURNING conversation_id, status, reason, last_inbound_at, claimed_at, attempts",
        )
        .bind(to_millis(claim.now))
        .bind(to_millis(claim.open_after))
        .bind(to_millis(claim.due_before))
        .bind(claim.limit)
        .fetch_all(&self.pool)
        .await?;
        // SKIP LOCKED: a row another replica is claiming is passed over, never taken twice.
        let retries = sqlx::query(
            "UPDATE window_closings SET status = 'running', claimed_at = $1, updated_at = $1 \
             WHERE conversation_id IN (SELECT conversation_id FROM window_closings \
                 WHERE status = 'retry' AND updated_at <= $2 ORDER BY updated_at LIMIT $3 \
                 FOR UPDATE SKIP LOCKED) \
             AND status = 'retry' \
             RETURNING conversation_id, status, reason, last_inbound_at, claimed_at, attempts",
        )
        .bind(to_millis(claim.now))
        .bind(to_millis(claim.retry_before))
        .bind(claim.limit)
        .fetch_all(&self.pool)
        .await?;
        fresh
            .iter()
            .chain(retries.iter())
            .map(window_closing_from)
            .collect()
    }

    async fn settle_window_closing(
        &self,
        claimed: &WindowClosing,
        status: WindowClosingStatus,
        reason: Option<&str>,
        attempts: i64,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(SETTLE_WINDOW_CLOSING)
            .bind(status.as_str())
            .bind(reason)
            .bind(attempts as i32)
            .bind(to_millis(now))
            .bind(claimed.conversation_id)
            .bind(to_millis(claimed.claimed_at))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn release_window_closing(&self, claimed: &WindowClosing) -> Result<bool> {
        let done = sqlx::query(
            "DELETE FROM window_closings \
             WHERE conversation_id = $1 AND status = 'running' AND claimed_at = $2",
        )
        .bind(claimed.conversation_id)
        .bind(to_millis(claimed.claimed_at))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn record_window_closing(
        &self,
        claimed: &WindowClosing,
        turn: &NewTurn,
        attempts: i64,
    ) -> Result<Option<i64>> {
        // One transaction; the settle takes the row's lock and checks the claim.
        let mut tx = self.pool.begin().await?;
        let settled = sqlx::query(SETTLE_WINDOW_CLOSING)
            .bind(WindowClosingStatus::Sent.as_str())
            .bind(Option::<&str>::None)
            .bind(attempts as i32)
            .bind(to_millis(turn.created_at))
            .bind(claimed.conversation_id)
            .bind(to_millis(claimed.claimed_at))
            .execute(&mut *tx)
            .await?;
        if settled.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let id = insert_turn(&mut *tx, turn).await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    async fn mark_lost_window_closings(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>> {
        self.mark_lost(
            "UPDATE window_closings SET status = 'lost', reason = 'process_died', \
             updated_at = $1 WHERE status = 'running' AND claimed_at < $2 \
             RETURNING conversation_id",
            claimed_before,
            now,
        )
        .await
    }

    async fn window_closing(
        &self,
        conversation_id: ConversationId,
    ) -> Result<Option<WindowClosing>> {
        self.one_by(
            WINDOW_CLOSING,
            "FROM window_closings WHERE conversation_id = $1",
            conversation_id,
        )
        .await
    }
}

const SETTLE_WINDOW_CLOSING: &str = "UPDATE window_closings SET status = $1, reason = $2, \
     attempts = $3, updated_at = $4 \
     WHERE conversation_id = $5 AND status = 'running' AND claimed_at = $6";

const WINDOW_CLOSING: Record<WindowClosing> = Record {
    columns: "conversation_id, status, reason, last_inbound_at, claimed_at, attempts",
    from: window_closing_from,
};

fn window_closing_from(row: &PgRow) -> Result<WindowClosing> {
    Ok(WindowClosing {
        conversation_id: row.try_get("conversation_id")?,
        status: WindowClosingStatus::parse(row.try_get::<&str, _>("status")?)?,
        reason: row.try_get("reason")?,
        last_inbound_at: row.try_get("last_inbound_at")?,
        claimed_at: row.try_get("claimed_at")?,
        attempts: i64::from(row.try_get::<i32, _>("attempts")?),
    })
}

const NUDGE: Record<Nudge> = Record {
    columns: "id, conversation_id, delay_id, due_at, scheduled_at, status, reason, claimed_at",
    from: nudge_from,
};

pub(super) fn nudge_from(row: &PgRow) -> Result<Nudge> {
    let due_at: DateTime<Utc> = row.try_get("due_at")?;
    let scheduled_at: Option<DateTime<Utc>> = row.try_get("scheduled_at")?;
    Ok(Nudge {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        delay_id: row.try_get("delay_id")?,
        due_at,
        scheduled_at: scheduled_at.unwrap_or(due_at),
        status: NudgeStatus::parse(row.try_get::<&str, _>("status")?)?,
        reason: row.try_get("reason")?,
        claimed_at: row.try_get("claimed_at")?,
    })
}
