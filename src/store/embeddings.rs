//! The knowledge's stored vectors (`KNOWLEDGE_EMBEDDINGS`): one per embedding model and content
//! hash, so an offering's or a passage's text is embedded once, whatever loads follow
//! (`EmbeddingStore`). Catalog text only: no row names a contact.

use super::*;

/// The vectors of the semantic search.
#[async_trait]
pub trait EmbeddingStore: Send + Sync + 'static {
    /// The vectors stored for `model` under any of `hashes`, as `(hash, vector)`; a hash
    /// without one is left out.
    async fn embeddings(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>>;

    /// Stores `vectors` (`(hash, vector)`) for `model` at `at`; a hash already stored for the
    /// model keeps its first vector.
    async fn save_embeddings(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<()>;
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
