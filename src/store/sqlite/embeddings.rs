//! SQLite: the knowledge's stored vectors (`EmbeddingStore`).

use super::*;
use crate::store::embeddings::{vector_bytes, vector_from_bytes};

/// One vector by its key (the primary key serves it).
const EMBEDDING: &str = "SELECT vector FROM embeddings WHERE model = ? AND content_hash = ?";

/// A new vector; one already stored is kept.
const SAVE_EMBEDDING: &str = "INSERT INTO embeddings (model, content_hash, vector, created_at) \
    VALUES (?, ?, ?, ?) ON CONFLICT (model, content_hash) DO NOTHING";

#[async_trait]
impl EmbeddingStore for SqliteStore {
    async fn embeddings(&self, model: &str, hashes: &[String]) -> Result<Vec<(String, Vec<f32>)>> {
        let model = model.to_owned();
        let hashes = hashes.to_vec();
        self.read(move |conn| {
            let mut found = Vec::new();
            let mut statement = conn.prepare_cached(EMBEDDING)?;
            for hash in hashes {
                let bytes: Option<Vec<u8>> = statement
                    .query_row(params![model, hash], |row| row.get(0))
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })?;
                if let Some(bytes) = bytes {
                    found.push((hash, vector_from_bytes(&bytes)?));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn save_embeddings(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
        at: DateTime<Utc>,
    ) -> Result<()> {
        let model = model.to_owned();
        let rows: Vec<(String, Vec<u8>)> = vectors
            .iter()
            .map(|(hash, v)| (hash.clone(), vector_bytes(v)))
            .collect();
        self.write(move |conn| {
            let mut statement = conn.prepare_cached(SAVE_EMBEDDING)?;
            for (hash, bytes) in &rows {
                statement.execute(params![model, hash, bytes, ms(at)])?;
            }
            Ok(())
        })
        .await
    }
}
