//! SQLite: conversations and their contact tokens (`ConversationStore`).

use super::*;
use crate::store::HoldRelease;

/// Columns in the order of `conversation_columns!`.
pub(super) fn conversation_from(row: &Row<'_>) -> Result<Conversation> {
    Ok(Conversation {
        id: uuid(text(row, 0)?)?,
        subscriber_id: common::subscriber(text(row, 1)?)?,
        channel: row.get(2)?,
        turn_count: row.get(3)?,
        escalated_at: opt_time(row.get(4)?)?,
        last_message_at: opt_time(row.get(5)?)?,
        token_hash: row.get(6)?,
        previous_token_hash: row.get(7)?,
        token_issued_at: opt_time(row.get(8)?)?,
        token_generation: row.get(9)?,
        offering: row.get(10)?,
        opening_sent_at: opt_time(row.get(11)?)?,
        created_at: time(row.get(12)?)?,
        updated_at: time(row.get(13)?)?,
        hold_released_at: opt_time(row.get(14)?)?,
        hold_release_reason: row.get(15)?,
        hold_note_due: row.get::<_, i64>(16)? != 0,
        fence_nonce: row.get(17)?,
    })
}

pub(super) fn conversation_by_subscriber(
    conn: &Db<'_>,
    subscriber: &str,
) -> Result<Option<Conversation>> {
    query_one(
        conn,
        CONVERSATION_BY_SUBSCRIBER,
        [subscriber],
        conversation_from,
    )
}

pub(super) fn set_escalated_in(conn: &Db<'_>, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
    update_one(
        conn,
        SET_ESCALATED,
        params![ms(at), ms(at), IdText::of(id)],
        "conversation",
    )
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>> {
        let subscriber = subscriber_id.as_str().to_owned();
        self.read(move |conn| conversation_by_subscriber(conn, &subscriber))
            .await
    }

    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation> {
        // The common case, a returning contact, is one read; the insert only on first contact.
        let subscriber = subscriber_id.as_str().to_owned();
        let lookup = subscriber.clone();
        if let Some(found) = self
            .read(move |conn| conversation_by_subscriber(conn, &lookup))
            .await?
        {
            return Ok(found);
        }
        // Two first messages racing: the loser's insert does nothing and both read the winner.
        let channel = channel.to_owned();
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO conversations (id, subscriber_id, channel, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT (subscriber_id) DO NOTHING",
            )?
            .execute(params![
                crate::store::new_conversation_id().to_string(),
                subscriber,
                channel,
                ms(now),
                ms(now)
            ])?;
            conversation_by_subscriber(conn, &subscriber)?.ok_or_else(|| {
                StoreError::Database("conversation vanished after insert".to_owned())
            })
        })
        .await
    }

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>> {
        self.read_query(
            query_one,
            CONVERSATION_BY_ID,
            [IdText::of(id)],
            conversation_from,
        )
        .await
    }

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()> {
        self.write(move |conn| set_escalated_in(conn, id, at)).await
    }

    async fn hold_with_handoff(
        &self,
        id: ConversationId,
        seen: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
        handoff: Option<&NewOutboxRow>,
    ) -> Result<bool> {
        let handoff = handoff.map(super::outbox::OutboxInsert::of).transpose()?;
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE conversations SET escalated_at = ?1, updated_at = ?1 \
                     WHERE id = ?2 AND escalated_at IS ?3",
                )?
                .execute(params![ms(at), IdText::of(id), seen.map(ms)])?;
            if changed == 0 {
                return Ok(false);
            }
            if let Some(row) = &handoff {
                row.insert(conn, None)?;
            }
            Ok(true)
        })
        .await
    }

    async fn release_hold(
        &self,
        id: ConversationId,
        held_since: DateTime<Utc>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<bool> {
        let reason = reason.to_owned();
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE conversations SET hold_released_at = ?, hold_release_reason = ?, \
                     hold_note_due = 1, updated_at = ? \
                     WHERE id = ? AND escalated_at = ? \
                     AND (hold_released_at IS NULL OR hold_released_at < escalated_at)",
                )?
                .execute(params![
                    ms(at),
                    reason,
                    ms(at),
                    IdText::of(id),
                    ms(held_since)
                ])?;
            if changed == 0 {
                return Ok(false);
            }
            conn.prepare_cached(
                "INSERT INTO hold_releases (conversation_id, held_since, released_at, reason) \
                 VALUES (?, ?, ?, ?)",
            )?
            .execute(params![IdText::of(id), ms(held_since), ms(at), reason])?;
            Ok(true)
        })
        .await
    }

    async fn hold_releases(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<HoldRelease>> {
        self.read(move |conn| {
            query_all(
                conn,
                concat!(
                    "SELECT held_since, released_at, reason FROM hold_releases \
                     WHERE released_at >= ? AND released_at < ? AND conversation_id NOT IN (",
                    test_conversations!(),
                    ") ORDER BY released_at, id"
                ),
                [ms(from), ms(until)],
                |row| {
                    Ok(HoldRelease {
                        held_since: time(row.get(0)?)?,
                        released_at: time(row.get(1)?)?,
                        reason: row.get(2)?,
                    })
                },
            )
        })
        .await
    }

    async fn hold_noted(&self, id: ConversationId) -> Result<()> {
        self.write(move |conn| {
            conn.prepare_cached("UPDATE conversations SET hold_note_due = 0 WHERE id = ?")?
                .execute([IdText::of(id)])?;
            Ok(())
        })
        .await
    }

    async fn set_fence_nonce(&self, id: ConversationId, nonce: &str) -> Result<()> {
        let nonce = nonce.to_owned();
        self.write(move |conn| {
            conn.prepare_cached("UPDATE conversations SET fence_nonce = ? WHERE id = ?")?
                .execute(params![nonce, IdText::of(id)])?;
            Ok(())
        })
        .await
    }

    async fn held_contacts(&self, since: DateTime<Utc>) -> Result<i64> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(concat!(
                    "SELECT COUNT(*) FROM conversations WHERE escalated_at > ? \
                     AND (hold_released_at IS NULL OR hold_released_at < escalated_at) AND NOT ",
                    test_contact!()
                ))?
                .query_row([ms(since)], |row| row.get::<_, i64>(0))?)
        })
        .await
    }

    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64> {
        // One statement: the right-hand sides read the row as it was, so the old current hash
        // becomes the previous one.
        let token_hash = token_hash.to_owned();
        self.write(move |conn| {
            query_one(
                conn,
                "UPDATE conversations SET previous_token_hash = token_hash, token_hash = ?, \
                 token_issued_at = ?, token_generation = token_generation + 1, \
                 updated_at = ? WHERE id = ? RETURNING token_generation",
                params![token_hash, ms(issued_at), ms(issued_at), IdText::of(id)],
                |row| Ok(row.get::<_, i64>(0)?),
            )?
            .ok_or_else(|| not_found("conversation"))
        })
        .await
    }

    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>> {
        self.read_query(
            query_all,
            CONVERSATIONS_WITHOUT_TOKEN,
            [ms(since)],
            conversation_from,
        )
        .await
    }
}

/// The conversation with this id.
const CONVERSATION_BY_ID: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    " FROM conversations WHERE id = ?"
);

/// The conversations without a contact token active since `?`, oldest first.
const CONVERSATIONS_WITHOUT_TOKEN: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    " FROM conversations \
     WHERE token_hash IS NULL AND COALESCE(last_message_at, created_at) >= ? \
     ORDER BY created_at, id"
);
