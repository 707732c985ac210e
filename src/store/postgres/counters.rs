//! PostgreSQL: counters (`CounterStore`): the hourly rate windows, the day's budget, the flow
//! sends, and the ManyChat bucket every replica shares.

use super::*;

#[async_trait]
impl CounterStore for PgStore {
    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        // Two statements when a window begins: in one transaction.
        let mut tx = self.pool.begin().await?;
        let count = bump_rate_in(&mut tx, subscriber_id, window_start).await?;
        tx.commit().await?;
        Ok(count)
    }

    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let count: Option<i64> = sqlx::query_scalar(
            "SELECT count FROM rate_counters WHERE subscriber_id = $1 AND window_start = $2",
        )
        .bind(subscriber_id.as_str())
        .bind(to_millis(window_start))
        .fetch_optional(&self.pool)
        .await?;
        Ok(count.unwrap_or(0))
    }

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage> {
        let row: Option<(i64, f64)> =
            sqlx::query_as("SELECT tokens, cost_usd FROM budget_counters WHERE day = $1")
                .bind(day)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row
            .map(|(tokens, cost_usd)| BudgetUsage { tokens, cost_usd })
            .unwrap_or_default())
    }

    async fn contact_tokens(
        &self,
        conversation: ConversationId,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<i64> {
        let tokens: i64 = sqlx::query_scalar(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0)::BIGINT FROM turns \
             WHERE conversation_id = $1 AND created_at >= $2 AND created_at < $3",
        )
        .bind(conversation)
        .bind(to_millis(from))
        .bind(to_millis(until))
        .fetch_one(&self.pool)
        .await?;
        Ok(tokens)
    }

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()> {
        add_budget_in(&self.pool, day, tokens, cost_usd).await
    }

    fn shares_manychat_budget(&self) -> bool {
        true
    }

    async fn take_manychat_slot(&self, interval: Duration, burst: u32) -> Result<Option<Duration>> {
        let wait_seconds: f64 = sqlx::query_scalar("SELECT manychat_take_slot($1, $2)")
            .bind(interval)
            .bind(i32::try_from(burst).unwrap_or(i32::MAX))
            .fetch_one(&self.pool)
            .await?;
        Ok((wait_seconds > 0.0).then(|| Duration::from_secs_f64(wait_seconds)))
    }

    async fn hold_manychat_requests(
        &self,
        interval: Duration,
        burst: u32,
        wait: Duration,
    ) -> Result<()> {
        // A slot is free once the theoretical arrival is within `interval * (burst - 1)` of
        // now: pushing it to `now + wait` plus that tolerance frees none before `wait` passes.
        // One statement; the row lock orders it with the replicas' takes.
        sqlx::query(
            "UPDATE manychat_rate_bucket SET theoretical_arrival = \
             greatest(theoretical_arrival, clock_timestamp() + $1 + $2 * ($3 - 1)) WHERE id = 1",
        )
        .bind(wait)
        .bind(interval)
        .bind(i32::try_from(burst.max(1)).unwrap_or(i32::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool> {
        // The contact's advisory lock makes count-then-insert atomic across replicas; it is
        // released with the transaction.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended('manychat_flow_sends:' || $1, 0))",
        )
        .bind(subscriber_id.as_str())
        .execute(&mut *tx)
        .await?;
        let now = to_millis(now);
        // Every contact's counts older than an hour go: a subscriber id is personal data.
        sqlx::query("DELETE FROM manychat_flow_sends WHERE sent_at <= $1")
            .bind(now - chrono::Duration::hours(1))
            .execute(&mut *tx)
            .await?;
        let sent: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM manychat_flow_sends WHERE subscriber_id = $1")
                .bind(subscriber_id.as_str())
                .fetch_one(&mut *tx)
                .await?;
        if sent >= i64::from(per_hour) {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query("INSERT INTO manychat_flow_sends (subscriber_id, sent_at) VALUES ($1, $2)")
            .bind(subscriber_id.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }
}

pub(super) async fn bump_rate_in(
    tx: &mut sqlx::PgConnection,
    subscriber_id: &SubscriberId,
    window_start: DateTime<Utc>,
) -> Result<i64> {
    let window_start = to_millis(window_start);
    let count: i64 = sqlx::query_scalar(
        "INSERT INTO rate_counters (subscriber_id, window_start, count) VALUES ($1, $2, 1) \
         ON CONFLICT (subscriber_id, window_start) \
         DO UPDATE SET count = rate_counters.count + 1 RETURNING count",
    )
    .bind(subscriber_id.as_str())
    .bind(window_start)
    .fetch_one(&mut *tx)
    .await?;
    if count == 1 {
        // A new window began: the contact's older windows will never be read again, and a
        // subscriber id is personal data, so they go (once per window, not per turn).
        sqlx::query("DELETE FROM rate_counters WHERE subscriber_id = $1 AND window_start < $2")
            .bind(subscriber_id.as_str())
            .bind(window_start)
            .execute(&mut *tx)
            .await?;
    }
    Ok(count)
}

pub(super) async fn add_budget_in(
    db: impl sqlx::PgExecutor<'_>,
    day: NaiveDate,
    tokens: i64,
    cost_usd: f64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO budget_counters (day, tokens, cost_usd) VALUES ($1, $2, $3) \
         ON CONFLICT (day) DO UPDATE SET tokens = budget_counters.tokens + excluded.tokens, \
         cost_usd = budget_counters.cost_usd + excluded.cost_usd",
    )
    .bind(day)
    .bind(tokens)
    .bind(cost_usd)
    .execute(db)
    .await?;
    Ok(())
}
