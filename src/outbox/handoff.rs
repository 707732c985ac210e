//! The handoff row (a handoff is never lost). When a turn escalates, the tenant's
//! handoff (`rules.handoff`: a tag and/or a flow) is written as a `handoff` outbox row in the
//! same write as the turn, and performed like a reply is delivered: a failure ManyChat may get
//! over (429, 5xx, network) is retried with the outbox's backoff until it is too old to help
//! (`retry`), a crash leaves the row for the
//! worker, and the claim rule keeps it behind any earlier reply of its contact. After an inline
//! escalation the request performs it right after its response is written (`deliver_now`);
//! the worker takes it only if that did not happen.
//!
//! A retried row performs its actions again from the first: the tag comes first and adding a
//! tag twice changes nothing, the flow comes last, so only a flow that failed is sent again.
//! The escalated turn's action record is updated with the outcome (entries with
//! `origin: "handoff"`).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::retry;
use crate::actions::{self, ActionEntry, ActionStatus, StagedAction};
use crate::clock::Clock;
use crate::escalation::Escalation;
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;
use crate::store::{Exchange, NewTurn, OutboxRow, Store, StoreError};

/// How long a request's own claim on its handoff row lasts (a few ManyChat calls).
const CLAIM_LEASE: Duration = Duration::from_secs(60);

/// The payload of a `handoff` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffPayload {
    /// The handoff's actions (`origin: "handoff"`), in order: tag, then flow.
    pub actions: Vec<StagedAction>,
    /// The escalated agent turn whose record lists these actions; filled by the store when the
    /// row is written with that turn.
    #[serde(default)]
    pub turn_id: Option<i64>,
    /// A promise's fallback: no agent turn was recorded, `turn_id` is the contact's message,
    /// which is marked escalated (`interrupted`) when the fallback is performed.
    #[serde(default)]
    pub fallback: bool,
}

/// Performs handoff rows; cheap to clone.
#[derive(Clone)]
pub struct Handoffs {
    store: Arc<dyn Store>,
    manychat: ManyChatClient,
    clock: Clock,
    metrics: Arc<Metrics>,
    /// `OUTBOX_GIVE_UP_AFTER_MS`.
    give_up_after: Duration,
}

impl Handoffs {
    pub fn new(
        store: Arc<dyn Store>,
        manychat: ManyChatClient,
        clock: Clock,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            manychat,
            clock,
            metrics,
            give_up_after: retry::DEFAULT_GIVE_UP_AFTER,
        }
    }

    /// Sets `OUTBOX_GIVE_UP_AFTER_MS` (the default is [`retry::DEFAULT_GIVE_UP_AFTER`]).
    pub fn with_give_up_after(mut self, give_up_after: Duration) -> Self {
        self.give_up_after = give_up_after;
        self
    }

    /// Claims the row and performs it now (after an inline escalation's response is written).
    /// A row the worker took already, or that is gone, is left alone.
    pub async fn deliver_now(&self, row_id: i64) {
        match self
            .store
            .claim_outbox_row(row_id, self.clock.now(), CLAIM_LEASE)
            .await
        {
            Ok(Some(row)) => self.perform(&row).await,
            Ok(None) => {}
            // The row stays pending; the worker performs it when it falls due.
            Err(error) => crate::store_failure!(
                self.store,
                error.during("claiming a handoff row"),
                row = row_id,
                "handoff: could not claim"
            ),
        }
    }

    /// Performs a claimed `handoff` row and settles it: delivered, retried, or dead-lettered.
    pub async fn perform(&self, row: &OutboxRow) {
        if let Err(error) = self.attempt(row).await {
            crate::store_failure!(
                self.store,
                error.during("performing a handoff row"),
                row = row.id,
                "handoff: could not settle row"
            );
        }
    }

    async fn attempt(&self, row: &OutboxRow) -> Result<(), StoreError> {
        let Ok(mut payload) = serde_json::from_value::<HandoffPayload>(row.payload.clone()) else {
            // serde's message may quote the payload: name the row only.
            return self
                .store
                .mark_failed(row.id, "handoff payload is malformed", self.clock.now())
                .await;
        };
        // A promise's fallback whose contact was handed to a person since the promise was
        // written (the fallback of an earlier promise, an escalation): the contact is in a
        // person's queue already, so the tag and the flow are not performed again.
        if payload.fallback && self.handed_off_since(row).await? {
            tracing::info!(
                conversation = %row.conversation_id,
                row = row.id,
                "handoff not repeated: the contact was handed to a person since"
            );
            self.store.mark_delivered(row.id, self.clock.now()).await?;
            if let Some(message) = payload.turn_id {
                self.mark_interrupted(row, message).await?;
            }
            return Ok(());
        }
        let mut passing = None;
        for action in payload
            .actions
            .iter_mut()
            .filter(|a| a.entry.status == ActionStatus::Staged)
        {
            let Err(error) = actions::perform_one(
                &self.manychat,
                &row.subscriber_id,
                row.conversation_id,
                action,
            )
            .await
            else {
                continue;
            };
            tracing::warn!(
                conversation = %row.conversation_id,
                row = row.id,
                tool = %action.entry.tool,
                error_kind = error.kind(),
                attempt = row.attempts,
                "handoff action failed"
            );
            if error.is_retryable() {
                let give_up = retry::give_up_at(row.created_at, None, self.give_up_after);
                let retry_after = self.manychat.retry_after();
                if let Some(due) =
                    retry::retry_at(self.clock.now(), give_up, row.attempts, retry_after)
                {
                    passing = Some((error, due));
                    break;
                }
            }
        }
        let now = self.clock.now();
        if let Some((error, due)) = passing {
            self.metrics.outbox_retried.inc();
            return self.store.mark_retry(row.id, due, &error.to_string()).await;
        }
        // Done: every action performed or refused for good.
        let refused = payload
            .actions
            .iter()
            .filter(|a| a.entry.status == ActionStatus::Failed)
            .count();
        if refused > 0 {
            self.metrics.handoff_failed.inc();
            tracing::error!(
                conversation = %row.conversation_id,
                row = row.id,
                refused,
                "handoff refused by ManyChat; the contact waits for a person without the handoff"
            );
        } else {
            tracing::info!(conversation = %row.conversation_id, row = row.id, "handoff performed");
        }
        if refused > 0 {
            // Dead-lettered, so an operator sees it among the failed rows.
            let error = format!("handoff refused: {refused} action(s)");
            self.store.mark_failed(row.id, &error, now).await?;
        } else {
            self.store.mark_delivered(row.id, now).await?;
        }
        match (payload.fallback, payload.turn_id) {
            (true, Some(message)) => self.mark_interrupted(row, message).await?,
            (false, Some(turn_id)) => self.update_record(turn_id, &payload.actions).await?,
            (_, None) => {}
        }
        Ok(())
    }

    /// Whether the row's contact was handed to a person after the row was written, and not
    /// handed back since.
    async fn handed_off_since(&self, row: &OutboxRow) -> Result<bool, StoreError> {
        let conversation = self.store.conversation(row.conversation_id).await?;
        Ok(conversation.is_some_and(|c| {
            c.escalated_at
                .is_some_and(|at| at > row.created_at && !crate::handoff::released_since(&c, at))
        }))
    }

    /// A promise's fallback: the contact's message records why it was handed over, and the
    /// conversation is marked escalated.
    async fn mark_interrupted(&self, row: &OutboxRow, message: i64) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut reason = NewTurn::user(row.conversation_id, "", false, now);
        reason.escalation_reason = Some(Escalation::Interrupted.as_str().to_owned());
        self.store
            .record_exchange(Exchange {
                recorded: Some(message),
                escalated_at: Some(now),
                ..Exchange::of(&reason)
            })
            .await?;
        self.metrics.escalation(Escalation::Interrupted.as_str());
        tracing::warn!(
            conversation = %row.conversation_id,
            reason = Escalation::Interrupted.as_str(),
            "owed reply given as the escalation copy: the turn did not finish"
        );
        Ok(())
    }

    /// Writes the handoff's outcome into its turn's record, in place of the `handoff` entries
    /// (which come last in a record).
    async fn update_record(&self, turn_id: i64, done: &[StagedAction]) -> Result<(), StoreError> {
        let Some(turn) = self.store.turn(turn_id).await? else {
            return Ok(());
        };
        let mut entries: Vec<ActionEntry> = turn
            .actions
            .and_then(|record| serde_json::from_value(record).ok())
            .unwrap_or_default();
        // In place of the listed entries; appended when a deferred reply's record, written
        // before this row could run, no longer lists them.
        entries.retain(|e| e.origin.as_deref() != Some("handoff"));
        entries.extend(done.iter().map(|a| a.entry.clone()));
        let record = serde_json::to_value(&entries)
            .map_err(|e| StoreError::Corrupt(format!("action record: {e}")))?;
        self.store.update_turn_actions(turn_id, &record).await
    }
}
