//! SQLite: counters (`CounterStore`): the hourly rate windows, the day's budget, the flow sends.
//! The shared ManyChat bucket is Postgres's alone.

use super::*;

pub(super) fn day_key(day: NaiveDate) -> String {
    // `Display` is ISO 8601 (`YYYY-MM-DD`) for every year a budget can fall in, written without
    // parsing a format string on every call (the database thread reads and writes a day's
    // spend on every turn).
    day.to_string()
}

/// Counts one message in the contact's hourly window. No RETURNING: SQLite buffers a RETURNING
/// statement's rows in a temporary B-tree, opened and torn down on every call; the caller that
/// needs the count reads it with `rate_count_in`.
pub(super) fn bump_rate_in(
    conn: &Db<'_>,
    subscriber: &str,
    window_start: DateTime<Utc>,
) -> Result<()> {
    let counted = conn
        .prepare_cached(COUNT_RATE)?
        .execute(params![subscriber, ms(window_start)])?;
    if counted == 0 {
        conn.prepare_cached(BEGIN_RATE_WINDOW)?
            .execute(params![subscriber, ms(window_start)])?;
        // A new window began: the contact's older windows will never be read again, and a
        // subscriber id is personal data, so they go (once per window, not per turn).
        conn.prepare_cached(DROP_OLD_RATE_WINDOWS)?
            .execute(params![subscriber, ms(window_start)])?;
    }
    Ok(())
}

pub(super) fn rate_count_in(
    conn: &Db<'_>,
    subscriber: &str,
    window_start: DateTime<Utc>,
) -> Result<i64> {
    Ok(query_one(
        conn,
        RATE_COUNT,
        params![subscriber, ms(window_start)],
        |row| Ok(row.get(0)?),
    )?
    .unwrap_or(0))
}

/// One conversation's tokens in a time range (`turns_conversation_created` serves it).
const CONTACT_TOKENS: &str = "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM turns \
    WHERE conversation_id = ? AND created_at >= ? AND created_at < ?";

pub(super) fn budget_in(conn: &Db<'_>, day: NaiveDate) -> Result<BudgetUsage> {
    Ok(query_one(conn, BUDGET, [day_key(day)], |row| {
        Ok(BudgetUsage {
            tokens: row.get(0)?,
            cost_usd: row.get(1)?,
        })
    })?
    .unwrap_or_default())
}

pub(super) fn add_budget_in(conn: &Db<'_>, charge: BudgetCharge) -> Result<()> {
    conn.prepare_cached(ADD_BUDGET)?.execute(params![
        day_key(charge.day),
        charge.tokens,
        charge.cost_usd
    ])?;
    Ok(())
}

#[async_trait]
impl CounterStore for SqliteStore {
    fn reopened(&self) -> bool {
        self.reopened
    }

    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.write(move |conn| {
            bump_rate_in(conn, &subscriber, window_start)?;
            rate_count_in(conn, &subscriber, window_start)
        })
        .await
    }

    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.read(move |conn| rate_count_in(conn, &subscriber, window_start))
            .await
    }

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage> {
        self.read(move |conn| budget_in(conn, day)).await
    }

    async fn contact_tokens(
        &self,
        conversation: ConversationId,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<i64> {
        self.read(move |conn| {
            Ok(query_one(
                conn,
                CONTACT_TOKENS,
                params![IdText::of(conversation), ms(from), ms(until)],
                |row| Ok(row.get(0)?),
            )?
            .unwrap_or(0))
        })
        .await
    }

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()> {
        let charge = BudgetCharge {
            day,
            tokens,
            cost_usd,
        };
        self.write(move |conn| add_budget_in(conn, charge)).await
    }

    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool> {
        let subscriber = subscriber_id.as_str().to_owned();
        // One writer thread: the count and the insert cannot interleave with another's.
        self.write(move |conn| {
            let hour_ago = ms(now - chrono::Duration::hours(1));
            // Every contact's counts older than an hour go: a subscriber id is personal data.
            conn.execute(
                "DELETE FROM manychat_flow_sends WHERE sent_at <= ?",
                params![hour_ago],
            )?;
            let sent: i64 = conn.query_row(
                "SELECT COUNT(*) FROM manychat_flow_sends WHERE subscriber_id = ?",
                params![subscriber],
                |r| r.get(0),
            )?;
            if sent >= i64::from(per_hour) {
                return Ok(false);
            }
            conn.execute(
                "INSERT INTO manychat_flow_sends (subscriber_id, sent_at) VALUES (?, ?)",
                params![subscriber, ms(now)],
            )?;
            Ok(true)
        })
        .await
    }
}
