//! Retention: what the service keeps about a contact fades with time.
//!
//! After `RETENTION_DAYS` (default 90; `off` keeps everything) a turn loses its text, the
//! contact's message or the reply, and keeps the rest of its row: role, outcome, model, bound,
//! actions record, reads, tokens, cost, latency and times, what the measures are computed from.
//! Settled outbox rows (delivered or dead-lettered) older than the period are deleted: their
//! payload holds the reply's text, and the turn keeps the record of the reply. A learning
//! proposal citing a turn older than the period is deleted: the analyst wrote it from that text.
//!
//! The same passes delete the semantic search's vectors (`KNOWLEDGE_EMBEDDINGS`) no loaded
//! config has used for [`UNUSED_EMBEDDINGS_DAYS`] (`prune_embeddings`), whatever
//! `RETENTION_DAYS` says: they hold catalog text, never a contact's, and would otherwise pile up
//! with every edited offering.
//!
//! `serve` and `worker` run a pass shortly after start and then every hour
//! (`run_periodically`); `manychat-agent retention run` runs one now (`run_once`, the text
//! alone). A pass works in batches of [`BATCH`] rows, so it never holds the database for long:
//! on SQLite each batch is one job on the database thread, between the turns' jobs.
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

/// A vector no replica's loaded config has used for this many days is deleted. A config
/// snapshot marks the vectors it reads or saves used when it loads, and again daily while it
/// stays loaded, so the config in force keeps its vectors however long a replica runs; a
/// replica still running an older config keeps its vectors in memory, and a config brought
/// back later is embedded again.
pub const UNUSED_EMBEDDINGS_DAYS: u32 = 30;

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

/// Every model's vectors unused for [`UNUSED_EMBEDDINGS_DAYS`] at `now`, deleted; how many.
pub async fn prune_embeddings(store: &dyn Store, now: DateTime<Utc>) -> Result<u64> {
    store
        .prune_embeddings(cutoff(now, UNUSED_EMBEDDINGS_DAYS))
        .await
}

/// A pass [`FIRST_PASS_AFTER`] start, then every [`EVERY`], until `shutdown`: the text past
/// `days` (`None`, retention `off`: none), then the unused vectors. A failed pass is logged
/// and tried again at the next.
pub async fn run_periodically(
    store: Arc<dyn Store>,
    clock: Clock,
    days: Option<u32>,
    shutdown: CancellationToken,
) {
    if days.is_none() {
        tracing::info!("retention is off (RETENTION_DAYS=off): message text is kept");
    }
    let mut next = tokio::time::Instant::now() + FIRST_PASS_AFTER;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        if let Some(days) = days {
            clear_text(&store, days, clock.now()).await;
        }
        delete_unused_embeddings(&store, clock.now()).await;
        next = tokio::time::Instant::now() + EVERY;
    }
}

/// One pass over the text (`run_once`), logged.
async fn clear_text(store: &Arc<dyn Store>, days: u32, now: DateTime<Utc>) {
    match run_once(store.as_ref(), days, now).await {
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
}

/// One pass over the vectors (`prune_embeddings`), logged with the count alone.
async fn delete_unused_embeddings(store: &Arc<dyn Store>, now: DateTime<Utc>) {
    match prune_embeddings(store.as_ref(), now).await {
        Ok(0) => {}
        Ok(vectors) => tracing::info!(
            vectors,
            "knowledge embeddings: vectors no loaded config used for 30 days deleted"
        ),
        Err(error) => {
            crate::store_failure!(
                store,
                error.during("deleting unused knowledge embeddings"),
                "knowledge embeddings: the unused vectors could not be deleted; tried again in an hour"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;
    use crate::ids::SubscriberId;
    use crate::store::NewTurn;
    use crate::store::sqlite::SqliteStore;

    const DAY: Duration = Duration::from_secs(86_400);
    const MODEL: &str = "openai:invented-embedding-model";

    async fn memory_store() -> Arc<dyn Store> {
        Arc::new(
            SqliteStore::connect("sqlite::memory:")
                .await
                .expect("a store"),
        )
    }

    async fn texts(store: &dyn Store, id: crate::ids::ConversationId) -> Vec<String> {
        let turns = store.turns(id).await.expect("turns");
        turns.into_iter().map(|t| t.text).collect()
    }

    /// The hashes among `hashes` that still have a vector of [`MODEL`], in order.
    async fn vectors(store: &dyn Store, hashes: &[String]) -> Vec<String> {
        let stored = store.embeddings(MODEL, hashes).await.expect("embeddings");
        hashes
            .iter()
            .filter(|h| stored.iter().any(|(s, _)| s == *h))
            .cloned()
            .collect()
    }

    /// Reads until `done` holds (for at most about 5 s of real time): a read queued together
    /// with the pass's write may be answered before that write commits, the next one after it.
    /// The wait between reads is real time, not the paused clock's, because the store's thread
    /// commits in real time (a paused sleep passes at once, however busy the machine is).
    async fn eventually<T, F, R>(read: R, done: impl Fn(&T) -> bool) -> T
    where
        R: Fn() -> F,
        F: Future<Output = T>,
    {
        for _ in 0..500 {
            let now = read().await;
            if done(&now) {
                return now;
            }
            tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(10)))
                .await
                .expect("a real-time pause");
        }
        read().await
    }

    #[tokio::test(start_paused = true)]
    async fn serve_and_worker_clear_old_text_soon_after_start_then_hourly() {
        let store = memory_store().await;
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

        let turns = || texts(store.as_ref(), conversation.id);
        assert_eq!(
            turns().await,
            ["Invented old question", "Invented new question"],
            "nothing is cleared at start"
        );
        tokio::time::sleep(FIRST_PASS_AFTER + Duration::from_secs(1)).await;
        assert_eq!(
            eventually(turns, |t| t[0].is_empty()).await,
            ["", "Invented new question"],
            "the first pass, a minute after start"
        );

        // A day later the second turn is past the period too: cleared by an hourly pass.
        tokio::time::sleep(DAY).await;
        assert_eq!(eventually(turns, |t| t[1].is_empty()).await, ["", ""]);

        shutdown.cancel();
        task.await.expect("the task ends on shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn serve_and_worker_delete_vectors_no_loaded_config_used_for_30_days() {
        let store = memory_store().await;
        let clock = Clock::system();
        let ago = |days: i64| clock.now() - chrono::Duration::days(days);
        let hashes: Vec<String> = ["a", "b", "c"].iter().map(|c| c.repeat(64)).collect();
        // Saved 31 and 29 days ago; the third saved long ago and read by a load just now.
        for (hash, at) in hashes.iter().zip([ago(31), ago(29), ago(400)]) {
            store
                .save_embeddings(MODEL, &[(hash.clone(), vec![0.5, 0.25])], at)
                .await
                .expect("save_embeddings");
        }
        store
            .touch_embeddings(MODEL, &hashes[2..], clock.now())
            .await
            .expect("touch_embeddings");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_periodically(
            store.clone(),
            clock,
            Some(90),
            shutdown.clone(),
        ));

        let stored = || vectors(store.as_ref(), &hashes);
        assert_eq!(stored().await, hashes, "nothing is deleted at start");
        tokio::time::sleep(FIRST_PASS_AFTER + Duration::from_secs(1)).await;
        assert_eq!(
            eventually(stored, |v| v.len() == 2).await,
            hashes[1..],
            "the first pass deletes the vector unused for 31 days"
        );

        // Two days later the second is past the 30 days too; the one a load used stays.
        tokio::time::sleep(2 * DAY).await;
        assert_eq!(eventually(stored, |v| v.len() == 1).await, hashes[2..]);

        shutdown.cancel();
        task.await.expect("the task ends on shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn retention_off_keeps_the_text_and_still_deletes_unused_vectors() {
        let store = memory_store().await;
        let clock = Clock::system();
        let ago = |days: i64| clock.now() - chrono::Duration::days(days);
        let subscriber = SubscriberId::parse("5550021").expect("digits");
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", ago(400))
            .await
            .expect("conversation_for");
        store
            .record_turn(&NewTurn::user(
                conversation.id,
                "Invented ancient question",
                true,
                ago(400),
            ))
            .await
            .expect("record_turn");
        let hash = vec!["d".repeat(64)];
        store
            .save_embeddings(MODEL, &[(hash[0].clone(), vec![1.0])], ago(31))
            .await
            .expect("save_embeddings");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_periodically(
            store.clone(),
            clock,
            None,
            shutdown.clone(),
        ));

        tokio::time::sleep(FIRST_PASS_AFTER + Duration::from_secs(1)).await;
        let stored = || vectors(store.as_ref(), &hash);
        assert!(eventually(stored, Vec::is_empty).await.is_empty());
        // The pass that deleted the vector ran, and left the text.
        assert_eq!(
            texts(store.as_ref(), conversation.id).await,
            ["Invented ancient question"]
        );

        shutdown.cancel();
        task.await.expect("the task ends on shutdown");
    }
}
