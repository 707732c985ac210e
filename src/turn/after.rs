//! What a turn does once its response is written (012: actions follow their text): the
//! actions its reply staged, performed in order and recorded, then an inline escalation's
//! handoff (its own outbox row, which the worker retries if this attempt fails).

use super::TurnEngine;
use crate::actions::{self, ActionStatus, StagedAction};
use crate::ids::{ConversationId, SubscriberId};
use crate::store::Conversation;

/// Actions to perform after the Dynamic Block response is written (012: never before).
#[derive(Debug)]
pub struct AfterResponse {
    pub conversation: ConversationId,
    pub subscriber: SubscriberId,
    pub turn_id: i64,
    pub actions: Vec<StagedAction>,
    /// An escalation's handoff: its row, performed after the actions, and its entries, listed
    /// after the actions' in the record until the row's outcome replaces them.
    pub handoff_row: Option<i64>,
    pub handoff: Vec<StagedAction>,
}

impl TurnEngine {
    /// Performs actions after the response was written, records their outcome, then performs
    /// the handoff (its own outbox row, retried by the worker if this attempt fails).
    pub async fn run_after(&self, mut after: AfterResponse) {
        if !after.actions.is_empty() {
            actions::perform_all(
                &self.inner.manychat,
                &after.subscriber,
                after.conversation,
                &mut after.actions,
            )
            .await;
            // The tenant's plugin writes, against the config in force now (a tool a reload
            // removed fails without a request).
            crate::plugins::perform_writes(
                &self.inner.plugins,
                self.inner.config.snapshot().plugins.as_ref(),
                &self.inner.metrics,
                &after.subscriber,
                after.conversation,
                &mut after.actions,
            )
            .await;
            crate::actions::perform_nudges(
                self.inner.store.as_ref(),
                &self.inner.metrics,
                after.conversation,
                self.inner.clock.now(),
                &mut after.actions,
            )
            .await;
            after.actions.append(&mut after.handoff);
            if let Err(error) = self
                .inner
                .store
                .update_turn_actions(after.turn_id, &actions::record(&after.actions))
                .await
            {
                crate::store_failure!(
                    self.inner.store,
                    error.during("updating a turn's action record"),
                    conversation = %after.conversation,
                    "could not update the action record"
                );
            }
        }
        if let Some(row) = after.handoff_row {
            self.inner.handoffs.deliver_now(row).await;
        }
    }
}

/// The turn's actions to perform once its response is written, if there are any.
pub(super) fn after_response(
    conversation: &Conversation,
    turn_id: i64,
    actions: Vec<StagedAction>,
    handoff_row: Option<i64>,
    handoff: Vec<StagedAction>,
) -> Option<AfterResponse> {
    let any_staged = actions
        .iter()
        .any(|a| a.entry.status == ActionStatus::Staged);
    (any_staged || handoff_row.is_some()).then(|| AfterResponse {
        conversation: conversation.id,
        subscriber: conversation.subscriber_id.clone(),
        turn_id,
        actions: if any_staged { actions } else { Vec::new() },
        handoff_row,
        handoff,
    })
}
