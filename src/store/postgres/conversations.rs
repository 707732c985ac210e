//! PostgreSQL: conversations and their contact tokens (`ConversationStore`).

use super::*;
use crate::store::HoldRelease;

const CONVERSATION: Record<Conversation> = Record {
    columns: CONVERSATION_COLUMNS,
    from: conversation_from,
};

pub(super) fn conversation_from(row: &PgRow) -> Result<Conversation> {
    Ok(Conversation {
        id: row.try_get("id")?,
        subscriber_id: common::subscriber(row.try_get::<&str, _>("subscriber_id")?)?,
        channel: row.try_get("channel")?,
        turn_count: row.try_get("turn_count")?,
        escalated_at: row.try_get("escalated_at")?,
        last_message_at: row.try_get("last_message_at")?,
        token_hash: row.try_get("token_hash")?,
        previous_token_hash: row.try_get("previous_token_hash")?,
        token_issued_at: row.try_get("token_issued_at")?,
        token_generation: row.try_get("token_generation")?,
        offering: row.try_get("offering")?,
        opening_sent_at: row.try_get("opening_sent_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        hold_released_at: row.try_get("hold_released_at")?,
        hold_release_reason: row.try_get("hold_release_reason")?,
        hold_note_due: row.try_get("hold_note_due")?,
        fence_nonce: row.try_get("fence_nonce")?,
    })
}

impl PgStore {
    async fn find_conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        self.one_by(
            CONVERSATION,
            "FROM conversations WHERE subscriber_id = $1",
            subscriber_id.as_str(),
        )
        .await
    }
}

#[async_trait]
impl ConversationStore for PgStore {
    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation> {
        // The common case, a returning contact, is one read; the insert only on first contact.
        if let Some(found) = self.find_conversation_by_subscriber(subscriber_id).await? {
            return Ok(found);
        }
        // Two first messages racing: the loser's insert does nothing and both read the winner.
        sqlx::query(
            "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4) ON CONFLICT (subscriber_id) DO NOTHING",
        )
        .bind(crate::store::new_conversation_id())
        .bind(subscriber_id.as_str())
        .bind(channel)
        .bind(to_millis(now))
        .execute(&self.pool)
        .await?;
        self.find_conversation_by_subscriber(subscriber_id)
            .await?
            .ok_or_else(|| StoreError::Database("conversation vanished after insert".to_owned()))
    }

    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        self.find_conversation_by_subscriber(subscriber_id).await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        self.one_by(CONVERSATION, "FROM conversations WHERE id = $1", id)
            .await
    }

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
        set_escalated_in(&self.pool, id, at).await
    }

    async fn hold_with_handoff(
        &self,
        id: ConversationId,
        seen: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
        handoff: Option<&NewOutboxRow>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE conversations SET escalated_at = $1, updated_at = $1 \
             WHERE id = $2 AND escalated_at IS NOT DISTINCT FROM $3",
        )
        .bind(to_millis(at))
        .bind(id)
        .bind(seen)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        if let Some(row) = handoff {
            super::outbox::insert_outbox(&mut *tx, row, None, self.tickets.holder()).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn release_hold(
        &self,
        id: ConversationId,
        held_since: DateTime<Utc>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<bool> {
        // One statement: the release on the row and its line in the history.
        let done = sqlx::query(
            "WITH released AS (\
               UPDATE conversations SET hold_released_at = $1, hold_release_reason = $2, \
               hold_note_due = TRUE, updated_at = $1 \
               WHERE id = $3 AND escalated_at = $4 \
               AND (hold_released_at IS NULL OR hold_released_at < escalated_at) \
               RETURNING id, escalated_at) \
             INSERT INTO hold_releases (conversation_id, held_since, released_at, reason) \
             SELECT id, escalated_at, $1, $2 FROM released",
        )
        .bind(to_millis(at))
        .bind(reason)
        .bind(id)
        .bind(held_since)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn hold_releases(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<HoldRelease>> {
        let rows = sqlx::query(concat!(
            "SELECT held_since, released_at, reason FROM hold_releases \
                 WHERE released_at >= $1 AND released_at < $2 AND conversation_id NOT IN (",
            test_conversations!(),
            ") ORDER BY released_at, id"
        ))
        .bind(from)
        .bind(until)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(HoldRelease {
                    held_since: row.try_get("held_since")?,
                    released_at: row.try_get("released_at")?,
                    reason: row.try_get("reason")?,
                })
            })
            .collect()
    }

    async fn hold_noted(&self, id: ConversationId) -> Result<()> {
        sqlx::query("UPDATE conversations SET hold_note_due = FALSE WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn set_fence_nonce(&self, id: ConversationId, nonce: &str) -> Result<()> {
        sqlx::query("UPDATE conversations SET fence_nonce = $1 WHERE id = $2")
            .bind(nonce)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn held_contacts(&self, since: DateTime<Utc>) -> Result<i64> {
        Ok(sqlx::query_scalar(concat!(
            "SELECT COUNT(*) FROM conversations WHERE escalated_at > $1 \
             AND (hold_released_at IS NULL OR hold_released_at < escalated_at) AND NOT ",
            test_contact!()
        ))
        .bind(to_millis(since))
        .fetch_one(&self.pool)
        .await?)
    }

    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64> {
        // One statement: the right-hand sides read the row as it was, so the old current hash
        // becomes the previous one.
        let generation: Option<i64> = sqlx::query_scalar(
            "UPDATE conversations SET previous_token_hash = token_hash, token_hash = $1, \
             token_issued_at = $2, token_generation = token_generation + 1, updated_at = $2 \
             WHERE id = $3 RETURNING token_generation",
        )
        .bind(token_hash)
        .bind(to_millis(issued_at))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        generation.ok_or_else(|| not_found("conversation"))
    }

    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>> {
        self.all_by(
            CONVERSATION,
            "FROM conversations \
             WHERE token_hash IS NULL AND COALESCE(last_message_at, created_at) >= $1 \
             ORDER BY created_at, id",
            to_millis(since),
        )
        .await
    }
}

pub(super) async fn set_escalated_in(
    db: impl sqlx::PgExecutor<'_>,
    id: ConversationId,
    at: DateTime<Utc>,
) -> Result<()> {
    let done =
        sqlx::query("UPDATE conversations SET escalated_at = $1, updated_at = $1 WHERE id = $2")
            .bind(to_millis(at))
            .bind(id)
            .execute(db)
            .await?;
    changed(done, "conversation")
}
