//! In-window nudges (025): one follow-up the model schedules, re-checked by the server when it
//! falls due.
//!
//! - Scheduling: `schedule_nudge(delay)` is a staged write (`crate::tools`), gated by intent
//!   (034) like any sales write; performing it ([`perform_scheduled`]) upserts the
//!   conversation's one pending nudge row (settled rows stay as the record), with no ManyChat
//!   request.
//! - An inbound message cancels the pending (or running) nudge: [`contact_replied`], called at
//!   the start of every turn of a tenant that has a `nudge` section.
//! - The due-time rules ([`rules`]) decide, cheapest first, whether a claimed nudge is still
//!   allowed; they are pure.
//! - The worker ([`worker`]) claims due nudges and checks them; the nudge turn ([`turn`]) runs
//!   the agent on the history and the follow-up note and writes its reply to the outbox, in one
//!   write with the nudge's settlement.
//!
//! - The window-closing flow (031, [`closing`]): sent by the worker's pass with no model call
//!   as a contact's window is about to close, once per contact ever; it cancels the pending
//!   nudge.
//!
//! Invariants: a nudge row holds ids and times only, never contact data; every state change is
//! one log line with the conversation's UUID and the reason, and one count in `/metrics`.

pub mod closing;
pub mod rules;
pub mod turn;
pub mod worker;

use chrono::{DateTime, Utc};

use crate::actions::{self, ActionStatus, Operation, StagedAction};
use crate::config::TenantConfig;
use crate::ids::ConversationId;
use crate::metrics::Metrics;
use crate::store::Store;

pub use rules::CancelReason;
pub use turn::{AgentNudgeTurn, NudgeTurnSettings};
pub use worker::{NudgeSettings, NudgeTurn, NudgeVerdict, NudgeWorker};

/// Performs a turn's staged `schedule_nudge` after its text (see the module doc) and counts it:
/// in `nudges_total{state="scheduled"}`, and like any other action by tool and status
/// (`performed`, or `failed` when the store refused it), since no ManyChat attempt counts it.
pub async fn perform_scheduled(
    store: &dyn Store,
    metrics: &Metrics,
    conversation: ConversationId,
    now: DateTime<Utc>,
    staged: &mut [StagedAction],
) {
    let attempted: Vec<usize> = staged
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.entry.status == ActionStatus::Staged
                && matches!(a.operation, Operation::ScheduleNudge { .. })
        })
        .map(|(i, _)| i)
        .collect();
    let scheduled = actions::perform_nudges(store, conversation, now, staged).await;
    for action in attempted.into_iter().filter_map(|i| staged.get(i)) {
        metrics.action(&action.entry.tool, action.entry.status);
    }
    if scheduled > 0 {
        metrics.nudge_n("scheduled", "", scheduled as u64);
    }
}

/// 025: the contact wrote, so their pending nudge (or one whose checks or model call are under
/// way) is cancelled as `contact_replied`. Only a tenant with a `nudge` section pays the write.
/// A failure is logged: the due-time check against the last inbound message cancels it then.
pub async fn contact_replied(
    store: &dyn Store,
    metrics: &Metrics,
    config: &TenantConfig,
    conversation: ConversationId,
    now: DateTime<Utc>,
) -> Replied {
    if config
        .tools
        .as_ref()
        .and_then(|t| t.nudge.as_ref())
        .is_none()
    {
        return Replied::NoNudges;
    }
    let reason = CancelReason::ContactReplied;
    match store.cancel_nudge(conversation, reason.as_str(), now).await {
        Ok(true) => {
            metrics.nudge("cancelled", reason.as_str());
            tracing::info!(conversation = %conversation, reason = reason.as_str(), "nudge cancelled");
            Replied::Cancelled
        }
        Ok(false) => Replied::NothingCancelled,
        Err(error) => {
            tracing::warn!(conversation = %conversation, error = %error, "could not cancel the nudge; its due-time check will");
            Replied::NothingCancelled
        }
    }
}

/// What [`contact_replied`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replied {
    /// The tenant has no `nudge` section: no follow-up runs.
    NoNudges,
    /// A pending or running nudge was cancelled: its turn can no longer write (it writes only
    /// under its claim), so it queues nothing.
    Cancelled,
    /// No nudge was pending or running: one may have been sent already.
    NothingCancelled,
}

impl Replied {
    /// 037: the contact's queued replies, for a turn that counted them (`queued`) before this
    /// cancel. A nudge turn does not wait in the contact's order; its reply may have been
    /// queued between that count and the cancel, and the inbound turn's reply must go behind
    /// it, never inline ahead of it. Counted again then; a nudge this cancel stopped queues
    /// nothing.
    pub async fn queued_replies(
        self,
        store: &dyn Store,
        conversation: ConversationId,
        queued: i64,
    ) -> Result<i64, crate::store::StoreError> {
        match self {
            Replied::NothingCancelled if queued == 0 => store.pending_replies(conversation).await,
            _ => Ok(queued),
        }
    }
}
