//! The turn's two calls into `crate::burst`: a piece joins its contact's open burst
//! (`join_burst`, before it would wait for its place), and the burst's first piece waits for the
//! rest (`gather_burst`, after its reads and before the checks).
//!
//! Rules: only a bound text message opens a burst or joins one; a scripted-opening trigger and a
//! message to a contact held for a person never join (their turns answer them as usual). A
//! joined piece is recorded as its own contact message, counted against the hourly window, and
//! answered with a silent response: the first piece's request carries the one reply. The merged
//! turn counts every piece for the turn cap and the hourly rate, and checks the escalation
//! keywords against every piece. The pieces' contact messages carry the burst's marks
//! (`burst::MERGED` on the first, `burst::JOINED` on the rest) for the report.

use super::gates::hour_start;
use super::record::{Message, Outcome};
use super::{Inbound, TurnEngine, TurnResponse, scripted_opening};
use crate::burst::{self, OpenBurst};
use crate::config::TenantConfig;
use crate::handoff::{self, Hold};
use crate::store::{Conversation, StoreError, TurnContext};

impl TurnEngine {
    /// `Some(response)` when `inbound` joined its contact's open burst: its message is recorded
    /// and its response is silent. `None`: it is a turn of its own.
    pub(super) async fn join_burst(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        inbound: &Inbound,
    ) -> Result<Option<TurnResponse>, StoreError> {
        let inner = &self.inner;
        if !may_join(config, conversation, inbound, inner.clock.now()) {
            return Ok(None);
        }
        let Some(open) = inner.bursts.find(&inbound.subscriber_id) else {
            return Ok(None);
        };
        let record = |at| async move {
            let mut message = Message::new(inbound.turn(conversation.id, true, at));
            message.turn.outcome = Some(burst::JOINED.to_owned());
            // Every piece counts against the hourly window.
            message.rate_window = Some(hour_start(at));
            self.record(conversation, &message, Outcome::default())
                .await
        };
        match open.join(&inbound.text, inner.clock.now(), record).await {
            None => Ok(None),
            Some(recorded) => {
                recorded?;
                inner.metrics.burst_piece_merged();
                tracing::info!(conversation = %conversation.id, "piece joined its burst");
                Ok(Some(TurnResponse::silent()))
            }
        }
    }

    /// Opens the contact's burst when `inbound` may start one, waits for its pieces and folds
    /// them in: `inbound.text` becomes the merged message, and `context` counts the pieces for
    /// the turn cap and the hourly rate. Returns how many pieces joined.
    pub(super) async fn gather_burst(
        &self,
        config: &TenantConfig,
        inbound: &mut Inbound,
        context: &mut TurnContext,
        message: &mut Message,
        holds_place: bool,
    ) -> usize {
        let inner = &self.inner;
        let window = std::time::Duration::from_millis(u64::from(config.rules.burst.window_ms));
        let latest = burst::latest_start(inbound.arrived_at, inner.settings.race_deadline);
        if window.is_zero()
            || !holds_place
            || inbound.media.is_some()
            || latest <= tokio::time::Instant::now()
        {
            return 0;
        }
        let open: OpenBurst = inner
            .bursts
            .open(&inbound.subscriber_id, message.turn.created_at);
        let pieces = open.collect(window, latest).await;
        if pieces.is_empty() {
            return 0;
        }
        inbound.text = burst::merged_text(&inbound.text, &pieces);
        message.turn.outcome = Some(burst::MERGED.to_owned());
        let now = inner.clock.now();
        context.rate_count += pieces.len() as i64;
        // Newest first: the pieces are the contact's latest messages.
        let earlier = std::mem::take(&mut context.earlier_user_turns);
        context.earlier_user_turns = std::iter::repeat_n(now, pieces.len())
            .chain(earlier)
            .collect();
        tracing::info!(pieces = pieces.len() + 1, "burst answered as one message");
        pieces.len()
    }
}

/// Whether a message may join an open burst: a text message that is not the scripted opening's
/// trigger, to a contact not held for a person (the caller checks it is bound).
fn may_join(
    config: &TenantConfig,
    conversation: &Conversation,
    inbound: &Inbound,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    if inbound.media.is_some() || scripted_opening(inbound, config).is_some() {
        return false;
    }
    let hours = handoff::hold_hours(config);
    hours == 0 || matches!(handoff::hold_at(conversation, hours, now), Hold::Free)
}
