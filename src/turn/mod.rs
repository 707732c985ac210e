//! One turn, from a parsed inbound message to its outcome (SYSTEM 3.4, 4, 6).
//!
//! The order is fixed: conversation → scripted opening → one round of reads (earlier message
//! times, today's spend, history, queued replies, the hourly count) → escalation keywords, the
//! turn cap, the per-contact rate and the daily budget → the agent runs, raced against the
//! deadline measured from the request's arrival (in the request while it waits, in a task of its
//! own once it stops waiting: `detach`). Won: the reply is answered inline
//! and its actions run after the response. Lost: the contact gets the tenant's acknowledgement
//! now, and the agent keeps running until `MODEL_ABORT_MS`; its reply and actions go to the
//! outbox. Aborted: no agent turn is recorded; the escalation copy goes through the outbox (C6).
//!
//! Invariants: nothing here knows HTTP or ManyChat's JSON; a turn is recorded whole in one
//! write (`Store::record_exchange`: the contact's message, its count, the reply, the charge,
//! the escalation) once its outcome is known, and an inline answer leaves only after that write
//! committed; an agent turn is recorded for every outcome but the abort; staged actions run only
//! when the final reply does not escalate.

mod detach;
mod gates;
mod order;

use detach::Detachable;
pub use gates::Denial;
pub use order::{TurnGuard, TurnOrder};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::actions::{self, ActionStatus, StagedAction};
use crate::agent::{self, EscalationCause, HistoryTurn, SnapshotPrompt, ThinkInput, Thought};
use crate::clock::Clock;
use crate::config::rules_match::EscalationKeywords;
use crate::config::{ConfigHandle, TenantConfig};
use crate::ids::{ConversationId, SubscriberId};
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;
use crate::model::Model;
use crate::outbox::ReplyPayload;
use crate::store::{
    BudgetCharge, Conversation, Exchange, NewOutboxRow, NewTurn, OutboxKind, Role, Store,
    StoreError, TurnContext, TurnContextQuery,
};
use crate::tokens::{self, TokenService};
use crate::tools::{ToolContext, ToolSpecs, TurnTools};

/// How many earlier turns the model sees (018).
pub const HISTORY_TURNS: i64 = 10;

/// What a turn at `now` reads before its checks: the cap's and history's reads only when it is
/// bound (019), today's spend, and the contact's count in this hour's window.
fn context_query(config: &TenantConfig, bound: bool, now: DateTime<Utc>) -> TurnContextQuery {
    let history_since = now - chrono::Duration::days(i64::from(config.rules.history_days));
    TurnContextQuery {
        cap_limit: bound.then(|| i64::from(config.rules.max_turns_per_conversation) + 1),
        history: bound.then_some((history_since, HISTORY_TURNS)),
        day: now.date_naive(),
        rate_window: Some(gates::hour_start(now)),
    }
}

/// The settings a turn reads; built once from `Settings` at start.
#[derive(Debug, Clone)]
pub struct TurnSettings {
    /// `RACE_DEADLINE_MS`, measured from the request's arrival.
    pub race_deadline: Duration,
    /// `MODEL_ABORT_MS`, measured from the request's arrival; always greater than the deadline.
    pub model_abort: Duration,
    pub max_output_tokens: u32,
    pub temperature: f32,
    /// `CONTACT_TOKENS_ENFORCED` (019): false lets a request without a token read history.
    pub contact_tokens_enforced: bool,
}

/// A contact message that passed the HTTP layer.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub subscriber_id: SubscriberId,
    pub text: String,
    /// The channel ManyChat reported, if any (stored on the conversation).
    pub channel: Option<String>,
    /// 019: the token the request presented, if any.
    pub ai_token: Option<String>,
    /// 028: the offering the flow passed, already normalised (absent when empty or unrendered).
    pub offering: Option<String>,
    /// When the request arrived: the race deadline counts from here.
    pub arrived_at: Instant,
}

/// What the HTTP layer renders, and what it runs once the response is written.
#[derive(Debug)]
pub struct TurnResponse {
    /// The messages to render; empty for a silent response.
    pub messages: Vec<String>,
    pub after: Option<AfterResponse>,
}

/// Actions to perform after the Dynamic Block response is written (012: never before).
#[derive(Debug)]
pub struct AfterResponse {
    pub conversation: ConversationId,
    pub subscriber: SubscriberId,
    pub turn_id: i64,
    pub actions: Vec<StagedAction>,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bug: something in the turn panicked. The turn ends there; the caller answers with the
    /// escalation copy.
    #[error("the turn panicked")]
    Panicked,
}

/// Everything a turn needs; cheap to clone (all shared).
#[derive(Clone)]
pub struct TurnEngine {
    inner: Arc<Inner>,
}

struct Inner {
    settings: TurnSettings,
    config: Arc<ConfigHandle>,
    store: Arc<dyn Store>,
    model: Arc<dyn Model>,
    manychat: ManyChatClient,
    clock: Clock,
    /// Agent tasks that outlive their request (race lost) and post-response actions: shutdown
    /// waits for them.
    tasks: TaskTracker,
    metrics: Arc<Metrics>,
    /// 037: one turn at a time per conversation.
    order: TurnOrder,
    /// 019: issues and writes contact tokens beside the model call.
    tokens: TokenService,
    /// What the turn derives from the config snapshot in force (prompt prefix, leak-check
    /// text, tool specs): built once per snapshot, not per turn, so providers' prompt caches see
    /// identical bytes and the hot path does not rebuild them.
    derived: std::sync::Mutex<Option<Arc<Derived>>>,
}

/// What a config snapshot implies for every turn under it.
struct Derived {
    config: Arc<TenantConfig>,
    prompt: SnapshotPrompt,
    tools: ToolSpecs,
    keywords: EscalationKeywords,
}

impl TurnEngine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: TurnSettings,
        config: Arc<ConfigHandle>,
        store: Arc<dyn Store>,
        model: Arc<dyn Model>,
        manychat: ManyChatClient,
        clock: Clock,
        tasks: TaskTracker,
        metrics: Arc<Metrics>,
        token_field: String,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                config,
                order: TurnOrder::new(store.clone()),
                derived: std::sync::Mutex::new(None),
                tokens: TokenService::new(store.clone(), manychat.clone(), token_field, clock),
                store,
                model,
                manychat,
                clock,
                tasks,
                metrics,
            }),
        }
    }

    /// The tenant's escalation copy from the current config: what any failure answers (C6).
    pub fn escalation_copy(&self) -> String {
        self.inner
            .config
            .snapshot()
            .rules
            .messages
            .escalation
            .clone()
    }

    pub fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// Runs one turn. An error means the turn could not be recorded (or hit a bug); the caller
    /// answers with the escalation copy.
    pub async fn handle(&self, inbound: Inbound) -> Result<TurnResponse, TurnError> {
        detach::caught(self.handle_turn(inbound))
            .await
            .unwrap_or_else(|| {
                tracing::error!("a turn panicked");
                Err(TurnError::Panicked)
            })
    }

    async fn handle_turn(&self, inbound: Inbound) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        // 037, uncontended (the common case): with the contact's place taken at once, the
        // conversation and everything the turn reads come in one call.
        if let Some(guard) = inner.order.try_acquire(&inbound.subscriber_id) {
            let now = inner.clock.now();
            let query = context_query(&config, true, now);
            if let Some((conversation, context)) = inner
                .store
                .returning_contact(&inbound.subscriber_id, query)
                .await?
            {
                let bound = self.bind(&conversation, &inbound);
                // An unbound turn neither waits nor blocks, and reads no history.
                let (guard, context) = if bound {
                    (Some(guard), context)
                } else {
                    (None, context.unbound())
                };
                return self
                    .run(
                        inbound,
                        config,
                        conversation,
                        bound,
                        guard,
                        Mode::Inline,
                        Some((now, context)),
                    )
                    .await;
            }
            // A first contact: the conversation is created below.
        }
        let channel = inbound.channel.as_deref().unwrap_or("whatsapp");
        let conversation = inner
            .store
            .conversation_for(&inbound.subscriber_id, channel, inner.clock.now())
            .await?;
        let bound = self.bind(&conversation, &inbound);
        // 037: unbound turns neither wait nor block.
        if !bound {
            return self
                .run(
                    inbound,
                    config,
                    conversation,
                    bound,
                    None,
                    Mode::Inline,
                    None,
                )
                .await;
        }

        // 037: wait for the conversation's earlier turns, in arrival order. The wait counts
        // against the deadline; a turn that cannot start in time answers silently and runs later
        // in the waiting task, replying through the outbox.
        let (start_tx, mut start_rx) = oneshot::channel();
        let waiting = WaitingTurn {
            engine: self.clone(),
            inbound: inbound.clone(),
            config: config.clone(),
            conversation: conversation.clone(),
            bound,
        };
        inner.tasks.spawn(waiting.wait(start_tx));
        let deadline = inbound.arrived_at + inner.settings.race_deadline;
        let started = match tokio::time::timeout_at(deadline, &mut start_rx).await {
            Ok(Ok(started)) => Some(started),
            Ok(Err(_)) => None,
            Err(_) => {
                // Same hand-over as the race below: after `close` the waiting task keeps the
                // turn and runs it later.
                start_rx.close();
                start_rx.try_recv().ok()
            }
        };
        match started {
            Some(Ok(guard)) => {
                self.run(
                    inbound,
                    config,
                    conversation,
                    bound,
                    Some(guard),
                    Mode::Inline,
                    None,
                )
                .await
            }
            Some(Err(error)) => Err(error.into()),
            None => {
                inner.metrics.race_lost.inc();
                tracing::info!(
                    conversation = %conversation.id,
                    "previous turn still running at the deadline; answering later"
                );
                Ok(TurnResponse {
                    messages: Vec::new(),
                    after: None,
                })
            }
        }
    }

    /// 019: whether the request is bound (it reads and extends history: its token matches, or
    /// the contact has none yet). Starts the token write, beside the model call, when the
    /// contact needs a token.
    fn bind(&self, conversation: &Conversation, inbound: &Inbound) -> bool {
        let inner = &self.inner;
        let binding = tokens::bind(conversation, inbound.ai_token.as_deref());
        inner.tokens.after_request(
            &inner.tasks,
            conversation,
            &binding,
            inbound.arrived_at + inner.settings.race_deadline,
        );
        tokens::reads_history(&binding, inner.settings.contact_tokens_enforced)
    }

    /// Runs a turn that holds its place in the conversation's order (or needs none). `Inline`
    /// answers through the response; `Deferred` (the response was already sent) queues every
    /// reply in the outbox before giving up its place, so the next turn cannot overtake it.
    /// `context` is what the turn read already, with the time it was read for.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        conversation: Conversation,
        bound: bool,
        guard: Option<TurnGuard>,
        mode: Mode,
        context: Option<(DateTime<Utc>, TurnContext)>,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let now = context
            .as_ref()
            .map_or_else(|| inner.clock.now(), |(at, _)| *at);
        if let Some(response) = self
            .scripted_opening(&inbound, &config, &conversation, bound, now)
            .await?
        {
            return self.deliver(&conversation, response, mode, guard).await;
        }

        // Everything the checks and the prompt read, in one call: the contact's earlier
        // message times (turn cap), history (an unbound turn is answered from its own message
        // only, 019), today's spend, whether a reply is already queued for the contact, and
        // the contact's count this hour.
        let context = match context {
            Some((_, context)) => context,
            None => {
                inner
                    .store
                    .turn_context(&conversation, context_query(&config, bound, now))
                    .await?
            }
        };
        let window = gates::hour_start(now);

        // The contact's message is recorded with the turn's outcome, whatever the checks
        // decide; it counts against the hourly rate once keywords and the cap have let it
        // through. The rate check counts it now: the contact's earlier turns have settled (037).
        let mut message = Message {
            turn: NewTurn::user(conversation.id, &inbound.text, bound, now),
            rate_window: None,
        };
        // What the snapshot derives (keywords, prompt, tool specs), looked up once per turn.
        let derived = self.derived(&config);
        let denial = match gates::before_rate(
            &config,
            &derived.keywords,
            &inbound,
            bound,
            &context.earlier_user_turns,
            now,
        ) {
            Some(denial) => Some(denial),
            None => {
                message.rate_window = Some(window);
                gates::after_rate(&config, context.rate_count + 1, context.spent)
            }
        };
        if let Some(denial) = denial {
            tracing::info!(
                conversation = %conversation.id,
                outcome = "escalated_precheck",
                denial = denial.as_str(),
                "turn"
            );
            let response = self
                .escalate_inline(
                    &config,
                    &conversation,
                    &message,
                    "escalated_precheck",
                    bound,
                )
                .await?;
            return self.deliver(&conversation, response, mode, guard).await;
        }

        // A reply already queued for this contact must not be overtaken by an inline answer:
        // this turn's reply goes through the outbox behind it, and the response is silent.
        let queued_ahead = mode == Mode::Deferred || context.queued_replies > 0;

        let job = AgentJob {
            engine: self.clone(),
            derived,
            conversation: conversation.clone(),
            contact_text: inbound.text.clone(),
            notices: notices(&config, &inbound),
            history: history_turns(context.history),
            bound,
            arrived_at: inbound.arrived_at,
            guard,
            message: Some(message),
        };
        let (answer_tx, answer_rx) = oneshot::channel();
        let abort_at = inbound.arrived_at + inner.settings.model_abort;
        // The agent runs in this request while it waits (3.4), and in a task of its own once
        // the request stops waiting: at the deadline, or if the request is dropped.
        let mut agent = Detachable::new(&inner.tasks, job.run(answer_tx, abort_at));

        if queued_ahead {
            drop(answer_rx);
            drop(agent);
            inner.metrics.race_lost.inc();
            tracing::info!(conversation = %conversation.id, "reply queued ahead; answering later");
            return Ok(TurnResponse {
                messages: Vec::new(),
                after: None,
            });
        }

        let deadline = inbound.arrived_at + inner.settings.race_deadline;
        let mut answer_rx = answer_rx;
        let answer = match agent
            .wait(tokio::time::timeout_at(deadline, &mut answer_rx))
            .await
        {
            Ok(Ok(answer)) => Some(answer),
            // The agent ended before the deadline without answering: it panicked (a bug; the
            // abort comes after the deadline). The contact is handed to a person.
            Ok(Err(_)) => return Err(TurnError::Panicked),
            Err(_) => {
                // Close the channel, then take an answer that arrived at the boundary: after
                // `close` the agent task's send fails and it takes the deferred path, so the
                // reply is delivered exactly once.
                answer_rx.close();
                answer_rx.try_recv().ok()
            }
        };
        drop(agent);
        match answer {
            Some(answer) => {
                self.settle_inline(&config, &conversation, bound, answer)
                    .await
            }
            None => {
                inner.metrics.race_lost.inc();
                tracing::info!(conversation = %conversation.id, "race lost; acknowledging");
                Ok(TurnResponse {
                    messages: vec![config.rules.messages.acknowledgement.clone()],
                    after: None,
                })
            }
        }
    }

    /// The scripted opening (before any check): `Some` is the turn's whole answer.
    async fn scripted_opening(
        &self,
        inbound: &Inbound,
        config: &TenantConfig,
        conversation: &Conversation,
        bound: bool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<TurnResponse>, TurnError> {
        let inner = &self.inner;
        let Some(opening) = config.rules.opening_reply(&inbound.text) else {
            return Ok(None);
        };
        let opening = opening.to_owned();
        let message = Message {
            turn: NewTurn::user(conversation.id, &inbound.text, bound, now),
            rate_window: None,
        };
        let reply = NewTurn::agent(conversation.id, &opening, "answered_scripted", bound, now);
        self.record(conversation, &message, Some(&reply), None, None)
            .await?;
        inner.metrics.turn("answered_scripted");
        tracing::info!(conversation = %conversation.id, outcome = "answered_scripted", "turn");
        Ok(Some(TurnResponse {
            messages: vec![opening],
            after: None,
        }))
    }

    /// Hands a turn's answer over: inline through the response, or (deferred) into the outbox
    /// before the turn gives up its place in the conversation's order.
    async fn deliver(
        &self,
        conversation: &Conversation,
        response: TurnResponse,
        mode: Mode,
        guard: Option<TurnGuard>,
    ) -> Result<TurnResponse, TurnError> {
        if mode == Mode::Inline || response.messages.is_empty() {
            drop(guard);
            return Ok(response);
        }
        let (actions, turn_id) = match response.after {
            Some(after) => (after.actions, Some(after.turn_id)),
            None => (Vec::new(), None),
        };
        self.enqueue_reply(conversation, response.messages, actions, turn_id)
            .await?;
        drop(guard);
        Ok(TurnResponse {
            messages: Vec::new(),
            after: None,
        })
    }

    /// What this engine derives from `config`, built once per snapshot: the snapshot in force is
    /// kept with it, so a pointer comparison cannot mistake a new snapshot for the old one.
    fn derived(&self, config: &Arc<TenantConfig>) -> Arc<Derived> {
        let mut cached = self
            .inner
            .derived
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(derived) = cached.as_ref()
            && Arc::ptr_eq(&derived.config, config)
        {
            return derived.clone();
        }
        let derived = Arc::new(Derived {
            config: config.clone(),
            prompt: SnapshotPrompt::new(config),
            tools: ToolSpecs::new(config),
            keywords: EscalationKeywords::new(&config.rules),
        });
        *cached = Some(derived.clone());
        derived
    }

    /// Performs actions after the response was written, and records their outcome.
    pub async fn run_after(&self, mut after: AfterResponse) {
        actions::perform_all(
            &self.inner.manychat,
            &after.subscriber,
            after.conversation,
            &mut after.actions,
        )
        .await;
        if let Err(error) = self
            .inner
            .store
            .update_turn_actions(after.turn_id, &actions::record(&after.actions))
            .await
        {
            tracing::error!(conversation = %after.conversation, error = %error, "could not update the action record");
        }
    }

    /// Records the agent turn of a race won and returns the reply to render inline.
    async fn settle_inline(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        bound: bool,
        answer: Answer,
    ) -> Result<TurnResponse, TurnError> {
        if answer.thought.reply.escalate {
            let outcome = answer_outcome(&answer);
            let (turn_id, handoff) = self
                .record_escalation(
                    config,
                    conversation,
                    &answer.message,
                    outcome,
                    Some(&answer),
                    bound,
                )
                .await?;
            return Ok(TurnResponse {
                messages: vec![config.rules.messages.escalation.clone()],
                after: self.after(conversation, turn_id, handoff),
            });
        }
        let turn_id = self
            .record_answer(conversation, "answered_inline", bound, &answer)
            .await?;
        Ok(TurnResponse {
            after: self.after(conversation, turn_id, answer.actions),
            messages: answer.thought.reply.messages,
        })
    }

    /// The deferred path: the race was lost (or a reply was queued ahead), so the reply goes to
    /// the outbox with its actions.
    async fn settle_deferred(&self, job: &AgentJob, mut answer: Answer) -> Result<(), StoreError> {
        // Held until the reply is queued, so the conversation's next turn queues behind it.
        let _guard = answer.guard.take();
        let conversation = &job.conversation;
        let (messages, actions, turn_id) = if answer.thought.reply.escalate {
            let outcome = answer_outcome(&answer);
            let (turn_id, handoff) = self
                .record_escalation(
                    &job.derived.config,
                    conversation,
                    &answer.message,
                    outcome,
                    Some(&answer),
                    job.bound,
                )
                .await?;
            let copy = job.derived.config.rules.messages.escalation.clone();
            (vec![copy], handoff, turn_id)
        } else {
            let turn_id = self
                .record_answer(conversation, "deferred", job.bound, &answer)
                .await?;
            (answer.thought.reply.messages, answer.actions, turn_id)
        };
        self.enqueue_reply(conversation, messages, actions, Some(turn_id))
            .await
    }

    /// Records an answered agent turn (inline or deferred) with its usage and staged actions.
    async fn record_answer(
        &self,
        conversation: &Conversation,
        outcome: &'static str,
        bound: bool,
        answer: &Answer,
    ) -> Result<i64, StoreError> {
        let inner = &self.inner;
        let mut turn = NewTurn::agent(
            conversation.id,
            answer.thought.reply.messages.join("\n\n"),
            outcome,
            bound,
            inner.clock.now(),
        );
        self.fill_usage(&mut turn, answer);
        turn.actions = answer
            .thought
            .tools_offered
            .then(|| actions::record(&answer.actions));
        // The message, the reply and its charge, in one write.
        let turn_id = self
            .record(
                conversation,
                &answer.message,
                Some(&turn),
                Some(BudgetCharge::of(&turn)),
                None,
            )
            .await?;
        inner.metrics.turn(outcome);
        tracing::info!(
            conversation = %conversation.id,
            outcome,
            steps = answer.thought.steps,
            latency_ms = turn.latency_ms,
            "turn"
        );
        Ok(turn_id)
    }

    /// An escalation answered inline without the model (pre-model checks): the tenant's copy,
    /// `escalated_at`, the handoff actions after the response.
    async fn escalate_inline(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        message: &Message,
        outcome: &'static str,
        bound: bool,
    ) -> Result<TurnResponse, TurnError> {
        let (turn_id, handoff) = self
            .record_escalation(config, conversation, message, outcome, None, bound)
            .await?;
        Ok(TurnResponse {
            messages: vec![config.rules.messages.escalation.clone()],
            after: self.after(conversation, turn_id, handoff),
        })
    }

    fn after(
        &self,
        conversation: &Conversation,
        turn_id: i64,
        actions: Vec<StagedAction>,
    ) -> Option<AfterResponse> {
        let any_staged = actions
            .iter()
            .any(|a| a.entry.status == ActionStatus::Staged);
        any_staged.then(|| AfterResponse {
            conversation: conversation.id,
            subscriber: conversation.subscriber_id.clone(),
            turn_id,
            actions,
        })
    }

    /// Records an escalated agent turn and sets `escalated_at`. The turn's staged actions are
    /// recorded `discarded` (012) but for an `onEscalation` note of a model or confidence
    /// escalation (024), which stays `staged`; the handoff actions are added as `staged`. The
    /// whole record is returned for the caller to perform what is staged after the escalation
    /// copy is delivered, and to write back in full.
    async fn record_escalation(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        message: &Message,
        outcome: &'static str,
        answer: Option<&Answer>,
        bound: bool,
    ) -> Result<(i64, Vec<StagedAction>), StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let tools_offered = answer.is_some_and(|a| a.thought.tools_offered);
        let mut record = answer.map(|a| a.actions.clone()).unwrap_or_default();
        let cause = answer.map_or(EscalationCause::None, |a| a.thought.reply.cause);
        let discarded = actions::settle_on_escalation(&mut record, cause);
        if discarded > 0 {
            tracing::info!(conversation = %conversation.id, discarded, "staged actions discarded on escalation");
        }
        let handoff = actions::handoff_actions(config.rules.handoff.as_ref());
        let has_handoff = !handoff.is_empty();
        record.extend(handoff);
        let mut turn = NewTurn::agent(
            conversation.id,
            &config.rules.messages.escalation,
            outcome,
            bound,
            now,
        );
        if let Some(answer) = answer {
            self.fill_usage(&mut turn, answer);
        }
        turn.actions = (tools_offered || has_handoff).then(|| actions::record(&record));
        // The message, the reply, its charge and `escalated_at`, in one write.
        let charge = answer.is_some().then(|| BudgetCharge::of(&turn));
        let turn_id = self
            .record(conversation, message, Some(&turn), charge, Some(now))
            .await?;
        inner.metrics.turn(outcome);
        // An escalation without a model answer was logged by its caller, with its reason.
        if answer.is_some() {
            tracing::info!(conversation = %conversation.id, outcome, "turn escalated");
        }
        Ok((turn_id, record))
    }

    fn fill_usage(&self, turn: &mut NewTurn, answer: &Answer) {
        let usage = answer.thought.usage;
        turn.model = Some(self.inner.model.id().to_owned());
        turn.input_tokens = usage.input_tokens as i64;
        turn.output_tokens = usage.output_tokens as i64;
        turn.cached_tokens = usage.cached_tokens as i64;
        turn.cost_usd = crate::model::pricing::cost_usd(self.inner.model.id(), &usage);
        turn.latency_ms = answer.latency.as_millis() as i64;
        turn.reads = i64::from(answer.reads);
    }

    /// MODEL_ABORT_MS: no agent turn; the escalation copy goes through the outbox (C6).
    async fn settle_aborted(&self, job: &AgentJob, message: &Message) -> Result<(), StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        inner.metrics.model_aborted.inc();
        inner.metrics.turn("aborted");
        tracing::warn!(conversation = %job.conversation.id, "model call aborted at MODEL_ABORT_MS");
        // The message and the escalation, in one write; no agent turn.
        self.record(&job.conversation, message, None, None, Some(now))
            .await?;
        let copy = job.derived.config.rules.messages.escalation.clone();
        self.enqueue_reply(&job.conversation, vec![copy], Vec::new(), None)
            .await
    }

    /// Writes the turn's exchange: the contact's message (counted against its hourly window
    /// when the checks let it that far), the reply if any, the charge, the escalation. Returns
    /// the reply's id (the message's when there is no reply).
    async fn record(
        &self,
        conversation: &Conversation,
        message: &Message,
        reply: Option<&NewTurn>,
        charge: Option<BudgetCharge>,
        escalated_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<i64, StoreError> {
        let ids = self
            .inner
            .store
            .record_exchange(Exchange {
                message: &message.turn,
                rate: message
                    .rate_window
                    .map(|window| (&conversation.subscriber_id, window)),
                reply,
                charge,
                escalated_at,
            })
            .await?;
        Ok(ids.reply.unwrap_or(ids.message))
    }

    async fn enqueue_reply(
        &self,
        conversation: &Conversation,
        messages: Vec<String>,
        actions: Vec<StagedAction>,
        turn_id: Option<i64>,
    ) -> Result<(), StoreError> {
        let now = self.inner.clock.now();
        let payload = ReplyPayload {
            messages,
            actions,
            turn_id,
        };
        let payload = serde_json::to_value(&payload)
            .map_err(|e| StoreError::Corrupt(format!("outbox payload: {e}")))?;
        self.inner
            .store
            .enqueue(&NewOutboxRow {
                conversation_id: conversation.id,
                subscriber_id: conversation.subscriber_id.clone(),
                kind: OutboxKind::Reply,
                payload,
                next_attempt_at: now,
                created_at: now,
            })
            .await?;
        Ok(())
    }
}

/// How a turn's answer leaves: through the HTTP response, or (the response already sent) through
/// the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Inline,
    Deferred,
}

/// A turn waiting for its conversation's earlier turns (037).
struct WaitingTurn {
    engine: TurnEngine,
    inbound: Inbound,
    config: Arc<TenantConfig>,
    conversation: Conversation,
    bound: bool,
}

impl WaitingTurn {
    /// Waits for the turn's place; hands it to the request if it is still waiting, otherwise
    /// runs the turn itself with its replies queued. Abandons the wait after
    /// `MODEL_ABORT_MS + RACE_DEADLINE_MS`, recording the message and queueing the escalation
    /// copy (C6: nothing is lost, a person takes over).
    async fn wait(self, start: oneshot::Sender<Result<TurnGuard, StoreError>>) {
        let inner = &self.engine.inner;
        let abandon_at =
            self.inbound.arrived_at + inner.settings.model_abort + inner.settings.race_deadline;
        let acquired = tokio::time::timeout_at(
            abandon_at,
            inner
                .order
                .acquire(&self.conversation.subscriber_id, self.conversation.id),
        )
        .await;
        let result = match acquired {
            Ok(Ok(guard)) => match start.send(Ok(guard)) {
                Ok(()) => return,
                Err(Ok(guard)) => {
                    self.engine
                        .run(
                            self.inbound,
                            self.config,
                            self.conversation.clone(),
                            self.bound,
                            Some(guard),
                            Mode::Deferred,
                            None,
                        )
                        .await
                }
                Err(Err(_)) => return,
            },
            Ok(Err(error)) => match start.send(Err(error)) {
                Ok(()) => return,
                Err(Err(error)) => Err(error.into()),
                Err(Ok(_)) => return,
            },
            Err(_) => {
                tracing::warn!(conversation = %self.conversation.id, "turn wait expired");
                self.expired().await.map(|()| TurnResponse {
                    messages: Vec::new(),
                    after: None,
                })
            }
        };
        if let Err(error) = result {
            tracing::error!(conversation = %self.conversation.id, error = %error, "turn that waited could not run");
        }
    }

    async fn expired(&self) -> Result<(), TurnError> {
        let engine = &self.engine;
        let now = engine.inner.clock.now();
        let message = Message {
            turn: NewTurn::user(self.conversation.id, &self.inbound.text, self.bound, now),
            rate_window: None,
        };
        let response = engine
            .escalate_inline(
                &self.config,
                &self.conversation,
                &message,
                "error",
                self.bound,
            )
            .await?;
        engine
            .deliver(&self.conversation, response, Mode::Deferred, None)
            .await?;
        Ok(())
    }
}

/// What the agent's task hands back: the guarded thought, the actions its tools staged, and
/// how long the turn took from arrival.
#[derive(Debug)]
struct Answer {
    thought: Thought,
    actions: Vec<StagedAction>,
    latency: Duration,
    /// The turn's place in its conversation's order, released once the answer is settled.
    guard: Option<TurnGuard>,
    /// 024: successful contact reads this turn.
    reads: u32,
    /// The contact's message, recorded with the answer.
    message: Message,
}

/// The contact's message, recorded together with the turn's outcome (one write, so a turn is
/// stored whole or not at all).
#[derive(Debug, Clone)]
struct Message {
    turn: NewTurn,
    /// The hourly window it counts against; `None` when a keyword or the cap stopped it first.
    rate_window: Option<chrono::DateTime<chrono::Utc>>,
}

/// The agent's half of a turn, run in its own task so that it outlives a lost race.
struct AgentJob {
    engine: TurnEngine,
    /// The turn's config snapshot and what it derives.
    derived: Arc<Derived>,
    conversation: Conversation,
    contact_text: String,
    notices: Vec<String>,
    history: Vec<HistoryTurn>,
    bound: bool,
    arrived_at: Instant,
    guard: Option<TurnGuard>,
    /// Taken by whoever records the turn: the answer, or the abort.
    message: Option<Message>,
}

impl AgentJob {
    async fn run(mut self, answer: oneshot::Sender<Answer>, abort_at: Instant) {
        let inner = &self.engine.inner;
        let derived = &self.derived;
        let input = ThinkInput {
            config: &derived.config,
            prompt: &derived.prompt,
            notices: &self.notices,
            history: &self.history,
            contact_text: &self.contact_text,
            max_output_tokens: inner.settings.max_output_tokens,
            temperature: inner.settings.temperature,
            max_messages: 3,
        };
        let fence = agent::Fence::new();
        let mut tools = TurnTools::new(ToolContext {
            config: derived.config.clone(),
            manychat: inner.manychat.clone(),
            subscriber: self.conversation.subscriber_id.clone(),
            conversation: self.conversation.id,
            // 024: only a turn that reads history may read the contact.
            reads_history: self.bound,
            fence: fence.clone(),
            specs: derived.tools.clone(),
        });
        let thinking = agent::think_with_fence(inner.model.as_ref(), input, &fence, &mut tools);
        let result = tokio::time::timeout_at(abort_at, thinking).await;
        let Some(message) = self.message.take() else {
            return;
        };
        let settled = match result {
            Ok(thought) => {
                let reads = tools.reads();
                let result = Answer {
                    thought,
                    reads,
                    actions: tools.into_actions(),
                    latency: self.arrived_at.elapsed(),
                    guard: self.guard.take(),
                    message,
                };
                match answer.send(result) {
                    Ok(()) => Ok(()),
                    Err(answer) => self.engine.settle_deferred(&self, answer).await,
                }
            }
            Err(_) => self.engine.settle_aborted(&self, &message).await,
        };
        if let Err(error) = settled {
            tracing::error!(conversation = %self.conversation.id, error = %error, "deferred turn could not be recorded");
        }
    }
}

/// The model's view of stored history turns (018): text, role, and what an agent turn performed.
fn history_turns(turns: Vec<crate::store::Turn>) -> Vec<HistoryTurn> {
    turns
        .into_iter()
        .map(|turn| HistoryTurn {
            actions_performed: match (&turn.role, &turn.actions) {
                (Role::Agent, Some(actions)) => agent::history_actions_note(actions),
                _ => Vec::new(),
            },
            role: turn.role,
            text: turn.text,
        })
        .collect()
}

/// Server notices outside the fence (SYSTEM 4): what the server knows that the model should.
fn notices(config: &TenantConfig, inbound: &Inbound) -> Vec<String> {
    let mut notices = Vec::new();
    if let Some(offering) = &inbound.offering
        && config.catalog.offerings.iter().any(|o| &o.id == offering)
    {
        notices.push(format!("OFFERING: {offering}"));
    }
    notices
}

fn answer_outcome(answer: &Answer) -> &'static str {
    if answer.thought.error.is_some() {
        "error"
    } else {
        answer.thought.reply.outcome()
    }
}
