//! What a turn that cannot take its place gets (`place`): a message beyond its contact's
//! waiting turns is recorded with a silent `contact_busy` turn and answered silently; a turn
//! that finds every slot taken when it could start is load-shed (recorded, handed to a person,
//! answered with the escalation copy).
//!
//! Invariants: a `contact_busy` message is unbound (it never enters history, out of order
//! behind the turns still waiting, nor counts for the cap) and costs one write; nothing is
//! lost, and no other contact waits for it.

use super::message::Message;
use super::record::Outcome;
use super::{Inbound, TurnEngine, TurnError, TurnResponse};
use crate::store::{Conversation, NewTurn};

/// The outcome of a message its contact sent while it had its most turns waiting.
pub(super) const CONTACT_BUSY: &str = "contact_busy";

impl TurnEngine {
    /// Records the message and its silent `contact_busy` turn, in one write.
    pub(super) async fn contact_busy(
        &self,
        conversation: &Conversation,
        inbound: &Inbound,
    ) -> Result<TurnResponse, TurnError> {
        let now = self.inner.clock.now();
        let message = Message::new(inbound.turn(conversation.id, false, now));
        let busy = NewTurn::agent(conversation.id, "", CONTACT_BUSY, false, now);
        self.record(
            conversation,
            &message,
            Outcome {
                reply: Some(&busy),
                ..Outcome::default()
            },
        )
        .await?;
        self.inner.metrics.turn(CONTACT_BUSY);
        tracing::warn!(conversation = %conversation.id, outcome = CONTACT_BUSY, "contact has its most turns waiting; recorded, answered silently");
        Ok(TurnResponse::silent())
    }

    /// Every slot is taken (`MAX_TURNS_IN_FLIGHT`): the message is recorded with the escalation
    /// copy and handed to a person (`shed`), and the copy is the answer; a contact held for a person
    /// is answered silently.
    pub(super) async fn shed_now(&self, inbound: &Inbound) -> TurnResponse {
        self.inner.metrics.load_shed.inc();
        tracing::warn!("load shed: too many turns in flight");
        let shed = self
            .shed(
                &inbound.subscriber_id,
                &inbound.text,
                inbound.channel.as_deref(),
            )
            .await;
        match shed {
            // A contact held for a person already gets the held (silent) answer.
            super::record::Shed::Held => TurnResponse::silent(),
            super::record::Shed::HandedOff => TurnResponse {
                messages: vec![self.escalation_copy()],
                after: None,
                token: None,
            },
        }
    }
}
