//! How a turn is written down, and what it owes the contact (every promise the
//! service makes is durable).
//!
//! A turn is recorded in one write once its outcome is known: the contact's message, its count,
//! the reply, the charge, `escalated_at`, and the outbox rows that carry what the contact is
//! still owed (a deferred reply, the handoff). A turn that answers before its reply exists (the
//! acknowledgement of a lost race, a silent response) first writes a **promise**: the message
//! and two `pending` rows holding the fallback (the escalation copy and the handoff), due when
//! the turn's abort window ends. The turn's later write keeps the promise (the reply row gets
//! the real reply, due now; the fallback handoff goes). If the process dies in between, the
//! outbox delivers the fallback when it falls due; a process that owns its database (SQLite)
//! runs such a turn again at start while its abort window lasts (`recover_promises`). On
//! Postgres (replicas) a pending promise may be another replica's live turn: it is run again
//! only once its owner's lease lapsed, by the survivor that claims it (`takeover`), and while
//! its window lasts; otherwise its fallback is delivered. The fallback falls due `PROMISE_MARGIN` after the abort
//! window ends. An answer decided without the model that queues behind a reply (the scripted
//! opening, a pre-model escalation) needs no promise: its one write, reply row included,
//! commits before its silent response leaves.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::agent_job::AgentJob;
use super::message::{Message, Promise};
use super::{Mode, TurnEngine, TurnError, TurnResponse, history_turns};
use crate::actions::{self, StagedAction};
use crate::config::TenantConfig;
use crate::escalation::Escalation;
use crate::ids::SubscriberId;
use crate::outbox::{HandoffPayload, PromiseNote, ReplyPayload};
use crate::store::{
    BudgetCharge, Conversation, During, Exchange, KeepPromise, NewOutboxRow, NewTurn, OutboxKind,
    PromiseRows, StoreError,
};

/// How long after its abort window a promise's fallback falls due: a live turn has settled by
/// then (it is cut off at `MODEL_ABORT_MS` and its write takes milliseconds).
const PROMISE_MARGIN: chrono::Duration = chrono::Duration::seconds(5);

/// How long an inline escalation's handoff row waits for the worker: the request performs it
/// as soon as its response is written; the worker takes it only if that did not happen.
const INLINE_HANDOFF_GRACE: chrono::Duration = chrono::Duration::seconds(10);

/// What [`TurnEngine::hold_for_person`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerHold {
    /// Held now; the tenant's handoff is queued (when it has one and is due).
    Held,
    /// A hold was in force already: nothing changed.
    AlreadyHeld,
    /// The store knows no such contact.
    UnknownContact,
    /// `handoff.holdHours` is 0: the tenant holds nobody.
    HoldOff,
}

/// How many pieces of an interrupted turn's burst a re-run reads beyond its history.
const RECOVERED_PIECES: i64 = 20;

/// A model turn's model, tokens, cost, time and steps (its model calls), and (031) the playbook version its prompt
/// carried, as every model turn records them (an inbound turn adds its contact reads; a nudge
/// turn has none).
pub(crate) fn fill_usage(
    turn: &mut NewTurn,
    model_id: &str,
    thought: &crate::agent::Thought,
    latency: std::time::Duration,
) {
    let usage = thought.usage;
    turn.playbook_version = thought.playbook.clone();
    turn.model = Some(model_id.to_owned());
    turn.input_tokens = usage.input_tokens as i64;
    turn.output_tokens = usage.output_tokens as i64;
    turn.cached_tokens = usage.cached_tokens as i64;
    turn.cache_write_tokens = usage.cache_write_tokens as i64;
    turn.cost_usd = crate::model::pricing::cost_usd(model_id, &usage);
    turn.latency_ms = latency.as_millis() as i64;
    turn.steps = Some(i64::from(thought.steps));
}

/// What a turn's write holds beside its message.
#[derive(Debug, Default)]
pub(super) struct Outcome<'a> {
    pub reply: Option<&'a NewTurn>,
    pub charge: Option<BudgetCharge>,
    pub escalated_at: Option<DateTime<Utc>>,
    /// Deferred: the messages and actions the outbox delivers (into the promise's row when
    /// there is one).
    pub deferred: Option<ReplyPayload>,
    /// When the deferred reply falls due (030: after the flows the turn sent); `None`: now.
    pub due: Option<DateTime<Utc>>,
    /// The handoff's actions (an escalation): written as a `handoff` row.
    pub handoff: Vec<StagedAction>,
    /// The handoff follows an inline response: the request performs it once the response is
    /// written, the worker only after a grace period.
    pub inline: bool,
}

/// How a load-shed message was answered (`TurnEngine::shed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// With the escalation copy: the contact is handed to a person.
    HandedOff,
    /// Silently: the contact is held for a person already.
    Held,
}

/// What the write gave back.
#[derive(Debug, Clone, Copy)]
pub(super) struct Recorded {
    /// The reply's id (the message's when there is no reply).
    pub turn_id: i64,
    pub handoff_row: Option<i64>,
}

impl TurnEngine {
    /// Writes the turn: its message (unless a promise did), the outcome, and what it owes.
    pub(super) async fn record(
        &self,
        conversation: &Conversation,
        message: &Message,
        outcome: Outcome<'_>,
    ) -> Result<Recorded, StoreError> {
        let now = self.inner.clock.now();
        let deferred = outcome
            .deferred
            .map(|mut reply| {
                let channel = self.inner.settings.channel;
                reply.messages = crate::channel::deferred_messages(channel, reply.messages);
                serde_json::to_value(reply)
            })
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("outbox payload: {e}")))?;
        let mut rows = Vec::new();
        let mut keep = None;
        // 030: a reply held for its turn's flows falls due when they have played; a handoff
        // queued with it waits behind it (a contact's rows never overtake).
        let due = outcome.due.unwrap_or(now);
        match (message.promise, deferred.as_ref()) {
            (Some(promise), payload) => {
                keep = Some(KeepPromise {
                    rows: promise.rows,
                    payload,
                    due,
                    handoff: false,
                    // Nothing deferred: the answer leaves in the response, nothing is owed.
                    answered: payload.is_none(),
                });
            }
            (None, Some(payload)) => rows.push(outbox_row(
                conversation,
                OutboxKind::Reply,
                payload.clone(),
                due,
                now,
            )),
            (None, None) => {}
        }
        let has_handoff = !outcome.handoff.is_empty();
        if has_handoff {
            let payload = HandoffPayload {
                actions: outcome.handoff,
                turn_id: None,
                fallback: false,
            };
            let due = if outcome.inline {
                now + INLINE_HANDOFF_GRACE
            } else {
                now
            };
            rows.push(outbox_row(
                conversation,
                OutboxKind::Handoff,
                to_value(&payload)?,
                due,
                now,
            ));
        }
        let counted = message.promise.is_some_and(|p| p.counted);
        // 020: what the contact's message itself cost (a transcription) is charged with it.
        let charge = match outcome.charge {
            _ if message.turn.cost_usd <= 0.0 => outcome.charge,
            Some(mut charge) => {
                charge.cost_usd += message.turn.cost_usd;
                Some(charge)
            }
            None => Some(BudgetCharge {
                day: message.turn.created_at.date_naive(),
                tokens: 0,
                cost_usd: message.turn.cost_usd,
            }),
        };
        let ids = self
            .inner
            .store
            .record_exchange(Exchange {
                message: &message.turn,
                recorded: message.promise.map(|p| p.message_id),
                rate: message
                    .rate_window
                    .filter(|_| !counted)
                    .map(|window| (&conversation.subscriber_id, window)),
                reply: outcome.reply,
                charge,
                escalated_at: outcome.escalated_at,
                outbox: &rows,
                keep,
            })
            .await
            .during("recording the contact's turn")?;
        Ok(Recorded {
            turn_id: ids.reply.unwrap_or(ids.message),
            handoff_row: has_handoff.then(|| ids.outbox.last().copied()).flatten(),
        })
    }

    /// A reply the server writes itself, without the model (the scripted opening, the media
    /// fallback): recorded with its message in one write, answered inline, or through the
    /// outbox when the response has gone already.
    pub(super) async fn answer_without_model(
        &self,
        conversation: &Conversation,
        message: &Message,
        text: &str,
        outcome: &'static str,
        mode: Mode,
    ) -> Result<TurnResponse, StoreError> {
        let reply = NewTurn::agent(
            conversation.id,
            text,
            outcome,
            message.turn.bound,
            self.inner.clock.now(),
        );
        let deferred = (mode == Mode::Deferred).then(|| ReplyPayload::of(vec![text.to_owned()]));
        self.record_server_reply(conversation, message, &reply, outcome, deferred)
            .await?;
        Ok(match mode {
            Mode::Inline => TurnResponse {
                messages: vec![text.to_owned()],
                after: None,
                token: None,
            },
            Mode::Deferred => TurnResponse::silent(),
        })
    }

    /// Records `message` with `reply`, a turn the server wrote without the model, in one write
    /// (with `deferred`, the payload the outbox delivers), then counts and logs its `outcome`.
    pub(super) async fn record_server_reply(
        &self,
        conversation: &Conversation,
        message: &Message,
        reply: &NewTurn,
        outcome: &'static str,
        deferred: Option<ReplyPayload>,
    ) -> Result<(), StoreError> {
        self.record(
            conversation,
            message,
            Outcome {
                reply: Some(reply),
                deferred,
                ..Outcome::default()
            },
        )
        .await?;
        self.inner.metrics.turn(outcome);
        tracing::info!(conversation = %conversation.id, outcome, "turn");
        Ok(())
    }

    /// Records `message` with a promise (see the module doc) before a response that does not
    /// carry the reply. `abort_at` ends the turn's window.
    pub(super) async fn promise(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        message: &Message,
        abort_at: Instant,
    ) -> Result<Promise, StoreError> {
        let now = self.inner.clock.now();
        let left = abort_at.saturating_duration_since(Instant::now());
        let abort_at = now + chrono::Duration::from_std(left).unwrap_or(chrono::Duration::zero());
        let due = abort_at + PROMISE_MARGIN;
        let reply = ReplyPayload {
            messages: vec![crate::handoff::escalation_copy(config, now).to_owned()],
            actions: Vec::new(),
            turn_id: None,
            promise: Some(PromiseNote {
                abort_at,
                bound: message.turn.bound,
            }),
        };
        let handoff = HandoffPayload {
            actions: self.handoff_for(config, conversation, now),
            turn_id: None,
            fallback: true,
        };
        let rows = [
            outbox_row(conversation, OutboxKind::Reply, to_value(&reply)?, due, now),
            outbox_row(
                conversation,
                OutboxKind::Handoff,
                to_value(&handoff)?,
                due,
                now,
            ),
        ];
        let ids = self
            .inner
            .store
            .record_exchange(Exchange {
                rate: message
                    .rate_window
                    .map(|window| (&conversation.subscriber_id, window)),
                outbox: &rows,
                ..Exchange::of(&message.turn)
            })
            .await
            .during("writing the promise of a reply")?;
        let [reply, handoff] = ids.outbox[..] else {
            return Err(StoreError::Corrupt("a promise wrote no rows".to_owned()));
        };
        Ok(Promise {
            message_id: ids.message,
            rows: PromiseRows { reply, handoff },
            counted: message.rate_window.is_some(),
            holding_line_withheld: false,
        })
    }

    /// Writes a promise in a task of its own (a request dropped mid-write cannot leave it half
    /// known) and hands it to whoever settles the turn; waits for the write. The response that
    /// promises a reply leaves only after the promise is on disk.
    pub(super) async fn promise_before_response(
        &self,
        config: &Arc<TenantConfig>,
        conversation: &Conversation,
        message: &Message,
        abort_at: Instant,
        settler: oneshot::Sender<Option<Promise>>,
        holding_line_withheld: bool,
    ) -> Result<(), TurnError> {
        let engine = self.clone();
        let (config, conversation, message) =
            (config.clone(), conversation.clone(), message.clone());
        let write = self.inner.tasks.spawn(async move {
            let written = engine
                .promise(&config, &conversation, &message, abort_at)
                .await;
            let promise = written.as_ref().ok().map(|promise| Promise {
                holding_line_withheld,
                ..*promise
            });
            let _ = settler.send(promise);
            written.map(|_| ())
        });
        match write.await {
            Ok(written) => Ok(written?),
            Err(_) => Err(TurnError::Panicked),
        }
    }

    /// The tenant's handoff for an escalation now, unless this contact was handed over within
    /// the idle-reset window already and not handed back since (a contact escalating again and again in a burst
    /// is not tagged again each time; after an idle gap a new escalation hands it over anew).
    pub(super) fn handoff_for(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        now: DateTime<Utc>,
    ) -> Vec<StagedAction> {
        let window = chrono::Duration::hours(i64::from(config.rules.idle_reset_hours));
        // A contact handed back to the assistant since (`handoff`) is handed over anew: the
        // person removed the tag, or the hold ended, so the tag and the flow are due again.
        if conversation.escalated_at.is_some_and(|at| {
            now - at < window && !crate::handoff::released_since(conversation, at)
        }) {
            return Vec::new();
        }
        actions::handoff_actions(config.rules.handoff.as_ref())
    }

    /// The owner hands `subscriber` to a person from the console: the hold a turn's
    /// escalation makes, without a turn. `escalated_at` is set now (the hold, `crate::handoff`)
    /// and the tenant's handoff (the tag, the flow: [`Self::handoff_for`], so a contact handed
    /// over within the idle-reset window and not released since is not tagged again) is queued
    /// as its own outbox row, performed by the worker as an escalation's is. A hold that ran out
    /// unrecorded is recorded as expired first. `AlreadyHeld` when a hold is in force: nothing
    /// written, nothing sent (a double click holds once). The two writes are not one: if the
    /// second fails the contact is held without its handoff queued, and the error says so.
    pub async fn hold_for_person(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<OwnerHold, StoreError> {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        let now = inner.clock.now();
        let Some(conversation) = inner.store.conversation_by_subscriber(subscriber).await? else {
            return Ok(OwnerHold::UnknownContact);
        };
        let hours = crate::handoff::hold_hours(&config);
        if hours == 0 {
            return Ok(OwnerHold::HoldOff);
        }
        match crate::handoff::hold_at(&conversation, hours, now) {
            crate::handoff::Hold::Held { .. } => return Ok(OwnerHold::AlreadyHeld),
            crate::handoff::Hold::Expired { since, at } => {
                let why = crate::handoff::Release::HoldExpired;
                crate::handoff::release::record(
                    inner.store.as_ref(),
                    &conversation,
                    since,
                    at,
                    why,
                )
                .await?;
            }
            crate::handoff::Hold::Free => {}
        }
        let handoff = self.handoff_for(&config, &conversation, now);
        let row = match handoff.is_empty() {
            true => None,
            false => {
                let payload = HandoffPayload {
                    actions: handoff,
                    turn_id: None,
                    fallback: false,
                };
                let payload = to_value(&payload)?;
                Some(outbox_row(
                    &conversation,
                    OutboxKind::Handoff,
                    payload,
                    now,
                    now,
                ))
            }
        };
        // One write: the hold and its handoff, or nothing when another owner held first.
        let held = inner
            .store
            .hold_with_handoff(
                conversation.id,
                conversation.escalated_at,
                now,
                row.as_ref(),
            )
            .await
            .during("holding a contact for a person")?;
        if !held {
            return Ok(OwnerHold::AlreadyHeld);
        }
        tracing::info!(conversation = %conversation.id, "contact held for a person from the console");
        Ok(OwnerHold::Held)
    }

    /// Counts and logs an escalation (one line per escalated turn).
    pub(super) fn escalated(
        &self,
        conversation: &Conversation,
        outcome: &'static str,
        reason: Escalation,
    ) {
        self.inner.metrics.turn(outcome);
        self.inner.metrics.escalation(reason.as_str());
        tracing::info!(
            conversation = %conversation.id,
            outcome,
            reason = reason.as_str(),
            "turn escalated"
        );
    }

    /// A load-shed message (3.3 beyond): recorded with the escalation copy and handed to a
    /// person (the handoff row is performed by the worker), so the contact is not forgotten.
    /// Reads and writes nothing else: the service is overloaded. A contact held for a person
    /// (`crate::handoff`) is not handed over again: its message is recorded as held and the
    /// answer is silent ([`Shed::Held`]).
    pub async fn shed(&self, subscriber: &SubscriberId, text: &str, channel: Option<&str>) -> Shed {
        match self.record_shed(subscriber, text, channel).await {
            Ok(shed) => shed,
            Err(error) => {
                crate::store_failure!(
                    self.inner.store,
                    error,
                    "load-shed message could not be recorded"
                );
                self.hand_off_without_store(subscriber).await;
                Shed::HandedOff
            }
        }
    }

    async fn record_shed(
        &self,
        subscriber: &SubscriberId,
        text: &str,
        channel: Option<&str>,
    ) -> Result<Shed, StoreError> {
        let inner = &self.inner;
        let config = inner.config.snapshot();
        let now = inner.clock.now();
        let conversation = inner
            .store
            .conversation_for(subscriber, channel.unwrap_or("whatsapp"), now)
            .await
            .during("reading a load-shed contact's conversation")?;
        // Unbound: it neither enters history nor counts for the cap (it was never answered).
        let mut message = Message::new(NewTurn::user(conversation.id, text, false, now));
        if self.shed_held(&config, &conversation, &mut message).await? {
            return Ok(Shed::Held);
        }
        let mut reply = NewTurn::agent(
            conversation.id,
            crate::handoff::escalation_copy(&config, now),
            "escalated_precheck",
            false,
            now,
        );
        reply.escalation_reason = Some(Escalation::LoadShed.as_str().to_owned());
        let handoff = self.handoff_for(&config, &conversation, now);
        reply.actions = (!handoff.is_empty()).then(|| actions::record(&handoff));
        self.record(
            &conversation,
            &message,
            Outcome {
                reply: Some(&reply),
                escalated_at: Some(now),
                handoff,
                inline: true,
                ..Outcome::default()
            },
        )
        .await?;
        self.escalated(&conversation, "escalated_precheck", Escalation::LoadShed);
        Ok(Shed::HandedOff)
    }

    /// At start, on a store one process owns (SQLite): every promise a stopped process left
    /// whose abort window still lasts is run again, its reply going through the outbox.
    /// Promises past their window are left to the outbox, which delivers their fallback when it
    /// falls due. Returns how many turns were started again.
    pub async fn recover_promises(&self) -> Result<usize, StoreError> {
        let inner = &self.inner;
        if !inner.store.single_process() {
            // Several replicas may share the database: a pending promise may be a live
            // turn's. Its fallback is delivered when it falls due.
            return Ok(0);
        }
        let now = inner.clock.now();
        let replies = inner.store.pending_outbox(OutboxKind::Reply).await?;
        let handoffs = inner.store.pending_outbox(OutboxKind::Handoff).await?;
        let mut started = 0;
        for row in replies {
            let Ok(payload) = serde_json::from_value::<ReplyPayload>(row.payload.clone()) else {
                continue;
            };
            let (Some(note), Some(message_id)) = (payload.promise, payload.turn_id) else {
                continue;
            };
            if note.abort_at <= now {
                continue;
            }
            let Some(handoff) = handoffs.iter().find(|h| {
                h.conversation_id == row.conversation_id
                    && serde_json::from_value::<HandoffPayload>(h.payload.clone())
                        .is_ok_and(|p| p.fallback && p.turn_id == Some(message_id))
            }) else {
                continue;
            };
            let promise = Promise {
                message_id,
                rows: PromiseRows {
                    reply: row.id,
                    handoff: handoff.id,
                },
                counted: true,
                holding_line_withheld: false,
            };
            let left = (note.abort_at - now).to_std().unwrap_or_default();
            let engine = self.clone();
            inner.tasks.spawn(async move {
                if let Err(error) = engine
                    .run_again(
                        row.conversation_id,
                        promise,
                        note.bound,
                        Instant::now() + left,
                    )
                    .await
                {
                    tracing::error!(error = %error, "an interrupted turn could not run again");
                }
            });
            started += 1;
        }
        if started > 0 {
            tracing::warn!(
                turns = started,
                "running turns a stopped process left unanswered"
            );
        }
        Ok(started)
    }

    /// Runs an interrupted turn again from its recorded message; its reply keeps the promise.
    pub(super) async fn run_again(
        &self,
        conversation_id: crate::ids::ConversationId,
        promise: Promise,
        bound: bool,
        abort_at: Instant,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let store = &inner.store;
        let (Some(conversation), Some(message)) = (
            store.conversation(conversation_id).await?,
            store.turn(promise.message_id).await?,
        ) else {
            return Ok(());
        };
        let guard = if bound {
            Some(
                inner
                    .order
                    .acquire(&conversation.subscriber_id, conversation.id)
                    .await?,
            )
        } else {
            None
        };
        let config = inner.config.snapshot();
        // The pieces that joined the message's burst (`burst`) are read with it, in order.
        let mut pieces = Vec::new();
        let history = if bound {
            let since =
                message.created_at - chrono::Duration::days(i64::from(config.rules.history_days));
            let mut turns = store
                .history(
                    conversation.id,
                    since,
                    super::HISTORY_TURNS + 1 + RECOVERED_PIECES,
                )
                .await?;
            pieces = turns
                .iter()
                .filter(|t| {
                    t.id > promise.message_id
                        && t.role == crate::store::Role::User
                        && t.outcome.as_deref() == Some(crate::burst::JOINED)
                })
                .map(|t| t.text.clone())
                .collect();
            turns.retain(|t| t.id < promise.message_id);
            let skip = turns.len().saturating_sub(super::HISTORY_TURNS as usize);
            turns.drain(..skip);
            turns
        } else {
            Vec::new()
        };
        let contact_text = crate::burst::merged_text(&message.text, &pieces);
        let mut turn = NewTurn::user(conversation.id, &message.text, bound, message.created_at);
        turn.escalation_reason = None;
        // The re-run decides its sales moves against the records as they are now.
        let request = crate::sales::known::Request {
            offering: None,
            bound,
            now: message.created_at,
        };
        let known =
            crate::sales::known::read(store.as_ref(), &config, &conversation, None, request)
                .await?;
        let job = AgentJob {
            engine: self.clone(),
            derived: self.derived(&config),
            contact_text,
            notices: crate::sales::notices::for_turn(&config, &known, bound),
            sales: known,
            history: history_turns(history),
            bound,
            arrived_at: Instant::now(),
            guard,
            conversation,
            message: Some(Message {
                turn,
                rate_window: None,
                promise: Some(promise),
            }),
            // The media's URL was never stored: a recovered turn answers from its marker.
            media: None,
            flows: crate::tools::FlowSends::default(),
            promised: None,
            budget: None,
            _in_flight: None,
        };
        let (answer, unanswered) = tokio::sync::oneshot::channel();
        // Nobody waits for the answer: the job takes the deferred path.
        drop(unanswered);
        job.run(answer, abort_at).await;
        Ok(())
    }
}

fn outbox_row(
    conversation: &Conversation,
    kind: OutboxKind,
    payload: serde_json::Value,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
) -> NewOutboxRow {
    NewOutboxRow::of(conversation, kind, payload, now).due_at(due)
}

fn to_value(payload: &impl serde::Serialize) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(payload).map_err(|e| StoreError::Corrupt(format!("outbox payload: {e}")))
}
