//! A reply's messages, each one field write plus one flow trigger, from the first one ManyChat
//! has not accepted. Every trigger is counted on the row before it leaves and settled when
//! ManyChat answers, so a process killed at any moment resumes at the one trigger that got no
//! answer. That trigger is sent again at most once ([`MAX_UNANSWERED_TRIGGERS`]); with the
//! delivery handshake (`crate::outbox::handshake`) the contact is read first, and a message
//! the reply flow recorded as delivered is not sent again at all.

use serde_json::Value;

use super::{AttemptError, OutboxWorker, Progress};
use crate::outbox::MAX_UNANSWERED_TRIGGERS;
use crate::outbox::handshake::{self, Delivered, DeliveryHandshake};
use crate::store::OutboxRow;

impl OutboxWorker {
    /// Delivers `messages` from the first one ManyChat has not accepted, in order, the reply
    /// gap between two of them.
    pub(super) async fn deliver_messages(
        &self,
        row: &OutboxRow,
        messages: &[String],
        progress: &mut Progress,
    ) -> Result<(), AttemptError> {
        let total = messages.len();
        let resumed_after = Self::first_pending(progress, total);
        if resumed_after < total
            && progress.trigger_timeouts > 0
            && let Some(handshake) = &self.settings.handshake
        {
            self.settle_by_handshake(row, handshake, resumed_after, progress)
                .await;
        }
        let first = Self::first_pending(progress, total);
        for (index, text) in messages.iter().enumerate().skip(first) {
            if progress.trigger_timeouts >= MAX_UNANSWERED_TRIGGERS {
                // Sent that often without an answer (a timeout, or a process killed while it
                // waited): ManyChat may have run it each time; never a third copy.
                return Err(AttemptError::TriggerMayHaveRun);
            }
            // Also on a resumed row: the previous trigger may have been moments ago.
            if index > 0 {
                tokio::time::sleep(self.settings.reply_gap).await;
            }
            self.write_message(row, index, text)
                .await
                .map_err(AttemptError::ManyChat)?;
            progress.trigger_timeouts += 1;
            self.store
                .record_outbox_progress(
                    row.id,
                    progress.messages_delivered,
                    progress.trigger_timeouts,
                )
                .await
                .map_err(AttemptError::Store)?;
            match self
                .manychat
                .send_flow(&row.subscriber_id, &self.settings.reply_flow_ns)
                .await
            {
                Ok(()) => {
                    progress.messages_delivered = index as i32 + 1;
                    progress.trigger_timeouts = 0;
                    // Saved before anything else goes, the actions included.
                    self.save_progress(row, *progress).await;
                }
                Err(error) if error.outcome_unknown() => {
                    return Err(AttemptError::TriggerUnanswered(error));
                }
                Err(error) => {
                    // Answered: ManyChat did not run it.
                    progress.trigger_timeouts -= 1;
                    self.save_progress(row, *progress).await;
                    return Err(AttemptError::ManyChat(error));
                }
            }
        }
        if resumed_after < total {
            tracing::info!(
                conversation = %row.conversation_id,
                row = row.id,
                messages = total,
                resumed_after,
                attempt = row.attempts,
                "deferred reply delivered"
            );
        }
        Ok(())
    }

    /// The index of the first message ManyChat has not accepted.
    fn first_pending(progress: &Progress, total: usize) -> usize {
        usize::try_from(progress.messages_delivered)
            .unwrap_or(0)
            .min(total)
    }

    /// The message's text into the reply field; with the handshake, its delivery id into the
    /// id field in the same request.
    async fn write_message(
        &self,
        row: &OutboxRow,
        index: usize,
        text: &str,
    ) -> Result<(), crate::manychat::ManyChatError> {
        let text = Value::String(text.to_owned());
        match &self.settings.handshake {
            None => {
                self.manychat
                    .set_field(&row.subscriber_id, &self.settings.reply_field, &text)
                    .await
            }
            Some(handshake) => {
                let id = Value::String(handshake::delivery_id(row.id, index));
                self.manychat
                    .set_fields(
                        &row.subscriber_id,
                        &[
                            (self.settings.reply_field.as_str(), text),
                            (handshake.delivery_id_field.as_str(), id),
                        ],
                    )
                    .await
            }
        }
    }

    /// The trigger of message `index` got no answer: reads the contact once, and when the reply
    /// flow recorded that message as delivered, counts it accepted (saved on the row) so it is
    /// not sent again. Otherwise the progress stays as it was and the message is sent again
    /// (at most once in all).
    async fn settle_by_handshake(
        &self,
        row: &OutboxRow,
        handshake: &DeliveryHandshake,
        index: usize,
        progress: &mut Progress,
    ) {
        let id = handshake::delivery_id(row.id, index);
        let (delivered, error) = handshake
            .read(&self.manychat, &row.subscriber_id, &id)
            .await;
        match delivered {
            Delivered::Yes => {
                progress.messages_delivered = index as i32 + 1;
                progress.trigger_timeouts = 0;
                self.save_progress(row, *progress).await;
                tracing::info!(
                    conversation = %row.conversation_id,
                    row = row.id,
                    message = index,
                    "unanswered trigger: the reply flow recorded the message as delivered; not sent again"
                );
            }
            Delivered::No => tracing::info!(
                conversation = %row.conversation_id,
                row = row.id,
                message = index,
                unanswered = progress.trigger_timeouts,
                "unanswered trigger: the reply flow did not record the message; sending it again"
            ),
            Delivered::Unknown => tracing::warn!(
                conversation = %row.conversation_id,
                row = row.id,
                message = index,
                unanswered = progress.trigger_timeouts,
                error_kind = error.as_ref().map(|e| e.kind()),
                "unanswered trigger: the contact could not be read; sending the message again at most once"
            ),
        }
    }
}
