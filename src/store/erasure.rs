//! Erasure and retention: forgetting one contact across [`CONTACT_TABLES`], emptying old turns'
//! text, deleting settled outbox rows (`ErasureStore`).

use super::*;

/// Erasure (one contact's rows) and retention (old text, settled outbox rows).
#[async_trait]
pub trait ErasureStore: Send + Sync + 'static {
    /// Erasure: deletes every row about one contact, from each table of [`CONTACT_TABLES`] in
    /// its order, in one transaction, and counts what each table lost (every count 0 for a
    /// contact never seen). Nothing else is touched: the day's budget counters hold no contact.
    async fn forget_contact(&self, subscriber_id: &SubscriberId) -> Result<Forgotten>;

    /// Retention: empties the text of at most `limit` turns created before `before` that still
    /// have text, and returns how many it emptied. The rest of each row stays (role, outcome,
    /// model, bound, actions, reads, tokens, cost, latency, times): what the measures need.
    /// Called again until it returns less than `limit`, so no call holds the database long.
    async fn clear_turn_text_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64>;

    /// Retention: deletes at most `limit` settled outbox rows (delivered or dead-lettered)
    /// created before `before` (their payload holds the reply's text; the turn keeps its
    /// record), and returns how many it deleted. Open rows are never touched.
    async fn delete_settled_outbox_before(&self, before: DateTime<Utc>, limit: i64) -> Result<u64>;

    /// Retention: deletes at most `limit` learning proposals (031) that cite a turn created
    /// before `before` (the analyst wrote them from that turn's text, which is gone or going),
    /// and returns how many it deleted. A playbook version keeps the text a person approved.
    async fn delete_proposals_citing_turns_before(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64>;
}

/// Every table that holds rows about one contact, with the column that names the contact
/// (`conversation_id`: the conversation's UUID; `subscriber_id`: the contact's id), in the
/// order `forget_contact` deletes from them (rows that reference a conversation before it).
///
/// A new table with a `conversation_id` or `subscriber_id` column belongs here, or a contact's
/// erasure would leave it behind: both backends delete from exactly this list, and a test per
/// backend reads the schema and fails on a table naming a contact that is missing from it.
pub const CONTACT_TABLES: &[(&str, &str)] = &[
    ("turns", "conversation_id"),
    ("outbox", "conversation_id"),
    ("nudges", "conversation_id"),
    ("window_closings", "conversation_id"),
    ("rate_counters", "subscriber_id"),
    ("manychat_flow_sends", "subscriber_id"),
    ("turn_tickets", "conversation_id"),
    ("hold_releases", "conversation_id"),
    ("conversations", "subscriber_id"),
];

/// What `forget_contact` removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Forgotten {
    /// The contact's conversation, when it had one.
    pub conversation_id: Option<ConversationId>,
    /// Rows deleted, per table of [`CONTACT_TABLES`], in its order.
    pub deleted: Vec<(&'static str, u64)>,
    /// Learning proposals (031) deleted because they cite one of the contact's turns: the
    /// analyst wrote them from its text. They name no contact, so they are not in
    /// [`CONTACT_TABLES`], and go in the same transaction.
    pub proposals: u64,
}

impl Forgotten {
    /// False when nothing was stored about the contact.
    pub fn found(&self) -> bool {
        self.conversation_id.is_some()
            || self.proposals > 0
            || self.deleted.iter().any(|(_, rows)| *rows > 0)
    }

    /// Rows deleted from `table` (0 for a table not listed).
    pub fn rows(&self, table: &str) -> u64 {
        self.deleted
            .iter()
            .find(|(name, _)| *name == table)
            .map_or(0, |(_, rows)| *rows)
    }
}
