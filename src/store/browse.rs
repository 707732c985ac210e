//! What the owner's console browses (`BrowseStore`): the recent conversations, one
//! conversation's turns, and the contacts held for a person now. Reads only, each a page of a
//! bounded size found by its keyset (the last row of the page before), never by an offset, so
//! the thousandth page costs what the first does; each statement reads through an index
//! (`conversations_recent`, `conversations_escalated_at`, `turns_conversation_created`).

use super::*;

/// The most rows a page holds, whatever the caller asks.
pub const MAX_PAGE: u32 = 100;

/// A page of [`BrowseStore::recent_conversations`]: newest last message first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversationsPage {
    /// The last row of the page before (its `last_message_at` and id); `None`: the first page.
    pub after: Option<(DateTime<Utc>, ConversationId)>,
    pub limit: u32,
    /// Whether the console's test contacts (`SubscriberId::is_test_contact`) are listed.
    pub test_contacts: bool,
}

/// A page of [`BrowseStore::conversation_turns`]: newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnsPage {
    /// The last turn of the page before (its `created_at` and `seq`); `None`: the first page.
    pub after: Option<(DateTime<Utc>, i64)>,
    pub limit: u32,
}

/// A turn as the console shows it: its record, and what the record keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedTurn {
    pub turn: Turn,
    /// The business's read tools the turn called (`turns.plugin_reads`: tool, available, ms;
    /// never the arguments or the answer); `None`: none.
    pub plugin_reads: Option<Value>,
    /// How many model calls the turn took (`turns.steps`); `None`: no model wrote it, or it was
    /// recorded before the count was kept.
    pub steps: Option<i64>,
    /// The ids of the offerings and passages the turn was given above the knowledge threshold
    /// (`turns.knowledge`: `offerings`, `passages`, `miss`); `None`: the catalog was in the prompt.
    pub knowledge: Option<Value>,
}

/// A contact held for a person now, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldContact {
    pub conversation: Conversation,
    /// The escalation reason of the newest turn recorded since the handoff that holds it;
    /// `None` when no turn recorded one (the owner held it from the console, or it was handed
    /// over while the store did not answer).
    pub reason: Option<String>,
}

/// The owner's views.
#[async_trait]
pub trait BrowseStore: Send + Sync + 'static {
    /// Conversations with at least one message, newest last message first (ties by id), after
    /// `page.after`; at most `page.limit` (capped at [`MAX_PAGE`]).
    async fn recent_conversations(&self, page: ConversationsPage) -> Result<Vec<Conversation>>;

    /// The conversation's turns, newest first (by time, then `seq`), after `page.after`; at most
    /// `page.limit` (capped at [`MAX_PAGE`]).
    async fn conversation_turns(
        &self,
        id: ConversationId,
        page: TurnsPage,
    ) -> Result<Vec<BrowsedTurn>>;

    /// Conversations handed over after `since` whose hold is not released (the contacts held
    /// now when `since` is `holdHours` ago, as `held_contacts` counts them), newest handoff
    /// first; at most `limit` (capped at [`MAX_PAGE`]).
    async fn held_now(&self, since: DateTime<Utc>, limit: u32) -> Result<Vec<HeldContact>>;
}

/// The cursor of a first page: after every stored row (no stored time reaches year 9999, and
/// no hyphenated UUID sorts after this one).
pub(super) fn first_page_time() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(253_402_300_799_000).expect("9999-12-31 is a time")
}

pub(super) const LAST_UUID: Uuid = Uuid::max();

/// `limit` within `1..=MAX_PAGE`, as bound.
pub(super) fn page_limit(limit: u32) -> i64 {
    i64::from(limit.clamp(1, MAX_PAGE))
}
