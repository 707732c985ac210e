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

mod after;
mod agent_job;
pub(crate) mod budget;
mod detach;
mod escalate;
mod gates;
mod hold;
// 025: the nudge worker applies the turn cap to a nudge turn.
pub use gates::messages_since_idle_gap;
mod media;
mod order;
mod record;
mod settle;
mod shared;
mod waiting;

pub use after::AfterResponse;
use agent_job::{AgentJob, Settled};
use detach::Detachable;
pub use gates::Denial;
pub use order::{TurnGuard, TurnOrder};
pub(crate) use record::fill_usage;
use record::{Message, Promise};
use shared::Derived;
pub use shared::TurnsShared;
use waiting::WaitingTurn;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::agent::{self, HistoryTurn};
use crate::clock::Clock;
use crate::config::{ConfigHandle, TenantConfig};
use crate::ids::{ConversationId, SubscriberId};
use crate::manychat::ManyChatClient;
use crate::media::{MediaRef, MediaService, MediaSettings};
use crate::metrics::Metrics;
use crate::model::Model;
use crate::outbox::Handoffs;
use crate::sales;
use crate::store::{Conversation, NewTurn, Role, Store, StoreError, TurnContext, TurnContextQuery};
use crate::tokens::{self, TokenService};
use crate::tools::FlowSends;

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
        // Issue 14: the contact's sales record comes with the turn's one read.
        sales: sales::reads_records(config.tools.as_ref()),
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
    /// `CHANNEL`: how a deferred reply's messages are shaped (one on WhatsApp).
    pub channel: crate::channel::Channel,
    /// 020: the media host, the transcriber and ffmpeg.
    pub media: MediaSettings,
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
    /// 020: the media the message is (its `text` is then the kind's marker).
    pub media: Option<MediaRef>,
    /// When the request arrived: the race deadline counts from here.
    pub arrived_at: Instant,
}

impl Inbound {
    /// The contact's message as recorded: the text (a media message's marker) and its kind.
    fn turn(&self, conversation: ConversationId, bound: bool, at: DateTime<Utc>) -> NewTurn {
        let mut turn = NewTurn::user(conversation, &self.text, bound, at);
        turn.media_kind = self.media.as_ref().map(|m| m.kind.as_str().to_owned());
        turn
    }
}

/// A turn's place under `MAX_TURNS_IN_FLIGHT`, shared by the request and the agent it starts:
/// given back when the last holder ends.
pub type InFlight = Arc<tokio::sync::OwnedSemaphorePermit>;

/// What the HTTP layer renders, and what it runs once the response is written.
#[derive(Debug)]
pub struct TurnResponse {
    /// The messages to render; empty for a silent response.
    pub messages: Vec<String>,
    pub after: Option<AfterResponse>,
}

impl TurnResponse {
    /// No messages (3.3: the reply comes later, through the outbox).
    pub fn silent() -> Self {
        Self {
            messages: Vec::new(),
            after: None,
        }
    }
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
    /// Performs an inline escalation's handoff once its response is written.
    handoffs: Handoffs,
    /// 020: turns a media message into text and images.
    media: MediaService,
    /// What the config snapshot in force derives (built once per snapshot, not per turn) and
    /// what the turns in flight may still spend today (issue 13 item 6); shared with the nudge
    /// turns of `serve`.
    shared: TurnsShared,
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
                media: MediaService::new(settings.media.clone()),
                settings,
                config,
                order: TurnOrder::new(store.clone()),
                shared: TurnsShared::default(),
                tokens: TokenService::new(store.clone(), manychat.clone(), token_field, clock),
                handoffs: Handoffs::new(store.clone(), manychat.clone(), clock, metrics.clone()),
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

    /// 020: the file host the ManyChat adapter detects media on (`MANYCHAT_MEDIA_BASE`).
    pub fn media_host(&self) -> &crate::media::MediaHost {
        self.inner.media.host()
    }

    /// Runs one turn. An error means the turn could not be recorded (or hit a bug); the caller
    /// answers with the escalation copy. `in_flight` is the turn's place under
    /// `MAX_TURNS_IN_FLIGHT`: it is held until the turn's model call ends, also after the
    /// response was sent (issue 13 item 6).
    pub async fn handle(
        &self,
        inbound: Inbound,
        in_flight: Option<InFlight>,
    ) -> Result<TurnResponse, TurnError> {
        detach::caught(self.handle_turn(inbound, in_flight))
            .await
            .unwrap_or_else(|| {
                tracing::error!("a turn panicked");
                Err(TurnError::Panicked)
            })
    }

    async fn handle_turn(
        &self,
        inbound: Inbound,
        in_flight: Option<InFlight>,
    ) -> Result<TurnResponse, TurnError> {
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
                let start = Start {
                    guard,
                    mode: Mode::Inline,
                    context: Some((now, context)),
                    promise: None,
                    in_flight,
                };
                return self.run(inbound, config, conversation, bound, start).await;
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
            let start = Start::inline(None, in_flight);
            return self.run(inbound, config, conversation, bound, start).await;
        }

        // 037: wait for the conversation's earlier turns, in arrival order. The wait counts
        // against the deadline; a turn that cannot start in time answers silently and runs later
        // in the waiting task, replying through the outbox.
        let (start_tx, mut start_rx) = oneshot::channel();
        let (promise_tx, promise_rx) = oneshot::channel();
        let waiting = WaitingTurn {
            engine: self.clone(),
            inbound: inbound.clone(),
            config: config.clone(),
            conversation: conversation.clone(),
            bound,
            promised: promise_rx,
            in_flight: in_flight.clone(),
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
                drop(promise_tx);
                let start = Start::inline(Some(guard), in_flight);
                self.run(inbound, config, conversation, bound, start).await
            }
            Some(Err(error)) => Err(error.into()),
            None => {
                // The silent response promises a reply: the message and the fallback are
                // written first, and handed to the waiting task (which waits for them).
                let message = Message::new(inbound.turn(conversation.id, bound, inner.clock.now()));
                let abort_at =
                    inbound.arrived_at + inner.settings.model_abort + inner.settings.race_deadline;
                self.promise_before_response(
                    &config,
                    &conversation,
                    &message,
                    abort_at,
                    promise_tx,
                    false,
                )
                .await?;
                inner.metrics.race_lost.inc();
                tracing::info!(
                    conversation = %conversation.id,
                    "previous turn still running at the deadline; answering later"
                );
                Ok(TurnResponse::silent())
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
    async fn run(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        conversation: Conversation,
        bound: bool,
        start: Start,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let Start {
            guard,
            mode,
            context,
            promise,
            in_flight,
        } = start;
        let now = context
            .as_ref()
            .map_or_else(|| inner.clock.now(), |(at, _)| *at);
        let mut message = Message::new(inbound.turn(conversation.id, bound, now));
        message.promise = promise;
        // 025: the contact wrote, so their follow-up is no longer wanted.
        let replied = crate::nudge::contact_replied(
            inner.store.as_ref(),
            &inner.metrics,
            &config,
            conversation.id,
            now,
        )
        .await;
        if let Some(response) = self
            .scripted_opening(&inbound, &config, &conversation, &message, mode)
            .await?
        {
            drop(guard);
            return Ok(response);
        }

        // Everything the checks and the prompt read, in one call: the contact's earlier
        // message times (turn cap), history (an unbound turn is answered from its own message
        // only, 019), today's spend, whether a reply is already queued for the contact, and
        // the contact's count this hour.
        let context = match context {
            Some((_, mut context)) => {
                let (store, queued) = (inner.store.as_ref(), context.queued_replies);
                context.queued_replies = replied
                    .queued_replies(store, conversation.id, queued)
                    .await?;
                context
            }
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
        // What the snapshot derives (keywords, prompt, tool specs), looked up once per turn.
        let derived = self.derived(&config);
        let history = history_turns(context.history);
        let mut reservation = None;
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
                gates::after_rate(&config, context.rate_count + 1, context.spent).or_else(|| {
                    // Issue 13 item 6: what the turns in flight may spend counts too.
                    let estimate = budget::estimate(
                        inner.model.id(),
                        derived.prompt.prefix.len()
                            + inbound.text.len()
                            + history.iter().map(|t| t.text.len()).sum::<usize>(),
                        inner.settings.max_output_tokens,
                    );
                    reservation = inner.shared.budget.reserve(
                        &config,
                        now.date_naive(),
                        context.spent,
                        estimate,
                    );
                    reservation.is_none().then_some(Denial::Budget)
                })
            }
        };
        if let Some(denial) = denial {
            // 037: the copy never overtakes a reply already queued (a follow-up, 025).
            let mode = if context.queued_replies > 0 {
                Mode::Deferred
            } else {
                mode
            };
            let response = self
                .escalate_without_model(
                    &config,
                    &conversation,
                    &message,
                    "escalated_precheck",
                    denial.escalation(),
                    mode,
                )
                .await?;
            drop(guard);
            return Ok(response);
        }

        // A reply already queued for this contact must not be overtaken by an inline answer:
        // this turn's reply goes through the outbox behind it, and the response is silent.
        let queued_ahead = mode == Mode::Deferred || context.queued_replies > 0;
        let abort_at = inbound.arrived_at + inner.settings.model_abort;
        if queued_ahead && message.promise.is_none() {
            message.promise = Some(
                self.promise(&config, &conversation, &message, abort_at)
                    .await?,
            );
        }
        // On a lost race the request writes the promise while the agent still runs; the agent
        // takes it from here before it settles.
        let (promise_tx, promise_rx) = oneshot::channel();
        let lost_race_message = (!queued_ahead).then(|| message.clone());
        // 030: the flows the agent sends, read at the deadline and when the reply is settled.
        let flows = FlowSends::default();

        // The contact's sales position, from the server's own records (034, 023, 028).
        let request = sales::known::Request {
            offering: inbound.offering.as_deref(),
            bound,
            now,
        };
        let known = sales::known::read(
            inner.store.as_ref(),
            &config,
            &conversation,
            context.sales,
            request,
        )
        .await?;
        let job = AgentJob {
            engine: self.clone(),
            derived,
            conversation: conversation.clone(),
            contact_text: inbound.text.clone(),
            notices: sales::notices::notices(&config, &known),
            sales: known,
            history,
            bound,
            media: inbound.media.clone(),
            arrived_at: inbound.arrived_at,
            guard,
            message: Some(message),
            promised: (!queued_ahead).then_some(promise_rx),
            flows: flows.clone(),
            _reservation: reservation,
            _in_flight: in_flight,
        };
        let (answer_tx, answer_rx) = oneshot::channel();
        // The agent runs in this request while it waits (3.4), and in a task of its own once
        // the request stops waiting: at the deadline, or if the request is dropped.
        let mut agent = Detachable::new(&inner.tasks, job.run(answer_tx, abort_at));

        if queued_ahead {
            drop(answer_rx);
            drop(agent);
            inner.metrics.race_lost.inc();
            tracing::info!(conversation = %conversation.id, "reply queued ahead; answering later");
            return Ok(TurnResponse::silent());
        }

        let deadline = inbound.arrived_at + inner.settings.race_deadline;
        let mut answer_rx = answer_rx;
        let answer = match agent
            .wait(tokio::time::timeout_at(deadline, &mut answer_rx))
            .await
        {
            Ok(Ok(settled)) => Some(settled),
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
        match answer {
            Some(Settled::Answer(answer)) => {
                drop(agent);
                self.settle_inline(&config, &conversation, answer, deadline)
                    .await
            }
            Some(Settled::Decided(decided)) => {
                drop(agent);
                Ok(self
                    .settle_decided(&config, &conversation, decided, Mode::Inline)
                    .await?)
            }
            None => {
                // The acknowledgement promises a reply: the promise is on disk before it
                // leaves (the agent, not polled meanwhile, waits for it before it settles).
                // 030: while a flow the turn sent still plays, the response is silent instead.
                let message = lost_race_message.expect("kept for a lost race");
                let silent = flows.playing_at(deadline);
                let written = self
                    .promise_before_response(
                        &config,
                        &conversation,
                        &message,
                        abort_at,
                        promise_tx,
                        silent,
                    )
                    .await;
                drop(agent);
                written?;
                inner.metrics.race_lost.inc();
                if silent {
                    tracing::info!(conversation = %conversation.id, "race lost while a flow plays; answering silently");
                    return Ok(TurnResponse::silent());
                }
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
        message: &Message,
        mode: Mode,
    ) -> Result<Option<TurnResponse>, TurnError> {
        // 020: media (a marker now, a transcript later) never matches the opening trigger.
        if inbound.media.is_some() {
            return Ok(None);
        }
        let Some(opening) = config.rules.opening_reply(&inbound.text) else {
            return Ok(None);
        };
        let response = self
            .answer_without_model(conversation, message, opening, "answered_scripted", mode)
            .await?;
        Ok(Some(response))
    }

    /// What `config` derives, built once per snapshot (`shared`).
    fn derived(&self, config: &Arc<TenantConfig>) -> Arc<Derived> {
        self.inner.shared.derived(config)
    }

    /// 025: what `serve`'s nudge turns share with this engine's turns.
    pub fn shared(&self) -> TurnsShared {
        self.inner.shared.clone()
    }
}

/// How a turn's answer leaves: through the HTTP response, or (the response already sent) through
/// the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Inline,
    Deferred,
}

/// What a turn starts with.
struct Start {
    /// Its place in the conversation's order (none for an unbound turn).
    guard: Option<TurnGuard>,
    mode: Mode,
    /// What the turn read already, with the time it was read for.
    context: Option<(DateTime<Utc>, TurnContext)>,
    /// The promise its response made already (a turn that could not start in time).
    promise: Option<Promise>,
    in_flight: Option<InFlight>,
}

impl Start {
    fn inline(guard: Option<TurnGuard>, in_flight: Option<InFlight>) -> Self {
        Self {
            guard,
            mode: Mode::Inline,
            context: None,
            promise: None,
            in_flight,
        }
    }
}

/// The model's view of stored history turns (018): text, role, and what an agent turn performed.
pub(crate) fn history_turns(turns: Vec<crate::store::Turn>) -> Vec<HistoryTurn> {
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
