//! PostgreSQL: turns, the history, and a turn's units of work (`TurnStore`).

use super::*;
use crate::store::TurnJson;

const TURN: Record<Turn> = Record {
    columns: TURN_COLUMNS,
    from: turn_from,
};

pub(super) fn turn_from(row: &PgRow) -> Result<Turn> {
    let actions: Option<Json<Value>> = row.try_get("actions")?;
    Ok(Turn {
        id: row.try_get("id")?,
        seq: row.try_get("seq")?,
        conversation_id: row.try_get("conversation_id")?,
        role: common::role(row.try_get::<&str, _>("role")?)?,
        text: row.try_get("text")?,
        outcome: row.try_get("outcome")?,
        model: row.try_get("model")?,
        bound: row.try_get("bound")?,
        actions: actions.map(|Json(value)| value),
        reads: row.try_get("reads")?,
        input_tokens: row.try_get("input_tokens")?,
        output_tokens: row.try_get("output_tokens")?,
        cached_tokens: row.try_get("cached_tokens")?,
        cost_usd: row.try_get("cost_usd")?,
        latency_ms: row.try_get("latency_ms")?,
        created_at: row.try_get("created_at")?,
        escalation_reason: row.try_get("escalation_reason")?,
        media_kind: row.try_get("media_kind")?,
        duplicate: row.try_get("duplicate")?,
        playbook_version: row.try_get("playbook_version")?,
        cache_write_tokens: row.try_get("cache_write_tokens")?,
    })
}

#[async_trait]
impl TurnStore for PgStore {
    async fn record_turn(&self, turn: &NewTurn) -> Result<i64> {
        insert_turn(&self.pool, turn).await
    }

    async fn set_turn_json(&self, column: TurnJson, turn_id: i64, value: &Value) -> Result<()> {
        let sql = match column {
            TurnJson::Actions => "UPDATE turns SET actions = $1 WHERE id = $2",
            TurnJson::PluginReads => "UPDATE turns SET plugin_reads = $1 WHERE id = $2",
            TurnJson::Knowledge => "UPDATE turns SET knowledge = $1 WHERE id = $2",
        };
        let done = sqlx::query(sql)
            .bind(Json(value))
            .bind(turn_id)
            .execute(&self.pool)
            .await?;
        changed(done, "turn")
    }

    async fn turn_plugin_reads(&self, turn_id: i64) -> Result<Option<Value>> {
        let reads: Option<Option<Json<Value>>> =
            sqlx::query_scalar("SELECT plugin_reads FROM turns WHERE id = $1")
                .bind(turn_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(reads.flatten().map(|Json(value)| value))
    }

    async fn turn_knowledge(&self, turn_id: i64) -> Result<Option<Value>> {
        let ids: Option<Option<Json<Value>>> =
            sqlx::query_scalar("SELECT knowledge FROM turns WHERE id = $1")
                .bind(turn_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(ids.flatten().map(|Json(value)| value))
    }

    async fn turn(&self, turn_id: i64) -> Result<Option<Turn>> {
        self.one_by(TURN, "FROM turns WHERE id = $1", turn_id).await
    }

    async fn history(
        &self,
        conversation_id: ConversationId,
        since: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Turn>> {
        let rows = sqlx::query(&format!(
            "SELECT {TURN_COLUMNS} FROM (\
                 SELECT {TURN_COLUMNS} FROM turns \
                 WHERE conversation_id = $1 AND bound AND created_at >= $2 \
                 ORDER BY created_at DESC, seq DESC LIMIT $3\
             ) AS recent ORDER BY created_at, seq"
        ))
        .bind(conversation_id)
        .bind(to_millis(since))
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(turn_from).collect()
    }

    async fn recent_user_turn_times(
        &self,
        conversation_id: ConversationId,
        limit: i64,
    ) -> Result<Vec<DateTime<Utc>>> {
        let times: Vec<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT created_at FROM turns \
             WHERE conversation_id = $1 AND bound AND role = 'user' \
             ORDER BY created_at DESC, seq DESC LIMIT $2",
        )
        .bind(conversation_id)
        .bind(limit.max(0))
        .fetch_all(&self.pool)
        .await?;
        Ok(times)
    }

    async fn turns(&self, conversation_id: ConversationId) -> Result<Vec<Turn>> {
        self.all_by(
            TURN,
            "FROM turns WHERE conversation_id = $1 ORDER BY created_at, seq",
            conversation_id,
        )
        .await
    }

    async fn turns_with_actions_containing(
        &self,
        text: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<Turn>> {
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE created_at >= $1 AND actions IS NOT NULL \
             AND strpos(actions::TEXT, $2) > 0 ORDER BY created_at, seq"
        );
        let rows = sqlx::query(&sql)
            .bind(since)
            .bind(text)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(turn_from).collect()
    }

    async fn record_exchange(&self, exchange: Exchange<'_>) -> Result<ExchangeIds> {
        // One transaction: the turn is stored whole or not at all, as on SQLite.
        let mut tx = self.pool.begin().await?;
        let message = match exchange.recorded {
            Some(id) => {
                if let Some(reason) = &exchange.message.escalation_reason {
                    sqlx::query("UPDATE turns SET escalation_reason = $1 WHERE id = $2")
                        .bind(reason)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                if exchange.message.media_kind.is_some() {
                    sqlx::query(
                        "UPDATE turns SET text = $1, media_kind = $2, cost_usd = $3 WHERE id = $4",
                    )
                    .bind(&exchange.message.text)
                    .bind(&exchange.message.media_kind)
                    .bind(exchange.message.cost_usd)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                }
                id
            }
            None => insert_turn(&mut *tx, exchange.message).await?,
        };
        if let Some((subscriber, window)) = exchange.rate {
            bump_rate_in(&mut tx, subscriber, window).await?;
        }
        let reply = match exchange.reply {
            Some(reply) => Some(insert_turn(&mut *tx, reply).await?),
            None => None,
        };
        if let Some(charge) = exchange.charge {
            add_budget_in(&mut *tx, charge.day, charge.tokens, charge.cost_usd).await?;
        }
        if let Some(at) = exchange.escalated_at {
            set_escalated_in(&mut *tx, exchange.message.conversation_id, at).await?;
        }
        let mut outbox = Vec::with_capacity(exchange.outbox.len());
        for row in exchange.outbox {
            let turn = Some(reply.unwrap_or(message));
            outbox.push(insert_outbox(&mut *tx, row, turn, self.tickets.holder()).await?);
        }
        if let Some(keep) = exchange.keep {
            keep_promise_in(
                &mut tx,
                keep,
                reply.unwrap_or(message),
                self.tickets.holder(),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(ExchangeIds {
            message,
            reply,
            outbox,
        })
    }
}

/// Keeps a promise inside the exchange's transaction (see [`KeepPromise`]); a new payload
/// without a `turnId` gets `turn`.
pub(super) async fn keep_promise_in(
    tx: &mut sqlx::PgConnection,
    keep: KeepPromise<'_>,
    turn: i64,
    owner: uuid::Uuid,
) -> Result<()> {
    // Only the promise's owner keeps it: a replica taken for dead whose promise a survivor
    // took over finds it lapsed, so the contact gets one answer, the survivor's.
    if keep.answered {
        let kept = sqlx::query(
            "DELETE FROM outbox WHERE id = $1 AND status = 'pending' \
             AND (owner IS NULL OR owner = $2)",
        )
        .bind(keep.rows.reply)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        if kept.rows_affected() == 0 {
            return Err(StoreError::PromiseLapsed);
        }
        sqlx::query("DELETE FROM outbox WHERE id = $1 AND status = 'pending'")
            .bind(keep.rows.handoff)
            .execute(&mut *tx)
            .await?;
        return Ok(());
    }
    let kept = sqlx::query(
        "UPDATE outbox SET payload = CASE \
             WHEN $1::JSONB IS NULL THEN payload \
             WHEN $4::BIGINT IS NOT NULL \
                  AND jsonb_typeof($1::JSONB -> 'turnId') IS DISTINCT FROM 'number' \
             THEN jsonb_set($1::JSONB, '{turnId}', to_jsonb($4::BIGINT)) ELSE $1::JSONB END, \
         next_attempt_at = $2 WHERE id = $3 AND status = 'pending' \
         AND (owner IS NULL OR owner = $5)",
    )
    .bind(keep.payload.map(Json))
    .bind(to_millis(keep.due))
    .bind(keep.rows.reply)
    .bind(turn)
    .bind(owner)
    .execute(&mut *tx)
    .await?;
    if kept.rows_affected() == 0 {
        return Err(StoreError::PromiseLapsed);
    }
    if keep.handoff {
        sqlx::query("UPDATE outbox SET next_attempt_at = $1 WHERE id = $2 AND status = 'pending'")
            .bind(to_millis(keep.due))
            .bind(keep.rows.handoff)
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query("DELETE FROM outbox WHERE id = $1 AND status = 'pending'")
            .bind(keep.rows.handoff)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

// The writes a turn's exchange shares with the single calls, on a pool or in a transaction.

pub(super) async fn insert_turn(db: impl sqlx::PgExecutor<'_>, turn: &NewTurn) -> Result<i64> {
    // One statement, so one round trip and atomic: the insert and, for a user turn, the
    // conversation's `last_message_at` (GREATEST ignores its NULL) and bound count.
    let id: i64 = sqlx::query_scalar(
        "WITH inserted AS (\
             INSERT INTO turns (conversation_id, role, text, outcome, model, bound, actions, \
             reads, input_tokens, output_tokens, cached_tokens, cost_usd, latency_ms, \
             created_at, escalation_reason, media_kind, duplicate, playbook_version, \
             cache_write_tokens, steps) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18, $19, $20) \
             RETURNING id), \
         touched AS (\
             UPDATE conversations SET last_message_at = GREATEST(last_message_at, $14), \
             turn_count = turn_count + CASE WHEN $6 THEN 1 ELSE 0 END, updated_at = $14 \
             WHERE id = $1 AND $2 = 'user') \
         SELECT id FROM inserted",
    )
    .bind(turn.conversation_id)
    .bind(turn.role.as_str())
    .bind(&turn.text)
    .bind(&turn.outcome)
    .bind(&turn.model)
    .bind(turn.bound)
    .bind(turn.actions.as_ref().map(Json))
    .bind(turn.reads)
    .bind(turn.input_tokens)
    .bind(turn.output_tokens)
    .bind(turn.cached_tokens)
    .bind(turn.cost_usd)
    .bind(turn.latency_ms)
    .bind(to_millis(turn.created_at))
    .bind(&turn.escalation_reason)
    .bind(&turn.media_kind)
    .bind(&turn.duplicate)
    .bind(&turn.playbook_version)
    .bind(turn.cache_write_tokens)
    .bind(turn.steps)
    .fetch_one(db)
    .await?;
    Ok(id)
}
