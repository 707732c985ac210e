//! A turn that escalates (C6): the tenant's escalation copy instead of a reply, `escalated_at`
//! set, and the handoff queued (its own outbox row), whether the escalation was decided before
//! the model (the pre-model checks, an expired wait, a media decision) or by the model or the
//! guardrails.
//!
//! Invariants: the turn's staged actions are discarded, but for an `onEscalation` note of a
//! model or confidence escalation (024), which follows the copy; the copy, the handoff and the
//! turn are written in one write; inline, the response carries the copy and the handoff runs once
//! it is written; deferred, the outbox carries both. When the store cannot take the turn (it
//! does not answer, its disk is full), the contact still gets the copy and the handoff is
//! performed directly through ManyChat (`hand_off_without_store`): nobody is told a person will
//! write without being put in a person's queue, and the contact is held once the store is back
//! (`unheld`).

use super::after::after_response;
use super::agent_job::Answer;
use super::hold;
use super::message::Message;
use super::record::Outcome;
use super::{Mode, TurnEngine, TurnResponse};
use crate::actions;
use crate::config::TenantConfig;
use crate::escalation::Escalation;
use crate::escalation::EscalationCause;
use crate::ids::SubscriberId;
use crate::outbox::ReplyPayload;
use crate::store::{BudgetCharge, Conversation, NewTurn, StoreError};

/// How long the direct handoff waits for the store to name the contact's conversation (for
/// the log line only) before it goes without it.
const CONVERSATION_LOOKUP: std::time::Duration = std::time::Duration::from_millis(500);

impl TurnEngine {
    /// C6 when the store could not take the turn (a write or read failed, or the turn broke):
    /// the response is the escalation copy, and no outbox row can carry the handoff, so the
    /// tenant's handoff (`rules.handoff`: the tag, the flow) is performed here, once, through
    /// ManyChat. Counted (`handoffs_without_store`) and logged by the conversation's id when the
    /// store can still name it, never by the contact.
    pub async fn hand_off_without_store(&self, subscriber: &SubscriberId) {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        let found = tokio::time::timeout(
            CONVERSATION_LOOKUP,
            inner.store.conversation_by_subscriber(subscriber),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
        let conversation = found.as_ref().map(|c| c.id);
        let reason = Escalation::Error.as_str();
        // A contact the store shows handed over within the idle-reset window (the turn that
        // broke wrote its handoff row before it did, or an earlier escalation) is in a person's
        // queue already: it is not tagged twice.
        if let Some(found) = &found
            && self
                .handoff_for(&config, found, inner.clock.now())
                .is_empty()
            && found.escalated_at.is_some()
        {
            tracing::warn!(
                ?conversation,
                reason,
                "turn failed; the contact was handed to a person already"
            );
            return;
        }
        // The contact was told a person will write: it is held once the store takes the hold.
        self.hold_without_store(subscriber);
        let mut handoff = actions::handoff_actions(config.rules.handoff.as_ref());
        if handoff.is_empty() {
            tracing::warn!(
                ?conversation,
                reason,
                "store could not take the turn; no handoff configured"
            );
            return;
        }
        actions::perform_all(
            &inner.manychat,
            subscriber,
            conversation.unwrap_or_default(),
            &mut handoff,
        )
        .await;
        inner.metrics.handoffs_without_store.inc();
        let performed = handoff
            .iter()
            .filter(|a| a.entry.status == actions::ActionStatus::Performed)
            .count();
        tracing::warn!(
            ?conversation,
            reason,
            performed,
            of = handoff.len(),
            "store could not take the turn; contact handed to a person directly through ManyChat"
        );
    }

    /// An escalating answer of the model or the guardrails.
    pub(super) async fn escalate_answer(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        answer: &Answer,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        let reply = &answer.thought.reply;
        self.inner.metrics.guardrail(reply.cause.guardrail_kind());
        let reason = if answer.thought.error.is_some() {
            Escalation::Error
        } else {
            Escalation::of_reply(reply.cause, reply.reason)
        };
        let outcome = answer_outcome(answer);
        self.record_escalation(
            config,
            conversation,
            &answer.message,
            outcome,
            reason,
            Some(answer),
            mode,
        )
        .await
    }

    /// Records an escalated agent turn, sets `escalated_at`, and queues the handoff. The turn's
    /// staged actions are recorded `discarded` (012) but for an `onEscalation` note of a model
    /// or confidence escalation (024), which stays `staged` and is performed after the copy;
    /// the handoff actions are listed on the record as `staged` and performed from their own
    /// outbox row. Inline, the response carries the copy; deferred, the outbox does. `answer`
    /// is `None` for an escalation decided without the model (the pre-model checks, an expired
    /// wait, a media decision).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record_escalation(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        message: &Message,
        outcome: &'static str,
        reason: Escalation,
        answer: Option<&Answer>,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        let now = self.inner.clock.now();
        let tools_offered = answer.is_some_and(|a| a.thought.tools_offered);
        let mut record = answer.map(|a| a.actions.clone()).unwrap_or_default();
        let cause = answer.map_or(EscalationCause::None, |a| a.thought.reply.cause);
        let discarded = actions::settle_on_escalation(&mut record, cause);
        if discarded > 0 {
            tracing::info!(conversation = %conversation.id, discarded, "staged actions discarded on escalation");
        }
        let handoff = self.handoff_for(config, conversation, now);
        // Outside business hours, the closed copy (`config::hours`).
        let copy = &crate::handoff::escalation_copy(config, now).to_owned();
        let mut turn = NewTurn::agent(conversation.id, copy, outcome, message.turn.bound, now);
        turn.escalation_reason = Some(reason.as_str().to_owned());
        if let Some(answer) = answer {
            self.fill_usage(&mut turn, answer);
        }
        let mut listed = record.clone();
        listed.extend(handoff.iter().cloned());
        turn.actions = (tools_offered || !handoff.is_empty()).then(|| actions::record(&listed));
        // What survives (an onEscalation note) follows the copy, like a reply's actions; the
        // handoff's outcome is written into the record by its own row. A failed call after a
        // silent response owes the holding line first (030).
        let failed = answer.is_some_and(|a| a.thought.error.is_some());
        let deferred = (mode == Mode::Deferred).then(|| ReplyPayload {
            actions: record.clone(),
            ..ReplyPayload::of(hold::owed_after_failure(config, message, failed, copy))
        });
        // The message, the reply, its charge, `escalated_at` and the handoff, in one write.
        let charge = answer.is_some().then(|| BudgetCharge::of(&turn));
        let recorded = self
            .record(
                conversation,
                message,
                Outcome {
                    reply: Some(&turn),
                    charge,
                    escalated_at: Some(now),
                    deferred,
                    due: answer.and_then(|a| a.due),
                    handoff: handoff.clone(),
                    inline: mode == Mode::Inline,
                },
            )
            .await?;
        self.record_knowledge(
            conversation,
            recorded.turn_id,
            answer.and_then(|a| a.knowledge.as_ref()),
        )
        .await;
        self.escalated(conversation, outcome, reason);
        actions::count_unattempted(&self.inner.metrics, &record);
        Ok(match mode {
            Mode::Inline => TurnResponse {
                messages: vec![copy.clone()],
                after: after_response(
                    conversation,
                    recorded.turn_id,
                    record,
                    recorded.handoff_row,
                    handoff,
                ),
                token: None,
            },
            Mode::Deferred => TurnResponse::silent(),
        })
    }
}

fn answer_outcome(answer: &Answer) -> &'static str {
    if answer.thought.error.is_some() {
        "error"
    } else {
        answer.thought.reply.outcome()
    }
}
