//! The sales record: the stored offering and the agent turns' action records a selling turn
//! reads, and the opening's one claim per contact (`SalesStore`).

use super::*;

/// What a selling turn reads and the opening's claim.
#[async_trait]
pub trait SalesStore: Send + Sync + 'static {
    /// The sales funnel: what the server knows of a contact from its own records, in
    /// one read: the offering stored on the conversation with when it was stored, and the
    /// action record of every bound agent turn that holds one (oldest first; `[]` records left
    /// out). An unbound turn's writes are never the contact's record (019).
    async fn sales_record(&self, conversation_id: ConversationId) -> Result<SalesRecord>;

    /// 028: stores the contact's offering (from a token-bound request, or catching up with a
    /// performed write to the offering field) and when.
    async fn set_offering(
        &self,
        id: ConversationId,
        offering: &str,
        at: DateTime<Utc>,
    ) -> Result<()>;

    /// 032 A / 034: claims the contact's opening flow at `at`, in one conditional update of the
    /// conversation row (`opening_sent_at`, set only while it is empty): whether this call
    /// claimed it. Of turns racing to send the opening exactly one gets `true`, on every backend
    /// and across replicas; the claim is never given back, so the opening goes at most once.
    async fn claim_opening(&self, id: ConversationId, at: DateTime<Utc>) -> Result<bool>;
}

/// One agent turn's action record (`turns.actions`) and when the turn was recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    pub at: DateTime<Utc>,
    pub actions: Value,
}

/// What [`SalesStore::sales_record`] answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SalesRecord {
    /// `conversations.offering` and `offering_at`, when both are set.
    pub offering: Option<(String, DateTime<Utc>)>,
    /// Oldest first.
    pub actions: Vec<ActionRecord>,
}
