//! A turn that must wait for its contact's earlier turns (037). The request waits until its
//! deadline (`run_in_order`) while a task of its own waits for the contact's place: the task
//! either hands the place to the request still waiting, or runs the turn itself with its replies
//! queued (keeping the promise the request wrote before its silent response), or gives up after
//! `MODEL_ABORT_MS + RACE_DEADLINE_MS` and hands the contact to a person.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::record::{Message, Promise};
use super::{InFlight, Inbound, Mode, Start, TurnEngine, TurnError, TurnGuard, TurnResponse};
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
    pub in_flight: Option<InFlight>,
}

impl WaitingTurn {
    /// Waits for the turn's place; hands it to the request if it is still waiting, otherwise
    /// runs the turn itself with its replies queued. Abandons the wait after
    /// `MODEL_ABORT_MS + RACE_DEADLINE_MS`, recording the message and queueing the escalation
    /// copy (C6: nothing is lost, a person takes over).
    pub(super) async fn wait(mut self, start: oneshot::Sender<Result<TurnGuard, StoreError>>) {
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
                    let Some(promise) = self.promised_unless_broken().await else {
                        return;
                    };
                    let start = Start {
                        guard: Some(guard),
                        mode: Mode::Deferred,
                        context: None,
                        promise,
                        in_flight: self.in_flight,
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
                self.expired(promise).await.map(|()| TurnResponse::silent())
            }
        };
        if let Err(error) = result {
            tracing::error!(conversation = %self.conversation.id, error = %error, "turn that waited could not run");
        }
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

    async fn expired(&self, promise: Option<Promise>) -> Result<(), TurnError> {
        let engine = &self.engine;
        let now = engine.inner.clock.now();
        let mut message = Message::new(self.inbound.turn(self.conversation.id, self.bound, now));
        message.promise = promise;
        engine
            .record_escalation(
                &self.config,
                &self.conversation,
                &message,
                "error",
                Escalation::WaitExpired,
                None,
                Mode::Deferred,
            )
            .await?;
        Ok(())
    }
}

impl TurnEngine {
    /// 037: waits for the conversation's earlier turns, in arrival order, then runs the turn.
    /// The wait counts against the deadline; a turn that cannot start in time answers silently
    /// and runs later in the waiting task, replying through the outbox.
    pub(super) async fn run_in_order(
        &self,
        inbound: Inbound,
        config: Arc<TenantConfig>,
        conversation: Conversation,
        bound: bool,
        in_flight: Option<InFlight>,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
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
                // Same hand-over as the race (`race.rs`): after `close` the waiting task keeps the
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
}
