//! PostgreSQL: the owner's console views (`BrowseStore`), each one statement read through an
//! index (see the SQLite statements).

use super::*;
use crate::store::browse::{LAST_UUID, first_page_time, page_limit};
use crate::store::{BrowseStore, BrowsedTurn, ConversationsPage, HeldContact, TurnsPage};

#[async_trait]
impl BrowseStore for PgStore {
    async fn recent_conversations(&self, page: ConversationsPage) -> Result<Vec<Conversation>> {
        let (at, id) = page.after.unwrap_or((first_page_time(), LAST_UUID));
        let sql = format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE last_message_at IS NOT NULL \
             AND (last_message_at, id) < ($1, $2) AND ($3 OR NOT {}) \
             ORDER BY last_message_at DESC, id DESC LIMIT $4",
            test_contact!()
        );
        let rows = sqlx::query(&sql)
            .bind(to_millis(at))
            .bind(id)
            .bind(page.test_contacts)
            .bind(page_limit(page.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(conversations::conversation_from).collect()
    }

    async fn conversation_turns(
        &self,
        id: ConversationId,
        page: TurnsPage,
    ) -> Result<Vec<BrowsedTurn>> {
        let (at, seq) = page.after.unwrap_or((first_page_time(), i64::MAX));
        let sql = format!(
            "SELECT {TURN_COLUMNS}, plugin_reads, steps, knowledge FROM turns WHERE conversation_id = $1 \
             AND (created_at, seq) < ($2, $3) ORDER BY created_at DESC, seq DESC LIMIT $4"
        );
        let rows = sqlx::query(&sql)
            .bind(id)
            .bind(to_millis(at))
            .bind(seq)
            .bind(page_limit(page.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let reads: Option<Json<Value>> = row.try_get("plugin_reads")?;
                Ok(BrowsedTurn {
                    turn: turns::turn_from(row)?,
                    plugin_reads: reads.map(|Json(value)| value),
                    steps: row.try_get("steps")?,
                    knowledge: row
                        .try_get::<Option<Json<Value>>, _>("knowledge")?
                        .map(|Json(value)| value),
                })
            })
            .collect()
    }

    async fn held_now(&self, since: DateTime<Utc>, limit: u32) -> Result<Vec<HeldContact>> {
        let sql = format!(
            "SELECT {CONVERSATION_COLUMNS}, \
             (SELECT t.escalation_reason FROM turns t WHERE t.conversation_id = c.id \
                AND t.created_at >= c.escalated_at AND t.escalation_reason IS NOT NULL \
                ORDER BY t.created_at DESC, t.seq DESC LIMIT 1) AS reason \
             FROM conversations c WHERE escalated_at > $1 \
             AND (hold_released_at IS NULL OR hold_released_at < escalated_at) \
             ORDER BY escalated_at DESC LIMIT $2"
        );
        let rows = sqlx::query(&sql)
            .bind(to_millis(since))
            .bind(page_limit(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(HeldContact {
                    conversation: conversations::conversation_from(row)?,
                    reason: row.try_get("reason")?,
                })
            })
            .collect()
    }
}
