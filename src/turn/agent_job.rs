//! The agent's half of a turn (3.4), run in a task of its own so that it outlives a lost race:
//! the contact's media read first (020), then the model with the turn's tools, both under
//! `MODEL_ABORT_MS`. Its answer is handed to the request still waiting (`race.rs`); once the
//! request has stopped waiting, the job settles the turn itself on the deferred path (the reply
//! and its actions through the outbox, keeping the promise the request wrote), or records the
//! abort.
//!
//! Invariants: the job holds the contact's place in the conversation's order (`guard`) until
//! its answer is settled, so the contact's next turn cannot overtake it; the contact's message
//! is recorded exactly once, by whoever takes it from `message`; the deferred path waits for the
//! request's promise before it writes.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::decided::Decided;
use super::message::{Message, Promise};
use super::shared::Derived;
use super::{InFlight, TurnEngine, TurnGuard, budget};
use crate::actions::StagedAction;
use crate::agent::{self, HistoryTurn, ThinkInput, Thought};
use crate::fence::Fence;
use crate::media::MediaRef;
use crate::sales;
use crate::store::{Conversation, StoreError};
use crate::tools::{FlowSends, ToolContext, TurnTools};

/// What the agent's task hands back: the guarded thought, the actions its tools staged, and
/// how long the turn took from arrival.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) thought: Thought,
    pub(super) actions: Vec<StagedAction>,
    pub(super) latency: Duration,
    /// The turn's place in its conversation's order, released once the answer is settled.
    pub(super) guard: Option<TurnGuard>,
    /// 024: successful contact reads this turn.
    pub(super) reads: u32,
    /// The turn's plugin reads (`turns.plugin_reads`; `None`: none).
    pub(super) plugin_reads: Option<serde_json::Value>,
    /// Above the knowledge threshold: what the turn was given (`turns.knowledge`, ids only).
    pub(super) knowledge: Option<crate::knowledge::TurnKnowledge>,
    /// The contact's message, recorded with the answer.
    pub(super) message: Message,
    /// 030: the flows the turn sent, which its reply waits for.
    pub(super) flows: FlowSends,
    /// 030: when a queued reply falls due (after its flows); `None`: now.
    pub(super) due: Option<DateTime<Utc>>,
    /// 030: how long the reply waits for its flows after it is ready (the `held` answer path).
    pub(super) held: Option<Duration>,
}

/// What the agent's task hands back: the model's answer, or (020) a decision made without the
/// model once the media was read.
#[derive(Debug)]
// Sent once per turn through a oneshot: the variants' sizes cost nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(super) enum Settled {
    Answer(Answer),
    Decided(Decided),
}

/// The agent's half of a turn, run in its own task so that it outlives a lost race.
pub(super) struct AgentJob {
    pub(super) engine: TurnEngine,
    /// The turn's config snapshot and what it derives.
    pub(super) derived: Arc<Derived>,
    pub(super) conversation: Conversation,
    pub(super) contact_text: String,
    pub(super) notices: Vec<String>,
    /// The contact's sales position the turn's tools decide against.
    pub(super) sales: sales::Known,
    pub(super) history: Vec<HistoryTurn>,
    pub(super) bound: bool,
    /// 020: the media to read before the model runs (inside the race).
    pub(super) media: Option<MediaRef>,
    pub(super) arrived_at: Instant,
    pub(super) guard: Option<TurnGuard>,
    /// Taken by whoever records the turn: the answer, or the abort.
    pub(super) message: Option<Message>,
    /// The promise of a lost race, sent by the request once written; awaited before the job
    /// settles on the deferred path (`None`: the message carries its promise already, or the
    /// race cannot be lost).
    pub(super) promised: Option<oneshot::Receiver<Option<Promise>>>,
    /// 030: where the turn's tools record the flows they send (the request reads it at the
    /// deadline).
    pub(super) flows: FlowSends,
    /// The turn's place in the day's budget: each model call is reserved in it before it is
    /// sent; given back when the job ends.
    pub(super) budget: Option<budget::TurnBudget>,
    pub(super) _in_flight: Option<InFlight>,
}

impl AgentJob {
    pub(super) async fn run(mut self, answer: oneshot::Sender<Settled>, abort_at: Instant) {
        // 020: media is read first, inside the race and under the abort, like the model call.
        let mut images = Vec::new();
        if let Some(media) = self.media.take() {
            let engine = self.engine.clone();
            let vision = engine.inner.model.accepts_images();
            let prepared =
                tokio::time::timeout_at(abort_at, engine.inner.media.prepare(&media, vision)).await;
            let Ok(prepared) = prepared else {
                let Some(mut message) = self.message.take() else {
                    return;
                };
                let Ok(promise) = self.promised(message.promise).await else {
                    return;
                };
                message.promise = promise;
                if let Err(error) = self.engine.settle_aborted(&self, &message, None).await {
                    crate::store_failure!(
                        self.engine.inner.store,
                        error,
                        conversation = %self.conversation.id,
                        "aborted media turn could not be recorded"
                    );
                }
                return;
            };
            match self.read_media(media.kind, prepared) {
                Ok(read) => images = read,
                Err(decision) => return self.decided(answer, decision).await,
            }
        }
        let inner = &self.engine.inner;
        let derived = &self.derived;
        // Above the knowledge threshold: what this turn is given, chosen before the model runs;
        // with semantic search, the message's vector first (bounded: full text alone on failure).
        let vector = match inner.shared.embeddings() {
            Some(embeddings) if derived.knowledge.layout().retrieves() => {
                embeddings
                    .query(&derived.knowledge, &self.contact_text)
                    .await
            }
            _ => None,
        };
        let retrieved = {
            let history: Vec<&str> = self.history.iter().map(|t| t.text.as_str()).collect();
            derived.knowledge.for_turn_with(
                &self.contact_text,
                &history,
                self.sales.offering.as_deref(),
                vector.as_deref(),
            )
        };
        let input = ThinkInput {
            config: &derived.config,
            prompt: &derived.prompt,
            notices: &self.notices,
            history: &self.history,
            contact_text: &self.contact_text,
            max_output_tokens: inner.settings.max_output_tokens,
            temperature: inner.settings.temperature,
            max_messages: 3,
            images: &images,
            budget: self
                .budget
                .as_ref()
                .map(|b| b as &dyn crate::agent::CallBudget),
            retrieved: retrieved.as_ref(),
        };
        let fence = self.conversation_fence().await;
        let mut tools = TurnTools::new(ToolContext {
            config: derived.config.clone(),
            manychat: inner.manychat.clone(),
            subscriber: self.conversation.subscriber_id.clone(),
            conversation: self.conversation.id,
            // 024: only a turn that reads history may read the contact.
            reads_history: self.bound,
            fence: fence.clone(),
            specs: derived.tools.clone(),
            sales: std::mem::take(&mut self.sales),
            knowledge: derived.knowledge.clone(),
        })
        // 030: the request reads the flows it sends at the deadline.
        .recording_sends_in(self.flows.clone())
        // 029: an inbound turn sends its flows during the call.
        .sending_flows()
        // 032 A: and the contact's opening, claimed on the conversation row.
        .claiming_openings(inner.store.clone(), inner.clock)
        // The tenant's plugin reads go out during the step.
        .calling_plugins(inner.plugins.clone());
        let thinking = agent::think_with_fence(inner.model.as_ref(), input, &fence, &mut tools);
        let result = tokio::time::timeout_at(abort_at, thinking).await;
        let Some(message) = self.message.take() else {
            return;
        };
        let settled = match result {
            Ok(thought) => {
                // 034: a queued opening goes before a reply that does not escalate.
                tools
                    .send_opening_before_reply(thought.reply.escalate)
                    .await;
                let reads = tools.reads();
                let plugin_reads = crate::plugins::reads_record(tools.plugin_reads());
                let knowledge = retrieved.as_ref().map(|r| {
                    crate::knowledge::TurnKnowledge::of(&derived.config, r, tools.given())
                });
                let result = Answer {
                    thought,
                    reads,
                    plugin_reads,
                    knowledge,
                    actions: tools.into_actions(),
                    latency: self.arrived_at.elapsed(),
                    guard: self.guard.take(),
                    message,
                    flows: self.flows.clone(),
                    due: None,
                    held: None,
                };
                match answer.send(Settled::Answer(result)) {
                    Ok(()) => Ok(()),
                    Err(Settled::Answer(mut answer)) => {
                        match self.promised(answer.message.promise).await {
                            Ok(promise) => {
                                answer.message.promise = promise;
                                self.engine.settle_deferred(&self, answer).await
                            }
                            Err(PromiseBroken) => Ok(()),
                        }
                    }
                    Err(Settled::Decided(_)) => unreachable!("an answer was sent"),
                }
            }
            Err(_) => {
                let mut message = message;
                let Ok(promise) = self.promised(message.promise).await else {
                    return;
                };
                message.promise = promise;
                // 029: a flow already sent cannot be recalled; the record says it went out
                // (a request still in flight is waited for first). 034: a prospect turn cut
                // short is recorded too, its intent write discarded, so no later turn sends the
                // opening it forfeited.
                tools.settle_in_flight().await;
                let recorded = !tools.sent_flows().is_empty() || tools.made_prospect_turn();
                let sent = recorded.then(|| tools.into_actions());
                self.engine.settle_aborted(&self, &message, sent).await
            }
        };
        match settled {
            Ok(()) => {}
            Err(StoreError::PromiseLapsed) => tracing::warn!(
                conversation = %self.conversation.id,
                "the turn finished after its promise lapsed; the contact got the escalation copy"
            ),
            Err(error) => {
                crate::store_failure!(
                    self.engine.inner.store,
                    error,
                    conversation = %self.conversation.id,
                    "deferred turn could not be recorded"
                )
            }
        }
    }

    /// C4: the conversation's fence, rotated when the contact's text or history holds it.
    async fn conversation_fence(&self) -> Fence {
        let texts = std::iter::once(self.contact_text.as_str())
            .chain(self.history.iter().map(|turn| turn.text.as_str()));
        super::conversation_fence(self.engine.inner.store.as_ref(), &self.conversation, texts).await
    }

    /// The promise the deferred path keeps: the message's own, or the one the request wrote.
    /// `Err` when the request could not write it: the contact was answered with the escalation
    /// copy and handed to a person directly (C6), so the turn delivers nothing more, never the
    /// real answer after the copy.
    pub(super) async fn promised(
        &mut self,
        own: Option<Promise>,
    ) -> Result<Option<Promise>, PromiseBroken> {
        match (own, self.promised.take()) {
            (Some(promise), _) => Ok(Some(promise)),
            (None, Some(written)) => match written.await {
                Ok(Some(promise)) => Ok(Some(promise)),
                Ok(None) => {
                    tracing::warn!(
                        conversation = %self.conversation.id,
                        "the promise could not be written and the contact got the escalation copy; the turn's answer is not sent"
                    );
                    Err(PromiseBroken)
                }
                // The request went without answering (it was dropped): nothing was promised
                // and nothing said; the answer goes through the outbox.
                Err(_) => Ok(None),
            },
            (None, None) => Ok(None),
        }
    }
}

/// The request could not write the promise of a reply: it answered with the escalation copy and
/// handed the contact over itself (see [`AgentJob::promised`]).
#[derive(Debug)]
pub(super) struct PromiseBroken;
