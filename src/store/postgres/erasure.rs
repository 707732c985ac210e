//! PostgreSQL: erasure and retention (`ErasureStore`): a contact's rows from every table of
//! `CONTACT_TABLES`, old turns' text, settled outbox rows.

use super::*;

#[async_trait]
impl ErasureStore for PgStore {
    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten> {
        // One transaction: the contact is erased whole or not at all. The conversation row is
        // locked first, so a first message racing the erasure waits for it.
        let mut tx = self.pool.begin().await?;
        let conversation_id: Option<ConversationId> =
            sqlx::query_scalar("SELECT id FROM conversations WHERE subscriber_id = $1 FOR UPDATE")
                .bind(subscriber_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        // The learning proposals citing one of its turns, before the turns go.
        let proposals = match conversation_id {
            Some(id) => sqlx::query(
                "DELETE FROM insight_proposals p WHERE EXISTS \
                     (SELECT 1 FROM jsonb_array_elements_text(p.turn_ids) AS cited(id) \
                      JOIN turns t ON t.id::text = cited.id WHERE t.conversation_id = $1)",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected(),
            None => 0,
        };
        let mut deleted = Vec::with_capacity(CONTACT_TABLES.len());
        for &(table, column) in CONTACT_TABLES {
            // Both names come from the constant list, never from input.
            let sql = format!("DELETE FROM {table} WHERE {column} = $1");
            let done = match (column, conversation_id) {
                ("conversation_id", Some(id)) => {
                    Some(sqlx::query(&sql).bind(id).execute(&mut *tx).await?)
                }
                ("conversation_id", None) => None,
                _ => Some(
                    sqlx::query(&sql)
                        .bind(subscriber_id.as_str())
                        .execute(&mut *tx)
                        .await?,
                ),
            };
            deleted.push((table, done.map_or(0, |done| done.rows_affected())));
        }
        tx.commit().await?;
        Ok(Forgotten {
            conversation_id,
            deleted,
            proposals,
        })
    }

    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET text = '' WHERE id IN \
             (SELECT id FROM turns WHERE text <> '' AND created_at < $1 LIMIT $2)",
        )
        .bind(to_millis(before))
        .bind(limit.max(0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64> {
        // A settled row's `next_attempt_at` is never before its creation, so it bounds the scan
        // through `outbox_status_due`.
        let done = sqlx::query(
            "DELETE FROM outbox WHERE id IN \
             (SELECT id FROM outbox WHERE status IN ('delivered', 'failed') \
              AND next_attempt_at < $1 AND created_at < $1 LIMIT $2)",
        )
        .bind(to_millis(before))
        .bind(limit.max(0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn delete_proposals_citing_turns_before(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64> {
        let done = sqlx::query(
            "DELETE FROM insight_proposals WHERE id IN \
             (SELECT p.id FROM insight_proposals p WHERE EXISTS \
              (SELECT 1 FROM jsonb_array_elements_text(p.turn_ids) AS cited(id) \
               JOIN turns t ON t.id::text = cited.id WHERE t.created_at < $1) LIMIT $2)",
        )
        .bind(to_millis(before))
        .bind(limit.max(0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
