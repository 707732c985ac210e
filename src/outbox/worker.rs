//! The outbox worker: claims due rows, delivers them, and settles each row and its turn's
//! action record. `run_once` processes one batch and is what tests drive by hand.
//!
//! Two kinds of row: `reply` (field write + flow trigger per message, then the actions) and
//! `contact_token` (019: one write of the token field, skipped when a newer token generation
//! has superseded the row; see `crate::tokens::service`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Handoffs, MAX_ATTEMPTS, ReplyPayload, backoff};
use crate::actions::{self, ActionStatus};
use crate::clock::Clock;
use crate::manychat::{ManyChatClient, ManyChatError};
use crate::metrics::Metrics;
use crate::store::{ClaimRules, OutboxKind, OutboxRow, Store, StoreError};
use crate::tokens::{self, TokenPayload};

/// What the worker needs from the settings.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `MANYCHAT_REPLY_FIELD`: the per-contact custom field holding the reply text.
    pub reply_field: String,
    /// `MANYCHAT_REPLY_FLOW_NS`: the tenant flow that renders the reply field.
    pub reply_flow_ns: String,
    /// `MANYCHAT_REPLY_GAP_MS`: per-contact pacing.
    pub reply_gap: Duration,
    /// How often the worker looks for due rows.
    pub poll_interval: Duration,
    /// Rows claimed per batch.
    pub batch_size: i64,
    /// How long a claim lasts; longer than the slowest row (3 messages × gap + request timeouts).
    pub lease: Duration,
    /// `MANYCHAT_TOKEN_FIELD`: the per-contact custom field a `contact_token` row writes (019).
    pub token_field: String,
}

impl WorkerSettings {
    pub fn new(reply_field: String, reply_flow_ns: String, reply_gap: Duration) -> Self {
        Self {
            reply_field,
            reply_flow_ns,
            reply_gap,
            poll_interval: Duration::from_secs(1),
            batch_size: 10,
            lease: Duration::from_secs(180),
            token_field: "ai_token".to_owned(),
        }
    }

    /// Sets `MANYCHAT_TOKEN_FIELD` (the default is its documented default, `ai_token`).
    pub fn with_token_field(mut self, token_field: impl Into<String>) -> Self {
        self.token_field = token_field.into();
        self
    }
}

#[derive(Clone)]
pub struct OutboxWorker {
    store: Arc<dyn Store>,
    manychat: ManyChatClient,
    clock: Clock,
    settings: Arc<WorkerSettings>,
    metrics: Arc<Metrics>,
    handoffs: Handoffs,
}

/// Why one attempt at a row failed.
enum AttemptError {
    ManyChat(ManyChatError),
    BadPayload(String),
    /// The store could not answer a question the delivery depends on; retried like a network
    /// error.
    Store(StoreError),
}

impl OutboxWorker {
    pub fn new(
        store: Arc<dyn Store>,
        manychat: ManyChatClient,
        clock: Clock,
        settings: WorkerSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            handoffs: Handoffs::new(store.clone(), manychat.clone(), clock, metrics.clone()),
            store,
            manychat,
            clock,
            settings: Arc::new(settings),
            metrics,
        }
    }

    /// Polls until `shutdown` fires. A batch in hand is always finished; a database error is
    /// logged and the loop goes on.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!("outbox worker started");
        loop {
            match self.run_once().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(rows = n, "outbox batch delivered"),
                Err(error) => tracing::error!(error = %error, "outbox worker: database error"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
            }
        }
        tracing::info!("outbox worker stopped");
    }

    /// Claims one batch of due rows and processes it to the end. Rows of different contacts are
    /// delivered concurrently; a contact's rows in the order they were written. Returns the
    /// number of rows processed.
    pub async fn run_once(&self) -> Result<usize, StoreError> {
        let rows = self
            .store
            .claim_outbox(ClaimRules {
                now: self.clock.now(),
                limit: self.settings.batch_size,
                lease: self.settings.lease,
                reply_gap: self.settings.reply_gap,
            })
            .await?;
        let count = rows.len();
        let mut by_contact: BTreeMap<uuid::Uuid, Vec<OutboxRow>> = BTreeMap::new();
        for row in rows {
            by_contact.entry(row.conversation_id).or_default().push(row);
        }
        let mut lanes = tokio::task::JoinSet::new();
        for (_, rows) in by_contact {
            let worker = self.clone();
            lanes.spawn(async move {
                for row in rows {
                    worker.process(row).await;
                }
            });
        }
        while lanes.join_next().await.is_some() {}
        Ok(count)
    }

    async fn process(&self, row: OutboxRow) {
        let result = match row.kind {
            OutboxKind::Reply => self.deliver_reply(&row).await,
            OutboxKind::ContactToken => self.deliver_token(&row).await,
            // Retried on its own terms (see `handoff`): it settles itself.
            OutboxKind::Handoff => return self.handoffs.perform(&row).await,
        };
        let settled = match result {
            Ok(()) => {
                self.metrics.outbox_delivered.inc();
                self.store.mark_delivered(row.id, self.clock.now()).await
            }
            Err(error) => self.record_failure(&row, error).await,
        };
        if let Err(error) = settled {
            // The row stays `delivering` and is claimed again when its lease lapses.
            tracing::error!(row = row.id, error = %error, "outbox: could not settle row");
        }
    }

    async fn deliver_reply(&self, row: &OutboxRow) -> Result<(), AttemptError> {
        let mut payload: ReplyPayload = serde_json::from_value(row.payload.clone())
            .map_err(|e| AttemptError::BadPayload(format!("reply payload: {e}")))?;
        for (index, text) in payload.messages.iter().enumerate() {
            if index > 0 {
                tokio::time::sleep(self.settings.reply_gap).await;
            }
            self.manychat
                .set_field(
                    &row.subscriber_id,
                    &self.settings.reply_field,
                    &serde_json::Value::String(text.clone()),
                )
                .await
                .map_err(AttemptError::ManyChat)?;
            self.manychat
                .send_flow(&row.subscriber_id, &self.settings.reply_flow_ns)
                .await
                .map_err(AttemptError::ManyChat)?;
        }
        tracing::info!(
            conversation = %row.conversation_id,
            row = row.id,
            messages = payload.messages.len(),
            attempt = row.attempts,
            "deferred reply delivered"
        );
        // Actions follow the text, once: this is the row's first (and only) successful delivery.
        if !payload.actions.is_empty() {
            actions::perform_all(
                &self.manychat,
                &row.subscriber_id,
                row.conversation_id,
                &mut payload.actions,
            )
            .await;
            self.save_actions(&payload).await;
        }
        Ok(())
    }

    /// 019: writes a `contact_token` row's token into the contact's token field, unless the
    /// conversation has moved to a newer generation since (the row is then superseded: settled
    /// as delivered without a request, so an old token never overwrites a newer one). See
    /// `crate::tokens::service` for why the row holds the plain token.
    async fn deliver_token(&self, row: &OutboxRow) -> Result<(), AttemptError> {
        let payload: TokenPayload = serde_json::from_value(row.payload.clone())
            // serde's message may quote the offending value: name the row only.
            .map_err(|_| AttemptError::BadPayload("contact_token payload is malformed".into()))?;
        let conversation = self
            .store
            .conversation(row.conversation_id)
            .await
            .map_err(AttemptError::Store)?
            .ok_or_else(|| {
                AttemptError::BadPayload("contact_token row names no conversation".into())
            })?;
        if conversation.token_generation != payload.generation {
            tracing::info!(
                conversation = %row.conversation_id,
                row = row.id,
                generation = payload.generation,
                current_generation = conversation.token_generation,
                "contact token superseded by a newer one; not written"
            );
            return Ok(());
        }
        let current = conversation.token_hash.as_deref().unwrap_or_default();
        if !tokens::matches(&payload.token, current) {
            return Err(AttemptError::BadPayload(
                "contact_token row does not match the conversation's current token".into(),
            ));
        }
        self.manychat
            .set_field(
                &row.subscriber_id,
                &self.settings.token_field,
                &serde_json::Value::String(payload.token),
            )
            .await
            .map_err(AttemptError::ManyChat)?;
        tracing::info!(
            conversation = %row.conversation_id,
            row = row.id,
            generation = payload.generation,
            attempt = row.attempts,
            "deferred contact token written"
        );
        Ok(())
    }

    async fn record_failure(&self, row: &OutboxRow, error: AttemptError) -> Result<(), StoreError> {
        let (retryable, message, kind) = match &error {
            AttemptError::ManyChat(e) => (e.is_retryable(), e.to_string(), e.kind()),
            AttemptError::BadPayload(m) => (false, m.clone(), "bad_payload"),
            AttemptError::Store(e) => (true, e.to_string(), "store"),
        };
        if retryable && row.attempts < MAX_ATTEMPTS {
            let due = self.clock.now()
                + chrono::Duration::from_std(backoff(row.attempts))
                    .unwrap_or(chrono::Duration::seconds(300));
            tracing::warn!(
                conversation = %row.conversation_id,
                row = row.id,
                attempt = row.attempts,
                error_kind = kind,
                "outbox delivery failed; will retry"
            );
            self.metrics.outbox_retried.inc();
            return self.store.mark_retry(row.id, due, &message).await;
        }
        tracing::error!(
            conversation = %row.conversation_id,
            row = row.id,
            attempt = row.attempts,
            error_kind = kind,
            "outbox row dead-lettered"
        );
        self.metrics.outbox_dead_lettered.inc();
        self.store
            .mark_failed(row.id, &message, self.clock.now())
            .await?;
        if row.kind == OutboxKind::Reply
            && let Ok(mut payload) = serde_json::from_value::<ReplyPayload>(row.payload.clone())
            && actions::settle_staged(&mut payload.actions, ActionStatus::DeadLettered) > 0
        {
            self.save_actions(&payload).await;
        }
        Ok(())
    }

    async fn save_actions(&self, payload: &ReplyPayload) {
        let Some(turn_id) = payload.turn_id else {
            return;
        };
        if let Err(error) = self
            .store
            .update_turn_actions(turn_id, &actions::record(&payload.actions))
            .await
        {
            tracing::error!(turn = turn_id, error = %error, "could not update the action record");
        }
    }
}
