//! SQLite: the outbox (`OutboxStore`): enqueueing, claiming under a lease, settling, the backlog.

use super::*;

/// Columns in the order of `outbox_columns!`.
pub(super) fn outbox_from(row: &Row<'_>) -> Result<OutboxRow> {
    Ok(OutboxRow {
        id: row.get(0)?,
        conversation_id: uuid(text(row, 1)?)?,
        subscriber_id: common::subscriber(text(row, 2)?)?,
        kind: common::outbox_kind(text(row, 3)?)?,
        payload: json(text(row, 4)?)?,
        status: common::outbox_status(text(row, 5)?)?,
        attempts: row.get(6)?,
        next_attempt_at: time(row.get(7)?)?,
        last_error: row.get(8)?,
        lease_until: opt_time(row.get(9)?)?,
        created_at: time(row.get(10)?)?,
        delivered_at: opt_time(row.get(11)?)?,
        messages_delivered: row.get(12)?,
        trigger_timeouts: row.get(13)?,
    })
}

/// An outbox row ready for the database thread (its payload serialised on the caller's side).
pub(super) struct OutboxInsert {
    conversation_id: IdText,
    subscriber: String,
    kind: OutboxKind,
    payload: String,
    next_attempt_at: i64,
    created_at: i64,
}

impl OutboxInsert {
    pub(super) fn of(row: &NewOutboxRow) -> Result<Self> {
        Ok(Self {
            conversation_id: IdText::of(row.conversation_id),
            subscriber: row.subscriber_id.as_str().to_owned(),
            kind: row.kind,
            payload: json_text(&row.payload)?,
            next_attempt_at: ms(row.next_attempt_at),
            created_at: ms(row.created_at),
        })
    }

    /// Inserts the row; a reply or handoff row without a `turnId` gets `turn` (see `Exchange`).
    pub(super) fn insert(&self, conn: &Db<'_>, turn: Option<i64>) -> Result<i64> {
        // The new id from the connection rather than RETURNING, which buffers its row in a
        // temporary B-tree.
        conn.prepare_cached(
            "INSERT INTO outbox (conversation_id, subscriber_id, kind, payload, status, \
             next_attempt_at, created_at) VALUES (?1, ?2, ?3, \
             CASE WHEN ?3 <> 'contact_token' AND ?7 IS NOT NULL \
                  AND json_extract(?4, '$.turnId') IS NULL \
             THEN json_set(?4, '$.turnId', ?7) ELSE ?4 END, 'pending', ?5, ?6)",
        )?
        .execute(params![
            self.conversation_id,
            self.subscriber,
            self.kind.as_str(),
            self.payload,
            self.next_attempt_at,
            self.created_at,
            turn,
        ])?;
        Ok(conn.last_insert_rowid())
    }
}

pub(super) fn pending_replies_in(conn: &Db<'_>, conversation_id: ConversationId) -> Result<i64> {
    Ok(conn
        .prepare_cached(QUEUED_REPLIES)?
        .query_row([IdText::of(conversation_id)], |row| row.get(0))?)
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn enqueue(&self, row: &NewOutboxRow) -> Result<i64> {
        let row = OutboxInsert::of(row)?;
        self.write(move |conn| row.insert(conn, None)).await
    }

    async fn claim_outbox(&self, rules: ClaimRules) -> Result<Vec<OutboxRow>> {
        // A write: the group transaction began IMMEDIATE, so SQLite's write lock is held before
        // this reads, and a second worker on the same file waits (busy_timeout) and then sees
        // these rows as `delivering`. The `IN (SELECT …)` is evaluated once, before any row
        // changes.
        let mut claimed = self
            .write(move |conn| {
                query_all(
                    conn,
                    concat!(
                        "UPDATE outbox SET status = 'delivering', lease_until = ?1, \
                         attempts = attempts + 1 \
                         WHERE id IN (\
                             SELECT o.id FROM outbox o \
                             WHERE ((o.status = 'pending' AND o.next_attempt_at <= ?2) \
                                    OR (o.status = 'delivering' AND o.lease_until <= ?2)) \
                               AND (o.kind = 'contact_token' OR \
                                    NOT EXISTS (SELECT 1 FROM outbox p \
                                        WHERE p.conversation_id = o.conversation_id \
                                          AND p.kind = 'reply' AND p.id < o.id \
                                          AND p.status IN ('pending', 'delivering'))) \
                               AND (o.kind <> 'reply' OR \
                                    NOT EXISTS (SELECT 1 FROM outbox d \
                                        WHERE d.conversation_id = o.conversation_id \
                                          AND d.kind = 'reply' AND d.status = 'delivered' \
                                          AND d.delivered_at > ?3)) \
                             ORDER BY (o.kind = 'contact_token'), o.id LIMIT ?4) \
                         RETURNING ",
                        outbox_columns!()
                    ),
                    params![
                        ms(after(rules.now, rules.lease)),
                        ms(rules.now),
                        ms(before(rules.now, rules.reply_gap)),
                        rules.limit.max(0)
                    ],
                    outbox_from,
                )
            })
            .await?;
        // RETURNING has no defined order.
        claimed.sort_by_key(|row| (row.kind == OutboxKind::ContactToken, row.id));
        Ok(claimed)
    }

    async fn claim_outbox_row(
        &self,
        id: i64,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<OutboxRow>> {
        self.write(move |conn| {
            query_one(
                conn,
                concat!(
                    "UPDATE outbox SET status = 'delivering', lease_until = ?1, \
                     attempts = attempts + 1 WHERE id = ?2 AND status = 'pending' RETURNING ",
                    outbox_columns!()
                ),
                params![ms(after(now, lease)), id],
                outbox_from,
            )
        })
        .await
    }

    async fn pending_outbox(&self, kind: OutboxKind) -> Result<Vec<OutboxRow>> {
        self.read_query(query_all, PENDING_OF_KIND, [kind.as_str()], outbox_from)
            .await
    }

    async fn renew_outbox_leases(&self, ids: &[i64], lease_until: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // One statement for every row the worker holds, the ids as a JSON array.
        let ids = Value::from(ids.to_vec()).to_string();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE outbox SET lease_until = ? WHERE status = 'delivering' \
                 AND id IN (SELECT value FROM json_each(?))",
            )?
            .execute(params![ms(lease_until), ids])?;
            Ok(())
        })
        .await
    }

    async fn record_outbox_progress(
        &self,
        id: i64,
        messages_delivered: i32,
        trigger_timeouts: i32,
    ) -> Result<()> {
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET messages_delivered = ?, trigger_timeouts = ? WHERE id = ?",
                params![messages_delivered, trigger_timeouts, id],
                "outbox row",
            )
        })
        .await
    }

    async fn record_outbox_actions(
        &self,
        id: i64,
        actions: &Value,
        trigger_timeouts: i32,
    ) -> Result<()> {
        let actions = actions.to_string();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET payload = json_set(payload, '$.actions', json(?)), \
                 trigger_timeouts = ? WHERE id = ?",
                params![actions, trigger_timeouts, id],
                "outbox row",
            )
        })
        .await
    }

    async fn mark_delivered(&self, id: i64, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'delivered', delivered_at = ?, lease_until = NULL, \
                 payload = CASE WHEN kind = 'contact_token' THEN json_remove(payload, '$.token') \
                 ELSE payload END WHERE id = ?",
                params![ms(at), id],
                "outbox row",
            )
        })
        .await
    }

    async fn settle_contact_tokens(
        &self,
        conversation_id: ConversationId,
        generation: i64,
        at: DateTime<Utc>,
    ) -> Result<u64> {
        self.write(move |conn| {
            let settled = conn
                .prepare_cached(
                    "UPDATE outbox SET status = 'delivered', delivered_at = ?3, \
                     lease_until = NULL, payload = json_remove(payload, '$.token') \
                     WHERE conversation_id = ?1 AND kind = 'contact_token' \
                     AND status = 'pending' AND json_extract(payload, '$.generation') <= ?2",
                )?
                .execute(params![IdText::of(conversation_id), generation, ms(at)])?;
            Ok(settled as u64)
        })
        .await
    }

    async fn mark_retry(&self, id: i64, next_attempt_at: DateTime<Utc>, error: &str) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'pending', next_attempt_at = ?, last_error = ?, \
                 lease_until = NULL WHERE id = ?",
                params![ms(next_attempt_at), error, id],
                "outbox row",
            )
        })
        .await
    }

    async fn mark_failed(&self, id: i64, error: &str, at: DateTime<Utc>) -> Result<()> {
        let error = bounded_error(error).to_owned();
        self.write(move |conn| {
            update_one(
                conn,
                "UPDATE outbox SET status = 'failed', last_error = ?, failed_at = ?, \
                 lease_until = NULL, \
                 payload = CASE WHEN kind = 'contact_token' THEN json_remove(payload, '$.token') \
                 ELSE payload END WHERE id = ?",
                params![error, ms(at), id],
                "outbox row",
            )
        })
        .await
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxRow>> {
        self.read_query(query_one, OUTBOX_BY_ID, [id], outbox_from)
            .await
    }

    async fn outbox_backlog(
        &self,
        now: DateTime<Utc>,
        count_cap: i64,
    ) -> Result<crate::store::OutboxBacklog> {
        self.read(move |conn| {
            let rows = conn
                .prepare_cached(OUTBOX_BACKLOG_ROWS)?
                .query_row([count_cap], |r| r.get::<_, i64>(0))?;
            let oldest = conn
                .prepare_cached(OUTBOX_OLDEST_OPEN)?
                .query_row([], |r| r.get::<_, Option<i64>>(0))?;
            let oldest_due_at = match oldest {
                Some(raw) if raw <= ms(now) => Some(time(raw)?),
                _ => None,
            };
            Ok(crate::store::OutboxBacklog {
                rows,
                oldest_due_at,
            })
        })
        .await
    }

    async fn pending_replies(&self, conversation_id: ConversationId) -> Result<i64> {
        self.read(move |conn| pending_replies_in(conn, conversation_id))
            .await
    }

    async fn outbox_rows(&self) -> Result<Vec<OutboxRow>> {
        self.read(|conn| {
            query_all(
                conn,
                concat!("SELECT ", outbox_columns!(), " FROM outbox ORDER BY id"),
                [],
                outbox_from,
            )
        })
        .await
    }
}

/// Open outbox rows, at most ?1 of them read (`outbox_status_due`).
pub(super) const OUTBOX_BACKLOG_ROWS: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM outbox \
     WHERE status IN ('pending', 'delivering') LIMIT ?1)";
/// The earliest due time of an open row, one index seek per status.
pub(super) const OUTBOX_OLDEST_OPEN: &str = "SELECT MIN(due) FROM ( \
     SELECT MIN(next_attempt_at) AS due FROM outbox WHERE status = 'pending' \
     UNION ALL SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'delivering')";

/// The pending rows of one kind, in order.
const PENDING_OF_KIND: &str = concat!(
    "SELECT ",
    outbox_columns!(),
    " FROM outbox WHERE status = 'pending' AND kind = ? ORDER BY id"
);

/// The outbox row with this id.
const OUTBOX_BY_ID: &str = concat!("SELECT ", outbox_columns!(), " FROM outbox WHERE id = ?");
