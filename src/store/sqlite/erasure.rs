//! SQLite: erasure and retention (`ErasureStore`): a contact's rows from every table of
//! `CONTACT_TABLES`, old turns' text, settled outbox rows.

use super::*;

#[async_trait]
impl ErasureStore for SqliteStore {
    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten> {
        let subscriber = subscriber_id.as_str().to_owned();
        // One job, one savepoint: the contact is erased whole or not at all. The newest turns'
        // ids may be given again (`NEXT_TURN_ID`): what referred to them (the contact's outbox
        // rows) goes with them.
        self.write(move |conn| {
            let conversation_id = conversation_by_subscriber(conn, &subscriber)?.map(|c| c.id);
            // Before the turns they cite go.
            let proposals = match conversation_id {
                Some(id) => conn.execute(DELETE_PROPOSALS_OF_CONVERSATION, [IdText::of(id)])?,
                None => 0,
            } as u64;
            let mut deleted = Vec::with_capacity(CONTACT_TABLES.len());
            for &(table, column) in CONTACT_TABLES {
                // Both names come from the constant list, never from input.
                let sql = format!("DELETE FROM {table} WHERE {column} = ?");
                let rows = match (column, conversation_id) {
                    ("conversation_id", Some(id)) => conn.execute(&sql, [IdText::of(id)])?,
                    ("conversation_id", None) => 0,
                    _ => conn.execute(&sql, [subscriber.as_str()])?,
                };
                deleted.push((table, rows as u64));
            }
            Ok(Forgotten {
                conversation_id,
                deleted,
                proposals,
            })
        })
        .await
    }

    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        self.retention_batch(CLEAR_OLD_TURN_TEXT, before, limit)
            .await
    }

    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        self.retention_batch(DELETE_OLD_SETTLED_OUTBOX, before, limit)
            .await
    }

    async fn delete_proposals_citing_turns_before(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64> {
        self.retention_batch(DELETE_OLD_PROPOSALS, before, limit)
            .await
    }
}

impl SqliteStore {
    /// One retention batch: `sql` (the period's end, then the batch size) run once; the rows
    /// it changed.
    async fn retention_batch(
        &self,
        sql: &'static str,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64> {
        let (before, limit) = (ms(before), limit.max(0));
        self.write(move |conn| {
            let changed = conn.prepare_cached(sql)?.execute(params![before, limit])?;
            Ok(changed as u64)
        })
        .await
    }
}

/// Retention: the oldest turns that still have text, emptied (`turns_text_kept` finds them).
pub(super) const CLEAR_OLD_TURN_TEXT: &str = "UPDATE turns SET text = '' WHERE id IN \
     (SELECT id FROM turns WHERE text <> '' AND created_at < ?1 LIMIT ?2)";

/// Erasure: the learning proposals citing one of a conversation's turns (`turn_ids` holds
/// their ids as strings).
pub(super) const DELETE_PROPOSALS_OF_CONVERSATION: &str = "DELETE FROM insight_proposals \
     WHERE EXISTS (SELECT 1 FROM json_each(insight_proposals.turn_ids) AS cited \
     JOIN turns ON CAST(turns.id AS TEXT) = cited.value WHERE turns.conversation_id = ?1)";

/// Retention: the learning proposals citing a turn created before the period.
pub(super) const DELETE_OLD_PROPOSALS: &str = "DELETE FROM insight_proposals WHERE id IN \
     (SELECT p.id FROM insight_proposals AS p WHERE EXISTS \
      (SELECT 1 FROM json_each(p.turn_ids) AS cited \
       JOIN turns ON CAST(turns.id AS TEXT) = cited.value WHERE turns.created_at < ?1) \
      LIMIT ?2)";

/// Retention: settled outbox rows created before the period. A settled row's `next_attempt_at`
/// is never before its creation, so it bounds the scan through `outbox_status_due`.
pub(super) const DELETE_OLD_SETTLED_OUTBOX: &str = "DELETE FROM outbox WHERE id IN \
     (SELECT id FROM outbox WHERE status IN ('delivered', 'failed') \
      AND next_attempt_at < ?1 AND created_at < ?1 LIMIT ?2)";
