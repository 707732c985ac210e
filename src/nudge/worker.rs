//! The nudge worker (025): each pass also sends the window-closing flows due (031,
//! `super::closing`). It claims due nudges atomically and re-checks each one, cheapest first,
//! before any model call. The turn itself is behind [`NudgeTurn`] (`super::turn` on the real
//! agent); `serve` and `worker` run it every `NUDGE_POLL_MS`.
//!
//! Invariants: a claimed row is `running` until it is settled under its own claim (a
//! cancellation by `Store::settle_nudge`, a nudge turn by its one write,
//! `Store::record_nudge_turn`), so an inbound message that cancels it meanwhile wins; a row left
//! `running` by a dead process is never claimed again, and after `MODEL_ABORT_MS` plus
//! [`LOST_MARGIN`] it is marked `lost` and counted; a window-closing row likewise (031). Every state change is one log line with the
//! conversation's UUID and the reason, and one count in `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::rules::{self, CancelReason, DueFacts};
use crate::clock::Clock;
use crate::config::{ConfigHandle, TenantConfig};
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;
use crate::store::{
    Conversation, During, Nudge, NudgeStatus, Store, StoreError, TurnContext, TurnContextQuery,
};

/// 025's poll interval (`pollIntervalMs`).
pub const DEFAULT_POLL: Duration = Duration::from_secs(15);
/// 025's batch.
pub const BATCH: i64 = 10;
/// How long after its model call's bound a `running` row is taken for lost: a live worker has
/// settled it by then (its model call is cut off at `MODEL_ABORT_MS`, its write takes
/// milliseconds, and its checks' one read at most the client's 10 s).
pub const LOST_MARGIN: Duration = Duration::from_secs(60);

/// The turn outcome of a follow-up that went out.
pub const SENT: &str = crate::store::NUDGE_SENT;
/// The turn outcome of a follow-up the model declined, or whose call failed.
pub const SKIPPED: &str = "nudge_skipped";

/// What the nudge turn did. The turn settles the nudge itself, in the write that records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NudgeVerdict {
    /// The follow-up was recorded and queued through the outbox (`nudge_sent`); the nudge is
    /// `sent`.
    Sent,
    /// Nothing was sent (`nudge_skipped`): the model escalated, or its call failed; the nudge
    /// is `skipped` with this reason.
    Skipped(&'static str),
    /// The nudge was no longer running under this claim when the turn came to write (the
    /// contact wrote during the model call, or it was marked lost): nothing was written.
    Withdrawn,
    /// The turn could not be recorded: the nudge stays running and is marked lost.
    Failed,
    /// The turn did not start (no model call, nothing written): the worker cancels the nudge
    /// with this reason. `cap_reached` when the budget ledger refused its reservation: the
    /// day's spend and what the turns in flight reserved reach the cap.
    Cancelled(CancelReason),
}

/// The nudge turn: the agent on the conversation's history and the follow-up note. It records
/// itself and settles `nudge` in one write, only under the nudge's claim.
#[async_trait]
pub trait NudgeTurn: Send + Sync {
    async fn run(
        &self,
        config: Arc<TenantConfig>,
        conversation: &Conversation,
        nudge: &Nudge,
        context: TurnContext,
    ) -> NudgeVerdict;
}

#[derive(Debug, Clone, Copy)]
pub struct NudgeSettings {
    pub poll: Duration,
    /// `MODEL_ABORT_MS`: the bound of a nudge turn's model call.
    pub model_abort: Duration,
}

#[derive(Clone)]
pub struct NudgeWorker {
    pub(super) store: Arc<dyn Store>,
    pub(super) manychat: ManyChatClient,
    config: Arc<ConfigHandle>,
    pub(super) clock: Clock,
    pub(super) metrics: Arc<Metrics>,
    settings: NudgeSettings,
    turn: Arc<dyn NudgeTurn>,
}

/// What one pass did (tests, logs).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    pub claimed: usize,
    /// Nudges marked lost.
    pub lost: u64,
    /// 031: window-closing rows marked lost.
    pub lost_window_closings: u64,
}

impl NudgeWorker {
    pub fn new(
        store: Arc<dyn Store>,
        manychat: ManyChatClient,
        config: Arc<ConfigHandle>,
        clock: Clock,
        metrics: Arc<Metrics>,
        settings: NudgeSettings,
        turn: Arc<dyn NudgeTurn>,
    ) -> Self {
        Self {
            store,
            manychat,
            config,
            clock,
            metrics,
            settings,
            turn,
        }
    }

    /// Polls until `shutdown` fires; the nudge in hand is finished first.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            self.run_once().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.settings.poll) => {}
            }
        }
    }

    /// One pass: rows lost by a dead process are marked, then due rows claimed and handled.
    pub async fn run_once(&self) -> Pass {
        let now = self.clock.now();
        let mut pass = Pass::default();
        let bound = self.settings.model_abort + LOST_MARGIN;
        let cutoff = now - chrono::Duration::from_std(bound).unwrap_or(chrono::Duration::zero());
        match self.store.mark_lost_nudges(cutoff, now).await {
            Ok(lost) => {
                pass.lost = lost.len() as u64;
                for conversation in lost {
                    self.metrics.nudge("lost", "process_died");
                    tracing::warn!(
                        conversation = %conversation,
                        state = "lost",
                        reason = "process_died",
                        "nudge left running by a stopped process marked lost; never sent"
                    );
                }
            }
            Err(error) => crate::store_failure!(
                self.store,
                error.during("marking lost nudges"),
                "could not look for lost nudges"
            ),
        }
        // 031: window-closing rows a dead process left running, by the same bound; then the
        // flows due now (before the nudges: sending one cancels the contact's pending nudge).
        pass.lost_window_closings = self.mark_lost_window_closings(cutoff, now).await;
        self.window_closings(&self.config.snapshot()).await;
        let claimed = match self.store.claim_due_nudges(now, BATCH).await {
            Ok(claimed) => claimed,
            Err(error) => {
                crate::store_failure!(
                    self.store,
                    error.during("claiming due nudges"),
                    "could not claim due nudges"
                );
                return pass;
            }
        };
        pass.claimed = claimed.len();
        for nudge in claimed {
            self.handle(nudge).await;
        }
        pass
    }

    async fn handle(&self, nudge: Nudge) {
        let config = self.config.snapshot();
        let (conversation, context) = match self.read_nudged(&config, &nudge).await {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(error) => {
                crate::store_failure!(
                    self.store,
                    error,
                    conversation = %nudge.conversation_id,
                    "could not read the nudge's conversation or history; it stays running and is marked lost"
                );
                return;
            }
        };
        if let Some(reason) = self.check(&config, &conversation, &nudge, &context).await {
            self.settle(&nudge, NudgeStatus::Cancelled, reason.as_str())
                .await;
            return;
        }
        match self
            .turn
            .run(config.clone(), &conversation, &nudge, context)
            .await
        {
            NudgeVerdict::Sent => {
                self.metrics.turn(SENT);
                self.settled(&nudge, NudgeStatus::Sent, "");
            }
            NudgeVerdict::Skipped(reason) => {
                self.metrics.turn(SKIPPED);
                self.settled(&nudge, NudgeStatus::Skipped, reason);
            }
            // The cancel (or the lost mark) was counted and logged where it happened.
            NudgeVerdict::Withdrawn => tracing::info!(
                conversation = %nudge.conversation_id,
                "nudge turn discarded: the nudge was cancelled or lost during its model call"
            ),
            // Logged by the turn; the lost mark counts it.
            NudgeVerdict::Failed => {}
            NudgeVerdict::Cancelled(reason) => {
                self.settle(&nudge, NudgeStatus::Cancelled, reason.as_str())
                    .await
            }
        }
    }

    /// The nudge's conversation and the history its turn reads; `None` when the conversation is
    /// gone.
    async fn read_nudged(
        &self,
        config: &TenantConfig,
        nudge: &Nudge,
    ) -> Result<Option<(Conversation, TurnContext)>, StoreError> {
        let Some(conversation) = self
            .store
            .conversation(nudge.conversation_id)
            .await
            .during("reading a nudge's conversation")?
        else {
            return Ok(None);
        };
        let context = self
            .store
            .turn_context(&conversation, context_query(config, self.clock.now()))
            .await
            .during("reading a nudge's history")?;
        Ok(Some((conversation, context)))
    }

    /// 025's checks in order, cheapest first; the `human_active` read and the rate limit last.
    async fn check(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        nudge: &Nudge,
        context: &TurnContext,
    ) -> Option<CancelReason> {
        let now = self.clock.now();
        let rules_config = &config.rules;
        let known = crate::sales::known::from_record(
            config,
            &context.sales.clone().unwrap_or_default(),
            crate::sales::known::Request {
                offering: None,
                bound: true,
                now,
            },
        );
        let idle = chrono::Duration::hours(i64::from(rules_config.idle_reset_hours));
        let turn_cap = crate::turn::messages_since_idle_gap(now, &context.earlier_user_turns, idle)
            > i64::from(rules_config.max_turns_per_conversation);
        let budget = context.spent.tokens >= rules_config.budget.daily_token_cap as i64
            || context.spent.cost_usd >= rules_config.budget.daily_cost_cap_usd;
        let facts = DueFacts {
            now,
            scheduled_at: nudge.scheduled_at,
            escalated_at: conversation.escalated_at,
            last_inbound_at: conversation.last_message_at,
            link_sent: known.stage == Some(crate::sales::LINK_SENT),
            turn_cap_or_budget: turn_cap || budget,
        };
        if let Some(reason) = rules::before_read(&facts) {
            return Some(reason);
        }
        // A contact held for a person gets nothing unprompted (`handoff`), whenever the nudge
        // was scheduled.
        let hours = crate::handoff::hold_hours(config);
        if matches!(
            crate::handoff::hold_at(conversation, hours, now),
            crate::handoff::Hold::Held { .. }
        ) {
            return Some(CancelReason::Escalated);
        }
        if let Some(reason) =
            rules::human_active_check(&self.manychat, config, &conversation.subscriber_id).await
        {
            return Some(reason);
        }
        // Last: the rate limit counts the turn.
        if context.rate_count + 1 > i64::from(rules_config.rate_limit.turns_per_subscriber_per_hour)
        {
            return Some(CancelReason::CapReached);
        }
        None
    }

    async fn settle(&self, nudge: &Nudge, status: NudgeStatus, reason: &'static str) {
        let now = self.clock.now();
        let reason_column = (!reason.is_empty()).then_some(reason);
        match self
            .store
            .settle_nudge(nudge, status, reason_column, now)
            .await
        {
            Ok(true) => self.settled(nudge, status, reason),
            // Cancelled meanwhile (the contact wrote): that change was logged where it happened.
            Ok(false) => {}
            Err(error) => {
                crate::store_failure!(
                    self.store,
                    error.during("settling a nudge"),
                    conversation = %nudge.conversation_id,
                    "could not settle the nudge; it stays running and is marked lost"
                )
            }
        }
    }
}

impl NudgeWorker {
    /// Counts and logs a state change this worker made.
    fn settled(&self, nudge: &Nudge, status: NudgeStatus, reason: &'static str) {
        self.metrics.nudge(status.as_str(), reason);
        tracing::info!(
            conversation = %nudge.conversation_id,
            state = status.as_str(),
            reason,
            "nudge settled"
        );
    }
}

/// What the checks and a nudge turn read: the cap's and history's reads (a nudge turn reads
/// history), today's spend, the contact's count this hour and the sales record.
fn context_query(config: &TenantConfig, now: chrono::DateTime<chrono::Utc>) -> TurnContextQuery {
    let history_since = now - chrono::Duration::days(i64::from(config.rules.history_days));
    TurnContextQuery {
        cap_limit: Some(i64::from(config.rules.max_turns_per_conversation) + 1),
        history: Some((history_since, crate::turn::HISTORY_TURNS)),
        day: now.date_naive(),
        rate_window: Some(hour_start(now)),
        sales: true,
    }
}

/// The hourly rate window `now` falls in (the turn's).
pub(super) fn hour_start(now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    use chrono::Timelike;
    now.with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(now)
}
