//! One turn, from a parsed inbound message to its outcome (SYSTEM 3.4, 4, 6). This file holds
//! the turn's types and its order (`handle`, `run`); each step lives in a module of its own.
//!
//! The order is fixed: conversation and its place in the contact's order (`order`, `waiting`)
//! and among the turns in flight (`place`: a waiting turn holds no slot; `busy`: beyond a
//! contact's waiting turns, or no slot free) → scripted opening → one round of reads (`context`: earlier message times, today's spend,
//! history, queued replies, the hourly count, the sales record) → escalation keywords, the turn
//! cap, the per-contact rate and the daily budget (`gates`, `budget`) → the agent runs
//! (`agent_job`), raced against the deadline measured from the request's arrival (`race`: in
//! the request while it waits, in a task of its own once it stops waiting, `detach`). Won: the
//! reply is answered inline and its actions run after the response (`settle`, `after`). Lost:
//! the contact gets the tenant's acknowledgement now, and the agent keeps running until
//! `MODEL_ABORT_MS`; its reply and actions go to the outbox. Aborted: no agent turn is
//! recorded; the escalation copy goes through the outbox (C6, `escalate`). A reply already
//! queued for the contact is never overtaken (037): the answer queues behind it.
//!
//! Beside the order: `shared` (what the process's turns share per config snapshot: prompt,
//! tool specs, keywords, the budget ledger; `serve` hands it to its nudge turns), `embeddings`
//! (`KNOWLEDGE_EMBEDDINGS`: each snapshot's vectors filled in the background, the message
//! embedded under a short timeout before retrieval), `media` (a
//! contact's media read inside the race, and what is decided without the model), `hold` (the
//! reply held until the flows the turn sent have played, 030), `record` (the one write, the
//! durable promises and their recovery at start, load-shed records, the handoff's no-repeat
//! window), `takeover` (a dead replica's promises run again by a survivor).
//!
//! Invariants: nothing here knows HTTP or ManyChat's JSON; a turn is recorded whole in one
//! write (`record`, `Store::record_exchange`: the contact's message, its count, the reply, the
//! charge, the escalation) once its outcome is known, and an inline answer leaves only after
//! that write committed; an agent turn is recorded for every outcome but the abort; staged
//! actions run only when the final reply does not escalate.

mod after;
mod agent_job;
pub(crate) mod budget;
mod burst;
mod busy;
mod contact_budget;
mod context;
mod decided;
mod detach;
pub mod embeddings;
mod escalate;
mod gates;
mod held;
mod hold;
// 025: the nudge worker applies the turn cap to a nudge turn.
pub use gates::messages_since_idle_gap;
mod media;
mod message;
mod order;
pub mod place;
mod race;
mod record;
mod replied;
mod settle;
mod shared;
mod takeover;
mod unheld;
mod waiting;

pub use after::AfterResponse;
use agent_job::AgentJob;
pub use context::HISTORY_TURNS;
use context::context_query;
pub(crate) use context::{conversation_fence, history_turns};
pub use gates::Denial;
use message::{Message, Promise};
pub use order::{TurnGuard, TurnOrder};
pub(crate) use record::fill_usage;
pub use record::{OwnerHold, Shed};
pub use replied::{Replied, contact_replied};
use shared::Derived;
pub use shared::TurnsShared;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::config::{ConfigHandle, TenantConfig};
use crate::ids::{ConversationId, Secret, SubscriberId};
use crate::manychat::ManyChatClient;
use crate::media::{MediaRef, MediaService, MediaSettings};
use crate::metrics::Metrics;
use crate::model::Model;
use crate::outbox::Handoffs;
use crate::sales;
use crate::store::{Conversation, During, NewTurn, Store, StoreError, TurnContext};
use crate::tokens::{self, TokenService};
use crate::tools::FlowSends;

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
    /// `OUTBOX_GIVE_UP_AFTER_MS`: how long an inline escalation's handoff is retried.
    pub outbox_give_up_after: Duration,
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

pub use place::{InFlight, TurnPlace, TurnPlaces};

/// What the HTTP layer renders, and what it runs once the response is written.
#[derive(Debug)]
pub struct TurnResponse {
    /// The messages to render; empty for a silent response.
    pub messages: Vec<String>,
    pub after: Option<AfterResponse>,
    /// 019: the contact's first token, for the response to set in the token field (its API
    /// write is the fallback, queued). Whatever the turn answered, the block carries it.
    pub token: Option<Secret>,
}

impl TurnResponse {
    /// No messages (3.3: the reply comes later, through the outbox).
    pub fn silent() -> Self {
        Self {
            messages: Vec::new(),
            after: None,
            token: None,
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
    /// 019: issues contact tokens for the response to carry, and settles their fallback writes.
    tokens: TokenService,
    /// Performs an inline escalation's handoff once its response is written.
    handoffs: Handoffs,
    /// 020: turns a media message into text and images.
    media: MediaService,
    /// What the config snapshot in force derives (built once per snapshot, not per turn) and
    /// what the turns in flight may still spend today; shared with the nudge
    /// turns of `serve`.
    shared: TurnsShared,
    /// The tenant's own tools' endpoints (`crate::plugins`): reads during the step, writes after
    /// the response.
    plugins: crate::plugins::PluginClient,
    /// The contacts' bursts open in this process (`crate::burst`).
    bursts: crate::burst::Bursts<burst::FirstPiece>,
    /// Contacts handed off without the store whose hold is not written yet (`unheld`).
    unheld: unheld::Unheld,
}

impl TurnEngine {
    /// Calls the tenant's plugin tools through `client` (its secrets' source). Only before the
    /// engine is shared (right after [`TurnEngine::new`]); a shared engine keeps its client.
    pub fn with_plugins(mut self, client: crate::plugins::PluginClient) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.plugins = client,
            None => tracing::error!("the turn engine is shared: its plugin client stays"),
        }
        self
    }

    /// 031: prompts the turns (and the nudge turns sharing [`TurnEngine::shared`]) with
    /// `playbook`'s active version. Only before the engine is shared, as [`Self::with_plugins`].
    pub fn with_playbook(mut self, playbook: crate::learning::playbook::PlaybookCache) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.shared = inner.shared.clone().with_playbook(playbook),
            None => tracing::error!("the turn engine is shared: its playbook stays"),
        }
        self
    }

    /// `KNOWLEDGE_EMBEDDINGS`: semantic search for the turns (and the nudge turns sharing
    /// [`TurnEngine::shared`]). Only before the engine is shared, as [`Self::with_plugins`].
    pub fn with_embeddings(mut self, embeddings: embeddings::Embeddings) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.shared = inner.shared.clone().with_embeddings(embeddings),
            None => tracing::error!("the turn engine is shared: its embeddings stay"),
        }
        self
    }

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
        let give_up_after = settings.outbox_give_up_after;
        Self {
            inner: Arc::new(Inner {
                media: MediaService::new(settings.media.clone()),
                settings,
                config,
                order: TurnOrder::new(store.clone()),
                shared: TurnsShared::default(),
                tokens: TokenService::new(store.clone(), manychat.clone(), token_field, clock),
                handoffs: Handoffs::new(store.clone(), manychat.clone(), clock, metrics.clone())
                    .with_give_up_after(give_up_after),
                store,
                model,
                manychat,
                clock,
                tasks,
                bursts: crate::burst::Bursts::new(metrics.bursts_open()),
                metrics,
                plugins: crate::plugins::PluginClient::default(),
                unheld: unheld::Unheld::default(),
            }),
        }
    }

    /// The tenant's escalation copy from the current config: what any failure answers (C6);
    /// outside business hours, the closed copy.
    pub fn escalation_copy(&self) -> String {
        let config = self.inner.config.snapshot();
        crate::handoff::escalation_copy(&config, self.inner.clock.now()).to_owned()
    }

    pub fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// 020: the file host the ManyChat adapter detects media on (`MANYCHAT_MEDIA_BASE`).
    pub fn media_host(&self) -> &crate::media::MediaHost {
        self.inner.media.host()
    }

    /// Runs one turn. An error means the turn could not be recorded (or hit a bug); the caller
    /// answers with the escalation copy. `place` is the message's place among the turns in
    /// flight (`place`): the turn takes its slot when it can start, and holds it until its
    /// model call ends, also after the response was sent.
    pub async fn handle(
        &self,
        inbound: Inbound,
        place: TurnPlace,
    ) -> Result<TurnResponse, TurnError> {
        detach::caught(self.handle_turn(inbound, place))
            .await
            .unwrap_or_else(|| {
                tracing::error!("a turn panicked");
                Err(TurnError::Panicked)
            })
    }

    async fn handle_turn(
        &self,
        inbound: Inbound,
        place: TurnPlace,
    ) -> Result<TurnResponse, TurnError> {
        let mut token = None;
        let mut response = self.route(inbound, place, &mut token).await?;
        response.token = token;
        Ok(response)
    }

    /// Binds the request (`token`: a token issued for the response to carry) and runs its turn
    /// as its contact's order and the slots allow.
    async fn route(
        &self,
        inbound: Inbound,
        place: TurnPlace,
        token: &mut Option<Secret>,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        // 037, uncontended (the common case): with the contact's place taken at once, the
        // conversation and everything the turn reads come in one call.
        if let Some(guard) = inner.order.try_acquire(&inbound.subscriber_id) {
            let now = inner.clock.now();
            let query = context_query(&config, true, now);
            if let Some((mut conversation, context)) = inner
                .store
                .returning_contact(&inbound.subscriber_id, query)
                .await
                .during("reading the contact's conversation and history")?
            {
                // A contact handed off without the store is held from here on (`unheld`).
                self.hold_handed_off(&mut conversation)
                    .await
                    .during("writing the hold of a contact handed off without the store")?;
                let bound = self.bind(&conversation, &inbound, token).await;
                // An unbound turn neither waits nor blocks, and reads no history.
                let (guard, context) = if bound {
                    (Some(guard), context)
                } else {
                    (None, context.unbound())
                };
                let ready = Ready {
                    conversation,
                    bound,
                    guard,
                    context: Some((now, context)),
                };
                return self.start_or_wait(inbound, config, ready, place).await;
            }
            // A first contact: the conversation is created below.
        }
        let channel = inbound.channel.as_deref().unwrap_or("whatsapp");
        let mut conversation = inner
            .store
            .conversation_for(&inbound.subscriber_id, channel, inner.clock.now())
            .await
            .during("reading the contact's conversation")?;
        self.hold_handed_off(&mut conversation)
            .await
            .during("writing the hold of a contact handed off without the store")?;
        let bound = self.bind(&conversation, &inbound, token).await;
        // 037: unbound turns neither wait nor block.
        if !bound {
            let ready = Ready {
                conversation,
                bound,
                guard: None,
                context: None,
            };
            return self.start_or_wait(inbound, config, ready, place).await;
        }
        // A piece of a message whose turn is still gathering joins it (`burst`).
        if let Some(response) = self.join_burst(&config, &conversation, &inbound).await? {
            return Ok(response);
        }

        self.run_in_order(inbound, config, conversation, bound, None, place)
            .await
    }

    /// A turn that may run now in its contact's order: it starts when its contact has room and
    /// a slot is free (`place`), waits when its contact has not, and is load-shed when no slot
    /// is free.
    async fn start_or_wait(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        ready: Ready,
        mut place: TurnPlace,
    ) -> Result<TurnResponse, TurnError> {
        let Ready {
            conversation,
            bound,
            guard,
            context,
        } = ready;
        match place.try_start() {
            Ok(in_flight) => {
                let start = Start {
                    guard,
                    mode: Mode::Inline,
                    context,
                    promise: None,
                    in_flight: Some(in_flight),
                };
                self.run(inbound, config, conversation, bound, start).await
            }
            Err(place::NotNow::Full) => {
                drop(guard);
                Ok(self.shed_now(&inbound).await)
            }
            Err(place::NotNow::ContactBusy) => {
                self.run_in_order(inbound, config, conversation, bound, guard, place)
                    .await
            }
        }
    }

    /// 019: whether the request is bound (it reads and extends history: its token matches, or
    /// the contact has none yet). A contact's first token goes into `token`, for the response
    /// to carry; a reissued one is written through the API beside the model call.
    async fn bind(
        &self,
        conversation: &Conversation,
        inbound: &Inbound,
        token: &mut Option<Secret>,
    ) -> bool {
        let inner = &self.inner;
        let presented = inbound.ai_token.as_deref();
        let binding = tokens::bind(conversation, presented);
        *token = inner
            .tokens
            .after_request(
                &inner.tasks,
                conversation,
                &binding,
                presented,
                inbound.arrived_at + inner.settings.race_deadline,
            )
            .await;
        tokens::reads_history(&binding, inner.settings.contact_tokens_enforced)
    }

    /// Runs a turn that holds its place in the conversation's order (or needs none). `Inline`
    /// answers through the response; `Deferred` (the response was already sent) queues every
    /// reply in the outbox before giving up its place, so the next turn cannot overtake it.
    async fn run(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        mut conversation: Conversation,
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
        let (now, read) = match context {
            Some((at, context)) => (at, Some(context)),
            None => (inner.clock.now(), None),
        };
        let mut message = Message::new(inbound.turn(conversation.id, bound, now));
        message.promise = promise;
        // 025: the contact wrote, so their follow-up is no longer wanted.
        let replied = contact_replied(
            inner.store.as_ref(),
            &inner.metrics,
            &config,
            conversation.id,
            now,
        )
        .await;
        // A contact held for a person is recorded and not answered (`handoff`); a hold that has
        // ended is released here, and this turn tells the model.
        let fresh = read.is_some();
        if let Some(response) = self
            .held(&config, &mut conversation, fresh, &mut message, mode)
            .await?
        {
            drop(guard);
            return Ok(response);
        }
        let release_note = self.release_note(&conversation).await;
        if let Some(opening) = scripted_opening(&inbound, &config) {
            // 037: like any answer, it never overtakes a reply already queued for the contact.
            let counted = read.as_ref().map(|context| context.queued_replies);
            let queued = self.queued_replies(&conversation, counted, replied).await?;
            let response = self
                .answer_without_model(
                    &conversation,
                    &message,
                    opening,
                    "answered_scripted",
                    mode.behind(queued),
                )
                .await?;
            drop(guard);
            return Ok(response);
        }

        let context = self
            .read_context(&config, &conversation, bound, now, read, replied)
            .await?;
        let turn = ReadTurn {
            inbound,
            config,
            conversation,
            bound,
            guard,
            mode,
            context,
            message,
            now,
            release_note,
            in_flight,
        };
        // The rest of a message sent in pieces joins it before the checks (`burst`).
        self.gather_burst(turn).await
    }

    /// A turn once it has read what it needs: the checks, the promise a silent response makes,
    /// and the agent (raced inline, or behind the queued replies).
    async fn proceed(&self, turn: ReadTurn) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let ReadTurn {
            inbound,
            config,
            conversation,
            bound,
            guard,
            mode,
            mut context,
            mut message,
            now,
            release_note,
            in_flight,
        } = turn;
        // What the snapshot derives (keywords, prompt, tool specs), looked up once per turn.
        let derived = self.derived(&config);
        let history = history_turns(std::mem::take(&mut context.history));
        // 037: a reply already queued for this contact (a follow-up, 025) is never overtaken:
        // this turn's answer goes through the outbox behind it, and the response is silent.
        let mode = mode.behind(context.queued_replies);
        let admitted = match self.admit(&derived, &inbound, &context, now, &mut message) {
            // The business's budget lets it through: the contact's own share of it is next.
            Ok(reservation) => self
                .contact_budget(&config, &conversation, now)
                .await?
                .map(|()| reservation),
            denied => denied,
        };
        let reservation = match admitted {
            Ok(reservation) => reservation,
            Err(denial) => {
                let response = self
                    .record_escalation(
                        &config,
                        &conversation,
                        &message,
                        "escalated_precheck",
                        denial.escalation(),
                        None,
                        mode,
                    )
                    .await?;
                drop(guard);
                return Ok(response);
            }
        };

        // A silent response promises a reply: the promise is on disk before it leaves.
        let abort_at = inbound.arrived_at + inner.settings.model_abort;
        if mode == Mode::Deferred && message.promise.is_none() {
            message.promise = Some(
                self.promise(&config, &conversation, &message, abort_at)
                    .await?,
            );
        }
        let known = self
            .sales_position(&config, &conversation, &inbound, bound, now, context.sales)
            .await?;
        let mut notices = sales::notices::for_turn(&config, &known, bound);
        notices.extend(release_note);
        let job = AgentJob {
            engine: self.clone(),
            derived,
            conversation,
            contact_text: inbound.text.clone(),
            notices,
            sales: known,
            history,
            bound,
            media: inbound.media.clone(),
            arrived_at: inbound.arrived_at,
            guard,
            message: Some(message),
            // Set by the race: only a response that races can promise after the fact.
            promised: None,
            // 030: the flows the agent sends, read at the deadline and when the reply is settled.
            flows: FlowSends::default(),
            budget: Some(reservation),
            _in_flight: in_flight,
        };
        match mode {
            Mode::Inline => self.race(job, abort_at).await,
            Mode::Deferred => Ok(self.answer_behind(job, abort_at)),
        }
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

impl Mode {
    /// 037: how the answer leaves when `queued` replies are already waiting for the contact:
    /// behind them, through the outbox.
    fn behind(self, queued: i64) -> Self {
        if queued > 0 { Mode::Deferred } else { self }
    }
}

/// A turn whose conversation is read, that may run now in its contact's order.
struct Ready {
    conversation: Conversation,
    bound: bool,
    /// Its place in the contact's order (none for an unbound turn).
    guard: Option<TurnGuard>,
    /// What the turn read already, with the time it was read for.
    context: Option<(DateTime<Utc>, TurnContext)>,
}

/// A turn that has read what it needs and holds its place (`TurnEngine::proceed` runs the
/// rest).
struct ReadTurn {
    inbound: Inbound,
    config: Arc<TenantConfig>,
    conversation: Conversation,
    bound: bool,
    /// Its place in the conversation's order (none for an unbound turn).
    guard: Option<TurnGuard>,
    mode: Mode,
    context: TurnContext,
    /// The contact's message, recorded with the turn's outcome.
    message: Message,
    /// When the turn's reads were made for.
    now: DateTime<Utc>,
    /// The notice of a hold that ended, for the model.
    release_note: Option<String>,
    in_flight: Option<InFlight>,
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

/// The scripted opening's reply when `inbound` is its trigger (SYSTEM 4): the turn's whole
/// answer, without the model and before any check.
fn scripted_opening<'a>(inbound: &Inbound, config: &'a TenantConfig) -> Option<&'a str> {
    // 020: media (a marker now, a transcript later) never matches the opening trigger.
    if inbound.media.is_some() {
        return None;
    }
    config.rules.opening_reply(&inbound.text)
}
