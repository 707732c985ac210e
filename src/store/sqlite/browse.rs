//! SQLite: the owner's console views (`BrowseStore`), each one statement read through an index.

use super::*;
use crate::store::browse::{LAST_UUID, first_page_time, page_limit};
use crate::store::{BrowseStore, BrowsedTurn, ConversationsPage, HeldContact, TurnsPage};

/// Newest last message first after the cursor `(?1, ?2)`, through `conversations_recent`;
/// `?3` = 1 lists the test contacts too.
pub(super) const RECENT_CONVERSATIONS: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    " FROM conversations WHERE last_message_at IS NOT NULL \
     AND (last_message_at, id) < (?1, ?2) \
     AND (?3 OR NOT ",
    test_contact!(),
    ") ORDER BY last_message_at DESC, id DESC LIMIT ?4"
);

/// A conversation's turns newest first after the cursor `(?2, ?3)`, through
/// `turns_conversation_created`.
pub(super) const CONVERSATION_TURNS: &str = concat!(
    "SELECT ",
    turn_columns!(),
    ", plugin_reads, steps, knowledge FROM turns WHERE conversation_id = ?1 AND (created_at, seq) < (?2, ?3) \
     ORDER BY created_at DESC, seq DESC LIMIT ?4"
);

/// Held now (the condition of `held_contacts`), newest handoff first through
/// `conversations_escalated_at`, with the newest escalation reason recorded since the handoff
/// (through `turns_conversation_created`).
pub(super) const HELD_NOW: &str = concat!(
    "SELECT ",
    conversation_columns!(),
    ", (SELECT t.escalation_reason FROM turns t WHERE t.conversation_id = conversations.id \
        AND t.created_at >= conversations.escalated_at AND t.escalation_reason IS NOT NULL \
        ORDER BY t.created_at DESC, t.seq DESC LIMIT 1) \
     FROM conversations WHERE escalated_at > ?1 \
     AND (hold_released_at IS NULL OR hold_released_at < escalated_at) \
     ORDER BY escalated_at DESC LIMIT ?2"
);

#[async_trait]
impl BrowseStore for SqliteStore {
    async fn recent_conversations(&self, page: ConversationsPage) -> Result<Vec<Conversation>> {
        let (at, id) = page.after.unwrap_or((first_page_time(), LAST_UUID));
        self.read(move |conn| {
            query_all(
                conn,
                RECENT_CONVERSATIONS,
                params![
                    ms(at),
                    IdText::of(id),
                    page.test_contacts,
                    page_limit(page.limit)
                ],
                conversations::conversation_from,
            )
        })
        .await
    }

    async fn conversation_turns(
        &self,
        id: ConversationId,
        page: TurnsPage,
    ) -> Result<Vec<BrowsedTurn>> {
        let (at, seq) = page.after.unwrap_or((first_page_time(), i64::MAX));
        self.read(move |conn| {
            query_all(
                conn,
                CONVERSATION_TURNS,
                params![IdText::of(id), ms(at), seq, page_limit(page.limit)],
                |row| {
                    let reads: Option<String> = row.get(21)?;
                    Ok(BrowsedTurn {
                        turn: turns::turn_from(row)?,
                        plugin_reads: reads.as_deref().map(json).transpose()?,
                        steps: row.get(22)?,
                        knowledge: row
                            .get::<_, Option<String>>(23)?
                            .as_deref()
                            .map(json)
                            .transpose()?,
                    })
                },
            )
        })
        .await
    }

    async fn held_now(&self, since: DateTime<Utc>, limit: u32) -> Result<Vec<HeldContact>> {
        self.read(move |conn| {
            query_all(
                conn,
                HELD_NOW,
                params![ms(since), page_limit(limit)],
                |row| {
                    Ok(HeldContact {
                        conversation: conversations::conversation_from(row)?,
                        reason: row.get(18)?,
                    })
                },
            )
        })
        .await
    }
}
