//! Nudges (025): at most one pending row per conversation, scheduled after a silence, claimed
//! when due, settled by the nudge turn; every settled row is kept as the record (`NudgeStore`).

use super::*;

/// 025: the nudge rows and the nudge turn's one write.
#[async_trait]
pub trait NudgeStore: Send + Sync + 'static {
    /// 025: schedules the conversation's one pending nudge, due at `due_at`, in one upsert: a
    /// pending nudge is replaced; a settled one (cancelled, sent, skipped, lost) stays as the
    /// record beside the new pending row.
    async fn schedule_nudge(
        &self,
        conversation_id: ConversationId,
        delay_id: &str,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// 025: cancels the conversation's pending or running nudge with `reason`: whether one was
    /// cancelled. A running nudge cancelled here is never sent ([`NudgeStore::settle_nudge`] finds it
    /// no longer its own).
    async fn cancel_nudge(
        &self,
        conversation_id: ConversationId,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// 025: claims up to `limit` pending nudges due at `now`, earliest first, moving them to
    /// `running` with `claimed_at = now`, atomically: two workers never claim one row.
    async fn claim_due_nudges(&self, now: DateTime<Utc>, limit: i64) -> Result<Vec<Nudge>>;

    /// 025: settles a claimed nudge (`sent`, `skipped`, `cancelled`) only while it is still the
    /// claim `nudge` holds (running, claimed at `nudge.claimed_at`): whether it was.
    async fn settle_nudge(
        &self,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// 025: marks `lost` every nudge left `running` since before `claimed_before` (its process
    /// died mid-turn): it is never sent. Their conversations (each is logged).
    async fn mark_lost_nudges(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>>;

    /// 025: the conversation's latest nudge row, whatever its state.
    async fn nudge(&self, conversation_id: ConversationId) -> Result<Option<Nudge>>;

    /// 025: every nudge row of the conversation, oldest first: the record of the settled ones
    /// and the pending one, if any.
    async fn nudges(&self, conversation_id: ConversationId) -> Result<Vec<Nudge>>;

    /// 025: a nudge turn's one write, in one transaction: the nudge settled, the agent turn,
    /// its count in the hourly window, its charge and its outbox rows; and only while the
    /// nudge is still `running` under the claim `exchange.nudge` holds. `None` (nothing
    /// written) when it is not: an inbound message cancelled it during the model call, or it
    /// was marked lost. Otherwise the turn's id.
    async fn record_nudge_turn(&self, exchange: NudgeExchange<'_>) -> Result<Option<i64>>;

    /// 031: claims, atomically (two workers never claim one contact), up to `claim.limit`
    /// contacts due their window-closing flow: those whose last message falls in
    /// (`open_after`, `due_before`] and who have no row yet (inserted `running`), then rows in
    /// `retry` last settled at or before `retry_before` (moved back to `running`). The claim is
    /// `claimed_at = now`.
    async fn claim_window_closings(&self, claim: WindowClosingClaim) -> Result<Vec<WindowClosing>>;

    /// 031: settles a claimed row (`retry`, `given_up`, `skipped` with its reason) with its
    /// failed-send count, only while it is still running under `claimed`'s claim: whether it
    /// was.
    async fn settle_window_closing(
        &self,
        claimed: &WindowClosing,
        status: WindowClosingStatus,
        reason: Option<&str>,
        attempts: i64,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    /// 031: the contact wrote since the claim: its row is deleted under the claim, so it is
    /// due again at its new last message plus 1380 minutes. Whether it was.
    async fn release_window_closing(&self, claimed: &WindowClosing) -> Result<bool>;

    /// 031: a sent window-closing flow, in one transaction: the row `sent` under `claimed`'s
    /// claim and the agent turn `turn`. `None` (nothing written) when the claim no longer
    /// holds; otherwise the turn's id.
    async fn record_window_closing(
        &self,
        claimed: &WindowClosing,
        turn: &NewTurn,
        attempts: i64,
    ) -> Result<Option<i64>>;

    /// 031: marks `lost` (reason `process_died`) every window-closing row left `running` since
    /// before `claimed_before` (its process died during its checks or its send): it counts as
    /// sent and is never claimed again, since the send may have happened. Their conversations
    /// (each is logged).
    async fn mark_lost_window_closings(
        &self,
        claimed_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>>;

    /// 031: the conversation's window-closing row, if any.
    async fn window_closing(
        &self,
        conversation_id: ConversationId,
    ) -> Result<Option<WindowClosing>>;
}

/// 025: what a nudge turn writes (see [`NudgeStore::record_nudge_turn`]). There is no contact
/// message: the turn is the agent's alone.
#[derive(Debug, Clone, Copy)]
pub struct NudgeExchange<'a> {
    /// The claim the write is made under (its id and `claimed_at`).
    pub nudge: &'a Nudge,
    /// `sent` or `skipped`, and why (a skip's reason).
    pub status: NudgeStatus,
    pub reason: Option<&'a str>,
    /// The agent turn (`nudge_sent`, `nudge_skipped`).
    pub turn: &'a NewTurn,
    /// Counts the nudge turn against the contact's hourly window (025: nudge turns count).
    pub rate: Option<(&'a SubscriberId, DateTime<Utc>)>,
    /// Added to its day's budget.
    pub charge: Option<BudgetCharge>,
    /// Outbox rows to insert, in order; a reply row whose payload's `turnId` is null gets the
    /// turn's id.
    pub outbox: &'a [NewOutboxRow],
    /// When the nudge is settled.
    pub now: DateTime<Utc>,
}

/// The turn outcome of a nudge's reply (025).
pub const NUDGE_SENT: &str = "nudge_sent";
/// The turn outcome of a sent window-closing flow (031).
pub const WINDOW_CLOSING_SENT: &str = "window_closing_sent";

/// Why a nudge was cancelled (025's table). The names are the `nudges.reason` values and the
/// `/metrics` labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// An inbound message arrived after the nudge was scheduled.
    ContactReplied,
    /// The conversation escalated at or after the nudge was scheduled.
    Escalated,
    /// The funnel reached `link_sent`.
    LinkSent,
    /// Now is past the last inbound message plus [`crate::config::MAX_NUDGE_MINUTES`].
    WindowClosing,
    /// A budget, rate or turn cap would refuse the turn.
    CapReached,
    /// The contact carries the tenant's `humanActiveTag`.
    HumanActive,
    /// The `human_active` check could not be made.
    ReadFailed,
}

impl CancelReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ContactReplied => "contact_replied",
            Self::Escalated => "escalated",
            Self::LinkSent => "link_sent",
            Self::WindowClosing => "window_closing",
            Self::CapReached => "cap_reached",
            Self::HumanActive => "human_active",
            Self::ReadFailed => "read_failed",
        }
    }
}

/// 025: the states of a nudge row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NudgeStatus {
    Pending,
    /// Claimed by a worker; its checks or its turn are under way.
    Running,
    Sent,
    /// The nudge turn ran and declined (a model escalation) or failed: nothing was sent.
    Skipped,
    Cancelled,
    /// Left running by a process that died: never sent.
    Lost,
}

impl NudgeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Sent => "sent",
            Self::Skipped => "skipped",
            Self::Cancelled => "cancelled",
            Self::Lost => "lost",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "sent" => Self::Sent,
            "skipped" => Self::Skipped,
            "cancelled" => Self::Cancelled,
            "lost" => Self::Lost,
            other => return Err(StoreError::Corrupt(format!("nudge status `{other}`"))),
        })
    }
}

/// 025: one conversation's nudge row. No contact data: the conversation's UUID and ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Nudge {
    pub id: i64,
    pub conversation_id: ConversationId,
    /// The configured delay id the model chose.
    pub delay_id: String,
    pub due_at: DateTime<Utc>,
    pub scheduled_at: DateTime<Utc>,
    pub status: NudgeStatus,
    /// Why it was cancelled or skipped.
    pub reason: Option<String>,
    /// When a worker claimed it (running rows only, and what they settled from).
    pub claimed_at: Option<DateTime<Utc>>,
}

/// 031: the bounds of one window-closing claim (see [`NudgeStore::claim_window_closings`]).
#[derive(Debug, Clone, Copy)]
pub struct WindowClosingClaim {
    pub now: DateTime<Utc>,
    /// Contacts whose last message is at or before this are due (the message plus 1380 min).
    pub due_before: DateTime<Utc>,
    /// ... and after this: their 24-hour window is still open.
    pub open_after: DateTime<Utc>,
    /// A failed send is tried again once its row was last settled at or before this.
    pub retry_before: DateTime<Utc>,
    pub limit: i64,
}

/// 031: the states of a contact's window-closing row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowClosingStatus {
    /// Claimed by a worker: its checks or its send are under way.
    Running,
    /// The send failed; it is tried again while the window is open.
    Retry,
    Sent,
    /// The window closed while the send kept failing: counts as sent.
    GivenUp,
    /// A check stopped it for good (its reason).
    Skipped,
    /// Left running by a process that died (`process_died`): counts as sent, since the send
    /// may have happened.
    Lost,
}

impl WindowClosingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Retry => "retry",
            Self::Sent => "sent",
            Self::GivenUp => "given_up",
            Self::Skipped => "skipped",
            Self::Lost => "lost",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "running" => Self::Running,
            "retry" => Self::Retry,
            "sent" => Self::Sent,
            "given_up" => Self::GivenUp,
            "skipped" => Self::Skipped,
            "lost" => Self::Lost,
            other => {
                return Err(StoreError::Corrupt(format!(
                    "window-closing status `{other}`"
                )));
            }
        })
    }
}

/// 031: a contact's one window-closing row. Ids and times only.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowClosing {
    pub conversation_id: ConversationId,
    pub status: WindowClosingStatus,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// The contact's last message when it was first claimed: the window it closes.
    pub last_inbound_at: DateTime<Utc>,
    /// The claim a settle is made under.
    pub claimed_at: DateTime<Utc>,
    /// Failed sends so far.
    pub attempts: i64,
}
