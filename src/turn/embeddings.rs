//! Semantic search's moving parts (`KNOWLEDGE_EMBEDDINGS`): the catalog's vectors, filled in
//! the background whenever a config snapshot's knowledge is built (at start and after each
//! applied reload), and a turn's message embedded under a short timeout.
//!
//! - [`Embeddings::fill`]: each indexed offering's and passage's text is keyed by its
//!   `content_hash`; the vectors the database holds for the model are read in one call and
//!   marked used now (`touch_embeddings`, so the hourly prune keeps them), the missing ones are
//!   asked of the provider in batches of [`BATCH_SIZE`], at most [`CONCURRENT_BATCHES`] at a
//!   time, stored (used now too), and set on the snapshot's knowledge as each batch lands. A
//!   failed batch is logged (provider, status, counts: never a text), counted, and ends the
//!   fill: the rest is asked on the next load. A snapshot replaced meanwhile ends it too (its
//!   knowledge is held weakly).
//! - [`Embeddings::keep_in_use`]: while the snapshot stays loaded, its vectors are marked used
//!   again every [`MARK_IN_USE_EVERY`], so the hourly prune (`crate::retention`) never deletes
//!   the vectors of the config in force, however long the replica runs.
//! - [`Embeddings::query`]: the contact's message, under [`QUERY_TIMEOUT`]; on a timeout or an
//!   error the turn retrieves by full text alone and `/metrics` counts it. Nothing is asked
//!   while the snapshot has no vector yet.
//!
//! Invariant: a turn never waits for the catalog's vectors; the message goes to the configured
//! embedding provider and nowhere else (no log line, no error carries it).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::TenantConfig;
use crate::knowledge::{Knowledge, content_hash};
use crate::metrics::Metrics;
use crate::model::ModelError;
use crate::model::embedding::{BATCH_SIZE, Embedder, Purpose};
use crate::store::Store;

/// How long a turn waits for its message's vector before it retrieves by full text alone: a
/// provider answers one short text in 100–300 ms; the turn's whole answer has about 8 s.
pub const QUERY_TIMEOUT: Duration = Duration::from_millis(800);

/// Batches in flight at once while the catalog is embedded: bounded so a large catalog does not
/// crowd the provider's rate limit the turns' own query embeddings share.
pub const CONCURRENT_BATCHES: usize = 2;

/// While a snapshot stays loaded its vectors are marked used again this often: well inside the
/// prune's grace (`crate::retention::UNUSED_EMBEDDINGS_DAYS`, 30 days).
pub const MARK_IN_USE_EVERY: Duration = Duration::from_secs(86_400);

/// How often the marking task looks whether its snapshot is still loaded: a replaced snapshot's
/// task, and the content hashes it holds, are gone within this.
pub const LOADED_CHECK_EVERY: Duration = Duration::from_secs(3_600);

/// A batch's content hashes and what the provider answered for their texts.
type Batch = (Vec<String>, Result<Vec<Vec<f32>>, ModelError>);

/// The embedder, where its vectors are kept, and where its failures are counted.
#[derive(Clone)]
pub struct Embeddings {
    embedder: Arc<dyn Embedder>,
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    clock: Clock,
}

impl Embeddings {
    pub fn new(
        embedder: Arc<dyn Embedder>,
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        clock: Clock,
    ) -> Self {
        Self {
            embedder,
            store,
            metrics,
            clock,
        }
    }

    /// Starts filling `knowledge`'s vectors in the background, then keeping them in use while
    /// it stays loaded, when it retrieves and a runtime runs (a build outside one, a unit
    /// test's, fills nothing).
    pub(crate) fn fill(&self, config: &Arc<TenantConfig>, knowledge: &Arc<Knowledge>) {
        if !knowledge.layout().retrieves() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let this = self.clone();
        let (config, knowledge) = (config.clone(), Arc::downgrade(knowledge));
        runtime.spawn(async move {
            let hashes = this.fill_now(config, knowledge.clone()).await;
            this.keep_in_use(hashes, knowledge).await;
        });
    }

    /// The fill itself (see the module doc); the snapshot's content hashes, each once (none
    /// when it is gone or has no document), for [`Embeddings::keep_in_use`].
    pub(crate) async fn fill_now(
        &self,
        config: Arc<TenantConfig>,
        knowledge: Weak<Knowledge>,
    ) -> Vec<String> {
        let texts = match knowledge.upgrade() {
            Some(k) => k.embedding_texts(&config),
            None => return Vec::new(),
        };
        drop(config);
        if texts.is_empty() {
            return Vec::new();
        }
        // Each distinct text once, with the documents that hold it.
        let mut docs: HashMap<String, Vec<u32>> = HashMap::new();
        let mut unique: Vec<(String, usize)> = Vec::new();
        for (doc, text) in texts.iter().enumerate() {
            let hash = content_hash(text);
            let holders = docs.entry(hash.clone()).or_default();
            if holders.is_empty() {
                unique.push((hash, doc));
            }
            holders.push(doc as u32);
        }
        let model = self.embedder.id().to_owned();
        let hashes: Vec<String> = unique.iter().map(|(h, _)| h.clone()).collect();
        let stored = match self.store.embeddings(&model, &hashes).await {
            Ok(stored) => stored,
            Err(error) => {
                // Without knowing what is stored, nothing is asked: it would be paid twice.
                crate::store_failure!(
                    self.store,
                    error,
                    "knowledge embeddings: the stored vectors could not be read; retried on the next load"
                );
                return hashes;
            }
        };
        let from_store = stored.len();
        if from_store > 0 {
            let read: Vec<String> = stored.iter().map(|(h, _)| h.clone()).collect();
            let touched = self
                .store
                .touch_embeddings(&model, &read, self.clock.now())
                .await;
            if let Err(error) = touched {
                crate::store_failure!(
                    self.store,
                    error,
                    "knowledge embeddings: the vectors read could not be marked used; used all the same"
                );
            }
        }
        let mut missing: HashMap<&str, ()> = hashes.iter().map(|h| (h.as_str(), ())).collect();
        for (hash, vector) in stored {
            missing.remove(hash.as_str());
            if !self.set(&knowledge, &docs, &hash, vector) {
                return hashes;
            }
        }
        let ready = knowledge.upgrade().map_or(0, |k| k.vectors_ready());
        self.metrics.knowledge_embedded(0, ready);
        let missing: Vec<(String, String)> = unique
            .iter()
            .filter(|(h, _)| missing.contains_key(h.as_str()))
            .map(|(h, doc)| (h.clone(), texts[*doc].clone()))
            .collect();
        drop(texts);
        let asked = missing.len();
        let mut batches = missing
            .chunks(BATCH_SIZE)
            .map(<[_]>::to_vec)
            .collect::<Vec<_>>()
            .into_iter();
        let mut running: JoinSet<Batch> = JoinSet::new();
        let mut embedded = 0usize;
        loop {
            while running.len() < CONCURRENT_BATCHES
                && let Some(batch) = batches.next()
            {
                let embedder = self.embedder.clone();
                running.spawn(async move {
                    let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
                    let result = embedder.embed(&texts, Purpose::Document).await;
                    (batch.into_iter().map(|(h, _)| h).collect(), result)
                });
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            let Ok((batch, result)) = joined else {
                continue;
            };
            let vectors = match result {
                Ok(vectors) => vectors,
                Err(error) => {
                    self.metrics.knowledge_embedding_failed("catalog");
                    tracing::warn!(
                        embedder = %model,
                        error = %error,
                        texts = batch.len(),
                        left = asked - embedded,
                        "knowledge embeddings: a batch failed; the rest is asked on the next load"
                    );
                    running.abort_all();
                    return hashes;
                }
            };
            let rows: Vec<(String, Vec<f32>)> = batch.into_iter().zip(vectors).collect();
            if let Err(error) = self
                .store
                .save_embeddings(&model, &rows, self.clock.now())
                .await
            {
                crate::store_failure!(
                    self.store,
                    error,
                    "knowledge embeddings: vectors could not be stored; used in memory"
                );
            }
            embedded += rows.len();
            let count = rows.len();
            for (hash, vector) in rows {
                if !self.set(&knowledge, &docs, &hash, vector) {
                    running.abort_all();
                    return hashes;
                }
            }
            let ready = knowledge.upgrade().map_or(0, |k| k.vectors_ready());
            self.metrics.knowledge_embedded(count, ready);
        }
        let ready = knowledge.upgrade().map_or(0, |k| k.vectors_ready());
        tracing::info!(
            embedder = %model,
            documents = docs.values().map(Vec::len).sum::<usize>(),
            from_store,
            embedded = asked,
            ready,
            "knowledge embeddings ready"
        );
        hashes
    }

    /// Marks `hashes` (a snapshot's, from [`Embeddings::fill_now`]) used every
    /// [`MARK_IN_USE_EVERY`] while `knowledge` stays loaded, looked at every
    /// [`LOADED_CHECK_EVERY`]; ends once it is gone. A marking that fails is logged and tried
    /// again at the next look.
    pub(crate) async fn keep_in_use(&self, hashes: Vec<String>, knowledge: Weak<Knowledge>) {
        if hashes.is_empty() {
            return;
        }
        let model = self.embedder.id();
        let mut marked = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(LOADED_CHECK_EVERY).await;
            if knowledge.strong_count() == 0 {
                return;
            }
            if marked.elapsed() < MARK_IN_USE_EVERY {
                continue;
            }
            let now = self.clock.now();
            match self.store.touch_embeddings(model, &hashes, now).await {
                Ok(()) => marked = tokio::time::Instant::now(),
                Err(error) => crate::store_failure!(
                    self.store,
                    error,
                    "knowledge embeddings: the loaded config's vectors could not be marked used; tried again in an hour"
                ),
            }
        }
    }

    /// Sets `hash`'s vector on every document holding it; `false` when the snapshot is gone.
    fn set(
        &self,
        knowledge: &Weak<Knowledge>,
        docs: &HashMap<String, Vec<u32>>,
        hash: &str,
        vector: Vec<f32>,
    ) -> bool {
        let Some(knowledge) = knowledge.upgrade() else {
            return false;
        };
        for &doc in docs.get(hash).map(Vec::as_slice).unwrap_or_default() {
            knowledge.set_vector(doc, vector.clone());
        }
        true
    }

    /// The contact's message's vector, within [`QUERY_TIMEOUT`]; `None` (full text alone) when
    /// the snapshot has no vector yet, the message is empty, or the provider failed or was slow.
    pub(crate) async fn query(&self, knowledge: &Knowledge, message: &str) -> Option<Vec<f32>> {
        if message.trim().is_empty() || knowledge.vectors_ready() == 0 {
            return None;
        }
        let texts = [message];
        let asked = self.embedder.embed(&texts, Purpose::Query);
        let failure = match tokio::time::timeout(QUERY_TIMEOUT, asked).await {
            Ok(Ok(mut vectors)) if vectors.len() == 1 => return vectors.pop(),
            Ok(Ok(_)) => "the answer held no vector".to_owned(),
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} ms", QUERY_TIMEOUT.as_millis()),
        };
        self.metrics.knowledge_embedding_failed("query");
        tracing::warn!(
            embedder = %self.embedder.id(),
            error = %failure,
            "knowledge embeddings: the message could not be embedded; full-text retrieval alone"
        );
        None
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::knowledge::fixtures::english_tenant;
    use crate::model::embedding::FakeEmbedder;
    use crate::store::sqlite::SqliteStore;

    struct Setup {
        config: Arc<TenantConfig>,
        fake: Arc<FakeEmbedder>,
        metrics: Arc<Metrics>,
        embeddings: Embeddings,
        store: Arc<dyn Store>,
        clock: Clock,
        _dir: tempfile::TempDir,
    }

    /// The English shop of `offerings`, a fake embedder and a real SQLite store.
    async fn setup(offerings: usize) -> Setup {
        let dir = tempfile::tempdir().expect("a folder");
        let url = format!("sqlite://{}/agent.db", dir.path().display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::connect(&url).await.expect("store"));
        let fake = Arc::new(FakeEmbedder::new(vec![], 16));
        let metrics = Arc::new(Metrics::default());
        let clock = Clock::system();
        let embeddings = Embeddings::new(fake.clone(), store.clone(), metrics.clone(), clock);
        Setup {
            config: Arc::new(english_tenant(offerings)),
            fake,
            metrics,
            embeddings,
            store,
            clock,
            _dir: dir,
        }
    }

    async fn filled(s: &Setup) -> Arc<Knowledge> {
        let knowledge = Arc::new(Knowledge::build(&s.config));
        s.embeddings
            .fill_now(s.config.clone(), Arc::downgrade(&knowledge))
            .await;
        knowledge
    }

    #[tokio::test]
    async fn knowledge_embeddings_each_text_is_asked_once_in_bounded_batches_and_kept() {
        let s = setup(150).await;
        let knowledge = filled(&s).await;
        let documents = knowledge.embedding_texts(&s.config).len();
        assert!(documents > 2 * BATCH_SIZE, "{documents}");
        assert_eq!(knowledge.vectors_ready(), documents);
        let calls = s.fake.calls();
        assert!(
            calls.iter().all(|c| c.len() <= BATCH_SIZE),
            "batches of at most {BATCH_SIZE}"
        );
        assert_eq!(calls.concat().len(), documents, "each text once");

        // The next snapshot of the same files: every vector comes from the store.
        let again = filled(&s).await;
        assert_eq!(again.vectors_ready(), documents);
        assert_eq!(s.fake.calls().len(), calls.len(), "nothing asked again");
    }

    #[tokio::test]
    async fn knowledge_embeddings_a_failed_batch_is_counted_and_ends_the_fill() {
        let s = setup(150).await;
        s.fake.down.store(true, Ordering::SeqCst);
        let knowledge = filled(&s).await;
        assert_eq!(knowledge.vectors_ready(), 0);
        let (query, catalog) = s.metrics.knowledge_embedding_failures();
        assert_eq!((query, catalog), (0, 1), "counted once, the fill stops");
        // The next load asks again, and succeeds.
        s.fake.down.store(false, Ordering::SeqCst);
        let knowledge = filled(&s).await;
        assert_eq!(
            knowledge.vectors_ready(),
            knowledge.embedding_texts(&s.config).len()
        );
    }

    #[tokio::test]
    async fn knowledge_embeddings_the_message_is_not_sent_before_the_snapshot_has_a_vector() {
        let s = setup(60).await;
        let bare = Knowledge::build(&s.config);
        assert_eq!(s.embeddings.query(&bare, "a rain jacket?").await, None);
        assert!(s.fake.calls().is_empty(), "nothing sent");
        let knowledge = filled(&s).await;
        let vector = s.embeddings.query(&knowledge, "a rain jacket?").await;
        assert_eq!(vector, Some(s.fake.vector("a rain jacket?")));
        assert_eq!(
            s.fake.calls().last().unwrap(),
            &vec!["a rain jacket?".to_owned()]
        );
        s.fake.down.store(true, Ordering::SeqCst);
        assert_eq!(s.embeddings.query(&knowledge, "a rain jacket?").await, None);
        assert_eq!(s.metrics.knowledge_embedding_failures(), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn knowledge_embeddings_a_loaded_snapshot_marks_its_vectors_used_daily_until_replaced() {
        let s = setup(60).await;
        let loaded_at = s.clock.now();
        let knowledge = Arc::new(Knowledge::build(&s.config));
        let hashes = s
            .embeddings
            .fill_now(s.config.clone(), Arc::downgrade(&knowledge))
            .await;
        let stored = hashes.len() as u64;
        assert!(stored > 0);
        let keeping = tokio::spawn({
            let embeddings = s.embeddings.clone();
            let knowledge = Arc::downgrade(&knowledge);
            async move { embeddings.keep_in_use(hashes, knowledge).await }
        });

        // A day and an hour loaded: marked once, a day after the load; then replaced.
        tokio::time::sleep(MARK_IN_USE_EVERY + LOADED_CHECK_EVERY).await;
        drop(knowledge);
        // No timer of the test's own here: while the task waits for the store's thread, the
        // paused clock would run to it.
        let replaced = tokio::time::Instant::now();
        keeping.await.expect("the task ends");
        assert!(
            replaced.elapsed() <= LOADED_CHECK_EVERY,
            "ended at its next look: {:?}",
            replaced.elapsed()
        );

        // Every marking it made has landed (the task awaited each): none before the day's.
        let day = chrono::Duration::from_std(MARK_IN_USE_EVERY).expect("a day");
        let minute = chrono::Duration::minutes(1);
        let unmarked = s.store.prune_embeddings(loaded_at + day - minute).await;
        assert_eq!(unmarked.expect("prune"), 0, "every vector marked a day on");
        let marked = s.store.prune_embeddings(loaded_at + day + minute).await;
        assert_eq!(marked.expect("prune"), stored, "and not since");
    }
}
