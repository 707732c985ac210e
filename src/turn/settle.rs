//! How a turn that ran the model is settled (3.4): written in its one write and answered.
//!
//! - Race won (`settle_inline`): the agent turn is recorded, then the reply is rendered in the
//!   response, held until the flows the turn sent have played (030) or queued behind them when
//!   they play past the deadline; its staged actions run once the response is written.
//! - Race lost, or a reply queued ahead (`settle_deferred`): the reply and its actions go to the
//!   outbox in the same write that records the turn, keeping the promise the response made.
//! - `MODEL_ABORT_MS` (`settle_aborted`): no agent turn (unless a flow went out, 029, or the
//!   call made the contact a prospect, 034); the escalation copy and the handoff go through the
//!   outbox (C6).
//!
//! An escalating answer settles through `escalate.rs`. Invariants: the contact's place in the
//! conversation's order is held until the reply is recorded (and, deferred, queued), so the
//! contact's next turn cannot overtake it; an inline answer leaves only after its write committed.

use tokio::time::Instant;

use super::after::after_response;
use super::agent_job::{AgentJob, Answer};
use super::hold::{self, Hold};
use super::message::Message;
use super::record::{Outcome, fill_usage};
use super::{Mode, TurnEngine, TurnError, TurnResponse};
use crate::actions::{self, StagedAction};
use crate::config::TenantConfig;
use crate::escalation::Escalation;
use crate::escalation::EscalationCause;
use crate::metrics::AnswerPath;
use crate::outbox::ReplyPayload;
use crate::store::{BudgetCharge, Conversation, NewTurn, StoreError};

impl TurnEngine {
    /// Records the agent turn of a race won and returns the reply to render inline, once the
    /// flows the turn sent have played (030, `hold`); past the deadline the reply is queued
    /// behind them and the response is silent.
    pub(super) async fn settle_inline(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        mut answer: Answer,
        deadline: Instant,
    ) -> Result<TurnResponse, TurnError> {
        let ready = Instant::now();
        let hold = hold::decide(answer.flows.played_until(), ready, Some(deadline));
        answer.held = hold.wait(ready);
        if let Hold::Outbox { due } = hold
            && let Some(silent) = self
                .queue_behind_flows(config, conversation, &mut answer, ready, due)
                .await
        {
            return Ok(silent);
        }
        let response = if answer.thought.reply.escalate {
            self.escalate_answer(config, conversation, &answer, Mode::Inline)
                .await?
        } else {
            let turn_id = self
                .record_answer(conversation, "answered_inline", &answer, Mode::Inline)
                .await?;
            TurnResponse {
                after: after_response(conversation, turn_id, answer.actions, None, Vec::new()),
                messages: answer.thought.reply.messages,
                token: None,
            }
        };
        // The contact's place is held meanwhile (`answer.guard`): its next message waits.
        if let Hold::Inline { until } = hold {
            self.hold_inline(conversation, ready, until).await;
        }
        Ok(response)
    }

    /// The deferred path: the race was lost (or a reply was queued ahead), so the reply goes to
    /// the outbox with its actions, keeping the turn's promise.
    pub(super) async fn settle_deferred(
        &self,
        job: &AgentJob,
        mut answer: Answer,
    ) -> Result<(), StoreError> {
        // Held until the reply is queued, so the conversation's next turn queues behind it.
        let _guard = answer.guard.take();
        let conversation = &job.conversation;
        // 030: the reply follows the flows the turn sent, also those sent after the deadline.
        answer.due = self.due_after_flows(conversation.id, &answer.flows);
        if answer.thought.reply.escalate {
            self.escalate_answer(&job.derived.config, conversation, &answer, Mode::Deferred)
                .await?;
        } else {
            self.record_answer(conversation, "deferred", &answer, Mode::Deferred)
                .await?;
        }
        Ok(())
    }

    /// Above the knowledge threshold: the ids the turn was given on its record, and `/metrics`'
    /// counts of them and of a search that found nothing. A failed write is logged; the turn
    /// stands.
    pub(super) async fn record_knowledge(
        &self,
        conversation: &Conversation,
        turn_id: i64,
        knowledge: Option<&crate::knowledge::TurnKnowledge>,
    ) {
        let Some(knowledge) = knowledge else {
            return;
        };
        let inner = &self.inner;
        inner.metrics.knowledge(
            knowledge.ids.offerings.len(),
            knowledge.ids.passages.len(),
            knowledge.miss,
        );
        if let Err(error) = inner
            .store
            .update_turn_knowledge(turn_id, &knowledge.record())
            .await
        {
            tracing::error!(conversation = %conversation.id, error = %error, "could not record the turn's knowledge ids");
        }
    }

    /// Records an answered agent turn (inline or deferred) with its usage and staged actions;
    /// deferred, its reply and actions go to the outbox in the same write.
    pub(super) async fn record_answer(
        &self,
        conversation: &Conversation,
        outcome: &'static str,
        answer: &Answer,
        mode: Mode,
    ) -> Result<i64, StoreError> {
        let inner = &self.inner;
        let mut turn = NewTurn::agent(
            conversation.id,
            answer.thought.reply.messages.join("\n\n"),
            outcome,
            answer.message.turn.bound,
            inner.clock.now(),
        );
        self.fill_usage(&mut turn, answer);
        let duplicate = answer.thought.reply.duplicate;
        turn.duplicate = duplicate.map(|d| d.as_str().to_owned());
        turn.actions = answer
            .thought
            .tools_offered
            .then(|| actions::record(&answer.actions));
        let deferred = (mode == Mode::Deferred).then(|| ReplyPayload {
            actions: answer.actions.clone(),
            ..ReplyPayload::of(answer.thought.reply.messages.clone())
        });
        // The message, the reply and its charge (and, deferred, the outbox row), in one write.
        let recorded = self
            .record(
                conversation,
                &answer.message,
                Outcome {
                    reply: Some(&turn),
                    charge: Some(BudgetCharge::of(&turn)),
                    deferred,
                    due: answer.due,
                    ..Outcome::default()
                },
            )
            .await?;
        if let Some(reads) = &answer.plugin_reads
            && let Err(error) = inner
                .store
                .update_turn_plugin_reads(recorded.turn_id, reads)
                .await
        {
            tracing::error!(conversation = %conversation.id, error = %error, "could not record the turn's plugin reads");
        }
        self.record_knowledge(conversation, recorded.turn_id, answer.knowledge.as_ref())
            .await;
        inner.metrics.turn(outcome);
        if let Some(duplicate) = duplicate {
            inner.metrics.duplicate(duplicate.kind());
        }
        match answer.held {
            Some(wait) => inner
                .metrics
                .answered(AnswerPath::Held, answer.latency + wait),
            None => inner.metrics.answered(answer_path(mode), answer.latency),
        }
        actions::count_unattempted(&inner.metrics, &answer.actions);
        tracing::info!(
            conversation = %conversation.id,
            outcome,
            steps = answer.thought.steps,
            latency_ms = turn.latency_ms,
            "turn"
        );
        Ok(recorded.turn_id)
    }

    pub(super) fn fill_usage(&self, turn: &mut NewTurn, answer: &Answer) {
        let model = self.inner.model.id();
        fill_usage(turn, model, &answer.thought, answer.latency);
        turn.reads = i64::from(answer.reads);
    }

    /// MODEL_ABORT_MS: the escalation copy and the handoff go through the outbox (C6), the
    /// message records why. No agent turn, unless the call sent a flow before it was cut short
    /// (029) or staged the intent write that made the contact a prospect (034): then an agent
    /// turn with the holding line the contact received and outcome `error` records the sent
    /// flows and the discarded writes, so later turns know (the opening is forfeited).
    pub(super) async fn settle_aborted(
        &self,
        job: &AgentJob,
        message: &Message,
        sent: Option<Vec<StagedAction>>,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        inner.metrics.model_aborted.inc();
        tracing::warn!(conversation = %job.conversation.id, "model call aborted at MODEL_ABORT_MS");
        let config = &job.derived.config;
        let mut message = message.clone();
        message.turn.escalation_reason = Some(Escalation::Aborted.as_str().to_owned());
        let reply = sent.map(|mut sent| {
            actions::settle_on_escalation(&mut sent, EscalationCause::Abort);
            actions::count_unattempted(&inner.metrics, &sent);
            let mut turn = NewTurn::agent(
                job.conversation.id,
                &config.rules.messages.acknowledgement,
                "error",
                message.turn.bound,
                now,
            );
            turn.escalation_reason = Some(Escalation::Aborted.as_str().to_owned());
            turn.actions = Some(actions::record(&sent));
            turn
        });
        self.record(
            &job.conversation,
            &message,
            Outcome {
                reply: reply.as_ref(),
                escalated_at: Some(now),
                deferred: Some(ReplyPayload::of(hold::owed_after_failure(
                    config,
                    &message,
                    true,
                    crate::handoff::escalation_copy(config, now),
                ))),
                // 030: after the flows it sent, like any reply of the turn.
                due: self.due_after_flows(job.conversation.id, &job.flows),
                handoff: self.handoff_for(config, &job.conversation, now),
                ..Outcome::default()
            },
        )
        .await?;
        self.escalated(&job.conversation, "aborted", Escalation::Aborted);
        Ok(())
    }
}

/// The answer-time path of a reply settled in `mode`.
fn answer_path(mode: Mode) -> AnswerPath {
    match mode {
        Mode::Inline => AnswerPath::Inline,
        Mode::Deferred => AnswerPath::Deferred,
    }
}
