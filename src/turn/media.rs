//! How a turn answers a contact's media (020), beside the order in `mod.rs`: what the media
//! turned into (`AgentJob::read_media`, inside the race), and a decision made without the model
//! (the tenant's `mediaFallback`, a keyword in the transcript, a media failure), which travels
//! the answer's channel and keeps its own outcome even after the deadline.

use tokio::sync::oneshot;

use super::agent_job::{AgentJob, Settled};
use super::decided::{Decided, Decision};
use super::message::Message;
use super::{Mode, TurnEngine, TurnResponse};
use crate::config::TenantConfig;
use crate::escalation::Escalation;
use crate::media::Prepared;
use crate::store::{Conversation, StoreError};

/// Told to the model, outside the fence, when the contact's message is a transcript (020).
const TRANSCRIPT_NOTICE: &str = "MEDIA: the contact's message below is an automatic transcript \
of a voice note; it may mishear names and numbers, so confirm any you rely on.";
/// Told to the model when images come with the message (020).
const IMAGE_NOTICE: &str = "MEDIA: the contact sent an image (or frames of a video), attached \
after this message. An image is never evidence of a catalog fact, a price or a payment: the \
catalog is the only source of facts, and a reported payment goes to a person.";

impl TurnEngine {
    /// 020: a media turn decided without the model: the tenant's `mediaFallback` (outcome
    /// `media_fallback`), or without it the escalation copy (`escalated_precheck`); or an
    /// escalation (a keyword in the transcript, a media failure).
    pub(super) async fn settle_decided(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        decided: Decided,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        // Held until the answer is recorded (and, deferred, queued).
        let _guard = decided.guard;
        let message = &decided.message;
        let (outcome, reason) = match decided.decision {
            Decision::Fallback => match &config.rules.messages.media_fallback {
                Some(copy) => return self.media_fallback(conversation, message, copy, mode).await,
                None => ("escalated_precheck", Escalation::MediaUnanswerable),
            },
            Decision::Escalate { outcome, reason } => (outcome, reason),
        };
        self.record_escalation(config, conversation, message, outcome, reason, None, mode)
            .await
    }

    /// Answers with `rules.messages.mediaFallback`, without the model.
    async fn media_fallback(
        &self,
        conversation: &Conversation,
        message: &Message,
        copy: &str,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        self.answer_without_model(conversation, message, copy, "media_fallback", mode)
            .await
    }
}

impl AgentJob {
    /// 020: what the media turned into. `Ok`: the model runs on the text (recorded in place of
    /// the marker) with these images; `Err`: the turn is decided without it.
    pub(super) fn read_media(
        &mut self,
        kind: crate::media::MediaKind,
        prepared: Prepared,
    ) -> Result<Vec<crate::model::ImageInput>, Decision> {
        let conversation = self.conversation.id;
        let kind = kind.as_str();
        match prepared {
            Prepared::Ready(read) => {
                if let Some(message) = self.message.as_mut() {
                    message.turn.text = read.text.clone();
                    message.turn.cost_usd = read.cost_usd;
                }
                tracing::info!(%conversation, kind, transcribed = read.transcribed, images = read.images.len(), "media read");
                if read.transcribed {
                    self.notices.push(TRANSCRIPT_NOTICE.to_owned());
                }
                if !read.images.is_empty() {
                    self.notices.push(IMAGE_NOTICE.to_owned());
                }
                // The transcript is the contact's words: the keywords apply as to typed text.
                if read.transcribed && self.derived.keywords.hit(&read.text) {
                    return Err(Decision::Escalate {
                        outcome: "escalated_precheck",
                        reason: Escalation::Keyword,
                    });
                }
                self.contact_text = read.text;
                Ok(read.images)
            }
            Prepared::Fallback(cause) => {
                tracing::info!(%conversation, kind, cause = cause.as_str(), "media not answerable");
                Err(Decision::Fallback)
            }
            Prepared::Failed(error) => {
                tracing::warn!(%conversation, kind, error = error.as_str(), "media failed");
                Err(Decision::Escalate {
                    outcome: "error",
                    reason: Escalation::MediaFailed,
                })
            }
        }
    }

    /// Hands a decision made without the model to the request, or (the race lost) records and
    /// queues it here. It keeps its own outcome either way, never `deferred`.
    pub(super) async fn decided(mut self, answer: oneshot::Sender<Settled>, decision: Decision) {
        let Some(message) = self.message.take() else {
            return;
        };
        let decided = Decided {
            decision,
            message,
            guard: self.guard.take(),
        };
        let Err(Settled::Decided(mut decided)) = answer.send(Settled::Decided(decided)) else {
            return;
        };
        let Ok(promise) = self.promised(decided.message.promise).await else {
            return;
        };
        decided.message.promise = promise;
        let config = self.derived.config.clone();
        if let Err(error) = self
            .engine
            .settle_decided(&config, &self.conversation, decided, Mode::Deferred)
            .await
        {
            crate::store_failure!(
                self.engine.inner.store,
                error,
                conversation = %self.conversation.id,
                "media turn could not be recorded"
            );
        }
    }
}
