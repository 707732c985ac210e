//! Conversations: one per contact, created on first contact, with its escalation time and its
//! contact tokens (`ConversationStore`).

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: ConversationId,
    pub subscriber_id: SubscriberId,
    pub channel: String,
    /// Messages counted by the turn cap (018); maintained by `record_turn` for bound user turns.
    pub turn_count: i64,
    pub escalated_at: Option<DateTime<Utc>>,
    pub last_message_at: Option<DateTime<Utc>>,
    pub token_hash: Option<String>,
    pub previous_token_hash: Option<String>,
    pub token_issued_at: Option<DateTime<Utc>>,
    pub token_generation: i64,
    pub offering: Option<String>,
    pub opening_sent_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A contact's conversation and its contact tokens.
#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
    /// The contact's conversation, created (with a fresh random UUID) on first contact.
    async fn conversation_for(
        &self,
        subscriber_id: &SubscriberId,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<Conversation>;

    async fn conversation(&self, id: ConversationId) -> Result<Option<Conversation>>;

    /// The contact's conversation if it has one (nothing is created).
    async fn conversation_by_subscriber(
        &self,
        subscriber_id: &SubscriberId,
    ) -> Result<Option<Conversation>>;

    async fn set_escalated(&self, id: ConversationId, at: DateTime<Utc>) -> Result<()>;

    /// 019: replace the current token hash, keeping the previous one, and bump the generation.
    async fn set_token(
        &self,
        id: ConversationId,
        token_hash: &str,
        issued_at: DateTime<Utc>,
    ) -> Result<i64>;

    /// Contacts with activity since `since` and no token, for `tokens backfill`.
    async fn conversations_without_token(&self, since: DateTime<Utc>) -> Result<Vec<Conversation>>;
}
