//! The knowledge's stored vectors (`KNOWLEDGE_EMBEDDINGS`): one per embedding model and content
//! hash, so an offering's or a passage's text is embedded once, whatever loads follow
//! (`EmbeddingStore`). Catalog text only: no row names a contact.
//!
//! Each row keeps when a loaded config last used it (`used_at`): set when it is saved, when a
//! config snapshot's load reads it, and daily while that snapshot stays loaded
//! (`crate::turn::embeddings`). The hourly housekeeping (`crate::retention`) deletes the rows
//! unused past a grace, so vectors of texts no longer loaded do not pile up.

use super::*;

/// Rows deleted per statement by [`EmbeddingStore::prune_embeddings`] (about 3 MB of 1,536-float
/// vectors): on SQLite each batch is one job on the database thread, between the turns' jobs.
pub const PRUNE_BATCH: i64 = 500;

/// The vectors of the semantic search.
#[async_trait]
pub trait EmbeddingStore: Send + Sync + 'static {
    /// The vectors stored for `model` under any of `hashes`, as `(hash, vector)`; a hash
    /// without one is left out. A read only: the caller marks the rows it uses with
    /// [`touch_embeddings`](Self::touch_embeddings).
    async fn embeddings(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>>;

    /// Stores `vectors` (`(hash, vector)`) for `model`, created and used at `at`; a hash
    /// already stored for the model keeps its first vector and its own `used_at`.
    async fn save_embeddings(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<()>;

    /// Marks `model`'s rows under `hashes` used at `at` (a row already marked later keeps its
    /// time; a hash not stored is skipped).
    ///
    /// A method of its own rather than a side effect of [`embeddings`](Self::embeddings), as
    /// the simpler of the two: the read stays a read on both backends (on SQLite, answered
    /// outside the write group), and the one marking serves both a load (right after its
    /// read) and a snapshot that stays loaded (daily), which needs no vector read back.
    async fn touch_embeddings(
        &self,
        model: &str,
        hashes: &[String],
        at: DateTime<Utc>,
    ) -> Result<()>;

    /// Deletes the rows of every model last used before `older_than`, [`PRUNE_BATCH`] at a
    /// time; how many went.
    async fn prune_embeddings(&self, older_than: DateTime<Utc>) -> Result<u64>;
}

/// A vector as stored: its floats, little-endian.
pub fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector read back (`Corrupt` if its length is not whole floats).
pub fn vector_from_bytes(bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt(
            "an embedding's length is not whole floats".into(),
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
