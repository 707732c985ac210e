//! PostgreSQL: the outbox (`OutboxStore`): enqueueing, claiming under a lease, settling, the
//! backlog.

use super::*;

const OUTBOX: Record<OutboxRow> = Record {
    columns: OUTBOX_COLUMNS,
    from: outbox_from,
};

pub(super) fn outbox_from(row: &PgRow) -> Result<OutboxRow> {
    let Json(payload): Json<Value> = row.try_get("payload")?;
    Ok(OutboxRow {
        id: row.try_get("id")?,
        conversation_id: row.try_get("conversation_id")?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        kind: common::outbox_kind(row.try_get::<&str, _>("kind")?)?,
        payload,
        status: common::outbox_status(row.try_get::<&str, _>("status")?)?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        last_error: row.try_get("last_error")?,
        lease_until: row.try_get("lease_until")?,
        created_at: row.try_get("created_at")?,
        delivered_at: row.try_get("delivered_at")?,
        messages_delivered: row.try_get("messages_delivered")?,
        trigger_timeouts: row.try_get("trigger_timeouts")?,
    })
}

#[async_trait]
impl OutboxStore for PgStore {
    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64> {
        insert_outbox(&self.pool, row, None, self.tickets.holder()).await
    }

    async fn claim_outbox_row(
        &self,
        id: i64,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<OutboxRow>> {
        let row = sqlx::query(&format!(
            "UPDATE outbox SET status = 'delivering', lease_until = $1, \
             attempts = attempts + 1 WHERE id = $2 AND status = 'pending' \
             RETURNING {OUTBOX_COLUMNS}"
        ))
        .bind(to_millis(after(now, lease)))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(outbox_from).transpose()
    }

    async fn orphaned_promises(&self) -> Result<Vec<OrphanedPromise>> {
        let rows = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS}, (SELECT h.id FROM outbox h \
                 WHERE h.conversation_id = o.conversation_id AND h.kind = 'handoff' \
                 AND h.status = 'pending' AND h.payload -> 'turnId' = o.payload -> 'turnId' \
                 AND h.payload ->> 'fallback' = 'true' ORDER BY h.id LIMIT 1) AS fallback \
             FROM outbox o WHERE o.kind = 'reply' AND o.status = 'pending' \
             AND o.owner IS NOT NULL AND o.owner <> $1 \
             AND jsonb_typeof(o.payload -> 'promise') = 'object' \
             AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.holder = o.owner \
                             AND r.lease_until > now()) \
             ORDER BY o.id LIMIT 500"
        ))
        .bind(self.tickets.holder())
        .fetch_all(&self.pool)
        .await?;
        let mut orphans = Vec::with_capacity(rows.len());
        for row in &rows {
            // A promise without its fallback row is not one a turn wrote whole: left alone.
            if let Some(handoff) = row.try_get::<Option<i64>, _>("fallback")? {
                orphans.push(OrphanedPromise {
                    reply: outbox_from(row)?,
                    handoff,
                });
            }
        }
        Ok(orphans)
    }

    async fn claim_promise(&self, reply_row: i64) -> Result<bool> {
        let me = self.tickets.holder();
        let mut tx = self.pool.begin().await?;
        // The row's lock orders two survivors: the second reads the first one's claim.
        let owner: Option<(Option<uuid::Uuid>, ConversationId)> = sqlx::query_as(
            "SELECT owner, conversation_id FROM outbox WHERE id = $1 AND status = 'pending' \
             FOR UPDATE",
        )
        .bind(reply_row)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((Some(dead), conversation)) = owner else {
            return Ok(false);
        };
        let alive: bool = sqlx::query_scalar(
            "SELECT $1 = $2 OR EXISTS (SELECT 1 FROM replicas WHERE holder = $1 \
             AND lease_until > now())",
        )
        .bind(dead)
        .bind(me)
        .fetch_one(&mut *tx)
        .await?;
        if alive {
            return Ok(false);
        }
        sqlx::query("UPDATE outbox SET owner = $1 WHERE id = $2")
            .bind(me)
            .bind(reply_row)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM turn_tickets WHERE holder = $1 AND conversation_id = $2")
            .bind(dead)
            .bind(conversation)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn pending_outbox(&self, kind: OutboxKind) -> Result<Vec<OutboxRow>> {
        self.all_by(
            OUTBOX,
            "FROM outbox WHERE status = 'pending' AND kind = $1 ORDER BY id",
            kind.as_str(),
        )
        .await
    }

    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>> {
        // SKIP LOCKED: a row another worker is claiming right now is passed over, not waited
        // for. A blocked newer reply stays blocked even when the older one is locked, because
        // the NOT EXISTS still sees the older row as pending or delivering.
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(&format!(
            "WITH due AS (\
                 SELECT o.id FROM outbox o \
                 WHERE ((o.status = 'pending' AND o.next_attempt_at <= $2) \
                        OR (o.status = 'delivering' AND o.lease_until <= $2)) \
                   AND (o.kind = 'contact_token' OR \
                        NOT EXISTS (SELECT 1 FROM outbox p \
                                    WHERE p.conversation_id = o.conversation_id \
                                      AND p.kind = 'reply' AND p.id < o.id \
                                      AND p.status IN ('pending', 'delivering'))) \
                   AND (o.kind <> 'reply' OR \
                        NOT EXISTS (SELECT 1 FROM outbox d \
                                    WHERE d.conversation_id = o.conversation_id \
                                      AND d.kind = 'reply' AND d.status = 'delivered' \
                                      AND d.delivered_at > $3)) \
                 ORDER BY (o.kind = 'contact_token'), o.id LIMIT $4 \
                 FOR UPDATE SKIP LOCKED) \
             UPDATE outbox SET status = 'delivering', lease_until = $1, \
                 attempts = outbox.attempts + 1 \
             FROM due WHERE outbox.id = due.id \
             RETURNING outbox.id, {CLAIMED_COLUMNS}"
        ))
        .bind(to_millis(after(rules.now, rules.lease)))
        .bind(to_millis(rules.now))
        .bind(to_millis(before(rules.now, rules.reply_gap)))
        .bind(rules.limit.max(0))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut claimed = rows.iter().map(outbox_from).collect::<Result<Vec<_>>>()?;
        // RETURNING has no defined order.
        claimed.sort_by_key(|row| (row.kind == OutboxKind::ContactToken, row.id));
        Ok(claimed)
    }

    async fn renew_outbox_leases(&self, ids: &[i64], lease_until: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE outbox SET lease_until = $1 WHERE status = 'delivering' AND id = ANY($2)",
        )
        .bind(to_millis(lease_until))
        .bind(ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn record_outbox_progress(
        &self,
        id: i64,
        messages_delivered: i32,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET messages_delivered = $1, trigger_timeouts = $2 WHERE id = $3",
        )
        .bind(messages_delivered)
        .bind(trigger_timeouts)
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "outbox row")
    }

    async fn record_outbox_actions(
        &self,
        id: i64,
        actions: &Value,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET payload = jsonb_set(payload, '{actions}', $1), \
             trigger_timeouts = $2 WHERE id = $3",
        )
        .bind(Json(actions))
        .bind(trigger_timeouts)
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "outbox row")
    }

    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'delivered', delivered_at = $1, lease_until = NULL, \
             payload = CASE WHEN kind = 'contact_token' THEN payload - 'token' ELSE payload END \
             WHERE id = $2",
        )
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "outbox row")
    }

    async fn settle_contact_tokens(
        &self,
        conversation_id: ConversationId,
        generation: i64,
        at: DateTime<Utc>,
    ) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'delivered', delivered_at = $3, lease_until = NULL, \
             payload = payload - 'token' \
             WHERE conversation_id = $1 AND kind = 'contact_token' AND status = 'pending' \
             AND (payload->>'generation')::BIGINT <= $2",
        )
        .bind(conversation_id)
        .bind(generation)
        .bind(to_millis(at))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'pending', next_attempt_at = $1, last_error = $2, \
             lease_until = NULL WHERE id = $3",
        )
        .bind(to_millis(next_attempt_at))
        .bind(bounded_error(error))
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "outbox row")
    }

    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()> {
        let done = sqlx::query(
            "UPDATE outbox SET status = 'failed', last_error = $1, failed_at = $2, \
             lease_until = NULL, \
             payload = CASE WHEN kind = 'contact_token' THEN payload - 'token' ELSE payload END \
             WHERE id = $3",
        )
        .bind(bounded_error(error))
        .bind(to_millis(at))
        .bind(id)
        .execute(&self.pool)
        .await?;
        changed(done, "outbox row")
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>> {
        self.one_by(OUTBOX, "FROM outbox WHERE id = $1", id).await
    }

    async fn outbox_backlog(
        &self,
        now: DateTime<Utc>,
        count_cap: i64,
    ) -> Result<crate::store::OutboxBacklog> {
        // Both through `outbox_status_due`: the count stops at the cap, the minimum is one
        // index seek per open status.
        let rows: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM outbox \
             WHERE status IN ('pending', 'delivering') LIMIT $1) open",
        )
        .bind(count_cap)
        .fetch_one(&self.pool)
        .await?;
        let oldest: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT LEAST( \
             (SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending'), \
             (SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'delivering'))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(crate::store::OutboxBacklog {
            rows,
            oldest_due_at: oldest.filter(|due| *due <= now),
        })
    }

    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM outbox WHERE conversation_id = $1 AND kind = 'reply' \
             AND status IN ('pending', 'delivering')",
        )
        .bind(conversation_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(count)
    }

    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>> {
        let rows = sqlx::query(&format!("SELECT {OUTBOX_COLUMNS} FROM outbox ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(outbox_from).collect()
    }
}

/// Inserts an outbox row; a reply or handoff row without a `turnId` gets `turn` (see
/// `Exchange`).
pub(super) async fn insert_outbox(
    db: impl sqlx::PgExecutor<'_>,
    row: &NewOutboxRow,
    turn: Option<i64>,
    owner: uuid::Uuid,
) -> Result<i64> {
    // `owner`: the process writing the row, whose promise it is until it dies.
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO outbox (conversation_id, subscriber_id, kind, payload, status, \
         next_attempt_at, created_at, owner) VALUES ($1, $2, $3, \
         CASE WHEN $3 <> 'contact_token' AND $7::BIGINT IS NOT NULL \
              AND jsonb_typeof($4::JSONB -> 'turnId') IS DISTINCT FROM 'number' \
         THEN jsonb_set($4::JSONB, '{turnId}', to_jsonb($7::BIGINT)) ELSE $4::JSONB END, \
         'pending', $5, $6, $8) \
         RETURNING id",
    )
    .bind(row.conversation_id)
    .bind(row.subscriber_id.as_str())
    .bind(row.kind.as_str())
    .bind(Json(&row.payload))
    .bind(to_millis(row.next_attempt_at))
    .bind(to_millis(row.created_at))
    .bind(turn)
    .bind(owner)
    .fetch_one(db)
    .await?;
    Ok(id)
}
