//! The request's side of the race (3.4). The agent runs in the request while it waits, until
//! `RACE_DEADLINE_MS` from the request's arrival, and in a task of its own once the request
//! stops waiting (`detach`). Won: the turn is settled inline (`settle.rs`). Lost: the response
//! promises a reply, the tenant's acknowledgement or silence while a flow the turn sent still
//! plays (030), and the agent settles the turn later through the outbox. A turn with a reply
//! queued ahead of it (037), or whose response has gone, does not race: its agent runs in a task
//! and the response is silent.
//!
//! Invariants: the answer is delivered exactly once (at the deadline the request closes the
//! answer channel before it takes what arrived, so a later send fails and the agent takes the
//! deferred path); a response that promises a reply leaves only after the promise is on disk.

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::agent_job::{AgentJob, Settled};
use super::detach::Detachable;
use super::message::Promise;
use super::{Mode, TurnEngine, TurnError, TurnResponse};

impl TurnEngine {
    /// Runs `job` against the race deadline and answers the response: the reply, or the
    /// promise of one.
    pub(super) async fn race(
        &self,
        mut job: AgentJob,
        abort_at: Instant,
    ) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let config = job.derived.config.clone();
        let conversation = job.conversation.clone();
        // 030: the flows the agent sends, read at the deadline.
        let flows = job.flows.clone();
        let deadline = job.arrived_at + inner.settings.race_deadline;
        // On a lost race the request writes the promise while the agent still runs; the agent
        // takes it from here before it settles.
        let (promise_tx, promise_rx) = oneshot::channel();
        job.promised = Some(promise_rx);
        let lost_race_message = job.message.clone();
        let (answer_tx, mut answer_rx) = oneshot::channel();
        // The agent runs in this request while it waits (3.4), and in a task of its own once
        // the request stops waiting: at the deadline, or if the request is dropped.
        let mut agent = Detachable::new(&inner.tasks, job.run(answer_tx, abort_at));

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
                // A promise written already (a piece of its burst was answered silently) is
                // the one kept; no second one is written.
                let written = match message.promise {
                    Some(promise) => {
                        let _ = promise_tx.send(Some(Promise {
                            holding_line_withheld: silent,
                            ..promise
                        }));
                        Ok(())
                    }
                    None => {
                        self.promise_before_response(
                            &config,
                            &conversation,
                            &message,
                            abort_at,
                            promise_tx,
                            silent,
                        )
                        .await
                    }
                };
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
                    token: None,
                })
            }
        }
    }

    /// A reply is queued ahead (037), or the response has gone: the agent runs in a task of its
    /// own and queues its reply behind, keeping the promise its message carries. The response
    /// is silent.
    pub(super) fn answer_behind(&self, job: AgentJob, abort_at: Instant) -> TurnResponse {
        let inner = &self.inner;
        let conversation = job.conversation.id;
        // Nobody waits for the answer: the job takes the deferred path.
        let (answer_tx, answer_rx) = oneshot::channel();
        drop(answer_rx);
        drop(Detachable::new(&inner.tasks, job.run(answer_tx, abort_at)));
        inner.metrics.race_lost.inc();
        tracing::info!(%conversation, "reply queued ahead; answering later");
        TurnResponse::silent()
    }
}
