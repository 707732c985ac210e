//! Retention: what the service keeps about a contact fades with time.
//!
//! After `RETENTION_DAYS` (default 90; `off` keeps everything) a turn loses its text, the
//! contact's message or the reply, and keeps the rest of its row: role, outcome, model, bound,
//! actions record, reads, tokens, cost, latency and times, what the measures are computed from.
//! Settled outbox rows (delivered or dead-lettered) older than the period are deleted: their
//! payload holds the reply's text, and the turn keeps the record of the reply. A learning
//! proposal citing a turn older than the period is deleted: the analyst wrote it from that text.
//!
//! `serve` and `worker` run a pass shortly after start and then every hour
//! (`run_periodically`); `manychat-agent retention run` runs one now (`run_once`). A pass works
//! in batches of [`BATCH`] rows, so it never holds the database for long: on SQLite each batch
//! is one job on the database thread, between the turns' jobs.
//!
//! Erasure of one contact on request is `Store::forget_contact` (`manychat-agent forget`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::store::{Result, Store};

/// Rows changed per store call.
pub const BATCH: i64 = 500;
/// The first pass after start: soon, but not in the way of the start itself.
pub const FIRST_PASS_AFTER: Duration = Duration::from_secs(60);
/// Between passes.
pub const EVERY: Duration = Duration::from_secs(3600);

/// What one pass changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cleared {
    /// Turns whose text was emptied.
    pub turns: u64,
    /// Settled outbox rows deleted.
    pub outbox_rows: u64,
    /// Learning proposals deleted: they cite a turn whose text went.
    pub proposals: u64,
}

/// The instant before which turns lose their text, `days` days before `now`.
pub fn cutoff(now: DateTime<Utc>, days: u32) -> DateTime<Utc> {
    now - chrono::Duration::days(i64::from(days))
}

/// One pass: every turn and settled outbox row older than `days` days at `now`.
pub async fn run_once(store: &dyn Store, days: u32, now: DateTime<Utc>) -> Result<Cleared> {
    let before = cutoff(now, days);
    let mut cleared = Cleared::default();
    loop {
        let batch = store.clear_turn_text_before(before, BATCH).await?;
        cleared.turns += batch;
        if batch < BATCH as u64 {
            break;
        }
    }
    loop {
        let batch = store.delete_settled_outbox_before(before, BATCH).await?;
        cleared.outbox_rows += batch;
        if batch < BATCH as u64 {
            break;
        }
    }
    loop {
        let batch = store
            .delete_proposals_citing_turns_before(before, BATCH)
            .await?;
        cleared.proposals += batch;
        if batch < BATCH as u64 {
            break;
        }
    }
    Ok(cleared)
}

/// A pass [`FIRST_PASS_AFTER`] start, then every [`EVERY`], until `shutdown`. `None` (retention
/// `off`) returns at once. A failed pass is logged and tried again at the next.
pub async fn run_periodically(
    store: Arc<dyn Store>,
    clock: Clock,
    days: Option<u32>,
    shutdown: CancellationToken,
) {
    let Some(days) = days else {
        tracing::info!("retention is off (RETENTION_DAYS=off): message text is kept");
        return;
    };
    let mut next = tokio::time::Instant::now() + FIRST_PASS_AFTER;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        match run_once(store.as_ref(), days, clock.now()).await {
            Ok(cleared) if cleared == Cleared::default() => {}
            Ok(cleared) => tracing::info!(
                turns = cleared.turns,
                outbox_rows = cleared.outbox_rows,
                proposals = cleared.proposals,
                retention_days = days,
                "retention: text older than the period cleared"
            ),
            Err(error) => {
                crate::store_failure!(
                    store,
                    error.during("clearing text past the retention period"),
                    "retention pass failed; tried again in an hour"
                )
            }
        }
        next = tokio::time::Instant::now() + EVERY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SubscriberId;
    use crate::store::NewTurn;
    use crate::store::sqlite::SqliteStore;

    const DAY: Duration = Duration::from_secs(86_400);

    async fn texts(store: &dyn Store, id: crate::ids::ConversationId) -> Vec<String> {
        let turns = store.turns(id).await.expect("turns");
        turns.into_iter().map(|t| t.text).collect()
    }

    /// Reads until `done` holds (for at most about 5 s of real time): a read queued together
    /// with the pass's write may be answered before that write commits, the next one after it.
    /// The wait between reads is real time, not the paused clock's, because the store's thread
    /// commits in real time (a paused sleep passes at once, however busy the machine is).
    async fn eventually(
        store: &dyn Store,
        id: crate::ids::ConversationId,
        done: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        for _ in 0..500 {
            let now = texts(store, id).await;
            if done(&now) {
                return now;
            }
            tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(10)))
                .await
                .expect("a real-time pause");
        }
        texts(store, id).await
    }

    #[tokio::test(start_paused = true)]
    async fn serve_and_worker_clear_old_text_soon_after_start_then_hourly() {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::connect("sqlite::memory:")
                .await
                .expect("a store"),
        );
        let clock = Clock::system();
        let subscriber = SubscriberId::parse("5550020").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", clock.now())
            .await
            .expect("conversation_for");
        let ago = |days: i64| clock.now() - chrono::Duration::days(days);
        for (text, days) in [("Invented old question", 31), ("Invented new question", 29)] {
            store
                .record_turn(&NewTurn::user(conversation.id, text, true, ago(days)))
                .await
                .expect("record_turn");
        }
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_periodically(
            store.clone(),
            clock,
            Some(30),
            shutdown.clone(),
        ));

        assert_eq!(
            texts(store.as_ref(), conversation.id).await,
            ["Invented old question", "Invented new question"],
            "nothing is cleared at start"
        );
        tokio::time::sleep(FIRST_PASS_AFTER + Duration::from_secs(1)).await;
        assert_eq!(
            eventually(store.as_ref(), conversation.id, |t| t[0].is_empty()).await,
            ["", "Invented new question"],
            "the first pass, a minute after start"
        );

        // A day later the second turn is past the period too: cleared by an hourly pass.
        tokio::time::sleep(DAY).await;
        assert_eq!(
            eventually(store.as_ref(), conversation.id, |t| t[1].is_empty()).await,
            ["", ""]
        );

        shutdown.cancel();
        task.await.expect("the task ends on shutdown");
    }

    #[tokio::test]
    async fn retention_off_clears_nothing() {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::connect("sqlite::memory:")
                .await
                .expect("a store"),
        );
        // Returns at once, without waiting for a shutdown that never comes.
        run_periodically(store, Clock::system(), None, CancellationToken::new()).await;
    }
}
