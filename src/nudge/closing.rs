//! The window-closing flow (031): `tools.json` `windowClosing.flowNs`, sent by the server with
//! no model call as the contact's 24-hour window is about to close.
//!
//! - Due at the contact's last message (the latest recorded contact turn, bound or not) plus
//!   [`DUE_AFTER_MINUTES`], while the window is open; claimed atomically by the nudge worker's
//!   pass (`Store::claim_window_closings`), so replicas send it once.
//! - Once per contact ever: the contact's `window_closings` row stays (`sent`, `given_up`,
//!   `skipped`, `lost`) across idle resets. Only a `contact_replied` skip deletes it, and the contact is
//!   due again from its new message.
//! - Checked in order ([`Skip`]): `contact_replied`, `escalated`, `link_sent`, `human_active`
//!   (the nudge's `humanActiveTag`), `read_failed`, `held`. No cap applies.
//! - Sending cancels the pending nudge (`window_closing`): at most two unprompted messages per
//!   silence. A sent flow is recorded as an unbound agent turn (`window_closing_sent`, no text,
//!   the flow its one performed action), in one write with the row; unbound, it never enters
//!   the model's history.
//! - A failed send is tried again after [`RETRY_AFTER_MINUTES`] while the window is open, then
//!   given up (`given_up`), which counts as sent.
//! - A row left `running` by a process that died (or that a store error left claimed) is
//!   marked `lost` (`process_died`) once its claim is older than the nudge worker's bound
//!   (`MODEL_ABORT_MS` plus `LOST_MARGIN`): it counts as sent, since the send may have
//!   happened, and is never claimed again.
//!
//! Every state change is one log line with the conversation's UUID and the reason, and one count
//! in `/metrics` (`window_closings_total{state,reason}`).

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::rules;
use super::worker::NudgeWorker;
use crate::config::TenantConfig;
use crate::store::{Conversation, NewTurn, WindowClosing, WindowClosingClaim, WindowClosingStatus};

/// Minutes after the contact's last message the flow is sent (fixed: 025's bound).
pub const DUE_AFTER_MINUTES: i64 = crate::config::MAX_NUDGE_MINUTES as i64;
/// The contact's window: nothing is sent past its last message plus this.
pub const WINDOW_MINUTES: i64 = 24 * 60;
/// A failed send is tried again this long after it failed.
pub const RETRY_AFTER_MINUTES: i64 = 1;
/// The turn outcome of a sent window-closing flow.
pub const SENT: &str = crate::store::WINDOW_CLOSING_SENT;
/// The `id` of its action record (it is none of `flows[]`).
pub const ACTION_ID: &str = "window_closing";
/// Contacts claimed per pass.
pub const BATCH: i64 = 10;
/// Why a row was marked `lost`.
pub const LOST_REASON: &str = "process_died";

/// Why the flow was not sent, in the order checked. The names are `window_closings.reason`
/// and the `/metrics` labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The contact wrote since it fell due: due again from that message.
    ContactReplied,
    /// The conversation was handed to a person since the idle gap before the last message.
    Escalated,
    /// The funnel reached `link_sent`.
    LinkSent,
    /// The contact carries the nudge's `humanActiveTag`.
    HumanActive,
    /// The `human_active` check could not be made.
    ReadFailed,
    /// The contact is held for a person (`crate::handoff`).
    Held,
}

impl Skip {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ContactReplied => "contact_replied",
            Self::Escalated => "escalated",
            Self::LinkSent => "link_sent",
            Self::HumanActive => "human_active",
            Self::ReadFailed => "read_failed",
            Self::Held => "held",
        }
    }
}

/// The claim bounds at `now`.
pub fn claim_at(now: DateTime<Utc>) -> WindowClosingClaim {
    WindowClosingClaim {
        now,
        due_before: now - Duration::minutes(DUE_AFTER_MINUTES),
        open_after: now - Duration::minutes(WINDOW_MINUTES),
        retry_before: now - Duration::minutes(RETRY_AFTER_MINUTES),
        limit: BATCH,
    }
}

/// The checks before any request, pure: `contact_replied`, `escalated`.
pub fn before_read(
    claimed: &WindowClosing,
    conversation: &Conversation,
    idle_reset: Duration,
) -> Option<Skip> {
    if conversation
        .last_message_at
        .is_some_and(|at| at > claimed.last_inbound_at)
    {
        return Some(Skip::ContactReplied);
    }
    if conversation
        .escalated_at
        .is_some_and(|at| at >= claimed.last_inbound_at - idle_reset)
    {
        return Some(Skip::Escalated);
    }
    None
}

impl NudgeWorker {
    /// One window-closing pass (a tenant with `windowClosing` only): due contacts claimed,
    /// checked, sent.
    pub(super) async fn window_closings(&self, config: &TenantConfig) {
        let Some(flow_ns) = config
            .tools
            .as_ref()
            .and_then(|t| t.window_closing.as_ref())
            .map(|w| w.flow_ns.clone())
        else {
            return;
        };
        let claimed = match self
            .store
            .claim_window_closings(claim_at(self.clock.now()))
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::error!(error = %error, "could not claim due window-closing flows");
                return;
            }
        };
        for row in claimed {
            self.window_closing(config, &flow_ns, row).await;
        }
    }

    async fn window_closing(&self, config: &TenantConfig, flow_ns: &str, claimed: WindowClosing) {
        let id = claimed.conversation_id;
        let conversation = match self.store.conversation(id).await {
            Ok(Some(conversation)) => conversation,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(conversation = %id, error = %error, "could not read the window-closing flow's conversation; it stays claimed and is marked lost");
                return;
            }
        };
        let skip = match self.closing_check(config, &claimed, &conversation).await {
            Ok(skip) => skip,
            Err(()) => return,
        };
        let now = self.clock.now();
        match skip {
            Some(Skip::ContactReplied) => {
                if self.store.release_window_closing(&claimed).await.is_ok() {
                    self.closing_settled(&claimed, "released", Skip::ContactReplied.as_str());
                }
                return;
            }
            Some(skip) => {
                self.closing_settle(&claimed, WindowClosingStatus::Skipped, Some(skip), 0)
                    .await;
                return;
            }
            None => {}
        }
        let closes = claimed.last_inbound_at + Duration::minutes(WINDOW_MINUTES);
        if now >= closes {
            // A retried send whose window closed meanwhile: given up, counted as sent.
            self.closing_settle(&claimed, WindowClosingStatus::GivenUp, None, 0)
                .await;
            return;
        }
        let reason = rules::CancelReason::WindowClosing;
        if let Ok(true) = self.store.cancel_nudge(id, reason.as_str(), now).await {
            self.metrics.nudge("cancelled", reason.as_str());
            tracing::info!(conversation = %id, reason = reason.as_str(), "nudge cancelled");
        }
        match self
            .manychat
            .send_flow(&conversation.subscriber_id, flow_ns)
            .await
        {
            Ok(()) => self.closing_sent(&claimed, now).await,
            Err(error) => {
                tracing::warn!(conversation = %id, kind = error.kind(), "window-closing flow not sent");
                let retry_at = self.clock.now() + Duration::minutes(RETRY_AFTER_MINUTES);
                let status = if retry_at >= closes {
                    WindowClosingStatus::GivenUp
                } else {
                    WindowClosingStatus::Retry
                };
                self.closing_settle(&claimed, status, None, 1).await;
            }
        }
    }

    /// 031's checks in order; `Err` when the conversation's record could not be read (the row
    /// stays claimed and is marked lost).
    async fn closing_check(
        &self,
        config: &TenantConfig,
        claimed: &WindowClosing,
        conversation: &Conversation,
    ) -> Result<Option<Skip>, ()> {
        let now = self.clock.now();
        let idle = Duration::hours(i64::from(config.rules.idle_reset_hours));
        if let Some(skip) = before_read(claimed, conversation, idle) {
            return Ok(Some(skip));
        }
        let record = self
            .store
            .sales_record(conversation.id)
            .await
            .map_err(|error| {
                tracing::error!(conversation = %conversation.id, error = %error, "could not read the window-closing flow's sales record; it stays claimed and is marked lost");
            })?;
        let request = crate::sales::known::Request {
            offering: None,
            bound: true,
            now,
        };
        let known = crate::sales::known::from_record(config, &record, request);
        if known.stage == Some(crate::sales::LINK_SENT) {
            return Ok(Some(Skip::LinkSent));
        }
        match rules::human_active_check(&self.manychat, config, &conversation.subscriber_id).await {
            Some(rules::CancelReason::HumanActive) => return Ok(Some(Skip::HumanActive)),
            Some(_) => return Ok(Some(Skip::ReadFailed)),
            None => {}
        }
        let hours = crate::handoff::hold_hours(config);
        if matches!(
            crate::handoff::hold_at(conversation, hours, now),
            crate::handoff::Hold::Held { .. }
        ) {
            return Ok(Some(Skip::Held));
        }
        Ok(None)
    }

    /// The sent flow's turn and the row `sent`, in one write.
    async fn closing_sent(&self, claimed: &WindowClosing, now: DateTime<Utc>) {
        let mut turn = NewTurn::agent(claimed.conversation_id, "", SENT, false, now);
        turn.actions = Some(json!([{
            "tool": "send_flow",
            "id": ACTION_ID,
            "status": "performed",
            "origin": ACTION_ID,
        }]));
        match self
            .store
            .record_window_closing(claimed, &turn, claimed.attempts)
            .await
        {
            Ok(Some(_)) => {
                self.metrics.turn(SENT);
                self.closing_settled(claimed, WindowClosingStatus::Sent.as_str(), "");
            }
            Ok(None) => {}
            Err(error) => {
                tracing::error!(conversation = %claimed.conversation_id, error = %error, "could not record the sent window-closing flow; it stays claimed and is marked lost, never sent again");
            }
        }
    }

    async fn closing_settle(
        &self,
        claimed: &WindowClosing,
        status: WindowClosingStatus,
        skip: Option<Skip>,
        failed: i64,
    ) {
        let reason = skip.map(Skip::as_str);
        let attempts = claimed.attempts + failed;
        match self
            .store
            .settle_window_closing(claimed, status, reason, attempts, self.clock.now())
            .await
        {
            Ok(true) => self.closing_settled(claimed, status.as_str(), reason.unwrap_or("")),
            Ok(false) => {}
            Err(error) => {
                tracing::error!(conversation = %claimed.conversation_id, error = %error, "could not settle the window-closing flow; it stays claimed and is marked lost")
            }
        }
    }

    /// Marks `lost` the rows claimed before `cutoff` and still running (their process died):
    /// how many.
    pub(super) async fn mark_lost_window_closings(
        &self,
        cutoff: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> u64 {
        let lost = match self.store.mark_lost_window_closings(cutoff, now).await {
            Ok(lost) => lost,
            Err(error) => {
                crate::store_failure!(
                    self.store,
                    error.during("marking lost window-closing flows"),
                    "could not look for lost window-closing flows"
                );
                return 0;
            }
        };
        for conversation in &lost {
            self.metrics
                .window_closing(WindowClosingStatus::Lost.as_str(), LOST_REASON);
            tracing::warn!(
                conversation = %conversation,
                state = WindowClosingStatus::Lost.as_str(),
                reason = LOST_REASON,
                "window-closing flow left running by a stopped process marked lost; counts as sent, never sent again"
            );
        }
        lost.len() as u64
    }

    fn closing_settled(&self, claimed: &WindowClosing, state: &'static str, reason: &'static str) {
        self.metrics.window_closing(state, reason);
        tracing::info!(
            conversation = %claimed.conversation_id,
            state,
            reason,
            "window-closing flow settled"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 5, 4, 8, 0, 0).unwrap() + Duration::minutes(minutes)
    }

    #[test]
    fn spec_031_window_closing_is_due_from_1380_minutes_until_the_window_closes() {
        let claim = claim_at(t(1380));
        assert_eq!(claim.due_before, t(0));
        assert_eq!(claim.open_after, t(-60));
        assert_eq!(claim.retry_before, t(1379));
    }
}
