//! A turn that must wait for its contact's earlier turns (037), or for its contact to have room
//! among the turns in flight (`place`). The request waits until its deadline (`run_in_order`)
//! while a task of its own waits for the turn's place and then takes its slot: the task either
//! hands both to the request still waiting, or runs the turn itself with its replies queued
//! (keeping the promise the request wrote before its silent response), or gives up after
//! `MODEL_ABORT_MS + RACE_DEADLINE_MS` and hands the contact to a person. A waiting turn holds
//! no slot; one whose place comes when every slot is taken is load-shed. A contact has at most
//! `place::WAITING_PER_CONTACT` turns waiting; a message beyond them is `contact_busy`.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::message::{Message, Promise};
use super::place::{InFlight, TurnPlace};
use super::{Inbound, Mode, Start, TurnEngine, TurnError, TurnGuard, TurnResponse};
use crate::config::TenantConfig;
use crate::escalation::Escalation;
use crate::store::{Conversation, StoreError};

/// A turn waiting for its conversation's earlier turns (037).
pub(super) struct WaitingTurn {
    pub engine: TurnEngine,
    pub inbound: Inbound,
    pub config: Arc<TenantConfig>,
    pub conversation: Conversation,
    pub bound: bool,
    /// The promise the request wrote when it stopped waiting (`None`: it could not).
    pub promised: oneshot::Receiver<Option<Promise>>,
}

/// What the waiting task hands over once the turn's place has come.
pub(super) enum Started {
    /// Its place in the contact's order (none for an unbound turn) and its slot.
    Run(Option<TurnGuard>, InFlight),
    /// Every slot was taken: the turn is load-shed.
    Shed,
}

impl WaitingTurn {
    /// Waits for the turn's place and slot; hands them to the request if it is still waiting,
    /// otherwise runs the turn itself with its replies queued. Abandons the wait after
    /// `MODEL_ABORT_MS + RACE_DEADLINE_MS`, recording the message and queueing the escalation
    /// copy (C6: nothing is lost, a person takes over). `guard` is the turn's place in its
    /// contact's order when it was taken already (a bound turn waiting only for its contact to
    /// have room); `place` counts among the contact's waiting turns.
    pub(super) async fn wait(
        mut self,
        guard: Option<TurnGuard>,
        place: TurnPlace,
        start: oneshot::Sender<Result<Started, StoreError>>,
    ) {
        let inner = &self.engine.inner;
        let abandon_at =
            self.inbound.arrived_at + inner.settings.model_abort + inner.settings.race_deadline;
        let acquired = tokio::time::timeout_at(abandon_at, self.place_comes(guard, place)).await;
        let result = match acquired {
            Ok(Ok(started)) => match start.send(Ok(started)) {
                Ok(()) => return,
                Err(Ok(Started::Run(guard, in_flight))) => {
                    let Some(promise) = self.promised_unless_broken().await else {
                        return;
                    };
                    let start = Start {
                        guard,
                        mode: Mode::Deferred,
                        context: None,
                        promise,
                        in_flight: Some(in_flight),
                    };
                    self.engine
                        .run(
                            self.inbound,
                            self.config,
                            self.conversation.clone(),
                            self.bound,
                            start,
                        )
                        .await
                }
                Err(Ok(Started::Shed)) => {
                    let Some(promise) = self.promised_unless_broken().await else {
                        return;
                    };
                    self.engine.inner.metrics.load_shed.inc();
                    tracing::warn!(conversation = %self.conversation.id, "load shed: too many turns in flight when its place came");
                    self.escalate(promise, "escalated_precheck", Escalation::LoadShed)
                        .await
                        .map(|()| TurnResponse::silent())
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
                let Some(promise) = self.promised_unless_broken().await else {
                    return;
                };
                self.escalate(promise, "error", Escalation::WaitExpired)
                    .await
                    .map(|()| TurnResponse::silent())
            }
        };
        if let Err(error) = result {
            tracing::error!(conversation = %self.conversation.id, error = %error, "turn that waited could not run");
        }
    }

    /// The turn's place in its contact's order (a bound turn's), then its contact's room and a
    /// slot (`place`).
    async fn place_comes(
        &self,
        guard: Option<TurnGuard>,
        place: TurnPlace,
    ) -> Result<Started, StoreError> {
        let guard = match guard {
            None if self.bound => Some(
                self.engine
                    .inner
                    .order
                    .acquire(&self.conversation.subscriber_id, self.conversation.id)
                    .await?,
            ),
            guard => guard,
        };
        Ok(match place.start().await {
            Some(in_flight) => Started::Run(guard, in_flight),
            None => Started::Shed,
        })
    }

    /// The promise the request wrote before its silent response (`Some(None)`: the request
    /// went without one). `None` when it could not write it: it answered with the escalation
    /// copy and handed the contact over itself, so this turn neither runs nor escalates again.
    async fn promised_unless_broken(&mut self) -> Option<Option<Promise>> {
        match (&mut self.promised).await {
            Ok(Some(promise)) => Some(Some(promise)),
            Ok(None) => {
                tracing::warn!(
                    conversation = %self.conversation.id,
                    "the promise could not be written and the contact got the escalation copy; the waiting turn does not run"
                );
                None
            }
            Err(_) => Some(None),
        }
    }

    /// Records the message with the escalation copy queued (the request answered already).
    async fn escalate(
        &self,
        promise: Option<Promise>,
        outcome: &'static str,
        reason: Escalation,
    ) -> Result<(), TurnError> {
        let engine = &self.engine;
        let now = engine.inner.clock.now();
        let mut message = Message::new(self.inbound.turn(self.conversation.id, self.bound, now));
        message.promise = promise;
        engine
            .record_escalation(
                &self.config,
                &self.conversation,
                &message,
                outcome,
                reason,
                None,
                Mode::Deferred,
            )
            .await?;
        Ok(())
    }
}

impl TurnEngine {
    /// 037: waits for the conversation's earlier turns, in arrival order, and for the contact
    /// to have room among the turns in flight (`place`), then runs the turn. The wait counts
    /// against the deadline; a turn that cannot start in time answers silently and runs later
    /// in the waiting task, replying through the outbox. A contact with its most turns waiting
    /// already gets `contact_busy`.
    pub(super) async fn run_in_order(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        conversation: Conversation,
        bound: bool,
        guard: Option<TurnGuard>,
        mut place: TurnPlace,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        if !place.wait() {
            drop(guard);
            return self.contact_busy(&conversation, &inbound).await;
        }
        let (start_tx, mut start_rx) = oneshot::channel();
        let (promise_tx, promise_rx) = oneshot::channel();
        let waiting = WaitingTurn {
            engine: self.clone(),
            inbound: inbound.clone(),
            config: config.clone(),
            conversation: conversation.clone(),
            bound,
            promised: promise_rx,
        };
        inner.tasks.spawn(waiting.wait(guard, place, start_tx));
        let deadline = inbound.arrived_at + inner.settings.race_deadline;
        let started = match tokio::time::timeout_at(deadline, &mut start_rx).await {
            Ok(Ok(started)) => Some(started),
            Ok(Err(_)) => None,
            Err(_) => {
                // Same hand-over as the race (`race.rs`): after `close` the waiting task keeps the
                // turn and runs it later.
                start_rx.close();
                start_rx.try_recv().ok()
            }
        };
        match started {
            Some(Ok(Started::Run(guard, in_flight))) => {
                drop(promise_tx);
                let start = Start::inline(guard, Some(in_flight));
                self.run(inbound, config, conversation, bound, start).await
            }
            Some(Ok(Started::Shed)) => {
                drop(promise_tx);
                Ok(self.shed_now(&inbound).await)
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
}
