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
    /// The handoff that holds: when the hold begun at `escalated_at` was released (none yet, or
    /// a release older than the last handoff: the hold in force is not released).
    pub hold_released_at: Option<DateTime<Utc>>,
    /// Why: `hold_expired`, `tag_removed` or `released` (`handoff::Release`).
    pub hold_release_reason: Option<String>,
    /// A release has not been told to the model yet: the next turn's prompt says a person had
    /// the conversation.
    pub hold_note_due: bool,
    /// C4: the contact fence's nonce for this conversation (`crate::fence`), stored on its first
    /// turn and replaced when the contact's text holds it; `None`: no turn has fenced yet.
    pub fence_nonce: Option<String>,
}

#[cfg(test)]
impl Conversation {
    /// A fixture of the unit tests: the contact's conversation as its first contact creates it,
    /// at `at`, on WhatsApp: no turn, no handoff, no token, no offering.
    pub(crate) fn first_contact(
        id: ConversationId,
        subscriber_id: SubscriberId,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            id,
            subscriber_id,
            channel: "whatsapp".into(),
            turn_count: 0,
            escalated_at: None,
            last_message_at: None,
            token_hash: None,
            previous_token_hash: None,
            token_issued_at: None,
            token_generation: 0,
            offering: None,
            opening_sent_at: None,
            created_at: at,
            updated_at: at,
            hold_released_at: None,
            hold_release_reason: None,
            hold_note_due: false,
            fence_nonce: None,
        }
    }
}

/// One released hold, as the history keeps it (`hold_releases`): when the handoff began it, when
/// and why it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRelease {
    pub held_since: DateTime<Utc>,
    pub released_at: DateTime<Utc>,
    /// `hold_expired`, `tag_removed` or `released` (`handoff::Release`).
    pub reason: String,
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

    /// A handoff made outside a turn (the owner's console): sets `escalated_at` to `at` only if
    /// it is still `seen` (what the caller read: `None`, never handed over), and queues
    /// `handoff` (the handoff's ManyChat actions) in the same write. False, and nothing
    /// written, when another writer handed the contact over first: two owners pressing Hold at
    /// once hold once and queue one handoff.
    async fn hold_with_handoff(
        &self,
        id: ConversationId,
        seen: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
        handoff: Option<&NewOutboxRow>,
    ) -> Result<bool>;

    /// The handoff that holds: records the release (at `at`, for `reason`) of the hold that began
    /// at `held_since` (the conversation's `escalated_at`), marks the note due and adds the
    /// release to the history (`hold_releases`), all in one write. False, and
    /// nothing written, when that hold is not the one in force (a newer handoff) or was released
    /// already.
    async fn release_hold(
        &self,
        id: ConversationId,
        held_since: DateTime<Utc>,
        at: DateTime<Utc>,
        reason: &str,
    ) -> Result<bool>;

    /// The releases recorded in `[from, until)` (by `released_at`), oldest first: the history
    /// `release_hold` writes, one row per released hold, for `manychat-agent report`. Reasons
    /// and times only, never the contact.
    async fn hold_releases(
        &self,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<HoldRelease>>;

    /// The release's note was given to the model (the first turn after a release).
    async fn hold_noted(&self, id: ConversationId) -> Result<()>;

    /// C4: stores the conversation's fence nonce (its first, or one that replaces a nonce the
    /// contact's text held). The nonce is 16 hex characters (`crate::fence::Fence::nonce`).
    async fn set_fence_nonce(&self, id: ConversationId, nonce: &str) -> Result<()>;

    /// Conversations handed over after `since` whose hold is not released: the contacts held now
    /// when `since` is `holdHours` ago.
    async fn held_contacts(&self, since: DateTime<Utc>) -> Result<i64>;

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
