//! The turn's two calls into `crate::burst`: a piece joins its contact's open burst
//! (`join_burst`, before it would wait for its place), and the burst's first piece waits for the
//! rest (`gather_burst`, after its reads and before the checks), in work that outlives its
//! request: a first piece whose client went during the window is answered through the outbox.
//!
//! Rules: only a bound text message opens a burst or joins one; a scripted-opening trigger and a
//! message to a contact held for a person never join (their turns answer them as usual). A
//! joined piece is recorded as its own contact message, counted against the hourly window, and
//! answered with a silent response: the first piece's request carries the one reply, or, when
//! that request went during the window, the outbox does. The merged
//! turn counts every piece for the turn cap and the hourly rate, and checks the escalation
//! keywords against every piece. The pieces' contact messages carry the burst's marks
//! (`burst::MERGED` on the first, `burst::JOINED` on the rest) for the report.
//!
//! A silent response is a promise: before the first piece that joins is recorded (and answered
//! silently), the gathering turn's first piece and its promise are on disk ([`FirstPiece`],
//! written once per burst), so a process killed during the window leaves a promise that a
//! restart answers like any acknowledged turn, reading the joined pieces with it
//! (`record::run_again`). A burst no piece joined writes nothing before its turn's one write.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::detach::Detachable;
use super::gates::hour_start;
use super::message::{Message, Promise};
use super::record::Outcome;
use super::{Inbound, Mode, ReadTurn, TurnEngine, TurnError, TurnResponse, scripted_opening};
use crate::burst::{self, OpenBurst};
use crate::config::TenantConfig;
use crate::handoff::{self, Hold};
use crate::store::{Conversation, StoreError};

/// What a burst's first piece leaves for the pieces that join it: enough to write the gathering
/// turn's promise, and the promise once written (the turn keeps it).
pub(super) struct FirstPiece {
    config: Arc<TenantConfig>,
    conversation: Conversation,
    /// The first piece's message, marked `burst::MERGED` (a promise is written only once a
    /// piece joined).
    message: Message,
    abort_at: Instant,
    promise: Arc<tokio::sync::Mutex<Option<Promise>>>,
}

impl TurnEngine {
    /// `Some(response)` when `inbound` joined its contact's open burst: its message is recorded
    /// and its response is silent. `None`: it is a turn of its own.
    pub(super) async fn join_burst(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        inbound: &Inbound,
    ) -> Result<Option<TurnResponse>, TurnError> {
        let inner = &self.inner;
        if !may_join(config, conversation, inbound, inner.clock.now()) {
            return Ok(None);
        }
        let Some(open) = inner.bursts.find(&inbound.subscriber_id) else {
            return Ok(None);
        };
        let first = open.clone();
        let record = |at| async move {
            // The silent response promises the gathering turn's reply: its first piece and its
            // promise are on disk first.
            self.promise_first_piece(first.first()).await?;
            let mut message = Message::new(inbound.turn(conversation.id, true, at));
            message.turn.outcome = Some(burst::JOINED.to_owned());
            // Every piece counts against the hourly window.
            message.rate_window = Some(hour_start(at));
            self.record(conversation, &message, Outcome::default())
                .await
                .map_err(TurnError::from)
        };
        match open.join(&inbound.text, inner.clock.now(), record).await {
            None => Ok(None),
            Some(recorded) => {
                recorded?;
                inner.metrics.burst_piece_merged();
                tracing::info!(conversation = %conversation.id, "piece joined its burst");
                Ok(Some(TurnResponse::silent()))
            }
        }
    }

    /// Runs the rest of the turn ([`TurnEngine::proceed`]), after the contact's burst when it
    /// opens one: `windowMs` set, its place held, a text message, time left before
    /// [`burst::latest_start`]. The window is waited in work that outlives the request
    /// (`detach`): when the first piece's client goes during the window (the joined pieces were
    /// answered silently, counting on its response), the merged turn still runs, the deferred
    /// way, and its reply reaches the contact through the outbox.
    pub(super) async fn gather_burst(&self, turn: ReadTurn) -> Result<TurnResponse, TurnError> {
        let inner = &self.inner;
        let window = std::time::Duration::from_millis(u64::from(turn.config.rules.burst.window_ms));
        let latest = burst::latest_start(turn.inbound.arrived_at, inner.settings.race_deadline);
        if window.is_zero()
            || turn.guard.is_none()
            || turn.inbound.media.is_some()
            || latest <= tokio::time::Instant::now()
        {
            return self.proceed(turn).await;
        }
        // A turn that waited for its place promised its reply already: the pieces keep that.
        let promised = Arc::new(tokio::sync::Mutex::new(turn.message.promise));
        let mut merged = turn.message.clone();
        merged.turn.outcome = Some(burst::MERGED.to_owned());
        let first = FirstPiece {
            config: turn.config.clone(),
            conversation: turn.conversation.clone(),
            message: merged,
            abort_at: turn.inbound.arrived_at + inner.settings.model_abort,
            promise: promised.clone(),
        };
        let open: OpenBurst<FirstPiece> = inner.bursts.open(
            &turn.inbound.subscriber_id,
            turn.message.turn.created_at,
            first,
        );
        let (gathered_tx, gathered_rx) = oneshot::channel();
        let engine = self.clone();
        let work = async move {
            let mut turn = turn;
            let pieces = open.collect(window, latest).await;
            // A promise being written for a piece that joined is waited for: the turn keeps it.
            turn.message.promise = *promised.lock().await;
            engine.fold_pieces(&mut turn, pieces);
            let Err(mut turn) = gathered_tx.send(turn) else {
                return;
            };
            // The request went during the window: nobody carries the reply back.
            turn.mode = Mode::Deferred;
            let conversation = turn.conversation.id;
            let subscriber = turn.inbound.subscriber_id.clone();
            tracing::info!(%conversation, "the first piece's request went during its burst; answering through the outbox");
            if let Err(error) = engine.proceed(turn).await {
                match &error {
                    TurnError::Store(error) => crate::store_failure!(
                        engine.inner.store,
                        error,
                        %conversation,
                        "burst turn failed after its request went; handing the contact over"
                    ),
                    other => {
                        tracing::error!(%conversation, error = %other, "burst turn failed after its request went; handing the contact over")
                    }
                }
                engine.hand_off_without_store(&subscriber).await;
            }
        };
        // Polled by the request while it waits; in a task of its own once the request is gone.
        let mut work = Detachable::new(&inner.tasks, work);
        let gathered = work.wait(gathered_rx).await;
        drop(work);
        match gathered {
            Ok(turn) => self.proceed(turn).await,
            // The work panicked (a bug): the contact gets the escalation copy.
            Err(_) => Err(TurnError::Panicked),
        }
    }

    /// Writes the gathering turn's promise (its first piece and the fallback rows) unless a
    /// piece that joined before wrote it. The write runs in a task of its own, holding the
    /// burst's promise slot, so a joining request dropped mid-write cannot leave it half known:
    /// the gathering turn waits for the slot before it goes on.
    async fn promise_first_piece(&self, first: &FirstPiece) -> Result<Promise, TurnError> {
        let mut slot = first.promise.clone().lock_owned().await;
        if let Some(promise) = *slot {
            return Ok(promise);
        }
        let engine = self.clone();
        let (config, conversation, message) = (
            first.config.clone(),
            first.conversation.clone(),
            first.message.clone(),
        );
        let abort_at = first.abort_at;
        let write = self.inner.tasks.spawn(async move {
            let promise = engine
                .promise(&config, &conversation, &message, abort_at)
                .await?;
            *slot = Some(promise);
            Ok::<_, StoreError>(promise)
        });
        match write.await {
            Ok(written) => Ok(written?),
            Err(_) => Err(TurnError::Panicked),
        }
    }

    /// Folds the pieces that joined into the turn: `inbound.text` becomes the merged message,
    /// and the context counts the pieces for the turn cap and the hourly rate.
    fn fold_pieces(&self, turn: &mut ReadTurn, pieces: Vec<String>) {
        if pieces.is_empty() {
            return;
        }
        turn.inbound.text = burst::merged_text(&turn.inbound.text, &pieces);
        turn.message.turn.outcome = Some(burst::MERGED.to_owned());
        let now = self.inner.clock.now();
        let context = &mut turn.context;
        context.rate_count += pieces.len() as i64;
        // Newest first: the pieces are the contact's latest messages.
        let earlier = std::mem::take(&mut context.earlier_user_turns);
        context.earlier_user_turns = std::iter::repeat_n(now, pieces.len())
            .chain(earlier)
            .collect();
        tracing::info!(pieces = pieces.len() + 1, "burst answered as one message");
    }
}

/// Whether a message may join an open burst: a text message that is not the scripted opening's
/// trigger, to a contact not held for a person (the caller checks it is bound).
fn may_join(
    config: &TenantConfig,
    conversation: &Conversation,
    inbound: &Inbound,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    if inbound.media.is_some() || scripted_opening(inbound, config).is_some() {
        return false;
    }
    let hours = handoff::hold_hours(config);
    hours == 0 || matches!(handoff::hold_at(conversation, hours, now), Hold::Free)
}
