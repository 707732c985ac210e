//! What a turn does once its response is written (012: actions follow their text): the
//! actions its reply staged, performed in order and recorded, then an inline escalation's
//! handoff (its own outbox row, which the worker retries if this attempt fails).
//!
//! A plugin write (the business's endpoint) is marked under way in the turn's record before its
//! request leaves (`plugins::UNDER_WAY`); a write whose mark could not be saved is not sent. A
//! process stopped while the endpoint held the request leaves the mark, and the write is settled
//! `failed` ("it may have run"), never sent again, as the outbox path does
//! (`settle_writes_under_way`: at start on a store one process owns, and on PostgreSQL by any
//! replica once the turn is older than [`STALE_MARK`]).

use super::TurnEngine;
use crate::actions::{self, ActionEntry, ActionStatus, StagedAction};
use crate::store::StoreError;

/// How old a turn must be before another replica takes its write's mark for one a stopped
/// process left: its post-response actions start within seconds and a write is bounded by
/// `plugins::WRITE_TIMEOUT`.
pub const STALE_MARK: chrono::Duration = chrono::Duration::minutes(5);

/// How far back a look for marks left by a stopped process reaches.
const MARKS_SINCE: chrono::Duration = chrono::Duration::days(2);
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
            self.perform_writes_marked(&mut after).await;
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

impl TurnEngine {
    /// Performs the turn's plugin writes in order, each marked under way in the turn's record
    /// before its request leaves; a write whose mark could not be saved is not sent.
    async fn perform_writes_marked(&self, after: &mut AfterResponse) {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        for index in 0..after.actions.len() {
            if !crate::plugins::pending_write(&after.actions[index]) {
                continue;
            }
            after.actions[index].entry.error = Some(crate::plugins::UNDER_WAY.to_owned());
            let marked = inner
                .store
                .update_turn_actions(after.turn_id, &actions::record(&after.actions))
                .await;
            if let Err(error) = marked {
                crate::store_failure!(
                    inner.store,
                    error.during("marking a plugin write under way"),
                    conversation = %after.conversation,
                    "plugin write not sent: it could not be marked under way"
                );
                let action = &mut after.actions[index];
                action.entry.status = ActionStatus::Failed;
                action.entry.error = Some("not sent: it could not be marked under way".to_owned());
                inner
                    .metrics
                    .action(&action.entry.tool, &ActionStatus::Failed.label());
                continue;
            }
            crate::plugins::perform_write(
                &inner.plugins,
                config.plugins.as_ref(),
                &inner.metrics,
                &after.subscriber,
                after.conversation,
                &mut after.actions[index],
            )
            .await;
        }
    }

    /// Settles the plugin writes a stopped process left under way (see the module doc):
    /// `failed`, "it may have run", never sent again. `older_than`: only marks on turns older
    /// than that (several processes share the store). Returns how many it settled.
    pub async fn settle_writes_under_way(
        &self,
        older_than: Option<chrono::Duration>,
    ) -> Result<usize, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        // The quoted value: the backends render the record with or without spaces.
        let marker = format!("\"{}\"", crate::plugins::UNDER_WAY);
        let turns = inner
            .store
            .turns_with_actions_containing(&marker, now - MARKS_SINCE)
            .await?;
        let mut settled = 0;
        for turn in turns {
            if older_than.is_some_and(|age| now - turn.created_at < age) {
                continue;
            }
            let Some(Ok(mut entries)) = turn
                .actions
                .clone()
                .map(serde_json::from_value::<Vec<ActionEntry>>)
            else {
                continue;
            };
            let mut changed = 0;
            for entry in entries.iter_mut().filter(|e| {
                e.status == ActionStatus::Staged
                    && e.error.as_deref() == Some(crate::plugins::UNDER_WAY)
            }) {
                entry.status = ActionStatus::Failed;
                entry.error = Some(crate::plugins::MAY_HAVE_RUN.to_owned());
                inner
                    .metrics
                    .action(&entry.tool, &ActionStatus::Failed.label());
                changed += 1;
            }
            if changed == 0 {
                continue;
            }
            let record = serde_json::to_value(&entries)
                .map_err(|e| StoreError::Corrupt(format!("action record: {e}")))?;
            inner.store.update_turn_actions(turn.id, &record).await?;
            tracing::warn!(
                conversation = %turn.conversation_id,
                writes = changed,
                "plugin writes under way when their process stopped settled failed; not sent again"
            );
            settled += changed;
        }
        Ok(settled)
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
