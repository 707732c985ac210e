//! A replica's death costs its contacts nothing (PostgreSQL, several `serve` replicas).
//!
//! Every `serve` process renews a lease on its own row in the store about every second
//! (`OrderStore::beat`), and each outbox row names the process that wrote it. A promise (the
//! reply owed after an acknowledgement, still holding the escalation copy) whose writer's lease
//! lapsed was left by a replica that died while its turn ran. A survivor claims it
//! (`OutboxStore::claim_promise`: the owner becomes the survivor under the row's lock, so two
//! survivors never both take it) and runs the turn again from its recorded message, under what
//! is left of its `MODEL_ABORT_MS` window, as one SQLite process runs its own at start
//! (`recover_promises`): the real answer keeps the promise, an abort queues the copy and one
//! handoff. A promise past its window is left to the outbox, which delivers its fallback (the
//! copy and the handoff) when it falls due. Only the owner keeps a promise, so a replica taken
//! for dead that comes back finds its promise lapsed: the contact gets one answer.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::TurnEngine;
use super::message::Promise;
use crate::ids::ConversationId;
use crate::outbox::ReplyPayload;
use crate::store::{PromiseRows, StoreError};

/// How often a replica renews its lease and looks for promises whose owner died.
pub const BEAT_EVERY: Duration = Duration::from_secs(1);

/// A promise this process took over: its turn's recorded message, and when its window ends.
struct TakenOver {
    promise: Promise,
    bound: bool,
    abort_at: chrono::DateTime<chrono::Utc>,
}

impl TurnEngine {
    /// On a store several processes share: renews this replica's lease every [`BEAT_EVERY`]
    /// until `stop`, and until `shutdown` takes over the promises of replicas that died. A
    /// process draining its turns keeps its lease, so nobody runs them twice.
    pub async fn take_over_promises(&self, shutdown: CancellationToken, stop: CancellationToken) {
        let store = &self.inner.store;
        if store.single_process() {
            return;
        }
        let mut looks: u64 = 0;
        loop {
            if let Err(error) = store.beat().await {
                tracing::error!(error = %error, "could not renew this replica's lease");
            }
            // A stopped replica's plugin writes under way (`after`), about once a minute.
            if looks.is_multiple_of(60)
                && let Err(error) = self
                    .settle_writes_under_way(Some(super::after::STALE_MARK))
                    .await
            {
                tracing::error!(error = %error, "could not settle a stopped replica's plugin writes");
            }
            looks += 1;
            if !shutdown.is_cancelled()
                && let Err(error) = self.take_over_once().await
            {
                tracing::error!(error = %error, "could not look for a dead replica's turns");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(BEAT_EVERY) => {}
            }
        }
    }

    /// One look: claims every orphaned promise whose abort window still lasts and runs its turn
    /// again, a contact's turns one after the other in their order. Returns how many it took.
    pub async fn take_over_once(&self) -> Result<usize, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let mut taken: BTreeMap<ConversationId, Vec<TakenOver>> = BTreeMap::new();
        let mut count = 0;
        for orphan in inner.store.orphaned_promises().await? {
            let Ok(payload) = serde_json::from_value::<ReplyPayload>(orphan.reply.payload.clone())
            else {
                continue;
            };
            let (Some(note), Some(message_id)) = (payload.promise, payload.turn_id) else {
                continue;
            };
            // Past its window: the outbox delivers the fallback when it falls due.
            if note.abort_at <= now || !inner.store.claim_promise(orphan.reply.id).await? {
                continue;
            }
            count += 1;
            taken
                .entry(orphan.reply.conversation_id)
                .or_default()
                .push(TakenOver {
                    promise: Promise {
                        message_id,
                        rows: PromiseRows {
                            reply: orphan.reply.id,
                            handoff: orphan.handoff,
                        },
                        counted: true,
                        holding_line_withheld: false,
                    },
                    bound: note.bound,
                    abort_at: note.abort_at,
                });
        }
        for (conversation, turns) in taken {
            let engine = self.clone();
            inner.tasks.spawn(async move {
                for turn in turns {
                    let left = (turn.abort_at - engine.inner.clock.now())
                        .to_std()
                        .unwrap_or_default();
                    let run = engine.run_again(
                        conversation,
                        turn.promise,
                        turn.bound,
                        Instant::now() + left,
                    );
                    if let Err(error) = run.await {
                        tracing::error!(%conversation, error = %error, "a dead replica's turn could not run again");
                    }
                }
            });
        }
        if count > 0 {
            tracing::warn!(
                turns = count,
                "running again the turns of a replica that died"
            );
        }
        Ok(count)
    }
}
