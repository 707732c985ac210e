//! The reply waits for the flow (030).
//!
//! ManyChat answers `sendFlow` when a flow starts, not when it has played, so the tenant
//! declares each flow's play time (`settleSeconds`). A turn that sent flows (whatever sent
//! them: the model's `send_flow`, or a flow the server sends itself) holds every reply of the
//! turn, the escalation's handoff copy included, until the last accepted one has played: the
//! latest answer time plus that flow's `settleSeconds`. Refused flows, and flows without a play
//! time, are not waited for.
//!
//! - Race won, the flows end before the race deadline: the inline response is held until then.
//! - Race won, they end after it: the turn is recorded as usual (its outcome unchanged), its
//!   reply and staged actions are queued in the outbox due when the flows end, in the same
//!   write, and the response is silent. If that write fails, the reply goes inline at once.
//! - Race lost: at the deadline, a flow ManyChat had answered and that is still playing makes
//!   the response silent instead of the holding line (a flow still in flight has no answer
//!   yet and does not count). The queued reply falls due when the turn's flows end, including
//!   flows sent after the deadline; a call that fails after a silent response queues the
//!   holding line it withheld, with the escalation copy, due then.
//!
//! Each hold logs `reply held for flow` with `path` (`inline` | `outbox`) and `held_ms`.
//! [`decide`] is the decision, pure; the rest applies it to a turn.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::agent_job::Answer;
use super::message::Message;
use super::{Mode, TurnEngine, TurnResponse};
use crate::clock::Clock;
use crate::config::TenantConfig;
use crate::ids::ConversationId;
use crate::store::Conversation;
use crate::tools::FlowSends;

/// What the flows a turn sent ask of its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    /// Nothing is playing: the reply goes as it would without flows.
    Now,
    /// The response waits until `until`, before the deadline, and carries the reply.
    Inline { until: Instant },
    /// The reply is queued in the outbox, due at `due`.
    Outbox { due: Instant },
}

impl Hold {
    /// How long a reply ready at `ready` waits: `None` when it goes now.
    pub(super) fn wait(self, ready: Instant) -> Option<Duration> {
        match self {
            Hold::Now => None,
            Hold::Inline { until } => Some(until - ready),
            Hold::Outbox { due } => Some(due - ready),
        }
    }
}

/// The hold for a reply ready at `now` after flows that play until `played_until`.
/// `deadline` is the race deadline while the response has not been sent, `None` once it has.
pub(super) fn decide(
    played_until: Option<Instant>,
    now: Instant,
    deadline: Option<Instant>,
) -> Hold {
    match (played_until, deadline) {
        (Some(end), _) if end <= now => Hold::Now,
        (None, _) => Hold::Now,
        (Some(end), Some(deadline)) if end <= deadline => Hold::Inline { until: end },
        (Some(end), _) => Hold::Outbox { due: end },
    }
}

/// What the outbox owes a contact whose turn escalated on the deferred path: the escalation
/// copy, preceded by the holding line when the call failed after a silent response (030).
/// `copy` is the escalation copy in force (`handoff::escalation_copy`: business hours).
pub(super) fn owed_after_failure(
    config: &TenantConfig,
    message: &Message,
    failed: bool,
    copy: &str,
) -> Vec<String> {
    let messages = &config.rules.messages;
    let withheld = message.promise.is_some_and(|p| p.holding_line_withheld);
    if failed && withheld {
        vec![messages.acknowledgement.clone(), copy.to_owned()]
    } else {
        vec![copy.to_owned()]
    }
}

/// The stored time of `at` on the turn's clock.
fn wall_time(clock: &Clock, at: Instant) -> DateTime<Utc> {
    let now = Instant::now();
    let ahead = chrono::Duration::from_std(at.saturating_duration_since(now)).unwrap_or_default();
    clock.now() + ahead
}

fn held(conversation: ConversationId, path: &'static str, held: Duration) {
    tracing::info!(
        conversation = %conversation,
        path,
        held_ms = held.as_millis() as u64,
        "reply held for flow"
    );
}

impl TurnEngine {
    /// A race won whose flows play past the deadline: records the turn with its reply and
    /// staged actions queued, due when the flows end, and answers silently. `None` when the
    /// write failed: the caller then sends the reply inline at once (inside the flow is better
    /// than never).
    pub(super) async fn queue_behind_flows(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        answer: &mut Answer,
        ready: Instant,
        due: Instant,
    ) -> Option<TurnResponse> {
        answer.due = Some(wall_time(&self.inner.clock, due));
        let recorded = if answer.thought.reply.escalate {
            self.escalate_answer(config, conversation, answer, Mode::Deferred)
                .await
                .map(|_| ())
        } else {
            self.record_answer(conversation, "answered_inline", answer, Mode::Deferred)
                .await
                .map(|_| ())
        };
        match recorded {
            Ok(()) => {
                held(conversation.id, "outbox", due - ready);
                Some(TurnResponse::silent())
            }
            Err(error) => {
                tracing::warn!(
                    conversation = %conversation.id,
                    error = %error,
                    "the reply could not be queued behind its flow; sending it now"
                );
                answer.due = None;
                answer.held = None;
                None
            }
        }
    }

    /// Holds an inline response, whose reply was ready at `ready`, until the turn's flows have
    /// played (before the deadline).
    pub(super) async fn hold_inline(
        &self,
        conversation: &Conversation,
        ready: Instant,
        until: Instant,
    ) {
        held(conversation.id, "inline", until - ready);
        tokio::time::sleep_until(until).await;
    }

    /// The response has gone: when a reply queued now falls due, `None` for now. Flows sent
    /// after the race deadline count too.
    pub(super) fn due_after_flows(
        &self,
        conversation: ConversationId,
        flows: &FlowSends,
    ) -> Option<DateTime<Utc>> {
        let now = Instant::now();
        let Hold::Outbox { due } = decide(flows.played_until(), now, None) else {
            return None;
        };
        held(conversation, "outbox", due - now);
        Some(wall_time(&self.inner.clock, due))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn spec_030_the_hold_sends_now_holds_inline_or_queues_by_when_the_flows_end() {
        let now = Instant::now();
        let at = |s: u64| now + Duration::from_secs(s);
        let deadline = Some(at(8));
        assert_eq!(decide(None, now, deadline), Hold::Now, "no flow");
        assert_eq!(
            decide(Some(now), now, deadline),
            Hold::Now,
            "played already"
        );
        assert_eq!(
            decide(Some(at(3)), now, deadline),
            Hold::Inline { until: at(3) }
        );
        assert_eq!(
            decide(Some(at(8)), now, deadline),
            Hold::Inline { until: at(8) },
            "ending at the deadline still answers inline"
        );
        assert_eq!(
            decide(Some(at(9)), now, deadline),
            Hold::Outbox { due: at(9) },
            "the wait never pushes the response past the deadline"
        );
        assert_eq!(
            decide(Some(at(3)), now, None),
            Hold::Outbox { due: at(3) },
            "the response has gone: the queued reply waits"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn spec_030_a_due_time_is_stored_on_the_turns_clock() {
        let start = DateTime::parse_from_rfc3339("2026-10-03T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let clock = Clock::starting_at(start);
        let due = Instant::now() + Duration::from_millis(4_500);
        assert_eq!(
            wall_time(&clock, due),
            start + chrono::Duration::milliseconds(4_500)
        );
    }
}
