//! The outbox worker: claims due rows, delivers them, and settles each row and its turn's
//! action record. `run` is the service's loop; `run_once` claims one batch and processes it to
//! the end, and is what tests drive by hand.
//!
//! Scheduling:
//! - Contacts never wait for each other. Each contact's rows are delivered by their own task (a
//!   lane); `run` claims again as soon as a claim came back full or a lane ended, never waiting
//!   for the slowest row of a batch. At most `max_in_flight` contacts are in delivery at once,
//!   enough to keep the shared ManyChat limiter busy while some of them wait a pacing gap or a
//!   slow call; the limiter alone sets the pace (never above 10/s).
//! - A contact's rows run one at a time, in the order claimed: a row claimed while its contact's
//!   lane is busy joins that lane. Across workers the store's claim rules keep a contact's replies
//!   in order and one at a time.
//! - Every row a worker holds (in delivery or waiting in a lane) has its lease renewed every
//!   quarter lease, so a short lease frees a crashed worker's rows within seconds while a live
//!   worker's row, however slow its ManyChat call, is never taken by another.
//!
//! Two kinds of row, dispatched in [`OutboxWorker::attempt`]: `reply` (field write + flow
//! trigger per message, then the actions) and `contact_token` (019: one write of the token field,
//! skipped when a newer token generation has superseded the row; see `crate::tokens::service`).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::handshake::DeliveryHandshake;
use super::retry::{self, Outage};
use super::{HandoffPayload, Handoffs, MAX_UNANSWERED_TRIGGERS, ReplyPayload};
use crate::actions::{self, ActionStatus, StagedAction};
use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::escalation::Escalation;
use crate::ids::ConversationId;
use crate::manychat::{ManyChatClient, ManyChatError};
use crate::metrics::Metrics;
use crate::store::{
    ClaimRules, During, Exchange, NewOutboxRow, NewTurn, OutboxKind, OutboxRow, Store, StoreError,
};
use crate::tokens::{self, TokenPayload};

mod reply_actions;
mod reply_messages;

/// The default `lease`: short, so a crashed worker's rows are taken again within seconds; the
/// live worker renews it every quarter lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// How long, once the drain's bound is reached, a row already in delivery may finish its request
/// in flight before its lane is abandoned (its lease lapses; the next process resumes it).
pub const LANE_GRACE: Duration = Duration::from_secs(1);

/// The default `shutdown_drain` (`SHUTDOWN_DRAIN_MS`): ten seconds.
pub const DEFAULT_SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

/// The default `max_in_flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// What the worker needs from the settings.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `MANYCHAT_REPLY_FIELD`: the per-contact custom field holding the reply text.
    pub reply_field: String,
    /// `MANYCHAT_REPLY_FLOW_NS`: the tenant flow that renders the reply field.
    pub reply_flow_ns: String,
    /// `MANYCHAT_REPLY_GAP_MS`: per-contact pacing.
    pub reply_gap: Duration,
    /// How often an idle worker looks for due rows.
    pub poll_interval: Duration,
    /// Rows claimed per claim.
    pub batch_size: i64,
    /// `OUTBOX_LEASE_MS`: how long a claim lasts unless renewed. The worker renews the leases of
    /// the rows it holds every quarter of it.
    pub lease: Duration,
    /// Contacts in delivery at once (one lane each).
    pub max_in_flight: usize,
    /// `MANYCHAT_TOKEN_FIELD`: the per-contact custom field a `contact_token` row writes (019).
    pub token_field: String,
    /// `OUTBOX_GIVE_UP_AFTER_MS`: how long after it was queued a row that keeps failing
    /// passingly is still retried (never past the contact's 24-hour window).
    pub give_up_after: Duration,
    /// `SHUTDOWN_DRAIN_MS`: how long, once shutdown fires, the worker goes on delivering rows
    /// that are or fall due before it stops claiming.
    pub shutdown_drain: Duration,
    /// `MANYCHAT_DELIVERED_FIELD` (with `MANYCHAT_DELIVERY_ID_FIELD`): the delivery handshake,
    /// `None` when unset (a trigger that got no answer is then sent again once).
    pub handshake: Option<DeliveryHandshake>,
}

impl WorkerSettings {
    pub fn new(reply_field: String, reply_flow_ns: String, reply_gap: Duration) -> Self {
        Self {
            reply_field,
            reply_flow_ns,
            reply_gap,
            poll_interval: Duration::from_secs(1),
            batch_size: 10,
            lease: DEFAULT_LEASE,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            token_field: "ai_token".to_owned(),
            give_up_after: retry::DEFAULT_GIVE_UP_AFTER,
            shutdown_drain: DEFAULT_SHUTDOWN_DRAIN,
            handshake: None,
        }
    }

    /// Turns the delivery handshake on (`MANYCHAT_DELIVERED_FIELD`; off by default).
    pub fn with_handshake(mut self, handshake: Option<DeliveryHandshake>) -> Self {
        self.handshake = handshake;
        self
    }

    /// Sets `SHUTDOWN_DRAIN_MS` (the default is [`DEFAULT_SHUTDOWN_DRAIN`]).
    pub fn with_shutdown_drain(mut self, drain: Duration) -> Self {
        self.shutdown_drain = drain;
        self
    }

    /// Sets `OUTBOX_GIVE_UP_AFTER_MS` (the default is [`retry::DEFAULT_GIVE_UP_AFTER`]).
    pub fn with_give_up_after(mut self, give_up_after: Duration) -> Self {
        self.give_up_after = give_up_after;
        self
    }

    /// Sets `MANYCHAT_TOKEN_FIELD` (the default is its documented default, `ai_token`).
    pub fn with_token_field(mut self, token_field: impl Into<String>) -> Self {
        self.token_field = token_field.into();
        self
    }

    /// Sets `OUTBOX_LEASE_MS` (the default is [`DEFAULT_LEASE`]).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How often the leases of held rows are renewed.
    fn renew_every(&self) -> Duration {
        (self.lease / 4).max(Duration::from_millis(100))
    }
}

#[derive(Clone)]
pub struct OutboxWorker {
    store: Arc<dyn Store>,
    manychat: ManyChatClient,
    clock: Clock,
    settings: Arc<WorkerSettings>,
    metrics: Arc<Metrics>,
    /// The tenant config in force, for the handoff of a dead-lettered reply (`rules.handoff`).
    config: Option<Arc<ConfigHandle>>,
    /// Rows this worker (and its clones) claimed and has not settled: their leases are renewed.
    held: Arc<Mutex<BTreeSet<i64>>>,
    /// Performs `handoff` rows (a handoff is retried like a reply).
    handoffs: Handoffs,
    /// The tenant's plugin writes riding a reply's row (`crate::plugins`).
    plugins: crate::plugins::PluginClient,
    /// Whether ManyChat keeps failing: then one row at a time probes it.
    outage: Arc<Outage>,
}

/// Why one attempt at a row failed.
enum AttemptError {
    ManyChat(ManyChatError),
    /// A reply's trigger got no answer (a timeout, a lost connection): ManyChat may have run it,
    /// so it is retried at most once.
    TriggerUnanswered(ManyChatError),
    /// The next trigger was already sent [`MAX_UNANSWERED_TRIGGERS`] times without an answer
    /// (a process killed while it waited counts too): it is not sent again.
    TriggerMayHaveRun,
    BadPayload(String),
    /// The store could not answer a question the delivery depends on; retried like a network
    /// error.
    Store(StoreError),
}

/// How far a row's delivery got; starts from the row's stored progress and is written back
/// whenever it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Progress {
    messages_delivered: i32,
    trigger_timeouts: i32,
}

impl Progress {
    fn of(row: &OutboxRow) -> Self {
        Self {
            messages_delivered: row.messages_delivered,
            trigger_timeouts: row.trigger_timeouts,
        }
    }
}

/// The rows of one contact waiting for its lane. `closed` once the lane found it empty and
/// ended: a row claimed after that starts a new lane.
#[derive(Default)]
struct LaneQueue {
    rows: VecDeque<OutboxRow>,
    closed: bool,
}

/// The lanes in delivery: one task per contact.
#[derive(Default)]
struct Lanes {
    queues: HashMap<ConversationId, (tokio::task::Id, Arc<Mutex<LaneQueue>>)>,
    tasks: JoinSet<ConversationId>,
}

impl Lanes {
    fn len(&self) -> usize {
        self.queues.len()
    }

    fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these collections half-updated: use them as they are.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
            handoffs: Handoffs::new(store.clone(), manychat.clone(), clock, metrics.clone())
                .with_give_up_after(settings.give_up_after),
            outage: Arc::default(),
            store,
            manychat,
            clock,
            settings: Arc::new(settings),
            metrics,
            config: None,
            held: Arc::new(Mutex::new(BTreeSet::new())),
            plugins: crate::plugins::PluginClient::default(),
        }
    }

    /// Performs a row's plugin writes through `client` (its secrets' source), against the
    /// tenant config in force when they are performed ([`OutboxWorker::with_tenant_config`]).
    pub fn with_plugins(mut self, client: crate::plugins::PluginClient) -> Self {
        self.plugins = client;
        self
    }

    /// The tenant config in force, read for `rules.handoff` when a reply is dead-lettered.
    /// Without it a dead-lettered reply's contact is only marked escalated.
    pub fn with_tenant_config(mut self, config: Arc<ConfigHandle>) -> Self {
        self.config = Some(config);
        self
    }

    /// Claims and delivers until `shutdown` fires; then drains for `shutdown_drain`: rows that
    /// are due, or fall due meanwhile, are still claimed and delivered, and the drain ends early
    /// once nothing is due and no row is in hand. At the drain's bound it stops: rows waiting in
    /// a lane are let go at once, and a row in delivery gets [`LANE_GRACE`] to finish its
    /// request in flight before its lane is abandoned (a wait for the shared rate limit is not
    /// finished). What it let go stays on disk: its lease lapses and the next process delivers
    /// it, resuming after what ManyChat answered. A database error is logged and the loop goes
    /// on.
    pub async fn run(self, shutdown: CancellationToken) {
        tracing::info!(
            max_in_flight = self.settings.max_in_flight,
            lease_ms = self.settings.lease.as_millis() as u64,
            "outbox worker started"
        );
        let keeper = self.keep_leases();
        tokio::pin!(keeper);
        let mut lanes = Lanes::default();
        let mut stopping = false;
        // Set when shutdown fires: claims go on until then.
        let mut drain_until: Option<tokio::time::Instant> = None;
        // Set when the drain's bound is reached with rows in hand: their lanes end then.
        let mut abandon_at: Option<tokio::time::Instant> = None;
        loop {
            while let Some(joined) = lanes.tasks.try_join_next_with_id() {
                self.lane_ended(&mut lanes, joined);
            }
            if !stopping && shutdown.is_cancelled() {
                let until = *drain_until.get_or_insert_with(|| {
                    tracing::info!(
                        drain_ms = self.settings.shutdown_drain.as_millis() as u64,
                        "outbox worker draining due rows before it stops"
                    );
                    tokio::time::Instant::now() + self.settings.shutdown_drain
                });
                if tokio::time::Instant::now() >= until {
                    stopping = true;
                    if !lanes.is_empty() {
                        let let_go = self.let_go_of_waiting_rows(&lanes);
                        tracing::warn!(
                            rows_let_go = let_go,
                            rows_in_delivery = lanes.len(),
                            "outbox drain bound reached; rows in hand are left for the next process"
                        );
                        abandon_at = Some(tokio::time::Instant::now() + LANE_GRACE);
                    }
                }
            }
            if stopping && lanes.is_empty() {
                break;
            }
            let room = self.outage.room(
                self.settings.max_in_flight.saturating_sub(lanes.len()),
                lanes.len(),
            );
            let mut claimed_full = false;
            if !stopping && room > 0 {
                let limit = (self.settings.batch_size.max(1) as usize).min(room);
                match self.claim(limit).await {
                    Ok(rows) => {
                        claimed_full = rows.len() == limit;
                        if drain_until.is_some() && rows.is_empty() && lanes.is_empty() {
                            // Draining, nothing due or in hand: done once nothing is open at
                            // all (a row due later in the drain keeps it going).
                            let open = self.store.outbox_backlog(self.clock.now(), 1).await;
                            if open.is_ok_and(|b| b.rows == 0) {
                                tracing::info!("outbox drained");
                                stopping = true;
                                continue;
                            }
                        }
                        if !rows.is_empty() {
                            tracing::debug!(rows = rows.len(), "outbox rows claimed");
                        }
                        for row in rows {
                            self.assign(&mut lanes, row);
                        }
                    }
                    Err(error) => {
                        crate::store_failure!(self.store, error, "outbox worker: database error")
                    }
                }
            }
            let has_room = lanes.len() < self.settings.max_in_flight || self.outage.ongoing();
            if claimed_full && has_room {
                // More rows may be due: claim again at once rather than idle.
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled(), if drain_until.is_none() => {}
                Some(joined) = lanes.tasks.join_next_with_id(), if !lanes.tasks.is_empty() => {
                    self.lane_ended(&mut lanes, joined);
                }
                _ = tokio::time::sleep(self.settings.poll_interval), if !stopping && has_room => {}
                _ = tokio::time::sleep_until(abandon_at.unwrap_or_else(tokio::time::Instant::now)), if abandon_at.is_some() => {
                    abandon_at = None;
                    tracing::warn!(rows = lanes.len(), "outbox rows still in delivery at the drain's bound are abandoned");
                    lanes.tasks.abort_all();
                }
                _ = &mut keeper => {}
            }
        }
        tracing::info!("outbox worker stopped");
    }

    /// Closes every lane's queue and lets go of the rows waiting in it (not started): their
    /// leases are no longer renewed and lapse. Returns how many.
    fn let_go_of_waiting_rows(&self, lanes: &Lanes) -> usize {
        let mut let_go = 0;
        for (_, queue) in lanes.queues.values() {
            let mut queue = lock(queue);
            queue.closed = true;
            let mut held = lock(&self.held);
            for row in queue.rows.drain(..) {
                held.remove(&row.id);
                let_go += 1;
            }
        }
        let_go
    }

    /// Claims one batch of due rows and processes it to the end (each contact's rows in order,
    /// contacts concurrently), renewing the leases meanwhile. Returns the number of rows
    /// processed.
    pub async fn run_once(&self) -> Result<usize, StoreError> {
        let room = self
            .outage
            .room(self.settings.batch_size.max(0) as usize, 0);
        if room == 0 {
            return Ok(0);
        }
        let rows = self.claim(room).await?;
        let count = rows.len();
        let mut lanes = Lanes::default();
        for row in rows {
            self.assign(&mut lanes, row);
        }
        let keeper = self.keep_leases();
        tokio::pin!(keeper);
        loop {
            tokio::select! {
                joined = lanes.tasks.join_next_with_id() => match joined {
                    Some(joined) => self.lane_ended(&mut lanes, joined),
                    None => break,
                },
                _ = &mut keeper => {}
            }
        }
        Ok(count)
    }

    async fn claim(&self, limit: usize) -> Result<Vec<OutboxRow>, StoreError> {
        self.store
            .claim_outbox(ClaimRules {
                now: self.clock.now(),
                limit: i64::try_from(limit).unwrap_or(i64::MAX),
                lease: self.settings.lease,
                reply_gap: self.settings.reply_gap,
            })
            .await
            .during("claiming outbox rows")
    }

    /// Hands a claimed row to its contact's lane, starting one when the contact has none.
    fn assign(&self, lanes: &mut Lanes, row: OutboxRow) {
        if !lock(&self.held).insert(row.id) {
            // Its lease lapsed while this worker still holds it (renewals failed for a whole
            // lease): the claim renewed it; it is already in hand, never run twice here.
            tracing::warn!(
                row = row.id,
                "outbox row claimed again while in hand; kept once"
            );
            return;
        }
        let conversation = row.conversation_id;
        let row = match lanes.queues.get(&conversation) {
            Some((_, queue)) => {
                let mut queue = lock(queue);
                if !queue.closed {
                    queue.rows.push_back(row);
                    return;
                }
                row
            }
            None => row,
        };
        let queue = Arc::new(Mutex::new(LaneQueue {
            rows: VecDeque::from([row]),
            closed: false,
        }));
        let worker = self.clone();
        let lane = queue.clone();
        let task = lanes.tasks.spawn(async move {
            worker.run_lane(&lane).await;
            conversation
        });
        lanes.queues.insert(conversation, (task.id(), queue));
    }

    /// Delivers a contact's rows one at a time until its queue is empty.
    async fn run_lane(&self, queue: &Mutex<LaneQueue>) {
        loop {
            let row = {
                let mut queue = lock(queue);
                match queue.rows.pop_front() {
                    Some(row) => row,
                    None => {
                        queue.closed = true;
                        return;
                    }
                }
            };
            let id = row.id;
            self.process(row).await;
            lock(&self.held).remove(&id);
        }
    }

    /// Forgets an ended lane. A lane that panicked releases the rows still queued in it: their
    /// leases lapse and they are claimed again.
    fn lane_ended(
        &self,
        lanes: &mut Lanes,
        joined: Result<(tokio::task::Id, ConversationId), tokio::task::JoinError>,
    ) {
        let task = match &joined {
            Ok((task, _)) => *task,
            Err(error) if error.is_cancelled() => error.id(),
            Err(error) => {
                tracing::error!(error = %error, "outbox lane ended abnormally");
                error.id()
            }
        };
        let Some(conversation) = lanes
            .queues
            .iter()
            .find(|(_, (id, _))| *id == task)
            .map(|(conversation, _)| *conversation)
        else {
            return;
        };
        if let Some((_, queue)) = lanes.queues.remove(&conversation) {
            let mut queue = lock(&queue);
            queue.closed = true;
            let mut held = lock(&self.held);
            for row in queue.rows.drain(..) {
                held.remove(&row.id);
            }
        }
    }

    /// Renews the lease of every held row every quarter lease. Never returns; polled beside
    /// the lanes.
    async fn keep_leases(&self) {
        loop {
            tokio::time::sleep(self.settings.renew_every()).await;
            let ids: Vec<i64> = lock(&self.held).iter().copied().collect();
            if ids.is_empty() {
                continue;
            }
            let until = self.clock.now()
                + chrono::Duration::from_std(self.settings.lease)
                    .unwrap_or(chrono::Duration::seconds(10));
            if let Err(error) = self.store.renew_outbox_leases(&ids, until).await {
                // The next renewal tries again; only a failure for a whole lease lets another
                // worker take these rows.
                crate::store_failure!(
                    self.store,
                    error.during("renewing outbox leases"),
                    rows = ids.len(),
                    "outbox: could not renew leases"
                );
            }
        }
    }

    async fn process(&self, row: OutboxRow) {
        if row.kind == OutboxKind::Handoff {
            // Retried on its own terms (see `handoff`): it settles itself.
            return self.handoffs.perform(&row).await;
        }
        let mut progress = Progress::of(&row);
        let result = self.attempt(&row, &mut progress).await;
        self.track_outage(&result);
        let settled = match result {
            Ok(()) => {
                self.metrics.outbox_delivered.inc();
                self.store.mark_delivered(row.id, self.clock.now()).await
            }
            Err(error) => self.record_failure(&row, progress, error).await,
        };
        if let Err(error) = settled {
            // The row stays `delivering` and is claimed again when its lease lapses.
            crate::store_failure!(
                self.store,
                error.during("settling an outbox row"),
                row = row.id,
                "outbox: could not settle row"
            );
        }
    }

    /// Notes whether ManyChat answered: a passing ManyChat failure starts or extends an outage
    /// (probed one row at a time), a delivery ends it.
    fn track_outage(&self, result: &Result<(), AttemptError>) {
        match result {
            Ok(()) => {
                if self.outage.recovered() {
                    tracing::info!("ManyChat answers again; outbox delivery resumes in full");
                }
            }
            Err(AttemptError::ManyChat(error) | AttemptError::TriggerUnanswered(error))
                if error.is_retryable() =>
            {
                if self.outage.failed(self.manychat.retry_after()) {
                    tracing::warn!(
                        error_kind = error.kind(),
                        "ManyChat is failing; the outbox probes it one row at a time"
                    );
                }
            }
            Err(_) => {}
        }
    }

    /// One attempt at a row, by kind.
    async fn attempt(&self, row: &OutboxRow, progress: &mut Progress) -> Result<(), AttemptError> {
        match row.kind {
            OutboxKind::Reply => self.deliver_reply(row, progress).await,
            OutboxKind::ContactToken => self.deliver_token(row).await,
            // `process` hands these to `Handoffs`; never attempted here.
            OutboxKind::Handoff => Err(AttemptError::BadPayload(
                "a handoff row is performed by the handoff path".into(),
            )),
        }
    }

    /// Delivers a reply's messages from the first one ManyChat has not accepted yet, then its
    /// actions from the first one ManyChat has not answered: nothing ManyChat accepted is sent
    /// again. Every trigger is counted before it leaves and settled when ManyChat answers, and
    /// both are saved, so a process killed at any moment resumes after what was accepted and
    /// repeats at most the one request that got no answer, at most once
    /// ([`MAX_UNANSWERED_TRIGGERS`]).
    async fn deliver_reply(
        &self,
        row: &OutboxRow,
        progress: &mut Progress,
    ) -> Result<(), AttemptError> {
        let mut payload: ReplyPayload = serde_json::from_value(row.payload.clone())
            .map_err(|e| AttemptError::BadPayload(format!("reply payload: {e}")))?;
        self.deliver_messages(row, &payload.messages, progress)
            .await?;
        // Actions follow the text, once, each from where the last attempt left it.
        if !payload.actions.is_empty() {
            self.perform_actions(row, &mut payload.actions, progress)
                .await;
            self.perform_plugin_writes(row, &mut payload.actions, progress)
                .await?;
            crate::actions::perform_nudges(
                self.store.as_ref(),
                &self.metrics,
                row.conversation_id,
                self.clock.now(),
                &mut payload.actions,
            )
            .await;
            self.save_actions(payload.turn_id, &payload.actions).await;
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
        // A token write takes the slots no reply waits for.
        self.manychat
            .background()
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

    async fn save_progress(&self, row: &OutboxRow, progress: Progress) {
        if let Err(error) = self
            .store
            .record_outbox_progress(
                row.id,
                progress.messages_delivered,
                progress.trigger_timeouts,
            )
            .await
        {
            crate::store_failure!(
                self.store,
                error.during("recording an outbox row's delivery progress"),
                row = row.id,
                "outbox: could not record delivery progress"
            );
        }
    }

    async fn record_failure(
        &self,
        row: &OutboxRow,
        progress: Progress,
        error: AttemptError,
    ) -> Result<(), StoreError> {
        let (retryable, message, kind) = match &error {
            AttemptError::ManyChat(e) => (e.is_retryable(), e.to_string(), e.kind()),
            AttemptError::TriggerUnanswered(e) => (
                progress.trigger_timeouts < MAX_UNANSWERED_TRIGGERS,
                format!(
                    "{e}; the trigger may have run ({} of {MAX_UNANSWERED_TRIGGERS} unanswered)",
                    progress.trigger_timeouts
                ),
                "trigger_unanswered",
            ),
            AttemptError::TriggerMayHaveRun => (
                false,
                format!(
                    "the trigger was sent {MAX_UNANSWERED_TRIGGERS} times without an answer; it may have run"
                ),
                "trigger_unanswered",
            ),
            AttemptError::BadPayload(m) => (false, m.clone(), "bad_payload"),
            AttemptError::Store(e) => (true, e.to_string(), "store"),
        };
        if progress != Progress::of(row) {
            self.save_progress(row, progress).await;
        }
        let due = match retryable {
            true => self.retry_at(row).await,
            false => None,
        };
        if let Some(due) = due {
            tracing::warn!(
                conversation = %row.conversation_id,
                row = row.id,
                attempt = row.attempts,
                messages_delivered = progress.messages_delivered,
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
            messages_delivered = progress.messages_delivered,
            error_kind = kind,
            "outbox row dead-lettered"
        );
        self.metrics.outbox_dead_lettered.inc();
        self.store
            .mark_failed(row.id, &message, self.clock.now())
            .await?;
        if row.kind == OutboxKind::Reply {
            self.hand_off(row).await;
        }
        Ok(())
    }

    /// When a row that failed passingly is tried again (`retry`): `None` once it is too old to
    /// help. The contact's window is read from their conversation (the store not answering
    /// leaves only the give-up time).
    async fn retry_at(&self, row: &OutboxRow) -> Option<chrono::DateTime<chrono::Utc>> {
        let last_message_at = self
            .store
            .conversation(row.conversation_id)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.last_message_at);
        let give_up =
            retry::give_up_at(row.created_at, last_message_at, self.settings.give_up_after);
        retry::retry_at(
            self.clock.now(),
            give_up,
            row.attempts,
            self.manychat.retry_after(),
        )
    }

    /// A reply dead-lettered for good hands its contact to a person. Its
    /// other actions are recorded `dead_lettered` and never performed (012); the conversation
    /// is marked escalated, the reply's turn records why (`dead_lettered`), and the tenant's
    /// handoff (`rules.handoff`) is queued as a `handoff` row, performed and retried like any
    /// handoff, unless one is already queued for the contact (an escalation copy's own).
    async fn hand_off(&self, row: &OutboxRow) {
        if let Err(error) = self.queue_hand_off(row).await {
            tracing::error!(conversation = %row.conversation_id, row = row.id, error = %error, "dead-lettered reply: could not hand the contact over");
        }
    }

    async fn queue_hand_off(&self, row: &OutboxRow) -> Result<(), StoreError> {
        let now = self.clock.now();
        let payload = serde_json::from_value::<ReplyPayload>(row.payload.clone()).ok();
        let turn_id = payload.as_ref().and_then(|p| p.turn_id);
        let mut actions: Vec<StagedAction> = payload.map(|p| p.actions).unwrap_or_default();
        if actions::settle_staged(&mut actions, ActionStatus::DeadLettered) > 0 {
            actions::count_in(&self.metrics, &actions, ActionStatus::DeadLettered);
            self.save_actions(turn_id, &actions).await;
        }
        let queued = self
            .store
            .pending_outbox(OutboxKind::Handoff)
            .await?
            .iter()
            .any(|h| h.conversation_id == row.conversation_id);
        let handoff = match (&self.config, queued) {
            (Some(config), false) => {
                actions::handoff_actions(config.snapshot().rules.handoff.as_ref())
            }
            _ => Vec::new(),
        };
        let rows: Vec<NewOutboxRow> = if handoff.is_empty() {
            Vec::new()
        } else {
            let payload = HandoffPayload {
                actions: handoff,
                turn_id,
                fallback: false,
            };
            let payload = serde_json::to_value(&payload)
                .map_err(|e| StoreError::Corrupt(format!("handoff payload: {e}")))?;
            vec![NewOutboxRow::new(
                row.conversation_id,
                &row.subscriber_id,
                OutboxKind::Handoff,
                payload,
                now,
            )]
        };
        let queued: Vec<i64> = match turn_id {
            // The reply's turn records why its contact was handed over, with the handoff row
            // and the escalation in one write.
            Some(turn_id) => {
                let mut reason = NewTurn::user(row.conversation_id, "", false, now);
                reason.escalation_reason = Some(Escalation::DeadLettered.as_str().to_owned());
                self.store
                    .record_exchange(Exchange {
                        recorded: Some(turn_id),
                        escalated_at: Some(now),
                        outbox: &rows,
                        ..Exchange::of(&reason)
                    })
                    .await?
                    .outbox
            }
            None => {
                self.store.set_escalated(row.conversation_id, now).await?;
                let mut ids = Vec::new();
                for handoff in &rows {
                    ids.push(self.store.enqueue(handoff).await?);
                }
                ids
            }
        };
        // Performed now, in this contact's lane; if ManyChat fails it passingly, the row is
        // retried like any handoff.
        for id in queued {
            self.handoffs.deliver_now(id).await;
        }
        self.metrics.escalation(Escalation::DeadLettered.as_str());
        if rows.is_empty() {
            tracing::warn!(
                conversation = %row.conversation_id,
                row = row.id,
                reason = Escalation::DeadLettered.as_str(),
                "dead-lettered reply: contact marked escalated; no handoff to queue (none configured, or one queued already)"
            );
        } else {
            self.metrics.outbox_dead_letter_handoffs.inc();
            tracing::info!(
                conversation = %row.conversation_id,
                row = row.id,
                reason = Escalation::DeadLettered.as_str(),
                "dead-lettered reply: contact handed to a person"
            );
        }
        Ok(())
    }

    async fn save_actions(&self, turn_id: Option<i64>, actions: &[StagedAction]) {
        let Some(turn_id) = turn_id else {
            return;
        };
        if let Err(error) = self
            .store
            .update_turn_actions(turn_id, &actions::record(actions))
            .await
        {
            crate::store_failure!(
                self.store,
                error.during("updating a turn's action record"),
                turn = turn_id,
                "could not update the action record"
            );
        }
    }
}
