//! A delivered reply's actions, each performed once from where the last attempt left it: the
//! ManyChat actions, then the tenant's plugin writes. The row records before each request that
//! it is under way and after it the outcome, so a process killed at any moment resumes after
//! what was answered. A ManyChat action found under way is sent once more at most
//! ([`MAX_UNANSWERED_TRIGGERS`]); a plugin write found under way is never sent again: the
//! business's endpoint may have run it, and a plugin write is performed once, never retried.

use super::{AttemptError, OutboxWorker, Progress};
use crate::actions::{self, ActionStatus, StagedAction};
use crate::outbox::MAX_UNANSWERED_TRIGGERS;
use crate::store::OutboxRow;

impl OutboxWorker {
    /// Performs a delivered reply's pending actions in order, saving on the row before each
    /// request that it is under way and after it what ManyChat answered. An action whose request
    /// went out [`MAX_UNANSWERED_TRIGGERS`] times without an answer (the process was killed
    /// while it waited) is settled `failed` instead of being sent again.
    pub(super) async fn perform_actions(
        &self,
        row: &OutboxRow,
        staged: &mut [StagedAction],
        progress: &mut Progress,
    ) {
        for index in 0..staged.len() {
            if !actions::pending_at(staged, index) {
                continue;
            }
            if progress.trigger_timeouts >= MAX_UNANSWERED_TRIGGERS {
                let action = &mut staged[index];
                action.entry.status = ActionStatus::Failed;
                action.entry.error =
                    Some("sent without an answer twice; not sent again (it may have run)".into());
                action.operation = actions::Operation::Cleared;
                self.metrics
                    .action(&action.entry.tool, &ActionStatus::Failed.label());
                progress.trigger_timeouts = 0;
                let _ = self.save_action_progress(row, staged, *progress).await;
                continue;
            }
            progress.trigger_timeouts += 1;
            let _ = self.save_action_progress(row, staged, *progress).await;
            actions::perform_at(
                &self.manychat,
                &row.subscriber_id,
                row.conversation_id,
                staged,
                index,
            )
            .await;
            progress.trigger_timeouts = 0;
            let _ = self.save_action_progress(row, staged, *progress).await;
        }
    }

    /// Records the actions' outcomes so far and the requests under way on the row; a failure is
    /// logged and returned (a plugin write is not sent unless this succeeded).
    async fn save_action_progress(
        &self,
        row: &OutboxRow,
        staged: &[StagedAction],
        progress: Progress,
    ) -> Result<(), AttemptError> {
        let recorded = serde_json::to_value(staged).map_err(|error| {
            tracing::error!(row = row.id, error = %error, "outbox: could not encode the actions");
            AttemptError::BadPayload("the actions could not be encoded".into())
        })?;
        self.store
            .record_outbox_actions(row.id, &recorded, progress.trigger_timeouts)
            .await
            .map_err(|error| {
                let error = error.during("recording an outbox row's action progress");
                crate::store_failure!(
                    self.store,
                    error,
                    row = row.id,
                    "outbox: could not record the actions' progress"
                );
                AttemptError::Store(error)
            })
    }

    /// Performs the reply's staged plugin writes in order, after its ManyChat actions: the row
    /// says a write is under way (`trigger_timeouts` 1) before its request leaves, and holds its
    /// outcome after. A write found under way (its process stopped while it waited) is settled
    /// `failed`, never sent again. A write whose "under way" could not be saved is not sent:
    /// the row is tried again later, from that write.
    pub(super) async fn perform_plugin_writes(
        &self,
        row: &OutboxRow,
        staged: &mut [StagedAction],
        progress: &mut Progress,
    ) -> Result<(), AttemptError> {
        let config = self.config.as_ref().map(|c| c.snapshot());
        let plugins = config.as_ref().and_then(|c| c.plugins.as_ref());
        for index in 0..staged.len() {
            if !crate::plugins::pending_write(&staged[index]) {
                continue;
            }
            if progress.trigger_timeouts > 0 {
                crate::plugins::settle_may_have_run(
                    &self.metrics,
                    row.conversation_id,
                    &mut staged[index],
                );
                progress.trigger_timeouts = 0;
                self.save_action_progress(row, staged, *progress).await?;
                continue;
            }
            progress.trigger_timeouts = 1;
            self.save_action_progress(row, staged, *progress).await?;
            crate::plugins::perform_write(
                &self.plugins,
                plugins,
                &self.metrics,
                &row.subscriber_id,
                row.conversation_id,
                &mut staged[index],
            )
            .await;
            progress.trigger_timeouts = 0;
            // A failure is logged: should the process stop before the next save, the write is
            // found under way and never sent again.
            let _ = self.save_action_progress(row, staged, *progress).await;
        }
        Ok(())
    }
}
