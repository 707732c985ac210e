//! A turn that must wait for its contact's earlier turns (037) past its request's deadline:
//! the waiting task either hands the contact's place to the request still waiting, or runs the
//! turn itself with its replies queued (keeping the promise the request made), or gives up
//! after `MODEL_ABORT_MS + RACE_DEADLINE_MS` and hands the contact to a person.

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
                    let promise = (&mut self.promised).await.ok().flatten();
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
                let promise = (&mut self.promised).await.ok().flatten();
                self.expired(promise).await.map(|()| TurnResponse::silent())
            }
        };
        if let Err(error) = result {
            tracing::error!(conversation = %self.conversation.id, error = %error, "turn that waited could not run");
        }
    }

    async fn expired(&self, promise: Option<Promise>) -> Result<(), TurnError> {
        let engine = &self.engine;
        let now = engine.inner.clock.now();
        let mut message = Message::new(self.inbound.turn(self.conversation.id, self.bound, now));
        message.promise = promise;
        engine
            .escalate_without_model(
                &self.config,
                &self.conversation,
                &message,
                "error",
                Escalation::WaitExpired,
                Mode::Deferred,
            )
            .await?;
        Ok(())
    }
}
