//! 025: the contact wrote, so the follow-up the model scheduled is no longer wanted: the turn's
//! first step cancels it.

use chrono::{DateTime, Utc};

use crate::config::TenantConfig;
use crate::ids::ConversationId;
use crate::metrics::Metrics;
use crate::store::{CancelReason, Store};

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
